//! `toolscope try` with text output (not only JSON) against a fake engine whose answers are
//! fixed (tests/support/whatif.rs): the original request (`max_tokens: 12`) is answered
//! without a call, the `max_tokens` fix (12 → 256) with one valid call, so the rates are 0/3
//! and 3/3 by hand, and their 95 % Wilson intervals are computed here in closed form.

use crate::support;

use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use support::whatif;

/// The block of variant `name` in try's text summary: from its name line to the next blank
/// line.
fn block<'a>(text: &'a str, name: &str) -> Vec<&'a str> {
    text.lines()
        .skip_while(|l| *l != name)
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect()
}

fn rate(k: usize, n: usize) -> String {
    let (lo, hi) = whatif::wilson_all_or_none(k, n);
    format!(
        "valid calls {k}/{n} ({:.0} %, 95 % CI {:.0}–{:.0} %)",
        100.0 * k as f64 / n as f64,
        100.0 * lo,
        100.0 * hi
    )
}

#[test]
fn try_prints_each_variants_rate_interval_finish_and_findings() {
    let (url, seen) = whatif::start(Duration::ZERO);
    let dir = tempfile::tempdir().unwrap();
    let session = whatif::write_session(dir.path(), &url);
    let out = Command::new(support::bin())
        .arg("try")
        .arg(&session)
        .args(["--exchange", "1", "--fix", "max_tokens", "--runs", "3"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    // by hand: 0/3 → (0, 1.96²/(3+1.96²)) = (0, 0.5615); 3/3 → (3/(3+1.96²), 1) = (0.4385, 1)
    assert_eq!(rate(0, 3), "valid calls 0/3 (0 %, 95 % CI 0–56 %)");
    assert_eq!(rate(3, 3), "valid calls 3/3 (100 %, 95 % CI 44–100 %)");
    let original = block(&stdout, "original");
    assert_eq!(
        original,
        [
            format!("  {}", rate(0, 3)).as_str(),
            "  finish:   length ×3",
            "  findings: tool_call.leaked_as_text ×3",
            "  repeatable: the same outcome in every run",
        ],
        "{stdout}"
    );
    let fixed = block(&stdout, "max_tokens");
    assert_eq!(
        fixed,
        [
            "  fix:      `max_tokens` raised from 12 to 256: the reply was cut by the token limit",
            format!("  {}", rate(3, 3)).as_str(),
            "  finish:   tool_calls ×3",
            "  findings: none",
            "  repeatable: the same outcome in every run",
        ],
        "{stdout}"
    );
    // what the fake received: three requests as recorded, three with the limit raised
    let limits: Vec<Option<u64>> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|b| b.get("max_tokens").and_then(Value::as_u64))
        .collect();
    assert_eq!(
        limits,
        [Some(12); 3]
            .into_iter()
            .chain([Some(256); 3])
            .collect::<Vec<_>>()
    );
    // progress on stderr, one line per run
    assert_eq!(stderr.matches(" run ").count(), 6, "{stderr}");
    let what_if = dir.path().join("cut.try.jsonl");
    assert!(
        stdout.contains(&format!("recorded in {}", what_if.display())),
        "{stdout}"
    );
    // every run is recorded, labelled try:1:<variant>, and `diff --against` pairs each with #1
    let labels: Vec<String> = std::fs::read_to_string(&what_if)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == "exchange")
        .map(|v| v["label"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(
        labels,
        ["try:1:original"; 3]
            .into_iter()
            .chain(["try:1:max_tokens"; 3])
            .collect::<Vec<_>>()
    );
    let diff = Command::new(support::bin())
        .arg("diff")
        .arg(&session)
        .arg("--against")
        .arg(&what_if)
        .output()
        .unwrap();
    let diff = String::from_utf8_lossy(&diff.stdout).into_owned();
    let pairs: Vec<&str> = diff
        .lines()
        .filter(|l| l.contains(" A #"))
        .map(|l| l.split(':').next().unwrap_or(l))
        .collect();
    assert_eq!(
        pairs,
        [
            "= A #1 ↔ B #1",
            "= A #1 ↔ B #2",
            "= A #1 ↔ B #3",
            "≠ A #1 ↔ B #4",
            "≠ A #1 ↔ B #5",
            "≠ A #1 ↔ B #6",
        ],
        "{diff}"
    );
}

#[test]
fn try_refuses_a_recorded_upstream_whose_credentials_were_redacted() {
    let (url, seen) = whatif::start(Duration::ZERO);
    let dir = tempfile::tempdir().unwrap();
    let redacted = url.replace("http://", "http://[redacted]@");
    let session = whatif::write_session(dir.path(), &redacted);
    let out = Command::new(support::bin())
        .arg("try")
        .arg(&session)
        .args(["--exchange", "1", "--runs", "1"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr
            .contains("the session's upstream credentials were redacted when recorded; pass --url"),
        "{stderr}"
    );
    assert!(seen.lock().unwrap().is_empty(), "nothing is sent");
}

/// A one-thread HTTP server that answers every request with `status` and `body` (JSON).
fn fixed_server(status: &'static str, body: &'static str) -> String {
    use std::io::Write;
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let _ = support::read_http_request_sync(&mut s);
            let resp = format!(
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = s.write_all(resp.as_bytes());
        }
    });
    url
}

fn try_cmd(session: &std::path::Path, extra: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(support::bin())
        .arg("try")
        .arg(session)
        .args(["--exchange", "1"])
        .args(extra)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A run the engine refused shows the HTTP status and the error body's message, and one
/// against an engine that is down says the upstream failed: the runs are tallied as failures.
#[test]
fn a_failed_run_says_the_status_and_the_engines_message() {
    let dir = tempfile::tempdir().unwrap();
    let url = fixed_server(
        "500 Internal Server Error",
        r#"{"error":{"code":500,"message":"boom from the engine","type":"server_error"}}"#,
    );
    let session = whatif::write_session(dir.path(), &url);
    let (code, stdout, stderr) = try_cmd(&session, &["--runs", "2"]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("original run 1/2: error HTTP 500: boom from the engine"),
        "{stderr}"
    );
    assert!(
        block(&stdout, "original")[0].contains(&rate(0, 2)),
        "{stdout}"
    );
    // a closed port: the in-process proxy records the upstream failure
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let down = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let (code, stdout, stderr) = try_cmd(&session, &["--runs", "1", "--url", &down]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.contains("original run 1/1:"))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(line.contains("error ") && line.contains("failed"), "{line}");
}

/// A run the engine does not answer within `--timeout` is cut and tallied as `timeout`: the
/// fake holds the fixed request's answer 30 s, the run ends after about 1 s.
#[test]
fn a_run_past_its_timeout_is_cut_and_tallied() {
    let (url, _seen) = whatif::start(Duration::from_secs(30));
    let dir = tempfile::tempdir().unwrap();
    let session = whatif::write_session(dir.path(), &url);
    let started = std::time::Instant::now();
    let (code, stdout, stderr) = try_cmd(
        &session,
        &["--fix", "max_tokens", "--runs", "1", "--timeout", "1"],
    );
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(started.elapsed() < Duration::from_secs(25), "{stderr}");
    assert!(
        stderr.contains("max_tokens run 1/1: timeout no complete answer within 1 s (cut)"),
        "{stderr}"
    );
    let fixed = block(&stdout, "max_tokens");
    assert!(fixed.iter().any(|l| l.contains("timeout ×1")), "{stdout}");
}

/// A run toolscope cannot make (the what-if session cannot be created: its directory would be a regular file) is not an engine run:
/// `try` stops with the reason and no tally.
#[test]
fn a_run_that_cannot_be_made_here_is_not_tallied() {
    let (url, seen) = whatif::start(Duration::ZERO);
    let dir = tempfile::tempdir().unwrap();
    let session = whatif::write_session(dir.path(), &url);
    // under a regular file: no directory can be made there
    let out = session.join("x.try.jsonl");
    let (code, stdout, stderr) = try_cmd(
        &session,
        &["--runs", "3", "--session", out.to_str().unwrap()],
    );
    assert_ne!(code, Some(0), "{stdout}\n{stderr}");
    assert!(stderr.contains("could not be made here"), "{stderr}");
    assert!(!stdout.contains("valid calls"), "{stdout}");
    assert!(
        seen.lock().unwrap().is_empty(),
        "nothing reached the engine"
    );
}

/// An engine that streams forever (an SSE content delta every 20 ms): each run is cut at
/// `--timeout` with a different amount of text, yet every run has the same outcome (a
/// timeout), so the variant is repeatable, and the progress line gives its reason once.
#[test]
fn runs_cut_by_the_timeout_are_one_outcome() {
    use std::io::Write;
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            std::thread::spawn(move || {
                let Some((head, _)) = support::read_http_request_sync(&mut s) else {
                    return;
                };
                // the proxy's engine probes (GET /props, /v1/models, …) are not the engine
                if !head.starts_with("POST /v1/chat/completions") {
                    let _ = s.write_all(
                        b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                    );
                    return;
                }
                let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
                if s.write_all(head.as_bytes()).is_err() {
                    return;
                }
                let ev = "data: {\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n";
                while s.write_all(ev.as_bytes()).is_ok() {
                    std::thread::sleep(Duration::from_millis(20));
                }
            });
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let session = whatif::write_session(dir.path(), &url);
    let (code, stdout, stderr) = try_cmd(&session, &["--runs", "3", "--timeout", "0.3"]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let original = block(&stdout, "original");
    assert!(
        original.iter().any(|l| l.contains("timeout ×3")),
        "{stdout}"
    );
    assert!(
        original.iter().any(|l| l.contains("repeatable")),
        "{stdout}"
    );
    assert!(!stderr.contains("(cut) ("), "{stderr}");
}
