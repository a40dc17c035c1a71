//! Issue #27 items 3, 4, 8 (serve's part) and 10: `toolscope serve` under hostile and careless
//! clients — long bodies are neither parsed nor echoed nor written twice, idle and trickling
//! connections are closed, secrets in an unmatched request's query are redacted, and partial
//! recordings replay as far as they were recorded.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolscope::record::serve::{HEADER_READ_TIMEOUT, ServeConfig, ServeHandle, Timing};
use toolscope::session::read_session;
use toolscope::session::replay::MatchMode;

fn config(unmatched: PathBuf, timing: Timing) -> ServeConfig {
    ServeConfig {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        timing,
        mode: MatchMode::Sequence,
        unmatched_session: unmatched,
    }
}

fn shipped() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("sessions/a-two-tools-stream.jsonl")
}

/// One raw HTTP/1.1 request on a fresh connection; everything the server sent until it
/// closed, and whether the read ended in an error (a reset) rather than a clean close.
fn raw_request(addr: SocketAddr, method: &str, path: &str, body: &[u8]) -> (Vec<u8>, bool) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return (out, false),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(_) => return (out, true),
        }
    }
}

fn status_of(resp: &[u8]) -> u16 {
    let text = String::from_utf8_lossy(&resp[..resp.len().min(20)]);
    text.split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

/// The body of a chunked response, decoded as far as it goes.
fn dechunk(resp: &[u8]) -> Vec<u8> {
    let start = resp.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let mut rest = &resp[start..];
    let mut out = Vec::new();
    while let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") {
        let Ok(n) = usize::from_str_radix(std::str::from_utf8(&rest[..eol]).unwrap().trim(), 16)
        else {
            break;
        };
        if n == 0 || rest.len() < eol + 2 + n {
            break;
        }
        out.extend_from_slice(&rest[eol + 2..eol + 2 + n]);
        rest = &rest[eol + 2 + n + 2.min(rest.len() - eol - 2 - n)..];
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_body_is_neither_parsed_nor_echoed_nor_written_twice() {
    let dir = tempfile::tempdir().unwrap();
    let unmatched = dir.path().join("u.jsonl");
    let session = read_session(&shipped()).unwrap();
    let h = ServeHandle::spawn(session, config(unmatched.clone(), Timing::Fast), None)
        .await
        .unwrap();
    let addr = h.local_addr();
    // 20 MB: a JSON array of zeros (the shape that cost 114× when parsed)
    let mut big = Vec::with_capacity(20_000_002);
    big.push(b'[');
    for i in 0..10_000_000 {
        big.extend_from_slice(if i == 0 { b"0" } else { b",0" });
    }
    big.push(b']');
    let body = big.clone();
    let (resp, _) = tokio::task::spawn_blocking(move || {
        raw_request(addr, "POST", "/v1/chat/completions", &body)
    })
    .await
    .unwrap();
    assert_eq!(
        status_of(&resp),
        404,
        "{}",
        String::from_utf8_lossy(&resp[..200.min(resp.len())])
    );
    assert!(resp.len() < 8192, "the 404 echoes {} bytes", resp.len());
    // a shorter mismatching body: the differing values are echoed as excerpts
    let mid = format!(
        r#"{{"model":"m","messages":[{{"role":"user","content":"{}"}}]}}"#,
        "y".repeat(50_000)
    );
    let (resp, _) = tokio::task::spawn_blocking(move || {
        raw_request(addr, "POST", "/v1/chat/completions", mid.as_bytes())
    })
    .await
    .unwrap();
    assert_eq!(status_of(&resp), 404);
    assert!(resp.len() < 8192, "the 404 echoes {} bytes", resp.len());
    h.shutdown().await;
    // the unmatched session holds the long body once (its 404 answer is small)
    let size = std::fs::metadata(&unmatched).unwrap().len();
    assert!(
        size > 20_000_000 && size < 20_000_000 + 200_000,
        "unmatched session: {size} bytes"
    );
    let s = read_session(&unmatched).unwrap();
    assert_eq!(s.exchanges.len(), 2);
    assert_eq!(s.exchanges[0].request.body.to_bytes(), big);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_in_an_unmatched_request_are_redacted_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let unmatched = dir.path().join("u.jsonl");
    let session = read_session(&shipped()).unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let h = ServeHandle::spawn(session, config(unmatched.clone(), Timing::Fast), Some(tx))
        .await
        .unwrap();
    let addr = h.local_addr();
    let (resp, _) = tokio::task::spawn_blocking(move || {
        raw_request(
            addr,
            "POST",
            "/v1/chat/completions?key=SECRET-ONE&api_key=SECRET-TWO&x=1",
            b"{}",
        )
    })
    .await
    .unwrap();
    assert_eq!(status_of(&resp), 404);
    let resp = String::from_utf8_lossy(&resp);
    assert!(!resp.contains("SECRET"), "{resp}");
    let logged = rx.recv().await.unwrap().to_string();
    assert!(!logged.contains("SECRET"), "{logged}");
    h.shutdown().await;
    let text = std::fs::read_to_string(&unmatched).unwrap();
    assert!(!text.contains("SECRET"), "{text}");
    assert!(text.contains("[redacted]"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_and_trickling_connections_are_closed() {
    let dir = tempfile::tempdir().unwrap();
    let session = read_session(&shipped()).unwrap();
    let h = ServeHandle::spawn(
        session,
        config(dir.path().join("u.jsonl"), Timing::Fast),
        None,
    )
    .await
    .unwrap();
    let addr = h.local_addr();
    let outcome = tokio::task::spawn_blocking(move || {
        // one connection trickling a header line every 0.5 s
        let mut slow = TcpStream::connect(addr).unwrap();
        slow.write_all(b"GET / HTTP/1.1\r\n").unwrap();
        std::thread::sleep(Duration::from_millis(200));
        // more idle connections than the server serves at once (the last ones wait in the
        // backlog until the first are closed)
        let idle: Vec<TcpStream> = (0..300)
            .map(|_| TcpStream::connect(addr).unwrap())
            .collect();
        let t0 = Instant::now();
        let mut slow_open = true;
        while t0.elapsed() < HEADER_READ_TIMEOUT + Duration::from_secs(4) {
            std::thread::sleep(Duration::from_millis(500));
            if slow.write_all(b"x-a: b\r\n").is_err() {
                slow_open = false;
                break;
            }
        }
        // a real request now gets its answer: the idle ones were closed
        let (resp, _) = raw_request(addr, "GET", "/nothing-recorded-here", b"");
        let closed = idle
            .into_iter()
            .filter(|s| {
                let mut s = s;
                s.set_read_timeout(Some(HEADER_READ_TIMEOUT + Duration::from_secs(5)))
                    .unwrap();
                let mut b = [0u8; 1];
                matches!(s.read(&mut b), Ok(0) | Err(_))
            })
            .count();
        (slow_open, status_of(&resp), closed)
    })
    .await
    .unwrap();
    let (slow_open, status, closed) = outcome;
    assert!(
        !slow_open,
        "a trickling header stayed open past the header timeout"
    );
    assert_eq!(status, 404);
    assert_eq!(closed, 300);
    h.shutdown().await;
}

/// A session of three exchanges on /v1/chat/completions: a stream cut by the client after
/// three chunks, a stream the upstream cut, and an exchange recorded without a response.
fn partial_session(dir: &Path) -> PathBuf {
    let chunk = |t: u64, s: &str| json!({"t_us": t, "text": s});
    let ex = |id: u64, response: Value, outcome: &str, error: Option<&str>| {
        let mut v = json!({
            "type": "exchange", "id": id, "started": "2026-01-01T00:00:00Z",
            "request": {"method": "POST", "path": "/v1/chat/completions",
                        "headers": [["content-type", "application/json"]],
                        "body": {"text": format!("{{\"n\":{id}}}")}},
            "timings": {"ttfb_us": 1000, "total_us": 300000},
            "outcome": outcome,
        });
        if !response.is_null() {
            v["response"] = response;
        }
        if let Some(e) = error {
            v["error"] = json!(e);
        }
        v
    };
    let stream = |chunks: Vec<Value>| json!({"status": 200, "headers": [["content-type", "text/event-stream"]], "chunks": chunks});
    let lines = [
        json!({"type": "header", "format": "toolscope-session/1", "created": "2026-01-01T00:00:00Z", "tool": "test"}),
        ex(
            1,
            stream(vec![
                chunk(1000, "data: {\"a\":1}\n\n"),
                chunk(100_000, "data: {\"a\":2}\n\n"),
                chunk(200_000, "data: {\"a\":3}\n\n"),
            ]),
            "client_disconnected",
            Some("the client closed the connection"),
        ),
        ex(
            2,
            stream(vec![
                chunk(1000, "data: {\"b\":1}\n\n"),
                chunk(150_000, "data: {\"b\":2}\n\n"),
            ]),
            "upstream_error",
            Some("upstream reset"),
        ),
        ex(
            3,
            Value::Null,
            "upstream_error",
            Some("connecting to 127.0.0.1:9: connection refused"),
        ),
    ];
    let p = dir.join("partial.jsonl");
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&p, text).unwrap();
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partial_recordings_replay_as_far_as_recorded_then_cut() {
    let dir = tempfile::tempdir().unwrap();
    let path = partial_session(dir.path());
    for timing in [Timing::Fast, Timing::Recorded] {
        let session = read_session(&path).unwrap();
        let h = ServeHandle::spawn(session, config(dir.path().join("u.jsonl"), timing), None)
            .await
            .unwrap();
        let addr = h.local_addr();
        let got = tokio::task::spawn_blocking(move || {
            (1..=3)
                .map(|n| {
                    raw_request(
                        addr,
                        "POST",
                        "/v1/chat/completions",
                        format!("{{\"n\":{n}}}").as_bytes(),
                    )
                })
                .collect::<Vec<_>>()
        })
        .await
        .unwrap();
        // every recorded chunk arrives, the last included, and the response is cut (no final
        // zero-length chunk)
        assert_eq!(status_of(&got[0].0), 200, "{timing:?}");
        assert_eq!(
            String::from_utf8_lossy(&dechunk(&got[0].0)),
            "data: {\"a\":1}\n\ndata: {\"a\":2}\n\ndata: {\"a\":3}\n\n",
            "{timing:?}"
        );
        assert!(!got[0].0.ends_with(b"0\r\n\r\n"), "{timing:?}: not cut");
        assert_eq!(
            String::from_utf8_lossy(&dechunk(&got[1].0)),
            "data: {\"b\":1}\n\ndata: {\"b\":2}\n\n",
            "{timing:?}"
        );
        assert!(!got[1].0.ends_with(b"0\r\n\r\n"), "{timing:?}: not cut");
        // no response recorded: the documented 502 with the recorded error
        let text = String::from_utf8_lossy(&got[2].0);
        assert_eq!(status_of(&got[2].0), 502, "{timing:?}: {text}");
        assert!(text.contains("connection refused"), "{text}");
        h.shutdown().await;
    }
}
