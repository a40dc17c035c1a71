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
    prop_oneof![
        (-100_000i64..100_000).prop_map(Arg::Int),
        "[a-zA-Z0-9 .,:!?-]{0,12}".prop_map(Arg::Str),
    ]
}

#[derive(Debug, Clone)]
struct Call {
    name: String,
    args: Vec<(String, Arg)>,
}

fn call_strategy() -> impl Strategy<Value = Call> {
    (
        "[a-z][a-z_]{0,7}",
        proptest::collection::btree_map("[a-z]{1,5}", arg_strategy(), 0..4),
    )
        .prop_map(|(name, m)| Call {
            name,
            args: m.into_iter().collect(),
        })
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
            props.insert(
                k.clone(),
                json!({"type": if matches!(a, Arg::Int(_)) { "integer" } else { "string" }}),
            );
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
            Syntax::Hermes => {
                format!("<tool_call>\n{{\"name\": \"{n}\", \"arguments\": {a}}}\n</tool_call>")
            }
            Syntax::Qwen3Coder => {
                let mut s = if variant {
                    String::new()
                } else {
                    "<tool_call>\n".to_string()
                };
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
            Syntax::Mistral if variant => {
                format!("[TOOL_CALLS][{{\"name\": \"{n}\", \"arguments\": {a}}}]")
            }
            Syntax::Mistral => format!("[TOOL_CALLS]{n}[ARGS]{a}"),
            Syntax::DeepSeekV3 if variant => format!(
                "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>{n}<｜tool▁sep｜>{a}<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
            ),
            Syntax::DeepSeekV3 => format!(
                "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>{n}\n```json\n{a}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
            ),
            Syntax::KimiK2 => format!(
                "<|tool_calls_section_begin|><|tool_call_begin|>functions.{n}:0<|tool_call_argument_begin|>{a}<|tool_call_end|><|tool_calls_section_end|>"
            ),
            Syntax::GptOss => format!(
                "<|start|>assistant<|channel|>commentary to=functions.{n} <|constrain|>json<|message|>{a}<|call|>"
            ),
            Syntax::AnthropicXml => {
                let mut s = format!("<invoke name=\"{n}\">\n");
                for (k, v) in &self.args {
                    s += &format!(
                        "<parameter name=\"{k}\">{}</parameter>\n",
                        Self::xml_value(v)
                    );
                }
                let s = s + "</invoke>";
                if variant {
                    format!("<function_calls>\n{s}\n</function_calls>")
                } else {
                    s
                }
            }
            Syntax::FunctionCall => format!(
                "<function_call>\n{{\"name\": \"{n}\", \"arguments\": {a}}}\n</function_call>"
            ),
            Syntax::ToolCallFence => {
                format!("```tool_call\n{{\"name\": \"{n}\", \"arguments\": {a}}}\n```")
            }
            Syntax::Glm45 => {
                let nl = if variant { "\n" } else { "" };
                let mut s = format!("<tool_call>{n}{nl}");
                for (k, v) in &self.args {
                    s += &format!(
                        "<arg_key>{k}</arg_key>{nl}<arg_value>{}</arg_value>{nl}",
                        Self::xml_value(v)
                    );
                }
                s + "</tool_call>"
            }
            Syntax::SeedOss => {
                let mut s = format!("<seed:tool_call>\n<function={n}>\n");
                for (k, v) in &self.args {
                    s += &format!("<parameter={k}>{}</parameter>\n", Self::xml_value(v));
                }
                s + "</function>\n</seed:tool_call>"
            }
            Syntax::FunctionGemma => {
                let body: Vec<String> = self
                    .args
                    .iter()
                    .map(|(k, v)| match v {
                        Arg::Int(i) => format!("{k}:{i}"),
                        Arg::Str(s) => format!("{k}:<escape>{s}<escape>"),
                    })
                    .collect();
                format!(
                    "<start_function_call>call:{n}{{{}}}<end_function_call>",
                    body.join(",")
                )
            }
            Syntax::Pythonic => format!("[{}]", self.pythonic()),
            Syntax::Lfm2 if variant => format!(
                "<|tool_call_start|>[{{\"name\": \"{n}\", \"arguments\": {a}}}]<|tool_call_end|>"
            ),
            Syntax::Lfm2 => format!("<|tool_call_start|>[{}]<|tool_call_end|>", self.pythonic()),
            Syntax::DeepSeekV32 => {
                let w = if variant {
                    "tool_calls"
                } else {
                    "function_calls"
                };
                let mut s = format!("<｜DSML｜{w}>\n<｜DSML｜invoke name=\"{n}\">\n");
                for (k, v) in &self.args {
                    let st = matches!(v, Arg::Str(_));
                    s += &format!(
                        "<｜DSML｜parameter name=\"{k}\" string=\"{st}\">{}</｜DSML｜parameter>\n",
                        Self::xml_value(v)
                    );
                }
                s + &format!("</｜DSML｜invoke>\n</｜DSML｜{w}>")
            }
            Syntax::KimiK3 => {
                let mut s =
                    format!("<|open|>tools<|sep|><|open|>call tool=\"{n}\" index=\"1\"<|sep|>");
                for (k, v) in &self.args {
                    let ty = if matches!(v, Arg::Str(_)) {
                        "string"
                    } else {
                        "number"
                    };
                    s += &format!(
                        "<|open|>argument key=\"{k}\" type=\"{ty}\"<|sep|>{}<|close|>argument<|sep|>",
                        Self::xml_value(v)
                    );
                }
                s + "<|close|>call<|sep|><|close|>tools<|sep|>"
            }
            Syntax::MiniMaxM3 => {
                let sep = "]<]minimax[>[";
                let mut s = format!("{sep}<tool_call>\n{sep}<invoke name=\"{n}\">");
                for (k, v) in &self.args {
                    s += &format!("{sep}<{k}>{}{sep}</{k}>", Self::xml_value(v));
                }
                s + &format!("{sep}</invoke>\n{sep}</tool_call>")
            }
            Syntax::CommandR7b => format!(
                "<|START_ACTION|>[\n    {{\"tool_call_id\": \"0\", \"tool_name\": \"{n}\", \"parameters\": {a}}}\n]<|END_ACTION|>"
            ),
            Syntax::Apertus => format!("<|tools_prefix|>[{{\"{n}\": {a}}}]<|tools_suffix|>"),
            Syntax::Granite => {
                format!("<|tool_call|>[{{\"name\": \"{n}\", \"arguments\": {a}}}]")
            }
            Syntax::GigaChat3 if variant => {
                format!("<|function_call|>{{\"name\": \"{n}\", \"arguments\": {a}}}")
            }
            Syntax::GigaChat3 => format!(
                "<|message_sep|>\n\nfunction call<|role_sep|>\n{{\"name\": \"{n}\", \"arguments\": {a}}}"
            ),
            Syntax::NemotronV2 => {
                format!("<TOOLCALL>[{{\"name\": \"{n}\", \"arguments\": {a}}}]</TOOLCALL>")
            }
            Syntax::FunctionaryV31 => format!("<function={n}>{a}</function>"),
            Syntax::FunctionaryV32 => format!("{n}\n{a}"),
            Syntax::FirefunctionV2 => {
                format!(" functools[{{\"name\": \"{n}\", \"arguments\": {a}}}]")
            }
            Syntax::CommandRPlus => {
                format!("Action:\n```json\n[{{\"tool_name\": \"{n}\", \"parameters\": {a}}}]\n```")
            }
            Syntax::Apriel => {
                format!("<tool_calls>[{{\"name\": \"{n}\", \"arguments\": {a}}}]</tool_calls>")
            }
            Syntax::MiniCpm5 => {
                let mut s = format!("<function name=\"{n}\">");
                for (k, v) in &self.args {
                    s += &format!("<param name=\"{k}\">{}</param>", Self::xml_value(v));
                }
                s + "</function>"
            }
            Syntax::MiniMaxM1 => {
                format!("<tool_calls>\n{{\"name\": \"{n}\", \"arguments\": {a}}}\n</tool_calls>")
            }
            Syntax::SolarOpen => format!(
                "<|tool_call:begin|>call_1<|tool_call:name|>{n}<|tool_call:args|>{a}<|tool_call:end|>"
            ),
            Syntax::Hy3 => {
                let mut s = format!(
                    "<tool_calls:opensource><tool_call:opensource>{n}<tool_sep:opensource>\n"
                );
                for (k, v) in &self.args {
                    s += &format!(
                        "<arg_key:opensource>{k}</arg_key:opensource>\n<arg_value:opensource>{}</arg_value:opensource>\n",
                        Self::xml_value(v)
                    );
                }
                s + "</tool_call:opensource>\n</tool_calls:opensource>"
            }
            Syntax::MuseGlimmer => {
                let mut s = format!(
                    " to={n}<|message|><atem:function_calls>\n<atem:invoke name=\"{n}\">\n"
                );
                for (k, v) in &self.args {
                    s += &format!(
                        "<atem:parameter name=\"{k}\">{}</atem:parameter>\n",
                        Self::xml_value(v)
                    );
                }
                s + "</atem:invoke>\n</atem:function_calls>"
            }
        }
    }

    /// `name(k=v, …)` with Python literals.
    fn pythonic(&self) -> String {
        let args: Vec<String> = self
            .args
            .iter()
            .map(|(k, v)| match v {
                Arg::Int(i) => format!("{k}={i}"),
                Arg::Str(s) => format!("{k}='{s}'"),
            })
            .collect();
        format!("{}({})", self.name, args.join(", "))
    }
}

/// Syntaxes whose call is the whole reply (no text before it) or runs to the end of the text
/// (no text after it), or that has no `<think>` block: (no prefix, no suffix, no think).
fn whole_reply(sx: Syntax) -> (bool, bool, bool) {
    match sx {
        Syntax::GptOss | Syntax::MuseGlimmer | Syntax::FunctionaryV32 => (true, true, true),
        Syntax::Pythonic => (true, true, false),
        Syntax::Llama3
        | Syntax::Granite
        | Syntax::GigaChat3
        | Syntax::FirefunctionV2
        | Syntax::CommandRPlus => (false, true, false),
        _ => (false, false, false),
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
            let mut p = if text.is_empty() {
                0
            } else {
                c % (text.len() + 1)
            };
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
        // syntaxes whose call is the whole reply or runs to the end take no prefix / suffix
        let (no_pre, no_post, no_think) = whole_reply(sx);
        let pre = if no_pre { String::new() } else { pre };
        let post = if no_post { String::new() } else { post };
        // a syntax read only when chosen is not read in auto mode
        let auto = auto && sx.auto_detected();
        // `<` followed by letters could spell a marker by chance; keep the prefix free of them
        prop_assume!(!pre.contains('<') || !pre.contains('>'));
        // words that are markers of syntaxes read only when chosen
        prop_assume!(!pre.contains("Action:") && !pre.contains(">>>"));
        let mut text = String::new();
        if let Some(t) = think.as_ref().filter(|_| !no_think) {
            text += &format!("<think>{t}</think>");
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
    "<tool_call>",
    "</tool_call>",
    "<function=",
    "</function>",
    "<parameter=",
    "</parameter>",
    "<|tool_call>",
    "<tool_call|>",
    "call:",
    "<|\"|>",
    "<think>",
    "</think>",
    "<|python_tag|>",
    "[TOOL_CALLS]",
    "[ARGS]",
    "<｜tool▁calls▁begin｜>",
    "<｜tool▁call▁begin｜>",
    "<｜tool▁sep｜>",
    "<｜tool▁call▁end｜>",
    "<|tool_calls_section_begin|>",
    "<|tool_call_begin|>",
    "<|tool_call_argument_begin|>",
    "<|tool_call_end|>",
    "<|channel|>",
    "<|start|>",
    "<|message|>",
    "<|call|>",
    "<|end|>",
    " to=functions.f",
    "analysis",
    "commentary",
    "<invoke name=\"f\">",
    "</invoke>",
    "<parameter name=\"a\">",
    "<function_call>",
    "</function_call>",
    "```tool_call",
    "```",
    "{",
    "}",
    "[",
    "]",
    "\"name\"",
    ":",
    ",",
    "\"f\"",
    "\"arguments\"",
    "1",
    "\n",
    " ",
    "<",
    "|",
    "é",
    "漢",
    "<|channel>thought",
    "<channel|>",
    "<arg_key>",
    "</arg_key>",
    "<arg_value>",
    "</arg_value>",
    "<seed:tool_call>",
    "</seed:tool_call>",
    "<seed:think>",
    "</seed:think>",
    "<start_function_call>",
    "<end_function_call>",
    "<escape>",
    "<|tool_call_start|>",
    "<|tool_call_end|>",
    "f(a=1)",
    "[f(",
    "<｜DSML｜function_calls>",
    "</｜DSML｜function_calls>",
    "<｜DSML｜invoke name=\"f\">",
    "<｜DSML｜parameter name=\"a\" string=\"false\">",
    "</｜DSML｜parameter>",
    "</｜DSML｜invoke>",
    "<|open|>tools<|sep|>",
    "<|open|>call tool=\"f\"<|sep|>",
    "<|close|>call<|sep|>",
    "<|close|>tools<|sep|>",
    "<|open|>think<|sep|>",
    "<|close|>think<|sep|>",
    "]<]minimax[>[",
    "<tool_call>",
    "<mm:think>",
    "<|START_ACTION|>",
    "<|END_ACTION|>",
    "<|START_THINKING|>",
    "<|END_THINKING|>",
    "\"tool_name\"",
    "<|tools_prefix|>",
    "<|tools_suffix|>",
    "<|tool_call|>",
    "<|message_sep|>",
    "function call<|role_sep|>",
    "<|function_call|>",
    "<TOOLCALL>",
    "</TOOLCALL>",
    ">>>",
    "all\n",
    "functools",
    "Action:",
    "<tool_calls>",
    "</tool_calls>",
    "[BEGIN FINAL RESPONSE]",
    "<function name=\"f\">",
    "<param name=\"a\">",
    "</param>",
    "<![CDATA[",
    "]]>",
    " to=self",
    " to=user",
    "<|eom|>",
    "[THINK]",
    "[/THINK]",
    ";",
];

fn fuzz_cases() -> u32 {
    std::env::var("TOOLSCOPE_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
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
