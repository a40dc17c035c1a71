//! Building [`ExchangeContext`]s from recorded data: session exchanges (with their server-render
//! annotations and `/props` header) and bare request/response pairs. Pure: bytes and values in.

use serde_json::Value;

use super::ExchangeContext;
use crate::finding::{Evidence, Finding, Pane, Rule};
use crate::session::read::Session;
use crate::session::{Api, Exchange};

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
        .filter(|e| matches!(e.api(), Api::Openai | Api::Anthropic))
        .collect();
    exchanges.sort_by_key(|e| e.id);
    let contexts = exchanges
        .into_iter()
        .map(|e| {
            let mut cx = exchange_context(e);
            if let Some((prompt, tokens)) = session.server_render(e.id) {
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
        })
        .collect();
    (contexts, damaged)
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
    let is_sse = e.is_stream()
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
/// reassembled by [`crate::stream`] for `cx.api`.
pub fn set_stream(cx: &mut ExchangeContext, body: &str) {
    let events = crate::stream::sse::decode_bytes(body.as_bytes());
    let r = match cx.api {
        Api::Anthropic => crate::stream::reassemble::reassemble_anthropic(&events),
        _ => crate::stream::reassemble::reassemble_openai(&events),
    };
    set_reassembled(cx, r);
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
    cx.message = Some(r.message);
    cx.finish_event = r.finish_event;
    cx.call_events = r.call_events;
    cx.stream_findings = r
        .findings
        .into_iter()
        .filter(|f| STREAM_RULES.contains(&f.rule))
        .collect();
    cx.raw_text = None;
}
