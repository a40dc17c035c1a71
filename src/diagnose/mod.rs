//! Diagnostics: findings over one exchange (request, response, stream, raw text, render,
//! tokens). Pure: takes data, returns [`crate::Finding`]s.
//!
//! The unit is an [`ExchangeContext`]: everything known about one request/response pair,
//! however it was obtained (a session line, a HAR entry, a bare pair of files, a probe).
//! [`check_exchange`] runs every rule that has the data it needs and returns the findings in
//! pipeline order (tokens, server, stream, stop, tool_choice, tool calls, finish).
//! [`load`] builds contexts from sessions; [`report`] shapes `toolscope check` output;
//! [`probe`] holds the probe controls and their verdicts.

use serde_json::Value;

use crate::finding::{Evidence, Finding, Pane};
use crate::session::{Api, TokenPiece};
use crate::stream::AssistantMessage;

pub mod load;
pub mod markup;
pub mod probe;
pub mod report;
pub mod request;
pub mod rules;

/// Everything known about one exchange. Only `api` is required; each rule uses what is set.
#[derive(Debug, Clone)]
pub struct ExchangeContext {
    /// Exchange id within its session (1-based), `None` for a bare pair.
    pub id: Option<u64>,
    /// API the exchange speaks.
    pub api: Api,
    /// Request body (JSON).
    pub request: Option<Value>,
    /// HTTP status of the response, when there was one.
    pub status: Option<u16>,
    /// Non-streamed response body, when it is JSON.
    pub response_json: Option<Value>,
    /// Response body as text (error bodies, or a stream's concatenated chunks).
    pub response_text: Option<String>,
    /// The assistant message, reassembled from a stream or read from the JSON body.
    pub message: Option<AssistantMessage>,
    /// True when the response was a stream (evidence then names SSE events).
    pub streamed: bool,
    /// 0-based SSE event that carried `finish_reason` / `stop_reason`, for streams.
    pub finish_event: Option<usize>,
    /// Stream contract findings (`stream.*`, and `server.parse_error` for an error event) from
    /// reassembly, passed through.
    pub stream_findings: Vec<Finding>,
    /// For streams: per entry of `message.tool_calls`, the SSE events that contributed to it.
    pub call_events: Vec<Vec<usize>>,
    /// Raw generated text before the server's parser (llama-server `-v` `__verbose.content`).
    pub raw_text: Option<String>,
    /// llama-server `__verbose.stopping_word`, when known.
    pub stopping_word: Option<String>,
    /// The server's render of the request (`/apply-template`).
    pub server_prompt: Option<String>,
    /// The server's tokenization of the prompt (`/tokenize` with pieces).
    pub server_tokens: Option<Vec<TokenPiece>>,
    /// Chat template source text, when given (`--template`, `/props`).
    pub template: Option<String>,
    /// BOS token text (`/props` `bos_token`, tokenizer_config.json), when known.
    pub bos_token: Option<String>,
    /// BOS token id, when known (GGUF `tokenizer.ggml.bos_token_id`).
    pub bos_id: Option<u32>,
}

impl ExchangeContext {
    /// An empty context for `api`.
    pub fn new(api: Api) -> ExchangeContext {
        ExchangeContext {
            id: None,
            api,
            request: None,
            status: None,
            response_json: None,
            response_text: None,
            message: None,
            streamed: false,
            finish_event: None,
            stream_findings: Vec::new(),
            call_events: Vec::new(),
            raw_text: None,
            stopping_word: None,
            server_prompt: None,
            server_tokens: None,
            template: None,
            bos_token: None,
            bos_id: None,
        }
    }

    /// A context from a non-streamed request/response JSON pair (status 200 assumed). Reads the
    /// message with [`crate::stream::message::from_response_json`] and llama-server's
    /// `__verbose` extras.
    pub fn from_pair(api: Api, request: Option<Value>, response: Option<Value>) -> ExchangeContext {
        let mut cx = ExchangeContext::new(api);
        cx.request = request;
        if let Some(r) = response {
            cx.set_response_json(r);
        }
        cx
    }

    /// Sets a JSON response body: message, raw text, stopping word; error bodies stay as text.
    pub fn set_response_json(&mut self, body: Value) {
        self.message = crate::stream::message::from_response_json(self.api.as_str(), &body);
        if let Some(m) = &self.message {
            self.raw_text = m.raw_text.clone();
        }
        self.stopping_word = body
            .pointer("/__verbose/stopping_word")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned);
        if self.response_text.is_none() {
            self.response_text = Some(body.to_string());
        }
        self.response_json = Some(body);
    }

    /// The request body, or `null`.
    pub fn request_or_null(&self) -> &Value {
        static NULL: Value = Value::Null;
        self.request.as_ref().unwrap_or(&NULL)
    }

    /// Evidence pointing at the response's visible text.
    pub fn content_evidence(&self, offset: Option<usize>, excerpt: Option<String>) -> Evidence {
        let pointer = match (self.streamed, self.api) {
            (true, _) => None,
            (false, Api::Anthropic) => Some(
                self.block_pointer("text")
                    .unwrap_or_else(|| "/content".into()),
            ),
            (false, _) => Some("/choices/0/message/content".into()),
        };
        Evidence {
            pane: Some(Pane::Stream),
            pointer,
            offset,
            excerpt,
            ..Default::default()
        }
    }

    /// Evidence pointing at the response's reasoning text.
    pub fn reasoning_evidence(&self, offset: Option<usize>, excerpt: Option<String>) -> Evidence {
        let pointer = match (self.streamed, self.api) {
            (true, _) => None,
            (false, Api::Anthropic) => Some(
                self.block_pointer("thinking")
                    .map(|p| format!("{p}/thinking"))
                    .unwrap_or_else(|| "/content".into()),
            ),
            (false, _) => {
                let has_rc = self
                    .response_json
                    .as_ref()
                    .and_then(|b| b.pointer("/choices/0/message/reasoning_content"))
                    .is_some();
                Some(if has_rc {
                    "/choices/0/message/reasoning_content".into()
                } else {
                    "/choices/0/message/reasoning".into()
                })
            }
        };
        Evidence {
            pane: Some(Pane::Stream),
            pointer,
            offset,
            excerpt,
            ..Default::default()
        }
    }

    /// Evidence pointing at the finish / stop reason.
    pub fn finish_evidence(&self) -> Evidence {
        let pointer = match (self.streamed, self.api) {
            (true, _) => None,
            (false, Api::Anthropic) => Some("/stop_reason".into()),
            (false, _) => Some("/choices/0/finish_reason".into()),
        };
        Evidence {
            pane: Some(Pane::Stream),
            pointer,
            event: self.finish_event,
            ..Default::default()
        }
    }

    /// Evidence pointing at tool call `i` (position in `message.tool_calls`).
    pub fn call_evidence(&self, i: usize, arguments: bool) -> Evidence {
        let m = self.message.as_ref();
        let call = m.and_then(|m| m.tool_calls.get(i));
        let pointer = match (self.streamed, self.api) {
            (true, _) => None,
            (false, Api::Anthropic) => {
                let block = call.and_then(|c| c.index).unwrap_or(i as u64);
                Some(if arguments {
                    format!("/content/{block}/input")
                } else {
                    format!("/content/{block}/name")
                })
            }
            (false, _) => Some(if arguments {
                format!("/choices/0/message/tool_calls/{i}/function/arguments")
            } else {
                format!("/choices/0/message/tool_calls/{i}/function/name")
            }),
        };
        let event = self
            .call_events
            .get(i)
            .and_then(|e| if arguments { e.last() } else { e.first() })
            .copied();
        Evidence {
            pane: Some(Pane::Stream),
            pointer,
            event,
            tool: call.map(|c| c.name.clone()),
            ..Default::default()
        }
    }

    /// Pointer of the first Anthropic content block of type `ty`.
    fn block_pointer(&self, ty: &str) -> Option<String> {
        let blocks = self.response_json.as_ref()?.get("content")?.as_array()?;
        let i = blocks
            .iter()
            .position(|b| b.get("type").and_then(Value::as_str) == Some(ty))?;
        Some(format!("/content/{i}"))
    }

    /// Names of the tools the request offers.
    pub fn tool_names(&self) -> Vec<String> {
        request::tools(self.request_or_null())
            .into_iter()
            .map(|t| t.name)
            .collect()
    }

    /// True when the response is a failed HTTP status.
    pub fn failed(&self) -> bool {
        self.status.is_some_and(|s| s >= 400)
    }
}

/// Runs every rule on one exchange. Findings carry `exchange = cx.id`, in pipeline order:
/// tokens (`bos.duplicate`, `token.pseudo_special`), `server.parse_error`, passed-through `stream.*`, `stop.*`,
/// `tool_choice.*`, `tool_call.*`, `finish.mismatch`.
pub fn check_exchange(cx: &ExchangeContext) -> Vec<Finding> {
    let mut out = Vec::new();
    out.extend(rules::tokens::bos_duplicate(cx));
    // A marker the parser needs (token.special_split, error) is not reported again as merely
    // looking special (token.pseudo_special, warning).
    let split = rules::tokens::special_split(cx);
    let split_at: Vec<Option<usize>> = split.iter().map(|f| f.evidence.offset).collect();
    out.extend(split);
    out.extend(rules::tokens::pseudo_special(cx).into_iter().filter(|f| !split_at.contains(&f.evidence.offset)));
    out.extend(rules::server::parse_error(cx));
    out.extend(cx.stream_findings.iter().cloned());
    if cx.message.is_some() && !cx.failed() {
        out.extend(rules::stop::in_reasoning(cx));
        out.extend(rules::stop::reason_mismatch(cx));
        out.extend(rules::choice::named_ignored(cx));
        out.extend(rules::choice::none_ignored(cx));
        out.extend(rules::choice::required_ignored(cx));
        out.extend(rules::calls::leaked_as_text(cx));
        out.extend(rules::calls::args(cx));
        out.extend(rules::calls::unknown_tool(cx));
        out.extend(rules::calls::hallucinated_result(cx));
        out.extend(rules::finish::mismatch(cx));
    }
    for f in &mut out {
        if f.exchange.is_none() {
            f.exchange = cx.id;
        }
    }
    out
}
