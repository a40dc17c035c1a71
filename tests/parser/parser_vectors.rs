//! llama.cpp tests/test-chat.cpp (build 11434) parsing vectors, every `peg_tester` case,
//! transcribed to tests/data/test_chat_vectors.json by scripts/transcribe_test_chat.py (each with
//! its source line, template, generation prompt, reasoning_format, continuation).
//!
//! Every vector not marked `excluded` must parse to the expected content, reasoning and calls,
//! with the template's syntax and with `auto`, in one shot and fed per character. How a vector's
//! settings map onto toolscope:
//! * `generation_prompt` — llama.cpp parses the generation prompt + the reply (common/chat.cpp
//!   `effective_input`); toolscope starts inside reasoning when the prompt opened it
//!   ([`Syntax::prompt_opens_reasoning`]).
//! * `reasoning_format: none` — llama.cpp then returns the reasoning inline in `content`,
//!   markers and all; toolscope always separates it. Checked as: same calls, and the expected
//!   content holds toolscope's reasoning text followed by toolscope's content.
//! * `continuation` — the reply continues a prefilled assistant message: llama.cpp's result is
//!   the prefill's content/reasoning followed by the reply's (continuing inside reasoning when
//!   the prefill stopped there).

use serde_json::{Value, json};
use toolscope::parser::{ParseOutput, Parser, ParserOptions, Syntax, parse_with};

fn vectors() -> Vec<Value> {
    let p = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/test_chat_vectors.json"
    );
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

fn streamed(text: &str, syntax: Option<Syntax>, tools: &Value, opts: ParserOptions) -> ParseOutput {
    let mut p = Parser::with_options(syntax, Some(tools), opts);
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

/// The reply parsed with the template's syntax, content and reasoning not trimmed.
fn untrimmed(v: &Value) -> ParseOutput {
    let sx = v["syntax"].as_str().and_then(Syntax::from_name);
    let tools = tools_of(v);
    let mut p = Parser::with_options(sx, Some(&tools), options(v, sx));
    let mut c = toolscope::parser::Collector::default();
    for e in p.feed(v["input"].as_str().unwrap()) {
        c.apply(&e);
    }
    for e in p.finish() {
        c.apply(&e);
    }
    c.out
}

/// The options a vector implies (see the module doc).
fn options(v: &Value, syntax: Option<Syntax>) -> ParserOptions {
    let reasoning_open = match v.get("continuation") {
        Some(c) => c["mode"] == "reasoning",
        None => v["generation_prompt"]
            .as_str()
            .is_some_and(|gp| Syntax::prompt_opens_reasoning(gp, syntax)),
    };
    ParserOptions {
        reasoning_open,
        continuation: v.get("continuation").is_some(),
    }
}

fn check(out: &ParseOutput, v: &Value) -> Result<(), String> {
    let exp = &v["expect"];
    // with reasoning_format none llama.cpp returns no reasoning, the prefill's neither
    let separate = v["reasoning_format"] != "none";
    let (pre_c, pre_r) = match v.get("continuation") {
        Some(c) => (
            c["content"].as_str().unwrap_or(""),
            if separate {
                c["reasoning"].as_str().unwrap_or("")
            } else {
                ""
            },
        ),
        None => ("", ""),
    };
    // a continuation: the prefill, then the reply (untrimmed, then trimmed as the expectation)
    let (got_c, got_r) = if v.get("continuation").is_some() {
        let raw = untrimmed(v);
        (
            format!("{pre_c}{}", raw.content).trim().to_string(),
            format!("{pre_r}{}", raw.reasoning).trim().to_string(),
        )
    } else {
        (out.content.clone(), out.reasoning.clone())
    };
    let want_c = exp["content"].as_str().unwrap().trim();
    let want_r = exp["reasoning"].as_str().unwrap().trim();
    let inline = !separate && want_r.is_empty() && !got_r.is_empty();
    let norm = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    if inline {
        // llama.cpp kept the reasoning inline in content (with its markers)
        let wc = norm(want_c);
        let (gr, gc) = (norm(&got_r), norm(&got_c));
        let at = wc
            .find(&gr)
            .ok_or_else(|| format!("reasoning_format none: expected content {want_c:?} does not hold the reasoning {got_r:?}"))?;
        if !wc[at + gr.len()..].ends_with(&gc) {
            return Err(format!(
                "reasoning_format none: expected content {want_c:?} does not end with the content {got_c:?}"
            ));
        }
    } else {
        if got_c != want_c {
            return Err(format!("content {got_c:?} != expected {want_c:?}"));
        }
        if got_r != want_r {
            return Err(format!("reasoning {got_r:?} != expected {want_r:?}"));
        }
    }
    let calls = exp["tool_calls"].as_array().unwrap();
    if calls.len() != out.tool_calls.len() {
        return Err(format!(
            "{} calls, expected {}: {:?}",
            out.tool_calls.len(),
            calls.len(),
            out.tool_calls
        ));
    }
    for (got, want) in out.tool_calls.iter().zip(calls) {
        if got.name != want["name"].as_str().unwrap() || got.arguments != want["arguments"] {
            return Err(format!(
                "call {}({}) != expected {}({})",
                got.name, got.arguments, want["name"], want["arguments"]
            ));
        }
        if let Some(id) = want.get("id").and_then(Value::as_str)
            && got.id.as_deref() != Some(id)
        {
            return Err(format!("call id {:?} != expected {id:?}", got.id));
        }
    }
    // gpt-oss messages to built-in tools are listed as malformed (llama.cpp drops them silently)
    if out
        .malformed
        .iter()
        .any(|m| !m.message.contains("built-in tool"))
    {
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
        let tmpl = v["template"].as_str().unwrap();
        let text = v["input"].as_str().unwrap();
        let sx = v["syntax"].as_str().map(|n| {
            Syntax::from_name(n).unwrap_or_else(|| panic!("line {line}: unknown syntax {n}"))
        });
        let tools = tools_of(v);
        let mut ok = true;
        for (mode, syntax) in [("given", sx), ("auto", None)] {
            if mode == "auto" && sx.is_some_and(|s| !s.auto_detected()) {
                // a syntax whose markers are ordinary words is read only when chosen
                continue;
            }
            let opts = options(v, syntax.or(sx));
            let one = parse_with(text, syntax, Some(&tools), opts);
            if let Err(e) = check(&one, v) {
                failures.push(format!(
                    "test-chat.cpp:{line} {tmpl} [{} / {mode}] {text:?}: {e}",
                    sx.map(Syntax::name).unwrap_or("none")
                ));
                ok = false;
                continue;
            }
            let st = streamed(text, syntax, &tools, opts);
            if st != one {
                failures.push(format!("test-chat.cpp:{line} {tmpl} [{mode}] per-character parse differs: {st:?} vs {one:?}"));
                ok = false;
            }
        }
        if ok {
            passed += 1;
        }
    }
    eprintln!(
        "test-chat vectors: {} total, {passed} pass, {excluded} excluded, {} failures",
        vs.len(),
        failures.len()
    );
    assert!(passed >= 400, "too few vectors checked: {passed}");
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn every_exclusion_says_why() {
    for v in vectors() {
        if let Some(e) = v.get("excluded") {
            let e = e.as_str().unwrap_or("");
            assert!(e.len() > 40, "line {}: bare exclusion", v["line"]);
            assert!(
                !e.contains("not implemented") && !e.contains("not modelled"),
                "line {}: an exclusion must be an engine difference, not a missing feature: {e}",
                v["line"]
            );
        }
    }
}
