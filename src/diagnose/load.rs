//! Building [`ExchangeContext`]s from recorded data: session exchanges (with their server-render
//! annotations and `/props` header) and bare request/response pairs. Pure: bytes and values in.

use serde_json::Value;

use super::ExchangeContext;
use crate::finding::{Evidence, Finding, Pane, Rule};
use crate::session::read::Session;
use crate::session::{Api, Exchange};
use crate::stream::{AssistantMessage, CallRecord};

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
/// stream (when recorded as chunks) or a JSON body.
pub fn exchange_context(e: &Exchange) -> ExchangeContext {
    let mut cx = ExchangeContext::new(e.api());
    cx.id = Some(e.id);
    cx.request = e.request_json();
    let Some(resp) = &e.response else { return cx };
    cx.status = Some(resp.status);
    let bytes = e.response_bytes();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    if e.is_stream() {
        set_stream(&mut cx, &text);
    } else {
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
    }
    cx
}

/// Sets a streamed response (the whole `text/event-stream` body) on `cx`.
pub fn set_stream(cx: &mut ExchangeContext, body: &str) {
    cx.streamed = true;
    let (message, finish_event) = reassemble_fallback(cx.api, body);
    cx.message = Some(message);
    cx.finish_event = finish_event;
    cx.raw_text = None;
    cx.response_text = Some(body.to_owned());
}

/// `(event name, data)` of each SSE event in `body` (WHATWG EventSource framing: events end
/// at a blank line; `data:` lines are joined with `\n`; comments ignored).
pub fn sse_events(body: &str) -> Vec<(Option<String>, String)> {
    let body = body.replace("\r\n", "\n");
    let mut out = Vec::new();
    for block in body.split("\n\n") {
        let mut name = None;
        let mut data: Vec<&str> = Vec::new();
        for line in block.lines() {
            if let Some(d) = line.strip_prefix("data:") {
                data.push(d.strip_prefix(' ').unwrap_or(d));
            } else if let Some(n) = line.strip_prefix("event:") {
                name = Some(n.trim().to_owned());
            }
        }
        if !data.is_empty() || name.is_some() {
            out.push((name, data.join("\n")));
        }
    }
    out
}

/// Lenient reassembly of an OpenAI or Anthropic stream into a message, with the event index
/// that carried the finish reason. Deltas without `index` continue the last call.
fn reassemble_fallback(api: Api, body: &str) -> (AssistantMessage, Option<usize>) {
    let mut m = AssistantMessage::default();
    let mut finish_event = None;
    for (i, (_, data)) in sse_events(body).iter().enumerate() {
        let Ok(v) = serde_json::from_str::<Value>(data) else {
            continue;
        };
        if api == Api::Anthropic {
            match v.get("type").and_then(Value::as_str) {
                Some("message_start") => {
                    m.model = v
                        .pointer("/message/model")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                }
                Some("content_block_start") => {
                    let b = v.get("content_block").cloned().unwrap_or_default();
                    if b.get("type").and_then(Value::as_str) == Some("tool_use") {
                        m.tool_calls.push(CallRecord {
                            index: v.get("index").and_then(Value::as_u64),
                            id: b.get("id").and_then(Value::as_str).map(str::to_owned),
                            name: b
                                .get("name")
                                .and_then(Value::as_str)
                                .unwrap_or("")
                                .to_owned(),
                            arguments: String::new(),
                        });
                    }
                }
                Some("content_block_delta") => {
                    let d = v.get("delta").cloned().unwrap_or_default();
                    let s = |k: &str| d.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
                    match d.get("type").and_then(Value::as_str) {
                        Some("text_delta") => m.content.push_str(&s("text")),
                        Some("thinking_delta") => m.reasoning.push_str(&s("thinking")),
                        Some("input_json_delta") => {
                            if let Some(c) = m.tool_calls.last_mut() {
                                c.arguments.push_str(&s("partial_json"));
                            }
                        }
                        _ => {}
                    }
                }
                Some("message_delta") => {
                    if let Some(r) = v.pointer("/delta/stop_reason").and_then(Value::as_str) {
                        m.finish_reason = Some(r.to_owned());
                        finish_event = Some(i);
                    }
                    m.stop_sequence = v
                        .pointer("/delta/stop_sequence")
                        .and_then(Value::as_str)
                        .map(str::to_owned);
                    if let Some(u) = v.get("usage") {
                        m.usage = Some(u.clone());
                    }
                }
                _ => {}
            }
        } else {
            if m.model.is_none() {
                m.model = v.get("model").and_then(Value::as_str).map(str::to_owned);
            }
            if let Some(u) = v.get("usage").filter(|u| !u.is_null()) {
                m.usage = Some(u.clone());
            }
            let Some(ch) = v.pointer("/choices/0") else {
                continue;
            };
            let d = ch.get("delta").cloned().unwrap_or_default();
            if let Some(c) = d.get("content").and_then(Value::as_str) {
                m.content.push_str(c);
            }
            if let Some(r) = d
                .get("reasoning_content")
                .or_else(|| d.get("reasoning"))
                .and_then(Value::as_str)
            {
                m.reasoning.push_str(r);
            }
            for tc in d
                .get("tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let index = tc.get("index").and_then(Value::as_u64);
                let existing = match index {
                    Some(ix) => m.tool_calls.iter().position(|c| c.index == Some(ix)),
                    None => m.tool_calls.len().checked_sub(1),
                };
                let pos = match existing {
                    Some(p) => p,
                    None => {
                        m.tool_calls.push(CallRecord {
                            index,
                            ..Default::default()
                        });
                        m.tool_calls.len() - 1
                    }
                };
                let c = &mut m.tool_calls[pos];
                if let Some(id) = tc.get("id").and_then(Value::as_str) {
                    c.id.get_or_insert_with(|| id.to_owned());
                }
                if let Some(n) = tc
                    .pointer("/function/name")
                    .and_then(Value::as_str)
                    .filter(|_| c.name.is_empty())
                {
                    c.name = n.to_owned();
                }
                if let Some(a) = tc.pointer("/function/arguments").and_then(Value::as_str) {
                    c.arguments.push_str(a);
                }
            }
            if let Some(f) = ch.get("finish_reason").and_then(Value::as_str) {
                m.finish_reason = Some(f.to_owned());
                finish_event = Some(i);
            }
        }
    }
    (m, finish_event)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_stream_without_index_continues_last_call() {
        let body = "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"name\":\"f\",\"arguments\":\"\"}}]}}]}\n\n\
                    data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"function\":{\"arguments\":\"{\\\"a\\\": \"}}]}}]}\n\n\
                    data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"1}\"}}]}}]}\n\n\
                    data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n";
        let (m, ev) = reassemble_fallback(Api::Openai, body);
        assert_eq!(m.tool_calls.len(), 1);
        assert_eq!(m.tool_calls[0].arguments, "{\"a\": 1}");
        assert_eq!(ev, Some(3));
    }

    #[test]
    fn anthropic_stream() {
        let body = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"m\"}}\n\n\
                    event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\"}}\n\n\
                    event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"7 is a \"}}\n\n\
                    event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":\"prime\"}}\n\n";
        let (m, ev) = reassemble_fallback(Api::Anthropic, body);
        assert_eq!(
            (m.reasoning.as_str(), m.stop_sequence.as_deref(), ev),
            ("7 is a ", Some("prime"), Some(3))
        );
    }
}
