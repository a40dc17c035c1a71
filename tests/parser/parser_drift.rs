//! Accepted drift (each a visible repair) and malformed blocks (kept as text), hand-checked.

use serde_json::{Value, json};
use toolscope::parser::trace::{Cut, chunking_divergence};
use toolscope::parser::{ParserOptions, Syntax, parse};

fn tools() -> Value {
    json!([{"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}}}}])
}

fn kinds(o: &toolscope::parser::ParseOutput) -> Vec<&str> {
    o.repairs.iter().map(|r| r.kind.as_str()).collect()
}

#[test]
fn json_drifts_are_repaired() {
    let t = tools();
    let cases = [
        (
            "<tool_call>{\"name\": \"get_time\", \"parameters\": {\"tz\": \"UTC\"}}</tool_call>",
            "parameters_for_arguments",
        ),
        (
            "<tool_call>{\"name\": \"get_time\", \"input\": {\"tz\": \"UTC\"}}</tool_call>",
            "input_for_arguments",
        ),
        (
            "<tool_call>{\"name\": \"get_time\", \"tz\": \"UTC\"}</tool_call>",
            "top_level_arguments",
        ),
        (
            "<tool_call>{\"type\": \"function\", \"function\": {\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}}}</tool_call>",
            "function_wrapper",
        ),
        (
            "<tool_call>{\"name\": \"get_time\", \"arguments\": \"{\\\"tz\\\": \\\"UTC\\\"}\"}</tool_call>",
            "string_arguments",
        ),
        (
            "<tool_call>{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}}]</tool_call>",
            "stray_closer",
        ),
        (
            "<tool_call>{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}}</tool_call>}",
            "stray_closer",
        ),
        (
            "{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}}",
            "bare_json",
        ),
        (
            "<tool_call>{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}}",
            "missing_end_marker",
        ),
    ];
    for (text, kind) in cases {
        for syntax in [Some(Syntax::Hermes), None] {
            let o = parse(text, syntax, Some(&t));
            assert_eq!(o.tool_calls.len(), 1, "{text}: {o:?}");
            assert_eq!(o.tool_calls[0].name, "get_time");
            assert_eq!(o.tool_calls[0].arguments, json!({"tz": "UTC"}), "{text}");
            assert!(kinds(&o).contains(&kind), "{text}: {:?}", o.repairs);
            assert_eq!(o.content, "", "{text}");
            assert!(o.malformed.is_empty());
            for cut in [Cut::PerChar, Cut::EveryN(1)] {
                let chunks: Vec<String> = text.chars().map(String::from).collect();
                assert_eq!(
                    chunking_divergence(&chunks, &cut, syntax, Some(&t), ParserOptions::default()),
                    None
                );
            }
        }
    }
}

#[test]
fn bare_json_needs_a_known_tool_or_required_choice() {
    let text = "{\"name\": \"other\", \"arguments\": {}}";
    // unknown tool, choice auto: it is content
    let o = parse(text, None, Some(&tools()));
    assert!(o.tool_calls.is_empty());
    assert_eq!(o.content, text);
    // tool_choice required: a call
    let req = json!({"tools": tools(), "tool_choice": "required"});
    let o = parse(text, None, Some(&req));
    assert_eq!(o.tool_calls.len(), 1);
    assert_eq!(kinds(&o), ["bare_json"]);
    // llama3 syntax: native, no repair
    let o = parse(
        "{\"name\": \"other\", \"parameters\": {\"a\": 1}}",
        Some(Syntax::Llama3),
        None,
    );
    assert_eq!(o.tool_calls[0].arguments, json!({"a": 1}));
    assert!(o.repairs.is_empty(), "{:?}", o.repairs);
}

#[test]
fn what_does_not_parse_stays_text_and_is_malformed() {
    let text = "before <tool_call>{\"name\": get_time}</tool_call> after";
    let o = parse(text, Some(Syntax::Hermes), Some(&tools()));
    assert!(o.tool_calls.is_empty());
    assert_eq!(o.content, text);
    assert_eq!(o.malformed.len(), 1);
    assert_eq!(o.malformed[0].syntax, "hermes");
    assert_eq!(o.malformed[0].offset, 7);
    assert_eq!(
        o.malformed[0].text,
        "<tool_call>{\"name\": get_time}</tool_call>"
    );
    // two stray closers are not "one stray closer"
    let o = parse(
        "<tool_call>{\"name\": \"get_time\", \"arguments\": {}}}}</tool_call>",
        Some(Syntax::Hermes),
        None,
    );
    assert!(o.tool_calls.is_empty());
    assert_eq!(o.malformed.len(), 1);
}

#[test]
fn explicit_syntax_ignores_other_syntaxes_auto_reads_them() {
    let text = "<|tool_call>call:get_time{tz:<|\"|>UTC<|\"|>}<tool_call|>";
    let o = parse(text, Some(Syntax::Hermes), None);
    assert!(o.tool_calls.is_empty());
    assert_eq!(o.content, text);
    let o = parse(text, None, None);
    assert_eq!(o.tool_calls[0].arguments, json!({"tz": "UTC"}));
    assert_eq!(o.tool_calls[0].syntax.as_deref(), Some("gemma4"));
}

#[test]
fn text_is_released_as_soon_as_it_cannot_be_a_marker() {
    let mut p = toolscope::parser::Parser::new(Some(Syntax::Hermes), None);
    assert_eq!(
        p.feed("a < b"),
        vec![toolscope::parser::Event::Content("a < b".into())]
    );
    assert_eq!(
        p.feed(" <tool"),
        vec![toolscope::parser::Event::Content(" ".into())]
    );
    assert_eq!(p.state().kind, toolscope::parser::StateKind::PartialMarker);
    assert_eq!(
        p.feed("box>"),
        vec![toolscope::parser::Event::Content("<toolbox>".into())]
    );
    // a reply starting with `{` is held to the end
    let mut p = toolscope::parser::Parser::new(None, None);
    assert!(p.feed("{\"a\": 1}").is_empty());
    assert_eq!(p.state().kind, toolscope::parser::StateKind::HoldingJson);
    assert_eq!(
        p.finish(),
        vec![toolscope::parser::Event::Content("{\"a\": 1}".into())]
    );
}

/// A model that writes lists nested thousands deep in a pythonic or LFM2 call (`[f(a=[[[[…`)
/// gets a malformed block, not a stack overflow: the Python literal reader stops at serde_json's
/// depth (128). Depth 100 still reads as a call.
#[test]
fn deeply_nested_python_literals_are_malformed_not_a_crash() {
    use toolscope::parser::{Syntax, parse};
    for syntax in [Syntax::Pythonic, Syntax::Lfm2] {
        let wrap = |inner: &str| match syntax {
            Syntax::Lfm2 => format!("<|tool_call_start|>{inner}<|tool_call_end|>"),
            _ => inner.to_string(),
        };
        let deep = wrap(&format!("[get_weather(city={})]", "[".repeat(5000)));
        let out = parse(&deep, Some(syntax), None);
        assert!(out.tool_calls.is_empty(), "{syntax:?}");
        let ok = wrap(&format!(
            "[get_weather(city={}1{})]",
            "[".repeat(100),
            "]".repeat(100)
        ));
        let out = parse(&ok, Some(syntax), None);
        assert_eq!(out.tool_calls.len(), 1, "{syntax:?}: {out:?}");
    }
}
