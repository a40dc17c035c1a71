//! The rules' input: every fact [`crate::diagnose`] judges an exchange by, assembled in one
//! place. This module is the only writer of [`ExchangeContext`]; the rules read it and never
//! write it, and no caller (the inspector, `check`, `probe`) sets a field of it.
//!
//! Every input is an [`Exchange`]: a recorded one (session line, HAR entry), or one made from
//! `check`'s bare inputs by [`bare_exchange`] (a `--request`/`--response` pair, a pre-flight
//! request with no response, a `--tokens` list as a server-render annotation with no request).
//! The facts come from, in this order (a later source wins where two name the same fact):
//!
//! | fact | source |
//! |---|---|
//! | `id`, `api`, `request`, `status`, `preflight` | the exchange ([`exchange_context_from`]) |
//! | `engine` | the session header's `engine.kind` |
//! | `response_json`, `response_text`, `message`, `stopping_word` | a JSON body ([`set_response_json`]) |
//! | `streamed`, `finish_event`, `call_events`, `args_events`, `args_not_string`, `stream_chunks`, `stream_findings`, `stream_errors`, `message` | the one decoder, [`crate::stream::decode_exchange`] (SSE, Ollama NDJSON) |
//! | `raw_text`, `raw`, `stream_pieces` | the one raw-output lookup, [`crate::stream::raw::raw_output_of`] (`__verbose.content`, slots debug, token pieces, raw completion, regeneration) |
//! | `llama_prompt` | the raw text's recorded `/slots` generation prompt, else the server's render, else a render of the request with `template` ([`super::template::llama_prompt`]) |
//! | `server_prompt`, `server_tokens` | the one server-render lookup, [`super::server_render`] (`/apply-template` + `/tokenize` annotation, `__verbose.prompt`, a `--tokens` list), else Ollama's render from the `/api/show` annotation |
//! | `template`, `bos_token`, `bos_id` | [`Overrides`] (`check --template`, a local vocabulary), else the session's `/props`, else the `/api/show` template |
//! | `template_markers` | the template's marker inventory ([`crate::tokens::markers`]), kept in the caller's [`Caches`] |
//! | `vocab_render` | the caller's hook (`check --vocab`: its render and tokenization, IO kept in the CLI) |
//!
//! Pure: data in, data out.

use serde_json::Value;

use super::{Caches, Context, Overrides, RawOutput, ServerRender};
use crate::diagnose::{ExchangeContext, StreamChunk, VocabRender};
use crate::finding::{Finding, Rule};
use crate::session::{Annotation, Api, Body, Exchange, Request, Response, TokenPiece};

/// What [`assemble`] gives besides the rules' context: the facts the panes and `check`'s
/// listing read too, each computed once.
#[derive(Debug)]
pub struct Assembled {
    /// The rules' input.
    pub cx: ExchangeContext,
    /// The one decode of the response ([`crate::stream::decode_exchange`]).
    pub decoded: Option<crate::stream::Reassembled>,
    /// The model's raw output, or why it is missing.
    pub raw: RawOutput,
    /// The server's render of the request, when recorded.
    pub server_render: Option<ServerRender>,
    /// Ollama's render of the request from the `/api/show` annotation: `(origin, render or
    /// error)`, for an Ollama exchange with that annotation.
    pub ollama: Option<(String, Result<String, String>)>,
}

/// Assembles every fact the rules read for `ex` (see the module docs for the sources and
/// their order). `hook` sees the context once the session facts are set and returns the
/// `vocab_render` fact (`check --vocab` renders and tokenizes there; `None` leaves it unset).
///
/// Errors: the hook's.
pub fn assemble<E>(
    ex: &Exchange,
    ctx: Context<'_>,
    overrides: &Overrides,
    caches: &Caches,
    hook: impl FnOnce(&ExchangeContext) -> Result<Option<VocabRender>, E>,
) -> Result<Assembled, E> {
    let decoded = crate::stream::decode_exchange(ex);
    let mut cx = exchange_context_from(ex, decoded.as_ref());
    // The one raw-output lookup (seam 1, issue #12): what the model wrote, or why unknown.
    let raw = crate::stream::raw::raw_output_of(ex, cx.request.as_ref(), ctx.annotations);
    cx.raw_text = raw.models_text().map(str::to_owned);
    cx.raw = Some(raw.clone());
    if let (
        Some(_),
        RawOutput::Text {
            pieces: Some(p),
            prefill,
            ..
        },
    ) = (&cx.raw_text, &raw)
    {
        // Pieces spell the generated part; the parser reads the prefill first.
        let mut all: Vec<String> = Vec::with_capacity(p.len() + 1);
        if !prefill.is_empty() {
            all.push(prefill.clone());
        }
        all.extend(p.iter().cloned());
        cx.stream_pieces = Some(all);
    }
    let server_render = super::server_render(ex, ctx.annotations);
    if let Some(r) = &server_render {
        cx.server_prompt = r.prompt.clone();
        cx.server_tokens = r.tokens.clone();
    }
    let props = ctx.header.props.as_ref();
    let prop = |k: &str| {
        props
            .and_then(|p| p.get(k))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    cx.template = overrides.template.clone().or_else(|| prop("chat_template"));
    // Ollama: the prompt as Ollama renders it from the /api/show annotation (issue #14) —
    // what the prompt rules read when there is no server render
    let ollama = super::template::ollama_render(
        ex,
        cx.request.as_ref(),
        ctx.header,
        ctx.annotations,
        &caches.ollama,
    );
    if let Some((_, Ok(prompt))) = &ollama
        && cx.server_prompt.is_none()
    {
        cx.server_prompt = Some(prompt.clone());
    }
    if cx.template.is_none() {
        cx.template = Annotation::latest_ollama_show(ctx.annotations)
            .and_then(|(_, s)| s.get("template"))
            .and_then(Value::as_str)
            .map(str::to_owned);
    }
    cx.bos_token = overrides.bos_token.clone().or_else(|| prop("bos_token"));
    cx.template_markers = cx
        .template
        .as_deref()
        .map(|t| caches.markers.of_template(t, cx.bos_token.as_deref(), None));
    cx.bos_id = overrides.bos_id;
    cx.engine = ctx.header.engine.as_ref().map(|e| e.kind.clone());
    cx.llama_prompt = llama_prompt(ex, &cx, &raw, ctx, overrides);
    cx.vocab_render = hook(&cx)?;
    Ok(Assembled {
        cx,
        decoded,
        raw,
        server_render,
        ollama,
    })
}

/// The generation prompt llama.cpp parses in front of `raw`'s generated part
/// ([`super::template::llama_prompt`]): recorded, else from the server's render, else rendered
/// with the template the rules judge with (`check --template`, else the session's `/props`).
fn llama_prompt(
    ex: &Exchange,
    cx: &ExchangeContext,
    raw: &RawOutput,
    ctx: Context<'_>,
    overrides: &Overrides,
) -> Option<crate::parser::engines::LlamaPrompt> {
    use crate::template::TemplateSource;
    cx.raw_text.as_ref()?;
    let source = match &overrides.template {
        Some(t) => {
            let mut s = TemplateSource::from_jinja("--template", t);
            s.bos_token = cx.bos_token.clone();
            Some(s)
        }
        None => ctx
            .header
            .props
            .as_ref()
            .and_then(|p| TemplateSource::from_props(p).ok()),
    };
    super::template::llama_prompt(
        ex,
        cx.request.as_ref(),
        raw,
        ctx.annotations,
        cx.server_prompt.as_deref(),
        source.as_ref(),
    )
}

/// The facts of `e` itself (no session facts: no raw-output lookup, server render or
/// template): request JSON, status, and the response read as a stream (when recorded as
/// chunks or `text/event-stream`) or a JSON body. What `probe` judges its own exchanges by.
pub fn exchange_context(e: &Exchange) -> ExchangeContext {
    exchange_context_from(e, crate::stream::decode_exchange(e).as_ref())
}

/// [`exchange_context`] from the exchange's decode already made (`decoded` =
/// [`crate::stream::decode_exchange`]`(e)`), so an exchange is decoded once.
pub fn exchange_context_from(
    e: &Exchange,
    decoded: Option<&crate::stream::Reassembled>,
) -> ExchangeContext {
    let mut cx = ExchangeContext::new(e.api());
    cx.id = Some(e.id);
    cx.request = e.request_json();
    let Some(resp) = &e.response else {
        // A request that was never sent (`check --request` with no response): not a partial
        // exchange, whose upstream failed before a status line.
        cx.preflight = !e.is_partial();
        return cx;
    };
    cx.status = Some(resp.status);
    // one buffer: the bytes become the text unless they are not UTF-8
    let text = String::from_utf8(e.response_bytes())
        .unwrap_or_else(|err| String::from_utf8_lossy(err.as_bytes()).into_owned());
    // Ollama's native endpoints (NDJSON or one object) are read by the one decoder too.
    if crate::stream::is_sse(e) || crate::session::is_ollama_native(&e.request.path) {
        if let Some(r) = decoded {
            set_reassembled(&mut cx, r);
        }
        cx.response_text = Some(text);
        return cx;
    }
    match serde_json::from_str::<Value>(&text) {
        Ok(v) => {
            cx.response_text = Some(text);
            if resp.status < 400 {
                set_response_json(&mut cx, v);
            } else {
                cx.response_json = Some(v);
            }
        }
        Err(_) => cx.response_text = Some(text),
    }
    cx
}

/// A bare input as an exchange (id 1, `POST` to `api`'s endpoint), so it takes the route
/// every recorded exchange takes: `request` as the body (compact JSON; empty when absent) and
/// the response, when given, with status `status` and a `content-type` of
/// `text/event-stream` (a stream; `application/x-ndjson` for Ollama's) or `application/json`. `check` makes its `--request`,
/// `--response`, `--response-sse` inputs one with this.
pub fn bare_exchange(
    api: Api,
    request: Option<&Value>,
    response: Option<BareResponse<'_>>,
) -> Exchange {
    let path = match api {
        Api::Anthropic => "/v1/messages",
        Api::Completion => "/completion",
        Api::Responses => "/v1/responses",
        Api::Ollama => "/api/chat",
        Api::Openai | Api::Other => "/v1/chat/completions",
    };
    let response = response.map(|r| {
        let (ty, body) = match r.body {
            // Ollama's native stream is NDJSON (crate::stream::ollama)
            BareBody::Sse(text) if api == Api::Ollama => ("application/x-ndjson", text.to_owned()),
            BareBody::Sse(text) => ("text/event-stream", text.to_owned()),
            BareBody::Json(v) => ("application/json", v.to_string()),
        };
        Response {
            status: r.status,
            headers: vec![("content-type".into(), ty.into())],
            body: Some(Body::from_bytes(body.as_bytes())),
            chunks: None,
        }
    });
    Exchange {
        id: 1,
        request: Request {
            method: "POST".into(),
            path: path.into(),
            body: Body::from_bytes(request.map(Value::to_string).unwrap_or_default().as_bytes()),
            ..Default::default()
        },
        response,
        ..Default::default()
    }
}

/// A bare response for [`bare_exchange`].
#[derive(Debug, Clone, Copy)]
pub struct BareResponse<'a> {
    /// HTTP status (a bare pair's is not recorded: `check` assumes 200, and 500 for an error
    /// body).
    pub status: u16,
    pub body: BareBody<'a>,
}

/// A bare response body.
#[derive(Debug, Clone, Copy)]
pub enum BareBody<'a> {
    /// A whole stream body: `text/event-stream`, or Ollama's NDJSON.
    Sse(&'a str),
    /// A JSON body (stored compact).
    Json(&'a Value),
}

/// The annotation a bare `--tokens` list is: llama-server's tokenization of the prompt with
/// no prompt text (`/tokenize` with pieces), for exchange 1.
pub fn tokens_annotation(tokens: Vec<TokenPiece>) -> Annotation {
    Annotation::ServerRender {
        exchange: 1,
        prompt: None,
        tokens: Some(tokens),
        error: None,
    }
}

/// The facts of a non-streamed request/response JSON pair (status 200 assumed): the message
/// ([`crate::stream::message::from_response_json`]) and llama-server's `__verbose` extras.
/// For unit tests of single rules; every other caller takes [`assemble`].
pub fn from_pair(api: Api, request: Option<Value>, response: Option<Value>) -> ExchangeContext {
    let mut cx = ExchangeContext::new(api);
    cx.request = request;
    if let Some(r) = response {
        set_response_json(&mut cx, r);
    }
    cx
}

/// `cx` with `template` as its chat template and that template's marker inventory (BOS
/// `cx.bos_token`), as [`assemble`] sets them. For unit tests of single rules.
pub fn with_template(cx: ExchangeContext, template: &str) -> ExchangeContext {
    let markers = crate::tokens::markers::Inventories::default().of_template(
        template,
        cx.bos_token.as_deref(),
        None,
    );
    ExchangeContext {
        template: Some(template.to_owned()),
        template_markers: Some(markers),
        ..cx
    }
}

/// Sets a streamed response (the whole `text/event-stream` body) on `cx`, decoded and
/// reassembled by [`crate::stream::decode_exchange`] exactly as a recorded exchange of
/// `cx.api` would be (OpenAI chat, Anthropic messages, `/completion` / `/v1/completions`,
/// Responses, or an Ollama `/api/chat` NDJSON stream). For unit tests of single rules; every other caller takes [`assemble`].
pub fn set_stream(cx: &mut ExchangeContext, body: &str) {
    let mut ex = bare_exchange(
        cx.api,
        cx.request.as_ref(),
        Some(BareResponse {
            status: 200,
            body: BareBody::Sse(body),
        }),
    );
    ex.id = cx.id.unwrap_or(1);
    if let Some(r) = crate::stream::decode_exchange(&ex) {
        set_reassembled(cx, &r);
    }
    cx.response_text = Some(body.to_owned());
}

/// A JSON response body's facts: message, raw text (`__verbose.content`), stopping word;
/// `response_text` is the body re-serialised when not set.
pub fn set_response_json(cx: &mut ExchangeContext, body: Value) {
    cx.message = crate::stream::message::from_response_json(cx.api.as_str(), &body);
    if let Some(m) = &cx.message {
        cx.raw_text = m.raw_text.clone();
    }
    cx.stopping_word = body
        .pointer("/__verbose/stopping_word")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned);
    if cx.response_text.is_none() {
        cx.response_text = Some(body.to_string());
    }
    cx.response_json = Some(body);
}

/// Stream-contract findings that come from reassembly (the decoder sees the events they
/// judge), passed through to the rules; argument JSON and the finish reason are rules of
/// diagnose (rules::calls, rules::finish), one implementation each.
const STREAM_RULES: &[Rule] = &[
    Rule::StreamMissingIndex,
    Rule::StreamMissingId,
    Rule::StreamNameRepeated,
    Rule::ServerParseError,
    // Responses streams (crate::stream::responses)
    Rule::StreamSequenceGap,
    Rule::StreamNoTerminal,
    Rule::StreamAfterTerminal,
    Rule::StreamMalformedEvent,
    Rule::StreamCutEvent,
    Rule::ToolCallArgsDoneMismatch,
];

fn set_reassembled(cx: &mut ExchangeContext, r: &crate::stream::Reassembled) {
    cx.streamed = true;
    cx.finish_event = r.finish_event;
    cx.call_events = r.call_events.clone();
    cx.args_events = r.args_events.clone();
    cx.args_not_string = r.args_not_string.clone();
    cx.stream_chunks = text_chunks(&r.marks, &r.message.content);
    cx.stream_pieces =
        (!r.pieces.is_empty()).then(|| r.pieces.iter().map(|(_, p)| p.clone()).collect());
    cx.stream_findings = r
        .findings
        .iter()
        .filter(|f| STREAM_RULES.contains(&f.rule))
        .cloned()
        .collect::<Vec<Finding>>();
    cx.stream_errors = r
        .problems
        .iter()
        .filter(|p| p.kind == "error_event")
        .cloned()
        .collect();
    cx.message = Some(r.message.clone());
    cx.raw_text = None;
}

/// The visible text each SSE event added (events that add none are left out), from the
/// reassembly's marks ([`crate::stream::Reassembled::marks`]): OpenAI `delta.content`,
/// Anthropic `text_delta`, `/completion` `content`, `/v1/completions` `choices[0].text`.
fn text_chunks(marks: &[crate::stream::EventMark], content: &str) -> Vec<StreamChunk> {
    marks
        .windows(2)
        .enumerate()
        .filter(|(_, w)| w[1].content > w[0].content)
        .map(|(event, w)| StreamChunk {
            event,
            text: content
                .get(w[0].content..w[1].content)
                .unwrap_or("")
                .to_owned(),
        })
        .collect()
}
