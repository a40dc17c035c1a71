//! Building [`ExchangeContext`]s from recorded data: session exchanges (with their server-render
//! annotations and `/props` header) and bare request/response pairs. Pure: bytes and values in.

use serde_json::Value;

use super::ExchangeContext;
use crate::finding::{Evidence, Finding, Pane, Rule};
use crate::session::read::Session;
use crate::session::{Api, Body, Exchange, Request, Response};

/// Contexts for every chat exchange of a session (OpenAI chat and Anthropic messages; other
/// paths are skipped), in exchange id order, plus one `session.damaged` finding per line the
/// reader skipped.
pub fn session_contexts(session: &Session) -> (Vec<ExchangeContext>, Vec<Finding>) {
    let damaged = session
        .warnings
        .iter()
        .map(|w| {
            Finding::new(
                Rule::SessionDamaged,
                format!("{}: {w}", session.path),
                "the rest of the session was checked; the writer was probably interrupted mid-line",
            )
            .with_evidence(Evidence {
                pane: Some(Pane::Findings),
                offset: None,
                excerpt: Some(format!("line {}", w.line)),
                ..Default::default()
            })
        })
        .collect();
    let props = session.header.props.as_ref();
    let mut exchanges: Vec<&Exchange> = session
        .exchanges
        .iter()
        .filter(|e| {
            matches!(
                e.api(),
                Api::Openai | Api::Anthropic | Api::Completion | Api::Ollama
            )
        })
        .collect();
    exchanges.sort_by_key(|e| e.id);
    let contexts = exchanges
        .into_iter()
        .map(|e| {
            let anns = session.annotations.get(&e.id).map(Vec::as_slice);
            exchange_context_in(props, anns.unwrap_or(&[]), e)
        })
        .collect();
    (contexts, damaged)
}

/// [`exchange_context`] with what the session knows besides the exchange: the server's render
/// and tokens (newest `server_render` among `annotations`), the chat template and BOS token
/// from the header's llama-server `props`.
pub fn exchange_context_in(
    props: Option<&Value>,
    annotations: &[crate::session::Annotation],
    e: &Exchange,
) -> ExchangeContext {
    let mut cx = exchange_context(e);
    if let Some((prompt, tokens)) = crate::session::Annotation::latest_server_render(annotations) {
        cx.server_prompt = prompt.map(str::to_owned);
        cx.server_tokens = tokens.map(<[_]>::to_vec);
    }
    if let Some(p) = props {
        cx.template = p
            .get("chat_template")
            .and_then(Value::as_str)
            .map(str::to_owned);
        cx.bos_token = p
            .get("bos_token")
            .and_then(Value::as_str)
            .map(str::to_owned);
    }
    cx
}

/// A context for one recorded exchange: request JSON, status, and the response read as a
/// stream (when recorded as chunks or `text/event-stream`: [`crate::stream::decode_exchange`])
/// or a JSON body.
pub fn exchange_context(e: &Exchange) -> ExchangeContext {
    let mut cx = ExchangeContext::new(e.api());
    cx.id = Some(e.id);
    cx.request = e.request_json();
    let Some(resp) = &e.response else { return cx };
    cx.status = Some(resp.status);
    let bytes = e.response_bytes();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    // Ollama's native endpoints (NDJSON or one object) are read by the one decoder too.
    let is_sse = e.is_stream()
        || crate::session::is_ollama_native(&e.request.path)
        || e.response_header("content-type")
            .is_some_and(|c| c.contains("text/event-stream"));
    if is_sse {
        if let Some(r) = crate::stream::decode_exchange(e) {
            set_reassembled(&mut cx, r);
        }
        cx.response_text = Some(text);
        return cx;
    }
    match serde_json::from_str::<Value>(&text) {
        Ok(v) => {
            cx.response_text = Some(text);
            if resp.status < 400 {
                cx.set_response_json(v);
            } else {
                cx.response_json = Some(v);
            }
        }
        Err(_) => cx.response_text = Some(text),
    }
    cx
}

/// Sets a streamed response (the whole `text/event-stream` body) on `cx`, decoded and
/// reassembled by [`crate::stream::decode_exchange`] exactly as a recorded exchange of
/// `cx.api` would be (OpenAI chat, Anthropic messages, or `/completion` / `/v1/completions`).
pub fn set_stream(cx: &mut ExchangeContext, body: &str) {
    let path = match cx.api {
        Api::Anthropic => "/v1/messages",
        Api::Completion => "/completion",
        _ => "/v1/chat/completions",
    };
    let ex = Exchange {
        id: cx.id.unwrap_or(1),
        request: Request {
            method: "POST".into(),
            path: path.into(),
            body: Body::from_bytes(
                cx.request
                    .as_ref()
                    .map(Value::to_string)
                    .unwrap_or_default()
                    .as_bytes(),
            ),
            ..Default::default()
        },
        response: Some(Response {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            body: Some(Body::from_bytes(body.as_bytes())),
            chunks: None,
        }),
        ..Default::default()
    };
    if let Some(r) = crate::stream::decode_exchange(&ex) {
        set_reassembled(cx, r);
    }
    cx.response_text = Some(body.to_owned());
}

/// Stream rules whose findings are taken from reassembly as they are; the others
/// (`tool_call.args_invalid_json`, `finish.mismatch`) are recomputed with the request known.
const STREAM_RULES: &[Rule] = &[
    Rule::StreamMissingIndex,
    Rule::StreamMissingId,
    Rule::StreamNameRepeated,
    Rule::ServerParseError,
];

fn set_reassembled(cx: &mut ExchangeContext, r: crate::stream::Reassembled) {
    cx.streamed = true;
    cx.finish_event = r.finish_event;
    cx.call_events = r.call_events;
    let (chunks, pieces) = text_chunks(cx.api, &r.events);
    cx.stream_chunks = chunks;
    cx.stream_pieces = pieces;
    let mut findings: Vec<Finding> = r
        .findings
        .into_iter()
        .filter(|f| STREAM_RULES.contains(&f.rule))
        .collect();
    findings.extend(error_events(&r.problems, &findings));
    cx.stream_findings = findings;
    cx.message = Some(r.message);
    cx.raw_text = None;
}

/// `stream.error_event`: an error event in the stream (OpenAI-style `data: {"error": …}`,
/// Anthropic `event: error`) that is not the server's parse failure (that one is
/// `server.parse_error`, already in `reported`). The client sees the stream end with an error
/// (context overflow, cancelled slot, backend failure) instead of a finished message.
/// Evidence: the event number.
pub fn error_events(
    problems: &[crate::stream::reassemble::StreamProblem],
    reported: &[Finding],
) -> Vec<Finding> {
    problems
        .iter()
        .filter(|p| p.kind == "error_event")
        .filter(|p| {
            !reported
                .iter()
                .any(|f| f.rule == Rule::ServerParseError && f.evidence.event == p.event)
        })
        .map(|p| {
            Finding::new(
                Rule::StreamErrorEvent,
                format!(
                    "the stream carried an error event{}: {}",
                    p.event.map(|e| format!(" (event {e})")).unwrap_or_default(),
                    p.message.trim_start_matches("error event: ")
                ),
                "the server failed mid-stream (not its tool-call parser): read the error text; context overflow, a cancelled slot or a backend failure each need their own fix",
            )
            .with_evidence(Evidence {
                pane: Some(Pane::Stream),
                event: p.event,
                excerpt: Some(p.message.clone()),
                ..Default::default()
            })
        })
        .collect()
}

/// The generated text per SSE event (events that add no text are left out), and the sampled
/// token pieces when the events list them (OpenAI `logprobs: true`:
/// `choices[0].logprobs.content[].token`; llama-server `/completion` with `n_probs`:
/// `completion_probabilities[].token`). Visible text only: OpenAI `choices[0].delta.content`,
/// Anthropic `content_block_delta` `text_delta.text`, `/completion` `content`, `/v1/completions`
/// `choices[0].text`.
fn text_chunks(
    api: Api,
    events: &[crate::stream::sse::SseEvent],
) -> (Vec<super::StreamChunk>, Option<Vec<String>>) {
    let mut chunks = Vec::new();
    let mut pieces: Vec<String> = Vec::new();
    for ev in events {
        let Ok(v) = serde_json::from_str::<Value>(&ev.data) else {
            continue;
        };
        let text = match api {
            Api::Anthropic => v
                .pointer("/delta/text")
                .filter(|_| v.pointer("/delta/type").and_then(Value::as_str) == Some("text_delta")),
            Api::Completion => v.get("content").or_else(|| v.pointer("/choices/0/text")),
            _ => v.pointer("/choices/0/delta/content"),
        }
        .and_then(Value::as_str);
        if let Some(t) = text.filter(|t| !t.is_empty()) {
            chunks.push(super::StreamChunk {
                event: ev.index,
                text: t.to_owned(),
            });
        }
        if let Some(probs) = v
            .pointer("/choices/0/logprobs/content")
            .or_else(|| v.get("completion_probabilities"))
            .and_then(Value::as_array)
        {
            pieces.extend(
                probs
                    .iter()
                    .filter_map(|p| p.get("token").and_then(Value::as_str))
                    .map(str::to_owned),
            );
        }
    }
    (chunks, (!pieces.is_empty()).then_some(pieces))
}
