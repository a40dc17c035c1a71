//! What each engine's own tool-call parser would return for one raw text: llama.cpp
//! (llama-server build 11434), vLLM and SGLang, beside what toolscope reads. Pure.
//!
//! toolscope is tolerant: it accepts drifts (each a [`Repair`](super::Repair)) and keeps what
//! does not parse as content (each [`Malformed`](super::Malformed)). The engines are not, and
//! fail in different ways, documented here per engine:
//!
//! * **llama.cpp** parses the generation prompt + reply with the PEG parser built for the
//!   template; when the whole text does not match, the final (non-streamed) parse throws
//!   "The model produced output that does not match the expected <format> format"
//!   (common/chat.cpp `common_chat_peg_parse`, build 11434) and llama-server answers HTTP 500.
//! * **vLLM** tool parsers (`vllm/tool_parsers/*_tool_parser.py`) catch the exception of a call
//!   they cannot decode and return `tools_called=False` with the whole model output as
//!   `content`: the markup reaches the client as text.
//! * **SGLang** detectors (`python/sglang/srt/function_call/*_detector.py`,
//!   `BaseFormatDetector.detect_and_parse`) log the failure and return the text as
//!   `normal_text`, markup kept.
//!
//! A family an engine has no parser for comes back from it as plain content (vLLM, SGLang: no
//! `--tool-call-parser` of that name; llama.cpp: the template is not recognised and the reply
//! is content).

use serde::Serialize;
use serde_json::Value;

use super::{ParseOutput, ParsedCall, Syntax, parse};

/// An inference engine whose tool-call parsing is modelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Engine {
    /// llama.cpp llama-server, build 11434 (common/chat.cpp, common/parsers/*.cpp).
    LlamaCpp,
    /// vLLM (`--tool-call-parser NAME`, vllm/tool_parsers/).
    Vllm,
    /// SGLang (`--tool-call-parser NAME`, python/sglang/srt/function_call/).
    Sglang,
}

impl Engine {
    /// Every modelled engine.
    pub const ALL: [Engine; 3] = [Engine::LlamaCpp, Engine::Vllm, Engine::Sglang];

    /// Display name: `llama.cpp`, `vLLM`, `SGLang`.
    pub fn name(self) -> &'static str {
        match self {
            Engine::LlamaCpp => "llama.cpp",
            Engine::Vllm => "vLLM",
            Engine::Sglang => "SGLang",
        }
    }
}

/// What one engine returns for the text.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Outcome {
    /// The calls (and content / reasoning) the engine returns: the same as toolscope's strict
    /// reading.
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
    /// The engine's parser for the family (`--tool-call-parser` value, or llama.cpp's format
    /// handler); `None` when the engine has none.
    pub parser: Option<&'static str>,
    pub outcome: Outcome,
    /// Why, in words (names the repair or malformed block that makes the engine differ).
    pub why: String,
}

/// The engines' parser names for a family: (llama.cpp handler, vLLM `--tool-call-parser`,
/// SGLang `--tool-call-parser`). llama.cpp build 11434 reads most families through its
/// template-derived "auto" PEG parser (common/chat-auto-parser-generator.cpp) and a few through
/// dedicated ones (common/parsers/*.cpp); vLLM names from vllm/tool_parsers/__init__.py, SGLang
/// names from function_call_parser.py `ToolCallParserEnum`.
pub fn parsers(family: Syntax) -> [Option<&'static str>; 3] {
    use Syntax as S;
    match family {
        S::Hermes => [
            Some("auto (<tool_call> JSON)"),
            Some("hermes"),
            Some("hermes"),
        ],
        S::Qwen3Coder => [
            Some("qwen3-coder"),
            Some("qwen3_coder"),
            Some("qwen3_coder"),
        ],
        S::Glm45 => [Some("auto (GLM arg_key)"), Some("glm45"), Some("glm45")],
        S::SeedOss => [Some("auto (seed:tool_call)"), Some("seed_oss"), None],
        S::Gemma4 => [Some("gemma4"), Some("gemma4"), Some("gemma4")],
        S::FunctionGemma => [None, Some("functiongemma"), None],
        S::Llama3 => [
            Some("auto (llama 3.x JSON)"),
            Some("llama3_json"),
            Some("llama3"),
        ],
        S::Pythonic => [None, Some("pythonic"), Some("pythonic")],
        S::Lfm2 => [Some("lfm2"), Some("lfm2"), Some("lfm2")],
        S::Mistral => [Some("ministral3 / auto"), Some("mistral"), Some("mistral")],
        S::DeepSeekV3 => [
            Some("auto (deepseek)"),
            Some("deepseek_v3"),
            Some("deepseekv3"),
        ],
        S::DeepSeekV32 => [
            Some("deepseek-v3.2"),
            Some("deepseek_v32"),
            Some("deepseekv32"),
        ],
        S::KimiK2 => [Some("kimi-k2"), Some("kimi_k2"), Some("kimi_k2")],
        S::KimiK3 => [Some("kimi-k3"), Some("kimi_k3"), Some("kimi_k3")],
        S::GptOss => [Some("gpt-oss"), Some("openai"), Some("gpt-oss")],
        S::AnthropicXml => [
            Some("auto (minimax-m2)"),
            Some("minimax_m2"),
            Some("minimax-m2"),
        ],
        S::MiniMaxM3 => [Some("minimax-m3"), Some("minimax_m3"), Some("minimax-m3")],
        S::CommandR7b => [
            Some("cohere2moe / auto"),
            Some("cohere_command"),
            Some("cohere_command4"),
        ],
        S::Apertus => [Some("auto (apertus)"), Some("apertus"), Some("apertus2509")],
        S::Granite => [Some("auto (granite)"), Some("granite"), None],
        S::GigaChat3 => [Some("gigachat-v3"), Some("gigachat3"), Some("gigachat3")],
        S::NemotronV2 => [Some("auto (nemotron v2)"), Some("nemotron_json"), None],
        S::FunctionaryV31 => [Some("auto (functionary v3.1)"), None, None],
        S::FunctionaryV32 => [Some("functionary-v3-2"), None, None],
        S::FirefunctionV2 => [Some("auto (firefunction v2)"), None, None],
        S::CommandRPlus => [Some("auto (command r+)"), None, None],
        S::Apriel => [Some("auto (apriel)"), None, None],
        S::MiniCpm5 => [Some("minicpm5"), Some("minicpm5xml"), Some("minicpm5")],
        S::MuseGlimmer => [Some("muse-glimmer"), Some("muse_glimmer"), Some("muse")],
        S::MiniMaxM1 => [Some("auto (minimax m1)"), Some("minimax"), None],
        S::SolarOpen => [Some("auto (solar open)"), Some("solar_open2"), None],
        S::Hy3 => [Some("auto (hy3)"), Some("hy_v3"), Some("hunyuan")],
        S::FunctionCall | S::ToolCallFence => [None, None, None],
    }
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
/// engine's parser for that family is documented to return, in [`Engine::ALL`] order.
/// `tools`: the request's tools (OpenAI/Anthropic array or whole request), used for schema
/// typing as the engines do.
///
/// Rules (see the module doc for the sources): a text toolscope reads with no repair and no
/// malformed block gives every engine with a parser the same calls; otherwise llama.cpp
/// answers HTTP 500, vLLM and SGLang return the whole text as content. An engine without a
/// parser for the family returns the whole text as content.
pub fn expected(
    family: Syntax,
    text: &str,
    tools: Option<&Value>,
) -> (ParseOutput, Vec<EngineOutcome>) {
    let ours = parse(text, Some(family), tools);
    let mut problems: Vec<String> = ours
        .malformed
        .iter()
        .map(|m| {
            format!(
                "malformed {} block at byte {}: {}",
                m.syntax, m.offset, m.message
            )
        })
        .collect();
    problems.extend(
        ours.repairs
            .iter()
            .map(|r| format!("drift `{}` at byte {}: {}", r.kind, r.offset, r.message)),
    );
    let whole = || Outcome::Content {
        content: text.trim().to_string(),
    };
    let out = Engine::ALL
        .iter()
        .zip(parsers(family))
        .map(|(&engine, parser)| {
            let (outcome, why) = match parser {
                None => (
                    whole(),
                    format!(
                        "{} has no parser for {}: the text is returned as content",
                        engine.name(),
                        family.name()
                    ),
                ),
                Some(_) if problems.is_empty() => (
                    Outcome::Calls {
                        content: ours.content.clone(),
                        reasoning: ours.reasoning.clone(),
                        tool_calls: ours.tool_calls.clone(),
                    },
                    "the text is in the family's exact format".to_string(),
                ),
                Some(_) => match engine {
                    Engine::LlamaCpp => (
                        Outcome::Error {
                            status: 500,
                            message: format!(
                                "The model produced output that does not match the expected {} format",
                                llama_format_name(family)
                            ),
                        },
                        format!("the PEG parser rejects the whole reply: {}", problems[0]),
                    ),
                    Engine::Vllm => (
                        whole(),
                        format!(
                            "the tool parser fails and returns the output as content: {}",
                            problems[0]
                        ),
                    ),
                    Engine::Sglang => (
                        whole(),
                        format!(
                            "the detector fails and keeps the markup in normal_text: {}",
                            problems[0]
                        ),
                    ),
                },
            };
            EngineOutcome {
                engine,
                parser,
                outcome,
                why,
            }
        })
        .collect();
    (ours, out)
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
