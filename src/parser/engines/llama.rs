//! llama.cpp's tool-call parsing (llama-server b11434; b11312 alike), modelled as data: for each
//! family, the PEG grammar llama.cpp builds for the corpus template and the request's tools
//! (common/chat-auto-parser-generator.cpp for the template-derived "auto" parser,
//! common/parsers/*.cpp for the dedicated ones), run by a port of llama.cpp's lenient PEG
//! parser and AST mapper ([`peg`]). The grammars were read from the source and checked node by
//! node against the arena llama.cpp builds (`common_peg_arena::dump`, common/peg-parser.cpp:914)
//! for the corpus templates; the verdicts are checked against llama.cpp's own code by
//! tests/e2e/engines_llama.rs.
//!
//! What follows from the grammars, per family, is in docs/parser.md ("llama.cpp checked against
//! its own parser code"): text after the calls is refused (HTTP 500) where the grammar ends in
//! `End` after the calls, accepted and dropped where it does not (Qwen3-Coder, GigaChat 3); a call
//! to an undeclared tool does not match any tool rule; a text cut inside a call comes back as
//! that call, its arguments cut (lenient end of input, chat.cpp:1471).

pub mod peg;

use serde_json::Value;

use self::peg::{Grammar, Id, Mapper, Message, Node};
use crate::parser::Syntax;

/// One declared tool as llama.cpp reads it (`common_chat_tools_parse_oaicompat`): its name and
/// its parameters in declaration order (name, `"type": "string"`, may be a string, required).
#[derive(Debug, Clone)]
pub struct Tool {
    pub name: String,
    pub params: Vec<Param>,
}

#[derive(Debug, Clone)]
pub struct Param {
    pub name: String,
    /// `"type": "string"` exactly
    pub string: bool,
    /// the schema admits a string (`common_chat_schema::may_be_string`): no type, or "string"
    /// among the types, or an enum
    pub maybe_string: bool,
    pub required: bool,
    /// `"type": "array"` (MiniMax-M3 writes its items as `<item>` tags)
    pub array: bool,
}

/// The request's tools (OpenAI or Anthropic array, or a whole request).
pub fn tools_of(v: Option<&Value>) -> Vec<Tool> {
    let Some(v) = v else { return Vec::new() };
    let arr = match v {
        Value::Array(a) => a.as_slice(),
        Value::Object(o) => o
            .get("tools")
            .and_then(Value::as_array)
            .map_or(&[][..], |a| a.as_slice()),
        _ => &[],
    };
    arr.iter()
        .filter_map(|t| {
            let f = t.get("function").unwrap_or(t);
            let name = f.get("name")?.as_str()?.to_string();
            let schema = f
                .get("parameters")
                .or_else(|| f.get("input_schema"))
                .cloned()
                .unwrap_or(Value::Null);
            let required: Vec<&str> = schema
                .get("required")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let params = schema
                .get("properties")
                .and_then(Value::as_object)
                .map(|props| {
                    props
                        .iter()
                        .map(|(k, s)| {
                            let types = crate::schema::types::allowed_types(s);
                            Param {
                                name: k.clone(),
                                string: s.get("type").and_then(Value::as_str) == Some("string"),
                                maybe_string: types.is_empty()
                                    || types.contains(&"string")
                                    || s.get("enum").is_some(),
                                required: required.contains(&k.as_str()),
                                array: types == ["array"],
                            }
                        })
                        .collect()
                })
                .unwrap_or_default();
            Some(Tool { name, params })
        })
        .collect()
}

/// Without the request's tools (a bare `parse --engines`), the tools toolscope reads calls to,
/// as if declared: each argument typed by its value (a string value declares a string, any
/// other a typed parameter read as JSON), all optional.
pub fn tools_from_calls(calls: &[crate::parser::ParsedCall]) -> Vec<Tool> {
    let mut out: Vec<Tool> = Vec::new();
    for c in calls {
        if out.iter().any(|t| t.name == c.name) {
            continue;
        }
        let params = c
            .arguments
            .as_object()
            .map(|o| {
                o.iter()
                    .map(|(k, v)| Param {
                        name: k.clone(),
                        string: v.is_string(),
                        maybe_string: v.is_string(),
                        required: false,
                        array: false,
                    })
                    .collect()
            })
            .unwrap_or_default();
        out.push(Tool {
            name: c.name.clone(),
            params,
        });
    }
    out
}

/// What llama.cpp returns for `text`: `Ok(message)` or `Err(())` (HTTP 500, "The model produced
/// output that does not match the expected <format> format"). `None`: the family is not
/// modelled by a grammar.
pub fn parse(family: Syntax, text: &str, tools: &[Tool]) -> Option<Result<Message, ()>> {
    let (prompt, g) = grammar(family, tools)?;
    let input = format!("{prompt}{text}");
    let Some((ast, roots)) = g.parse(&input) else {
        return Some(Err(()));
    };
    let mut m = Mapper::default();
    m.map_all(&ast, &roots, &input);
    Some(Ok(m.msg))
}

/// The generation prompt the family's corpus template ends with (`<|im_start|>assistant\n`
/// for Qwen3): what llama.cpp parses in front of the reply (common/chat.cpp:1465) when the
/// exchange's own is not known, and the prefix its parser starts with (the generation prompt up
/// to the reasoning start, chat-auto-parser-generator.cpp:134). Measured with
/// scripts/engines/llama/parse.cpp (`generation_prompt`) on both releases. `None`: not modelled.
pub fn default_prompt(family: Syntax) -> Option<&'static str> {
    use Syntax as S;
    Some(match family {
        S::Hermes => "<|im_start|>assistant\n",
        S::Llama3 => "<|start_header_id|>assistant<|end_header_id|>\n\n",
        S::Mistral => "",
        S::CommandR7b => "",
        S::MiniMaxM1 => "<beginning_of_sentence>ai name=assistant\n",
        S::Apertus => "<|assistant_start|>",
        S::GigaChat3 => "assistant<|role_sep|>\n",
        S::Glm45 => "<|assistant|>",
        S::SeedOss => "<seed:bos>assistant\n",
        S::Qwen3Coder => "<|im_start|>assistant\n",
        S::GptOss => "<|start|>assistant",
        S::MuseGlimmer => "<|start|>assistant",
        S::DeepSeekV32 => "<｜Assistant｜><think>",
        S::Lfm2 => "<|im_start|>assistant\n",
        S::KimiK2 => "<|im_assistant|>assistant<|im_middle|>",
        S::Granite => "<|start_of_role|>assistant<|end_of_role|>",
        S::MiniMaxM3 => "]~b]ai\n",
        // families without a modelled grammar (the generation-prompt rule)
        S::AnthropicXml => "]~b]ai\n<think>\n",
        S::DeepSeekV3 => "<｜Assistant｜><think>\n",
        S::MiniCpm5 => "<|im_start|>assistant\n<think>\n",
        S::NemotronV2 => "<SPECIAL_11>Assistant\n<think>\n",
        S::KimiK3 => "<|open|>message role=\"assistant\"<|sep|><|open|>think<|sep|>",
        S::Gemma4 => "<|turn>model\n",
        _ => return None,
    })
}

/// The family's generation prompt ([`default_prompt`]) and its grammar (b11434 and b11312 build
/// the same for these); `None` for a family without a modelled grammar.
fn grammar(family: Syntax, tools: &[Tool]) -> Option<(&'static str, Grammar)> {
    use Syntax as S;
    let mut g = Grammar::default();
    g.root = match family {
        S::Hermes => hermes(&mut g, tools),
        S::Llama3 => llama3(&mut g, tools),
        S::Mistral => mistral(&mut g, tools),
        S::CommandR7b => command_r7b(&mut g, tools),
        S::MiniMaxM1 => json_section(
            &mut g,
            tools,
            "<beginning_of_sentence>ai name=assistant\n",
            "<tool_calls>\n",
            "",
            "</tool_calls>",
            JsonTool::Flat("name", "arguments", None, false),
        ),
        S::Apertus => json_section(
            &mut g,
            tools,
            "<|assistant_start|>",
            "<|tools_prefix|>",
            "[",
            "]<|tools_suffix|>",
            JsonTool::NameIsKey,
        ),
        S::GigaChat3 => gigachat3(&mut g, tools),
        S::Glm45 => tagged(&mut g, tools, &GLM45),
        S::SeedOss => tagged(&mut g, tools, &SEED_OSS),
        S::Qwen3Coder => qwen3_coder(&mut g, tools),
        S::GptOss => gpt_oss(&mut g, tools),
        S::MuseGlimmer => muse_glimmer(&mut g, tools),
        S::DeepSeekV32 => deepseek_v32(&mut g, tools),
        S::Lfm2 => lfm2(&mut g, tools),
        S::KimiK2 => kimi_k2(&mut g, tools),
        S::Granite => granite(&mut g),
        S::MiniMaxM3 => minimax_m3(&mut g, tools),
        _ => return None,
    };
    Some((default_prompt(family)?, g))
}

/// How a JSON tool call object is laid out (common/chat-peg-parser.cpp `standard_json_tools`).
#[derive(Clone, Copy)]
enum JsonTool {
    /// `{"NAME_KEY": "name", "ARGS_KEY": {…}}` with an optional id field first (`Some(key)`,
    /// then a `,` is required) and an optional leading `"type": "function",` (flat keys, chat-peg-parser.cpp:780)
    Flat(&'static str, &'static str, Option<&'static str>, bool),
    /// `{"name": "…", "arguments": {…}, "id": …}`: the id optional but the `,` before it
    /// required (flat keys with `id` ordered last: the separator is written between every pair of fields, chat-peg-parser.cpp:859)
    FlatIdLast(&'static str, &'static str, &'static str),
    /// `{"name": {…}}` (function_is_key, chat-peg-parser.cpp:629)
    NameIsKey,
}

/// `"KEY" : ` then `p`.
fn key(g: &mut Grammar, k: &str, p: Id) -> Id {
    let kl = g.lit(&format!("\"{k}\""));
    let (s, c) = (g.space(), g.lit(":"));
    g.seq(&[kl, s, c, s, p])
}

/// `, ` between fields: space `,` space.
fn comma(g: &mut Grammar) -> Id {
    let (s, c) = (g.space(), g.lit(","));
    g.seq(&[s, c, s])
}

/// An id field: `"KEY": "…"` or a number, atomic (chat-peg-parser.cpp:810).
fn id_field(g: &mut Grammar, k: &str) -> Id {
    let q = g.lit("\"");
    let s = g.add(Node::Str(b'"'));
    let t = g.tag("tool-id", s);
    let t = g.atomic(t);
    let quoted = g.seq(&[q, t, q]);
    let n = g.json_number();
    let n = g.tag("tool-id", n);
    let n = g.atomic(n);
    let v = g.choice(&[quoted, n]);
    let f = key(g, k, v);
    g.atomic(f)
}

fn json_tool(g: &mut Grammar, t: &Tool, how: JsonTool) -> Id {
    let open = g.lit("{");
    let open = g.tag("tool-open", open);
    let open = g.atomic(open);
    let close = g.lit("}");
    let close = g.tag("tool-close", close);
    let close = g.atomic(close);
    let sp = g.space();
    let q = g.lit("\"");
    let nl = g.lit(&t.name);
    let name = g.tag("tool-name", nl);
    let name = g.atomic(name);
    let j = g.json();
    let args = g.tag("tool-args", j);
    let body = match how {
        JsonTool::NameIsKey => {
            let colon = g.lit(":");
            vec![open, sp, q, name, q, sp, colon, sp, args, sp, close]
        }
        JsonTool::Flat(nk, ak, id, typed) => {
            let qn = g.seq(&[q, name, q]);
            let qn = g.atomic(qn);
            let n = key(g, nk, qn);
            let a = key(g, ak, args);
            let c = comma(g);
            let mut v = vec![open, sp];
            if typed {
                let f = g.lit("\"function\"");
                let tf = key(g, "type", f);
                let tf = g.seq(&[tf, c]);
                v.push(g.opt(tf));
            } else {
                v.push(g.eps());
            }
            if let Some(k) = id {
                let idf = id_field(g, k);
                v.push(g.opt(idf));
                v.push(c);
            }
            v.extend([n, c, a, sp, close]);
            v
        }
        JsonTool::FlatIdLast(nk, ak, ik) => {
            let qn = g.seq(&[q, name, q]);
            let qn = g.atomic(qn);
            let n = key(g, nk, qn);
            let a = key(g, ak, args);
            let c = comma(g);
            let idf = id_field(g, ik);
            let idf = g.opt(idf);
            let e = g.eps();
            vec![open, sp, e, n, c, a, c, idf, sp, close]
        }
    };
    let s = g.seq(&body);
    g.tag("tool", s)
}

fn json_choice(g: &mut Grammar, tools: &[Tool], how: JsonTool) -> Id {
    let v: Vec<Id> = tools.iter().map(|t| json_tool(g, t, how)).collect();
    g.choice(&v)
}

/// `choice (space , space choice)*` (parallel calls).
fn json_list(g: &mut Grammar, choice: Id) -> Id {
    let c = comma(g);
    let more = g.seq(&[c, choice]);
    let more = g.star(more);
    g.seq(&[choice, more])
}

/// `PROMPT space ε (content until START)? (START space OPEN space calls space CLOSE)? end`: the
/// auto parser's JSON-native shape with a section around the calls
/// (chat-auto-parser-generator.cpp:186-225).
fn json_section(
    g: &mut Grammar,
    tools: &[Tool],
    prompt: &str,
    start: &str,
    open: &str,
    close: &str,
    how: JsonTool,
) -> Id {
    let p = g.lit(prompt);
    let sp = g.space();
    let e = g.eps();
    let u = g.until(&[start]);
    let content = g.tag("content", u);
    let content = g.opt(content);
    let st = g.lit(start);
    let ch = json_choice(g, tools, how);
    let list = json_list(g, ch);
    let mut v = vec![st, sp];
    if !open.is_empty() {
        // `[` … `]` then the section end, with spaces between (apertus: `]` space suffix)
        v.push(g.lit(open));
        v.push(sp);
        v.push(list);
        v.push(sp);
        let (a, b) = close.split_at(1);
        v.push(g.lit(a));
        v.push(sp);
        v.push(g.lit(b));
    } else {
        v.push(list);
        v.push(sp);
        v.push(g.lit(close));
    }
    let calls = g.seq(&v);
    let calls = g.opt(calls);
    let end = g.end();
    g.seq(&[p, sp, e, content, calls, end])
}

/// `<think>`-style optional reasoning: `ε START [\n]? reasoning(until END) ε [\n]? END …`.
fn think(g: &mut Grammar, start: &str, end: &str, nl_inside: bool, nl_after: usize) -> Id {
    let e = g.eps();
    let s = g.lit(start);
    let nl = g.lit("\n");
    let onl = g.opt(nl);
    let u = g.until(&[end]);
    let r = g.tag("reasoning", u);
    let en = g.lit(end);
    let mut v = vec![e, s];
    if nl_inside {
        v.push(onl);
    }
    v.extend([r, e]);
    if nl_inside {
        v.push(onl);
    }
    v.push(en);
    for _ in 0..nl_after {
        v.push(onl);
    }
    let s = g.seq(&v);
    g.opt(s)
}

/// Qwen3 (`<tool_call>\n{"name": …, "arguments": …}\n</tool_call>`), the auto parser's
/// per-call JSON shape (chat-auto-parser-generator.cpp:198-201): one or more
/// `(call)? space`, then end.
fn hermes(g: &mut Grammar, tools: &[Tool]) -> Id {
    let p = g.lit("<|im_start|>assistant\n");
    let sp = g.space();
    let r = think(g, "<think>", "</think>", true, 2);
    let u = g.until(&["<tool_call>\n"]);
    let content = g.tag("content", u);
    let content = g.opt(content);
    let st = g.lit("<tool_call>\n");
    let ch = json_choice(g, tools, JsonTool::Flat("name", "arguments", None, false));
    let list = json_list(g, ch);
    let en = g.lit("</tool_call>");
    let call = g.seq(&[st, sp, list, sp, en]);
    let call = g.opt(call);
    let one = g.seq(&[call, sp]);
    let calls = g.plus(one);
    let end = g.end();
    g.seq(&[p, sp, r, content, calls, end])
}

/// Llama 3.x: one bare JSON object `{"type"?: "function", "name": …, "parameters": …}` after
/// optional content up to the first `{`; no parallel calls.
fn llama3(g: &mut Grammar, tools: &[Tool]) -> Id {
    let p = g.lit("<|start_header_id|>assistant<|end_header_id|>\n\n");
    let sp = g.space();
    let e = g.eps();
    let u = g.until(&["{"]);
    let content = g.tag("content", u);
    let content = g.opt(content);
    let ch = json_choice(g, tools, JsonTool::Flat("name", "parameters", None, true));
    let empty = g.lit("");
    let call = g.seq(&[empty, sp, ch, sp, empty]);
    let call = g.opt(call);
    let end = g.end();
    g.seq(&[p, sp, e, content, call, end])
}

/// Mistral Nemo: `[TOOL_CALLS][{"name": …, "arguments": …, "id": …}]`; the `,` before the
/// optional id is required (flat keys, chat-peg-parser.cpp:859), so a call without an id fails.
fn mistral(g: &mut Grammar, tools: &[Tool]) -> Id {
    let e = g.eps();
    let sp = g.space();
    let u = g.until(&["[TOOL_CALLS]"]);
    let content = g.tag("content", u);
    let content = g.opt(content);
    let st = g.lit("[TOOL_CALLS]");
    let (lb, rb) = (g.lit("["), g.lit("]"));
    let ch = json_choice(g, tools, JsonTool::FlatIdLast("name", "arguments", "id"));
    let list = json_list(g, ch);
    let empty = g.lit("");
    let calls = g.seq(&[st, sp, lb, sp, list, sp, rb, sp, empty]);
    let calls = g.opt(calls);
    let end = g.end();
    g.seq(&[e, sp, e, content, calls, end])
}

/// Command R7B: `(<|START_THINKING|>…<|END_THINKING|>)? (<|START_RESPONSE|>…<|END_RESPONSE|>)?
/// (<|START_ACTION|>[…]<|END_ACTION|>)? end`: content only inside the response markers, so a
/// bare reply fails.
fn command_r7b(g: &mut Grammar, tools: &[Tool]) -> Id {
    let e = g.eps();
    let sp = g.space();
    let r = think(g, "<|START_THINKING|>", "<|END_THINKING|>", false, 0);
    let rs = g.lit("<|START_RESPONSE|>");
    let u = g.until(&["<|END_RESPONSE|>"]);
    let c = g.tag("content", u);
    let re = g.lit("<|END_RESPONSE|>");
    let resp = g.seq(&[rs, c, re]);
    let resp = g.opt(resp);
    let st = g.lit("<|START_ACTION|>");
    let (lb, rb) = (g.lit("["), g.lit("]"));
    let ch = json_choice(
        g,
        tools,
        JsonTool::Flat("tool_name", "parameters", Some("tool_call_id"), false),
    );
    let list = json_list(g, ch);
    let en = g.lit("<|END_ACTION|>");
    let calls = g.seq(&[st, sp, lb, sp, list, sp, rb, sp, en]);
    let calls = g.opt(calls);
    let end = g.end();
    g.seq(&[e, sp, r, resp, calls, end])
}

/// GigaChat 3 (common/parsers/gigachat-v3.cpp): content up to `<|message_sep|>\n\n`, then at
/// most one `function call` message; no `end`, so anything after the call is accepted and
/// dropped, and no tool-close tag.
fn gigachat3(g: &mut Grammar, tools: &[Tool]) -> Id {
    let p = g.lit("assistant<|role_sep|>\n");
    let u = g.until(&["<|message_sep|>\n\n"]);
    let content = g.tag("content", u);
    let sp = g.space();
    let st = g.lit("<|message_sep|>\n\nfunction call<|role_sep|>\n");
    let v: Vec<Id> = tools
        .iter()
        .map(|t| {
            let (o, q, c, cl) = (g.lit("{"), g.lit("\""), g.lit(":"), g.lit("}"));
            let nk = g.lit("\"name\"");
            let nl = g.lit(&t.name);
            let name = g.tag("tool-name", nl);
            let name = g.atomic(name);
            let open = g.seq(&[o, sp, nk, sp, c, sp, q, name, q]);
            let open = g.tag("tool-open", open);
            let open = g.atomic(open);
            let cm = g.lit(",");
            let ak = g.lit("\"arguments\"");
            let j = g.json();
            let args = g.tag("tool-args", j);
            g.seq(&[open, sp, cm, sp, ak, sp, c, sp, args, sp, cl])
        })
        .collect();
    let ch = g.choice(&v);
    let call = g.seq(&[st, ch]);
    let call = g.opt(call);
    g.seq(&[p, content, sp, call])
}

/// The auto parser's tagged shape (chat-auto-parser-generator.cpp:340-478): the markers.
struct Tagged {
    prompt: &'static str,
    think: (&'static str, &'static str),
    call_start: &'static str,
    call_end: &'static str,
    name_prefix: &'static str,
    name_suffix: &'static str,
    arg_prefix: &'static str,
    arg_suffix: &'static str,
    value_prefix: &'static str,
    value_suffix: &'static str,
    /// `Some(close)`: `space close` ends a call; `None`: a peek at `call_end` does (:256)
    func_close: Option<&'static str>,
}

/// GLM-4.6: `<tool_call>NAME\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>\n…</tool_call>`.
const GLM45: Tagged = Tagged {
    prompt: "<|assistant|>",
    think: ("<think>", "</think>"),
    call_start: "<tool_call>",
    call_end: "</tool_call>",
    name_prefix: "",
    name_suffix: "\n",
    arg_prefix: "<arg_key>",
    arg_suffix: "</arg_key>\n",
    value_prefix: "<arg_value>",
    value_suffix: "</arg_value>\n",
    func_close: None,
};

/// Seed-OSS: `<seed:tool_call>\n<function=NAME>\n<parameter=K>V</parameter>\n</function>\n…`.
const SEED_OSS: Tagged = Tagged {
    prompt: "<seed:bos>assistant\n",
    think: ("<seed:think>", "</seed:think>"),
    call_start: "<seed:tool_call>\n",
    call_end: "</seed:tool_call>",
    name_prefix: "<function=",
    name_suffix: ">\n",
    arg_prefix: "<parameter=",
    arg_suffix: ">",
    value_prefix: "",
    value_suffix: "</parameter>\n",
    func_close: Some("</function>\n"),
};

/// A call's arguments as llama.cpp's tagged-argument builders write them: the required ones
/// in order, each after the first preceded by `sp`, then any number of `sp` + one of the
/// optional ones (common/chat-auto-parser-generator.cpp, b11434). `args`: (required, rule).
fn arg_list(g: &mut Grammar, sp: Id, args: Vec<(bool, Id)>) -> Id {
    let mut seq = vec![g.eps()];
    let mut opts = Vec::new();
    for (required, arg) in args {
        if required {
            if seq.len() > 1 {
                seq.push(sp);
            }
            seq.push(arg);
        } else {
            opts.push(arg);
        }
    }
    if !opts.is_empty() {
        let c = g.choice(&opts);
        let s = g.seq(&[sp, c]);
        seq.push(g.star(s));
    }
    g.seq(&seq)
}

/// One argument `PREFIX name SUFFIX VALUE_PREFIX value VALUE_SUFFIX`: a string schema reads the
/// value verbatim up to the suffix, any other as JSON (:361-371).
fn tagged_arg(g: &mut Grammar, p: &Param, pre: &str, suf: &str, vpre: &str, vsuf: &str) -> Id {
    let a = g.lit(pre);
    let nl = g.lit(&p.name);
    let n = g.tag("tool-arg-name", nl);
    let n = g.atomic(n);
    let b = g.lit(suf);
    let open = g.seq(&[a, n, b]);
    let open = g.tag("tool-arg-open", open);
    let open = g.atomic(open);
    let vp = g.lit(vpre);
    let cl = g.lit(vsuf);
    let close = g.tag("tool-arg-close", cl);
    let close = g.atomic(close);
    let value = if p.maybe_string {
        let u = g.until(&[vsuf]);
        let v = g.tag("tool-arg-string-value", u);
        g.seq(&[v, close])
    } else {
        let j = g.json();
        let v = g.tag("tool-arg-value", j);
        g.seq(&[v, close])
    };
    let s = g.seq(&[open, vp, value]);
    g.tag("tool-arg", s)
}

fn tagged_func(g: &mut Grammar, t: &Tool, m: &Tagged) -> Id {
    let sp = g.space();
    let a = g.lit(m.name_prefix);
    let nl = g.lit(&t.name);
    let n = g.tag("tool-name", nl);
    let n = g.atomic(n);
    let b = g.lit(m.name_suffix);
    let open = g.seq(&[a, n, b]);
    let open = g.tag("tool-open", open);
    let open = g.atomic(open);
    let e = g.eps();
    let mut list = Vec::new();
    for p in &t.params {
        let arg = tagged_arg(
            g,
            p,
            m.arg_prefix,
            m.arg_suffix,
            m.value_prefix,
            m.value_suffix,
        );
        list.push((p.required, arg));
    }
    let args = arg_list(g, sp, list);
    let close = match m.func_close {
        Some(c) => {
            let l = g.lit(c);
            let l = g.tag("tool-close", l);
            let l = g.atomic(l);
            g.seq(&[sp, l])
        }
        None => {
            let l = g.lit(m.call_end);
            let pk = g.peek(l);
            let t = g.tag("tool-close", pk);
            g.atomic(t)
        }
    };
    g.seq(&[open, e, sp, args, close])
}

fn tagged(g: &mut Grammar, tools: &[Tool], m: &Tagged) -> Id {
    let p = g.lit(m.prompt);
    let sp = g.space();
    let r = think(g, m.think.0, m.think.1, false, 1);
    let u = g.until(&[m.call_start]);
    let content = g.tag("content", u);
    let content = g.opt(content);
    let v: Vec<Id> = tools.iter().map(|t| tagged_func(g, t, m)).collect();
    let ch = g.choice(&v);
    let st = g.lit(m.call_start);
    let en = g.lit(m.call_end);
    let more = g.seq(&[sp, st, sp, ch, sp, en]);
    let more = g.star(more);
    let calls = g.seq(&[st, sp, ch, sp, en, more, sp]);
    let calls = g.opt(calls);
    let end = g.end();
    g.seq(&[p, sp, r, content, calls, end])
}

/// Qwen3-Coder (common/parsers/qwen3-coder.cpp): content up to `<tool_call>` or a
/// `<function=NAME>`, the first `<tool_call>` optional, values between `>\n` and
/// `\n</parameter>\n`; no `end`, so text after the calls is dropped.
fn qwen3_coder(g: &mut Grammar, tools: &[Tool]) -> Id {
    let p = g.lit("<|im_start|>assistant\n");
    let e = g.eps();
    let sp = g.space();
    let mut delims = vec!["<tool_call>".to_string()];
    delims.extend(tools.iter().map(|t| format!("<function={}>", t.name)));
    let d: Vec<&str> = delims.iter().map(String::as_str).collect();
    let u = g.until(&d);
    let content = g.tag("content", u);
    let v: Vec<Id> = tools
        .iter()
        .map(|t| {
            let a = g.lit("<function=");
            let nl = g.lit(&t.name);
            let n = g.tag("tool-name", nl);
            let n = g.atomic(n);
            let b = g.lit(">\n");
            let open = g.seq(&[a, n, b]);
            let open = g.tag("tool-open", open);
            let open = g.atomic(open);
            let mut req = Vec::new();
            let mut opts = Vec::new();
            for prm in &t.params {
                let arg = tagged_arg(g, prm, "<parameter=", ">\n", "", "\n</parameter>\n");
                if prm.required {
                    req.push(arg);
                } else {
                    opts.push(arg);
                }
            }
            if req.is_empty() {
                req.push(e);
            }
            if !opts.is_empty() {
                let c = g.choice(&opts);
                req.push(g.star(c));
            }
            let args = g.seq(&req);
            let args = g.tag("tool-args", args);
            let cl = g.lit("</function>\n");
            let close = g.tag("tool-close", cl);
            let close = g.atomic(close);
            let s = g.seq(&[open, args, close]);
            g.tag("tool", s)
        })
        .collect();
    let ch = g.choice(&v);
    let st = g.lit("<tool_call>\n");
    let ost = g.opt(st);
    let en = g.lit("</tool_call>");
    let first = g.seq(&[ost, ch, en, sp]);
    let next = g.seq(&[st, ch, en, sp]);
    let next = g.star(next);
    let calls = g.seq(&[first, next]);
    let calls = g.opt(calls);
    g.seq(&[p, e, sp, content, sp, calls])
}

/// GPT-OSS harmony (common/parsers/gpt-oss.cpp:70-135): `(start (preamble | analysis))* start
/// (tool call | final)`, `start` = `<|start|>assistant`; a call is ` to=functions.NAME` in the
/// role header or after the channel, then `<|message|>` and JSON arguments. No `end`: what follows
/// the arguments is dropped.
fn gpt_oss(g: &mut Grammar, tools: &[Tool]) -> Id {
    let start = g.lit("<|start|>assistant");
    let end = g.lit("<|end|>");
    let u = g.until(&["<|end|>"]);
    let (com, ana) = (g.lit("commentary"), g.lit("analysis"));
    let chan = g.lit("<|channel|>");
    let which = g.choice(&[com, ana]);
    let channel = g.seq(&[chan, which]);
    let sp = g.space();
    let cons = g.lit("<|constrain|>");
    let cons = g.opt(cons);
    let ctype = g.chars(
        &[('A', 'Z'), ('a', 'z'), ('0', '9'), ('_', '_'), ('-', '-')],
        false,
        1,
        None,
    );
    let constraint = g.seq(&[sp, cons, ctype]);
    let constraint = g.opt(constraint);
    let sc = g.lit("<|channel|>commentary");
    let ta = g.lit(" to=assistant");
    let ta = g.opt(ta);
    let stray = g.seq(&[sc, ta]);
    let stray = g.opt(stray);
    let sa = g.lit("<|channel|>analysis<|message|>");
    let r = g.tag("reasoning", u);
    let analysis = g.seq(&[stray, sa, r, end]);
    let pl = g.lit("<|channel|>commentary<|message|>");
    let c = g.tag("content", u);
    let preamble = g.seq(&[pl, c, end]);
    let any = g.choice(&[preamble, analysis]);
    let msg = g.lit("<|message|>");
    let v: Vec<Id> = tools
        .iter()
        .map(|t| {
            let to = g.lit(" to=functions.");
            let nl = g.lit(&t.name);
            let n = g.tag("tool-name", nl);
            let n = g.atomic(n);
            let j = g.json();
            let args = g.tag("tool-args", j);
            let o1 = g.seq(&[to, n, channel, constraint, msg]);
            let o1 = g.tag("tool-open", o1);
            let o1 = g.atomic(o1);
            let r1 = g.seq(&[o1, args]);
            let r1 = g.tag("tool", r1);
            let o2 = g.seq(&[channel, to, n, constraint, msg]);
            let o2 = g.tag("tool-open", o2);
            let o2 = g.atomic(o2);
            let r2 = g.seq(&[o2, args]);
            let r2 = g.tag("tool", r2);
            g.choice(&[r1, r2])
        })
        .collect();
    let call = g.choice(&v);
    let fl = g.lit("<|channel|>final<|message|>");
    let final_msg = g.seq(&[stray, fl, c]);
    let last = g.choice(&[call, final_msg]);
    let head = g.seq(&[start, any]);
    let head = g.star(head);
    g.seq(&[head, start, last])
}

/// Muse Glimmer (common/parsers/muse-glimmer.cpp:51-125): `(start analysis)* start (calls |
/// final (<|eom|> start calls)?)`; a call is ` to=…<|message|><atem:function_calls>
/// <atem:invoke name="NAME"> args </atem:invoke> </atem:function_calls>`, parallel ones joined by
/// `<|eom|><|start|>assistant`. No `end`.
fn muse_glimmer(g: &mut Grammar, tools: &[Tool]) -> Id {
    let start = g.lit("<|start|>assistant");
    let sp = g.space();
    let al = g.lit(" to=self<|message|>");
    let u = g.until(&["<|eom|>"]);
    let r = g.tag("reasoning", u);
    let eom = g.lit("<|eom|>");
    let analysis = g.seq(&[al, r, eom]);
    let pend = g.lit("</atem:parameter>");
    let su = g.until(&["</atem:parameter>"]);
    let sv = g.tag("tool-arg-string-value", su);
    let pc = g.tag("tool-arg-close", pend);
    let pc = g.atomic(pc);
    let string_value = g.seq(&[sv, pc]);
    let v: Vec<Id> = tools
        .iter()
        .map(|t| {
            let rules: Vec<Id> = t
                .params
                .iter()
                .map(|p| {
                    let a = g.lit("<atem:parameter name=\"");
                    let nl = g.lit(&p.name);
                    let n = g.tag("tool-arg-name", nl);
                    let n = g.atomic(n);
                    let b = g.lit("\">");
                    let open = g.seq(&[a, n, b]);
                    let open = g.tag("tool-arg-open", open);
                    let open = g.atomic(open);
                    let value = if p.maybe_string {
                        string_value
                    } else {
                        let j = g.json();
                        let jv = g.tag("tool-arg-value", j);
                        g.seq(&[jv, pc])
                    };
                    let s = g.seq(&[open, value]);
                    g.tag("tool-arg", s)
                })
                .collect();
            let args = if rules.is_empty() {
                g.eps()
            } else {
                let c = g.choice(&rules);
                let s = g.seq(&[c, sp]);
                g.star(s)
            };
            let args = g.tag("tool-args", args);
            let to = g.lit(" to=");
            let um = g.until(&["<|message|>"]);
            let fc = g.lit("<|message|><atem:function_calls>");
            let inv = g.lit("<atem:invoke name=\"");
            let nl = g.lit(&t.name);
            let n = g.tag("tool-name", nl);
            let n = g.atomic(n);
            let q = g.lit("\">");
            let open = g.seq(&[to, um, fc, sp, inv, n, q, sp]);
            let open = g.tag("tool-open", open);
            let open = g.atomic(open);
            let ie = g.lit("</atem:invoke>");
            let fe = g.lit("</atem:function_calls>");
            let close = g.seq(&[ie, sp, fe]);
            let close = g.tag("tool-close", close);
            let close = g.atomic(close);
            let s = g.seq(&[open, sp, args, sp, close]);
            g.tag("tool", s)
        })
        .collect();
    let choice = g.choice(&v);
    let more = g.seq(&[eom, start, choice]);
    let more = g.star(more);
    let calls = g.seq(&[choice, more]);
    let tu = g.lit(" to=user");
    let tu = g.opt(tu);
    let ml = g.lit("<|message|>");
    let cu = g.until(&["<|eot|>", "<|eom|>"]);
    let c = g.tag("content", cu);
    let final_msg = g.seq(&[tu, ml, c]);
    let trailing = g.seq(&[eom, start, calls]);
    let trailing = g.opt(trailing);
    let fin = g.seq(&[final_msg, trailing]);
    let last = g.choice(&[calls, fin]);
    let head = g.seq(&[start, analysis]);
    let head = g.star(head);
    g.seq(&[head, start, last])
}

/// DeepSeek V3.2 DSML (common/parsers/deepseek.cpp:150-260): after `<｜Assistant｜>`, either
/// reasoning (the prompt's `<think>`) running up to the calls, or `<think>…</think>`? content up
/// to the calls; the calls `<｜DSML｜function_calls>` invoke+ `</｜DSML｜function_calls>`, then end.
fn deepseek_v32(g: &mut Grammar, tools: &[Tool]) -> Id {
    const FC: &str = "<｜DSML｜function_calls>";
    let p = g.lit("<｜Assistant｜>");
    let sp = g.space();
    let v: Vec<Id> = tools
        .iter()
        .map(|t| {
            let mut list = Vec::new();
            for prm in &t.params {
                let a = g.lit("<｜DSML｜parameter name=\"");
                let nl = g.lit(&prm.name);
                let n = g.tag("tool-arg-name", nl);
                let n = g.atomic(n);
                let b = g.lit(if prm.maybe_string {
                    "\" string=\"true\">"
                } else {
                    "\" string=\"false\">"
                });
                let open = g.seq(&[a, n, b]);
                let open = g.tag("tool-arg-open", open);
                let open = g.atomic(open);
                let value = if prm.maybe_string {
                    let u = g.until(&["</｜DSML｜parameter>"]);
                    g.tag("tool-arg-string-value", u)
                } else {
                    let j = g.json();
                    g.tag("tool-arg-value", j)
                };
                let cl = g.lit("</｜DSML｜parameter>");
                let cl = g.tag("tool-arg-close", cl);
                let cl = g.atomic(cl);
                let s = g.seq(&[open, value, cl]);
                let arg = g.tag("tool-arg", s);
                list.push((prm.required, arg));
            }
            let args = arg_list(g, sp, list);
            let a = g.lit("<｜DSML｜invoke name=\"");
            let nl = g.lit(&t.name);
            let n = g.tag("tool-name", nl);
            let n = g.atomic(n);
            let b = g.lit("\">\n");
            let open = g.seq(&[a, n, b]);
            let open = g.tag("tool-open", open);
            let open = g.atomic(open);
            let cl = g.lit("</｜DSML｜invoke>");
            let cl = g.tag("tool-close", cl);
            let cl = g.atomic(cl);
            let s = g.seq(&[open, args, sp, cl]);
            g.tag("tool", s)
        })
        .collect();
    let choice = g.choice(&v);
    let fs = g.lit(FC);
    let fe = g.lit("</｜DSML｜function_calls>");
    let more = g.seq(&[sp, choice]);
    let more = g.star(more);
    let calls = g.seq(&[fs, sp, choice, more, sp, fe]);
    let ts = g.lit("<think>");
    let te = g.lit("</think>");
    let nfc = format!("\n\n{FC}");
    let ru = g.until(&[&nfc, FC, "</think>"]);
    let r = g.tag("reasoning", ru);
    let a = g.seq(&[ts, r, sp, calls]);
    let tu = g.until(&["</think>"]);
    let tr = g.tag("reasoning", tu);
    let th = g.seq(&[ts, tr, te]);
    let th = g.opt(th);
    let nt = g.not(ts);
    let cu = g.until(&[&nfc, FC]);
    let c = g.tag("content", cu);
    let oc = g.opt(calls);
    let b = g.seq(&[th, nt, c, sp, oc]);
    let body = g.choice(&[a, b]);
    let end = g.end();
    g.seq(&[p, body, end])
}

/// LFM2 (common/parsers/lfm2.cpp:67-90): content up to `<|tool_call_start|>`, then the calls
/// `[name(arg="v", n=3), …]` are required before `end` (a reply without one ends inside the
/// content, which the lenient parse accepts). Values: a string parameter takes a quoted string,
/// any other a Python-or-JSON value (chat-peg-parser.cpp:530).
fn lfm2(g: &mut Grammar, tools: &[Tool]) -> Id {
    let p = g.lit("<|im_start|>assistant\n");
    let e = g.eps();
    let sp = g.space();
    let u = g.until(&["<|tool_call_start|>"]);
    let content = g.tag("content", u);
    let (dq, sq) = (g.lit("\""), g.lit("'"));
    let ds = g.add(Node::Str(b'"'));
    let ss = g.add(Node::Str(b'\''));
    let dstr = g.seq(&[dq, ds, dq]);
    let sstr = g.seq(&[sq, ss, sq]);
    let pystr = g.choice(&[dstr, sstr]);
    let value = python_or_json(g, pystr);
    let v: Vec<Id> = tools
        .iter()
        .map(|t| {
            let rules: Vec<Id> = t
                .params
                .iter()
                .map(|prm| {
                    let nl = g.lit(&prm.name);
                    let n = g.tag("tool-arg-name", nl);
                    let n = g.atomic(n);
                    let eq = g.lit("=");
                    let open = g.seq(&[n, eq]);
                    let open = g.tag("tool-arg-open", open);
                    let open = g.atomic(open);
                    let val = g.tag("tool-arg-value", if prm.string { pystr } else { value });
                    let cl = g.tag("tool-arg-close", e);
                    let cl = g.atomic(cl);
                    let s = g.seq(&[open, val, cl]);
                    g.tag("tool-arg", s)
                })
                .collect();
            let args = if rules.is_empty() {
                e
            } else {
                let c = g.choice(&rules);
                let cm = g.lit(",");
                let m = g.seq(&[cm, sp, c]);
                let m = g.star(m);
                g.seq(&[c, m])
            };
            let args = g.tag("tool-args", args);
            let nl = g.lit(&t.name);
            let n = g.tag("tool-name", nl);
            let n = g.atomic(n);
            let lp = g.lit("(");
            let open = g.seq(&[n, lp]);
            let open = g.tag("tool-open", open);
            let open = g.atomic(open);
            let rp = g.lit(")");
            let cl = g.tag("tool-close", rp);
            let cl = g.atomic(cl);
            let s = g.seq(&[open, sp, args, sp, cl]);
            g.tag("tool", s)
        })
        .collect();
    // the LFM2-8B template does not support parallel calls (caps), so one call only
    let choice = g.choice(&v);
    let st = g.lit("<|tool_call_start|>");
    let (lb, rb) = (g.lit("["), g.lit("]"));
    let en = g.lit("<|tool_call_end|>");
    let calls = g.seq(&[st, lb, sp, choice, sp, rb, en]);
    let end = g.end();
    g.seq(&[p, e, content, calls, end])
}

/// python-or-json-value (chat-peg-parser.cpp:530).
fn python_or_json(g: &mut Grammar, pystr: Id) -> Id {
    let value = g.add(Node::Eps);
    let ws = g.space();
    let (o, c, colon, comma) = (g.lit("{"), g.lit("}"), g.lit(":"), g.lit(","));
    let member = g.seq(&[pystr, ws, colon, ws, value]);
    let m = g.seq(&[ws, comma, ws, member]);
    let m = g.star(m);
    let members = g.seq(&[member, m, ws, c]);
    let body = g.choice(&[c, members]);
    let dict = g.seq(&[o, ws, body, ws]);
    let (lb, rb) = (g.lit("["), g.lit("]"));
    let m = g.seq(&[comma, ws, value]);
    let m = g.star(m);
    let elements = g.seq(&[value, m, ws, rb]);
    let body = g.choice(&[rb, elements]);
    let array = g.seq(&[lb, ws, body, ws]);
    let num = g.json_number();
    let (t, f, n) = (g.lit("True"), g.lit("False"), g.lit("None"));
    let pb = g.choice(&[t, f]);
    let (jt, jf, jn) = (g.lit("true"), g.lit("false"), g.lit("null"));
    let jb = g.choice(&[jt, jf]);
    let all = g.choice(&[dict, array, pystr, num, pb, n, jb, jn]);
    g.set(value, Node::Ref(all));
    value
}

/// Kimi K2 (common/parsers/kimi-k2.cpp): `<think>…` optional, content up to the section or a
/// call, `<|tool_calls_section_begin|>`? (`<|tool_call_begin|>functions.NAME:N
/// <|tool_call_argument_begin|>{…}<|tool_call_end|>?`)* `<|tool_calls_section_end|>`? end.
fn kimi_k2(g: &mut Grammar, tools: &[Tool]) -> Id {
    const SB: &str = "<|tool_calls_section_begin|>";
    const CB: &str = "<|tool_call_begin|>";
    let p = g.lit("<|im_assistant|>assistant<|im_middle|>");
    let ts = g.lit("<think>");
    let ru = g.until(&["</think>", SB, CB]);
    let r = g.tag("reasoning", ru);
    let te = g.lit("</think>");
    let te = g.opt(te);
    let th = g.seq(&[ts, r, te]);
    let th = g.opt(th);
    let cu = g.until(&[SB, CB]);
    let content = g.tag("content", cu);
    let v: Vec<Id> = tools
        .iter()
        .map(|t| {
            let f = g.lit("functions.");
            let nl = g.lit(&t.name);
            let n = g.tag("tool-name", nl);
            let n = g.atomic(n);
            let colon = g.lit(":");
            let digits = g.chars(&[('0', '9')], false, 1, None);
            let id = g.seq(&[f, n, colon, digits]);
            let id = g.tag("tool-id", id);
            let id = g.atomic(id);
            let ab = g.lit("<|tool_call_argument_begin|>");
            let open = g.seq(&[id, ab]);
            let open = g.tag("tool-open", open);
            let open = g.atomic(open);
            let j = g.json();
            let args = g.tag("tool-args", j);
            let ce = g.lit("<|tool_call_end|>");
            let ce = g.opt(ce);
            let cl = g.tag("tool-close", ce);
            let cl = g.atomic(cl);
            let s = g.seq(&[open, args, cl]);
            g.tag("tool", s)
        })
        .collect();
    let choice = g.choice(&v);
    let cb = g.lit(CB);
    let call = g.seq(&[cb, choice]);
    let calls = g.star(call);
    let sb = g.lit(SB);
    let sb = g.opt(sb);
    let se = g.lit("<|tool_calls_section_end|>");
    let se = g.opt(se);
    let body = g.seq(&[sb, calls, se]);
    let end = g.end();
    g.seq(&[p, th, content, body, end])
}

/// Granite 3.3: the auto parser finds no tool-call syntax in the template, so the grammar reads
/// `<think>…</think>`? and the rest as content (no call is ever read).
fn granite(g: &mut Grammar) -> Id {
    let p = g.lit("<|start_of_role|>assistant<|end_of_role|>");
    let sp = g.space();
    let r = think(g, "<think>", "</think>", false, 0);
    let u = g.until(&[]);
    let c = g.tag("content", u);
    let end = g.end();
    g.seq(&[p, sp, r, c, end])
}

/// MiniMax-M3 (common/parsers/minimax-m3.cpp): `<mm:think>…</mm:think>`? content up to the
/// `]<]minimax[>[<tool_call>` section, invokes with one tag per argument
/// (`]<]minimax[>[<city>Paris]<]minimax[>[</city>`; an array as `<item>` tags), then end. The
/// arguments are mapped by the standard mapper here: llama.cpp's own MiniMax-M3 mapper
/// (chat-peg-parser.cpp:1199) writes the same JSON for scalar and object arguments; `<item>`
/// arrays are not modelled.
fn minimax_m3(g: &mut Grammar, tools: &[Tool]) -> Id {
    const NS: &str = "]<]minimax[>[";
    let p = g.lit("]~b]ai\n");
    let sp = g.space();
    let ts = g.lit("<mm:think>");
    let te = g.lit("</mm:think>");
    let ru = g.until(&["</mm:think>"]);
    let r = g.tag("reasoning", ru);
    let th = g.seq(&[ts, sp, r, te]);
    let th = g.choice(&[th, te]);
    let th = g.opt(th);
    let tc = format!("{NS}<tool_call>");
    let cu = g.until(&[&tc]);
    let content = g.tag("content", cu);
    let v: Vec<Id> = tools
        .iter()
        .map(|t| {
            let mut list = Vec::new();
            for prm in &t.params {
                let a = g.lit(&format!("{NS}<"));
                let nl = g.lit(&prm.name);
                let n = g.tag("tool-arg-name", nl);
                let n = g.atomic(n);
                let b = g.lit(">");
                let open = g.seq(&[a, n, b]);
                let open = g.tag("tool-arg-open", open);
                let open = g.atomic(open);
                let close_s = format!("{NS}</{}>", prm.name);
                let cl = g.lit(&close_s);
                let cl = g.tag("tool-arg-close", cl);
                let cl = g.atomic(cl);
                let value = if prm.array {
                    let il = g.lit(&format!("{NS}<item>"));
                    let ic = format!("{NS}</item>");
                    let iu = g.until(&[&ic]);
                    let iv = g.tag("tool-arg-string-value", iu);
                    let icl = g.lit(&ic);
                    let icl = g.tag("tool-arg-close", icl);
                    let icl = g.atomic(icl);
                    let item = g.seq(&[il, iv, icl]);
                    let item = g.tag("tool-arg-item", item);
                    let item = g.seq(&[sp, item]);
                    let items = g.star(item);
                    let items = g.tag("tool-arg-array", items);
                    g.seq(&[items, sp, cl])
                } else if prm.maybe_string {
                    let u = g.until(&[&close_s]);
                    let sv = g.tag("tool-arg-string-value", u);
                    g.seq(&[sv, cl])
                } else {
                    let j = g.json();
                    let jv = g.tag("tool-arg-value", j);
                    g.seq(&[jv, cl])
                };
                let s = g.seq(&[open, value]);
                let arg = g.tag("tool-arg", s);
                list.push((prm.required, arg));
            }
            let args = arg_list(g, sp, list);
            let a = g.lit(&format!("{NS}<invoke name=\""));
            let nl = g.lit(&t.name);
            let n = g.tag("tool-name", nl);
            let n = g.atomic(n);
            let b = g.lit("\">");
            let open = g.seq(&[a, n, b]);
            let open = g.tag("tool-open", open);
            let open = g.atomic(open);
            let cl = g.lit(&format!("{NS}</invoke>"));
            let cl = g.tag("tool-close", cl);
            let cl = g.atomic(cl);
            let s = g.seq(&[open, sp, args, sp, cl]);
            g.tag("tool", s)
        })
        .collect();
    let choice = g.choice(&v);
    let st = g.lit(&tc);
    let en = g.lit(&format!("{NS}</tool_call>"));
    let more = g.seq(&[sp, choice]);
    let more = g.star(more);
    let calls = g.seq(&[st, sp, choice, more, sp, en]);
    let calls = g.opt(calls);
    let end = g.end();
    g.seq(&[p, th, content, calls, end])
}
