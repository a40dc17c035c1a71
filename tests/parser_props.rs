//! Property tests: for random valid call texts in every syntax and random chunkings, the
//! streamed parse equals the one-shot parse, and the one-shot parse finds the call that was
//! written. Plus a fuzz-style property (marker fragments + random text, random chunkings):
//! no panic, streamed == one-shot. `TOOLSCOPE_FUZZ_CASES=N` raises the fuzz case count (long run).

use proptest::prelude::*;
use serde_json::{Map, Value, json};
use toolscope::parser::{Collector, ParseOutput, Parser, Syntax, parse};

#[derive(Debug, Clone)]
enum Arg {
    Int(i64),
    Str(String),
}

fn arg_strategy() -> impl Strategy<Value = Arg> {
    prop_oneof![(-100_000i64..100_000).prop_map(Arg::Int), "[a-zA-Z0-9 .,:!?-]{0,12}".prop_map(Arg::Str),]
}

#[derive(Debug, Clone)]
struct Call {
    name: String,
    args: Vec<(String, Arg)>,
}

fn call_strategy() -> impl Strategy<Value = Call> {
    ("[a-z][a-z_]{0,7}", proptest::collection::btree_map("[a-z]{1,5}", arg_strategy(), 0..4))
        .prop_map(|(name, m)| Call { name, args: m.into_iter().collect() })
}

impl Call {
    fn args_json(&self) -> Value {
        let mut m = Map::new();
        for (k, a) in &self.args {
            m.insert(
                k.clone(),
                match a {
                    Arg::Int(i) => json!(i),
                    Arg::Str(s) => json!(s),
                },
            );
        }
        Value::Object(m)
    }
    fn tools(&self) -> Value {
        let mut props = Map::new();
        for (k, a) in &self.args {
            props.insert(k.clone(), json!({"type": if matches!(a, Arg::Int(_)) { "integer" } else { "string" }}));
        }
        json!([{"type": "function", "function": {"name": self.name, "parameters": {"type": "object", "properties": props}}}])
    }
    fn xml_value(a: &Arg) -> String {
        match a {
            Arg::Int(i) => i.to_string(),
            Arg::Str(s) => s.clone(),
        }
    }
    fn render(&self, sx: Syntax, variant: bool) -> String {
        let n = &self.name;
        let a = self.args_json().to_string();
        match sx {
            Syntax::Hermes => format!("<tool_call>\n{{\"name\": \"{n}\", \"arguments\": {a}}}\n</tool_call>"),
            Syntax::Qwen3Coder => {
                let mut s = if variant { String::new() } else { "<tool_call>\n".to_string() };
                s += &format!("<function={n}>\n");
                for (k, v) in &self.args {
                    s += &format!("<parameter={k}>\n{}\n</parameter>\n", Self::xml_value(v));
                }
                s + "</function>\n</tool_call>"
            }
            Syntax::Gemma4 => {
                let body: Vec<String> = self
                    .args
                    .iter()
                    .map(|(k, v)| match v {
                        Arg::Int(i) => format!("{k}:{i}"),
                        Arg::Str(s) => format!("{k}:<|\"|>{s}<|\"|>"),
                    })
                    .collect();
                format!("<|tool_call>call:{n}{{{}}}<tool_call|>", body.join(","))
            }
            Syntax::Llama3 => format!("<|python_tag|>{{\"name\": \"{n}\", \"parameters\": {a}}}"),
            Syntax::Mistral if variant => format!("[TOOL_CALLS][{{\"name\": \"{n}\", \"arguments\": {a}}}]"),
            Syntax::Mistral => format!("[TOOL_CALLS]{n}[ARGS]{a}"),
            Syntax::DeepSeekV3 if variant => format!("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>{n}<｜tool▁sep｜>{a}<｜tool▁call▁end｜><｜tool▁calls▁end｜>"),
            Syntax::DeepSeekV3 => format!(
                "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>{n}\n```json\n{a}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
            ),
            Syntax::KimiK2 => format!(
                "<|tool_calls_section_begin|><|tool_call_begin|>functions.{n}:0<|tool_call_argument_begin|>{a}<|tool_call_end|><|tool_calls_section_end|>"
            ),
            Syntax::GptOss => format!("<|start|>assistant<|channel|>commentary to=functions.{n} <|constrain|>json<|message|>{a}<|call|>"),
            Syntax::AnthropicXml => {
                let mut s = format!("<invoke name=\"{n}\">\n");
                for (k, v) in &self.args {
                    s += &format!("<parameter name=\"{k}\">{}</parameter>\n", Self::xml_value(v));
                }
                let s = s + "</invoke>";
                if variant { format!("<function_calls>\n{s}\n</function_calls>") } else { s }
            }
            Syntax::FunctionCall => format!("<function_call>\n{{\"name\": \"{n}\", \"arguments\": {a}}}\n</function_call>"),
            Syntax::ToolCallFence => format!("```tool_call\n{{\"name\": \"{n}\", \"arguments\": {a}}}\n```"),
        }
    }
}

fn streamed(chunks: &[&str], syntax: Option<Syntax>, tools: Option<&Value>) -> ParseOutput {
    let mut p = Parser::new(syntax, tools);
    let mut c = Collector::default();
    for ch in chunks {
        for e in p.feed(ch) {
            c.apply(&e);
        }
    }
    for e in p.finish() {
        c.apply(&e);
    }
    c.into_output()
}

/// Cuts `text` at the given fractions (snapped forward to char boundaries).
fn cut_at<'a>(text: &'a str, cuts: &[usize]) -> Vec<&'a str> {
    let mut pts: Vec<usize> = cuts
        .iter()
        .map(|c| {
            let mut p = if text.is_empty() { 0 } else { c % (text.len() + 1) };
            while !text.is_char_boundary(p) {
                p += 1;
            }
            p
        })
        .collect();
    pts.sort_unstable();
    pts.dedup();
    let mut out = Vec::new();
    let mut last = 0;
    for p in pts {
        out.push(&text[last..p]);
        last = p;
    }
    out.push(&text[last..]);
    out
}

const TEXT: &str = "[a-zA-Z0-9 ,.!?<>\n]{0,20}";

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn streamed_equals_one_shot_for_valid_calls(
        sx_i in 0usize..Syntax::ALL.len(),
        variant in any::<bool>(),
        call in call_strategy(),
        think in proptest::option::of("[a-zA-Z0-9 ,.!?\n]{0,20}"),
        pre in TEXT,
        post in "[a-zA-Z0-9 ,.!?]{0,12}",
        cuts in proptest::collection::vec(any::<usize>(), 0..12),
        auto in any::<bool>(),
    ) {
        let sx = Syntax::ALL[sx_i];
        // syntaxes whose call runs to the end of the text (or are a whole message) take no suffix / prefix
        let (pre, post) = match sx {
            Syntax::Llama3 => (pre, String::new()),
            Syntax::GptOss => (String::new(), String::new()),
            _ => (pre, post),
        };
        // `<` followed by letters could spell a marker by chance; keep the prefix free of them
        prop_assume!(!pre.contains('<') || !pre.contains('>'));
        let mut text = String::new();
        if let Some(t) = &think {
            if sx != Syntax::GptOss {
                text += &format!("<think>{t}</think>");
            }
        }
        text += &pre;
        text += &call.render(sx, variant);
        text += &post;
        let tools = call.tools();
        let syntax = if auto { None } else { Some(sx) };
        let one = parse(&text, syntax, Some(&tools));
        prop_assert_eq!(one.tool_calls.len(), 1, "text {:?} → {:?}", text, one);
        prop_assert_eq!(&one.tool_calls[0].name, &call.name);
        prop_assert_eq!(&one.tool_calls[0].arguments, &call.args_json(), "text {:?}", text);
        // wrappers between blocks (`\n</tool_call>`, `<function_calls>\n`) leave whitespace only
        let squash = |s: &str| s.chars().filter(|c| !c.is_whitespace()).collect::<String>();
        prop_assert_eq!(squash(&one.content), squash(&format!("{pre}{post}")), "text {:?}", text);
        prop_assert!(one.malformed.is_empty());
        let chunks = cut_at(&text, &cuts);
        let st = streamed(&chunks, syntax, Some(&tools));
        prop_assert_eq!(st, one, "chunks {:?}", chunks);
    }
}

const FRAGMENTS: &[&str] = &[
    "<tool_call>", "</tool_call>", "<function=", "</function>", "<parameter=", "</parameter>", "<|tool_call>",
    "<tool_call|>", "call:", "<|\"|>", "<think>", "</think>", "<|python_tag|>", "[TOOL_CALLS]", "[ARGS]",
    "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>", "<|tool_calls_section_begin|>",
    "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>", "<|channel|>", "<|start|>",
    "<|message|>", "<|call|>", "<|end|>", " to=functions.f", "analysis", "commentary", "<invoke name=\"f\">",
    "</invoke>", "<parameter name=\"a\">", "<function_call>", "</function_call>", "```tool_call", "```", "{", "}",
    "[", "]", "\"name\"", ":", ",", "\"f\"", "\"arguments\"", "1", "\n", " ", "<", "|", "é", "漢", "<|channel>thought",
    "<channel|>",
];

fn fuzz_cases() -> u32 {
    std::env::var("TOOLSCOPE_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(256)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: fuzz_cases(), ..ProptestConfig::default() })]

    #[test]
    fn fuzz_no_panic_and_chunking_invariant(
        parts in proptest::collection::vec(prop_oneof![
            3 => proptest::sample::select(FRAGMENTS).prop_map(str::to_string),
            1 => "\\PC{0,6}",
        ], 0..40),
        cuts in proptest::collection::vec(any::<usize>(), 0..16),
        sx_i in 0usize..=Syntax::ALL.len(),
        with_tools in any::<bool>(),
    ) {
        let text = parts.concat();
        let syntax = Syntax::ALL.get(sx_i).copied();
        let tools = json!({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}}], "tool_choice": "required"});
        let tools = with_tools.then_some(&tools);
        let one = parse(&text, syntax, tools);
        let chunks = cut_at(&text, &cuts);
        let st = streamed(&chunks, syntax, tools);
        prop_assert_eq!(st, one, "text {:?} chunks {:?}", text, chunks);
    }
}
