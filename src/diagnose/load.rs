//! Building [`ExchangeContext`]s from recorded data: one session exchange, or a bare
//! request/response pair; and the `session.damaged` finding for a skipped line. Session-level
//! facts (the server's render, the `/props` template, the raw output) are added by
//! [`crate::analysis`]. Pure: bytes and values in.

use serde_json::Value;

use super::ExchangeContext;
use crate::finding::{Evidence, Finding, Pane, Rule};
use crate::session::{Api, Body, Exchange, ReadWarning, Request, Response};

/// The `session.damaged` finding for a line of session file `file` the reader skipped (a
/// truncated or unreadable line, a second header). The one place it is built: `check`, the
/// inspector's Findings pane and its damaged list rows all use it. Evidence: pane Findings,
/// the file, an excerpt `line N`.
pub fn damaged_line(file: &str, w: &ReadWarning) -> Finding {
    Finding::new(
        Rule::SessionDamaged,
        format!("{file}: {w}"),
        "the other lines are intact and were checked; the writer was probably interrupted mid-line: re-record the lost exchange if you need it",
    )
    .with_evidence(Evidence {
        pane: Some(Pane::Findings),
        excerpt: Some(format!("line {}", w.line)),
        file: Some(file.to_owned()).filter(|f| !f.is_empty()),
        ..Default::default()
    })
}

/// A `session.damaged` finding when the exchange's POST body is not empty but no JSON reader
/// takes it (not JSON, or nested past serde_json's 128 levels): every request rule is then
/// without input, which must not read as "ok". The message names the body's line and column.
pub fn unreadable_request(e: &Exchange) -> Option<Finding> {
    let body = e.request.body.to_bytes();
    if e.request.method != "POST" || body.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    let err = serde_json::from_slice::<Value>(&body).err()?;
    Some(
        Finding::new(
            Rule::SessionDamaged,
            format!(
                "exchange {}: request body {}:{}: not readable as JSON: {}; its request checks were skipped",
                e.id,
                err.line(),
                err.column(),
                crate::json_reason(&err)
            ),
            "the request as recorded cannot be checked; the client sent a body the server could not read either, or the recording is damaged",
        )
        .in_exchange(Some(e.id))
        .with_evidence(Evidence {
            pane: Some(Pane::Findings),
            excerpt: Some(format!("exchange {}", e.id)),
            ..Default::default()
        }),
    )
}

/// A context for one recorded exchange: request JSON, status, and the response read as a
/// stream (when recorded as chunks or `text/event-stream`: [`crate::stream::decode_exchange`])
/// or a JSON body.
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
    let Some(resp) = &e.response else { return cx };
    cx.status = Some(resp.status);
    let bytes = e.response_bytes();
    let text = String::from_utf8_lossy(&bytes).into_owned();
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
/// `cx.api` would be (OpenAI chat, Anthropic messages, `/completion` / `/v1/completions`,
/// Responses, or an Ollama `/api/chat` NDJSON stream).
pub fn set_stream(cx: &mut ExchangeContext, body: &str) {
    let (path, content_type) = match cx.api {
        Api::Anthropic => ("/v1/messages", "text/event-stream"),
        Api::Completion => ("/completion", "text/event-stream"),
        Api::Responses => ("/v1/responses", "text/event-stream"),
        // Ollama's native stream is NDJSON (crate::stream::ollama)
        Api::Ollama => ("/api/chat", "application/x-ndjson"),
        _ => ("/v1/chat/completions", "text/event-stream"),
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
            headers: vec![("content-type".into(), content_type.into())],
            body: Some(Body::from_bytes(body.as_bytes())),
            chunks: None,
        }),
        ..Default::default()
    };
    if let Some(r) = crate::stream::decode_exchange(&ex) {
        set_reassembled(cx, &r);
    }
    cx.response_text = Some(body.to_owned());
}

/// Stream-contract rules whose findings come from reassembly (the decoder sees the events they
/// judge); argument JSON and the finish reason are rules of diagnose (rules::calls,
/// rules::finish), one implementation each.
const STREAM_RULES: &[Rule] = &[
    Rule::StreamMissingIndex,
    Rule::StreamMissingId,
    Rule::StreamNameRepeated,
    Rule::ServerParseError,
    // the stream contract (SSE and NDJSON: stream::reassemble::contract_findings; Responses
    // streams: crate::stream::responses)
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
    let mut findings: Vec<Finding> = r
        .findings
        .iter()
        .filter(|f| STREAM_RULES.contains(&f.rule))
        .cloned()
        .collect();
    findings.extend(error_events(&r.problems, &findings));
    cx.stream_findings = findings;
    cx.message = Some(r.message.clone());
    cx.raw_text = None;
}

/// The visible text each SSE event added (events that add none are left out), from the
/// reassembly's marks ([`crate::stream::Reassembled::marks`]): OpenAI `delta.content`,
/// Anthropic `text_delta`, `/completion` `content`, `/v1/completions` `choices[0].text`.
fn text_chunks(marks: &[crate::stream::EventMark], content: &str) -> Vec<super::StreamChunk> {
    marks
        .windows(2)
        .enumerate()
        .filter(|(_, w)| w[1].content > w[0].content)
        .map(|(event, w)| super::StreamChunk {
            event,
            text: content
                .get(w[0].content..w[1].content)
                .unwrap_or("")
                .to_owned(),
        })
        .collect()
}

/// The stream's error events (OpenAI-style `data: {"error": …}`, Anthropic `event: error`,
/// an Ollama `{"error": …}` line), each judged once: the server's parse failure is
/// `server.parse_error` ([`super::rules::server::parse_error_event`]; skipped when already in
/// `reported`), anything else `stream.error_event`: the client sees the stream end with an
/// error (context overflow, cancelled slot, backend failure) instead of a finished message.
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
            let msg = p
                .message
                .trim_start_matches("error event: ")
                .trim_start_matches("error line: ");
            if crate::stream::reassemble::is_parse_error_message(msg) {
                return super::rules::server::parse_error_event(p.event, msg);
            }
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

#[cfg(test)]
mod tests {
    use crate::finding::Rule;
    use crate::stream::ollama::{OllamaEndpoint, decode_lines, reassemble_ollama};

    /// An Ollama stream that ends with its tool-call parser's error line (ollama/ollama
    /// server/routes.go: `error parsing tool call: raw='…', err=…`) is one `server.parse_error`,
    /// built by its one owner (rules::server::parse_error_event), not by the Ollama decoder.
    #[test]
    fn ollama_parse_error_line_is_the_one_server_parse_error() {
        let msg = "error parsing tool call: raw='{\"name\": \"get_weather\", \"argu', err=unexpected end of JSON input";
        let lines = format!(
            "{{\"model\":\"m\",\"message\":{{\"role\":\"assistant\",\"content\":\"\"}},\"done\":false}}\n{}\n",
            serde_json::json!({ "error": msg })
        );
        let r = reassemble_ollama(
            &decode_lines([(lines.as_bytes(), None)]),
            OllamaEndpoint::Chat,
        );
        assert!(r.findings.is_empty(), "{:?}", r.findings);
        let got = super::error_events(&r.problems, &r.findings);
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].rule, Rule::ServerParseError);
        assert_eq!(got[0].evidence.event, Some(1));
        assert_eq!(
            got[0].message,
            crate::diagnose::rules::server::parse_error_event(Some(1), msg).message
        );
    }
}
