//! `toolscope diff --engine A --engine B` (offline): one template, one request, two render
//! profiles, as a process. Expected values are hand-checked against the engines' sources:
//! * transformers: `tojson` is Python `json.dumps` → `"minimum": 1.0`, `{{ none }}` → `None`;
//! * llama.cpp b11434: `tojson` writes a float through `std::ostream <<` (common/jinja/value.cpp
//!   `value_to_json_internal`) → `"minimum": 1`; `{{ none }}` prints nothing
//!   (runtime.h `gather_string_parts_recursive`); `enable_thinking` is always in the context
//!   (common/chat.cpp `common_chat_template_direct_apply_impl`), here false: flipping it changes
//!   `False` to `True` in the middle of the prompt, which `analyze_reasoning` does not read as a
//!   reasoning block (chat-diff-analyzer.cpp `compare_thinking_enabled`), so the server default
//!   stays off.

use crate::support;

use std::process::Command;

use serde_json::{Value, json};

const TEMPLATE: &str = "{%- for t in tools %}{{ t.function.parameters | tojson }}\n{% endfor -%}\
{%- for m in messages %}<|{{ m.role }}|>{{ m.content }}|{{ m.missing }}\n{% endfor -%}\
{%- if enable_thinking is defined %}thinking={{ enable_thinking }}\n{% endif -%}\
{%- if add_generation_prompt %}<|assistant|>{% endif %}";

fn request() -> Value {
    json!({
        "messages": [{"role": "user", "content": "Search for units"}],
        "tools": [{"type": "function", "function": {"name": "search_docs", "description": "Search",
            "parameters": {"type": "object", "properties": {"limit": {"type": "number", "minimum": 1.0}}}}}]
    })
}

/// The template and the request in a temporary directory (kept alive by the first element).
fn fixture() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("t.jinja");
    let r = dir.path().join("req.json");
    std::fs::write(&t, TEMPLATE).unwrap();
    std::fs::write(&r, request().to_string()).unwrap();
    (dir, t, r)
}

fn run(args: &[&str]) -> (i32, Value) {
    let out = Command::new(support::bin())
        .args(args)
        .output()
        .expect("run toolscope");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), v)
}

#[test]
fn transformers_vs_llama_cpp_on_the_same_request() {
    let (_dir, t, r) = fixture();
    let (code, v) = run(&[
        "diff",
        "--engine",
        "transformers",
        "--engine",
        "llama.cpp",
        "--template",
        t.to_str().unwrap(),
        "--request",
        r.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(code, 1, "the profiles differ: {v:#}");
    assert_eq!(v["mode"], "engines");
    assert_eq!(v["a"]["engine"], "transformers");
    assert_eq!(v["b"]["engine"], "llama.cpp@11434");
    assert_eq!(v["exchanges"][0]["identical"], false);
    // the prompts themselves, through `render --engine` (the same render path)
    let render = |engine: &str| -> String {
        let out = Command::new(support::bin())
            .args([
                "render",
                "--engine",
                engine,
                "--template",
                t.to_str().unwrap(),
                "--request",
                r.to_str().unwrap(),
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    // hand-derived: Python json.dumps / Jinja2 str(None) vs llama.cpp's value_to_json / printer
    assert_eq!(
        render("transformers"),
        "{\"type\": \"object\", \"properties\": {\"limit\": {\"type\": \"number\", \"minimum\": 1.0}}}\n<|user|>Search for units|\n<|assistant|>"
    );
    assert_eq!(
        render("llama.cpp"),
        "{\"type\": \"object\", \"properties\": {\"limit\": {\"type\": \"number\", \"minimum\": 1}}}\n<|user|>Search for units|\nthinking=False\n<|assistant|>"
    );
}

#[test]
fn same_profile_twice_is_identical() {
    let (_dir, t, r) = fixture();
    let (code, v) = run(&[
        "diff",
        "--engine",
        "llama.cpp@11434",
        "--engine",
        "llama.cpp",
        "--template",
        t.to_str().unwrap(),
        "--request",
        r.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(code, 0, "{v:#}");
}

#[test]
fn unknown_engine_is_a_usage_error() {
    let out = Command::new(support::bin())
        .args([
            "diff",
            "--engine",
            "vllm",
            "--engine",
            "llama.cpp",
            "--request",
            "x.json",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("unknown engine"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
