//! Field cases 03, 04 and 08 (tests/cases/), with their hand-checked answers.

use crate::support;

use serde_json::{Value, json};
use toolscope::parser::trace::{Cut, Trace, chunking_divergence, recut};
use toolscope::parser::{Event, ParserOptions, Syntax, parse};

fn syntax_of(c: &Value) -> Option<Syntax> {
    let n = c["inputs"]["syntax"].as_str().unwrap();
    if n == "auto" {
        None
    } else {
        Some(Syntax::from_name(n).expect("known syntax"))
    }
}

fn calls_json(out: &toolscope::parser::ParseOutput) -> Value {
    Value::Array(
        out.tool_calls
            .iter()
            .map(|c| json!({"name": c.name, "arguments": c.arguments}))
            .collect(),
    )
}

#[test]
fn case_03_xml_params_typed_by_schema() {
    let c = support::case_json("03-xml-params-int-or-null", "case.json");
    let raw = c["inputs"]["raw"].as_str().unwrap();
    let out = parse(raw, syntax_of(&c), Some(&c["inputs"]["tools"]));
    assert_eq!(calls_json(&out), c["expect"]["tool_calls"]);
    // the integer really is a JSON integer, the string-typed 5 really a string
    assert_eq!(out.tool_calls[0].arguments["limit"], json!(5));
    assert_eq!(out.tool_calls[0].arguments["unit"], json!("5"));
    // auto-detection gives the same
    assert_eq!(
        calls_json(&parse(raw, None, Some(&c["inputs"]["tools"]))),
        c["expect"]["tool_calls"]
    );
}

#[test]
fn case_03_without_schema_values_stay_strings() {
    let c = support::case_json("03-xml-params-int-or-null", "case.json");
    let out = parse(c["inputs"]["raw"].as_str().unwrap(), syntax_of(&c), None);
    assert_eq!(
        out.tool_calls[0].arguments,
        json!({"limit": "5", "unit": "5"})
    );
}

fn case04() -> (Value, Vec<String>) {
    let c = support::case_json("04-split-think-close", "case.json");
    let chunks: Vec<String> = serde_json::from_value(c["inputs"]["chunks"].clone()).unwrap();
    (c, chunks)
}

fn check04(c: &Value, trace: &Trace) {
    let v = trace.state_at(usize::MAX);
    let reasoning = format!("{}{}", v.reasoning.0, v.reasoning.1);
    assert_eq!(reasoning.trim(), c["expect"]["reasoning"].as_str().unwrap());
    assert_eq!(v.content.trim(), c["expect"]["content"].as_str().unwrap());
    let calls: Value = Value::Array(
        v.tool_calls
            .iter()
            .map(|c| json!({"name": c.name, "arguments": c.arguments}))
            .collect(),
    );
    assert_eq!(calls, c["expect"]["tool_calls"]);
}

#[test]
fn case_04_split_think_close_as_recorded() {
    let (c, chunks) = case04();
    let t = Trace::record(&chunks, syntax_of(&c), None);
    check04(&c, &t);
    // the lone "<" is held as a partial marker, not released as content or reasoning
    let s1 = t.state_at(1);
    assert_eq!(s1.chunk, "<");
    assert_eq!(s1.held, "<");
    assert!(s1.events.is_empty(), "{:?}", s1.events);
}

#[test]
fn case_04_recut_per_character_and_every_n() {
    let (c, chunks) = case04();
    for cut in [Cut::PerChar, Cut::EveryN(2), Cut::EveryN(3), Cut::Recorded] {
        let re = recut(&chunks, &cut);
        assert_eq!(re.concat(), chunks.concat());
        let t = Trace::record(&re, syntax_of(&c), None);
        check04(&c, &t);
        assert_eq!(
            chunking_divergence(&chunks, &cut, syntax_of(&c), None, ParserOptions::default()),
            None,
            "{cut:?}"
        );
    }
    // per character there is one step per char plus the finish step
    let n = chunks.concat().chars().count();
    assert_eq!(
        Trace::record(&recut(&chunks, &Cut::PerChar), syntax_of(&c), None).len(),
        n + 1
    );
}

#[test]
fn case_08_stray_brace_repaired_and_visible_as_a_step() {
    let c = support::case_json("08-extra-brace-after-call", "case.json");
    let raw = c["inputs"]["raw"].as_str().unwrap();
    let tools = &c["inputs"]["tools"];
    let out = parse(raw, syntax_of(&c), Some(tools));
    assert_eq!(out.content, c["expect"]["content"].as_str().unwrap());
    assert_eq!(calls_json(&out), c["expect"]["tool_calls"]);
    assert!(out.malformed.is_empty());
    assert_eq!(out.repairs.len(), 1, "{:?}", out.repairs);
    assert_eq!(out.repairs[0].kind, "stray_closer");
    // the offset points at the stray brace in the raw text
    let off = out.repairs[0].offset;
    assert_eq!(&raw[off..off + 1], "}");
    assert_eq!(off, raw.find("}}}").unwrap() + 2);
    // per character: the repair is an event of exactly one step, the one that closed the block
    let chunks: Vec<String> = raw.chars().map(String::from).collect();
    let t = Trace::record(&chunks, syntax_of(&c), Some(tools));
    let steps: Vec<usize> = (0..t.len())
        .filter(|&i| {
            t.state_at(i)
                .events
                .iter()
                .any(|e| matches!(e, Event::Repair(r) if r.kind == "stray_closer"))
        })
        .collect();
    assert_eq!(steps.len(), 1);
    let s = t.state_at(steps[0]);
    assert_eq!(
        t.input()[..t.steps()[steps[0]].input.1].len(),
        raw.len(),
        "repair decided when `</function_call>` completed"
    );
    assert_eq!(s.chunk, ">");
}
