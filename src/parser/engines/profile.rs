//! How vLLM 0.33.0's and SGLang 0.5.23's tool-call parser for each family treats a text that is
//! not in the family's exact form, one [`Profile`] per (engine, family). Pure data.
//!
//! Each field is what the engine's non-streaming `tool_choice: "auto"` path returns in one
//! situation (vLLM: `ParserManager.get_parser(…).parse(text, request, enable_auto_tools=True)`,
//! vllm/parser/abstract_parser.py; SGLang: `OpenAIServingChat._process_tool_calls` →
//! `FunctionCallParser.parse_non_stream`, serving_chat.py:3150), read from the released wheels
//! and checked by running that code over tests/data/engine_corpus.json (tests/e2e/engines_real.rs).
//! Both are configured with `--tool-call-parser NAME` only (no reasoning parser), so reasoning
//! markup reaches the tool parser and stays in `content`.

use super::Syntax;

/// What the engine does when a text is not in the family's exact form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Broken {
    /// Reads the call(s) as toolscope does (drift accepted).
    Accept,
    /// No call; the whole text comes back as `content`, markup included.
    Whole,
    /// No call and the markup is dropped: `content` is the text before it (SGLang serving_chat.py
    /// "dropping the incomplete call"; vLLM engine-based parsers drop incomplete markup).
    Empty,
    /// The open call is closed and returned half-read: the name, and the arguments read so far
    /// (vLLM's engine-based parsers, vllm/parser/engine/parser_engine.py; some SGLang detectors):
    /// the argument text when it is JSON, else `{}`.
    Half,
    /// Like [`Broken::Half`], but argument text that is not JSON is returned as that text (a
    /// string where an object belongs).
    HalfRaw,
    /// The call is read with no arguments (`{}`).
    NoArgs,
    /// The calls before the unterminated last one are read; the last is dropped (with one call:
    /// no call, empty content).
    DropLast,
    /// As [`Broken::DropLast`], but with one call the whole text is content.
    DropLastOrWhole,
    /// As [`Broken::DropLastOrWhole`], and the unterminated call's markup is content.
    DropLastToContent,
    /// The call is read with its `arguments` string as the arguments (not decoded).
    ArgsAsString,
}

/// Text after the last call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tail {
    /// Dropped: `content` is the text before the first call.
    Drop,
    /// Kept in `content` after the text before the call.
    Keep,
    /// Kept: the text before and the text after, each trimmed, joined by a newline (vLLM
    /// `lfm2`, `apertus`).
    Join,
    /// Kept, joined to the text before by one space (SGLang `gpt-oss`).
    Spaced,
    /// The call is not read: the whole text is `content`.
    Whole,
}

/// Calls to tools the request did not declare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unknown {
    /// Returned like any call.
    Keep,
    /// Dropped with their markup (SGLang `SGLANG_FORWARD_UNKNOWN_TOOLS` off, the default:
    /// base_format_detector.py:87 and each detector's own check).
    Drop,
    /// Dropped; when no declared call is left the whole text is content.
    DropOrWhole,
    /// Their markup is returned as content; when no declared call is left the whole text is
    /// content.
    ToContent,
    /// The whole text comes back as content.
    Whole,
}

/// How argument values are typed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Typing {
    /// As written in the text (JSON values as JSON; XML values by toolscope's schema typing).
    AsWritten,
    /// A value's text is parsed as JSON when it parses, whatever the schema (`75001` for a
    /// `string` parameter becomes a number): muse_glimmer parsers of both engines.
    JsonFirst,
    /// Retyped by the tool's JSON Schema: a string holding a number for an `integer` / `number`
    /// parameter becomes the number, `true`/`false` for `boolean`, a number or boolean for a
    /// `string` parameter becomes its text (vLLM `ParserEngine._fix_arg_types`,
    /// vllm/parser/engine/parser_engine.py; the XML parsers' own schema typing).
    Schema,
}

/// Where text before the call is allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lead {
    /// Any text before the call: kept as content.
    Keep,
    /// Read, and dropped from content (vLLM `cohere_command4`, `minicpm5`, `llama3_json`).
    Drop,
    /// Anything before the call, whitespace included, and the call is not read (vLLM `pythonic`
    /// matches the whole output; SGLang `llama3` needs the text to start with `{`).
    Whole,
}

/// One engine's parser for one family.
#[derive(Debug, Clone, Copy)]
pub struct Profile {
    /// `--tool-call-parser` name the release registers.
    pub parser: &'static str,
    pub lead: Lead,
    pub tail: Tail,
    pub unknown: Unknown,
    /// The text ends inside a block that still parses (toolscope's `missing_end_marker`).
    pub missing_end: Broken,
    /// The text ends inside a call that does not parse (cut mid-value, after the name).
    pub cut: Broken,
    /// A drift toolscope repairs (`input` for `arguments`, a function wrapper, a stray closer, …).
    pub drift: Broken,
    /// `parameters` written for `arguments` (SGLang's `parse_base_json` reads both,
    /// base_format_detector.py:97).
    pub drift_parameters: Broken,
    /// Other drifts by toolscope's repair kind (`input_for_arguments`, `string_arguments`,
    /// `function_wrapper`, …) where the parser differs from `drift`.
    pub drift_kinds: &'static [(&'static str, Broken)],
    /// A block with markup that does not parse, before the end of the text.
    pub malformed: Broken,
    pub typing: Typing,
    /// JSON calls are found anywhere in the text, prose around them dropped (vLLM
    /// `llama3_json`: llama_tool_parser.py scans for `{`; SGLang `pythonic` reads a list after
    /// prose).
    pub finds_in_prose: bool,
    /// Text that is not in a call and not in the family's response wrapper is dropped (vLLM
    /// `cohere_command4`: only `<|START_RESPONSE|>`/`<|START_TEXT|>` text is content).
    pub plain_text_dropped: bool,
    /// Harmony `analysis` messages before the call are dropped from content (SGLang `gpt-oss`).
    pub drops_analysis: bool,
    /// Engine defect: a `[CALL_ID]` is glued into the call's name (vLLM `mistral`).
    pub glues_call_id: bool,
    /// Engine defect: values not written as `<escape>`-quoted strings are dropped (vLLM
    /// `functiongemma`).
    pub drops_unquoted: bool,
    /// Text this parser removes from content it returns whole (vLLM `mistral` drops
    /// `[TOOL_CALLS]` even when the call does not parse).
    pub unmarked: &'static str,
    /// `{}` arguments are returned as an empty string (vLLM `cohere_command4`).
    pub empty_args_text: bool,
    /// A call cut right after its name (no argument text yet) is dropped rather than returned
    /// with `{}`.
    pub half_needs_args: bool,
    /// `<think>` / `</think>` (`<mm:think>`) tags are removed from content, their text kept (vLLM's engine-based
    /// parsers with no reasoning parser: `skip_reasoning_parsing`, abstract_parser.py).
    pub strips_think_tags: bool,
    /// Forms of the family this parser does not read: (the text is in that form, what the
    /// parser then does, why in words).
    pub forms: &'static [Form],
    /// A behaviour of the engine that is itself a defect, in words (shown with the verdict).
    pub defect: Option<&'static str>,
    /// Dynamo: the parser's config names a non-empty end token for the tool-call section, so the
    /// jail splits there and emits the text after it as content
    /// (`find_tool_call_end_position`, src/tool_calling/jail/mod.rs:1385;
    /// `handle_trailing_content`, jail/mod.rs:1094). `llama3_json` (end token `""`) and
    /// `pythonic` have none: the parser sees the trailing text (src/tool_calling/config.rs:641,
    /// :681).
    pub jail_splits: bool,
    /// Dynamo: the closing markers the jail removes from a buffer no call came out of
    /// (`suppresses_tool_call_markup`: hermes, qwen25, jamba, inkling; jail/mod.rs:2795-2813).
    pub jail_strips: &'static [&'static str],
    /// Dynamo: a bare `{"name", "arguments"}` object ending the text is read as a call, the
    /// text before it content (src/tool_calling/json/base_json_parser.rs; the aggregator's
    /// re-parse reaches it when the jail released the text).
    pub bare_json: bool,
    /// Dynamo: the call markup inside a missing or misspelled outer opener is still read.
    pub unwrapped: Option<Unwrapped>,
    /// Dynamo: markup removed from the content (Kimi K3's think closer,
    /// src/tool_calling/xtml/kimi_k3_parser.rs).
    pub strips: &'static [&'static str],
    /// Dynamo: EOF recovery closes a bare JSON call cut short (`{"city": "Par` →
    /// `{"city": "Par"}`); when that gives no call the whole text is content (a JSON config
    /// without `allow_name_only_call` or `strip_markup_on_recovery`:
    /// `detect_and_parse_tool_call_with_recovery`, src/tool_calling/parsers.rs:167-216).
    pub eof_json: bool,
    /// Dynamo: the section's end token, where the parser needs it to tell a finished block
    /// from a cut one: a block that does not parse but reaches it is malformed, not cut (EOF
    /// recovery, src/tool_calling/parsers.rs:167-216, runs on unterminated text only).
    pub end: &'static str,
    /// Dynamo: a separator dropped from the end of the text before the block (DSML: the one
    /// `\n\n` the encoder puts before it, src/tool_calling/dsml/parser.rs:79-84).
    pub lead_sep: &'static str,
    /// Dynamo: the default frontend (`DYN_PARSER_VERSION` auto or v2) sends this family to the
    /// separate dynamo-parsers-v2 crate (ai-dynamo/dynamo lib/llm tool_parser_v2.rs); the
    /// profile is the v1 crate's path (`DYN_PARSER_VERSION=v1`).
    pub v2: bool,
}

/// A form of the family's syntax a parser does not read.
#[derive(Debug, Clone, Copy)]
pub struct Form {
    /// True when the text is in this form.
    pub matches: fn(&str) -> bool,
    pub then: Broken,
    pub why: &'static str,
}

pub(super) const BASE: Profile = Profile {
    parser: "",
    lead: Lead::Keep,
    tail: Tail::Drop,
    unknown: Unknown::Keep,
    missing_end: Broken::Accept,
    cut: Broken::Whole,
    drift: Broken::Whole,
    drift_parameters: Broken::Whole,
    drift_kinds: &[],
    malformed: Broken::Whole,
    typing: Typing::AsWritten,
    finds_in_prose: false,
    plain_text_dropped: false,
    unmarked: "",
    empty_args_text: false,
    half_needs_args: false,
    drops_analysis: false,
    glues_call_id: false,
    drops_unquoted: false,
    strips_think_tags: false,
    forms: &[],
    defect: None,
    jail_splits: false,
    jail_strips: &[],
    bare_json: false,
    unwrapped: None,
    strips: &[],
    eof_json: false,
    end: "",
    lead_sep: "",
    v2: false,
};

fn has_all(text: &str, yes: &[&str], no: &[&str]) -> bool {
    yes.iter().all(|m| text.contains(m)) && !no.iter().any(|m| text.contains(m))
}

const QWEN3_NO_WRAPPER: Form = Form {
    matches: |t| has_all(t, &["<function="], &["<tool_call>"]),
    then: Broken::Whole,
    why: "no opening <tool_call>: qwen3_coder_detector.py looks for <tool_call> only",
};
const MINIMAX_NO_WRAPPER: Form = Form {
    matches: |t| has_all(t, &["<invoke "], &["<minimax:tool_call>"]),
    then: Broken::Whole,
    why: "no opening <minimax:tool_call>: minimax_m2.py looks for it only",
};
const MINIMAX_NO_CLOSER: Form = Form {
    matches: |t| has_all(t, &["<minimax:tool_call>"], &["</minimax:tool_call>"]),
    then: Broken::Whole,
    why: "no closing </minimax:tool_call>: minimax_m2.py reads complete blocks only",
};
const KIMI_NO_SECTION: Form = Form {
    matches: |t| {
        has_all(
            t,
            &["<|tool_call_begin|>"],
            &["<|tool_calls_section_begin|>"],
        )
    },
    then: Broken::Whole,
    why: "no <|tool_calls_section_begin|>: the kimi_k2 parsers look for the section start",
};
const GPT_OSS_UNTERMINATED: Form = Form {
    matches: |t| {
        t.rfind("commentary to=")
            .is_some_and(|i| !t[i..].contains("<|call|>"))
    },
    then: Broken::DropLast,
    why: "the last call has no <|call|>: gpt_oss_detector.py reads complete messages only",
};
const GPT_OSS_NO_START: Form = Form {
    matches: |t| {
        has_all(
            t,
            &["<|channel|>commentary to="],
            &["<|start|>assistant<|channel|>commentary"],
        )
    },
    then: Broken::Whole,
    why: "the call's channel is not opened by <|start|>assistant (gpt_oss_detector.py)",
};
const LFM2_JSON_LIST: Form = Form {
    matches: |t| t.contains("<|tool_call_start|>[{"),
    then: Broken::Whole,
    why: "the JSON-list form: lfm2_tool_parser.py reads pythonic calls only",
};
const MISTRAL_NO_SPACE: Form = Form {
    matches: |t| t.contains("[TOOL_CALLS][") || t.contains("[CALL_ID]"),
    then: Broken::Empty,
    why: "mistral_detector.py looks for `[TOOL_CALLS] [` (with a space) or `[TOOL_CALLS]name[ARGS]`; \
          other forms are dropped",
};
const DEEPSEEK_V31_FORM: Form = Form {
    matches: |t| {
        t.contains("<｜tool▁call▁begin｜>")
            && !t.contains("<｜tool▁call▁begin｜>function<｜tool▁sep｜>")
    },
    then: Broken::Whole,
    why: "the V3.1 form `N<｜tool▁sep｜>{json}`: the deepseek_v3 parser reads `function<｜tool▁sep｜>N` + fenced JSON only",
};
const DEEPSEEK_V31_FORM_DROPPED: Form = Form {
    then: Broken::Empty,
    ..DEEPSEEK_V31_FORM
};
const PYTHON_START: Form = Form {
    matches: |t| t.contains("<|python_start|>"),
    then: Broken::Whole,
    why: "<|python_start|> around the list: pythonic_tool_parser.py matches a bare list only",
};

/// vLLM 0.33.0's parser for `family` (names from vllm/tool_parsers/__init__.py
/// `_TOOL_PARSERS_TO_REGISTER`); `None` when 0.33.0 registers none (nemotron-v2, minimax-m1,
/// solar-open, …).
pub fn vllm(family: Syntax) -> Option<Profile> {
    use Syntax as S;
    let engine_based = Profile {
        cut: Broken::Half,
        typing: Typing::Schema,
        ..BASE
    };
    Some(match family {
        S::Hermes => Profile {
            parser: "hermes",
            drift_kinds: &[("string_arguments", Broken::ArgsAsString)],
            ..BASE
        },
        S::Qwen3Coder => Profile {
            parser: "qwen3_coder",
            ..engine_based
        },
        S::Glm45 => Profile {
            parser: "glm45",
            unknown: Unknown::Drop,
            ..engine_based
        },
        S::SeedOss => Profile {
            parser: "seed_oss",
            ..engine_based
        },
        S::Gemma4 => Profile {
            parser: "gemma4",
            ..engine_based
        },
        S::FunctionGemma => Profile {
            parser: "functiongemma",
            drops_unquoted: true,
            defect: Some(
                "drops every value not written as an <escape>-quoted string (`city:Paris`, `days:3` \
                 give no argument; functiongemma_tool_parser.py matches `k:<escape>v<escape>` only)",
            ),
            ..engine_based
        },
        S::Llama3 => Profile {
            parser: "llama3_json",
            lead: Lead::Drop,
            finds_in_prose: true,
            drift: Broken::Accept,
            drift_parameters: Broken::Accept,
            drift_kinds: &[("input_for_arguments", Broken::Whole)],
            ..BASE
        },
        S::Pythonic => Profile {
            parser: "pythonic",
            lead: Lead::Whole,
            tail: Tail::Whole,
            missing_end: Broken::Whole,
            forms: &[PYTHON_START],
            ..BASE
        },
        S::Lfm2 => Profile {
            parser: "lfm2",
            tail: Tail::Join,
            forms: &[LFM2_JSON_LIST],
            ..BASE
        },
        S::Mistral => Profile {
            parser: "mistral",
            cut: Broken::Whole,
            unmarked: "[TOOL_CALLS]",
            drift: Broken::NoArgs,
            drift_parameters: Broken::NoArgs,
            drift_kinds: &[("string_arguments", Broken::Accept)],
            glues_call_id: true,
            defect: Some(
                "a `[CALL_ID]` is glued into the call's name (`[TOOL_CALLS]f[CALL_ID]a1b2[ARGS]{…}` \
                 gives a call named `fa1b2`: vllm/parser/mistral.py has no CALL_ID transition)",
            ),
            ..BASE
        },
        S::DeepSeekV3 => Profile {
            parser: "deepseek_v3",
            tail: Tail::Keep,
            cut: Broken::Empty,
            forms: &[DEEPSEEK_V31_FORM_DROPPED],
            ..BASE
        },
        S::DeepSeekV32 => Profile {
            parser: "deepseek_v32",
            strips_think_tags: true,
            ..engine_based
        },
        S::KimiK2 => Profile {
            parser: "kimi_k2",
            cut: Broken::HalfRaw,
            forms: &[KIMI_NO_SECTION],
            ..engine_based
        },
        S::KimiK3 => Profile {
            parser: "kimi_k3",
            cut: Broken::Empty,
            ..BASE
        },
        S::AnthropicXml => Profile {
            parser: "minimax_m2",
            unknown: Unknown::Drop,
            ..engine_based
        },
        S::MiniMaxM3 => Profile {
            parser: "minimax_m3",
            cut: Broken::Half,
            strips_think_tags: true,
            ..BASE
        },
        S::CommandR7b => Profile {
            parser: "cohere_command4",
            lead: Lead::Drop,
            cut: Broken::HalfRaw,
            plain_text_dropped: true,
            empty_args_text: true,
            ..BASE
        },
        S::Apertus => Profile {
            parser: "apertus",
            tail: Tail::Join,
            cut: Broken::Half,
            half_needs_args: true,
            ..BASE
        },
        S::Granite => Profile {
            parser: "granite",
            cut: Broken::HalfRaw,
            half_needs_args: true,
            drift: Broken::Accept,
            drift_parameters: Broken::NoArgs,
            drift_kinds: &[("input_for_arguments", Broken::NoArgs)],
            strips_think_tags: true,
            ..engine_based
        },
        S::GigaChat3 => Profile {
            parser: "gigachat3",
            tail: Tail::Whole,
            ..BASE
        },
        S::MiniCpm5 => Profile {
            parser: "minicpm5",
            lead: Lead::Drop,
            unknown: Unknown::DropOrWhole,
            missing_end: Broken::DropLastOrWhole,
            typing: Typing::Schema,
            ..BASE
        },
        S::MuseGlimmer => Profile {
            parser: "muse_glimmer",
            lead: Lead::Drop,
            typing: Typing::JsonFirst,
            finds_in_prose: true,
            ..BASE
        },
        S::Hy3 => Profile {
            parser: "hy_v3",
            half_needs_args: true,
            ..engine_based
        },
        // gpt-oss: served by HarmonyParser (`openai` names the tool parser), modelled in
        // engines/harmony.rs, not by this profile
        S::GptOss => Profile {
            parser: "openai",
            ..BASE
        },
        _ => return None,
    })
}

/// SGLang 0.5.23's detector for `family` (names from function_call_parser.py
/// `ToolCallParserEnum`); `None` when 0.5.23 registers none.
pub fn sglang(family: Syntax) -> Option<Profile> {
    use Syntax as S;
    let s = Profile {
        unknown: Unknown::Drop,
        cut: Broken::Empty,
        ..BASE
    };
    Some(match family {
        S::Hermes => Profile {
            parser: "hermes",
            drift: Broken::Whole,
            drift_parameters: Broken::Accept,
            drift_kinds: &[
                ("input_for_arguments", Broken::NoArgs),
                ("string_arguments", Broken::ArgsAsString),
                ("function_wrapper", Broken::Empty),
            ],
            cut: Broken::Whole,
            ..s
        },
        S::Qwen3Coder => Profile {
            parser: "qwen3_coder",
            unknown: Unknown::Keep,
            cut: Broken::Half,
            half_needs_args: true,
            missing_end: Broken::DropLast,
            forms: &[QWEN3_NO_WRAPPER],
            ..s
        },
        S::Glm45 => Profile {
            parser: "glm45",
            missing_end: Broken::DropLast,
            ..s
        },
        S::Gemma4 => Profile {
            parser: "gemma4",
            unknown: Unknown::Keep,
            missing_end: Broken::DropLastOrWhole,
            cut: Broken::Whole,
            ..s
        },
        S::Llama3 => Profile {
            parser: "llama3",
            lead: Lead::Whole,
            tail: Tail::Keep,
            cut: Broken::Whole,
            drift: Broken::Accept,
            drift_parameters: Broken::Accept,
            drift_kinds: &[("input_for_arguments", Broken::NoArgs)],
            ..s
        },
        S::Pythonic => Profile {
            parser: "pythonic",
            tail: Tail::Keep,
            missing_end: Broken::Whole,
            cut: Broken::Whole,
            finds_in_prose: true,
            ..s
        },
        S::Lfm2 => Profile {
            parser: "lfm2",
            missing_end: Broken::Empty,
            ..s
        },
        S::Mistral => Profile {
            parser: "mistral",
            forms: &[MISTRAL_NO_SPACE],
            ..s
        },
        S::DeepSeekV3 => Profile {
            parser: "deepseekv3",
            forms: &[DEEPSEEK_V31_FORM],
            ..s
        },
        S::DeepSeekV32 => Profile {
            parser: "deepseekv32",
            missing_end: Broken::Empty,
            ..s
        },
        S::KimiK2 => Profile {
            parser: "kimi_k2",
            unknown: Unknown::Keep,
            forms: &[KIMI_NO_SECTION],
            ..s
        },
        S::KimiK3 => Profile {
            parser: "kimi_k3",
            unknown: Unknown::Keep,
            ..s
        },
        S::GptOss => Profile {
            parser: "gpt-oss",
            tail: Tail::Spaced,
            missing_end: Broken::DropLast,
            drops_analysis: true,
            forms: &[GPT_OSS_NO_START, GPT_OSS_UNTERMINATED],
            ..s
        },
        S::AnthropicXml => Profile {
            parser: "minimax-m2",
            tail: Tail::Keep,
            missing_end: Broken::Whole,
            cut: Broken::Whole,
            forms: &[MINIMAX_NO_WRAPPER, MINIMAX_NO_CLOSER],
            ..s
        },
        S::MiniMaxM3 => Profile {
            parser: "minimax-m3",
            tail: Tail::Keep,
            missing_end: Broken::Whole,
            cut: Broken::Whole,
            ..s
        },
        S::CommandR7b => Profile {
            parser: "cohere_command4",
            cut: Broken::Half,
            ..s
        },
        S::Apertus => Profile {
            parser: "apertus2509",
            tail: Tail::Keep,
            missing_end: Broken::Whole,
            cut: Broken::Whole,
            ..s
        },
        S::GigaChat3 => Profile {
            parser: "gigachat3",
            tail: Tail::Whole,
            cut: Broken::Whole,
            drift_parameters: Broken::Empty,
            drift_kinds: &[("input_for_arguments", Broken::Empty)],
            ..s
        },
        S::MiniCpm5 => Profile {
            parser: "minicpm5",
            tail: Tail::Keep,
            unknown: Unknown::ToContent,
            missing_end: Broken::DropLastToContent,
            cut: Broken::Whole,
            ..s
        },
        S::MuseGlimmer => Profile {
            parser: "muse",
            typing: Typing::JsonFirst,
            ..s
        },
        S::Hy3 => Profile {
            parser: "hunyuan",
            ..s
        },
        _ => return None,
    })
}

/// Dynamo: call markup a parser reads without its outer opener (a misspelled or missing
/// `<tool_call>`, section or block marker), read as if `open` stood right before the first
/// `inner`.
#[derive(Debug, Clone, Copy)]
pub struct Unwrapped {
    /// Where the inner call markup starts (`<function=`, `<invoke name=`, …).
    pub inner: &'static str,
    /// The family's outer opener.
    pub open: &'static str,
    /// The text before `inner` stays content (else it is dropped with the markup).
    pub keeps_before: bool,
    /// Where in the crate, in words.
    pub why: &'static str,
}
