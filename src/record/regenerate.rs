//! Raw regeneration: re-run an exchange's rendered prompt as a raw text completion, so the text
//! the model writes for it can be seen, replayed and — when it reproduces the server's answer —
//! taken as the model's output.
//!
//! Two uses. (1) llama-server (build 11434) answers a chat request whose generated text its
//! tool-call parser cannot read with HTTP 500 `"The model produced output that does not match
//! the expected <name> format"` (tools/server/server-context.cpp; the parser is common/chat.cpp's
//! PEG parser) and the text is lost. (2) Without `LLAMA_SERVER_SLOTS_DEBUG=1` or `-v` no raw text
//! is recorded at all (issue #12). [`regenerate`] asks the same server for the prompt it
//! rendered (`POST /apply-template` with the same chat body; Anthropic bodies are first
//! converted as the server does, [`crate::record::anthropic`]) and sends that prompt to
//! `POST /completion` with the same sampling settings ([`completion_body`]). The answer is
//! recorded as a new exchange labelled `regenerate:<id>`, plus an `Annotation::RawText` for the
//! original exchange with the verdict of [`crate::stream::raw::verify_regenerated`]: verified
//! when toolscope's parse of it under the server's chat template gives the server's answer,
//! else diverged at byte N. `proxy --regenerate` does the same after each exchange whose raw
//! text was not captured ([`regenerate_recorded`]).
//!
//! Every engine ([`regenerate_with`], [`RegenOptions`]): the prompt is the engine's own render
//! where it has one — llama-server `POST /apply-template`; vLLM `POST /tokenize` with the chat
//! body's `messages`/`tools`/`add_generation_prompt` (vllm/entrypoints/serve/tokenize/protocol.py
//! `TokenizeChatRequest`: the server's chat template applied, token ids back, which
//! `/v1/completions` takes as `prompt`); Ollama `POST /api/show` `template` rendered as Ollama
//! renders it ([`ollama_prompt`]) — else toolscope's local render of a template source the user
//! names (SGLang: its `/v1/tokenize` takes text only,
//! python/sglang/srt/entrypoints/openai/serving_tokenize.py). The raw completion endpoint is
//! [`Endpoint`]: llama-server `/completion`, OpenAI-style `/v1/completions` (vLLM, SGLang, and
//! llama-server too), Ollama `/api/generate` with `raw: true`. The annotation's `prompt_from`
//! says which prompt was used.
//!
//! With greedy sampling (`temperature: 0`, or a fixed `seed`) the regenerated text is usually
//! the text the chat request produced — not always: a regeneration batched with another request
//! on the server, or a grammar the chat request was sampled under, can change it; the verdict
//! says which. Otherwise it is another sample from the same distribution.

use crate::session::ServerKind;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Map, Value, json};

use crate::parser::Syntax;
use crate::record::client::ServerClient;
use crate::session::{
    Annotation, Api, Body, Exchange, Line, RawTextSource, Request, Response, SessionWriter, Timings,
};
use crate::stream::raw::{Verdict, verify_regenerated};

/// True when `ex` is a chat exchange (OpenAI or Anthropic) that llama-server answered with its
/// tool-call parse error: HTTP 500 (or an SSE `error` event) whose message is a parse failure
/// ([`crate::stream::reassemble::is_parse_error_message`], the condition of rule
/// `server.parse_error`).
pub fn is_parse_error(ex: &Exchange) -> bool {
    if !matches!(ex.api(), Api::Openai | Api::Anthropic) {
        return false;
    }
    let Some(resp) = &ex.response else {
        return false;
    };
    let text = String::from_utf8_lossy(&ex.response_bytes()).into_owned();
    let msg = crate::stream::reassemble::is_parse_error_message(&text);
    msg && (resp.status >= 500 || resp.chunks.is_some())
}

/// The `/completion` body for `prompt` with the sampling settings of the chat body `chat`
/// ([`sampling_settings`]: OpenAI, Anthropic, llama-server or Ollama `options` names):
/// `temperature`, `top_p`, `top_k`, `min_p`, `seed`, `presence_penalty`, `frequency_penalty`,
/// `repeat_penalty`; the token limit as `n_predict`; `stop` (a single string becomes a
/// one-element array). Always `stream: false`, `cache_prompt: false`. Fields follow llama.cpp
/// tools/server/README.md "POST /completion".
pub fn completion_body(chat: &Value, prompt: &str) -> Value {
    let mut b = Map::new();
    b.insert("prompt".into(), json!(prompt));
    for (k, v) in sampling_settings(chat) {
        let k = if k == "max_tokens" {
            "n_predict".into()
        } else {
            k
        };
        b.insert(k, v);
    }
    b.insert("stream".into(), json!(false));
    b.insert("cache_prompt".into(), json!(false));
    Value::Object(b)
}

pub use crate::stream::raw::assistant_prefill;

/// The raw completion endpoint a regeneration goes through (`toolscope regenerate
/// --endpoint`). Default per engine: [`Endpoint::for_server`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Endpoint {
    /// llama-server `POST /completion` (tools/server/README.md, build 11434): `prompt` string,
    /// the answer's `content`.
    Completion,
    /// OpenAI-style `POST /v1/completions` (vLLM, SGLang, llama-server): `prompt` a string or
    /// token ids, the answer's `choices[0].text`.
    V1Completions,
    /// Ollama `POST /api/generate` with `raw: true`, `stream: false` (ollama docs/api.md
    /// "Request (Raw Mode)"): the answer's `response`.
    OllamaGenerate,
}

impl Endpoint {
    /// The endpoint for a server kind: Ollama → [`Endpoint::OllamaGenerate`], vLLM / SGLang →
    /// [`Endpoint::V1Completions`], anything else (llama-server) → [`Endpoint::Completion`].
    pub fn for_server(kind: &ServerKind) -> Endpoint {
        match kind {
            ServerKind::Ollama => Endpoint::OllamaGenerate,
            ServerKind::Vllm | ServerKind::Sglang => Endpoint::V1Completions,
            _ => Endpoint::Completion,
        }
    }

    /// The request path: `/completion`, `/v1/completions` or `/api/generate`.
    pub fn path(self) -> &'static str {
        match self {
            Endpoint::Completion => "/completion",
            Endpoint::V1Completions => "/v1/completions",
            Endpoint::OllamaGenerate => "/api/generate",
        }
    }
}

/// The sampling settings of a chat body under one set of names: `temperature`, `top_p`,
/// `top_k`, `min_p`, `seed`, `presence_penalty`, `frequency_penalty`, `repeat_penalty`
/// (also read from `repetition_penalty`), `max_tokens` (from `max_completion_tokens`,
/// `max_tokens`, `n_predict`, Ollama `num_predict`) and `stop` (from `stop` /
/// `stop_sequences`, always an array). Read from the top level (OpenAI, Anthropic, llama-server
/// extensions) and from Ollama's `options` object; null values are skipped.
pub fn sampling_settings(chat: &Value) -> Map<String, Value> {
    let options = chat.get("options");
    let get = |k: &str| {
        chat.get(k)
            .or_else(|| options.and_then(|o| o.get(k)))
            .filter(|v| !v.is_null())
    };
    let mut m = Map::new();
    for k in [
        "temperature",
        "top_p",
        "top_k",
        "min_p",
        "seed",
        "presence_penalty",
        "frequency_penalty",
    ] {
        if let Some(v) = get(k) {
            m.insert(k.into(), v.clone());
        }
    }
    if let Some(v) = get("repeat_penalty").or_else(|| get("repetition_penalty")) {
        m.insert("repeat_penalty".into(), v.clone());
    }
    if let Some(n) = [
        "max_completion_tokens",
        "max_tokens",
        "n_predict",
        "num_predict",
    ]
    .iter()
    .find_map(|k| get(k).filter(|v| v.is_number()))
    {
        m.insert("max_tokens".into(), n.clone());
    }
    match get("stop").or_else(|| get("stop_sequences")) {
        Some(Value::String(s)) => {
            m.insert("stop".into(), json!([s]));
        }
        Some(Value::Array(a)) if !a.is_empty() => {
            m.insert("stop".into(), Value::Array(a.clone()));
        }
        _ => {}
    }
    m
}

/// A prompt to regenerate from: its text, and the token ids when the engine rendered it as
/// ids (vLLM `/tokenize`), which `/v1/completions` then gets as `prompt` (no re-tokenization).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Prompt {
    /// The rendered prompt text (vLLM: `/detokenize` of the ids; empty when that failed).
    pub text: String,
    /// Token ids, when the engine's render returned ids.
    pub token_ids: Option<Vec<u64>>,
    /// Where it came from (recorded as the annotation's `prompt_from`), e.g.
    /// `llama-server /apply-template`.
    pub from: String,
}

/// The request body for `endpoint` on engine `engine` (session engine kind) with the sampling
/// settings of the chat body `chat` ([`sampling_settings`]), always non-streamed:
/// - `/completion` ([`Endpoint::Completion`]): [`completion_body`].
/// - `/v1/completions` ([`Endpoint::V1Completions`]): `model` (the chat's), `prompt` (token ids when `prompt` has
///   them, else the text), the OpenAI/vLLM sampling names (`max_tokens`; vLLM's
///   `repetition_penalty`, llama-server's `repeat_penalty`), `stop`, `stream: false`; on vLLM
///   and SGLang `skip_special_tokens: false` (the raw text keeps special-token markers;
///   vllm/entrypoints/openai/completion/protocol.py), on llama-server `cache_prompt: false`;
///   on vLLM with a text prompt `add_special_tokens: false` (the render already holds BOS).
/// - `/api/generate` ([`Endpoint::OllamaGenerate`]): `model`, `prompt`, `raw: true`, `stream: false`, the chat's
///   `format` (a grammar it was sampled under), `options` = the chat's `options` with the
///   settings under Ollama's names (`num_predict`, `repeat_penalty`, …; ollama api/types.go
///   `Options`).
pub fn request_body(
    endpoint: Endpoint,
    engine: &ServerKind,
    chat: &Value,
    prompt: &Prompt,
) -> Value {
    let s = sampling_settings(chat);
    let model = chat.get("model").filter(|v| v.is_string());
    match endpoint {
        Endpoint::Completion => completion_body(chat, &prompt.text),
        Endpoint::V1Completions => {
            let mut b = Map::new();
            if let Some(m) = model {
                b.insert("model".into(), m.clone());
            }
            let p = match &prompt.token_ids {
                Some(ids) => json!(ids),
                None => json!(prompt.text),
            };
            b.insert("prompt".into(), p);
            let llama = *engine == ServerKind::LlamaServer;
            for (k, v) in &s {
                let k = match k.as_str() {
                    "repeat_penalty" if !llama => "repetition_penalty",
                    k => k,
                };
                b.insert(k.into(), v.clone());
            }
            b.insert("stream".into(), json!(false));
            if llama {
                b.insert("cache_prompt".into(), json!(false));
            } else {
                b.insert("skip_special_tokens".into(), json!(false));
            }
            if *engine == ServerKind::Vllm && prompt.token_ids.is_none() {
                // A rendered chat prompt already holds the template's BOS; vLLM's chat path
                // tokenizes it without adding special tokens, its completions path adds them
                // unless told not to.
                b.insert("add_special_tokens".into(), json!(false));
            }
            Value::Object(b)
        }
        Endpoint::OllamaGenerate => {
            let mut options = chat
                .get("options")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            for (k, v) in &s {
                let k = if k == "max_tokens" { "num_predict" } else { k };
                options.entry(k).or_insert_with(|| v.clone());
            }
            let mut b = Map::new();
            if let Some(m) = model {
                b.insert("model".into(), m.clone());
            }
            b.insert("prompt".into(), json!(prompt.text));
            b.insert("raw".into(), json!(true));
            b.insert("stream".into(), json!(false));
            if let Some(f) = chat.get("format").filter(|v| !v.is_null()) {
                b.insert("format".into(), f.clone());
            }
            if !options.is_empty() {
                b.insert("options".into(), Value::Object(options));
            }
            Value::Object(b)
        }
    }
}

/// The generated text of a non-streamed answer from `endpoint`: `/completion` `content`,
/// `/v1/completions` `choices[0].text`, `/api/generate` `response`. `None` when absent.
pub fn generated_text(endpoint: Endpoint, answer: &Value) -> Option<String> {
    let v = match endpoint {
        Endpoint::Completion => answer.get("content"),
        Endpoint::V1Completions => answer.pointer("/choices/0/text"),
        Endpoint::OllamaGenerate => answer.get("response"),
    };
    v.and_then(Value::as_str).map(str::to_owned)
}

/// The vLLM `POST /tokenize` body that renders chat body `chat` as its `/v1/chat/completions`
/// would: `model`, `messages`, `tools`, `add_generation_prompt` (default true),
/// `continue_final_message`, `add_special_tokens` (default false), `chat_template`,
/// `chat_template_kwargs`, each copied when the chat body has it (vLLM
/// vllm/entrypoints/serve/tokenize/protocol.py `TokenizeChatRequest`; the server answers
/// `{"count", "max_model_len", "tokens": [ids]}`, tests/entrypoints/openai/test_tokenization.py
/// `test_tokenize_chat_with_tools`).
pub fn vllm_tokenize_body(chat: &Value) -> Value {
    let mut b = Map::new();
    for k in [
        "model",
        "messages",
        "tools",
        "add_generation_prompt",
        "continue_final_message",
        "add_special_tokens",
        "chat_template",
        "chat_template_kwargs",
    ] {
        if let Some(v) = chat.get(k).filter(|v| !v.is_null()) {
            b.insert(k.into(), v.clone());
        }
    }
    Value::Object(b)
}

/// Renders Ollama chat body `chat` as Ollama's `/api/chat` builds its prompt, from the model's
/// `POST /api/show` answer `show` (its `template`, `system`, `messages`, thinking capability)
/// with `today` as the template's `currentDate` (the exchange's date), through the one render
/// entry point ([`crate::template::TemplateSource::render_request`], the Ollama profile).
///
/// Errors: `show` has no `template`; the template fails (Go's message, with line and column).
pub fn ollama_prompt(
    show: &Value,
    chat: &Value,
    today: Option<(i32, u32, u32)>,
) -> anyhow::Result<String> {
    use crate::template::source::{TemplateSource, midnight_of};
    show.get("template")
        .and_then(Value::as_str)
        .context("/api/show answer has no \"template\"")?;
    let source = TemplateSource::from_ollama_show("/api/show", show)?;
    let opts = crate::template::RenderOptions {
        now: today.and_then(midnight_of),
        ..Default::default()
    };
    source
        .render_request(chat, false, &opts)
        .map(|(prompt, _)| prompt)
        .map_err(|e| anyhow::anyhow!("rendering the /api/show template: {e}"))
}

/// The civil date (year, month, day) of an RFC 3339 time (`2026-12-01T17:16:59Z`), for Ollama's
/// `currentDate`; `None` when it does not start with a date.
fn date_of(rfc3339: &str) -> Option<(i32, u32, u32)> {
    let d = rfc3339.get(..10)?;
    let mut it = d.split('-');
    let y = it.next()?.parse().ok()?;
    let m = it.next()?.parse().ok()?;
    let day = it.next()?.parse().ok()?;
    Some((y, m, day))
}

/// The engine's own render of chat body `chat`, from the server at `client`:
/// llama-server `/apply-template`; vLLM `/tokenize` ([`vllm_tokenize_body`]) then `/detokenize`
/// for the text; Ollama `/api/show` through [`ollama_prompt`] (`today`: the exchange's date,
/// for the template's `currentDate`). Also returns the chat
/// template the engine uses (for the call syntax of the verification), when it says.
///
/// Errors: the engine has no chat render (SGLang; unknown engines): the message says to render
/// locally; the render request fails.
pub async fn server_prompt(
    client: &ServerClient,
    engine: &ServerKind,
    chat: &Value,
    today: Option<(i32, u32, u32)>,
) -> anyhow::Result<(Prompt, Option<String>)> {
    match engine {
        ServerKind::LlamaServer => {
            let text = client.apply_template(chat).await?;
            let template = client.props().await.ok().and_then(|p| {
                p.get("chat_template")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            });
            let from = "llama-server /apply-template".to_owned();
            Ok((
                Prompt {
                    text,
                    token_ids: None,
                    from,
                },
                template,
            ))
        }
        ServerKind::Vllm => {
            let ids = client.vllm_tokenize_chat(&vllm_tokenize_body(chat)).await?;
            let text = client
                .vllm_detokenize(chat.get("model"), &ids)
                .await
                .unwrap_or_default();
            Ok((
                Prompt {
                    text,
                    token_ids: Some(ids),
                    from: "vLLM /tokenize (messages)".into(),
                },
                None,
            ))
        }
        ServerKind::Ollama => {
            let model = chat
                .get("model")
                .and_then(Value::as_str)
                .context("the chat body names no model for /api/show")?;
            let show = client.ollama_show(model).await?;
            let text = ollama_prompt(&show, chat, today)?;
            let template = show
                .get("template")
                .and_then(Value::as_str)
                .map(str::to_owned);
            Ok((
                Prompt {
                    text,
                    token_ids: None,
                    from: format!("Ollama /api/show template of {model}"),
                },
                template,
            ))
        }
        ServerKind::Sglang => bail!(
            "SGLang renders no chat request without generating (its /v1/tokenize takes text only: python/sglang/srt/entrypoints/openai/serving_tokenize.py); render the prompt locally with --template SRC (the model's tokenizer_config.json or .jinja)"
        ),
        ServerKind::Other(other) => bail!(
            "the engine is {other:?}: toolscope does not know how it renders a chat request; name it with --server llama-server|vllm|sglang|ollama, or render locally with --template SRC"
        ),
    }
}

/// What [`regenerate`] produced.
#[derive(Debug, Clone)]
pub struct Regenerated {
    /// The recorded exchange (`POST /completion`, label `regenerate:<id>`).
    pub exchange: Exchange,
    /// The prompt text that was re-run (`/apply-template`'s, vLLM's detokenized render, …).
    pub prompt: String,
    /// The generated text (`content` of the `/completion` answer).
    pub generated: String,
    /// The text to replay the parser on: the assistant prefill (if any) + `generated`.
    pub raw_text: String,
    /// The [`Annotation::RawText`] written for the original exchange (source `regenerated`,
    /// `by` = the new exchange, and the verdict of [`crate::stream::raw::verify_regenerated`]).
    pub annotation: Annotation,
}

/// The chat body of a chat exchange, converted to OpenAI shape as llama-server converts
/// Anthropic bodies (`/apply-template` takes OpenAI bodies only): `(original body, chat body)`.
fn chat_bodies(original: &Exchange) -> anyhow::Result<(Value, Value)> {
    let id = original.id;
    let body = original
        .request_json()
        .with_context(|| format!("exchange {id}: request body is not JSON"))?;
    let chat = match original.api() {
        Api::Openai | Api::Ollama => body.clone(),
        Api::Anthropic => crate::record::anthropic::anthropic_to_openai(&body)
            .map_err(|e| anyhow::anyhow!("exchange {id}: {e}"))?,
        other => bail!(
            "exchange {id}: {} is not a chat request ({})",
            original.request.path,
            other.as_str()
        ),
    };
    Ok((body, chat))
}

/// Sends `prompt` to `endpoint` on `base` (engine kind `engine`) with the sampling settings of
/// the chat body `body` ([`request_body`]) and returns the recorded exchange (id `new_id`, label
/// `regenerate:<original id>`, timings measured) and the generated text ([`generated_text`]).
///
/// Errors: the endpoint cannot be reached or its answer cannot be read (an HTTP error status
/// is recorded, not an error). Messages name the original exchange id.
async fn complete(
    base: &str,
    original: &Exchange,
    target: (Endpoint, &ServerKind),
    body: &Value,
    prompt: &Prompt,
    new_id: u64,
    label: Option<&str>,
) -> anyhow::Result<(Exchange, String)> {
    let (endpoint, engine) = target;
    let id = original.id;
    let req_bytes = serde_json::to_vec(&request_body(endpoint, engine, body, prompt))?;
    let started = crate::record::now_rfc3339();
    let t0 = Instant::now();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(600))
        .build()
        .context("building the HTTP client")?;
    let url = format!("{base}{}", endpoint.path());
    let resp = http
        .post(&url)
        .header("content-type", "application/json")
        .body(req_bytes.clone())
        .send()
        .await
        .with_context(|| format!("exchange {id}: POST {url}"))?;
    let ttfb = t0.elapsed().as_micros() as u64;
    let status = resp.status().as_u16();
    let headers = recorded_headers(resp.headers());
    let bytes = resp
        .bytes()
        .await
        .with_context(|| format!("exchange {id}: reading the {} answer", endpoint.path()))?;
    let total = t0.elapsed().as_micros() as u64;
    let generated = serde_json::from_slice::<Value>(&bytes)
        .ok()
        .and_then(|v| generated_text(endpoint, &v))
        .unwrap_or_default();
    let exchange = Exchange {
        id: new_id,
        started,
        label: Some(label.map_or_else(|| format!("regenerate:{id}"), str::to_owned)),
        request: Request {
            method: "POST".into(),
            path: endpoint.path().into(),
            headers: vec![("content-type".into(), "application/json".into())],
            body: Body::from_bytes(&req_bytes),
        },
        response: Some(Response {
            status,
            headers,
            body: Some(Body::from_bytes(&bytes)),
            chunks: None,
        }),
        timings: Timings {
            ttfb_us: Some(ttfb),
            total_us: Some(total),
        },
        ..Default::default()
    };
    Ok((exchange, generated))
}

/// The [`Annotation::RawText`] for `original` regenerated as `generated` by exchange `by` from
/// a prompt that came from `prompt_from`: verified against the server's answer when the
/// original exchange has one (a complete response with a status below 400), under the call
/// syntax of `template` (the server's chat template; else the syntax the text shows). The
/// server's answer is read with the decoder of the original API (OpenAI, Anthropic, Ollama
/// `/api/chat`: `message.content`, `message.thinking`, `message.tool_calls`).
pub fn regenerated_annotation(
    original: &Exchange,
    generated: &str,
    by: Option<u64>,
    template: Option<&str>,
    prompt_from: Option<&str>,
) -> Annotation {
    let body = original.request_json();
    let prefill = body
        .as_ref()
        .and_then(assistant_prefill)
        .unwrap_or_default();
    let answered = original.response.as_ref().is_some_and(|r| r.status < 400)
        && !original.is_partial()
        && !is_parse_error(original);
    let server = answered
        .then(|| crate::stream::decode_exchange(original))
        .flatten()
        .map(|r| r.message);
    let verdict = server.map(|m| {
        let raw = format!("{prefill}{generated}");
        let syntax = template
            .and_then(Syntax::detect_from_template)
            .or_else(|| Syntax::detect_from_text(&raw));
        verify_regenerated(&m, &prefill, generated, syntax, body.as_ref())
    });
    Annotation::RawText {
        exchange: original.id,
        source: RawTextSource::Regenerated,
        text: Some(generated.to_owned()),
        slot: None,
        generation_prompt: None,
        by,
        verified: verdict.map(|v| v == Verdict::Verified),
        diverged_at: match verdict {
            Some(Verdict::Diverged { at }) => Some(at),
            _ => None,
        },
        prompt_from: prompt_from.map(str::to_owned),
        error: None,
    }
}

/// How [`regenerate_with`] regenerates.
#[derive(Debug, Clone, Default)]
pub struct RegenOptions {
    /// The server's kind (`None`: llama-server). Picks the prompt render ([`server_prompt`])
    /// and the default endpoint ([`Endpoint::for_server`]).
    pub server: Option<ServerKind>,
    /// The raw completion endpoint; `None`: the server's ([`Endpoint::for_server`]).
    pub endpoint: Option<Endpoint>,
    /// A prompt rendered outside the engine (toolscope's local render of a template source, or
    /// a file), used instead of [`server_prompt`]; its `from` names it.
    pub prompt: Option<Prompt>,
    /// The chat template whose call syntax the verification parses with; `None`: the one the
    /// engine reports (llama-server `/props`, Ollama `/api/show`), else the syntax the text
    /// shows.
    pub template: Option<String>,
    /// The new exchange's label in place of `regenerate:<id>` (a what-if run of `toolscope
    /// try`: `try:<id>:template`). With a label the regeneration is a run of its own, not the
    /// original's raw text: no `raw_text` annotation is written for the original.
    pub label: Option<String>,
}

/// [`regenerate_with`] on a llama-server: `/apply-template` → `/completion`.
pub async fn regenerate(
    base_url: &str,
    original: &Exchange,
    writer: &mut SessionWriter,
) -> anyhow::Result<Regenerated> {
    regenerate_with(base_url, original, writer, &RegenOptions::default()).await
}

/// Regenerates exchange `original` (an OpenAI, Anthropic or Ollama `/api/chat` exchange)
/// against the engine at `base_url` (`http://HOST:PORT`): the prompt from `opts.prompt` or the
/// engine's own render ([`server_prompt`]), sent to the endpoint ([`RegenOptions::endpoint`])
/// with the recorded sampling settings ([`request_body`]). Appends to `writer` the new exchange
/// (id from [`SessionWriter::next_id`], label `regenerate:<original id>`, `started` now,
/// timings measured) and the [`Annotation::RawText`] for the original exchange (with
/// `prompt_from`), verified against the server's answer ([`regenerated_annotation`]).
///
/// Errors: the original request body is not JSON or not a chat body; the engine cannot render
/// it and no prompt was given; the render request fails; the endpoint cannot be reached (an
/// HTTP error status from it is recorded, not an error); the session line cannot be written.
/// Every message names the original exchange id.
pub async fn regenerate_with(
    base_url: &str,
    original: &Exchange,
    writer: &mut SessionWriter,
    opts: &RegenOptions,
) -> anyhow::Result<Regenerated> {
    let id = original.id;
    let (body, chat) = chat_bodies(original)?;
    let base = base_url.trim_end_matches('/');
    let engine = opts.server.as_ref().unwrap_or(&ServerKind::LlamaServer);
    let client = ServerClient::new(base);
    let (prompt, server_template) = match &opts.prompt {
        Some(p) => (p.clone(), None),
        None => server_prompt(&client, engine, &chat, date_of(&original.started))
            .await
            .with_context(|| format!("exchange {id}: rendering the prompt on {engine}"))?,
    };
    let template = opts.template.clone().or(server_template);
    let endpoint = opts
        .endpoint
        .unwrap_or_else(|| Endpoint::for_server(engine));
    let (exchange, generated) = complete(
        base,
        original,
        (endpoint, engine),
        &body,
        &prompt,
        writer.next_id(),
        opts.label.as_deref(),
    )
    .await?;
    let annotation = regenerated_annotation(
        original,
        &generated,
        Some(exchange.id),
        template.as_deref(),
        Some(&prompt.from),
    );
    let path = writer.path().display().to_string();
    writer
        .append(&Line::Exchange(Box::new(exchange.clone())))
        .and_then(|()| match opts.label {
            Some(_) => Ok(()),
            None => writer.append(&Line::Annotation(annotation.clone())),
        })
        .with_context(|| format!("exchange {id}: writing the regenerated exchange to {path}"))?;
    let raw_text = format!(
        "{}{generated}",
        assistant_prefill(&body).unwrap_or_default()
    );
    Ok(Regenerated {
        exchange,
        prompt: prompt.text,
        generated,
        raw_text,
        annotation,
    })
}

/// `proxy --regenerate`: regenerates `original` from its already fetched rendered `prompt`
/// (llama-server `/apply-template`) through `client`'s `/completion`, as exchange `new_id`.
/// Returns the exchange to record (when `/completion` answered) and the original's
/// [`Annotation::RawText`] (with `error` when the regeneration failed).
pub async fn regenerate_recorded(
    client: &ServerClient,
    original: &Exchange,
    prompt: &str,
    new_id: u64,
    template: Option<&str>,
) -> (Option<Exchange>, Annotation) {
    const FROM: &str = "llama-server /apply-template";
    let failed = |e: anyhow::Error| failed_annotation(original, &e, Some(FROM.into()));
    let body = match chat_bodies(original) {
        Ok((body, _)) => body,
        Err(e) => return (None, failed(e)),
    };
    let prompt = Prompt {
        text: prompt.to_owned(),
        token_ids: None,
        from: FROM.into(),
    };
    let target = (Endpoint::Completion, &ServerKind::LlamaServer);
    match complete(
        client.base(),
        original,
        target,
        &body,
        &prompt,
        new_id,
        None,
    )
    .await
    {
        Ok((ex, generated)) if ex.response.as_ref().is_some_and(|r| r.status < 400) => {
            let ann =
                regenerated_annotation(original, &generated, Some(ex.id), template, Some(FROM));
            (Some(ex), ann)
        }
        Ok((ex, _)) => {
            let status = ex.response.as_ref().map_or(0, |r| r.status);
            (
                Some(ex),
                failed(anyhow::anyhow!("/completion answered HTTP {status}")),
            )
        }
        Err(e) => (None, failed(e)),
    }
}

/// `proxy --regenerate` on a vLLM or Ollama upstream (engine kind `engine`, base URL `base`):
/// regenerates `original` as exchange `new_id` from the engine's own render
/// ([`server_prompt`]) through the engine's endpoint ([`Endpoint::for_server`]). Returns the
/// exchange to record (when the endpoint answered) and the original's
/// [`Annotation::RawText`] (with `error` when the render or the regeneration failed).
pub async fn regenerate_on_engine(
    base: &str,
    engine: &ServerKind,
    original: &Exchange,
    new_id: u64,
) -> (Option<Exchange>, Annotation) {
    let failed = |e: anyhow::Error, from| failed_annotation(original, &e, from);
    let (body, chat) = match chat_bodies(original) {
        Ok(b) => b,
        Err(e) => return (None, failed(e, None)),
    };
    let client = ServerClient::new(base);
    let (prompt, template) =
        match server_prompt(&client, engine, &chat, date_of(&original.started)).await {
            Ok(p) => p,
            Err(e) => {
                return (
                    None,
                    failed(e.context(format!("rendering on {engine}")), None),
                );
            }
        };
    let endpoint = Endpoint::for_server(engine);
    let target = (endpoint, engine);
    match complete(
        client.base(),
        original,
        target,
        &body,
        &prompt,
        new_id,
        None,
    )
    .await
    {
        Ok((ex, generated)) if ex.response.as_ref().is_some_and(|r| r.status < 400) => {
            let ann = regenerated_annotation(
                original,
                &generated,
                Some(ex.id),
                template.as_deref(),
                Some(&prompt.from),
            );
            (Some(ex), ann)
        }
        Ok((ex, _)) => {
            let status = ex.response.as_ref().map_or(0, |r| r.status);
            let e = anyhow::anyhow!("{} answered HTTP {status}", endpoint.path());
            (Some(ex), failed(e, Some(prompt.from)))
        }
        Err(e) => (None, failed(e, Some(prompt.from))),
    }
}

/// The [`Annotation::RawText`] of a regeneration of `original` that produced no text: `error`
/// says why, `prompt_from` where the prompt came from when it got that far.
fn failed_annotation(original: &Exchange, e: &anyhow::Error, from: Option<String>) -> Annotation {
    Annotation::raw_text_missing(
        original.id,
        RawTextSource::Regenerated,
        from,
        format!("{e:#}"),
    )
}

/// Response headers as a session records them: `(lower-case name, value)` pairs in the
/// server's order, values decoded lossily as UTF-8. Shared with [`super::probe`].
pub(crate) fn recorded_headers(headers: &reqwest::header::HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_ascii_lowercase(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampling_settings_carried_over() {
        let chat = json!({"model":"m","temperature":0,"top_p":0.9,"seed":7,"max_tokens":64,"stop":"</tool_call>","messages":[]});
        assert_eq!(
            completion_body(&chat, "P"),
            json!({"prompt":"P","temperature":0,"top_p":0.9,"seed":7,"n_predict":64,"stop":["</tool_call>"],"stream":false,"cache_prompt":false})
        );
        let anth = json!({"max_tokens":10,"stop_sequences":["a","b"],"top_k":5});
        assert_eq!(
            completion_body(&anth, "Q"),
            json!({"prompt":"Q","top_k":5,"n_predict":10,"stop":["a","b"],"stream":false,"cache_prompt":false})
        );
    }

    #[test]
    fn engine_endpoints_and_dates() {
        assert_eq!(
            Endpoint::for_server(&ServerKind::Vllm),
            Endpoint::V1Completions
        );
        assert_eq!(
            Endpoint::for_server(&ServerKind::Sglang),
            Endpoint::V1Completions
        );
        assert_eq!(
            Endpoint::for_server(&ServerKind::Ollama),
            Endpoint::OllamaGenerate
        );
        assert_eq!(
            Endpoint::for_server(&ServerKind::LlamaServer),
            Endpoint::Completion
        );
        assert_eq!(date_of("2026-12-01T17:16:59.123456Z"), Some((2026, 12, 1)));
        assert_eq!(date_of(""), None);
        // /v1/completions answers: the OpenAI completions shape.
        let v = json!({"choices": [{"index": 0, "text": "T", "finish_reason": "stop"}]});
        assert_eq!(
            generated_text(Endpoint::V1Completions, &v).as_deref(),
            Some("T")
        );
        assert_eq!(generated_text(Endpoint::Completion, &v), None);
    }

    #[test]
    fn prefill_and_parse_error_detection() {
        let chat = json!({"messages":[{"role":"user","content":"x"},{"role":"assistant","content":"<tool_call>\n{\"name\": \""}]});
        assert_eq!(
            assistant_prefill(&chat).as_deref(),
            Some("<tool_call>\n{\"name\": \"")
        );
        assert_eq!(
            assistant_prefill(&json!({"messages":[{"role":"user","content":"x"}]})),
            None
        );
        let mut ex = Exchange {
            request: Request { method: "POST".into(), path: "/v1/chat/completions".into(), ..Default::default() },
            response: Some(Response {
                status: 500,
                body: Some(Body::from_bytes(br#"{"error":{"code":500,"message":"The model produced output that does not match the expected peg-native format","type":"server_error"}}"#)),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(is_parse_error(&ex));
        ex.response.as_mut().unwrap().status = 400;
        assert!(!is_parse_error(&ex));
    }
}
