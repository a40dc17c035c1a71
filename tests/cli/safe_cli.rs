//! Issue #27 items 6, 7, 8, 9, 11 and 13 through the real binary: CLI numbers in checked
//! ranges, `import` redacting and validating toolscope's own HAR fields, a closed stdout that
//! stops printing but not recording, hostile text shown, never obeyed, and `check` failing a
//! broken stream.

use crate::support;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::json;

fn run(args: &[&str]) -> std::process::Output {
    Command::new(support::bin()).args(args).output().unwrap()
}

#[test]
fn out_of_range_numbers_exit_2_naming_the_flag() {
    for (args, flag) in [
        (
            vec![
                "proxy",
                "--upstream",
                "http://127.0.0.1:9",
                "--headless",
                "--grace",
                "inf",
            ],
            "--grace",
        ),
        (
            vec![
                "proxy",
                "--upstream",
                "http://127.0.0.1:9",
                "--headless",
                "--grace",
                "1e300",
            ],
            "--grace",
        ),
        (
            vec![
                "proxy",
                "--upstream",
                "http://127.0.0.1:9",
                "--headless",
                "--grace",
                "NaN",
            ],
            "--grace",
        ),
        (vec!["serve", "x.jsonl", "--timing", "x1e-320"], "--timing"),
        (vec!["serve", "x.jsonl", "--timing", "x1e-12"], "--timing"),
        (vec!["serve", "x.jsonl", "--timing", "xinf"], "--timing"),
        (
            vec!["flatten", "t.json", "--recursion-depth", "99999999999"],
            "--recursion-depth",
        ),
        (
            vec![
                "probe",
                "http://127.0.0.1:9",
                "--timeout",
                "18446744073709551615",
            ],
            "--timeout",
        ),
    ] {
        let out = run(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(flag), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

fn har(
    entry_extra: serde_json::Value,
    header: serde_json::Value,
    status: u64,
) -> serde_json::Value {
    let mut entry = json!({
        "startedDateTime": "2026-01-01T00:00:00.000Z", "time": 1,
        "request": {"method": "POST", "url": "http://127.0.0.1:8080/v1/chat/completions",
                    "headers": [], "postData": {"mimeType": "application/json", "text": "{}"}},
        "response": {"status": status, "headers": [], "content": {"mimeType": "application/json", "text": "{}"}},
        "timings": {"send": 0, "wait": 1, "receive": 0},
    });
    if !entry_extra.is_null() {
        entry["_toolscope"] = entry_extra;
    }
    let mut log = json!({"version": "1.2", "creator": {"name": "t"}, "entries": [entry]});
    if !header.is_null() {
        log["_toolscope_header"] = header;
    }
    json!({ "log": log })
}

fn import(dir: &Path, har: &serde_json::Value) -> (std::process::Output, String) {
    let src = dir.join("in.har");
    std::fs::write(&src, har.to_string()).unwrap();
    let out_path = dir.join("out.jsonl");
    let out = run(&[
        "import",
        src.to_str().unwrap(),
        "-o",
        out_path.to_str().unwrap(),
        "--force",
    ]);
    let text = std::fs::read_to_string(&out_path).unwrap_or_default();
    let _ = std::fs::remove_file(&out_path);
    (out, text)
}

#[test]
fn import_redacts_and_validates_its_own_har_fields() {
    let dir = tempfile::tempdir().unwrap();
    let header = json!({"type": "header", "format": "toolscope-session/1", "created": "2026-01-01T00:00:00Z",
                        "tool": "toolscope", "upstream": "http://user:PASS-SECRET@127.0.0.1:8080/?api_key=KEY-SECRET"});
    let (out, text) = import(
        dir.path(),
        &har(
            json!({"id": 1, "path": "/v1/chat/completions?key=PATH-SECRET&x=1"}),
            header.clone(),
            200,
        ),
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(!text.contains("SECRET"), "{text}");
    assert!(text.contains("[redacted]"), "{text}");
    // a format every reader refuses is refused here too, naming the field
    let mut v2 = header.clone();
    v2["format"] = json!("toolscope-session/2");
    let (out, text) = import(dir.path(), &har(serde_json::Value::Null, v2, 200));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("_toolscope_header.format"), "{err}");
    assert!(text.is_empty());
    // statuses outside 100-599 are refused, not wrapped into range
    for status in [65736u64, 70000, 99, 600] {
        let (out, _) = import(
            dir.path(),
            &har(serde_json::Value::Null, serde_json::Value::Null, status),
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{status}: {err}");
        assert!(err.contains("response.status"), "{status}: {err}");
    }
}

/// A streamed chat exchange whose SSE body is `body`, with outcome `complete`.
fn stream_session(dir: &Path, body: &str) -> String {
    let lines = [
        json!({"type": "header", "format": "toolscope-session/1", "created": "2026-01-01T00:00:00Z", "tool": "test"}),
        json!({"type": "exchange", "id": 1, "started": "2026-01-01T00:00:00Z",
               "request": {"method": "POST", "path": "/v1/chat/completions",
                           "headers": [["content-type", "application/json"]],
                           "body": {"text": "{\"model\":\"m\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}"}},
               "response": {"status": 200, "headers": [["content-type", "text/event-stream"]],
                            "chunks": [{"t_us": 1000, "text": body}]},
               "timings": {"ttfb_us": 1000, "total_us": 2000}, "outcome": "complete"}),
    ];
    let p = dir.join("s.jsonl");
    std::fs::write(
        &p,
        lines.iter().map(|l| format!("{l}\n")).collect::<String>(),
    )
    .unwrap();
    p.to_string_lossy().into_owned()
}

#[test]
fn check_fails_a_broken_stream() {
    let dir = tempfile::tempdir().unwrap();
    let ok = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n";
    for (body, rule) in [
        (format!("{ok}data: [DONE]\n\n"), None),
        (ok.to_owned(), Some("stream.no_terminal")),
        (
            format!("data: {{oops\n\n{ok}data: [DONE]\n\n"),
            Some("stream.malformed_event"),
        ),
        (
            format!("{ok}data: [DONE]\n\n{ok}"),
            Some("stream.after_terminal"),
        ),
        (
            format!("{ok}data: {{\"choices\":[{{\"ind"),
            Some("stream.cut_event"),
        ),
    ] {
        let s = stream_session(dir.path(), &body);
        let out = run(&["check", &s, "--format", "json"]);
        let text = String::from_utf8_lossy(&out.stdout);
        match rule {
            None => {
                assert_eq!(out.status.code(), Some(0), "{text}");
                assert!(!text.contains("stream."), "{text}");
            }
            Some(r) => {
                assert_eq!(out.status.code(), Some(1), "{r}: {text}");
                assert!(text.contains(r), "{r}: {text}");
            }
        }
    }
}

const HOSTILE: &str = "\u{1b}]52;c;aGk=\u{7}\u{9b}2J\u{202e}";

fn assert_shown(what: &str, text: &str) {
    for c in ['\u{1b}', '\u{7}', '\u{9b}', '\u{202e}'] {
        assert!(!text.contains(c), "{what}: {c:?} printed raw: {text:?}");
    }
}

#[test]
fn hostile_text_is_shown_never_obeyed() {
    let dir = tempfile::tempdir().unwrap();
    // a session with a damaged line whose bad value serde quotes, a hostile path and model
    let good = json!({"type": "exchange", "id": 1, "started": "2026-01-01T00:00:00Z",
        "request": {"method": "POST", "path": format!("/v1/chat/completions{HOSTILE}"),
                    "headers": [], "body": {"text": format!("{{\"model\":\"{}\",\"messages\":[]}}", "m\\u001b]0;x\\u0007\\u009b\\u202e")}},
        "response": {"status": 200, "headers": [["content-type", "application/json"]],
                     "body": {"text": format!("{{\"choices\":[{{\"message\":{{\"role\":\"assistant\",\"content\":\"{}\"}},\"finish_reason\":\"stop\"}}]}}", "\\u001b]52;c;aGk=\\u0007\\u009b\\u202e")}},
        "timings": {}, "outcome": "complete"});
    let damaged = format!(r#"{{"type":"annotation","kind":"{HOSTILE}","exchange":1}}"#);
    let text = format!(
        "{}\n{good}\n{damaged}\n",
        json!({"type": "header", "format": "toolscope-session/1", "created": "2026-01-01T00:00:00Z", "tool": "t"})
    );
    let s = dir.path().join("h.jsonl");
    std::fs::write(&s, text).unwrap();
    let s = s.to_str().unwrap();
    for args in [
        vec!["check", s],
        vec!["export", s, "--format", "har"],
        vec!["export", s, "--format", "otel"],
        vec!["diff", s, "--against", s],
        vec![
            "resend",
            s,
            "--url",
            "http://127.0.0.1:9",
            "--session",
            "/dev/null/x",
        ],
    ] {
        let out = run(&args);
        // stdout of export is JSON (escapes are JSON's); the text lines are checked
        if args[0] != "export" {
            assert_shown(
                &format!("{args:?} stdout"),
                &String::from_utf8_lossy(&out.stdout),
            );
        }
        assert_shown(
            &format!("{args:?} stderr"),
            &String::from_utf8_lossy(&out.stderr),
        );
    }
}

/// Issue #27 item 7 on the other subcommands that print what their input says: `parse` (a raw
/// text with a hostile call name and content),
/// `render --format json` (a template and request printing it: the text form writes the prompt
/// byte for byte into a pipe, and through the sanitiser only on a terminal), `flatten` (a
/// hostile tool name and description), `import` (a HAR whose URL and model carry
/// it), `serve` (the damaged-line warning of a hostile session, before its bind fails), and
/// `try` / `regenerate` against a closed port (their lines name the hostile path and model).
/// The escapes here are raw in the files; nothing printed may carry them raw.
#[test]
fn hostile_text_on_every_other_subcommand_is_shown_never_obeyed() {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str, text: String| {
        let f = dir.path().join(name);
        std::fs::write(&f, text).unwrap();
        f.to_str().unwrap().to_owned()
    };
    let h = serde_json::to_string(HOSTILE).unwrap(); // a JSON string holding the raw escapes
    let raw = p(
        "raw.txt",
        format!(
            "{HOSTILE}<tool_call>\n{{\"name\": {h}, \"arguments\": {{\"a\": {h}}}}}\n</tool_call>"
        ),
    );
    let tools = p(
        "tools.json",
        format!(
            r#"[{{"type":"function","function":{{"name":{h},"description":{h},"parameters":{{"type":"object","properties":{{"a":{{"anyOf":[{{"type":"string"}},{{"type":"null"}}],"description":{h}}}}}}}}}}}]"#
        ),
    );
    let template = p(
        "t.jinja",
        format!("{HOSTILE}{{% for m in messages %}}{{{{ m.content }}}}{{% endfor %}}"),
    );
    let request = p(
        "req.json",
        format!(r#"{{"model":{h},"messages":[{{"role":"user","content":{h}}}]}}"#),
    );
    let url = format!("http://127.0.0.1:9/v1/chat/completions{HOSTILE}");
    let har = p(
        "h.har",
        json!({"log": {"version": "1.2", "creator": {"name": "t", "version": "1"}, "entries": [{
            "startedDateTime": "2026-01-01T00:00:00.000Z", "time": 1,
            "request": {"method": "POST", "url": url, "httpVersion": "HTTP/1.1", "headers": [],
                        "queryString": [], "cookies": [], "headersSize": -1, "bodySize": -1,
                        "postData": {"mimeType": "application/json",
                                     "text": format!(r#"{{"model":{h},"messages":[]}}"#)}},
            "response": {"status": 200, "statusText": HOSTILE, "httpVersion": "HTTP/1.1",
                         "headers": [], "cookies": [], "redirectURL": "", "headersSize": -1,
                         "bodySize": -1, "content": {"size": 0, "mimeType": "application/json", "text": "{}"}},
            "cache": {}, "timings": {"send": 0, "wait": 1, "receive": 0}}]}})
        .to_string(),
    );
    let good = json!({"type": "exchange", "id": 1, "started": "2026-01-01T00:00:00Z",
        "request": {"method": "POST", "path": format!("/v1/chat/completions{HOSTILE}"),
                    "headers": [], "body": {"text": format!(r#"{{"model":{h},"messages":[{{"role":"user","content":{h}}}]}}"#)}},
        "response": {"status": 500, "headers": [["content-type", "application/json"]],
                     "body": {"text": format!(r#"{{"error":{{"message":{h}}}}}"#)}},
        "timings": {}, "outcome": "complete"});
    let session = p(
        "s.jsonl",
        format!(
            "{}\n{good}\n{}\n",
            json!({"type": "header", "format": "toolscope-session/1", "created": "2026-01-01T00:00:00Z", "tool": "t"}),
            format_args!(r#"{{"type":"annotation","kind":"{HOSTILE}","exchange":1}}"#)
        ),
    );
    let out_session = dir.path().join("o.jsonl");
    let o = out_session.to_str().unwrap();
    for args in [
        vec!["parse", &raw],
        vec!["parse", &raw, "--tools", &tools, "--engines"],
        vec![
            "render",
            "--template",
            &template,
            "--request",
            &request,
            "--format",
            "json",
        ],
        vec!["flatten", &tools],
        vec!["import", &har, "-o", o],
        vec!["serve", &session, "--listen", "203.0.113.1:9"],
        vec![
            "try",
            &session,
            "--exchange",
            "1",
            "--url",
            "http://127.0.0.1:9",
            "--runs",
            "1",
            "--session",
            o,
        ],
        vec![
            "regenerate",
            &session,
            "--exchange",
            "1",
            "--url",
            "http://127.0.0.1:9",
        ],
    ] {
        let out = run(&args);
        assert!(out.status.code().is_some(), "{args:?}: killed by a signal");
        for (name, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
            assert_shown(
                &format!("{:?} {name}", &args[..2]),
                &String::from_utf8_lossy(bytes),
            );
        }
    }
}

#[test]
fn serve_keeps_recording_after_its_stdout_closes_and_its_log_is_shown() {
    let dir = tempfile::tempdir().unwrap();
    let session = support::root().join("sessions/a-two-tools-stream.jsonl");
    let unmatched = dir.path().join("u.jsonl");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = Command::new(support::bin())
        .args([
            "serve",
            session.to_str().unwrap(),
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--timing",
            "fast",
            "--session",
            unmatched.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // wait for the start line, then read one log line and close stdout (`| head -n 1`)
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    assert!(line.contains("toolscope serve"), "{line}");
    let send = |path: &str| {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        write!(
            s,
            "POST {path} HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{{}}"
        )
        .unwrap();
        let mut out = Vec::new();
        let _ = std::io::Read::read_to_end(&mut s, &mut out);
        out
    };
    let first = send("/v1/first%1b%5d0;x%07");
    assert!(!first.is_empty());
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut l = String::new();
    out.read_line(&mut l).unwrap();
    assert_shown("serve log", &l);
    drop(out); // stdout closed
    for i in 0..6 {
        assert!(
            !send(&format!("/v1/after-close/{i}")).is_empty(),
            "request {i}"
        );
    }
    // SIGINT: serve writes its unmatched session and exits 0
    let sent = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success(), "kill -INT");
    let status = support::wait_guarded(&mut child, Duration::from_secs(60), "serve after SIGINT");
    let mut rest = String::new();
    let _ = std::io::Read::read_to_string(&mut err, &mut rest);
    assert!(!rest.contains("panicked"), "{rest}");
    assert_eq!(status.code(), Some(0), "{rest}");
    let recorded = std::fs::read_to_string(&unmatched).unwrap();
    assert_eq!(recorded.lines().count(), 1 + 7, "{recorded}");
}

/// A fake OpenAI upstream on loopback: answers every request (at most 64, then stops) with one
/// chat completion and closes the connection. Returns its `http://` URL.
fn fake_upstream() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    std::thread::spawn(move || {
        for conn in l.incoming().take(64) {
            let Ok(mut s) = conn else { continue };
            let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
            // the head, then `content-length` bytes of body
            let mut got = Vec::new();
            let mut buf = [0u8; 4096];
            let head_end = loop {
                match std::io::Read::read(&mut s, &mut buf) {
                    Ok(0) | Err(_) => break None,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
                if let Some(i) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                    break Some(i + 4);
                }
            };
            let Some(head_end) = head_end else { continue };
            let head = String::from_utf8_lossy(&got[..head_end]).to_ascii_lowercase();
            let len = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            while got.len() < head_end + len {
                match std::io::Read::read(&mut s, &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
            }
            let body = r#"{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}"#;
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    url
}

/// Issue #27 item 6 for the proxy (`toolscope proxy --headless … | head -n 1`): after its
/// stdout closes, the proxy keeps forwarding and recording; SIGINT ends it with exit 0, no
/// panic, and every one of the 6 exchanges in the session.
#[test]
fn proxy_keeps_recording_after_its_stdout_closes() {
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join("p.jsonl");
    let upstream = fake_upstream();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = Command::new(support::bin())
        .args(["proxy", "--headless", "--upstream", &upstream, "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--session")
        .arg(&session)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // the start line on stderr says it listens
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    assert!(line.contains("toolscope proxy"), "{line}");
    let send = |i: usize| {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let body = format!(r#"{{"model":"m{i}","messages":[{{"role":"user","content":"hi"}}]}}"#);
        write!(
            s,
            "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut out = Vec::new();
        let _ = std::io::Read::read_to_end(&mut s, &mut out);
        String::from_utf8_lossy(&out).into_owned()
    };
    let first = send(0);
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    // one per-exchange line, then stdout closed (`| head -n 1`)
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut l = String::new();
    out.read_line(&mut l).unwrap();
    assert!(!l.is_empty(), "no per-exchange line");
    drop(out);
    for i in 1..6 {
        let reply = send(i);
        assert!(reply.starts_with("HTTP/1.1 200"), "request {i}: {reply}");
    }
    let sent = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success(), "kill -INT");
    let status = support::wait_guarded(&mut child, Duration::from_secs(60), "proxy after SIGINT");
    let mut rest = String::new();
    let _ = std::io::Read::read_to_string(&mut err, &mut rest);
    assert!(!rest.contains("panicked"), "{rest}");
    assert_eq!(status.code(), Some(0), "{rest}");
    let recorded = std::fs::read_to_string(&session).unwrap();
    let models: Vec<String> = recorded
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["type"] == "exchange")
        .filter_map(|v| {
            let body: serde_json::Value =
                serde_json::from_str(v["request"]["body"]["text"].as_str()?).ok()?;
            Some(body["model"].as_str()?.to_owned())
        })
        .collect();
    let want: Vec<String> = (0..6).map(|i| format!("m{i}")).collect();
    assert_eq!(models, want, "{recorded}");
}
