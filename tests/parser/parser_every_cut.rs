//! Streamed == one-shot on tricky texts (markers of every syntax, nested and unterminated
//! blocks, `<`-heavy prose, replies starting with `{`, multi-byte text), for every syntax and
//! auto, with and without tools: cut per character, and in two at every character boundary.

use serde_json::{Value, json};
use toolscope::parser::{Collector, ParseOutput, Parser, Syntax, parse};

fn stream(text: &str, cuts: &[usize], sx: Option<Syntax>, tools: Option<&Value>) -> ParseOutput {
    let mut p = Parser::new(sx, tools);
    let mut c = Collector::default();
    let mut last = 0;
    for &k in cuts {
        for e in p.feed(&text[last..k]) {
            c.apply(&e);
        }
        last = k;
    }
    for e in p.feed(&text[last..]) {
        c.apply(&e);
    }
    for e in p.finish() {
        c.apply(&e);
    }
    c.into_output()
}

fn texts() -> Vec<String> {
    let v = vec![
        "<think>\nThe user wants the time</think>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}}\n</tool_call>",
        "{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}}",
        "{not json at all",
        "{\"a\": 1} and then some text",
        "a < b and c <= d, x<y; <tool <tool_ <think <|tool_call> <function=",
        "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}",
        "<tool_call><tool_call>{\"name\":\"f\",\"arguments\":{}}</tool_call></tool_call>",
        "<think>never closed <tool_call>{\"name\":\"f\",\"arguments\":{}}</tool_call>",
        "text </think> after orphan close <tool_call>{\"name\":\"f\",\"arguments\":{}}</tool_call>",
        "<tool_call>\n<function=set_limit>\n<parameter=limit>\nfive\n</parameter>\n<parameter=unit>\n5\n</parameter>\n</function>\n</tool_call>",
        "<tool_call>\n<function=set_limit>\n<parameter=limit>\n5\n</parameter>\n</function>\n</tool_call>}",
        "<|tool_call>call:get_time{tz:<|\"|>UTC<|\"|>}<tool_call|>",
        "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"a\": \"é😀\"}}]",
        "[TOOL_CALLS]f[ARGS]{\"a\": 1}",
        "<|python_tag|>{\"name\": \"f\", \"parameters\": {\"a\": 1}}",
        "héllo 😀 wörld <tool_call>{\"name\":\"f\",\"arguments\":{\"s\":\"日本語\"}}</tool_call> 🎉",
        "<function_call>\n{\"name\": \"f\", \"arguments\": {}}}\n</function_call>",
        "```tool_call\n{\"name\":\"f\",\"arguments\":{}}\n```",
        "<|channel|>analysis<|message|>thinking<|end|><|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\":1}<|call|>",
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{\"a\":1}<|tool_call_end|><|tool_calls_section_end|>",
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{\"a\":1}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
        "<function_calls>\n<invoke name=\"f\">\n<parameter name=\"a\">1</parameter>\n</invoke>\n</function_calls>",
        "   {\"name\": \"f\", \"arguments\": {}}   ",
        "<<<<<<>>>>> <tool_call <tool_call>",
        "<think></think><think></think>x",
        "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": \"</tool_call>\"}}\n</tool_call>",
        "",
        "<",
        "{",
        "<tool_call>",
        "</think>",
    ];
    v.into_iter().map(String::from).collect()
}

#[test]
fn every_two_cut_and_per_char() {
    let tools = json!([{"type":"function","function":{"name":"set_limit","parameters":{"type":"object","properties":{"limit":{"anyOf":[{"type":"integer"},{"type":"null"}]},"unit":{"type":"string"}}}}},
        {"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"integer"}}}}},
        {"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{"tz":{"type":"string"}}}}}]);
    let mut fails = 0;
    let mut syntaxes: Vec<Option<Syntax>> = vec![None];
    syntaxes.extend(Syntax::ALL.iter().map(|s| Some(*s)));
    for t in texts() {
        for &sx in &syntaxes {
            for tl in [None, Some(&tools)] {
                let one = parse(&t, sx, tl);
                let bounds: Vec<usize> = (1..t.len()).filter(|&i| t.is_char_boundary(i)).collect();
                let per_char = stream(&t, &bounds, sx, tl);
                if per_char != one {
                    fails += 1;
                    if fails < 15 {
                        eprintln!(
                            "PER-CHAR DIFF sx={:?} tools={} text={:?}\n one={:?}\n str={:?}",
                            sx,
                            tl.is_some(),
                            t,
                            one,
                            per_char
                        );
                    }
                    continue;
                }
                for &b in &bounds {
                    let s = stream(&t, &[b], sx, tl);
                    if s != one {
                        fails += 1;
                        if fails < 15 {
                            eprintln!(
                                "CUT {} DIFF sx={:?} tools={} text={:?}\n one={:?}\n str={:?}",
                                b,
                                sx,
                                tl.is_some(),
                                t,
                                one,
                                s
                            );
                        }
                        break;
                    }
                }
            }
        }
    }
    assert_eq!(fails, 0);
}
