//! What the Dynamo frontend returns for a non-streamed chat completion with
//! `--dyn-tool-call-parser NAME`: the `dynamo-parsers` crate 11.0.1 (crates.io, Apache-2.0;
//! paths below are inside its `src/`). Pure.
//!
//! Two steps run for every family, modelled once here ([`verdict`]), around each family's
//! finalize parser ([`dynamo`], one [`Profile`] per family):
//!
//! 1. **The jail** (`tool_calling::jail::apply_tool_calling_jail`, tool_calling/jail/mod.rs:3522):
//!    text before a start marker passes through as content; from the marker the text is held
//!    and parsed with `try_tool_call_parse_aggregate_finalize` (tool_calling/tools.rs:44 →
//!    `detect_and_parse_tool_call_with_recovery`, tool_calling/parsers.rs:167). When the
//!    parser's config names an end token the jail splits there and emits the text after the
//!    section as content (`find_tool_call_end_position`, jail/mod.rs:1385;
//!    `handle_trailing_content`, jail/mod.rs:1094; [`Profile::jail_splits`]). When no call comes
//!    out it releases the held text: empty when the parser says it saw markup (`Some("")`),
//!    the closing markers removed for hermes/qwen25/jamba/inkling (jail/mod.rs:2795-2813,
//!    [`Profile::jail_strips`]), else verbatim (jail/mod.rs:2822).
//! 2. **The aggregator's re-parse** (ai-dynamo/dynamo lib/llm chat_completions/aggregator.rs
//!    `parse_complete_tool_output`): a choice left with text and no calls is parsed again with
//!    the same parser and *no tools*; calls found replace the text.
//!
//! No reasoning parser runs (a `--dyn-tool-call-parser`-only deployment, as vLLM and SGLang are
//! modelled), so reasoning markup stays in `content`. No parser checks tool names against the
//! request (crate README, "Tool execution boundary"), so calls to undeclared tools are kept.
//! The verdict is for the text arriving as one delta: the jail decides on a prefix whether to
//! start holding, so a stream cut in small chunks can end differently (measured: 11 of 40
//! llama3 corpus texts, per-character deltas).
//!
//! Checked by running the crate itself (scripts/engines/dynamo, `tests/e2e/engines_dynamo.rs`).

use serde_json::Value;

use super::ToolIndex;
use super::profile::{BASE, Broken, Form, Profile, Tail, Unwrapped};
use super::{Outcome, Situation, by_profile, close_json, half_read, in_prose, parse, whole};
use crate::parser::Syntax;

/// What every Dynamo family shares: no name check, the jail's split at the section end, and
/// markup the parser could not read dropped (the parser returns `Some("")`, jail/mod.rs:2770).
const JAIL: Profile = Profile {
    cut: Broken::Empty,
    malformed: Broken::Empty,
    drift: Broken::Empty,
    drift_parameters: Broken::Accept,
    jail_splits: true,
    ..BASE
};

/// `[TOOL_CALLS]name[ARGS]{…}` (Mistral v11): the mistral config reads a JSON list after
/// `[TOOL_CALLS]` only (tool_calling/config.rs:654).
const MISTRAL_V11: Form = Form {
    matches: |t| t.contains("[ARGS]"),
    then: Broken::Empty,
    why: "the v11 form `[TOOL_CALLS]name[ARGS]{…}`: Dynamo's mistral config (config.rs:654) reads a \
          JSON list after [TOOL_CALLS] only",
};
/// DeepSeek V3.1's `name<｜tool▁sep｜>{json}`: the deepseek_v3 parser wants `function<｜tool▁sep｜>`.
const DEEPSEEK_V31_FORM: Form = Form {
    matches: |t| {
        t.contains("<｜tool▁call▁begin｜>")
            && !t.contains("<｜tool▁call▁begin｜>function<｜tool▁sep｜>")
    },
    then: Broken::Empty,
    why: "the V3.1 form `N<｜tool▁sep｜>{json}`: Dynamo's deepseek_v3 parser \
          (json/deepseek_v3_parser.rs) reads `function<｜tool▁sep｜>N` + fenced JSON only",
};
/// Calls joined by `;`: llama3_json's JSON parser takes one object or a list.
const LLAMA3_SEMICOLON: Form = Form {
    matches: |t| {
        let t = t.replace(' ', "");
        t.contains("};{")
    },
    then: Broken::Whole,
    why: "calls joined by `;`: Dynamo's llama3_json parser (json/base_json_parser.rs) reads one \
          JSON object or list, not `;`-separated objects",
};
/// Kimi K2: a call without `<|tool_call_end|>`.
const KIMI_NO_CALL_END: Form = Form {
    matches: |t| t.contains("<|tool_call_argument_begin|>") && !t.contains("<|tool_call_end|>"),
    then: Broken::Empty,
    why: "no <|tool_call_end|>: Dynamo's kimi_k2 parser (xml/kimi_k2_parser.rs) reads complete \
          calls only",
};

/// MiniMax M3: `invoke` without the `<tool_call>` wrapper.
const MINIMAX_M3_NO_WRAPPER: Form = Form {
    matches: |t| t.contains("]<]minimax[>[<invoke") && !t.contains("]<]minimax[>[<tool_call>"),
    then: Broken::Empty,
    why: "no ]<]minimax[>[<tool_call> before the invoke: the minimax_m3 parser \
          (xml/minimax_m3_parser.rs) returns no call and drops the markup",
};

const QWEN3_UNWRAPPED: Unwrapped = Unwrapped {
    inner: "<function=",
    open: "<tool_call>\n",
    keeps_before: true,
    why: "no <tool_call> before <function=: qwen3_coder backs off to reading the block \
          (`backoff_when_no_wrapper`, config.rs:743)",
};
const GEMMA4_UNWRAPPED: Unwrapped = Unwrapped {
    inner: "call:",
    open: "<|tool_call>",
    keeps_before: true,
    why: "no <|tool_call> before `call:`: the gemma4 parser (gemma4/parser.rs) reads the call",
};
const DEEPSEEK_V3_UNWRAPPED: Unwrapped = Unwrapped {
    inner: "<｜tool▁call▁begin｜>function",
    open: "<｜tool▁calls▁begin｜>",
    keeps_before: false,
    why: "no <｜tool▁calls▁begin｜>: the deepseek_v3 parser (json/deepseek_v3_parser.rs) reads the \
          inner <｜tool▁call▁begin｜> calls and drops the markup before them",
};
const DSML_UNWRAPPED: Unwrapped = Unwrapped {
    inner: "<｜DSML｜invoke",
    open: "<｜DSML｜function_calls>\n",
    keeps_before: true,
    why: "no <｜DSML｜function_calls>: the DSML parser (dsml/parser.rs) reads the invoke blocks",
};
const KIMI_K2_UNWRAPPED: Unwrapped = Unwrapped {
    inner: "<|tool_call_begin|>",
    open: "<|tool_calls_section_begin|>",
    keeps_before: false,
    why: "no <|tool_calls_section_begin|>: the kimi_k2 parser (xml/kimi_k2_parser.rs) reads the \
          <|tool_call_begin|> calls and drops the markup before them",
};
const KIMI_K3_UNWRAPPED: Unwrapped = Unwrapped {
    inner: "<|open|>call ",
    open: "<|open|>tools<|sep|>",
    keeps_before: true,
    why: "no <|open|>tools<|sep|>: the kimi_k3 parser (xtml/kimi_k3_parser.rs) reads the call \
          channel",
};
const MINIMAX_UNWRAPPED: Unwrapped = Unwrapped {
    inner: "<invoke name=",
    open: "<minimax:tool_call>\n",
    keeps_before: true,
    why: "no <minimax:tool_call>: minimax_m2 recovers complete inner invokes \
          (`backoff_when_no_wrapper`, config.rs:838)",
};
const NEMOTRON_UNWRAPPED: Unwrapped = Unwrapped {
    inner: "[{",
    open: "<TOOLCALL>",
    keeps_before: false,
    why: "no <TOOLCALL> before the JSON list: nemotron_deci reads it and strips the markup \
          (`strip_markup_on_recovery`, config.rs:625)",
};

/// Dynamo's parser for `family` (a name in `get_tool_parser_map`, tool_calling/parsers.rs:47),
/// as the finalize call inside the jail sees it; `None` when 11.0.1 registers none. A table:
/// one row per registered family.
pub fn dynamo(family: Syntax) -> Option<Profile> {
    use Syntax as S;
    Some(match family {
        // hermes config (config.rs:582): allow_name_only_call, discard_unparseable_wrapper,
        // EOF recovery on
        S::Hermes => Profile {
            parser: "hermes",
            cut: Broken::Half,
            drift_kinds: &[
                ("input_for_arguments", Broken::NoArgs),
                ("string_arguments", Broken::ArgsAsString),
            ],
            jail_strips: &["</tool_call>"],
            bare_json: true,
            end: "</tool_call>",
            ..JAIL
        },
        S::Qwen3Coder => Profile {
            parser: "qwen3_coder",
            unwrapped: Some(QWEN3_UNWRAPPED),
            v2: true,
            ..JAIL
        },
        S::Glm45 => Profile {
            parser: "glm47",
            missing_end: Broken::DropLast,
            ..JAIL
        },
        S::Gemma4 => Profile {
            parser: "gemma4",
            unwrapped: Some(GEMMA4_UNWRAPPED),
            ..JAIL
        },
        // llama3_json config (config.rs:641): start `<|python_tag|>`, end "" (no split)
        S::Llama3 => Profile {
            parser: "llama3_json",
            tail: Tail::Whole,
            finds_in_prose: true,
            cut: Broken::Half,
            half_needs_args: true,
            eof_json: true,
            drift: Broken::Whole,
            drift_kinds: &[("string_arguments", Broken::ArgsAsString)],
            malformed: Broken::Whole,
            forms: &[LLAMA3_SEMICOLON],
            jail_splits: false,
            ..JAIL
        },
        S::Pythonic => Profile {
            parser: "pythonic",
            finds_in_prose: true,
            missing_end: Broken::Whole,
            cut: Broken::Whole,
            jail_splits: false,
            ..JAIL
        },
        S::Mistral => Profile {
            parser: "mistral",
            drift: Broken::Accept,
            drift_kinds: &[
                ("input_for_arguments", Broken::Empty),
                ("string_arguments", Broken::ArgsAsString),
            ],
            forms: &[MISTRAL_V11],
            ..JAIL
        },
        S::DeepSeekV3 => Profile {
            parser: "deepseek_v3",
            forms: &[DEEPSEEK_V31_FORM],
            unwrapped: Some(DEEPSEEK_V3_UNWRAPPED),
            ..JAIL
        },
        S::DeepSeekV32 => Profile {
            parser: "deepseek_v3_2",
            unwrapped: Some(DSML_UNWRAPPED),
            lead_sep: "\n\n",
            ..JAIL
        },
        S::KimiK2 => Profile {
            parser: "kimi_k2",
            forms: &[KIMI_NO_CALL_END],
            unwrapped: Some(KIMI_K2_UNWRAPPED),
            ..JAIL
        },
        S::KimiK3 => Profile {
            parser: "kimi_k3",
            unwrapped: Some(KIMI_K3_UNWRAPPED),
            strips: &["<|close|>think<|sep|>"],
            ..JAIL
        },
        // harmony (config.rs:688): read by openai-harmony, modelled in engines/harmony.rs
        S::GptOss => Profile {
            parser: "harmony",
            ..JAIL
        },
        S::AnthropicXml => Profile {
            parser: "minimax_m2",
            unwrapped: Some(MINIMAX_UNWRAPPED),
            ..JAIL
        },
        S::MiniMaxM3 => Profile {
            parser: "minimax_m3",
            forms: &[MINIMAX_M3_NO_WRAPPER],
            ..JAIL
        },
        // nemotron_deci config (config.rs:625): `<TOOLCALL>[…]</TOOLCALL>`, strip_markup_on_recovery
        S::NemotronV2 => Profile {
            parser: "nemotron_deci",
            cut: Broken::Half,
            half_needs_args: true,
            drift_kinds: &[("string_arguments", Broken::ArgsAsString)],
            malformed: Broken::Whole,
            unwrapped: Some(NEMOTRON_UNWRAPPED),
            end: "</TOOLCALL>",
            ..JAIL
        },
        _ => return None,
    })
}

fn content_of(o: &Outcome) -> Option<&str> {
    match o {
        Outcome::Calls { content, .. } | Outcome::Content { content } => Some(content),
        Outcome::Error { .. } => None,
    }
}

fn has_calls(o: &Outcome) -> bool {
    matches!(o, Outcome::Calls { tool_calls, .. } if !tool_calls.is_empty())
}

fn set_content(o: &mut Outcome, new: String) {
    match o {
        Outcome::Calls { content, .. } | Outcome::Content { content } => *content = new,
        Outcome::Error { .. } => {}
    }
}

/// The finalize parser on `text` (`tools`: the request's, or none for the aggregator's
/// re-parse).
fn finalize(family: Syntax, text: &str, tools: Option<&Value>, p: &Profile) -> (Outcome, String) {
    let index = ToolIndex::from_value(tools);
    // call markup without its outer opener: read as if the opener stood before it (the
    // markup before it dropped with it unless the parser keeps it)
    if let Some(u) = p.unwrapped
        && let Some(i) = text.find(u.inner)
        && !text[..i].contains(u.open.trim_end())
    {
        let before = if u.keeps_before { &text[..i] } else { "" };
        let fixed = format!("{before}{}{}", u.open, &text[i..]);
        let read = parse(&fixed, Some(family), tools);
        if !read.tool_calls.is_empty() {
            let sit = Situation::of(family, &fixed, &read, &index);
            let (o, why) = by_profile(family, &fixed, &read, &sit, p, &index, tools);
            return (o, format!("{}; {why}", u.why));
        }
    }
    let ours = parse(text, Some(family), tools);
    let mut sit = Situation::of(family, text, &ours, &index);
    // a block that reaches the section's end token was not cut: EOF recovery does not run
    if !p.end.is_empty()
        && text.trim_end().ends_with(p.end)
        && let Some(at) = sit.cut.take()
    {
        sit.malformed.get_or_insert(at);
    }
    let (mut o, why) = by_profile(family, text, &ours, &sit, p, &index, tools);
    if has_calls(&o) {
        // DSML: the separator before the block is not content
        if !p.lead_sep.is_empty()
            && let Some(stripped) = sit.before.strip_suffix(p.lead_sep)
            && let Some(c) = content_of(&o)
            && let Some(rest) = c.strip_prefix(sit.before.as_str())
        {
            let c = format!("{stripped}{rest}");
            set_content(&mut o, c);
        }
        return (o, why);
    }
    // EOF recovery closes a bare JSON call cut short
    if p.eof_json
        && let Some(Value::Object(v)) = close_json(text.trim())
        && let Some(Value::String(name)) = v.get("name")
        && let Some(args) = v.get("arguments").or(v.get("parameters"))
        && args.is_object()
    {
        let call = crate::parser::ParsedCall {
            name: name.clone(),
            arguments: args.clone(),
            syntax: Some(family.name().to_string()),
            span: None,
            id: None,
        };
        return (
            Outcome::Calls {
                content: String::new(),
                reasoning: String::new(),
                tool_calls: vec![call],
            },
            "the text ends inside the call's JSON: EOF recovery closes it".to_string(),
        );
    }
    // EOF recovery found nothing to close: the parser's normal text is the whole text
    if p.eof_json
        && sit.cut.is_some()
        && half_read(family, text, &sit, &index, false, p.half_needs_args).is_none()
    {
        return (
            whole(text),
            "the text ends inside a call and EOF recovery finds no arguments: the text is \
             returned as content"
                .to_string(),
        );
    }
    // a bare call object ending the text (base_json_parser.rs)
    if p.bare_json
        && let Some((before, calls, after)) = in_prose(Syntax::Llama3, text, tools)
        && after.trim().is_empty()
    {
        let calls = calls
            .into_iter()
            .map(|mut c| {
                c.syntax = Some(family.name().to_string());
                c
            })
            .collect();
        return (
            Outcome::Calls {
                content: before.trim().to_string(),
                reasoning: String::new(),
                tool_calls: calls,
            },
            "a bare JSON call object ends the text: the JSON parser reads it".to_string(),
        );
    }
    (o, why)
}

/// Dynamo's verdict for `text` with `p`, the family's parser ([`dynamo`]; `None`: no parser):
/// the jail around the finalize parser, then the aggregator's tool-less re-parse.
pub(super) fn verdict(
    family: Syntax,
    text: &str,
    tools: Option<&Value>,
    p: Option<&Profile>,
) -> (Outcome, String, Option<&'static str>) {
    let Some(p) = p else {
        let mut why = format!(
            "Dynamo (dynamo-parsers 11.0.1) registers no parser for {} (get_tool_parser_map, \
             tool_calling/parsers.rs:47): the text is returned as content",
            family.name()
        );
        if family == Syntax::MuseGlimmer {
            why.push_str(
                "; Dynamo's default frontend sends muse to the separate dynamo-parsers-v2 crate \
                 (tool_parser_v2.rs), which is not modelled",
            );
        }
        return (whole(text), why, None);
    };
    if family == Syntax::GptOss {
        let (o, why) = super::harmony::dynamo(text);
        return (
            o,
            format!(
                "{why}; for the text as one delta (the jail decides on a prefix whether to hold the text)"
            ),
            p.defect,
        );
    }
    // the jail emits the text after the section end as content
    let jailed = Profile {
        tail: if p.jail_splits { Tail::Keep } else { p.tail },
        ..*p
    };
    let (mut o, mut why) = finalize(family, text, tools, &jailed);
    if !has_calls(&o) {
        // the jail's release: orphan closing markers removed (hermes, qwen25, jamba, inkling)
        if let Some(c) = content_of(&o)
            && p.jail_strips.iter().any(|m| c.contains(m))
        {
            let mut c = c.to_string();
            for m in p.jail_strips {
                c = c.replace(m, "");
            }
            set_content(&mut o, c.trim().to_string());
            why.push_str("; the jail removes the orphan closing marker");
        }
        // the aggregator re-parses text left without calls, without the request's tools
        if let Some(c) = content_of(&o).filter(|c| !c.trim().is_empty())
            && c != text.trim()
        {
            let c = c.to_string();
            let (again, why2) = finalize(family, &c, None, &jailed);
            if has_calls(&again) {
                o = again;
                why = format!(
                    "{why}; the aggregator re-parses the text left (without tools): {why2}"
                );
            }
        }
    }
    if !p.strips.is_empty()
        && let Some(c) = content_of(&o)
    {
        let mut c = c.to_string();
        for m in p.strips {
            c = c.replace(m, "");
        }
        set_content(&mut o, c);
    }
    if p.v2 {
        why.push_str(
            "; this is the v1 crate's path (DYN_PARSER_VERSION=v1): Dynamo's default frontend \
             sends this family to dynamo-parsers-v2 (tool_parser_v2.rs), not modelled",
        );
    }
    why.push_str(
        "; for the text as one delta (the jail decides on a prefix whether to hold the text, so \
         a stream in small chunks can end differently)",
    );
    (o, why, p.defect)
}
