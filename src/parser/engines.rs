//! What each engine's own tool-call parser returns for one raw text: llama.cpp (llama-server
//! build 11434; b11312 alike), vLLM 0.33.0 and SGLang 0.5.23, beside what toolscope reads. Pure.
//!
//! toolscope is tolerant: it accepts drifts (each a [`Repair`](super::Repair)) and keeps what
//! does not parse as content (each [`Malformed`](super::Malformed)). The engines are not, and
//! each parser fails its own way:
//!
//! * **llama.cpp** parses the generation prompt + reply with the PEG parser built for the
//!   template; when the whole text does not match, the final (non-streamed) parse throws
//!   "The model produced output that does not match the expected <format> format"
//!   (common/chat.cpp `common_chat_peg_parse`, build 11434) and llama-server answers HTTP 500.
//!   The parse is lenient at the end of the text (chat.cpp:1471); [`llama`] models each family's
//!   grammar as data and runs it with a port of that parser.
//! * **vLLM 0.33.0** (`ParserManager.get_parser(…).parse(text, request, enable_auto_tools=True)`,
//!   vllm/parser/abstract_parser.py) and **SGLang 0.5.23** (`OpenAIServingChat._process_tool_calls`
//!   → `FunctionCallParser.parse_non_stream`, serving_chat.py:3150) differ per parser: each
//!   (engine, family) has a [`profile::Profile`] saying what it does with text after a call, an
//!   undeclared tool, a missing end marker, a call cut mid-value, a drift, and how it types
//!   arguments. The profiles were read from the released wheels and are checked by running that
//!   code over tests/data/engine_corpus.json (`tests/e2e/engines_real.rs`, `scripts/engines/`).
//!   Both are modelled as configured with `--tool-call-parser NAME` only: reasoning markup is not
//!   split off and stays in `content`. vLLM's gpt-oss is the exception: the server reads it
//!   with `HarmonyParser` over the token ids (and the `openai_gptoss` reasoning parser the
//!   model's config adds), modelled by a port of openai-harmony's parser (`harmony`, which
//!   models Dynamo's `harmony` too).
//!
//! * **Dynamo** (the frontend's `dynamo-parsers` crate 11.0.1): the family's finalize parser
//!   inside the frontend's jail, then the aggregator's re-parse without tools ([`dynamo`];
//!   checked by running the crate, `tests/e2e/engines_dynamo.rs`).
//!
//! A family an engine registers no parser for comes back from it as plain content (vLLM, SGLang:
//! no `--tool-call-parser` of that name; llama.cpp: the template is not recognised and the reply
//! is content).

pub mod dynamo;
mod harmony;
pub mod llama;
pub mod profile;

use serde::Serialize;
use serde_json::Value;

use self::profile::{Broken, Lead, Profile, Tail, Typing, Unknown};
use super::tools::ToolIndex;
use super::{ParseOutput, ParsedCall, Syntax, parse};

/// An inference engine whose tool-call parsing is modelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Engine {
    /// llama.cpp llama-server, build 11434 (common/chat.cpp, common/parsers/*.cpp); b11312 reads
    /// the same except where noted.
    LlamaCpp,
    /// vLLM 0.33.0 (`--tool-call-parser NAME`, vllm/tool_parsers/, vllm/parser/).
    Vllm,
    /// SGLang 0.5.23 (`--tool-call-parser NAME`, sglang/srt/function_call/).
    Sglang,
    /// The Dynamo frontend's parsers: the `dynamo-parsers` crate 11.0.1 (`--dyn-tool-call-parser
    /// NAME`; the jail and the aggregator's re-parse, [`dynamo`]).
    Dynamo,
}

impl Engine {
    /// Every modelled engine.
    pub const ALL: [Engine; 4] = [
        Engine::LlamaCpp,
        Engine::Vllm,
        Engine::Sglang,
        Engine::Dynamo,
    ];

    /// Display name: `llama.cpp`, `vLLM`, `SGLang`.
    pub fn name(self) -> &'static str {
        match self {
            Engine::LlamaCpp => "llama.cpp",
            Engine::Vllm => "vLLM",
            Engine::Sglang => "SGLang",
            Engine::Dynamo => "Dynamo",
        }
    }

    /// The release the verdict describes: `b11434 and b11312`, `0.33.0`, `0.5.23`.
    pub fn release(self) -> &'static str {
        match self {
            Engine::LlamaCpp => "b11434 and b11312",
            Engine::Vllm => "0.33.0",
            Engine::Sglang => "0.5.23",
            Engine::Dynamo => "dynamo-parsers 11.0.1",
        }
    }
}

/// What one engine returns for the text.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Outcome {
    /// The calls (arguments after that engine's typing) and the message's content / reasoning.
    /// `tool_calls` may be empty: the engine dropped the call markup (`content` is what is left).
    Calls {
        content: String,
        reasoning: String,
        tool_calls: Vec<ParsedCall>,
    },
    /// No call: the whole text (markup included) comes back as `content`.
    Content { content: String },
    /// The request fails: HTTP `status` with `message`.
    Error { status: u16, message: String },
}

/// One engine's expected result for a text.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EngineOutcome {
    pub engine: Engine,
    /// The release described ([`Engine::release`]).
    pub release: &'static str,
    /// The engine's parser for the family (`--tool-call-parser` value, or llama.cpp's format
    /// handler); `None` when the release registers none.
    pub parser: Option<&'static str>,
    pub outcome: Outcome,
    /// Why, in words (names the situation that makes the engine differ).
    pub why: String,
    /// When the engine's behaviour here is itself a defect of the engine: what it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub defect: Option<&'static str>,
}

/// The engines' parser names for a family: (llama.cpp handler, vLLM 0.33.0 `--tool-call-parser`,
/// SGLang 0.5.23 `--tool-call-parser`). llama.cpp build 11434 reads most families through its
/// template-derived "auto" PEG parser (common/chat-auto-parser-generator.cpp) and a few through
/// dedicated ones (common/parsers/*.cpp); the vLLM and SGLang names are the ones each release
/// registers ([`profile::vllm`], [`profile::sglang`]); the fourth is Dynamo's
/// `--dyn-tool-call-parser` ([`dynamo::dynamo`]).
pub fn parsers(family: Syntax) -> [Option<&'static str>; 4] {
    [
        llama_parser(family),
        profile::vllm(family).map(|p| p.parser),
        profile::sglang(family).map(|p| p.parser),
        dynamo::dynamo(family).map(|p| p.parser),
    ]
}

fn llama_parser(family: Syntax) -> Option<&'static str> {
    use Syntax as S;
    Some(match family {
        S::Hermes => "auto (<tool_call> JSON)",
        S::Qwen3Coder => "qwen3-coder",
        S::Glm45 => "auto (GLM arg_key)",
        S::SeedOss => "auto (seed:tool_call)",
        S::Gemma4 => "gemma4",
        S::Llama3 => "auto (llama 3.x JSON)",
        S::Lfm2 => "lfm2",
        S::Mistral => "ministral3 / auto",
        S::DeepSeekV3 => "auto (deepseek)",
        S::DeepSeekV32 => "deepseek-v3.2",
        S::KimiK2 => "kimi-k2",
        S::KimiK3 => "kimi-k3",
        S::GptOss => "gpt-oss",
        S::AnthropicXml => "auto (minimax-m2)",
        S::MiniMaxM3 => "minimax-m3",
        S::CommandR7b => "cohere2moe / auto",
        S::Apertus => "auto (apertus)",
        S::Granite => "auto (granite)",
        S::GigaChat3 => "gigachat-v3",
        S::NemotronV2 => "auto (nemotron v2)",
        S::FunctionaryV31 => "auto (functionary v3.1)",
        S::FunctionaryV32 => "functionary-v3-2",
        S::FirefunctionV2 => "auto (firefunction v2)",
        S::CommandRPlus => "auto (command r+)",
        S::Apriel => "auto (apriel)",
        S::MiniCpm5 => "minicpm5",
        S::MuseGlimmer => "muse-glimmer",
        S::MiniMaxM1 => "auto (minimax m1)",
        S::SolarOpen => "auto (solar open)",
        S::Hy3 => "auto (hy3)",
        S::FunctionGemma | S::Pythonic | S::FunctionCall | S::ToolCallFence => return None,
    })
}

/// The format name llama-server build 11434 puts in its parse error for `family`
/// (common/chat.cpp `common_chat_format_name`): `peg-gemma4` (common/parsers/gemma4.cpp),
/// `peg-minimax-m3` (common/parsers/minimax-m3.cpp), else `peg-native` (the template-derived
/// auto parser and every other dedicated parser).
pub fn llama_format_name(family: Syntax) -> &'static str {
    match family {
        Syntax::Gemma4 => "peg-gemma4",
        Syntax::MiniMaxM3 => "peg-minimax-m3",
        _ => "peg-native",
    }
}

/// What toolscope reads in `text` for `family` (strictly, that syntax only) and what each
/// engine's parser for that family returns, in [`Engine::ALL`] order. `tools`: the request's
/// tools (OpenAI/Anthropic array or whole request), used for schema typing and for the
/// engines' checks of undeclared tool names.
///
/// llama.cpp: the family's grammar run by a port of llama.cpp's lenient PEG parser
/// ([`llama::parse`]); families without one keep the generation-prompt rule
/// (`llama_after_prompt`). vLLM / SGLang: the engine's [`Profile`] applied to the situation
/// toolscope's read shows (see [`Situation`]).
pub fn expected(
    family: Syntax,
    text: &str,
    tools: Option<&Value>,
) -> (ParseOutput, Vec<EngineOutcome>) {
    expected_with(family, text, tools, None)
}

/// The generation prompt llama.cpp parses in front of an exchange's reply
/// (`common_chat_params::generation_prompt`; common/chat.cpp:1465 `effective_input =
/// generation_prompt + input`, b11434 and b11312), when the exchange's own is known: for a
/// request that ends with an assistant prefill, llama-server continues that message and the
/// prompt holds it (chat-auto-parser-generator.cpp:45-60: the reasoning block closed before the
/// prefilled content when the template has one), e.g. Qwen3's
/// `<|im_start|>assistant\n<think>\n\n</think>\n\n<think>\n` for the prefill `<think>\n`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LlamaPrompt {
    /// The generation prompt, the prefill included.
    pub text: String,
    /// The request's assistant prefill: the raw text given to [`expected_with`] starts with it
    /// (the text toolscope and the other engines read), the generated part follows. Empty when
    /// none.
    pub prefill: String,
    /// Where it came from: `llama-server /slots`, `server render`, `local render (llama.cpp@N)`.
    pub source: String,
}

/// [`expected`] with the exchange's own generation prompt for llama.cpp (`prompt`), when known:
/// llama.cpp's verdict is then for `prompt.text` + the generated text (`text` without
/// `prompt.prefill`) instead of the family's corpus generation prompt
/// ([`llama::default_prompt`]) + `text`. A prompt that does not start with the family's (another
/// template of the family) or a `text` that does not start with the prefill is not used.
/// toolscope's read and the other engines' are of `text` either way.
pub fn expected_with(
    family: Syntax,
    text: &str,
    tools: Option<&Value>,
    prompt: Option<&LlamaPrompt>,
) -> (ParseOutput, Vec<EngineOutcome>) {
    let ours = parse(text, Some(family), tools);
    let index = ToolIndex::from_value(tools);
    let sit = Situation::of(family, text, &ours, &index);
    let out = Engine::ALL
        .iter()
        .map(|&engine| {
            let parser = match engine {
                Engine::LlamaCpp => llama_parser(family),
                Engine::Vllm => profile::vllm(family).map(|p| p.parser),
                Engine::Sglang => profile::sglang(family).map(|p| p.parser),
                Engine::Dynamo => dynamo::dynamo(family).map(|p| p.parser),
            };
            let prof = match engine {
                Engine::LlamaCpp => None,
                Engine::Vllm => profile::vllm(family),
                Engine::Sglang => profile::sglang(family),
                Engine::Dynamo => dynamo::dynamo(family),
            };
            let (outcome, why, defect) = match (engine, parser, prof) {
                (Engine::Dynamo, _, p) => dynamo::verdict(family, text, tools, p.as_ref()),
                // vLLM serves gpt-oss through HarmonyParser, not the `openai` tool parser
                (Engine::Vllm, Some(_), _) if family == Syntax::GptOss => {
                    let (o, why) = harmony::vllm(text, tools);
                    (o, why, None)
                }
                (_, None, _) => (
                    whole(text),
                    format!(
                        "{} {} has no parser for {}: the text is returned as content",
                        engine.name(),
                        engine.release(),
                        family.name()
                    ),
                    None,
                ),
                (Engine::LlamaCpp, Some(_), _) => llama_verdict(family, text, tools, prompt),
                (_, Some(_), Some(p)) => {
                    let (o, why) = by_profile(family, text, &ours, &sit, &p, &index, tools);
                    (o, why, p.defect)
                }
                (_, Some(_), None) => unreachable!("a parser name comes from its profile"),
            };
            EngineOutcome {
                engine,
                release: engine.release(),
                parser,
                outcome,
                why,
                defect,
            }
        })
        .collect();
    (ours, out)
}

/// The whole text as content, without the marker the parser strips ([`Profile::unmarked`]).
fn whole_unmarked(text: &str, p: &Profile) -> Outcome {
    if p.unmarked.is_empty() {
        return whole(text);
    }
    Outcome::Content {
        content: text.replacen(p.unmarked, "", 1).trim().to_string(),
    }
}

fn whole(text: &str) -> Outcome {
    Outcome::Content {
        content: text.trim().to_string(),
    }
}

/// `before` / `after` the call spans without the family's block wrapper around the calls (a
/// call's span covers the call itself; `<minimax:tool_call>`, ` to=N<|message|><atem:function_calls>`,
/// … open the block around it).
fn unwrap_block<'t>(family: Syntax, before: &'t str, after: &'t str) -> (&'t str, &'t str) {
    let (open, close): (&[&str], &[&str]) = match family {
        Syntax::AnthropicXml => (
            &["<minimax:tool_call>", "<function_calls>"],
            &["</minimax:tool_call>", "</function_calls>"],
        ),
        Syntax::MuseGlimmer => (&["<atem:function_calls>"], &["</atem:function_calls>"]),
        _ => (&[], &[]),
    };
    let mut b = before;
    let mut stripped = true;
    while stripped {
        stripped = false;
        for o in open {
            if let Some(x) = b.trim_end().strip_suffix(o) {
                b = x;
                stripped = true;
            }
        }
    }
    if family == Syntax::MuseGlimmer
        && b.ends_with("<|message|>")
        && let Some(i) = b.rfind(" to=")
    {
        b = &b[..i];
    }
    let mut a = after;
    let mut stripped = true;
    while stripped {
        stripped = false;
        for c in close {
            if let Some(x) = a.trim_start().strip_prefix(c) {
                a = x;
                stripped = true;
            }
        }
    }
    (b, a)
}

/// What toolscope's strict read says about a text, in the terms the engines' behaviour depends
/// on.
#[derive(Debug, Clone, Default)]
pub struct Situation {
    /// Text before the first call's markup (raw; reasoning markup included).
    pub before: String,
    /// Text after the last call's markup.
    pub after: String,
    /// The text ended inside a block that still parses (`missing_end_marker` repair).
    pub missing_end: bool,
    /// A malformed block runs to the end of the text (the generation was cut inside a call).
    pub cut: Option<usize>,
    /// Another malformed block (offset).
    pub malformed: Option<usize>,
    /// A drift toolscope repaired (kind), other than a missing end marker or a value kept as a
    /// string.
    pub drift: Option<String>,
    /// Indices of calls to tools the request did not declare (empty without tools).
    pub unknown: Vec<usize>,
}

impl Situation {
    /// Reads the situation from toolscope's strict read of `text`.
    pub fn of(family: Syntax, text: &str, ours: &ParseOutput, tools: &ToolIndex) -> Situation {
        let mut s = Situation::default();
        let spans: Vec<(usize, usize)> = ours.tool_calls.iter().filter_map(|c| c.span).collect();
        if let (Some(first), Some(last)) = (spans.first(), spans.last()) {
            let (before, after) = unwrap_block(
                family,
                text.get(..first.0).unwrap_or(""),
                text.get(last.1..).unwrap_or(""),
            );
            s.before = before.to_string();
            s.after = after.to_string();
        }
        let end = text.trim_end().len();
        for m in &ours.malformed {
            if m.offset + m.text.trim_end().len() >= end {
                s.cut.get_or_insert(m.offset);
            } else {
                s.malformed.get_or_insert(m.offset);
            }
        }
        for r in &ours.repairs {
            match r.kind.as_str() {
                "missing_end_marker" => s.missing_end = true,
                "degenerated_to_string" => {}
                k => {
                    s.drift.get_or_insert_with(|| k.to_string());
                }
            }
        }
        if !tools.is_empty() {
            s.unknown = ours
                .tool_calls
                .iter()
                .enumerate()
                .filter(|(_, c)| !tools.knows(&c.name))
                .map(|(i, _)| i)
                .collect();
        }
        s
    }
}

/// What llama.cpp parses after the family's generation prompt ([`llama::default_prompt`]):
/// the rest of the exchange's own prompt, then the generated text (`text` without the
/// prefill); `None` when `prompt` cannot be used (see [`expected_with`]).
fn after_default_prompt(family: Syntax, text: &str, prompt: &LlamaPrompt) -> Option<String> {
    let rest = prompt.text.strip_prefix(llama::default_prompt(family)?)?;
    let generated = text.strip_prefix(prompt.prefill.as_str())?;
    Some(format!("{rest}{generated}"))
}

/// llama.cpp's verdict: the family's grammar, else the generation-prompt rule, over what
/// follows the family's generation prompt (the exchange's own prompt's rest when known).
fn llama_verdict(
    family: Syntax,
    text: &str,
    tools: Option<&Value>,
    prompt: Option<&LlamaPrompt>,
) -> (Outcome, String, Option<&'static str>) {
    let own = prompt.and_then(|p| Some((after_default_prompt(family, text, p)?, p)));
    let input = own.as_ref().map_or(text, |(t, _)| t.as_str());
    let (outcome, why, defect) = llama_by_grammar(family, input, tools)
        .unwrap_or_else(|| llama_after_prompt(family, input, tools));
    let why = match own {
        Some((_, p))
            if p.text
                != format!(
                    "{}{}",
                    llama::default_prompt(family).unwrap_or(""),
                    p.prefill
                ) =>
        {
            format!(
                "{why}; after the exchange's generation prompt {:?} ({})",
                p.text, p.source
            )
        }
        _ => why,
    };
    (outcome, why, defect)
}

/// llama.cpp's verdict from the family's grammar ([`llama::parse`]); `None` when the family has
/// no modelled grammar.
fn llama_by_grammar(
    family: Syntax,
    text: &str,
    tools: Option<&Value>,
) -> Option<(Outcome, String, Option<&'static str>)> {
    let mut list = llama::tools_of(tools);
    if list.is_empty() {
        list = llama::tools_from_calls(&parse(text, Some(family), None).tool_calls);
    }
    let parser = llama_parser(family).unwrap_or("peg-native");
    Some(match llama::parse(family, text, &list)? {
        Err(()) => (
            Outcome::Error {
                status: 500,
                message: format!(
                    "The model produced output that does not match the expected {} format",
                    llama_format_name(family)
                ),
            },
            format!("its {parser} grammar does not match the prompt + reply: HTTP 500"),
            None,
        ),
        Ok(m) => {
            let calls: Vec<ParsedCall> = m
                .calls
                .iter()
                .map(|(name, args)| ParsedCall {
                    name: name.clone(),
                    arguments: serde_json::from_str(args)
                        .unwrap_or_else(|_| Value::String(args.clone())),
                    syntax: Some(family.name().to_string()),
                    span: None,
                    id: None,
                })
                .collect();
            let why = format!("read by its {parser} grammar (lenient at the text's end)");
            let outcome = if calls.is_empty() && m.reasoning.trim().is_empty() {
                Outcome::Content {
                    content: m.content.trim().to_string(),
                }
            } else {
                Outcome::Calls {
                    content: m.content.trim().to_string(),
                    reasoning: m.reasoning.trim().to_string(),
                    tool_calls: calls,
                }
            };
            (outcome, why, None)
        }
    })
}

/// The marker that closes the reasoning block the corpus template's generation prompt opens, for
/// the families whose template ends its generation prompt inside one: MiniMax-M2
/// (`]~b]ai\n<think>\n`), DeepSeek R1 (`<｜Assistant｜><think>\n`), MiniCPM5 and Nemotron v2
/// (`…<think>\n`; llama.cpp renders with `enable_thinking` true), Kimi K3
/// (`<|open|>think<|sep|>`). llama.cpp parses `generation_prompt + reply`
/// (common/chat.cpp:1465, b11434 and b11312), so the reply starts inside reasoning. Measured
/// with scripts/engines/llama/parse.cpp on both releases.
fn llama_prompt_reasoning_close(family: Syntax) -> Option<&'static str> {
    match family {
        Syntax::AnthropicXml | Syntax::DeepSeekV3 | Syntax::MiniCpm5 | Syntax::NemotronV2 => {
            Some("</think>")
        }
        Syntax::KimiK3 => Some("<|close|>think<|sep|>"),
        _ => None,
    }
}

/// llama.cpp's verdict (b11434 and b11312) with the generation prompt in front of the reply
/// (common/chat.cpp:1465 `effective_input = generation_prompt + input`). When the prompt opens
/// reasoning ([`llama_prompt_reasoning_close`]), everything up to the first close marker is
/// `reasoning_content` — an opening marker in the reply stays reasoning text — and only the
/// rest is read for content and calls; with no close marker the whole reply is reasoning, no
/// call and empty content (a call written inside the reasoning is not one).
fn llama_after_prompt(
    family: Syntax,
    text: &str,
    tools: Option<&Value>,
) -> (Outcome, String, Option<&'static str>) {
    let index = ToolIndex::from_value(tools);
    let Some(close) = llama_prompt_reasoning_close(family) else {
        let ours = parse(text, Some(family), tools);
        let sit = Situation::of(family, text, &ours, &index);
        return llama(family, text, &ours, &sit);
    };
    let Some(at) = text.find(close) else {
        return (
            Outcome::Calls {
                content: String::new(),
                reasoning: text.trim().to_string(),
                tool_calls: Vec::new(),
            },
            format!(
                "llama.cpp {} parses the generation prompt + reply: the prompt opens reasoning \
                 and the reply never closes it (no `{close}`), so all of it is reasoning_content",
                Engine::LlamaCpp.release()
            ),
            None,
        );
    };
    let reasoning = text[..at].trim().to_string();
    let rest = &text[at + close.len()..];
    let ours = parse(rest, Some(family), tools);
    let sit = Situation::of(family, rest, &ours, &index);
    let (outcome, why, defect) = llama(family, rest, &ours, &sit);
    let outcome = match outcome {
        Outcome::Calls {
            content,
            tool_calls,
            ..
        } => Outcome::Calls {
            content,
            reasoning,
            tool_calls,
        },
        Outcome::Content { content } => Outcome::Calls {
            content,
            reasoning,
            tool_calls: Vec::new(),
        },
        e => e,
    };
    (
        outcome,
        format!(
            "llama.cpp {}: the generation prompt opens reasoning, closed by `{close}` at byte \
             {at}; after it, {why}",
            Engine::LlamaCpp.release()
        ),
        defect,
    )
}

fn llama(
    family: Syntax,
    text: &str,
    ours: &ParseOutput,
    sit: &Situation,
) -> (Outcome, String, Option<&'static str>) {
    // b11434 and b11312 build a peg-native parser for these templates (Granite 3.3, Hunyuan 3,
    // Solar Open in the corpus) that reads no tool-call syntax: every reply is content, with
    // the generation prompt's reasoning markers stripped. Measured with llama.cpp's own
    // common_chat_templates_apply + common_chat_parse (scripts/engines/llama/parse.cpp,
    // tests/e2e/engines_llama.rs).
    if matches!(family, Syntax::Granite | Syntax::Hy3 | Syntax::SolarOpen) {
        return (
            whole(text),
            "llama.cpp's parser for this template reads no tool calls: the reply is content"
                .to_string(),
            None,
        );
    }
    let problem = sit
        .drift
        .as_ref()
        .map(|k| format!("drift `{k}`"))
        .or(sit.missing_end.then(|| "a missing end marker".to_string()))
        .or(ours.malformed.first().map(|m| {
            format!(
                "malformed {} block at byte {}: {}",
                m.syntax, m.offset, m.message
            )
        }))
        .or(ours
            .repairs
            .first()
            .map(|r| format!("drift `{}` at byte {}", r.kind, r.offset)));
    match problem {
        None => (
            Outcome::Calls {
                content: ours.content.clone(),
                reasoning: ours.reasoning.clone(),
                tool_calls: ours.tool_calls.clone(),
            },
            "the text is in the family's exact format".to_string(),
            None,
        ),
        Some(p) => (
            Outcome::Error {
                status: 500,
                message: format!(
                    "The model produced output that does not match the expected {} format",
                    llama_format_name(family)
                ),
            },
            format!("the PEG parser rejects the whole reply: {p}"),
            None,
        ),
    }
}

/// Applies `p` to the situation.
fn by_profile(
    family: Syntax,
    text: &str,
    ours: &ParseOutput,
    sit: &Situation,
    p: &Profile,
    index: &ToolIndex,
    tools: Option<&Value>,
) -> (Outcome, String) {
    let a = Apply {
        family,
        text,
        ours,
        sit,
        p,
        index,
    };
    if let Some(f) = p.forms.iter().find(|f| (f.matches)(text)) {
        return a.broken(f.then, f.why);
    }
    if ours.tool_calls.is_empty() {
        return a.without_calls(tools);
    }
    if let Some(k) = &sit.drift {
        let b = match k.as_str() {
            "parameters_for_arguments" => p.drift_parameters,
            kind => p
                .drift_kinds
                .iter()
                .find(|(k, _)| *k == kind)
                .map_or(p.drift, |(_, b)| *b),
        };
        if b != Broken::Accept {
            return a.broken(b, &format!("drift `{k}`"));
        }
    }
    if sit.missing_end && p.missing_end != Broken::Accept {
        return a.broken(p.missing_end, "the text ends before the block's end marker");
    }
    a.message(
        &sit.before,
        &sit.after,
        ours.tool_calls.clone(),
        &sit.unknown,
    )
}

/// No call returned: the text before the call markup, trimmed, is the content.
fn no_call(before: &str) -> Outcome {
    Outcome::Calls {
        content: before.trim().to_string(),
        reasoning: String::new(),
        tool_calls: Vec::new(),
    }
}

/// One profile applied to one text (what [`by_profile`]'s steps share).
struct Apply<'a> {
    family: Syntax,
    text: &'a str,
    ours: &'a ParseOutput,
    sit: &'a Situation,
    p: &'a Profile,
    index: &'a ToolIndex,
}

impl Apply<'_> {
    /// [`message`] under this profile, for this text.
    fn message(
        &self,
        before: &str,
        after: &str,
        calls: Vec<ParsedCall>,
        unknown: &[usize],
    ) -> (Outcome, String) {
        message(
            self.p,
            self.family,
            self.text,
            before,
            after,
            calls,
            unknown,
            self.index,
        )
    }

    /// toolscope read no call: calls before text the grammar does not allow, a call in the
    /// prose, a cut or malformed block (the profile's verdict on it), or plain content.
    fn without_calls(&self, tools: Option<&Value>) -> (Outcome, String) {
        let (family, text, sit, p) = (self.family, self.text, self.sit, self.p);
        // calls followed by text the family's grammar does not allow (toolscope: one malformed
        // block to the end): the engines read the calls and treat the rest as trailing text
        if sit.cut.is_some()
            && let Some((before, calls, after)) = prefix_read(family, text, tools)
        {
            let unknown = unknown_of(&calls, self.index);
            return self.message(&before, &after, calls, &unknown);
        }
        if p.finds_in_prose
            && let Some((before, calls, after)) = in_prose(family, text, tools)
        {
            let unknown = unknown_of(&calls, self.index);
            let (o, why) = self.message(&before, &after, calls, &unknown);
            return (o, format!("a call inside the prose is found; {why}"));
        }
        if sit.cut.is_some() {
            return self.broken(p.cut, "the text ends inside a call");
        }
        if sit.malformed.is_some() {
            return self.broken(p.malformed, "a call block does not parse");
        }
        if p.plain_text_dropped {
            let kept = if text.contains("<|START_RESPONSE|>") || text.contains("<|START_TEXT|>") {
                self.ours.content.clone()
            } else {
                String::new()
            };
            return (
                no_call(&kept),
                "text outside the response wrapper is not content".to_string(),
            );
        }
        (
            whole(text),
            "no call in the family's syntax: the text is content".to_string(),
        )
    }

    /// What the engine returns for a reply it handles as `b`; `what` says what went wrong.
    fn broken(&self, b: Broken, what: &str) -> (Outcome, String) {
        let sit = self.sit;
        match b {
            Broken::Whole => (
                whole_unmarked(self.text, self.p),
                format!("{what}: the parser fails and the text is returned as content"),
            ),
            Broken::Empty => (
                no_call(&sit_cut_before(self.family, self.text, sit)),
                format!("{what}: the call markup is dropped, no call is returned"),
            ),
            Broken::Half | Broken::HalfRaw => self.half_read(b == Broken::HalfRaw, what),
            Broken::NoArgs => {
                let calls = self
                    .ours
                    .tool_calls
                    .iter()
                    .cloned()
                    .map(|mut c| {
                        c.arguments = Value::Object(Default::default());
                        c
                    })
                    .collect();
                let (o, why) = self.message(&sit.before, &sit.after, calls, &sit.unknown);
                (
                    o,
                    format!("{what}: the call is read without its arguments; {why}"),
                )
            }
            Broken::DropLast | Broken::DropLastOrWhole | Broken::DropLastToContent => {
                self.drop_last(b, what)
            }
            Broken::ArgsAsString => self.args_as_string(what),
            Broken::Accept => {
                let (o, why) = self.message(
                    &sit.before,
                    &sit.after,
                    self.ours.tool_calls.clone(),
                    &sit.unknown,
                );
                (o, format!("{what}: accepted; {why}"))
            }
        }
    }

    /// [`Broken::Half`] / [`Broken::HalfRaw`]: the open call closed and returned half-read,
    /// or no call when there is nothing to read.
    fn half_read(&self, raw: bool, what: &str) -> (Outcome, String) {
        let before = sit_cut_before(self.family, self.text, self.sit);
        match half_read(
            self.family,
            self.text,
            self.sit,
            self.index,
            raw,
            self.p.half_needs_args,
        ) {
            Some(call) => (
                self.message(&before, "", vec![call], &[]).0,
                format!("{what}: the open call is closed and returned half-read"),
            ),
            None => (
                no_call(&before),
                format!("{what}: the call markup is dropped, no call is returned"),
            ),
        }
    }

    /// [`Broken::DropLast`] and its variants: the unterminated last call dropped (its markup
    /// kept as content for `DropLastToContent`; the whole text as content when it was the only
    /// call, except for `DropLast`).
    fn drop_last(&self, b: Broken, what: &str) -> (Outcome, String) {
        let (text, sit) = (self.text, self.sit);
        let mut calls = self.ours.tool_calls.clone();
        let last = calls.pop();
        if calls.is_empty() && b != Broken::DropLast {
            return (
                whole(text),
                format!("{what}: the parser fails and the text is returned as content"),
            );
        }
        let markup = match (b, last.and_then(|c| c.span)) {
            (Broken::DropLastToContent, Some((start, _))) => {
                let prev_end = calls.last().and_then(|c| c.span).map_or(start, |s| s.1);
                text.get(prev_end..).unwrap_or("").to_string()
            }
            _ => String::new(),
        };
        let keep_unknown: Vec<usize> = sit
            .unknown
            .iter()
            .copied()
            .filter(|&i| i < calls.len())
            .collect();
        let (mut o, why) = self.message(&sit.before, "", calls, &keep_unknown);
        if let Outcome::Calls { content, .. } = &mut o
            && !markup.trim().is_empty()
        {
            content.push_str(markup.trim());
        }
        (
            o,
            format!("{what}: the unterminated last call is dropped; {why}"),
        )
    }

    /// [`Broken::ArgsAsString`]: each call's arguments as the string the model wrote.
    fn args_as_string(&self, what: &str) -> (Outcome, String) {
        let (text, sit) = (self.text, self.sit);
        let calls = self
            .ours
            .tool_calls
            .iter()
            .cloned()
            .map(|mut c| {
                let written = c
                    .span
                    .and_then(|(a, b)| text.get(a..b))
                    .and_then(arguments_string);
                c.arguments = Value::String(written.unwrap_or(c.arguments.to_string()));
                c
            })
            .collect();
        let (o, why) = self.message(&sit.before, &sit.after, calls, &sit.unknown);
        (
            o,
            format!("{what}: the arguments string is returned undecoded; {why}"),
        )
    }
}

fn unknown_of(calls: &[ParsedCall], index: &ToolIndex) -> Vec<usize> {
    if index.is_empty() {
        return Vec::new();
    }
    calls
        .iter()
        .enumerate()
        .filter(|(_, c)| !index.knows(&c.name))
        .map(|(i, _)| i)
        .collect()
}

/// The message an engine builds from calls read with `before` / `after` around them.
#[allow(clippy::too_many_arguments)]
fn message(
    p: &Profile,
    family: Syntax,
    text: &str,
    before: &str,
    after: &str,
    calls: Vec<ParsedCall>,
    unknown: &[usize],
    index: &ToolIndex,
) -> (Outcome, String) {
    if p.lead == Lead::Whole && !before.is_empty() {
        return (
            whole(text),
            "text before the call: the parser reads a call only when the reply starts with it"
                .to_string(),
        );
    }
    let trimmed_after = after.trim();
    let mut content = match p.lead {
        Lead::Drop => String::new(),
        _ => before.to_string(),
    };
    if p.drops_analysis {
        content = drop_analysis(&content);
    }
    if p.strips_think_tags {
        for tag in ["<think>", "</think>", "<mm:think>", "</mm:think>"] {
            content = content.replace(tag, "");
        }
    }
    let mut why = "the calls are read".to_string();
    if !trimmed_after.is_empty() || (p.lead == Lead::Whole && !after.is_empty()) {
        match p.tail {
            Tail::Drop => why.push_str("; the text after the last call is dropped"),
            Tail::Keep => content.push_str(after),
            Tail::Join => content = format!("{}\n{}", content.trim(), trimmed_after),
            Tail::Spaced => content = format!("{content} {after}"),
            Tail::Whole => {
                return (
                    whole(text),
                    "text after the call: the parser rejects the reply".to_string(),
                );
            }
        }
    }
    let mut calls = calls;
    if !unknown.is_empty() {
        match p.unknown {
            Unknown::Keep => {}
            Unknown::Whole => {
                return (
                    whole(text),
                    "a call to an undeclared tool: the text is returned as content".to_string(),
                );
            }
            Unknown::Drop | Unknown::DropOrWhole | Unknown::ToContent => {
                let mut markup = String::new();
                calls = calls
                    .into_iter()
                    .enumerate()
                    .filter(|(i, c)| {
                        let known = !unknown.contains(i);
                        if !known && let Some((a, b)) = c.span {
                            markup.push_str(text.get(a..b).unwrap_or(""));
                        }
                        known
                    })
                    .map(|(_, c)| c)
                    .collect();
                if calls.is_empty() && p.unknown != Unknown::Drop {
                    return (
                        whole(text),
                        "only calls to undeclared tools: the text is returned as content"
                            .to_string(),
                    );
                }
                if p.unknown == Unknown::ToContent {
                    content.push_str(&markup);
                    why.push_str("; calls to undeclared tools are returned as content");
                } else {
                    why.push_str("; calls to undeclared tools are dropped with their markup");
                }
            }
        }
    }
    let calls = calls
        .into_iter()
        .map(|mut c| {
            if p.glues_call_id
                && let Some(id) = &c.id
                && text.contains("[CALL_ID]")
            {
                c.name = format!("{}{id}", c.name);
            }
            if p.empty_args_text && c.arguments.as_object().is_some_and(|o| o.is_empty()) {
                c.arguments = Value::String(String::new());
            }
            if p.drops_unquoted
                && let Value::Object(args) = &mut c.arguments
            {
                args.retain(|k, _| {
                    text.contains(&format!("{{{k}:<escape>"))
                        || text.contains(&format!(",{k}:<escape>"))
                });
            }
            retype(c, p.typing, index)
        })
        .collect();
    let _ = family;
    (
        Outcome::Calls {
            content: content.trim().to_string(),
            reasoning: String::new(),
            tool_calls: calls,
        },
        why,
    )
}

/// `s` without harmony `analysis` messages (`<|channel|>analysis<|message|>…<|end|>`, with or
/// without `<|start|>assistant` before).
fn drop_analysis(s: &str) -> String {
    let mut out = s.to_string();
    while let Some(i) = out.find("<|channel|>analysis<|message|>") {
        let start = out[..i]
            .strip_suffix("<|start|>assistant")
            .map_or(i, |x| x.len());
        let end = out[i..]
            .find("<|end|>")
            .map_or(out.len(), |e| i + e + "<|end|>".len());
        out.replace_range(start..end, "");
    }
    out
}

/// The calls at the start of a block followed by text the family's grammar does not allow:
/// the longest prefix ending in `]` or `}` that toolscope reads with no malformed block.
/// Returns (text before, calls, text after).
fn prefix_read(
    family: Syntax,
    text: &str,
    tools: Option<&Value>,
) -> Option<(String, Vec<ParsedCall>, String)> {
    let ends: Vec<usize> = text
        .char_indices()
        .filter(|(_, c)| *c == ']' || *c == '}')
        .map(|(i, _)| i + 1)
        .collect();
    for &end in ends.iter().rev().take(32) {
        let read = parse(&text[..end], Some(family), tools);
        if !read.tool_calls.is_empty() && read.malformed.is_empty() && read.repairs.is_empty() {
            let first = read
                .tool_calls
                .first()
                .and_then(|c| c.span)
                .map_or(0, |s| s.0);
            let (before, _) = unwrap_block(family, &text[..first], "");
            return Some((before.to_string(), read.tool_calls, text[end..].to_string()));
        }
    }
    None
}

/// The text before a cut call block.
fn sit_cut_before(family: Syntax, text: &str, sit: &Situation) -> String {
    match sit.cut.or(sit.malformed) {
        Some(at) => unwrap_block(family, text.get(..at).unwrap_or(""), "")
            .0
            .to_string(),
        None => sit.before.clone(),
    }
}

/// The call a cut block opened, half-read: the first declared tool name written in the block,
/// and the argument text from the first `{` after it (JSON when it parses; else the text when
/// `raw`, else `{}`).
fn half_read(
    family: Syntax,
    text: &str,
    sit: &Situation,
    index: &ToolIndex,
    raw: bool,
    needs_args: bool,
) -> Option<ParsedCall> {
    let at = sit.cut.or(sit.malformed)?;
    let block = text.get(at..)?;
    let (i, name) = index
        .names()
        .filter_map(|n| block.find(n).map(|i| (i, n)))
        .min()?;
    let rest = &block[i + name.len()..];
    // nothing written after the name (a closing quote at most)
    if needs_args && rest.trim_start_matches(['"', '\'']).trim().is_empty() {
        return None;
    }
    let arguments = match rest.find('{') {
        Some(j) => {
            let args = &rest[j..];
            let args = args[..args.find("<|").unwrap_or(args.len())].trim_end();
            match serde_json::from_str::<Value>(args) {
                Ok(v) => v,
                Err(_) if raw => Value::String(args.to_string()),
                Err(_) => close_json(args).unwrap_or(Value::Object(Default::default())),
            }
        }
        None => Value::Object(Default::default()),
    };
    Some(ParsedCall {
        name: name.to_string(),
        arguments,
        syntax: Some(family.name().to_string()),
        span: None,
        id: None,
    })
}

/// The JSON string written as `"arguments": "…"` in `call`, decoded.
fn arguments_string(call: &str) -> Option<String> {
    let i = call.find("\"arguments\"")? + "\"arguments\"".len();
    let rest = call[i..].trim_start().strip_prefix(':')?.trim_start();
    let mut it = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
    match it.next()? {
        Ok(Value::String(s)) => Some(s),
        _ => None,
    }
}

/// `s`, a JSON object cut short, closed: an open string is ended, open objects and arrays are
/// closed (`{"city": "Par` → `{"city": "Par"}`); `None` when that does not parse.
fn close_json(s: &str) -> Option<Value> {
    let mut stack = Vec::new();
    let (mut in_str, mut esc) = (false, false);
    for c in s.chars() {
        if in_str {
            match (esc, c) {
                (true, _) => esc = false,
                (false, '\\') => esc = true,
                (false, '"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_str = true,
            '{' => stack.push('}'),
            '[' => stack.push(']'),
            '}' | ']' => {
                stack.pop();
            }
            _ => {}
        }
    }
    let mut out = s.to_string();
    if in_str {
        out.push('"');
    }
    while let Some(c) = stack.pop() {
        out.push(c);
    }
    serde_json::from_str(&out).ok()
}

/// A call found inside prose by an engine that scans for it (vLLM `llama3_json`, SGLang
/// `pythonic`, vLLM `muse_glimmer`): the text from the first `{` (llama3), `[` (pythonic) or
/// ` to=` (Muse) read in the family's syntax. Returns (text before, calls, text after).
fn in_prose(
    family: Syntax,
    text: &str,
    tools: Option<&Value>,
) -> Option<(String, Vec<ParsedCall>, String)> {
    let open = match family {
        Syntax::Llama3 => "{",
        Syntax::Pythonic => "[",
        Syntax::MuseGlimmer => " to=",
        _ => return None,
    };
    // Candidate ends, the same for every opener: the positions right after a `}`, `]` or `>`
    // (ASCII, so always char boundaries), ascending; an opener at `at` tries the 64 last ones
    // past it, longest first. Computed once, so each opener costs no scan of the rest.
    let ends: Vec<usize> = text
        .bytes()
        .enumerate()
        .filter(|(_, b)| matches!(b, b'}' | b']' | b'>'))
        .map(|(i, _)| i + 1)
        .collect();
    // llama3_json takes an object with "name" and "parameters" / "arguments" only: where each
    // key stands, so a candidate without one is skipped without searching it
    let keys: Vec<(Vec<usize>, usize)> = if family == Syntax::Llama3 {
        ["\"parameters\"", "\"arguments\""]
            .iter()
            .map(|k| (text.match_indices(k).map(|(i, _)| i).collect(), k.len()))
            .collect()
    } else {
        Vec::new()
    };
    // `text[at..end]` holds a key: its first occurrence at or after `at` ends by `end`
    let has_key = |at: usize, end: usize| {
        keys.iter().any(|(starts, len)| {
            let i = starts.partition_point(|&s| s < at);
            starts.get(i).is_some_and(|&s| s + len <= end)
        })
    };
    let mut from = 0;
    while let Some(i) = text[from..].find(open) {
        let at = from + i;
        for &end in ends.iter().rev().take_while(|&&e| e > at).take(64) {
            let sub = &text[at..end];
            if family == Syntax::Llama3 && !has_key(at, end) {
                continue;
            }
            let read = parse(sub, Some(family), tools);
            if !read.tool_calls.is_empty() && read.malformed.is_empty() && read.repairs.is_empty() {
                return Some((
                    text[..at].to_string(),
                    read.tool_calls,
                    text[end..].to_string(),
                ));
            }
        }
        from = at + open.len();
    }
    None
}

/// `call`'s arguments retyped by the tool's schema when the engine does ([`Typing::Schema`]).
fn retype(mut call: ParsedCall, typing: Typing, index: &ToolIndex) -> ParsedCall {
    if typing == Typing::JsonFirst {
        if let Value::Object(args) = &mut call.arguments {
            for v in args.values_mut() {
                if let Value::String(s) = &*v
                    && let Ok(j) = serde_json::from_str::<Value>(s.trim())
                    && !j.is_string()
                {
                    *v = j;
                }
            }
        }
        return call;
    }
    if typing != Typing::Schema {
        return call;
    }
    if let Value::Object(args) = &mut call.arguments {
        for (k, v) in args.iter_mut() {
            let Some(schema) = index.param(&call.name, k) else {
                continue;
            };
            let types = crate::schema::types::allowed_types(schema);
            if types.is_empty() {
                continue;
            }
            let fits = |v: &Value| match v {
                Value::String(_) => types.contains(&"string"),
                Value::Number(n) => {
                    types.contains(&"number") || (types.contains(&"integer") && n.is_i64())
                }
                Value::Bool(_) => types.contains(&"boolean"),
                Value::Null => types.contains(&"null"),
                Value::Array(_) => types.contains(&"array"),
                Value::Object(_) => types.contains(&"object"),
            };
            if fits(v) {
                continue;
            }
            let new = match &*v {
                Value::String(s) => {
                    let t = s.trim();
                    if types.contains(&"integer")
                        && let Ok(i) = t.parse::<i64>()
                    {
                        Some(Value::from(i))
                    } else if types.contains(&"number")
                        && let Ok(f) = t.parse::<f64>()
                    {
                        serde_json::Number::from_f64(f).map(Value::Number)
                    } else if types.contains(&"boolean") && (t == "true" || t == "false") {
                        Some(Value::Bool(t == "true"))
                    } else {
                        None
                    }
                }
                Value::Number(n) if types.contains(&"string") => Some(Value::String(n.to_string())),
                Value::Bool(b) if types.contains(&"string") => Some(Value::String(b.to_string())),
                _ => None,
            };
            if let Some(n) = new {
                *v = n;
            }
        }
    }
    call
}

impl Outcome {
    /// One line on the outcome, as `parse --engines` and the Replay pane's engines view print
    /// it: `2 call(s): get_weather, get_time`, `content only (812 bytes, markup kept)`,
    /// `HTTP 500: The model produced output that does not match …`.
    pub fn summary(&self) -> String {
        match self {
            Outcome::Calls { tool_calls, .. } => calls_summary(tool_calls),
            Outcome::Content { content } => {
                format!("content only ({} bytes, markup kept)", content.len())
            }
            Outcome::Error { status, message } => format!("HTTP {status}: {message}"),
        }
    }
}

impl Outcome {
    /// The message fields as a client sees them: (calls, content, reasoning); an error has none.
    fn fields(&self) -> Option<(&[ParsedCall], &str, &str)> {
        match self {
            Outcome::Calls {
                content,
                reasoning,
                tool_calls,
            } => Some((tool_calls, content.trim(), reasoning.trim())),
            Outcome::Content { content } => Some((&[], content.trim(), "")),
            Outcome::Error { .. } => None,
        }
    }

    /// The outcome in lines, as `parse --engines` and the Replay pane's engines view print it
    /// under the engine's name: one per call (`get_weather({"city":"Paris"})`, arguments after
    /// the engine's typing, cut to `width` characters), then `content "…"` and `reasoning "…"`
    /// when not empty (quoted with escapes, cut to `width`), or the error.
    pub fn detail(&self, width: usize) -> Vec<String> {
        let cut = |s: &str| crate::parser::trace::cut(s, width).to_string();
        match self.fields() {
            None => vec![self.summary()],
            Some((calls, content, reasoning)) => {
                let mut out: Vec<String> = calls
                    .iter()
                    .map(|c| format!("{}({})", c.name, cut(&c.arguments.to_string())))
                    .collect();
                if calls.is_empty() {
                    out.push("no call".to_string());
                }
                if !content.is_empty() {
                    out.push(format!("content {:?}", cut(content)));
                }
                if !reasoning.is_empty() {
                    out.push(format!("reasoning {:?}", cut(reasoning)));
                }
                out
            }
        }
    }
}

/// Where two engines return different things for the text: one line per pair that differs
/// (`vLLM and SGLang differ: calls get_weather vs none`), comparing calls (names and
/// arguments), content (trimmed), reasoning and errors. Empty when all agree.
pub fn disagreements(list: &[EngineOutcome]) -> Vec<String> {
    let mut out = Vec::new();
    for (i, a) in list.iter().enumerate() {
        for b in &list[i + 1..] {
            let what = match (a.outcome.fields(), b.outcome.fields()) {
                (None, None) => None,
                (None, Some(_)) | (Some(_), None) => {
                    Some("one fails, the other answers".to_string())
                }
                (Some((ca, ta, ra)), Some((cb, tb, rb))) => {
                    let names = |c: &[ParsedCall]| {
                        if c.is_empty() {
                            "none".to_string()
                        } else {
                            c.iter()
                                .map(|c| c.name.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        }
                    };
                    let same_calls = ca.len() == cb.len()
                        && ca
                            .iter()
                            .zip(cb)
                            .all(|(x, y)| x.name == y.name && x.arguments == y.arguments);
                    if names(ca) != names(cb) {
                        Some(format!("calls {} vs {}", names(ca), names(cb)))
                    } else if !same_calls {
                        Some("the same calls with different arguments".to_string())
                    } else if ta != tb {
                        Some("different content".to_string())
                    } else if ra != rb {
                        Some("different reasoning".to_string())
                    } else {
                        None
                    }
                }
            };
            if let Some(w) = what {
                out.push(format!(
                    "{} and {} differ: {w}",
                    a.engine.name(),
                    b.engine.name()
                ));
            }
        }
    }
    out
}

/// `2 call(s): get_weather, get_time`, or `no call`.
pub fn calls_summary(calls: &[ParsedCall]) -> String {
    if calls.is_empty() {
        return "no call".to_owned();
    }
    let names: Vec<&str> = calls.iter().map(|c| c.name.as_str()).collect();
    format!("{} call(s): {}", calls.len(), names.join(", "))
}

/// The family the engines would be configured for, for a text toolscope read as `read`:
/// `chosen` (given, or detected from the template's markers), else the syntax of the first
/// call read, else the syntax the text's markers imply ([`Syntax::detect_from_text`]).
/// `None`: no family (the text has no call markers).
pub fn family_for(chosen: Option<Syntax>, read: &ParseOutput, text: &str) -> Option<Syntax> {
    chosen
        .or_else(|| {
            read.tool_calls
                .first()
                .and_then(|c| c.syntax.as_deref())
                .and_then(Syntax::from_name)
        })
        .or_else(|| Syntax::detect_from_text(text))
}
