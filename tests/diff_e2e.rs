//! End to end: two real llama-server processes (same build 11434, SmolLM2, different
//! `--chat-template-file`) on 127.0.0.1, a small recorded session, and
//! `toolscope diff --server A --server B SESSION`. The servers are stopped after the test.

mod support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolscope::session::*;

/// A llama-server child on a free loopback port, killed on drop.
struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn get(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).ok()?;
    Some(buf)
}

fn start(bin: &Path, model: &Path, template: &Path) -> Server {
    let port = free_port();
    let child = Command::new(bin)
        .args([
            "-m",
            model.to_str().unwrap(),
            "--jinja",
            "--host",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "-c",
            "2048",
            "-t",
            "1",
        ])
        .arg("--chat-template-file")
        .arg(template)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn llama-server");
    let server = Server { child, port };
    let deadline = Instant::now() + Duration::from_secs(180);
    while Instant::now() < deadline {
        if get(port, "/health").is_some_and(|r| r.starts_with("HTTP/1.1 200")) {
            return server;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    panic!("llama-server on port {port} did not become healthy");
}

fn exchange(id: u64, path: &str, body: Value) -> Exchange {
    Exchange {
        id,
        started: "2026-11-29T18:00:00.000000Z".into(),
        request: Request {
            method: "POST".into(),
            path: path.into(),
            headers: vec![("content-type".into(), "application/json".into())],
            body: Body::Text {
                text: body.to_string(),
            },
        },
        ..Default::default()
    }
}

#[test]
#[ignore = "e2e: needs llama-server"]
fn two_servers_different_templates() {
    let (Some(bin), Some(model), Some(corpus)) = (
        support::llama_server(),
        support::smollm2(),
        support::corpus(),
    ) else {
        return;
    };
    let a = start(&bin, &model, &corpus.join("Qwen-Qwen3-0.6B.jinja"));
    let b = start(&bin, &model, &corpus.join("Qwen3.5-4B.jinja"));

    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join("s.jsonl");
    let tools = json!([{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]);
    let mut w =
        SessionWriter::open(&session, &write::new_header("2026-11-29T18:00:00Z".into())).unwrap();
    // 1: a question with tools; 2: the follow-up with the call and its result in history.
    w.append(&Line::Exchange(Box::new(exchange(
        1,
        "/v1/chat/completions",
        json!({
            "model": "m", "stream": true, "tools": tools,
            "messages": [{"role": "user", "content": "Weather in Oslo?"}]
        }),
    ))))
    .unwrap();
    w.append(&Line::Exchange(Box::new(exchange(2, "/v1/chat/completions", json!({
        "model": "m", "tools": tools,
        "messages": [
            {"role": "user", "content": "Weather in Oslo?"},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "rain"}
        ]
    }))))).unwrap();
    drop(w);

    let ua = format!("http://127.0.0.1:{}", a.port);
    let ub = format!("http://127.0.0.1:{}", b.port);
    let out = Command::new(support::bin())
        .args([
            "diff",
            "--server",
            &ua,
            "--server",
            &ub,
            session.to_str().unwrap(),
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    let r: Value = serde_json::from_str(&String::from_utf8_lossy(&out.stdout)).unwrap();
    drop(a);
    drop(b);

    assert_eq!(r["mode"], "servers");
    // same binary: same build_info, different chat_template
    assert!(r["a"]["build_info"].is_string());
    assert_eq!(r["props"]["build_info"]["changed"], false);
    assert_eq!(r["props"]["chat_template_changed"], true);
    assert_eq!(r["structure"]["syntax"]["a"], "hermes");
    assert_eq!(r["structure"]["syntax"]["b"], "qwen3_coder");
    let ex = r["exchanges"].as_array().unwrap();
    assert_eq!(ex.len(), 2);
    for e in ex {
        assert_eq!(e["a"]["ok"], true, "{e}");
        assert_eq!(e["b"]["ok"], true, "{e}");
        assert_eq!(e["identical"], false);
        // each server tokenized its own prompt: real token ids
        assert_eq!(e["tokens"]["tokenizer"], "vocab");
    }
    // the tool call in history: Hermes JSON under A, Qwen3-Coder XML under B
    let tc = &ex[1]["markers"]["tool_call"];
    assert!(
        tc["only_b"]
            .as_array()
            .unwrap()
            .contains(&json!("<function=…>")),
        "{tc}"
    );
    assert!(
        tc["only_b"]
            .as_array()
            .unwrap()
            .contains(&json!("<parameter=…>")),
        "{tc}"
    );
    // the tool result is a user turn with <tool_response> under both
    assert_eq!(
        ex[1]["turn_roles"]["a"],
        json!(["system", "user", "assistant", "user", "assistant"])
    );
    assert_eq!(ex[1]["markers"]["tool_result"]["changed"], false);
}
