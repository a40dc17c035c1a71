//! vLLM and SGLang tool-parser unit-test cases (tests/data/engine_vectors.json, each with its
//! source file, line and commit): toolscope reads the same calls, or the vector states the
//! difference between the engines and toolscope reads what the difference says (no call).
//! The syntax is given, as the engine's `--tool-call-parser` is (auto mode reads a bare JSON
//! reply as a call only with a declared tool, see docs/parser.md).

use serde_json::{Value, json};
use toolscope::parser::{Syntax, parse};

fn vectors() -> Vec<Value> {
    let p = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/engine_vectors.json"
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
    v["vectors"].as_array().unwrap().clone()
}

#[test]
fn vllm_and_sglang_vectors_pass_or_state_the_difference() {
    let mut failures = Vec::new();
    let (mut same, mut differ) = (0, 0);
    for v in vectors() {
        let src = v["source"].as_str().unwrap();
        let sx = Syntax::from_name(v["syntax"].as_str().unwrap()).unwrap();
        let tools = v.get("tools").map(|t| {
            Value::Array(
                t.as_array()
                    .unwrap()
                    .iter()
                    .map(|t| json!({"type": "function", "function": t}))
                    .collect(),
            )
        });
        let text = v["input"].as_str().unwrap();
        // the engine was configured with that family's parser: compare with the syntax given
        for syntax in [Some(sx)] {
            let out = parse(text, syntax, tools.as_ref());
            let want = v["expect"]["tool_calls"].as_array().unwrap();
            if v.get("difference").is_some() {
                // the engine reads calls toolscope does not (or the reverse): toolscope's side
                // of the stated difference
                let engine_has = !want.is_empty();
                let ours_has = !out.tool_calls.is_empty();
                if engine_has == ours_has {
                    failures.push(format!(
                        "{src}: documented difference not observed: {:?}",
                        out.tool_calls
                    ));
                }
                continue;
            }
            let ok = out.tool_calls.len() == want.len()
                && out.tool_calls.iter().zip(want).all(|(g, w)| {
                    g.name == w["name"].as_str().unwrap()
                        && w.get("arguments").is_none_or(|a| *a == g.arguments)
                });
            let content_ok = v["expect"]
                .get("content")
                .and_then(Value::as_str)
                .is_none_or(|c| out.content == c.trim());
            if !ok || !content_ok {
                failures.push(format!(
                    "{src} [{}]: got {:?} content {:?}, expected {}",
                    syntax.map(Syntax::name).unwrap_or("auto"),
                    out.tool_calls,
                    out.content,
                    v["expect"]
                ));
            }
        }
        if v.get("difference").is_some() {
            differ += 1;
        } else {
            same += 1;
        }
    }
    eprintln!("engine vectors: {same} read alike, {differ} documented differences");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
