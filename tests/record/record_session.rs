//! Session files and HAR import: write → read round trip, a truncated last line, HAR 1.2 with
//! SSE and base64 bodies (hand-written fixture, values checked by hand), redaction, and the
//! CLI's errors on malformed input.
use crate::support;

use std::io::Write;

use serde_json::json;
use toolscope::session::har::{har_to_session, har_to_session_with, session_lines};
use toolscope::session::write::new_header;
use toolscope::session::*;

fn sample_exchange(id: u64) -> Exchange {
    Exchange {
        id,
        started: "2026-11-29T18:00:00.000001Z".into(),
        label: Some("send".into()),
        request: Request {
            method: "POST".into(),
            path: "/v1/chat/completions".into(),
            headers: vec![("content-type".into(), "application/json".into())],
            body: Body::from_bytes(br#"{"model":"m","stream":true}"#),
        },
        response: Some(Response {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            body: None,
            chunks: Some(vec![
                Chunk {
                    t_us: 1200,
                    data: Body::from_bytes(b"data: {\"a\":\"\xc3"),
                },
                Chunk {
                    t_us: 1900,
                    data: Body::from_bytes(b"\xa9\"}\n\ndata: [DONE]\n\n"),
                },
            ]),
        }),
        timings: Timings {
            ttfb_us: Some(1000),
            total_us: Some(2000),
        },
        outcome: Outcome::Complete,
        error: None,
        websocket: None,
    }
}

#[test]
fn write_then_read_round_trips_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let mut header = new_header("2026-11-29T18:00:00Z".into());
    header.upstream = Some("http://127.0.0.1:8080".into());
    header.engine = Some(Server {
        kind: "llama-server".into(),
        version: Some("b11434-unknown".into()),
        model: Some("x.gguf".into()),
    });
    header.props = Some(json!({"chat_template": "{{ messages }}", "bos_token": "<s>"}));
    let mut w = SessionWriter::open(&path, &header).unwrap();
    let e1 = sample_exchange(w.next_id());
    let mut e2 = sample_exchange(w.next_id());
    e2.outcome = Outcome::ClientDisconnected;
    e2.error = Some("client went away".into());
    let ann = Annotation::ServerRender {
        exchange: 1,
        prompt: Some("<s>hi".into()),
        tokens: Some(vec![
            TokenPiece {
                id: 1,
                piece: Piece::Text("<s>".into()),
            },
            TokenPiece {
                id: 7,
                piece: Piece::Bytes(vec![0xe2, 0x96]),
            },
        ]),
        error: None,
    };
    w.append(&Line::Exchange(Box::new(e1.clone()))).unwrap();
    w.append(&Line::Exchange(Box::new(e2.clone()))).unwrap();
    w.append(&Line::Annotation(ann.clone())).unwrap();
    drop(w);
    let s = read_session(&path).unwrap();
    assert!(s.warnings.is_empty());
    assert_eq!(s.header, header);
    assert_eq!(s.exchanges, vec![e1.clone(), e2]);
    assert_eq!(s.annotations[&1], vec![ann]);
    // The chunk split inside "é" is stored as base64 and comes back byte-exact.
    assert!(matches!(
        e1.response.as_ref().unwrap().chunks.as_ref().unwrap()[0].data,
        Body::Base64 { .. }
    ));
    assert_eq!(
        s.exchanges[0].response_bytes(),
        "data: {\"a\":\"é\"}\n\ndata: [DONE]\n\n".as_bytes()
    );
    // Reopening for append continues the ids.
    let mut w = SessionWriter::open(&path, &header).unwrap();
    assert_eq!(w.next_id(), 3);
}

#[test]
fn truncated_last_line_is_reported_with_its_line_number_and_the_rest_opens() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jsonl");
    let mut w = SessionWriter::open(&path, &new_header("2026-11-29T18:00:00Z".into())).unwrap();
    for _ in 0..3 {
        let id = w.next_id();
        w.append(&Line::Exchange(Box::new(sample_exchange(id))))
            .unwrap();
    }
    drop(w);
    // Simulate a crash mid-line: half of a fourth exchange line.
    let line = serde_json::to_string(&Line::Exchange(Box::new(sample_exchange(4)))).unwrap();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    f.write_all(&line.as_bytes()[..line.len() / 2]).unwrap();
    drop(f);
    let s = read_session(&path).unwrap();
    assert_eq!(
        s.exchanges.iter().map(|e| e.id).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    assert_eq!(s.warnings.len(), 1);
    assert_eq!(
        s.warnings[0].line, 5,
        "header is line 1, exchanges 2-4, the cut line is 5"
    );
    assert!(
        s.warnings[0].message.contains("truncated"),
        "{}",
        s.warnings[0]
    );
    // Appending after the damage starts on a fresh line and keeps ids unique: the cut line
    // had taken id 4 (issue #16: reusing it gave two exchanges 4, one of them damaged).
    let mut w = SessionWriter::open(&path, &new_header(String::new())).unwrap();
    let id = w.next_id();
    assert_eq!(id, 5);
    w.append(&Line::Exchange(Box::new(sample_exchange(id))))
        .unwrap();
    drop(w);
    let s = read_session(&path).unwrap();
    assert_eq!(s.exchanges.len(), 4);
    assert_eq!(s.warnings.len(), 1);
}

/// A hand-written HAR 1.2 export: a streamed chat completion (SSE text), a base64 JSON
/// response, and a failed request (status 0).
const HAR: &str = r#"{
  "log": {
    "version": "1.2",
    "creator": {"name": "mitmproxy", "version": "11.0"},
    "entries": [
      {
        "startedDateTime": "2026-11-29T17:00:00.000Z",
        "time": 812.5,
        "request": {
          "method": "POST", "url": "http://127.0.0.1:8080/v1/chat/completions?trace=1", "httpVersion": "HTTP/1.1",
          "headers": [{"name": "Content-Type", "value": "application/json"}, {"name": "Authorization", "value": "Bearer sk-live-123"}, {"name": ":authority", "value": "127.0.0.1:8080"}],
          "postData": {"mimeType": "application/json", "text": "{\"model\":\"qwen\",\"stream\":true}"}
        },
        "response": {
          "status": 200, "statusText": "OK", "httpVersion": "HTTP/1.1",
          "headers": [{"name": "Content-Type", "value": "text/event-stream"}, {"name": "Set-Cookie", "value": "sid=1"}],
          "content": {"size": 0, "mimeType": "text/event-stream", "text": "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\ndata: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"}
        },
        "timings": {"blocked": -1, "dns": -1, "connect": 0.5, "send": 0.25, "wait": 120.25, "receive": 691.5}
      },
      {
        "startedDateTime": "2026-11-29T17:00:01.000Z",
        "time": 10,
        "request": {"method": "GET", "url": "http://127.0.0.1:8080/v1/models", "headers": []},
        "response": {"status": 200, "headers": [], "content": {"mimeType": "application/json", "encoding": "base64", "text": "eyJkYXRhIjpbXX0="}},
        "timings": {"send": 0, "wait": 4, "receive": 6}
      },
      {
        "startedDateTime": "2026-11-29T17:00:02.000Z",
        "time": -1,
        "request": {"method": "POST", "url": "http://127.0.0.1:8080/v1/messages", "headers": [], "postData": {"text": "{}"}},
        "response": {"status": 0, "headers": [], "content": {"size": 0, "mimeType": "x-unknown"}},
        "timings": {"send": 0, "wait": 0, "receive": 0},
        "_error": "Connection refused"
      }
    ]
  }
}"#;

#[test]
fn har_import_keeps_sse_bodies_base64_and_failures() {
    let har: serde_json::Value = serde_json::from_str(HAR).unwrap();
    let s = har_to_session("fixture.har", &har).unwrap();
    assert_eq!(s.header.format, FORMAT);
    assert_eq!(s.header.created, "2026-11-29T17:00:00.000Z");
    assert_eq!(s.header.upstream.as_deref(), Some("http://127.0.0.1:8080"));
    assert_eq!(
        s.header.source.as_deref(),
        Some("import:fixture.har (HAR mitmproxy 11.0)")
    );
    assert_eq!(s.exchanges.len(), 3);

    let e = &s.exchanges[0];
    assert_eq!(
        (e.id, e.request.method.as_str(), e.request.path.as_str()),
        (1, "POST", "/v1/chat/completions?trace=1")
    );
    assert_eq!(e.api(), Api::Openai);
    assert_eq!(e.model().as_deref(), Some("qwen"));
    assert_eq!(
        e.request.headers,
        vec![
            ("content-type".to_owned(), "application/json".to_owned()),
            ("authorization".to_owned(), "Bearer [redacted]".to_owned())
        ]
    );
    // ttfb = connect 0.5 + send 0.25 + wait 120.25 = 121 ms (negative parts ignored); total 812.5 ms.
    assert_eq!(
        e.timings,
        Timings {
            ttfb_us: Some(121_000),
            total_us: Some(812_500)
        }
    );
    let r = e.response.as_ref().unwrap();
    assert!(
        r.headers
            .contains(&("set-cookie".into(), "[redacted]".into()))
    );
    let chunks = r.chunks.as_ref().expect("SSE body split into chunks");
    assert_eq!(chunks.len(), 3, "one chunk per SSE event");
    assert!(chunks.iter().all(|c| c.t_us == 121_000));
    assert_eq!(chunks[2].data.to_text(), "data: [DONE]\n\n");
    assert_eq!(
        String::from_utf8(e.response_bytes()).unwrap(),
        "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\ndata: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"
    );

    let e = &s.exchanges[1];
    assert_eq!(
        e.response
            .as_ref()
            .unwrap()
            .body
            .as_ref()
            .unwrap()
            .to_text(),
        r#"{"data":[]}"#
    );
    assert_eq!(e.timings.total_us, Some(10_000));

    let e = &s.exchanges[2];
    assert_eq!(e.outcome, Outcome::UpstreamError);
    assert_eq!(e.error.as_deref(), Some("Connection refused"));
    assert!(e.response.is_none());
    assert_eq!(e.timings.total_us, None);

    let kept = har_to_session_with("fixture.har", &har, true).unwrap();
    assert_eq!(kept.exchanges[0].request.headers[1].1, "Bearer sk-live-123");
    // The lines written by `import` read back as the same session.
    let mut bytes = Vec::new();
    for l in session_lines(&s) {
        bytes.extend(serde_json::to_vec(&l).unwrap());
        bytes.push(b'\n');
    }
    let back = read_session_bytes("x", &bytes).unwrap();
    assert_eq!(back.exchanges, s.exchanges);
    assert_eq!(back.header, s.header);
}

#[test]
fn har_structure_errors_name_the_entry() {
    let no_log = har_to_session("a.har", &json!({"entries": []})).unwrap_err();
    assert!(
        format!("{no_log:#}").contains("a.har: not a HAR file"),
        "{no_log:#}"
    );
    let bad = json!({"log": {"entries": [{"request": {"method": "GET", "url": "http://h/"}, "startedDateTime": "2026-01-01T00:00:00Z"},
                                         {"request": {"method": "GET"}}]}});
    let e = har_to_session("b.har", &bad).unwrap_err();
    assert_eq!(
        format!("{e:#}"),
        "b.har: log.entries[1].request.url is missing or not a string"
    );
}

#[test]
fn import_cli_reports_json_position_and_writes_a_readable_session() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.har");
    std::fs::write(&bad, "{\n  \"log\": {\n    \"entries\": [ }\n}").unwrap();
    let out = std::process::Command::new(support::bin())
        .args(["import", bad.to_str().unwrap(), "-o"])
        .arg(dir.path().join("x.jsonl"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.har:3:18: invalid JSON: expected value\n"),
        "{err}"
    );

    let good = dir.path().join("good.har");
    std::fs::write(&good, HAR).unwrap();
    let target = dir.path().join("sessions/imported.jsonl");
    let out = std::process::Command::new(support::bin())
        .args([
            "import",
            good.to_str().unwrap(),
            "-o",
            target.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = read_session(&target).unwrap();
    assert_eq!(s.exchanges.len(), 3);
    assert!(
        !std::fs::read_to_string(&target)
            .unwrap()
            .contains("sk-live-123"),
        "secrets redacted in the file"
    );
    // Refuses to overwrite.
    let again = std::process::Command::new(support::bin())
        .args([
            "import",
            good.to_str().unwrap(),
            "-o",
            target.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(2));
}
