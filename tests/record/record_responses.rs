//! The recording proxy and the Responses API's transport (issue #22), against loopback fakes:
//! a client that closes right after the stream's terminal event, compressed request bodies,
//! and Responses over WebSocket.

use crate::support;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use toolscope::analysis::{Context, Depth, analyse};
use toolscope::record::proxy::{Proxy, ProxyConfig, ProxyHandle};
use toolscope::session::{Exchange, Outcome, read_session};

/// A proxy in front of `upstream` (no engine detection), recording into a fresh temporary
/// folder (kept alive by the returned guard).
async fn proxy_to(upstream: &str) -> (tempfile::TempDir, std::path::PathBuf, ProxyHandle) {
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join("session.jsonl");
    let mut cfg = ProxyConfig::new(upstream, session.clone());
    cfg.detect_engine = false;
    let proxy = Proxy::spawn(cfg, None).await.unwrap();
    (dir, session, proxy)
}

/// The exchanges of a settled, closed proxy's session, by id.
async fn exchanges(proxy: ProxyHandle, session: &std::path::Path) -> Vec<Exchange> {
    assert!(
        proxy.shutdown(Duration::from_secs(10)).await,
        "proxy settles"
    );
    let mut exs = read_session(session).unwrap().exchanges;
    exs.sort_by_key(|e| e.id);
    exs
}

/// An upstream that answers every request with `content-type` and `events` as one chunked
/// frame each, then keeps the connection open without ending the chunked body (so the end of
/// the body never reaches the proxy before the client has gone).
async fn unending_upstream(content_type: &'static str, events: Vec<String>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            let events = events.clone();
            tokio::spawn(async move {
                let _ = s.set_nodelay(true);
                if support::read_http_request(&mut s).await.is_none() {
                    return;
                }
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ntransfer-encoding: chunked\r\n\r\n"
                );
                let _ = s.write_all(head.as_bytes()).await;
                for ev in &events {
                    let frame = format!("{:x}\r\n{ev}\r\n", ev.len());
                    if s.write_all(frame.as_bytes()).await.is_err() {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
                // no `0\r\n\r\n`: hold the body open until the proxy goes away
                let mut sink = [0u8; 64];
                let _ = tokio::time::timeout(Duration::from_secs(30), s.read(&mut sink)).await;
            });
        }
    });
    url
}

/// Sends `POST path` through the proxy on a raw connection, reads the response until the body
/// so far contains `until`, and closes the connection at once.
async fn read_until_then_close(proxy: &ProxyHandle, path: &str, until: &str) {
    let mut s = TcpStream::connect(proxy.local_addr()).await.unwrap();
    let body = r#"{"model":"m","input":"hi","stream":true}"#;
    let req = format!(
        "POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 65536];
    let read = async {
        while !String::from_utf8_lossy(&got).contains(until) {
            let n = s.read(&mut buf).await.unwrap();
            assert!(n > 0, "the proxy closed before {until:?}");
            got.extend_from_slice(&buf[..n]);
        }
    };
    tokio::time::timeout(Duration::from_secs(20), read)
        .await
        .expect("the terminal event arrives");
    drop(s);
}

fn sse(name: &str, data: serde_json::Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// A Responses stream as llama-server b11434 writes it (tools/server/server-task.cpp), ending
/// with `terminal` whose `response.output_text` is `text`.
fn responses_stream(terminal: &str, text: &str) -> Vec<String> {
    use serde_json::json;
    let status = terminal.trim_start_matches("response.");
    vec![
        sse(
            "response.created",
            json!({"type":"response.created","response":{"id":"resp_1","status":"in_progress"}}),
        ),
        sse(
            "response.output_text.delta",
            json!({"type":"response.output_text.delta","item_id":"msg_1","delta":text}),
        ),
        sse(
            terminal,
            json!({"type":terminal,"response":{"id":"resp_1","status":status,
                "output":[{"type":"message","content":[{"type":"output_text","text":text}]}]}}),
        ),
    ]
}

/// A client that closes the moment it has read the terminal event got the whole response: the
/// exchange is `complete` (Codex closes after `response.completed`, sometimes before the proxy
/// has forwarded the chunked body's end; issue #22). Closing one event earlier is still
/// `client_disconnected`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_closing_after_the_terminal_event_got_the_whole_response() {
    // A `response.completed` longer than the recorder's 64–128 KiB tail: found by its name.
    let long = "word ".repeat(60_000);
    let ndjson = vec![
        "{\"model\":\"m\",\"message\":{\"role\":\"assistant\",\"content\":\"Hi\"},\"done\":false}\n"
            .to_owned(),
        "{\"model\":\"m\",\"message\":{\"role\":\"assistant\",\"content\":\"\"},\"done\":true,\"done_reason\":\"stop\"}\n"
            .to_owned(),
    ];
    let cases: Vec<(&str, &str, Vec<String>, &str, Outcome)> = vec![
        (
            "response.completed",
            "/v1/responses",
            responses_stream("response.completed", "Hello"),
            "\"status\":\"completed\"",
            Outcome::Complete,
        ),
        (
            "response.incomplete",
            "/v1/responses",
            responses_stream("response.incomplete", "Hel"),
            "\"status\":\"incomplete\"",
            Outcome::Complete,
        ),
        (
            "response.failed",
            "/responses",
            responses_stream("response.failed", ""),
            "\"status\":\"failed\"",
            Outcome::Complete,
        ),
        (
            "a 300 KB response.completed",
            "/v1/responses",
            responses_stream("response.completed", &long),
            "\"status\":\"completed\"",
            Outcome::Complete,
        ),
        (
            "the stream up to the delta before the terminal event",
            "/v1/responses",
            responses_stream("response.completed", "Hello")[..2].to_vec(),
            "response.output_text.delta",
            Outcome::ClientDisconnected,
        ),
        (
            "Ollama done: true",
            "/api/chat",
            ndjson.clone(),
            "\"done\":true",
            Outcome::Complete,
        ),
        (
            "Ollama up to a line with done: false",
            "/api/chat",
            ndjson[..1].to_vec(),
            "\"done\":false",
            Outcome::ClientDisconnected,
        ),
    ];
    for (what, path, events, until, want) in cases {
        let ctype = if path == "/api/chat" {
            "application/x-ndjson"
        } else {
            "text/event-stream"
        };
        let upstream = unending_upstream(ctype, events.clone()).await;
        let (_dir, session, proxy) = proxy_to(&upstream).await;
        read_until_then_close(&proxy, path, until).await;
        let exs = exchanges(proxy, &session).await;
        assert_eq!(exs.len(), 1, "{what}");
        assert_eq!(exs[0].outcome, want, "{what}: {:?}", exs[0].error);
        if want == Outcome::Complete {
            // everything the upstream sent, and nothing else
            assert_eq!(
                exs[0].response_bytes(),
                events.concat().into_bytes(),
                "{what}"
            );
        }
    }
}

/// A Python process started by a test, killed (by its pid) when dropped.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The Responses API over WebSocket (issue #22): the Python `websockets` client talks to a
/// Responses-over-WebSocket echo server (tests/support/responses_ws.py, `websockets` at both
/// ends, `permessage-deflate` negotiated) through the proxy. The client gets what the server
/// sent; the session has one `complete` exchange per `response.create`, on one connection:
/// `request.body` is the create message the client sent, the chunks are the server messages
/// the client received (decompressed), and every frame is listed with its direction. Each
/// exchange is analysed (frames read as events, reassembled by item): its call is the
/// `get_weather` call the echo server sent, split over two argument deltas.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_responses_websocket_is_passed_through_and_recorded_per_response() {
    let Some(py) = support::sdk_python() else {
        return;
    };
    let script = support::root().join("tests/support/responses_ws.py");
    let mut server = std::process::Command::new(&py)
        .arg(&script)
        .arg("server")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python starts");
    let mut line = String::new();
    {
        use std::io::BufRead;
        let out = server.stdout.take().unwrap();
        std::io::BufReader::new(out).read_line(&mut line).unwrap();
    }
    let _server = Child(server);
    let port: u16 = line.trim().parse().expect("the server prints its port");
    let (_dir, session, proxy) = proxy_to(&format!("http://127.0.0.1:{port}")).await;
    let url = format!("ws://{}/v1/responses", proxy.local_addr());
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(&py)
            .arg(&script)
            .args(["client", &url, "2"])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "client: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let turns: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(turns.len(), 2);
    let exs = exchanges(proxy, &session).await;
    assert_eq!(exs.len(), 2, "one exchange per response.create");
    let recorded = read_session(&session).unwrap();
    for (ex, turn) in exs.iter().zip(&turns) {
        analysed_websocket_call(&recorded, ex, turn);
        assert_eq!(ex.outcome, Outcome::Complete, "{:?}", ex.error);
        assert_eq!(ex.request.method, "GET");
        assert_eq!(ex.request.path, "/v1/responses");
        assert_eq!(ex.request.body.to_text(), turn["sent"].as_str().unwrap());
        let resp = ex.response.as_ref().unwrap();
        assert_eq!(resp.status, 101);
        let chunks: Vec<String> = resp
            .chunks
            .as_ref()
            .unwrap()
            .iter()
            .map(|c| c.data.to_text().into_owned())
            .collect();
        let received: Vec<String> = turn["received"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m.as_str().unwrap().to_owned())
            .collect();
        assert_eq!(
            chunks, received,
            "the chunks are the messages the client got"
        );
        let ws = ex.websocket.as_ref().expect("websocket frames");
        assert_eq!(ws.connection, exs[0].id, "one connection");
        assert!(
            ws.extensions
                .as_deref()
                .is_some_and(|e| e.contains("permessage-deflate")),
            "{:?}",
            ws.extensions
        );
        let texts: Vec<_> = ws.frames.iter().filter(|f| f.opcode == "text").collect();
        let from = |who: &str| texts.iter().filter(|f| f.from == who).count();
        assert_eq!(from("server"), received.len(), "{:?}", ws.frames);
        assert_eq!(from("client"), 1, "the response.create");
        assert_eq!(texts[0].from, "client");
        // compressed on the wire (permessage-deflate), recorded decompressed
        assert!(texts.iter().all(|f| f.compressed && f.data.is_none()));
        assert!(ws.frames.windows(2).all(|w| w[0].t_us <= w[1].t_us));
    }
    // The ping the client sent after the first turn and the server's pong come before the
    // second response.create: they open the second exchange's frames, with their payloads.
    let pings: Vec<_> = exs
        .iter()
        .flat_map(|e| e.websocket.as_ref().unwrap().frames.iter())
        .filter(|f| f.opcode == "ping")
        .collect();
    assert!(!pings.is_empty());
    assert_eq!(pings[0].data.as_ref().unwrap().to_text(), "between turns");
}

/// The analysis of one recorded WebSocket exchange (frames read by
/// `stream::sse::websocket_events`, reassembled by item): its one call is the `get_weather`
/// call the echo server sent in `turn["received"]` — the name of its `output_item.added` and
/// the two `function_call_arguments.delta` strings joined, parsed — and every server message
/// is one Stream-pane event.
fn analysed_websocket_call(s: &toolscope::session::read::Session, ex: &Exchange, turn: &Value) {
    let msgs: Vec<Value> = turn["received"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| serde_json::from_str(m.as_str().unwrap()).unwrap())
        .collect();
    let of = |t: &'static str| msgs.iter().filter(move |m| m["type"] == t);
    let name = of("response.output_item.added").next().unwrap()["item"]["name"]
        .as_str()
        .unwrap()
        .to_owned();
    let deltas: Vec<&str> = of("response.function_call_arguments.delta")
        .map(|m| m["delta"].as_str().unwrap())
        .collect();
    assert_eq!(deltas.len(), 2, "the echo server splits the arguments");
    let args: Value = serde_json::from_str(&deltas.concat()).unwrap();
    let city = turn["sent"].as_str().unwrap();
    assert!(city.contains(args["city"].as_str().unwrap()), "{args}");
    let none = Vec::new();
    let a = analyse(
        ex.clone(),
        Context {
            header: &s.header,
            annotations: s.annotations.get(&ex.id).unwrap_or(&none),
        },
        Depth::Panes,
    );
    assert_eq!(a.events.len(), msgs.len(), "one event per server message");
    let m = a.message.as_ref().expect("the reply is reassembled");
    let calls: Vec<(String, Value)> = m
        .tool_calls
        .iter()
        .map(|c| (c.name.clone(), c.arguments_json().unwrap()))
        .collect();
    assert_eq!(calls, vec![(name, args)], "#{}", ex.id);
    assert!(a.problems.is_empty(), "{:?}", a.problems);
}

/// An upstream that keeps every request body it gets and answers `{}`.
async fn capture_upstream() -> (String, std::sync::Arc<std::sync::Mutex<Vec<Vec<u8>>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let got: std::sync::Arc<std::sync::Mutex<Vec<Vec<u8>>>> = Default::default();
    let got2 = got.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            let got = got2.clone();
            tokio::spawn(async move {
                while let Some((_, body)) = support::read_http_request(&mut s).await {
                    got.lock().unwrap().push(body);
                    let r = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";
                    if s.write_all(r.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (url, got)
}

/// A zstd request body (Python `zstandard`, the reference libzstd) through the proxy: the
/// upstream gets the bytes the client sent, the session records them as sent, and the
/// analysis reads the decoded JSON. A bomb (1 GiB of spaces, ~33 KB compressed) is forwarded
/// the same and read as `request.body_undecodable`, stopped at the 32 MiB cap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zstd_body_is_forwarded_as_sent_and_analysed_decoded() {
    let Some(py) = support::sdk_python() else {
        return;
    };
    let (upstream, got) = capture_upstream().await;
    let (_dir, session, proxy) = proxy_to(&upstream).await;
    let base = proxy.url();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(&py)
            .arg(support::root().join("tests/support/responses_sdk.py"))
            .arg(&base)
            .arg(support::root().join("scripts/record-requests/a-two-tools-stream.json"))
            .args(["zstd", "bomb"])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    use base64::Engine as _;
    let sent: Vec<Vec<u8>> = lines
        .iter()
        .map(|l| {
            base64::engine::general_purpose::STANDARD
                .decode(l["sent_b64"].as_str().unwrap())
                .unwrap()
        })
        .collect();
    let exs = exchanges(proxy, &session).await;
    assert_eq!(exs.len(), 2);
    assert_eq!(
        *got.lock().unwrap(),
        sent,
        "the upstream got the bytes sent"
    );
    for (ex, bytes) in exs.iter().zip(&sent) {
        assert_eq!(&ex.request.body.to_bytes(), bytes, "recorded as sent");
        assert!(
            ex.request
                .headers
                .iter()
                .any(|(k, v)| k == "content-encoding" && v == "zstd")
        );
    }
    // The analysis reads the JSON the client compressed.
    let json = exs[0].request_json().expect("decoded JSON");
    assert_eq!(json["model"], "smollm2");
    assert_eq!(json["tools"][0]["name"], "get_weather");
    assert_eq!(
        json["input"].as_array().unwrap().last().unwrap()["content"],
        "What is the weather in Lisbon?"
    );
    assert!(toolscope::diagnose::input::unreadable_request(&exs[0]).is_none());
    // The bomb: no JSON, one finding that says why.
    assert!(sent[1].len() < 100_000, "{} bytes", sent[1].len());
    assert!(exs[1].request_json().is_none());
    let f = toolscope::diagnose::input::unreadable_request(&exs[1]).expect("a finding");
    assert_eq!(f.rule, toolscope::finding::Rule::RequestBodyUndecodable);
    assert!(
        f.message
            .contains("content-encoding zstd: the body decodes to more than 33554432 bytes"),
        "{}",
        f.message
    );
}
