//! The recorder's raw-output capture and real-client handling against a canned llama-server
//! look-alike on loopback (the real server is in tests/e2e/e2e_raw.rs). The canned answers are the
//! shapes of llama-server build 11434 (tools/server/server-context.cpp: `/props` 503 while
//! loading, `/slots` with `LLAMA_SERVER_SLOTS_DEBUG=1`).
//!
//! * A client that closes after `data: [DONE]` (as the official openai SDK does), while the
//!   upstream has not ended the chunked body, got a complete response; one that closes before
//!   it did not.
//! * A proxy started while `/props` still answers 503 learns the engine after an exchange and
//!   writes it as an `engine` annotation; from then on it reads `/slots` and attaches the
//!   generated text of the slot whose prompt is the exchange's — and never another's.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support;

use futures::StreamExt;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use toolscope::record::proxy::{Proxy, ProxyConfig};
use toolscope::session::{Annotation, Outcome, RawTextSource, read_session};
use toolscope::stream::raw::{RawOutput, RawSource, raw_output};

const GENERATED: &str =
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lisbon\"}}\n</tool_call>";

/// What the canned server knows: `/props` answers 503 this many more times; the prompt the
/// slot shows (the last rendered one, unless `slot_prompt` overrides it).
#[derive(Default)]
struct Canned {
    loading: AtomicUsize,
    last_prompt: Mutex<String>,
    slot_prompt: Mutex<Option<String>>,
}

/// The canned template: `user\n<first message>\n`.
fn render(body: &[u8]) -> String {
    let v: Value = serde_json::from_slice(body).unwrap();
    format!("user\n{}\n", v["messages"][0]["content"].as_str().unwrap())
}

async fn json_reply(s: &mut TcpStream, status: &str, body: &Value) -> bool {
    let b = body.to_string();
    let head = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        b.len()
    );
    s.write_all(head.as_bytes()).await.is_ok() && s.write_all(b.as_bytes()).await.is_ok()
}

async fn canned_server(listener: TcpListener, st: Arc<Canned>) {
    loop {
        let Ok((mut s, _)) = listener.accept().await else {
            continue;
        };
        let st = st.clone();
        tokio::spawn(async move {
            while let Some((head, body)) = support::read_http_request(&mut s).await {
                let line = head.lines().next().unwrap_or("").to_owned();
                let ok = if line.starts_with("GET /props") {
                    if st
                        .loading
                        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                        .is_ok()
                    {
                        json_reply(&mut s, "503 Service Unavailable", &json!({"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}})).await
                    } else {
                        json_reply(&mut s, "200 OK", &json!({"build_info": "b11434-canned", "model_path": "m.gguf", "chat_template": "{{ '<tool_call>' }}", "bos_token": "<s>"})).await
                    }
                } else if line.starts_with("POST /apply-template") {
                    // the render has no BOS; the slot's detokenized prompt has it
                    json_reply(&mut s, "200 OK", &json!({"prompt": render(&body)})).await
                } else if line.starts_with("POST /tokenize") {
                    json_reply(&mut s, "200 OK", &json!({"tokens": []})).await
                } else if line.starts_with("GET /slots") {
                    let p = st
                        .slot_prompt
                        .lock()
                        .unwrap()
                        .clone()
                        .unwrap_or_else(|| st.last_prompt.lock().unwrap().clone());
                    json_reply(&mut s, "200 OK", &json!([
                        {"id": 0, "is_processing": false},
                        {"id": 1, "is_processing": false, "prompt": p, "generated": GENERATED, "params": {"generation_prompt": "assistant\n"}}
                    ])).await
                } else if line.starts_with("POST /v1/chat/completions") {
                    // the slot serving it shows its prompt, BOS in front
                    *st.last_prompt.lock().unwrap() = format!("<s>{}", render(&body));
                    let head_out = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
                    let events = [
                        "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"index\":0,\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Lisbon\\\"}\"}}]}}]}\n\n",
                        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
                        "data: [DONE]\n\n",
                    ];
                    let mut ok = s.write_all(head_out.as_bytes()).await.is_ok();
                    for ev in events {
                        ok = ok
                            && s.write_all(format!("{:x}\r\n{ev}\r\n", ev.len()).as_bytes())
                                .await
                                .is_ok();
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                    // The body's terminator comes late: the client has what it needs already.
                    let mut byte = [0u8; 1];
                    let _ = tokio::time::timeout(Duration::from_secs(2), s.read(&mut byte)).await;
                    ok && s.write_all(b"0\r\n\r\n").await.is_ok()
                } else {
                    json_reply(&mut s, "404 Not Found", &json!({"error": "not found"})).await
                };
                if !ok {
                    return;
                }
            }
        });
    }
}

async fn start_canned(st: Arc<Canned>) -> String {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    tokio::spawn(canned_server(l, st));
    url
}

/// Posts a streamed chat request with `content` as the user message; reads until `stop_at`
/// is in the bytes received, then drops the response (closing the connection).
async fn stream_until(base: &str, content: &str, stop_at: &str) -> Vec<u8> {
    let client = reqwest::Client::new();
    let resp = client
        .post(format!("{base}/v1/chat/completions"))
        .json(&json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": content}],
            "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]}))
        .send()
        .await
        .unwrap();
    let mut got = Vec::new();
    let mut s = resp.bytes_stream();
    while let Some(c) = s.next().await {
        got.extend_from_slice(&c.unwrap());
        if String::from_utf8_lossy(&got).contains(stop_at) {
            break;
        }
    }
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_after_done_is_complete_and_engine_and_slot_text_are_learnt() {
    let st = Arc::new(Canned::default());
    st.loading.store(1, Ordering::SeqCst);
    let upstream = start_canned(st.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join("s.jsonl");
    let proxy = Proxy::spawn(ProxyConfig::new(&upstream, session.clone()), None)
        .await
        .unwrap();
    // Started while the server was loading.
    assert_eq!(
        proxy.header().engine.as_ref().unwrap().kind.as_str(),
        "unknown"
    );
    let base = proxy.url();

    // 1: reads to [DONE], then closes (the openai SDK's way): complete.
    let got = stream_until(&base, "Weather in Lisbon?", "data: [DONE]\n\n").await;
    assert!(String::from_utf8_lossy(&got).ends_with("data: [DONE]\n\n"));
    assert!(proxy.recorder().settle(Duration::from_secs(10)).await);
    // 2: closes after the first event: cut short.
    stream_until(&base, "Weather in Porto?", "tool_calls").await;
    assert!(proxy.recorder().settle(Duration::from_secs(10)).await);
    // 3: the slot was reused meanwhile (its prompt is another exchange's).
    *st.slot_prompt.lock().unwrap() = Some("<s>user\nsomething else\n".into());
    stream_until(&base, "Weather in Faro?", "data: [DONE]\n\n").await;
    assert!(proxy.shutdown(Duration::from_secs(10)).await);

    let s = read_session(&session).unwrap();
    let mut exs = s.exchanges.clone();
    exs.sort_by_key(|e| e.id);
    assert_eq!(exs.len(), 3);
    assert_eq!(exs[0].outcome, Outcome::Complete, "{:?}", exs[0].error);
    assert_eq!(exs[0].response_bytes(), got);
    assert_eq!(exs[1].outcome, Outcome::ClientDisconnected);
    assert_eq!(exs[2].outcome, Outcome::Complete);

    // The engine, learnt after exchange 1, stands in for the header's `unknown`.
    let engine = s.header.engine.clone().unwrap();
    assert_eq!(
        (engine.kind.as_str(), engine.version.as_deref()),
        ("llama-server", Some("b11434-canned"))
    );
    assert!(matches!(
        s.annotations[&1].first(),
        Some(Annotation::Engine { exchange: 1, .. })
    ));

    // Exchange 1: the slot whose prompt (BOS in front) is the render's.
    let raw = raw_output(&exs[0], &s.annotations[&1]);
    assert_eq!(
        raw,
        RawOutput::Text {
            text: GENERATED.into(),
            source: RawSource::SlotsDebug { slot: Some(1) },
            pieces: None,
            prefill: String::new(),
        }
    );
    // Exchange 3: no text, and why — never exchange 1's or another's.
    let ann3 = &s.annotations[&3];
    assert!(
        ann3.iter().any(|a| matches!(a, Annotation::RawText { source: RawTextSource::SlotsDebug, text: None, error: Some(e), .. } if e.contains("reused"))),
        "{ann3:?}"
    );
    let RawOutput::Missing { why, how } = raw_output(&exs[2], ann3) else {
        panic!()
    };
    assert!(why.contains("reused"), "{why}");
    assert!(how.contains("LLAMA_SERVER_SLOTS_DEBUG=1"), "{how}");
}
