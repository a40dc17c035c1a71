//! The replay trace: O(1) views agree with a resumed live parser across snapshot boundaries,
//! divergences are found at the right step, re-cuts preserve the text.

use serde_json::json;
use toolscope::parser::trace::{Cut, SNAPSHOT_EVERY, Trace, first_divergence, recut};
use toolscope::parser::{Collector, Syntax, parse};

fn mixed() -> String {
    let mut s = String::new();
    for i in 0..40 {
        s += &format!("Step {i}: compare a < b. <think>why {i}</think>\n");
        s += &format!(
            "<tool_call>\n{{\"name\": \"f\", \"arguments\": {{\"i\": {i}}}}}\n</tool_call>\n"
        );
        s += "<|tool_call>call:g{s:<|\"|>é漢<|\"|>}<tool_call|>";
    }
    s
}

fn chunks3(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < s.len() {
        let mut e = (at + 3).min(s.len());
        while !s.is_char_boundary(e) {
            e += 1;
        }
        out.push(s[at..e].to_string());
        at = e;
    }
    out
}

#[test]
fn views_and_resumed_parsers_agree_across_snapshots() {
    let text = mixed();
    let chunks = chunks3(&text);
    assert!(chunks.len() > 3 * SNAPSHOT_EVERY);
    let t = Trace::record(&chunks, None, None);
    assert_eq!(t.len(), chunks.len() + 1);
    let last = t.len() - 1;
    for step in [
        0,
        1,
        SNAPSHOT_EVERY - 1,
        SNAPSHOT_EVERY,
        SNAPSHOT_EVERY + 1,
        2 * SNAPSHOT_EVERY + 7,
        last - 1,
    ] {
        let p = t.parser_at(step);
        assert_eq!(p.state(), t.steps()[step].state, "step {step}");
        // resume: the rest of the chunks give the trace's final output
        let mut p = p;
        let v = t.state_at(step);
        let mut c = Collector::default();
        // seed the collector with what was released up to the step
        c.out.content = v.content.to_string();
        c.out.reasoning = format!("{}{}", v.reasoning.0, v.reasoning.1);
        c.out.tool_calls = v.tool_calls.to_vec();
        for ch in &chunks[step + 1..] {
            for e in p.feed(ch) {
                c.apply(&e);
            }
        }
        for e in p.finish() {
            c.apply(&e);
        }
        let one = parse(&text, None, None);
        let got = c.into_output();
        assert_eq!(got.content, one.content, "step {step}");
        assert_eq!(got.reasoning, one.reasoning, "step {step}");
        assert_eq!(got.tool_calls, one.tool_calls, "step {step}");
    }
    // final view = one-shot
    let v = t.state_at(usize::MAX);
    assert_eq!(v.step, last);
    let one = parse(&text, None, None);
    assert_eq!(v.tool_calls.len(), 80);
    assert_eq!(v.tool_calls, one.tool_calls.as_slice());
    assert_eq!(v.content.trim(), one.content);
}

#[test]
fn first_divergence_names_the_step_that_differs() {
    let a = "Hello <tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call> bye".to_string();
    let reference = Trace::record(std::slice::from_ref(&a), Some(Syntax::Hermes), None);
    // identical text, other chunking: no divergence
    let same = Trace::record(&chunks3(&a), Some(Syntax::Hermes), None);
    assert_eq!(first_divergence(&reference, &same), None);
    // the call differs: found at the step that closed the block
    let b = vec![
        "Hello ".to_string(),
        "<tool_call>{\"name\": \"g\", ".to_string(),
        "\"arguments\": {}}</tool_call>".to_string(),
        " bye".to_string(),
    ];
    let other = Trace::record(&b, Some(Syntax::Hermes), None);
    let (step, why) = first_divergence(&reference, &other).expect("divergence");
    assert_eq!(step, 2);
    assert!(why.contains("tool call"), "{why}");
    // content differs in the first chunk
    let c = vec!["Hellp ".to_string()];
    let (step, why) = first_divergence(&reference, &Trace::record(&c, Some(Syntax::Hermes), None))
        .expect("divergence");
    assert_eq!(step, 0);
    assert!(why.contains("content"), "{why}");
    // a prefix only: diverges at the end (final step)
    let d = vec!["Hello ".to_string()];
    let t = Trace::record(&d, Some(Syntax::Hermes), None);
    let (step, why) = first_divergence(&reference, &t).expect("divergence");
    assert_eq!(step, t.len() - 1);
    assert!(why.contains("at the end"), "{why}");
}

#[test]
fn recuts_keep_the_text() {
    let chunks: Vec<String> = ["<to", "ol_call>é", "漢</tool", "_call>"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let text = chunks.concat();
    for cut in [
        Cut::PerChar,
        Cut::Recorded,
        Cut::EveryN(3),
        Cut::Pieces(vec!["<".into(), "tool_call".into(), ">".into()]),
        // pieces that do not spell the text: cut at their lengths, moved to char boundaries
        Cut::Pieces(vec!["xxxxxxxxxxx".into(), "y".into(), "zzz".into()]),
    ] {
        let re = recut(&chunks, &cut);
        assert_eq!(re.concat(), text, "{cut:?}");
        assert!(re.iter().all(|c| !c.is_empty()), "{cut:?}: {re:?}");
    }
    assert_eq!(recut(&chunks, &Cut::PerChar).len(), text.chars().count());
    assert_eq!(recut(&chunks, &Cut::EveryN(3)).len(), 2);
}

#[test]
fn steps_json_is_concise() {
    let chunks: Vec<String> = [
        "Hi <tool_",
        "call>{\"name\": \"f\", \"arguments\": {\"a\": 1}}</tool_call>",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let t = Trace::record(&chunks, None, None);
    let j = t.steps_json();
    assert_eq!(j[0]["state"], "partial_marker");
    assert_eq!(j[0]["held"], "<tool_");
    assert_eq!(j[0]["events"], json!([{"content": "Hi "}]));
    assert_eq!(j[1]["events"][0]["call_start"]["name"], "f");
    assert_eq!(j[1]["events"][1]["arguments_delta"]["delta"], "{\"a\":1}");
    assert_eq!(j[2]["state"], "done");
}

/// `steps_json` is bounded per step (issue #27 item 2): one chunk of 40,000 Hermes calls
/// (4.5 MB) gives a step whose chunk is cut to 1,024 characters plus `chunk_bytes`, and whose
/// events list the first 64 of the ≥ 120,000 (40,000 × start, delta, end, and content) plus
/// `events_total`; the JSON is a few KB, not a copy of the input.
#[test]
fn steps_json_is_bounded_per_step() {
    let call = "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}}</tool_call>\n";
    let text = format!("Hi\n{}", call.repeat(40_000));
    let t = Trace::record(std::slice::from_ref(&text), None, None);
    let j = t.steps_json();
    assert_eq!(j[0]["chunk_bytes"], text.len());
    assert_eq!(j[0]["chunk"].as_str().unwrap().chars().count(), 1025); // 1,024 + `…`
    assert_eq!(j[0]["events"].as_array().unwrap().len(), 64);
    assert!(j[0]["events_total"].as_u64().unwrap() >= 3 * 40_000);
    assert!(j.to_string().len() < 64 * 1024);
}

/// The one display form of states and events (issue 13 item 4; the TUI Replay pane and the
/// CLI print these, never `{:?}`). Expected strings hand-written from docs/parser.md.
#[test]
fn states_and_events_have_one_readable_form() {
    use toolscope::parser::{Event, Parser, State, StateKind, Syntax};
    let mut p = Parser::new(Some(Syntax::Hermes), None);
    let ev = p.feed("Hi <tool_call>{\"name\": \"get_weather\"");
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0].to_string(), "content \"Hi \"");
    assert_eq!(p.state().to_string(), "in_call hermes");
    let ev = p.feed(", \"arguments\": {\"city\": \"Paris\"}}</tool_call>");
    let shown: Vec<String> = ev.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [
            "call_start get_weather [0] hermes @3",
            "arguments_delta [0] {\"city\":\"Paris\"}",
            "call_end get_weather [0]",
        ]
    );
    let held = State {
        kind: StateKind::HoldingJson,
        syntax: None,
        held_start: 0,
        held_end: 3,
    };
    assert_eq!(held.to_string(), "holding_json");
    assert_eq!(
        Event::ContentToReasoning { bytes: 25 }.to_string(),
        "content_to_reasoning 25 bytes"
    );
    // escape sequences in model output never reach the terminal raw
    assert_eq!(
        Event::Content("\u{1b}[2J".into()).to_string(),
        "content \"\\u{1b}[2J\""
    );
}

/// `Trace::record_lean` (what `check` and the list counts judge) gathers exactly what
/// `Trace::record_index` gathers from its events, step by step, only without the events: on
/// calls, reasoning, a repaired call (extra brace), a malformed block and content moved to
/// reasoning by a bare `</think>`, per character and in 3-byte chunks. Each side's divergence
/// from its own one-shot parse is the same.
#[test]
fn lean_traces_release_what_full_traces_release() {
    use std::sync::Arc;
    use toolscope::parser::{ParserOptions, ToolIndex};
    let texts = [
        mixed(),
        "I thought about it</think>Answer: <tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}}\n</tool_call> tail".to_owned(),
        "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": </tool_call> and <tool_call>not json</tool_call>".to_owned(),
    ];
    let tools = Arc::new(ToolIndex::from_value(Some(&json!([
        {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    ]))));
    let mut seen = (0, 0, 0, 0);
    for text in &texts {
        let whole = [text.clone()];
        for chunks in [recut(&whole, &Cut::PerChar), chunks3(text), whole.to_vec()] {
            let rec = |lean: bool, c: &[String]| {
                let it = c.iter().map(String::as_str);
                let o = ParserOptions::default();
                if lean {
                    Trace::record_lean(it, None, tools.clone(), o)
                } else {
                    Trace::record_index(it, None, tools.clone(), o)
                }
            };
            let (full, lean) = (rec(false, &chunks), rec(true, &chunks));
            assert_eq!(full.len(), lean.len());
            for step in 0..full.len() {
                // the same step but for its range of events (none kept)
                let s = full.steps()[step];
                assert!(
                    toolscope::parser::trace::Step {
                        events: (0, 0),
                        ..s
                    } == lean.steps()[step],
                    "step {step} of {text:?}"
                );
                let (a, b) = (full.state_at(step), lean.state_at(step));
                assert_eq!(
                    (
                        a.chunk,
                        a.content,
                        a.reasoning,
                        a.tool_calls,
                        a.repairs,
                        a.malformed
                    ),
                    (
                        b.chunk,
                        b.content,
                        b.reasoning,
                        b.tool_calls,
                        b.repairs,
                        b.malformed
                    ),
                    "step {step} of {text:?}"
                );
                assert!(b.events.is_empty());
            }
            let v = full.state_at(usize::MAX);
            seen.0 += v.tool_calls.len();
            seen.1 += v.repairs.len();
            seen.2 += v.malformed.len();
            seen.3 += v.reasoning.0.len();
            assert_eq!(
                first_divergence(&rec(false, &whole), &full),
                first_divergence(&rec(true, &whole), &lean)
            );
        }
    }
    // every kind of release was exercised
    assert!(
        seen.0 > 0 && seen.1 > 0 && seen.2 > 0 && seen.3 > 0,
        "{seen:?}"
    );
}
