//! Server-side failures visible in the response.

use serde_json::Value;

use crate::diagnose::ExchangeContext;
use crate::diagnose::markup::excerpt;
use crate::finding::{Evidence, Finding, Pane, Rule};

/// `server.parse_error`: the server answered an error (HTTP ≥ 400, or an `error` object in the
/// body or stream) produced by its own tool-call/output parser, e.g. llama-server's HTTP 500
/// `The model produced output that does not match the expected peg-native format`.
/// Evidence: `/error/message` of the body, or the byte offset of the message in a stream.
pub fn parse_error(cx: &ExchangeContext) -> Vec<Finding> {
    let Some(text) = cx.response_text.as_deref() else {
        return Vec::new();
    };
    // reported with its event number: by stream reassembly, or as the stream's error event
    let in_stream = |f: &Finding| f.rule == Rule::ServerParseError;
    if cx.stream_findings.iter().any(in_stream)
        || crate::diagnose::input::error_events(&cx.stream_errors, &cx.stream_findings)
            .iter()
            .any(in_stream)
    {
        return Vec::new();
    }
    let errorish = cx.failed() || text.contains("\"error\"");
    if !errorish {
        return Vec::new();
    }
    let Some(at) = crate::stream::reassemble::parse_error_at(text) else {
        return Vec::new();
    };
    let message = cx
        .response_json
        .as_ref()
        .and_then(|b| {
            b.pointer("/error/message")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_else(|| {
            let start = text[..at].rfind('"').map(|i| i + 1).unwrap_or(at);
            excerpt(text, start, 160)
                .split('"')
                .next()
                .unwrap_or("")
                .to_owned()
        });
    let format = message
        .split("expected ")
        .nth(1)
        .map(|s| s.trim_end_matches(" format").trim().to_owned());
    let status = cx
        .status
        .map(|s| format!("HTTP {s}"))
        .unwrap_or_else(|| "an error".into());
    let pointer = cx
        .response_json
        .as_ref()
        .and_then(|b| b.pointer("/error/message"))
        .map(|_| "/error/message".to_owned());
    vec![Finding::new(
        Rule::ServerParseError,
        format!("the server's own output parser failed ({status}): {message}"),
        match format {
            Some(f) => format!("the model drifted from the {f} call syntax: inspect the raw text (llama-server -v), fix the template or prefill, or parse the raw text client-side"),
            None => "the model drifted from the call syntax the server expects: inspect the raw text (llama-server -v) and the template".to_owned(),
        },
    )
    .with_evidence(Evidence { pane: Some(Pane::Replay), pointer, offset: if cx.response_json.is_some() { None } else { Some(at) }, excerpt: Some(message), ..Default::default() })]
}

/// `server.parse_error` for a stream that ended with the server's parse failure as an error
/// event (`data: {"error": …}`, Anthropic `event: error`, an Ollama `{"error": …}` line):
/// event number `event`, error message `msg` ([`crate::stream::reassemble::is_parse_error_message`]).
/// Evidence: pane stream, the event, excerpt of the message.
pub fn parse_error_event(event: Option<usize>, msg: &str) -> Finding {
    let excerpt = crate::stream::reassemble::excerpt(msg);
    Finding::new(
        Rule::ServerParseError,
        format!("the server ended the stream with a parse error: {excerpt}"),
        "Regenerate the exchange as a raw completion and replay toolscope's parser on the raw text to see where the output broke the expected format.",
    )
    .with_evidence(Evidence {
        pane: Some(Pane::Stream),
        event,
        excerpt: Some(excerpt),
        ..Default::default()
    })
}

/// `server.call_mismatch`: the server's `tool_calls` differ from toolscope's parse of the raw
/// generated text (`cx.raw_text`, llama-server `-v` `__verbose.content`): calls merged into
/// one, mangled (other name or arguments), or dropped altogether
/// ([`crate::diagnose::compare::compare_calls`]). A call left in the text is
/// `tool_call.leaked_as_text`, not this. Syntax: the template's markers, else the raw text's;
/// tools: the request's. Evidence: pane replay, byte offset of the call in the raw text, tool.
pub fn call_mismatch(cx: &ExchangeContext) -> Vec<Finding> {
    let (Some(raw), Some(m)) = (cx.raw_text.as_deref(), cx.message.as_ref()) else {
        return Vec::new();
    };
    let syntax = cx
        .template
        .as_deref()
        .and_then(crate::parser::Syntax::detect_from_template)
        .or_else(|| crate::parser::Syntax::detect_from_text(raw));
    let tools = cx.request.as_ref().and_then(|r| r.get("tools"));
    let parsed = crate::parser::parse(raw, syntax, tools);
    let cmp = crate::diagnose::compare::compare_calls(m, raw, &parsed);
    comparison_findings(m, raw, &parsed, &cmp)
}

/// The `server.call_mismatch` findings of a server-vs-toolscope call comparison
/// ([`crate::diagnose::compare`]), one per discrepancy in its order: a merged or mangled call
/// (the server's parser produced a wrong call), a missed call the server dropped altogether. A
/// missed call whose text stayed in content or reasoning is `tool_call.leaked_as_text`, found
/// by the leaked-markup rule on that text; an extra server call gets none. `server` is the server's answer, `raw` the text `parsed` was parsed
/// from. Evidence: pane replay, the call's byte offset in `raw` (when the parse kept its span)
/// and excerpt, the tool.
pub fn comparison_findings(
    server: &crate::stream::AssistantMessage,
    raw: &str,
    parsed: &crate::parser::ParseOutput,
    cmp: &crate::diagnose::compare::CallComparison,
) -> Vec<Finding> {
    use crate::diagnose::compare::Discrepancy;
    let (sc, pc) = (&server.tool_calls, &parsed.tool_calls);
    cmp.discrepancies
        .iter()
        .filter_map(|d| match d {
            Discrepancy::Merged { server: si, parsed: idx } => {
                let names: Vec<&str> = idx.iter().map(|&i| pc[i].name.as_str()).collect();
                Some(
                    Finding::new(
                        Rule::ServerCallMismatch,
                        format!(
                            "the server merged {} calls ({}) into one tool call \"{}\" with arguments {}",
                            idx.len(),
                            names.join(", "),
                            sc[*si].name,
                            sc[*si].arguments
                        ),
                        "The server's tool-call parser joined parallel calls; parse the raw text yourself or disable parallel tool calls.",
                    )
                    .with_evidence(call_evidence(raw, idx.first().and_then(|&i| pc[i].span), &sc[*si].name)),
                )
            }
            Discrepancy::Mangled {
                server: si,
                parsed: pi,
                name_differs,
                args_differs,
            } => {
                let (s, p) = (&sc[*si], &pc[*pi]);
                let what = match (name_differs, args_differs) {
                    (true, true) => format!("name \"{}\" and arguments {}", s.name, s.arguments),
                    (true, false) => format!("name \"{}\"", s.name),
                    _ => format!("arguments {}", s.arguments),
                };
                Some(
                    Finding::new(
                        Rule::ServerCallMismatch,
                        format!("the server returned call {si} with {what}, but the raw text has {}({})", p.name, p.arguments),
                        "The server's tool-call parser mangled the call; compare the raw text in the replay pane.",
                    )
                    .with_evidence(call_evidence(raw, p.span, &p.name)),
                )
            }
            // a call left in content or reasoning is `tool_call.leaked_as_text`, the leaked
            // markup rule's (rules/calls.rs), not reported again here
            Discrepancy::Missed { parsed: pi, in_text } if in_text == "dropped" => {
                let p = &pc[*pi];
                Some(
                    Finding::new(
                        Rule::ServerCallMismatch,
                        format!(
                            "the raw text has a call {}({}) that the server neither returned as a tool call nor kept as text",
                            p.name, p.arguments
                        ),
                        "The server's parser did not recognise this call syntax (or tool calling was off for the request): force the template's syntax, or parse the text client-side.",
                    )
                    .with_evidence(call_evidence(raw, p.span, &p.name)),
                )
            }
            Discrepancy::Missed { .. } => None,
            Discrepancy::Extra { .. } => None,
        })
        .collect()
}

/// Evidence for a call at `span` of `raw`: pane replay, offset, excerpt (120 characters), tool.
fn call_evidence(raw: &str, span: Option<(usize, usize)>, tool: &str) -> Evidence {
    Evidence {
        pane: Some(Pane::Replay),
        tool: (!tool.is_empty()).then(|| tool.to_owned()),
        offset: span.map(|s| s.0),
        excerpt: span.and_then(|(a, b)| raw.get(a..b)).map(|t| {
            let mut e: String = t.chars().take(120).collect();
            if e.len() < t.len() {
                e.push('…');
            }
            e
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::Api;
    use serde_json::json;

    /// The facts of an OpenAI exchange whose response is `body` with `status`.
    fn replied(status: u16, body: &str) -> ExchangeContext {
        let mut ex = crate::analysis::facts::bare_exchange(Api::Openai, None, None);
        ex.response = Some(crate::session::Response {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: Some(crate::session::Body::from_bytes(body.as_bytes())),
            chunks: None,
        });
        crate::analysis::facts::exchange_context(&ex)
    }

    #[test]
    fn llama_server_500_is_a_parse_error() {
        let body = json!({"error": {"code": 500, "message": "The model produced output that does not match the expected peg-native format", "type": "server_error"}});
        let cx = replied(500, &body.to_string());
        let f = parse_error(&cx);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].rule, Rule::ServerParseError);
        assert_eq!(f[0].evidence.pointer.as_deref(), Some("/error/message"));
        assert!(f[0].hint.contains("peg-native"), "{}", f[0].hint);
    }

    /// One wording list for a body and a stream: each engine's parse-failure message is
    /// `server.parse_error` whether the server answered it as an HTTP 500 body or as an error
    /// event (then with its event number, and not also `stream.error_event`); a request-side
    /// "parse error" (llama-server's invalid-JSON answer) is neither.
    #[test]
    fn one_wording_for_bodies_and_stream_events() {
        use crate::diagnose::check_exchange;
        let parse_failures = [
            "The model produced output that does not match the expected peg-native format",
            "Failed to parse tool call arguments as JSON: [json.exception.parse_error.101]",
            "error parsing tool call: raw='{\"name\": \"get\"', err=unexpected end of JSON input",
        ];
        for (msg, is_parse) in parse_failures
            .iter()
            .map(|m| (*m, true))
            .chain([("JSON parse error: invalid request body", false)])
        {
            let err = json!({"error": {"code": 500, "message": msg}});
            let cx = replied(500, &err.to_string());
            assert_eq!(parse_error(&cx).len(), usize::from(is_parse), "body: {msg}");

            let body = format!(
                "data: {}\n\ndata: {err}\n\n",
                json!({"choices": [{"index": 0, "delta": {"content": "Hel"}}]})
            );
            let mut cx = ExchangeContext::new(Api::Openai);
            crate::analysis::facts::set_stream(&mut cx, &body);
            let all = check_exchange(&cx);
            let pe: Vec<&Finding> = all
                .iter()
                .filter(|f| f.rule == Rule::ServerParseError)
                .collect();
            let ee = all
                .iter()
                .filter(|f| f.rule == Rule::StreamErrorEvent)
                .count();
            if is_parse {
                assert_eq!(pe.len(), 1, "stream: {msg}: {all:?}");
                assert_eq!(pe[0].evidence.event, Some(1), "{msg}");
                assert_eq!(ee, 0, "{msg}");
            } else {
                assert!(pe.is_empty(), "stream: {msg}: {all:?}");
                assert_eq!(ee, 1, "{msg}");
            }
        }
    }

    #[test]
    fn other_errors_are_not() {
        let cx = replied(500, r#"{"error":{"message":"context size exceeded"}}"#);
        assert!(parse_error(&cx).is_empty());
        let cx = replied(200, "the answer does not match the expected value");
        assert!(parse_error(&cx).is_empty());
    }

    fn verbose_reply(raw: &str, calls: &[(&str, &str)]) -> ExchangeContext {
        let mut resp = crate::diagnose::rules::testutil::oa_resp(None, calls, "tool_calls");
        resp["__verbose"] = json!({"content": raw});
        let req = json!({"tools": crate::diagnose::rules::testutil::two_tools()});
        crate::diagnose::rules::testutil::openai(req, resp)
    }

    #[test]
    fn merged_mangled_and_dropped_calls_are_call_mismatches() {
        let raw = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lisbon\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Porto\"}}\n</tool_call>";
        // Agreement: nothing to say.
        let ok = verbose_reply(
            raw,
            &[
                ("get_weather", "{\"city\":\"Lisbon\"}"),
                ("get_weather", "{\"city\":\"Porto\"}"),
            ],
        );
        assert!(call_mismatch(&ok).is_empty());
        // The two calls concatenated into one.
        let merged = verbose_reply(
            raw,
            &[("get_weather", "{\"city\":\"Lisbon\"}{\"city\":\"Porto\"}")],
        );
        let f = call_mismatch(&merged);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].rule, Rule::ServerCallMismatch);
        assert!(f[0].message.contains("merged 2 calls"), "{}", f[0].message);
        assert_eq!(f[0].evidence.offset, Some(0));
        // check_exchange reports it, and not as a parse error.
        let all = crate::diagnose::check_exchange(&merged);
        assert!(
            all.iter().any(|f| f.rule == Rule::ServerCallMismatch),
            "{all:?}"
        );
        assert!(
            !all.iter().any(|f| f.rule == Rule::ServerParseError),
            "{all:?}"
        );
        // Mangled: Porto became Paris.
        let mangled = verbose_reply(
            raw,
            &[
                ("get_weather", "{\"city\":\"Lisbon\"}"),
                ("get_weather", "{\"city\":\"Paris\"}"),
            ],
        );
        let f = call_mismatch(&mangled);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(
            f[0].evidence.offset,
            raw.find("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Porto")
        );
        // Dropped: one call delivered, the other neither a call nor text.
        let dropped = verbose_reply(raw, &[("get_weather", "{\"city\":\"Lisbon\"}")]);
        let f = call_mismatch(&dropped);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(
            f[0].message.contains("neither returned"),
            "{}",
            f[0].message
        );
        // No raw text: nothing to compare.
        let mut bare = merged.clone();
        bare.raw_text = None;
        assert!(call_mismatch(&bare).is_empty());
    }
}
