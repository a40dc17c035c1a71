//! End to end: two real llama-server processes (same build 11434, SmolLM2, different
//! `--chat-template-file`) on 127.0.0.1, a small recorded session, and
//! `toolscope diff --server A --server B SESSION`. The servers are stopped after the test.

use crate::support;

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};
use toolscope::record::llama::LlamaServer;
use toolscope::session::*;

fn start(model: &Path, template: &Path) -> LlamaServer {
    support::start_llama(model, Some(template.to_owned()), false, 2048)
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
    let Some((model, corpus)) = support::smollm2_and_corpus() else {
        return;
    };
    let a = start(&model, &corpus.join("Qwen-Qwen3-0.6B.jinja"));
    let b = start(&model, &corpus.join("Qwen3.5-4B.jinja"));

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
            "model": "m", "stream": true, "tools": tools, "max_tokens": 24,
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

    let (ua, ub) = (a.base_url(), b.base_url());
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

    // the same session with the servers' templates (from /props) rendered by toolscope and
    // tokenized by server A's vocabulary: the prompts must be the ones the servers rendered
    let out2 = Command::new(support::bin())
        .args([
            "diff",
            "--template",
            &ua,
            "--template",
            &ub,
            "--vocab",
            &ua,
            session.to_str().unwrap(),
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out2.status.code(),
        Some(1),
        "stderr: {}",
        String::from_utf8_lossy(&out2.stderr)
    );
    let r2: Value = serde_json::from_str(&String::from_utf8_lossy(&out2.stdout)).unwrap();
    drop(a);
    drop(b);
    for (e, e2) in r["exchanges"]
        .as_array()
        .unwrap()
        .iter()
        .zip(r2["exchanges"].as_array().unwrap())
    {
        assert_eq!(e2["tokens"]["tokenizer"], "vocab");
        assert_eq!(
            e["a"]["bytes"], e2["a"]["bytes"],
            "A: local render vs llama-server /apply-template"
        );
        assert_eq!(
            e["b"]["bytes"], e2["b"]["bytes"],
            "B: local render vs llama-server /apply-template"
        );
    }
    assert_eq!(r2["structure"], r["structure"]);

    // --generate: both servers answer the re-sent request (greedy, same model, different
    // templates); each reply is reassembled and compared
    let (a, b) = (
        start(&model, &corpus.join("Qwen-Qwen3-0.6B.jinja")),
        start(&model, &corpus.join("Qwen3.5-4B.jinja")),
    );
    let out3 = Command::new(support::bin())
        .args([
            "diff",
            "--server",
            &a.base_url(),
            "--server",
            &b.base_url(),
            session.to_str().unwrap(),
            "--exchange",
            "1",
            "--generate",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    drop(a);
    drop(b);
    assert_eq!(
        out3.status.code(),
        Some(1),
        "stderr: {}",
        String::from_utf8_lossy(&out3.stderr)
    );
    let r3: Value = serde_json::from_str(&String::from_utf8_lossy(&out3.stdout)).unwrap();
    assert_eq!(r3["exchanges"].as_array().unwrap().len(), 1);
    let reply = &r3["exchanges"][0]["reply"];
    assert!(
        reply["error"]["a"].is_null() && reply["error"]["b"].is_null(),
        "{reply}"
    );
    for side in ["a", "b"] {
        let fin = reply["finish_reason"][side].as_str().unwrap_or_default();
        assert!(["stop", "length", "tool_calls"].contains(&fin), "{reply}");
    }

    assert_eq!(r["mode"], "servers");
    // same binary: same build_info, different chat_template
    assert!(r["a"]["build_info"].is_string());
    assert_eq!(r["props"]["build_info"]["changed"], false);
    assert_eq!(r["props"]["chat_template_changed"], true);
    assert_eq!(r["structure"]["syntax"]["a"], "hermes");
    assert_eq!(r["structure"]["syntax"]["b"], "qwen3-coder");
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
