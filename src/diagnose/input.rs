//! Findings about the input itself rather than the model's behaviour: a session line the
//! reader skipped and a request body no JSON reader takes (`session.damaged`), and a stream's
//! error events (`stream.error_event`, or the server's parse failure). Pure: the facts
//! [`crate::analysis::facts`] assembled in, findings out.

use serde_json::Value;

use crate::finding::{Evidence, Finding, Pane, Rule};
use crate::session::{Exchange, ReadWarning};

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
///
/// A body sent with a `content-encoding` is read decoded
/// ([`crate::session::Exchange::request_body_decoded`]); one that cannot be decoded (unknown
/// coding, corrupt, or past [`crate::session::encoding::DECODED_CAP`] — a decompression bomb)
/// is a `request.body_undecodable` finding naming the coding, the size and why.
pub fn unreadable_request(e: &Exchange) -> Option<Finding> {
    if e.request.method != "POST" || e.request.body.is_empty() {
        return None;
    }
    let body = match e.request_body_decoded() {
        Ok(b) => b,
        Err(err) => {
            return Some(
                Finding::new(
                    Rule::RequestBodyUndecodable,
                    format!(
                        "exchange {}: request body ({} bytes as sent): {err}; its request checks were skipped",
                        e.id,
                        e.request.body.len()
                    ),
                    "the bytes are recorded and were forwarded as sent; toolscope reads gzip, deflate, zstd and br up to 32 MiB decoded (docs/record.md, compressed bodies)",
                )
                .in_exchange(Some(e.id))
                .with_evidence(Evidence {
                    pane: Some(Pane::Findings),
                    excerpt: Some(format!("exchange {}", e.id)),
                    ..Default::default()
                }),
            );
        }
    };
    if body.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    let err = serde_json::from_slice::<Value>(&body).err()?;
    let decoded = if e.request_is_encoded() {
        " (decoded from its content-encoding)"
    } else {
        ""
    };
    Some(
        Finding::new(
            Rule::SessionDamaged,
            format!(
                "exchange {}: request body{decoded} {}:{}: not readable as JSON: {}; its request checks were skipped",
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
