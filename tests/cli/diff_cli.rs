//! `toolscope diff --template A --template B` as a process: session and --request input, exit
//! codes, the JSON contract of docs/diff.md, errors naming file and position.

use crate::support;

use std::process::Command;

use serde_json::{Value, json};
use toolscope::session::*;

fn exchange(id: u64, path: &str, body: &Value) -> Exchange {
    Exchange {
        id,
        started: "2026-11-29T18:00:00.000000Z".into(),
        request: Request {
            method: if body.is_null() {
                "GET".into()
            } else {
                "POST".into()
            },
            path: path.into(),
            headers: vec![("content-type".into(), "application/json".into())],
            body: if body.is_null() {
                Body::default()
            } else {
                Body::Text {
                    text: body.to_string(),
                }
            },
        },
        response: None,
        ..Default::default()
    }
}

fn request() -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(support::root().join("tests/data/diff/request-tools.json"))
            .unwrap(),
    )
    .unwrap()
}

/// The OpenAI request of tests/data/diff/request-tools.json in Anthropic form.
fn anthropic_request() -> Value {
    let openai = request();
    let tool = &openai["tools"][0]["function"];
    json!({
        "model": "any",
        "max_tokens": 64,
        "system": "You run a warehouse.",
        "tools": [{"name": tool["name"], "description": tool["description"], "input_schema": tool["parameters"]}],
        "messages": [
            {"role": "user", "content": "Put 12 crates on shelf B, tagged fragile."},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "call_1", "name": "stock_shelf", "input": {"quantity": 12, "shelf": "B", "tags": ["fragile"]}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "{\"ok\": true}"}]},
            {"role": "user", "content": "Thanks. Now check shelf C."}
        ]
    })
}

fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(support::bin())
        .arg("diff")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn session_json_contract() {
    let Some(corpus) = support::corpus() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let mut w =
        SessionWriter::open(&path, &write::new_header("2026-11-29T18:00:00Z".into())).unwrap();
    w.append(&Line::Exchange(Box::new(exchange(
        1,
        "/v1/chat/completions",
        &request(),
    ))))
    .unwrap();
    w.append(&Line::Exchange(Box::new(exchange(
        2,
        "/v1/messages",
        &anthropic_request(),
    ))))
    .unwrap();
    w.append(&Line::Exchange(Box::new(exchange(
        3,
        "/v1/models",
        &Value::Null,
    ))))
    .unwrap();
    drop(w);
    let a = corpus.join("google-gemma-4-31B-it.jinja");
    let b = corpus.join("google-gemma-4-31B-it-interleaved.jinja");
    let (code, out, err) = run(&[
        "--template",
        a.to_str().unwrap(),
        "--template",
        b.to_str().unwrap(),
        path.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(code, 1, "differences → exit 1; stderr: {err}");
    let r: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(r["format"], "toolscope-diff/1");
    assert_eq!(r["mode"], "templates");
    assert_eq!(r["a"]["kind"], "template");
    assert_eq!(r["summary"]["exchanges"], 2);
    assert_eq!(r["summary"]["skipped"], 1);
    assert_eq!(r["summary"]["differing"], 2);
    let ex = r["exchanges"].as_array().unwrap();
    assert_eq!(ex[0]["id"], 1);
    assert_eq!(ex[0]["api"], "openai");
    assert_eq!(ex[1]["id"], 2);
    assert_eq!(ex[1]["api"], "anthropic");
    for e in ex {
        assert_eq!(e["a"]["ok"], true);
        assert_eq!(e["b"]["ok"], true);
        assert_eq!(e["identical"], false);
        assert_eq!(
            e["markers"]["tool_result"]["only_a"],
            json!(["<tool_response|>", "<|tool_response>"])
        );
        assert_eq!(
            e["turn_roles"]["b"],
            json!(["system", "user", "model", "tool", "user", "model"])
        );
        assert_eq!(e["tokens"]["tokenizer"], "markers");
        assert!(
            e["tokens"]["ops"]
                .as_array()
                .unwrap()
                .iter()
                .any(|o| o["tag"] == "delete" || o["tag"] == "replace")
        );
        assert_eq!(e["schema"]["changed"], false);
    }
    // the Anthropic request renders to the same prompt as its OpenAI twin under each template:
    // same token counts on each side
    assert_eq!(ex[0]["a"]["bytes"], ex[1]["a"]["bytes"]);
    assert_eq!(ex[0]["b"]["bytes"], ex[1]["b"]["bytes"]);
    assert_eq!(r["structure"]["syntax"]["a"], "gemma4");
    assert!(
        r["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().contains("exchange 3"))
    );
    let changed: Vec<&str> = r["summary"]["changed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(
        changed.contains(&"markers.tool_result")
            && changed.contains(&"turn_roles")
            && changed.contains(&"prompt"),
        "{changed:?}"
    );
}

#[test]
fn identical_templates_exit_zero() {
    if support::corpus().is_none() {
        return;
    }
    let req = support::root().join("tests/data/diff/request-tools.json");
    let (code, out, err) = run(&[
        "--template",
        "corpus:meta-llama-Llama-3.1-8B-Instruct.jinja",
        "--template",
        "corpus:meta-llama-Llama-3.3-70B-Instruct.jinja",
        "--request",
        req.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "stderr: {err}\n{out}");
    assert!(out.contains("prompts identical"), "{out}");
    assert!(
        out.contains("structure (template sources): identical"),
        "{out}"
    );
}

#[test]
fn text_output_shows_changes() {
    if support::corpus().is_none() {
        return;
    }
    let req = support::root().join("tests/data/diff/request-tools.json");
    let (code, out, err) = run(&[
        "--template",
        "corpus:Qwen-Qwen3-0.6B.jinja",
        "--template",
        "corpus:Qwen3.5-4B.jinja",
        "--request",
        req.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "stderr: {err}");
    assert!(
        out.contains("tool-call syntax  A: hermes   B: qwen3-coder  (changed)"),
        "{out}"
    );
    assert!(
        out.lines().any(|l| l.trim_start().starts_with("+ ")
            && l.contains("<function=stock_shelf>⏎<parameter=quantity>")),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.trim_start()
                == "- {\"name\": \"stock_shelf\", \"arguments\": {\"quantity\": "),
        "{out}"
    );
    assert!(
        out.contains("markers reasoning: A -   B <think>×1"),
        "{out}"
    );
}

#[test]
fn bad_input_names_file_and_position() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{\"messages\": [\n  {\"role\": \"user\",, }]}").unwrap();
    let t = dir.path().join("t.jinja");
    std::fs::write(&t, "{{ messages[0].content }}").unwrap();
    let (code, _, err) = run(&[
        "--template",
        t.to_str().unwrap(),
        "--template",
        t.to_str().unwrap(),
        "--request",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains("bad.json:2:") && err.contains("invalid JSON"),
        "{err}"
    );
    let (code, _, err) = run(&[
        "--template",
        t.to_str().unwrap(),
        "--request",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("exactly twice"), "{err}");
    let missing = dir.path().join("nope.jinja");
    let (code, _, err) = run(&[
        "--template",
        missing.to_str().unwrap(),
        "--template",
        t.to_str().unwrap(),
        "--request",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("nope.jinja"), "{err}");
}

#[test]
fn render_error_is_reported_not_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let ok = dir.path().join("ok.jinja");
    std::fs::write(
        &ok,
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}",
    )
    .unwrap();
    let bad = dir.path().join("bad.jinja");
    std::fs::write(&bad, "{{ raise_exception('no tools here') }}").unwrap();
    let req = dir.path().join("r.json");
    std::fs::write(&req, r#"{"messages":[{"role":"user","content":"hi"}]}"#).unwrap();
    let (code, out, err) = run(&[
        "--template",
        ok.to_str().unwrap(),
        "--template",
        bad.to_str().unwrap(),
        "--request",
        req.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(code, 1, "{err}");
    let r: Value = serde_json::from_str(&out).unwrap();
    let e = &r["exchanges"][0];
    assert_eq!(e["a"]["ok"], true);
    assert_eq!(e["b"]["ok"], false);
    assert!(e["b"]["error"].as_str().unwrap().contains("no tools here"));
    assert!(e.get("tokens").is_none());
    assert_eq!(r["summary"]["render_errors_b"], 1);
    assert!(e["changed"].as_array().unwrap().contains(&json!("render")));
}

/// With SmolLM2's GGUF vocabulary Qwen3.5's `<think>` (not a token of that vocabulary) is
/// ordinary pieces: the inserted generation-prompt `<think>` shows as text with no special
/// token, where the marker-aware splitter would call it a marker.
#[test]
fn gguf_vocab_tokens() {
    let (Some(_), Some(model)) = (support::corpus(), support::smollm2()) else {
        return;
    };
    let req = support::root().join("tests/data/diff/request-tools.json");
    let (code, out, err) = run(&[
        "--template",
        "corpus:Qwen-Qwen3-0.6B.jinja",
        "--template",
        "corpus:Qwen3.5-4B.jinja",
        "--vocab",
        model.to_str().unwrap(),
        "--request",
        req.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(code, 1, "{err}");
    let r: Value = serde_json::from_str(&out).unwrap();
    let t = &r["exchanges"][0]["tokens"];
    assert_eq!(t["tokenizer"], "vocab");
    let ops = t["ops"].as_array().unwrap();
    let last = ops.iter().rev().find(|o| o["tag"] != "equal").unwrap();
    assert!(
        last["b_text"].as_str().unwrap().contains("<think>"),
        "{last}"
    );
    assert!(
        last.get("b_special").is_none(),
        "<think> is not a special token of SmolLM2: {last}"
    );
    // the whole-prompt token count is smaller than the splitter's (BPE merges words and spaces)
    let (code2, out2, _) = run(&[
        "--template",
        "corpus:Qwen-Qwen3-0.6B.jinja",
        "--template",
        "corpus:Qwen3.5-4B.jinja",
        "--request",
        req.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(code2, 1);
    let r2: Value = serde_json::from_str(&out2).unwrap();
    assert_eq!(r2["exchanges"][0]["tokens"]["tokenizer"], "markers");
    assert!(
        t["a_tokens"].as_u64().unwrap()
            < r2["exchanges"][0]["tokens"]["a_tokens"].as_u64().unwrap()
    );
}
