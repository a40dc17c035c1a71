//! A fake engine for what-if tests (`toolscope try`, the inspector's `x`), and the session it
//! answers: one OpenAI chat exchange cut by the token limit (`max_tokens: 12`, finish
//! `length`, the call leaked into content), whose finding carries the `max_tokens` fix
//! (12 → 256).
//!
//! The fake's answers are fixed, so the rates are known by hand: a request with
//! `max_tokens` ≤ 12 (the original) is answered without a call (`finish_reason: length`, the
//! same cut text), any other (the fix) with one valid call `get_weather({"city":"Lisbon"})`
//! (`finish_reason: tool_calls`). Every other path is 404 (no engine detected).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

/// The cut text the original answer carries.
pub const CUT: &str = "<tool_call>\n{\"name\": \"get_";

/// The session, its upstream `UPSTREAM`.
pub fn session_text(upstream: &str) -> String {
    let request = json!({
        "model": "smollm2",
        "max_tokens": 12,
        "temperature": 0,
        "messages": [{"role": "user", "content": "What is the weather in Lisbon?"}],
        "tools": [{"type": "function", "function": {
            "name": "get_weather",
            "description": "Get the current weather for a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                           "required": ["city"]}}}]
    });
    let header = json!({
        "type": "header", "format": "toolscope-session/1", "created": "2026-12-07T09:00:00Z",
        "tool": "toolscope test", "upstream": upstream
    });
    let exchange = json!({
        "type": "exchange", "id": 1, "started": "2026-12-07T09:00:01Z", "label": "send",
        "request": {"method": "POST", "path": "/v1/chat/completions",
                    "headers": [["content-type", "application/json"]],
                    "body": {"text": request.to_string()}},
        "response": {"status": 200, "headers": [["content-type", "application/json"]],
                     "body": {"text": answer(&request).to_string()}},
        "timings": {"ttfb_us": 1000, "total_us": 2000},
        "outcome": "complete"
    });
    format!("{header}\n{exchange}\n")
}

/// Writes the session into `dir` as `cut.jsonl` with upstream `upstream`.
pub fn write_session(dir: &Path, upstream: &str) -> PathBuf {
    let p = dir.join("cut.jsonl");
    std::fs::write(&p, session_text(upstream)).unwrap();
    p
}

/// The fake's answer to a chat request.
pub fn answer(request: &Value) -> Value {
    let cut = request
        .get("max_tokens")
        .and_then(Value::as_u64)
        .is_some_and(|n| n <= 12);
    if cut {
        json!({"id": "chatcmpl-cut", "object": "chat.completion", "model": "smollm2",
               "choices": [{"index": 0, "finish_reason": "length",
                            "message": {"role": "assistant", "content": CUT}}],
               "usage": {"prompt_tokens": 40, "completion_tokens": 12, "total_tokens": 52}})
    } else {
        json!({"id": "chatcmpl-call", "object": "chat.completion", "model": "smollm2",
               "choices": [{"index": 0, "finish_reason": "tool_calls",
                            "message": {"role": "assistant", "content": null,
                                        "tool_calls": [{"id": "call_1", "type": "function",
                                                        "function": {"name": "get_weather",
                                                                     "arguments": "{\"city\":\"Lisbon\"}"}}]}}],
               "usage": {"prompt_tokens": 40, "completion_tokens": 20, "total_tokens": 60}})
    }
}

/// The chat requests the fake received (their bodies), in order.
pub type Seen = Arc<Mutex<Vec<Value>>>;

/// Starts the fake on 127.0.0.1 (an ephemeral port) on a thread of its own, so it serves sync
/// tests that wait on a child process as well as async ones. Returns its base URL and the
/// bodies it received. The chat answers of a request whose `max_tokens` is above 12 wait
/// `delay_fixed` first (a test that cancels mid-run).
pub fn start(delay_fixed: std::time::Duration) -> (String, Seen) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let seen: Seen = Arc::default();
    let seen2 = seen.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            loop {
                let Ok((mut s, _)) = listener.accept().await else {
                    return;
                };
                let seen = seen2.clone();
                tokio::spawn(async move {
                    while let Some((head, body)) = super::read_http_request(&mut s).await {
                        let line = head.lines().next().unwrap_or("").to_owned();
                        let path = line.split_whitespace().nth(1).unwrap_or("").to_owned();
                        let (status, text) = if line.starts_with("POST ")
                            && path == "/v1/chat/completions"
                        {
                            let req: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                            seen.lock().unwrap().push(req.clone());
                            let a = answer(&req);
                            if a["choices"][0]["finish_reason"] == "tool_calls" {
                                tokio::time::sleep(delay_fixed).await;
                            }
                            ("200 OK", a.to_string())
                        } else {
                            ("404 Not Found", "{\"error\":\"not found\"}".to_owned())
                        };
                        let head = format!(
                            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                            text.len()
                        );
                        if s.write_all(head.as_bytes()).await.is_err()
                            || s.write_all(text.as_bytes()).await.is_err()
                        {
                            return;
                        }
                    }
                });
            }
        });
    });
    (base, seen)
}

/// The 95 % Wilson score interval for k = 0 and k = n of n runs, in closed form (the general
/// formula with p = 0 or 1 and z = 1.96): 0/n → (0, z²/(n+z²)), n/n → (n/(n+z²), 1).
pub fn wilson_all_or_none(k: usize, n: usize) -> (f64, f64) {
    let z2 = 1.96f64 * 1.96;
    let n = n as f64;
    match k {
        0 => (0.0, z2 / (n + z2)),
        _ => (n / (n + z2), 1.0),
    }
}
