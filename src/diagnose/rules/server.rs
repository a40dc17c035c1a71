//! Server-side failures visible in the response.

use serde_json::Value;

use crate::diagnose::ExchangeContext;
use crate::diagnose::markup::excerpt;
use crate::finding::{Evidence, Finding, Pane, Rule};

/// The message llama-server's chat parser throws when the model's output does not fit the
/// format it expected (llama.cpp common/chat.cpp, build 11434:
/// `The model produced output that does not match the expected <format> format`).
pub const LLAMA_PARSE_ERROR: &str = "does not match the expected";

/// Other engines' wording for the same failure (vLLM / SGLang tool parsers, Ollama).
const OTHER_PARSE_ERRORS: &[&str] = &[
    "Failed to parse tool call",
    "error parsing tool call",
    "Failed to parse input at pos",
];

/// `server.parse_error`: the server answered an error (HTTP ≥ 400, or an `error` object in the
/// body or stream) produced by its own tool-call/output parser, e.g. llama-server's HTTP 500
/// `The model produced output that does not match the expected peg-native format`.
/// Evidence: `/error/message` of the body, or the byte offset of the message in a stream.
pub fn parse_error(cx: &ExchangeContext) -> Vec<Finding> {
    let Some(text) = cx.response_text.as_deref() else {
        return Vec::new();
    };
    let errorish = cx.failed() || text.contains("\"error\"");
    if !errorish {
        return Vec::new();
    }
    let hit = std::iter::once(LLAMA_PARSE_ERROR)
        .chain(OTHER_PARSE_ERRORS.iter().copied())
        .find_map(|m| text.find(m).map(|at| (at, m)));
    let Some((at, _)) = hit else {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::Api;
    use serde_json::json;

    #[test]
    fn llama_server_500_is_a_parse_error() {
        let mut cx = ExchangeContext::new(Api::Openai);
        cx.status = Some(500);
        let body = json!({"error": {"code": 500, "message": "The model produced output that does not match the expected peg-native format", "type": "server_error"}});
        cx.response_text = Some(body.to_string());
        cx.response_json = Some(body);
        let f = parse_error(&cx);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].rule, Rule::ServerParseError);
        assert_eq!(f[0].evidence.pointer.as_deref(), Some("/error/message"));
        assert!(f[0].hint.contains("peg-native"), "{}", f[0].hint);
    }

    #[test]
    fn other_errors_are_not() {
        let mut cx = ExchangeContext::new(Api::Openai);
        cx.status = Some(500);
        cx.response_text = Some(r#"{"error":{"message":"context size exceeded"}}"#.into());
        assert!(parse_error(&cx).is_empty());
        cx.status = Some(200);
        cx.response_text = Some("the answer does not match the expected value".into());
        assert!(parse_error(&cx).is_empty());
    }
}
