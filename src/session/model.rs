//! The data model of a session file (see [`crate::session`] for the line layout).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One line of a session file. Read in one pass by `session/de.rs` (as are [`Annotation`],
/// [`Chunk`], [`Body`] and [`Piece`]); written by the derived `Serialize`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Line {
    /// First line of every session.
    Header(Header),
    /// One request/response pair.
    Exchange(Box<Exchange>),
    /// Later facts about an exchange.
    Annotation(Annotation),
}

/// The first line of a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Header {
    /// Always [`crate::session::FORMAT`].
    pub format: String,
    /// Creation time, RFC 3339 UTC.
    pub created: String,
    /// `toolscope <version>` that wrote the file.
    #[serde(default)]
    pub tool: String,
    /// Upstream base URL (`proxy --upstream`, `send --url`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream: Option<String>,
    /// The inference server detected at the upstream (JSON field `engine`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<Server>,
    /// llama-server `GET /props`, verbatim (chat_template, chat_template_caps, bos_token,
    /// eos_token, model_path, build_info, …). Absent for other engines.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "super::de::strict_value"
    )]
    pub props: Option<Value>,
    /// Where the session came from when not recorded live (e.g. `import:file.har`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// The inference server behind an upstream URL, as recorded (the header's and an
/// `engine` annotation's `engine` object).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Server {
    /// Which server: `llama-server`, `vllm`, `ollama`, `sglang`, or any other text
    /// (`unknown`), read and written as that string.
    pub kind: ServerKind,
    /// Engine build or version string (llama-server `build_info`, e.g. `b11434-…`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Model name or path the engine reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// The kind of a recorded server (`Server::kind`). Serialized as exactly the strings sessions
/// carry: `llama-server`, `vllm`, `sglang`, `ollama`; any other string (`unknown`, a kind a
/// later toolscope writes) is kept as it is ([`ServerKind::Other`]), so a session round-trips
/// byte for byte.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ServerKind {
    /// llama.cpp's `llama-server`.
    LlamaServer,
    /// vLLM.
    Vllm,
    /// SGLang.
    Sglang,
    /// Ollama.
    Ollama,
    /// Any other kind, as written (`unknown`; empty when a session has none).
    Other(String),
}

impl Default for ServerKind {
    /// The empty kind (`Other("")`), as an absent `kind` read before.
    fn default() -> Self {
        ServerKind::Other(String::new())
    }
}

impl ServerKind {
    /// Every known kind, in the order `regenerate --server` lists them.
    pub const KNOWN: [ServerKind; 4] = [
        ServerKind::LlamaServer,
        ServerKind::Vllm,
        ServerKind::Sglang,
        ServerKind::Ollama,
    ];

    /// The serialized string.
    pub fn as_str(&self) -> &str {
        match self {
            ServerKind::LlamaServer => "llama-server",
            ServerKind::Vllm => "vllm",
            ServerKind::Sglang => "sglang",
            ServerKind::Ollama => "ollama",
            ServerKind::Other(s) => s,
        }
    }

    /// The kind a string names (exactly the serialized strings; anything else is `Other`).
    pub fn parse(s: &str) -> ServerKind {
        match s {
            "llama-server" => ServerKind::LlamaServer,
            "vllm" => ServerKind::Vllm,
            "sglang" => ServerKind::Sglang,
            "ollama" => ServerKind::Ollama,
            other => ServerKind::Other(other.to_owned()),
        }
    }

    /// The kind toolscope writes when detection found none (`unknown`: an imported HAR, an
    /// upstream that answered no probe).
    pub fn unknown() -> ServerKind {
        ServerKind::Other("unknown".to_owned())
    }

    /// Whether this is the `unknown` kind ([`Self::unknown`]).
    pub fn is_unknown(&self) -> bool {
        matches!(self, ServerKind::Other(s) if s == "unknown")
    }

    /// Whether this is one of the known kinds (not [`ServerKind::Other`]).
    pub fn is_known(&self) -> bool {
        !matches!(self, ServerKind::Other(_))
    }
}

impl std::fmt::Display for ServerKind {
    /// The serialized string.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for ServerKind {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<ServerKind, Self::Err> {
        Ok(ServerKind::parse(s))
    }
}

impl From<&str> for ServerKind {
    fn from(s: &str) -> ServerKind {
        ServerKind::parse(s)
    }
}

impl Serialize for ServerKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ServerKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<ServerKind, D::Error> {
        let s = std::borrow::Cow::<'de, str>::deserialize(d)?;
        Ok(ServerKind::parse(&s))
    }
}

/// How an exchange ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The response was delivered whole.
    #[default]
    Complete,
    /// The client went away mid-response; the upstream request was cancelled. Partial.
    ClientDisconnected,
    /// The upstream connection failed or reset (before or during the response). Partial.
    UpstreamError,
    /// toolscope itself stopped (SIGINT/SIGTERM) while the exchange ran, after the grace
    /// period: what had arrived is recorded. Partial.
    Shutdown,
}

impl Outcome {
    /// The serialized name (`complete`, `client_disconnected`, `upstream_error`, `shutdown`).
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Complete => "complete",
            Outcome::ClientDisconnected => "client_disconnected",
            Outcome::UpstreamError => "upstream_error",
            Outcome::Shutdown => "shutdown",
        }
    }
}

impl std::fmt::Display for Outcome {
    /// As serialized: `client_disconnected`, never the Rust variant name.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One HTTP request/response pair.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Exchange {
    /// 1-based id, unique within the session, in order of request start.
    pub id: u64,
    /// Request start, RFC 3339 UTC with microseconds.
    pub started: String,
    /// Why this exchange exists when toolscope made it itself: `send`, `probe:<control>`,
    /// `regenerate:<id>`. Absent for proxied traffic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    pub request: Request,
    /// Absent when the upstream failed before sending a status line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<Response>,
    #[serde(default)]
    pub timings: Timings,
    #[serde(default)]
    pub outcome: Outcome,
    /// Error text for partial exchanges (upstream error, disconnect reason).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Set when the exchange travelled over a WebSocket (the Responses API's WebSocket mode):
    /// `request.body` is the client's `response.create` message, `response` the upgrade's
    /// `101` head with one chunk per server message, and this the connection and every frame.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub websocket: Option<WebSocket>,
}

/// One exchange's share of a WebSocket connection (RFC 6455), as the proxy saw it: the
/// connection it belongs to and every frame between its `response.create` and its terminal
/// event, in order, both directions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct WebSocket {
    /// The connection, numbered by the id of its first exchange (exchanges sharing it carry
    /// the same number).
    pub connection: u64,
    /// The `sec-websocket-extensions` the server accepted (e.g. `permessage-deflate`), when
    /// any: compressed messages are recorded decompressed (RFC 7692).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extensions: Option<String>,
    pub frames: Vec<WsFrame>,
}

/// One WebSocket frame (RFC 6455 §5.2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct WsFrame {
    /// Microseconds from the exchange's start (its `response.create` frame) to the frame.
    pub t_us: u64,
    /// `client` (client → server) or `server`.
    pub from: String,
    /// `text`, `binary`, `continuation`, `close`, `ping`, `pong`, or `0xN`.
    pub opcode: String,
    /// FIN: the last frame of its message.
    pub fin: bool,
    /// RSV1 set on a message's first frame: compressed with `permessage-deflate` (RFC 7692).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub compressed: bool,
    /// Payload bytes on the wire.
    pub len: u64,
    /// The payload (unmasked, decompressed) of frames whose bytes are nowhere else in the
    /// exchange: control frames and client messages other than its `response.create`. The
    /// `response.create` is `request.body`; server messages are `response.chunks`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Body>,
}

/// The request as the client sent it (secrets redacted unless `--keep-secrets`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Request {
    /// `POST`, `GET`, …
    pub method: String,
    /// Path and query, e.g. `/v1/chat/completions`.
    pub path: String,
    /// Header name/value pairs in wire order; names lower-cased.
    #[serde(default)]
    pub headers: Vec<(String, String)>,
    #[serde(default)]
    pub body: Body,
}

/// The response as the client received it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Response {
    pub status: u16,
    /// Header name/value pairs in wire order; names lower-cased.
    #[serde(default)]
    pub headers: Vec<(String, String)>,
    /// Whole body, for responses that are not `text/event-stream`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<Body>,
    /// For `text/event-stream`: every chunk exactly as read from the upstream and written to
    /// the client, with its receive offset. Concatenated they are the body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunks: Option<Vec<Chunk>>,
}

/// One read of a streamed body.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct Chunk {
    /// Microseconds from the request start to when this chunk was received.
    pub t_us: u64,
    #[serde(flatten)]
    pub data: Body,
}

/// Bytes stored as text when they are valid UTF-8, else base64 (standard alphabet, padded).
/// Serialized as `{"text": "…"}` or `{"base64": "…"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Body {
    Text { text: String },
    Base64 { base64: String },
}

impl Default for Body {
    fn default() -> Self {
        Body::Text {
            text: String::new(),
        }
    }
}

impl Body {
    /// Wraps raw bytes: text when valid UTF-8, else base64.
    pub fn from_bytes(bytes: &[u8]) -> Body {
        match std::str::from_utf8(bytes) {
            Ok(s) => Body::Text { text: s.to_owned() },
            Err(_) => {
                use base64::Engine as _;
                Body::Base64 {
                    base64: base64::engine::general_purpose::STANDARD.encode(bytes),
                }
            }
        }
    }

    /// The raw bytes. Invalid base64 yields an empty vector.
    pub fn to_bytes(&self) -> Vec<u8> {
        match self {
            Body::Text { text } => text.as_bytes().to_vec(),
            Body::Base64 { base64 } => {
                use base64::Engine as _;
                base64::engine::general_purpose::STANDARD
                    .decode(base64)
                    .unwrap_or_default()
            }
        }
    }

    /// Appends the raw bytes to `out` (as [`Body::to_bytes`], without a copy for text).
    pub fn append_to(&self, out: &mut Vec<u8>) {
        match self {
            Body::Text { text } => out.extend_from_slice(text.as_bytes()),
            Body::Base64 { .. } => out.extend_from_slice(&self.to_bytes()),
        }
    }
    /// The bytes: borrowed for a text body, decoded for base64 (invalid base64 reads as
    /// [`Body::to_bytes`] does).
    pub fn bytes(&self) -> std::borrow::Cow<'_, [u8]> {
        match self {
            Body::Text { text } => std::borrow::Cow::Borrowed(text.as_bytes()),
            Body::Base64 { .. } => std::borrow::Cow::Owned(self.to_bytes()),
        }
    }

    /// Text view (lossy for non-UTF-8 bytes).
    pub fn to_text(&self) -> std::borrow::Cow<'_, str> {
        match self {
            Body::Text { text } => std::borrow::Cow::Borrowed(text),
            Body::Base64 { .. } => {
                std::borrow::Cow::Owned(String::from_utf8_lossy(&self.to_bytes()).into_owned())
            }
        }
    }

    /// Parses the body as JSON.
    pub fn json(&self) -> Result<Value, serde_json::Error> {
        serde_json::from_str(&self.to_text())
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        match self {
            Body::Text { text } => text.len(),
            Body::Base64 { .. } => self.to_bytes().len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Timings in microseconds from the request start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Timings {
    /// Time to the response status line (first byte of the response head).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttfb_us: Option<u64>,
    /// Time to the last body byte (or to the failure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_us: Option<u64>,
}

/// A fact fetched after exchange `exchange`, tagged by `kind`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Annotation {
    /// llama-server's own render of the exchange's request (`POST /apply-template`, same
    /// body) and its tokenization (`POST /tokenize {"content": prompt, "with_pieces": true,
    /// "parse_special": true}`), fetched after the exchange ended.
    ServerRender {
        exchange: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        prompt: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tokens: Option<Vec<TokenPiece>>,
        /// Why the render or tokenization could not be fetched.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    // --- raw output capture (issue #12) ---
    /// The model's raw generated text for the exchange, read from the engine after it ended
    /// (see [`crate::stream::raw`]): llama-server `GET /slots` `generated` of the slot whose
    /// `prompt` is this exchange's rendered prompt (server started with
    /// `LLAMA_SERVER_SLOTS_DEBUG=1`; tools/server/server-context.cpp, build 11434), or a
    /// regeneration of the rendered prompt through the engine's raw completion endpoint.
    /// `text` is the generated text only (an assistant prefill is not repeated).
    RawText {
        exchange: u64,
        source: RawTextSource,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
        /// llama-server slot id (`id` in `/slots`), for `slots_debug`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        slot: Option<u64>,
        /// What llama-server's parser reads before `text` (`/slots` `params.generation_prompt`,
        /// e.g. `<|im_start|>assistant\n<think>\n`), when reported.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        generation_prompt: Option<String>,
        /// For `regenerated`: id of the exchange that re-ran the prompt (label
        /// `regenerate:<exchange>`), when it was recorded.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<u64>,
        /// For `regenerated`: true when toolscope's parse of the text under the server's format
        /// reproduced the server's answer (same content, same calls).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        verified: Option<bool>,
        /// For `regenerated` and not verified: byte offset in `text` where it first disagrees
        /// with the server's answer.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        diverged_at: Option<usize>,
        /// For `regenerated`: where the re-run prompt came from, e.g. `llama-server
        /// /apply-template`, `vLLM /tokenize (messages)`, `Ollama /api/show template`, or
        /// `local render of <template source>` when the engine cannot render a chat request.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        prompt_from: Option<String>,
        /// Why there is no text (no slot's `prompt` matched: the slot was reused; `/slots`
        /// disabled; the regeneration failed).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// The engine, learnt after the header was written (the upstream was not ready when the
    /// recorder started). Readers use it in place of the header's `engine` / `props` when
    /// those are missing or `unknown` ([`crate::session::read::read_session_bytes`]).
    /// `exchange` is the exchange after which it was learnt.
    Engine {
        exchange: u64,
        engine: Server,
        /// llama-server `GET /props`, verbatim.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        props: Option<Value>,
    },
    // --- Ollama template source (issue #14) ---
    /// Ollama's `POST /api/show {"model"}` for the exchange's model, fetched once per model
    /// by the recorder after the first `/api/chat` or `/api/generate` exchange that names it,
    /// and written for every such exchange (so each one carries its template source). `show`
    /// keeps `template` (a Go template), `system`, `messages`, `capabilities`, `details`,
    /// `parameters`, `modified_at`; the license, Modelfile and tensor lists are dropped.
    OllamaShow {
        exchange: u64,
        model: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        show: Option<Value>,
        /// Why `/api/show` could not be fetched.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
}

/// Where an [`Annotation::RawText`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RawTextSource {
    /// llama-server `GET /slots` with `LLAMA_SERVER_SLOTS_DEBUG=1`.
    SlotsDebug,
    /// The rendered prompt re-run through a raw completion endpoint (llama-server
    /// `/completion`, OpenAI-style `/v1/completions`, Ollama `/api/generate` with `raw`).
    Regenerated,
}

impl Annotation {
    /// Id of the exchange this annotation refers to.
    pub fn exchange(&self) -> u64 {
        match self {
            Annotation::ServerRender { exchange, .. }
            | Annotation::RawText { exchange, .. }
            | Annotation::Engine { exchange, .. }
            | Annotation::OllamaShow { exchange, .. } => *exchange,
        }
    }

    /// A [`Annotation::RawText`] without text: why there is none (`error`), from `source`, and
    /// where a regeneration's prompt came from when it got that far (`prompt_from`).
    pub fn raw_text_missing(
        exchange: u64,
        source: RawTextSource,
        prompt_from: Option<String>,
        error: String,
    ) -> Annotation {
        Annotation::RawText {
            exchange,
            source,
            text: None,
            slot: None,
            generation_prompt: None,
            by: None,
            verified: None,
            diverged_at: None,
            prompt_from,
            error: Some(error),
        }
    }

    /// The newest Ollama `/api/show` among one exchange's `annotations`: `(model, show)`.
    pub fn latest_ollama_show(annotations: &[Annotation]) -> Option<(&str, &Value)> {
        annotations.iter().rev().find_map(|a| match a {
            Annotation::OllamaShow {
                model,
                show: Some(show),
                ..
            } => Some((model.as_str(), show)),
            _ => None,
        })
    }

    /// The newest server render among one exchange's `annotations`: `(prompt, tokens)`.
    pub fn latest_server_render(
        annotations: &[Annotation],
    ) -> Option<(Option<&str>, Option<&[TokenPiece]>)> {
        annotations.iter().rev().find_map(|a| match a {
            Annotation::ServerRender { prompt, tokens, .. } => {
                Some((prompt.as_deref(), tokens.as_deref()))
            }
            _ => None,
        })
    }
}

/// One token of a llama-server `/tokenize` answer with `with_pieces: true`.
/// llama.cpp (tools/server/server-context.cpp, build 11434) writes `piece` as a string when it
/// is valid UTF-8, else as an array of byte values.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenPiece {
    pub id: u32,
    pub piece: Piece,
}

/// A token's text: a string, or raw bytes when not valid UTF-8 on its own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Piece {
    Text(String),
    Bytes(Vec<u8>),
}

impl Piece {
    /// The piece's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Piece::Text(s) => s.as_bytes(),
            Piece::Bytes(b) => b,
        }
    }
}

/// Which API an exchange speaks, from its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Api {
    /// `/v1/chat/completions` (OpenAI chat).
    Openai,
    /// `/v1/messages` (Anthropic messages).
    Anthropic,
    /// `/completion`, `/v1/completions`, Ollama `/api/generate` (raw text completion).
    Completion,
    /// Ollama's native chat API, `/api/chat`: NDJSON stream (one JSON object per line) or one
    /// JSON object; `message.tool_calls[].function.arguments` is a JSON object and `done_reason`
    /// is `stop` even when the reply is tool calls (ollama docs/api.md, api/types.go).
    Ollama,
    /// The OpenAI Responses API, `POST /v1/responses` (also `/responses`): `input` items and
    /// `instructions` in, `output` items out; streamed as typed SSE events
    /// (`response.output_text.delta`, `response.completed`, …). llama-server serves it on both
    /// paths (tools/server/server.cpp:276–277, build 11434) by converting the body to a chat
    /// request (`server_chat_convert_responses_to_chatcmpl`, tools/server/server-chat.cpp).
    /// `/v1/responses/input_tokens` (server.cpp:296–297) counts tokens and is [`Api::Other`].
    Responses,
    /// Anything else (`/v1/models`, `/props`, …).
    Other,
}

impl Api {
    /// Classifies a request path (query ignored).
    pub fn from_path(path: &str) -> Api {
        let p = path.split('?').next().unwrap_or(path).trim_end_matches('/');
        if p.ends_with("/api/chat") {
            Api::Ollama
        } else if p.ends_with("/chat/completions") || p == "/chat/completions" {
            Api::Openai
        } else if p.ends_with("/messages") {
            Api::Anthropic
        } else if p.ends_with("/responses") {
            Api::Responses
        } else if p.ends_with("/completion")
            || p.ends_with("/completions")
            || p.ends_with("/api/generate")
        {
            Api::Completion
        } else {
            Api::Other
        }
    }

    /// True for the APIs whose exchanges ask a model to generate (chat, messages, responses,
    /// completion, Ollama native): the ones decoded, analysed and checked. `Other` (`/v1/models`,
    /// `/props`, …) is not.
    pub fn is_generation(self) -> bool {
        !matches!(self, Api::Other)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Api::Openai => "openai",
            Api::Anthropic => "anthropic",
            Api::Completion => "completion",
            Api::Ollama => "ollama",
            Api::Responses => "responses",
            Api::Other => "other",
        }
    }
}

/// True for Ollama's native endpoints (`/api/chat`, `/api/generate`), whose streams are NDJSON
/// (`application/x-ndjson`, one JSON object per line) rather than SSE.
pub fn is_ollama_native(path: &str) -> bool {
    let p = path.split('?').next().unwrap_or(path).trim_end_matches('/');
    p.ends_with("/api/chat") || p.ends_with("/api/generate")
}

impl Exchange {
    /// The API this exchange speaks, from its request path.
    pub fn api(&self) -> Api {
        Api::from_path(&self.request.path)
    }

    /// The request body parsed as JSON, if it is JSON — after undoing its `content-encoding`
    /// (gzip, deflate, zstd, br; at most [`crate::session::encoding::DECODED_CAP`] decoded
    /// bytes): the JSON the client meant, while `request.body` keeps the bytes it sent.
    pub fn request_json(&self) -> Option<Value> {
        if !self.request_is_encoded() {
            return self.request.body.json().ok();
        }
        let bytes = self.request_body_decoded().ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Whether the request names a `content-encoding` other than `identity`.
    pub fn request_is_encoded(&self) -> bool {
        !crate::session::encoding::request_codings(&self.request.headers).is_empty()
    }

    /// The request body with its `content-encoding` undone
    /// ([`crate::session::encoding::decode_request_body`], at most
    /// [`crate::session::encoding::DECODED_CAP`] bytes); the recorded bytes when it has none.
    ///
    /// Errors: an unknown coding, a corrupt stream, or a body decoding past the cap.
    pub fn request_body_decoded(
        &self,
    ) -> Result<Vec<u8>, crate::session::encoding::BodyDecodeError> {
        let raw = self.request.body.to_bytes();
        if !self.request_is_encoded() {
            return Ok(raw);
        }
        crate::session::encoding::decode_request_body(
            &self.request.headers,
            &raw,
            crate::session::encoding::DECODED_CAP,
        )
        .map(std::borrow::Cow::into_owned)
    }

    /// Model named in the request body, else in the response body. A compressed request
    /// body is read up to 1 MiB decoded here (the proxy's one-line summaries call this for
    /// every exchange: a decompression bomb must not cost them the analysis's 32 MiB).
    pub fn model(&self) -> Option<String> {
        let from = |v: Option<Value>| {
            v.and_then(|v| v.get("model").and_then(|m| m.as_str()).map(str::to_owned))
        };
        let request = if self.request_is_encoded() {
            let raw = self.request.body.to_bytes();
            crate::session::encoding::decode_request_body(&self.request.headers, &raw, 1 << 20)
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok())
        } else {
            self.request_json()
        };
        from(request).or_else(|| {
            from(
                self.response
                    .as_ref()
                    .and_then(|r| r.body.as_ref())
                    .and_then(|b| b.json().ok()),
            )
        })
    }

    /// True when the response was recorded as a stream of chunks.
    pub fn is_stream(&self) -> bool {
        self.response.as_ref().is_some_and(|r| r.chunks.is_some())
    }

    /// The whole response body bytes (chunks concatenated for streams).
    pub fn response_bytes(&self) -> Vec<u8> {
        match &self.response {
            None => Vec::new(),
            Some(r) => match (&r.chunks, &r.body) {
                (Some(chunks), _) => {
                    let mut out = Vec::with_capacity(chunks.iter().map(|c| c.data.len()).sum());
                    for c in chunks {
                        c.data.append_to(&mut out);
                    }
                    out
                }
                (None, Some(b)) => b.to_bytes(),
                (None, None) => Vec::new(),
            },
        }
    }

    /// Response header value (first match, name case-insensitive).
    pub fn response_header(&self, name: &str) -> Option<&str> {
        self.response
            .as_ref()?
            .headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Whether the exchange is partial (not [`Outcome::Complete`]).
    pub fn is_partial(&self) -> bool {
        self.outcome != Outcome::Complete
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind a session carries reads as its variant and writes back as the same bytes;
    /// an unknown kind is kept as written.
    #[test]
    fn server_kind_round_trips_every_string() {
        for (text, kind) in [
            ("llama-server", ServerKind::LlamaServer),
            ("vllm", ServerKind::Vllm),
            ("sglang", ServerKind::Sglang),
            ("ollama", ServerKind::Ollama),
            ("unknown", ServerKind::unknown()),
            ("tgi", ServerKind::Other("tgi".into())),
            ("", ServerKind::Other(String::new())),
            ("Llama-Server", ServerKind::Other("Llama-Server".into())),
        ] {
            let json = format!(r#"{{"kind":{}}}"#, serde_json::to_string(text).unwrap());
            let s: Server = serde_json::from_str(&json).unwrap();
            assert_eq!(s.kind, kind, "{text}");
            assert_eq!(s.kind.as_str(), text);
            assert_eq!(serde_json::to_string(&s).unwrap(), json, "{text}");
        }
        let full = r#"{"kind":"ollama","version":"0.13.5","model":"qwen3"}"#;
        let s: Server = serde_json::from_str(full).unwrap();
        assert_eq!(serde_json::to_string(&s).unwrap(), full);
        assert!(ServerKind::KNOWN.iter().all(ServerKind::is_known));
        assert!(!ServerKind::unknown().is_known() && ServerKind::unknown().is_unknown());
    }
}
