//! llama.cpp tests/test-chat.cpp (build 11434) parsing vectors, transcribed to
//! tests/data/test_chat_vectors.json by scripts/transcribe_test_chat.py (each with its source line).
//! Every vector not marked `excluded` must parse to the expected content, reasoning and calls,
//! with the syntax given and with `auto`, in one shot and fed per character.

use serde_json::{Value, json};
use toolscope::parser::{ParseOutput, Parser, Syntax, parse};

fn vectors() -> Vec<Value> {
    let p = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/test_chat_vectors.json");
    let s = std::fs::read_to_string(p).expect("read vectors");
    let v: Value = serde_json::from_str(&s).expect("vectors JSON");
    v["vectors"].as_array().expect("vectors array").clone()
}

fn tools_of(v: &Value) -> Value {
    let tools: Vec<Value> = v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| json!({"type": "function", "function": {"name": t["name"], "parameters": t["parameters"]}}))
        .collect();
    match v.get("tool_choice") {
        Some(tc) => json!({"tools": tools, "tool_choice": tc}),
        None => Value::Array(tools),
    }
}

fn streamed(text: &str, syntax: Option<Syntax>, tools: &Value) -> ParseOutput {
    let mut p = Parser::new(syntax, Some(tools));
    let mut c = toolscope::parser::Collector::default();
    let mut buf = [0u8; 4];
    for ch in text.chars() {
        for e in p.feed(ch.encode_utf8(&mut buf)) {
            c.apply(&e);
        }
    }
    for e in p.finish() {
        c.apply(&e);
    }
    c.into_output()
}

fn check(out: &ParseOutput, exp: &Value) -> Result<(), String> {
    let want_c = exp["content"].as_str().unwrap().trim();
    let want_r = exp["reasoning"].as_str().unwrap().trim();
    if out.content != want_c {
        return Err(format!("content {:?} != expected {:?}", out.content, want_c));
    }
    if out.reasoning != want_r {
        return Err(format!("reasoning {:?} != expected {:?}", out.reasoning, want_r));
    }
    let calls = exp["tool_calls"].as_array().unwrap();
    if calls.len() != out.tool_calls.len() {
        return Err(format!("{} calls, expected {}: {:?}", out.tool_calls.len(), calls.len(), out.tool_calls));
    }
    for (got, want) in out.tool_calls.iter().zip(calls) {
        if got.name != want["name"].as_str().unwrap() || got.arguments != want["arguments"] {
            return Err(format!("call {}({}) != expected {}({})", got.name, got.arguments, want["name"], want["arguments"]));
        }
        if let Some(id) = want.get("id").and_then(Value::as_str)
            && got.id.as_deref() != Some(id)
        {
            return Err(format!("call id {:?} != expected {id:?}", got.id));
        }
    }
    // gpt-oss messages to built-in tools are listed as malformed (llama.cpp drops them silently)
    if out.malformed.iter().any(|m| !m.message.contains("built-in tool")) {
        return Err(format!("unexpected malformed: {:?}", out.malformed));
    }
    Ok(())
}

#[test]
fn llama_cpp_test_chat_vectors_pass() {
    let vs = vectors();
    let mut failures = Vec::new();
    let mut passed = 0;
    let mut excluded = 0;
    for v in &vs {
        if v.get("excluded").is_some() {
            excluded += 1;
            continue;
        }
        let line = v["line"].as_u64().unwrap();
        let text = v["input"].as_str().unwrap();
        let sx = Syntax::from_name(v["syntax"].as_str().unwrap()).expect("known syntax");
        let tools = tools_of(v);
        for (mode, syntax) in [("given", Some(sx)), ("auto", None)] {
            let one = parse(text, syntax, Some(&tools));
            if let Err(e) = check(&one, &v["expect"]) {
                failures.push(format!("test-chat.cpp:{line} [{} / {mode}] {text:?}: {e}", sx.name()));
                continue;
            }
            let st = streamed(text, syntax, &tools);
            if st != one {
                failures.push(format!("test-chat.cpp:{line} [{} / {mode}] per-character parse differs: {st:?} vs {one:?}", sx.name()));
            }
        }
        passed += 1;
    }
    eprintln!("test-chat vectors: {} total, {passed} checked, {excluded} excluded", vs.len());
    assert!(passed >= 100, "too few vectors checked: {passed}");
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn every_exclusion_says_why() {
    for v in vectors() {
        if let Some(e) = v.get("excluded") {
            assert!(e.as_str().is_some_and(|s| s.len() > 10), "line {}: bare exclusion", v["line"]);
        }
    }
}
