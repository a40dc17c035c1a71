//! `toolscope probe` without a model: an unreachable server gives INCONCLUSIVE lines, exit 2,
//! and a session that still records every attempt; a canned server that always calls
//! get_weather shows the named and none faults.

use crate::support;

use std::io::Write;
use std::net::TcpListener;
use std::process::Command;

#[test]
fn unreachable_server_is_inconclusive_and_recorded() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    }; // closed again: nothing listens
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join("p.jsonl");
    let url = format!("http://127.0.0.1:{port}");
    let out = Command::new(support::bin())
        .args([
            "probe",
            &url,
            "--api",
            "openai",
            "--timeout",
            "5",
            "--session",
            session.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert_eq!(text.matches("INCONCLUSIVE").count(), 6, "{text}");
    let s = toolscope::session::read_session(&session).unwrap();
    assert_eq!(s.exchanges.len(), 6);
    assert!(s.exchanges.iter().all(|e| e.error.is_some()));
    assert_eq!(s.exchanges[0].label.as_deref(), Some("probe:baseline"));
}

/// A server that answers every request with the same get_weather call.
fn canned_server() -> (String, std::thread::JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    let h = std::thread::spawn(move || {
        for _ in 0..6 {
            let Ok((mut s, _)) = l.accept() else { return };
            let _ = support::read_http_request_sync(&mut s);
            let body = r#"{"object":"chat.completion","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Lisbon\"}"}}]}}]}"#;
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (url, h)
}

#[test]
fn canned_call_shows_named_and_none_faults() {
    let (url, h) = canned_server();
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join("p.jsonl");
    let out = Command::new(support::bin())
        .args([
            "probe",
            &url,
            "--api",
            "openai",
            "--timeout",
            "10",
            "--session",
            session.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    h.join().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    let line = |c: &str| {
        text.lines()
            .find(|l| l.split_whitespace().nth(1) == Some(c))
            .unwrap_or_else(|| panic!("no {c} line: {text}"))
            .to_owned()
    };
    assert!(line("baseline").contains("INFO"), "{text}");
    assert!(line("named_tool").contains("IGNORED"), "{text}");
    assert!(line("none").contains("IGNORED"), "{text}");
    assert!(line("required").contains("HONORED"), "{text}");
    // a tool call where reasoning/an answer was wanted proves nothing about stop strings
    assert!(line("stop_in_reasoning").contains("INCONCLUSIVE"), "{text}");
    assert!(line("stop_in_answer").contains("INCONCLUSIVE"), "{text}");
}
