//! Tool-call syntaxes, their markers, and detection from a template or from raw text.

use serde::{Deserialize, Serialize};

/// A tool-call syntax (the "format" a model writes its calls in).
///
/// Names (`name()` / `from_name()`, the `--syntax` values) follow the field's usual names (the
/// parser names of vLLM `--tool-call-parser` and SGLang `--tool-call-parser` where they exist).
/// Marker strings follow llama.cpp common/chat*.cpp and common/parsers/*.cpp (build 11434), the
/// engines' tool-parser sources and the model cards; docs/parser.md has the family × engine table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Syntax {
    /// Hermes 2 Pro / Qwen2.5 / Qwen3 / Granite 4 / Reka: `<tool_call>{"name", "arguments"}</tool_call>`.
    Hermes,
    /// Qwen3-Coder, Qwen3.5, Nemotron 3, Step 3.5: `<tool_call><function=N><parameter=k>v</parameter>
    /// </function></tool_call>`, values typed by the tool schema.
    Qwen3Coder,
    /// GLM 4.5–4.7, Ling 3: `<tool_call>N<arg_key>k</arg_key><arg_value>v</arg_value></tool_call>`,
    /// values typed by the tool schema.
    #[serde(rename = "glm4.5")]
    Glm45,
    /// Seed-OSS: `<seed:tool_call><function=N><parameter=k>v</parameter></function></seed:tool_call>`;
    /// reasoning in `<seed:think>…</seed:think>`.
    SeedOss,
    /// Gemma 4: `<|tool_call>call:N{k:<|"|>text<|"|>,n:3}<tool_call|>`; reasoning in
    /// `<|channel>thought … <channel|>`.
    Gemma4,
    /// FunctionGemma: `<start_function_call>call:N{k:<escape>v<escape>}<end_function_call>`.
    FunctionGemma,
    /// Llama 3.x: `{"name", "parameters"}` (several separated by `; `), optionally after
    /// `<|python_tag|>`; built-in tools `<|python_tag|>brave_search.call(query="…")`.
    Llama3,
    /// Pythonic lists (Llama 3.2 / 4, Olmo): the reply is `[f(a=1), g(b="x")]`.
    Pythonic,
    /// LFM2 / LFM2.5: `<|tool_call_start|>[f(a=1, b=True)]<|tool_call_end|>` (pythonic or JSON).
    Lfm2,
    /// Mistral: `[TOOL_CALLS]` + JSON array (v3), or `name[CALL_ID]id[ARGS]{…}` (newer);
    /// reasoning in `[THINK]…[/THINK]` (Magistral, Ministral 3).
    Mistral,
    /// DeepSeek R1/V3/V3.1: `<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>N`
    /// + fenced JSON (V3.1: `N<｜tool▁sep｜>{json}`), full-width bar U+FF5C and U+2581.
    DeepSeekV3,
    /// DeepSeek V3.2 / V4 / V4.1 DSML: `<｜DSML｜function_calls>` (V4: `<｜DSML｜tool_calls>`)
    /// `<｜DSML｜invoke name="N"><｜DSML｜parameter name="k" string="true|false">v</｜DSML｜parameter>`.
    #[serde(rename = "deepseek-v3.2")]
    DeepSeekV32,
    /// Kimi K2: `<|tool_calls_section_begin|><|tool_call_begin|>functions.N:IDX
    /// <|tool_call_argument_begin|>{json}<|tool_call_end|><|tool_calls_section_end|>`.
    KimiK2,
    /// Kimi K3: `<|open|>tools<|sep|><|open|>call tool="N" index="1"<|sep|><|open|>argument
    /// key="k" type="number"<|sep|>v<|close|>argument<|sep|>…<|close|>tools<|sep|>`; reasoning
    /// in `<|open|>think<|sep|>…<|close|>think<|sep|>`.
    KimiK3,
    /// GPT-OSS harmony: `<|channel|>commentary to=functions.N <|constrain|>json<|message|>{json}<|call|>`;
    /// reasoning in the `analysis` channel.
    GptOss,
    /// Anthropic-style XML / MiniMax M2: `<invoke name="N"><parameter name="k">v</parameter></invoke>`
    /// (also inside `<function_calls>` or `<minimax:tool_call>`), values typed by the schema.
    AnthropicXml,
    /// MiniMax M3: `]<]minimax[>[<tool_call>…<invoke name="N">…<k>v</k>…</invoke>…</tool_call>`
    /// (every element after the `]<]minimax[>[` separator); reasoning in `<mm:think>…</mm:think>`.
    MiniMaxM3,
    /// Command R7B / Command A / Cohere2MoE: `<|START_ACTION|>[{"tool_call_id","tool_name",
    /// "parameters"}]<|END_ACTION|>`; reasoning in `<|START_THINKING|>…<|END_THINKING|>`.
    CommandR7b,
    /// Apertus: `<|tools_prefix|>[{"N": {args}}]<|tools_suffix|>`; reasoning in
    /// `<|inner_prefix|>…<|inner_suffix|>`.
    Apertus,
    /// Granite 3.x: `<|tool_call|>[{"name","arguments"}]`.
    Granite,
    /// GigaChat 3: `<|message_sep|>\n\nfunction call<|role_sep|>\n{json}`; GigaChat 3.1:
    /// `<|function_call|>{json}`.
    GigaChat3,
    /// Nemotron Nano v2: `<TOOLCALL>[{"name","arguments"}]</TOOLCALL>`.
    NemotronV2,
    /// Functionary v3.1 (Llama 3.1): `<function=N>{json}</function>`, `<|python_tag|>code`.
    #[serde(rename = "functionary-v3.1")]
    FunctionaryV31,
    /// Functionary v3.2: `>>>N\n{json}` (the prompt ends with `>>>`, so the reply starts with
    /// `N\n`); `all\n` + text is content.
    #[serde(rename = "functionary-v3.2")]
    FunctionaryV32,
    /// Firefunction v2: ` functools[{"name","arguments"}]`.
    #[serde(rename = "firefunction-v2")]
    FirefunctionV2,
    /// Command R+: `Action:\n```json\n[{"tool_name","parameters"}]\n``` `.
    CommandRPlus,
    /// Apriel 1.5 / 1.6: `<tool_calls>[{"name","arguments"}]</tool_calls>`; reasoning ends at
    /// `[BEGIN FINAL RESPONSE]`.
    Apriel,
    /// MiniCPM 5: `<function name="N"><param name="k">v</param></function>` (values may be
    /// `<![CDATA[…]]>`), typed by the schema.
    MiniCpm5,
    /// Muse Glimmer (harmony-like): ` to=N<|message|><atem:function_calls><atem:invoke name="N">
    /// <atem:parameter name="k">v</atem:parameter>…`; ` to=self` is reasoning, ` to=user` content.
    MuseGlimmer,
    /// MiniMax M1: `<tool_calls>\n{"name","arguments"}\n{…}\n</tool_calls>` (one JSON object a line).
    MiniMaxM1,
    /// Solar Open: `<|tool_call:begin|>ID<|tool_call:name|>N<|tool_call:args|>{json}<|tool_call:end|>`.
    SolarOpen,
    /// Hunyuan 3 (Hy3): `<tool_calls:opensource><tool_call:opensource>N<tool_sep:opensource>
    /// <arg_key:opensource>k</arg_key:opensource><arg_value:opensource>v</arg_value:opensource>…`,
    /// values typed by the schema; reasoning in `<think:opensource>`.
    Hy3,
    /// Neutral prompt-emulated `<function_call>{json}</function_call>`.
    FunctionCall,
    /// Prompt-emulated ```` ```tool_call\n{json}\n``` ```` fences.
    ToolCallFence,
}

impl Syntax {
    /// Every syntax, in documentation order.
    pub const ALL: &'static [Syntax] = &[
        Syntax::Hermes,
        Syntax::Qwen3Coder,
        Syntax::Glm45,
        Syntax::SeedOss,
        Syntax::Gemma4,
        Syntax::FunctionGemma,
        Syntax::Llama3,
        Syntax::Pythonic,
        Syntax::Lfm2,
        Syntax::Mistral,
        Syntax::DeepSeekV3,
        Syntax::DeepSeekV32,
        Syntax::KimiK2,
        Syntax::KimiK3,
        Syntax::GptOss,
        Syntax::AnthropicXml,
        Syntax::MiniMaxM3,
        Syntax::CommandR7b,
        Syntax::Apertus,
        Syntax::Granite,
        Syntax::GigaChat3,
        Syntax::NemotronV2,
        Syntax::FunctionaryV31,
        Syntax::FunctionaryV32,
        Syntax::FirefunctionV2,
        Syntax::CommandRPlus,
        Syntax::Apriel,
        Syntax::MiniCpm5,
        Syntax::MuseGlimmer,
        Syntax::MiniMaxM1,
        Syntax::SolarOpen,
        Syntax::Hy3,
        Syntax::FunctionCall,
        Syntax::ToolCallFence,
    ];

    /// The `--syntax` name, e.g. `"qwen3-coder"`.
    pub fn name(self) -> &'static str {
        match self {
            Syntax::Hermes => "hermes",
            Syntax::Qwen3Coder => "qwen3-coder",
            Syntax::Glm45 => "glm4.5",
            Syntax::SeedOss => "seed-oss",
            Syntax::Gemma4 => "gemma4",
            Syntax::FunctionGemma => "functiongemma",
            Syntax::Llama3 => "llama3",
            Syntax::Pythonic => "pythonic",
            Syntax::Lfm2 => "lfm2",
            Syntax::Mistral => "mistral",
            Syntax::DeepSeekV3 => "deepseek-v3",
            Syntax::DeepSeekV32 => "deepseek-v3.2",
            Syntax::KimiK2 => "kimi-k2",
            Syntax::KimiK3 => "kimi-k3",
            Syntax::GptOss => "gpt-oss",
            Syntax::AnthropicXml => "anthropic-xml",
            Syntax::MiniMaxM3 => "minimax-m3",
            Syntax::CommandR7b => "command-r7b",
            Syntax::Apertus => "apertus",
            Syntax::Granite => "granite",
            Syntax::GigaChat3 => "gigachat3",
            Syntax::NemotronV2 => "nemotron-v2",
            Syntax::FunctionaryV31 => "functionary-v3.1",
            Syntax::FunctionaryV32 => "functionary-v3.2",
            Syntax::FirefunctionV2 => "firefunction-v2",
            Syntax::CommandRPlus => "command-r-plus",
            Syntax::Apriel => "apriel",
            Syntax::MiniCpm5 => "minicpm5",
            Syntax::MuseGlimmer => "muse-glimmer",
            Syntax::MiniMaxM1 => "minimax-m1",
            Syntax::SolarOpen => "solar-open",
            Syntax::Hy3 => "hy3",
            Syntax::FunctionCall => "function-call",
            Syntax::ToolCallFence => "tool-call-fence",
        }
    }

    /// Looks a syntax up by name or common alias (case-insensitive; `_` and `-` equivalent, so
    /// vLLM's and SGLang's `--tool-call-parser` names work): `qwen`/`qwen25`/`granite4` →
    /// hermes, `qwen3_xml`/`nemotron3` → qwen3-coder, `glm45`/`glm47` → glm4.5, `harmony` →
    /// gpt-oss, `deepseek`/`deepseek-r1` → deepseek-v3, `deepseek_v32`/`deepseek-v4`/`dsml` →
    /// deepseek-v3.2, `minimax`/`minimax-m2` → anthropic-xml, `llama`/`llama3_json` → llama3,
    /// `llama4_pythonic`/`olmo3` → pythonic, `cohere`/`command-a` → command-r7b, … `None` for
    /// unknown names (and for `auto`, which callers handle as "no syntax").
    pub fn from_name(name: &str) -> Option<Syntax> {
        let n = name.trim().to_ascii_lowercase().replace('_', "-");
        Some(match n.as_str() {
            "hermes" | "hermes2" | "hermes-2-pro" | "hermes3" | "qwen" | "qwen2.5" | "qwen25"
            | "qwen3" | "granite4" | "granite-4" | "granite-4.0" | "reka" | "mimo" => {
                Syntax::Hermes
            }
            "qwen3-coder" | "qwen3coder" | "qwen-coder" | "qwen3-xml" | "qwen3.5" | "nemotron3"
            | "nemotron-v3" | "nemotron-3" | "step3.5" | "step3p5" => Syntax::Qwen3Coder,
            "glm4.5" | "glm45" | "glm-4.5" | "glm4.6" | "glm4.7" | "glm47" | "glm-4.7" | "glm"
            | "glm4-moe" | "ling3" => Syntax::Glm45,
            "seed-oss" | "seed" | "seedoss" => Syntax::SeedOss,
            "gemma4" | "gemma-4" | "gemma" => Syntax::Gemma4,
            "functiongemma" | "function-gemma" => Syntax::FunctionGemma,
            "llama3" | "llama-3" | "llama" | "llama3.1" | "llama3.2" | "llama3.3" | "llama-3.x"
            | "llama3-json" => Syntax::Llama3,
            "pythonic" | "llama4-pythonic" | "llama4" | "olmo" | "olmo3" | "llama3.2-pythonic" => {
                Syntax::Pythonic
            }
            "lfm2" | "lfm2.5" | "lfm" => Syntax::Lfm2,
            "mistral" | "mistral-nemo" | "devstral" | "magistral" | "ministral3" => Syntax::Mistral,
            "deepseek-v3" | "deepseek" | "deepseek-r1" | "deepseek-v3.1" | "deepseekv3"
            | "deepseekv31" => Syntax::DeepSeekV3,
            "deepseek-v3.2" | "deepseek-v32" | "deepseekv32" | "deepseek-v4" | "deepseek-v4.1"
            | "deepseekv4" | "dsml" => Syntax::DeepSeekV32,
            "kimi-k2" | "kimi" | "kimik2" => Syntax::KimiK2,
            "kimi-k3" | "kimik3" => Syntax::KimiK3,
            "gpt-oss" | "harmony" | "openai" => Syntax::GptOss,
            "anthropic-xml" | "anthropic" | "invoke" | "minimax" | "minimax-m2" => {
                Syntax::AnthropicXml
            }
            "minimax-m3" | "minimaxm3" => Syntax::MiniMaxM3,
            "command-r7b" | "command-r" | "cohere" | "command-a" | "cohere2moe" | "commandr7b" => {
                Syntax::CommandR7b
            }
            "apertus" => Syntax::Apertus,
            "granite" | "granite3" | "granite-3.3" => Syntax::Granite,
            "gigachat3" | "gigachat" | "gigachat3.1" => Syntax::GigaChat3,
            "nemotron-v2" | "nemotron" | "nemotron2" => Syntax::NemotronV2,
            "functionary-v3.1" | "functionary-v31" | "functionary31" => Syntax::FunctionaryV31,
            "functionary-v3.2" | "functionary-v32" | "functionary32" | "functionary" => {
                Syntax::FunctionaryV32
            }
            "firefunction-v2" | "firefunction" => Syntax::FirefunctionV2,
            "command-r-plus" | "command-r+" | "commandrplus" => Syntax::CommandRPlus,
            "apriel" | "apriel-1.5" | "apriel-1.6" => Syntax::Apriel,
            "minicpm5" | "minicpm" => Syntax::MiniCpm5,
            "muse-glimmer" | "muse" | "glimmer" => Syntax::MuseGlimmer,
            "minimax-m1" | "minimax-m1-json" => Syntax::MiniMaxM1,
            "solar-open" | "solar" | "solar-open2" => Syntax::SolarOpen,
            "hy3" | "hy-v3" | "hunyuan" | "hunyuan3" => Syntax::Hy3,
            "function-call" => Syntax::FunctionCall,
            "tool-call-fence" | "fence" | "tool-call-fences" | "fenced" => Syntax::ToolCallFence,
            _ => return None,
        })
    }

    /// The marker texts this syntax's parser keys on: block starts and ends, wrappers, and the
    /// reasoning markers. Used by the `token.special_split` rule to ask whether each is one
    /// token in a vocabulary.
    pub fn markers(self) -> Vec<&'static str> {
        let mut out: Vec<&'static str> = Vec::new();
        for m in MARKERS
            .iter()
            .filter(|m| m.syntax.is_none() || m.syntax == Some(self))
        {
            out.push(m.text);
            if let MarkerKind::Block {
                end: End::Markers(ends, _),
            } = m.kind
            {
                out.extend(ends.iter().copied());
            }
            if let MarkerKind::Reasoning { ends } = m.kind {
                out.extend(ends.iter().copied());
            }
        }
        let mut seen = std::collections::HashSet::new();
        out.retain(|t| seen.insert(*t));
        out
    }

    /// The markers that end reasoning the prompt opened for this syntax (`</think>`, Seed-OSS
    /// `</seed:think>`, Command R7B `<|END_THINKING|>`, Mistral `[/THINK]`, …); `None` = auto:
    /// every syntax's.
    pub(crate) fn open_reasoning_ends(syntax: Option<Syntax>) -> &'static [&'static str] {
        match syntax {
            Some(Syntax::SeedOss) => &["</seed:think>"],
            Some(Syntax::CommandR7b) => &["<|END_THINKING|>"],
            Some(Syntax::Mistral) => &["[/THINK]", "</think>"],
            Some(Syntax::MiniMaxM3) => &["</mm:think>"],
            Some(Syntax::KimiK3) => &["<|close|>think<|sep|>", "<|open|>response<|sep|>"],
            Some(Syntax::Gemma4) => GEMMA_THOUGHT_ENDS,
            Some(Syntax::GptOss) => HARMONY_REASONING_ENDS,
            Some(Syntax::Apertus) => &["<|inner_suffix|>"],
            Some(Syntax::Apriel) => &["[BEGIN FINAL RESPONSE]"],
            Some(Syntax::Hy3) => &["</think:opensource>"],
            Some(_) => THINK_ENDS,
            None => ALL_REASONING_ENDS,
        }
    }

    /// Whether a generation prompt (the text `add_generation_prompt` adds, e.g.
    /// `<|im_start|>assistant\n<think>\n`) leaves the reply inside reasoning: it ends with an
    /// opening reasoning marker of `syntax` (`None`: any) — `<think>`, `<seed:think>`,
    /// `<|START_THINKING|>`, `[THINK]`, `<mm:think>`, `<|open|>think<|sep|>`,
    /// `<|inner_prefix|>`, or Apriel's `Here are my reasoning steps:`. llama.cpp decides the same
    /// by parsing the generation prompt + the reply (common/chat.cpp, build 11434).
    pub fn prompt_opens_reasoning(generation_prompt: &str, syntax: Option<Syntax>) -> bool {
        let t = generation_prompt.trim_end();
        let general = t.ends_with("<think>");
        let own = match syntax {
            Some(Syntax::SeedOss) => t.ends_with("<seed:think>"),
            Some(Syntax::CommandR7b) => t.ends_with("<|START_THINKING|>"),
            Some(Syntax::Mistral) => t.ends_with("[THINK]"),
            Some(Syntax::MiniMaxM3) => t.ends_with("<mm:think>"),
            Some(Syntax::KimiK3) => t.ends_with("<|open|>think<|sep|>"),
            Some(Syntax::Apertus) => t.ends_with("<|inner_prefix|>"),
            Some(Syntax::Apriel) => t.ends_with("Here are my reasoning steps:"),
            Some(_) => false,
            None => [
                "<seed:think>",
                "<|START_THINKING|>",
                "[THINK]",
                "<mm:think>",
                "<|open|>think<|sep|>",
                "<|inner_prefix|>",
                "Here are my reasoning steps:",
            ]
            .iter()
            .any(|m| t.ends_with(m)),
        };
        general || own
    }

    /// Whether auto mode (no syntax given) reads this syntax entirely: false for the syntaxes
    /// with markers made of ordinary words or punctuation (`functools`, `Action:`, `>>>`, Muse
    /// Glimmer's ` to=`, Granite's `<response>`), read only when chosen.
    pub fn auto_detected(self) -> bool {
        !matches!(
            self,
            Syntax::FunctionaryV32
                | Syntax::FirefunctionV2
                | Syntax::CommandRPlus
                | Syntax::MuseGlimmer
                | Syntax::Granite
        )
    }

    /// Detects the syntax a chat template teaches from the markers in its source text
    /// (the Jinja source, not a render). Most specific markers are checked first; `None` when
    /// the template has no known tool-call markers (a template without tool calls).
    pub fn detect_from_template(template: &str) -> Option<Syntax> {
        let has = |s: &str| template.contains(s);
        Some(if has("<|tool_call>") || has("<tool_call|>") {
            Syntax::Gemma4
        } else if has("<start_function_call>") {
            Syntax::FunctionGemma
        } else if has("<|tool_calls_section_begin|>") {
            Syntax::KimiK2
        } else if has("open_tag('tools')") || has("<|open|>tools") {
            Syntax::KimiK3
        } else if has("DSML") {
            Syntax::DeepSeekV32
        } else if has("tool▁calls▁begin") || has("tool▁call▁begin") {
            Syntax::DeepSeekV3
        } else if has("<|channel|>") && has("<|message|>") {
            Syntax::GptOss
        } else if has("<seed:tool_call>") {
            Syntax::SeedOss
        } else if has("<arg_key>") {
            Syntax::Glm45
        } else if has("<mm:think>") || has("]<]minimax[>[") {
            Syntax::MiniMaxM3
        } else if has("<function=") && has("<parameter=") {
            Syntax::Qwen3Coder
        } else if has("<|tool_call_start|>")
            || (has("<|tool_list_start|>") && has("<|tool_list_end|>"))
            || has("List of tools: [")
        {
            // llama.cpp common/chat.cpp: is_lfm2_template, and LFM2.5's plain "List of tools: ["
            Syntax::Lfm2
        } else if has("<|START_ACTION|>") {
            Syntax::CommandR7b
        } else if has("<|tools_prefix|>") {
            Syntax::Apertus
        } else if has("<TOOLCALL>") {
            Syntax::NemotronV2
        } else if has("<|function_call|>") || has("function call") && has("<|role_sep|>") {
            Syntax::GigaChat3
        } else if has("<|tool_call|>") {
            Syntax::Granite
        } else if has("<atem:function_calls>") || has("atem:invoke") {
            Syntax::MuseGlimmer
        } else if has("functools[") {
            Syntax::FirefunctionV2
        } else if has("[BEGIN FINAL RESPONSE]") || has("<tool_calls>[") {
            Syntax::Apriel
        } else if has("<tool_calls>") && has("\"arguments\": <args-json-object>") {
            Syntax::MiniMaxM1
        } else if has("<|tool_call:begin|>") {
            Syntax::SolarOpen
        } else if has("<tool_calls{}>") || has("<tool_calls:opensource>") {
            Syntax::Hy3
        } else if has("<function name=") && has("<param name=") {
            Syntax::MiniCpm5
        } else if has("Action:") && has("tool_name") && has("<|CHATBOT_TOKEN|>") {
            Syntax::CommandRPlus
        } else if has("<tool_call>") {
            Syntax::Hermes
        } else if has("[TOOL_CALLS]") {
            Syntax::Mistral
        } else if has("<invoke name=") || has("<invoke name=\\\"") || has("<minimax:tool_call>") {
            Syntax::AnthropicXml
        } else if has(">>>") && has("<|start_header_id|>") {
            Syntax::FunctionaryV32
        } else if has("<function=") && has("<|start_header_id|>") {
            Syntax::FunctionaryV31
        } else if has("<function_call>") {
            Syntax::FunctionCall
        } else if has("```tool_call") {
            Syntax::ToolCallFence
        } else if has("<|python_tag|>") || (has("<|start_header_id|>") && has("\"parameters\"")) {
            Syntax::Llama3
        } else if has("[func_name1(") || has("func_name1(params_name1=") {
            Syntax::Pythonic
        } else {
            return None;
        })
    }

    /// Detects the syntax of raw model text: the syntax of the earliest start marker found
    /// (`<tool_call>` followed by `<function=` counts as qwen3-coder, by a name and `<arg_key>`
    /// as glm4.5), else `llama3` when the text (after whitespace) starts with `{` and contains
    /// `"name"`, `pythonic` when it starts with `[name(`. `None` when nothing matches. Looks at
    /// each marker once (a search per marker, not per byte); for a text already parsed, the
    /// calls' own `syntax` is the better answer.
    pub fn detect_from_text(text: &str) -> Option<Syntax> {
        let mut best: Option<(usize, Syntax)> = None;
        for m in MARKERS {
            let Some(sx) = m.syntax else { continue };
            if !matches!(m.kind, MarkerKind::Block { .. } | MarkerKind::HarmonyHeader) || !m.auto {
                continue;
            }
            if let Some(p) = text.find(m.text)
                && best.is_none_or(|(b, _)| p < b)
            {
                let mut sx = sx;
                if m.text == "<tool_call>" {
                    let after = text[p + m.text.len()..].trim_start();
                    if after.starts_with("<function=") {
                        sx = Syntax::Qwen3Coder;
                    } else if !after.starts_with('{')
                        && after
                            .find("<arg_key>")
                            .is_some_and(|k| !after[..k].contains(['{', '<']))
                    {
                        sx = Syntax::Glm45;
                    } else {
                        sx = Syntax::Hermes;
                    }
                }
                best = Some((p, sx));
            }
        }
        if let Some((_, s)) = best {
            return Some(s);
        }
        let t = text.trim_start();
        if t.starts_with('{') && t.contains("\"name\"") {
            return Some(Syntax::Llama3);
        }
        if t.starts_with("to=functions.") {
            return Some(Syntax::GptOss);
        }
        if t.starts_with('[') && super::body::pythonic_prefix(t) == Some(true) {
            return Some(Syntax::Pythonic);
        }
        None
    }
}

impl std::fmt::Display for Syntax {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How a block ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum End {
    /// At the first of these markers. Markers in [`NON_CONSUMED`] end the block but stay in the
    /// input (they start the next element). `eof_ok`: the end of the text is a normal end.
    Markers(&'static [&'static str], bool),
    /// Mistral: after `[json array]`, or after `name…[ARGS]{json}`.
    MistralJson,
}

/// End markers that close a block without being consumed (harmony: a new message header).
pub(crate) const NON_CONSUMED: &[&str] = &[
    ">>>",
    "<|message_sep|>",
    "<|start|>",
    "<|channel|>",
    "<|tool_call_begin|>",
    "<|tool_calls_section_begin|>",
];

/// What a marker does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MarkerKind {
    /// Starts a call block held until it ends, then parsed whole.
    Block { end: End },
    /// Starts reasoning, streamed until one of `ends`.
    Reasoning { ends: &'static [&'static str] },
    /// A reasoning end (`</think>`, `</seed:think>`, `<|END_THINKING|>`, `[/THINK]`, …) with no
    /// opening before it: the prompt opened the thinking block, so the text so far was reasoning.
    OrphanThinkClose,
    /// Wrapper or orphan marker removed from content (`<function_calls>`, `<|end|>`, …).
    Drop,
    /// GPT-OSS message header, held until `<|message|>`.
    HarmonyHeader,
}

/// One marker of one syntax (`syntax: None` = every syntax: `<think>` reasoning).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Marker {
    pub text: &'static str,
    pub syntax: Option<Syntax>,
    pub kind: MarkerKind,
    /// Active in auto mode (no syntax given). Markers made of ordinary words that prose or code
    /// may contain (`functools`, `>>>`, `<response>`) are only active when their syntax is
    /// chosen.
    pub auto: bool,
}

const fn block(
    text: &'static str,
    s: Syntax,
    ends: &'static [&'static str],
    eof_ok: bool,
) -> Marker {
    Marker {
        text,
        syntax: Some(s),
        kind: MarkerKind::Block {
            end: End::Markers(ends, eof_ok),
        },
        auto: true,
    }
}
const fn drop(text: &'static str, s: Syntax) -> Marker {
    Marker {
        text,
        syntax: Some(s),
        kind: MarkerKind::Drop,
        auto: true,
    }
}
const fn reasoning(text: &'static str, s: Syntax, ends: &'static [&'static str]) -> Marker {
    Marker {
        text,
        syntax: Some(s),
        kind: MarkerKind::Reasoning { ends },
        auto: true,
    }
}
const fn orphan_close(text: &'static str, s: Syntax) -> Marker {
    Marker {
        text,
        syntax: Some(s),
        kind: MarkerKind::OrphanThinkClose,
        auto: true,
    }
}
/// The marker, active only when its syntax is chosen (not in auto mode).
const fn chosen_only(m: Marker) -> Marker {
    Marker { auto: false, ..m }
}

pub(crate) const THINK_ENDS: &[&str] = &["</think>"];
/// Every reasoning end (reasoning opened by the prompt, auto mode).
pub(crate) const ALL_REASONING_ENDS: &[&str] = &[
    "</think>",
    "</seed:think>",
    "<|END_THINKING|>",
    "[/THINK]",
    "</mm:think>",
    "<|close|>think<|sep|>",
    "<|inner_suffix|>",
    "[BEGIN FINAL RESPONSE]",
    "<channel|>",
    "<|open|>response<|sep|>",
    "</think:opensource>",
];
pub(crate) const GEMMA_THOUGHT_ENDS: &[&str] = &["<channel|>"];
pub(crate) const HARMONY_REASONING_ENDS: &[&str] =
    &["<|end|>", "<|return|>", "<|start|>", "<|channel|>"];
pub(crate) const HARMONY_CALL_ENDS: &[&str] = &[
    "<|call|>",
    "<|end|>",
    "<|return|>",
    "<|start|>",
    "<|channel|>",
];
/// The MiniMax M3 element separator (one special token).
pub(crate) const MM3_SEP: &str = "]<]minimax[>[";

/// Every marker. Longest-match wins when several match at one position; among markers of one
/// text, the first listed is the one active (its body parser decides between the syntaxes that
/// share it, e.g. `<tool_call>`: hermes JSON, qwen3-coder `<function=`, glm4.5 `N<arg_key>`).
pub(crate) const MARKERS: &[Marker] = &[
    Marker {
        text: "<think>",
        syntax: None,
        kind: MarkerKind::Reasoning { ends: THINK_ENDS },
        auto: true,
    },
    Marker {
        text: "</think>",
        syntax: None,
        kind: MarkerKind::OrphanThinkClose,
        auto: true,
    },
    // hermes / qwen3-coder / glm4.5 share <tool_call>; the body decides.
    block("<tool_call>", Syntax::Hermes, &["</tool_call>"], false),
    block("<tool_call>", Syntax::Qwen3Coder, &["</tool_call>"], false),
    block("<tool_call>", Syntax::Glm45, &["</tool_call>"], false),
    // qwen3-coder without the opening <tool_call>; functionary v3.1 `<function=N>{json}`
    block("<function=", Syntax::Qwen3Coder, &["</function>"], false),
    block(
        "<function=",
        Syntax::FunctionaryV31,
        &["</function>"],
        false,
    ),
    drop("</tool_call>", Syntax::Qwen3Coder),
    // glm 4.5 / ling 3 end of turn
    drop("<|role_end|>", Syntax::Glm45),
    // seed-oss
    block(
        "<seed:tool_call>",
        Syntax::SeedOss,
        &["</seed:tool_call>"],
        false,
    ),
    reasoning("<seed:think>", Syntax::SeedOss, &["</seed:think>"]),
    orphan_close("</seed:think>", Syntax::SeedOss),
    // gemma 4
    block("<|tool_call>", Syntax::Gemma4, &["<tool_call|>"], false),
    reasoning("<|channel>thought", Syntax::Gemma4, GEMMA_THOUGHT_ENDS),
    drop("<channel|>", Syntax::Gemma4),
    drop("<|channel>", Syntax::Gemma4),
    // functiongemma
    block(
        "<start_function_call>",
        Syntax::FunctionGemma,
        &["<end_function_call>"],
        false,
    ),
    // llama 3 (functionary v3.1 shares the python tag)
    block(
        "<|python_tag|>",
        Syntax::Llama3,
        &["<|eom_id|>", "<|eot_id|>"],
        true,
    ),
    block(
        "<|python_tag|>",
        Syntax::FunctionaryV31,
        &["<|eom_id|>", "<|eot_id|>"],
        true,
    ),
    // pythonic (llama 4 may wrap the list in python tokens)
    block(
        "<|python_start|>",
        Syntax::Pythonic,
        &["<|python_end|>"],
        true,
    ),
    // lfm2
    block(
        "<|tool_call_start|>",
        Syntax::Lfm2,
        &["<|tool_call_end|>"],
        false,
    ),
    // mistral
    Marker {
        text: "[TOOL_CALLS]",
        syntax: Some(Syntax::Mistral),
        kind: MarkerKind::Block {
            end: End::MistralJson,
        },
        auto: true,
    },
    reasoning("[THINK]", Syntax::Mistral, &["[/THINK]"]),
    orphan_close("[/THINK]", Syntax::Mistral),
    // deepseek
    block(
        "<｜tool▁calls▁begin｜>",
        Syntax::DeepSeekV3,
        &["<｜tool▁calls▁end｜>"],
        false,
    ),
    block(
        "<｜tool▁call▁begin｜>",
        Syntax::DeepSeekV3,
        &["<｜tool▁call▁end｜>"],
        false,
    ),
    drop("<｜tool▁calls▁end｜>", Syntax::DeepSeekV3),
    drop("<｜end▁of▁sentence｜>", Syntax::DeepSeekV3),
    // deepseek v3.2 / v4 dsml
    block(
        "<｜DSML｜function_calls>",
        Syntax::DeepSeekV32,
        &["</｜DSML｜function_calls>"],
        false,
    ),
    block(
        "<｜DSML｜tool_calls>",
        Syntax::DeepSeekV32,
        &["</｜DSML｜tool_calls>"],
        false,
    ),
    // kimi k2
    block(
        "<|tool_calls_section_begin|>",
        Syntax::KimiK2,
        &["<|tool_calls_section_end|>"],
        false,
    ),
    block(
        "<|tool_call_begin|>",
        Syntax::KimiK2,
        &["<|tool_call_end|>", "<|tool_call_begin|>"],
        true,
    ),
    drop("<|tool_calls_section_end|>", Syntax::KimiK2),
    // kimi k3
    block(
        "<|open|>tools<|sep|>",
        Syntax::KimiK3,
        &["<|close|>tools<|sep|>"],
        false,
    ),
    reasoning(
        "<|open|>think<|sep|>",
        Syntax::KimiK3,
        &["<|close|>think<|sep|>"],
    ),
    orphan_close("<|close|>think<|sep|>", Syntax::KimiK3),
    drop("<|open|>response<|sep|>", Syntax::KimiK3),
    drop("<|close|>response<|sep|>", Syntax::KimiK3),
    drop("<|close|>message<|sep|>", Syntax::KimiK3),
    // gpt-oss harmony
    Marker {
        text: "<|channel|>",
        syntax: Some(Syntax::GptOss),
        kind: MarkerKind::HarmonyHeader,
        auto: true,
    },
    Marker {
        text: "<|start|>",
        syntax: Some(Syntax::GptOss),
        kind: MarkerKind::HarmonyHeader,
        auto: true,
    },
    drop("<|end|>", Syntax::GptOss),
    drop("<|return|>", Syntax::GptOss),
    drop("<|call|>", Syntax::GptOss),
    // anthropic-style xml / minimax m2
    block("<invoke", Syntax::AnthropicXml, &["</invoke>"], false),
    drop("<function_calls>", Syntax::AnthropicXml),
    drop("</function_calls>", Syntax::AnthropicXml),
    drop("<minimax:tool_call>", Syntax::AnthropicXml),
    drop("</minimax:tool_call>", Syntax::AnthropicXml),
    // minimax m3
    block(
        "]<]minimax[>[<tool_call>",
        Syntax::MiniMaxM3,
        &["]<]minimax[>[</tool_call>"],
        false,
    ),
    reasoning("<mm:think>", Syntax::MiniMaxM3, &["</mm:think>"]),
    orphan_close("</mm:think>", Syntax::MiniMaxM3),
    // command r7b / command a / cohere2moe
    block(
        "<|START_ACTION|>",
        Syntax::CommandR7b,
        &["<|END_ACTION|>"],
        false,
    ),
    reasoning(
        "<|START_THINKING|>",
        Syntax::CommandR7b,
        &["<|END_THINKING|>"],
    ),
    orphan_close("<|END_THINKING|>", Syntax::CommandR7b),
    drop("<|START_RESPONSE|>", Syntax::CommandR7b),
    drop("<|END_RESPONSE|>", Syntax::CommandR7b),
    drop("<|START_TEXT|>", Syntax::CommandR7b),
    drop("<|END_TEXT|>", Syntax::CommandR7b),
    // apertus
    block(
        "<|tools_prefix|>",
        Syntax::Apertus,
        &["<|tools_suffix|>"],
        false,
    ),
    reasoning("<|inner_prefix|>", Syntax::Apertus, &["<|inner_suffix|>"]),
    orphan_close("<|inner_suffix|>", Syntax::Apertus),
    // granite 3.x
    block("<|tool_call|>", Syntax::Granite, &["<|end_of_text|>"], true),
    chosen_only(drop("<response>", Syntax::Granite)),
    chosen_only(drop("</response>", Syntax::Granite)),
    // gigachat 3 / 3.1
    block(
        "<|message_sep|>",
        Syntax::GigaChat3,
        &["<|message_sep|>"],
        true,
    ),
    block(
        "<|function_call|>",
        Syntax::GigaChat3,
        &["<|message_sep|>"],
        true,
    ),
    // nemotron v2
    block("<TOOLCALL>", Syntax::NemotronV2, &["</TOOLCALL>"], false),
    // functionary v3.2 (the reply itself starts as if after `>>>`)
    chosen_only(block(">>>", Syntax::FunctionaryV32, &[">>>"], true)),
    // firefunction v2
    chosen_only(block(
        "functools",
        Syntax::FirefunctionV2,
        &["<|eot_id|>"],
        true,
    )),
    // command r+
    chosen_only(block(
        "Action:",
        Syntax::CommandRPlus,
        &["<|END_OF_TURN_TOKEN|>"],
        true,
    )),
    chosen_only(drop("<|CHATBOT_TOKEN|>", Syntax::CommandRPlus)),
    chosen_only(drop("<|END_OF_TURN_TOKEN|>", Syntax::CommandRPlus)),
    // apriel
    block("<tool_calls>", Syntax::Apriel, &["</tool_calls>"], false),
    orphan_close("[BEGIN FINAL RESPONSE]", Syntax::Apriel),
    // minicpm 5
    block("<function name=", Syntax::MiniCpm5, &["</function>"], false),
    // muse glimmer: ` to=R<|message|>` headers (the reply starts with one)
    chosen_only(Marker {
        text: "<|start|>",
        syntax: Some(Syntax::MuseGlimmer),
        kind: MarkerKind::HarmonyHeader,
        auto: false,
    }),
    chosen_only(drop("<|eom|>", Syntax::MuseGlimmer)),
    chosen_only(drop("<|eot|>", Syntax::MuseGlimmer)),
    // minimax m1 (shares <tool_calls> with apriel; the body decides)
    block("<tool_calls>", Syntax::MiniMaxM1, &["</tool_calls>"], false),
    // solar open
    block(
        "<|tool_call:begin|>",
        Syntax::SolarOpen,
        &["<|tool_call:end|>"],
        false,
    ),
    // hunyuan 3
    block(
        "<tool_calls:opensource>",
        Syntax::Hy3,
        &["</tool_calls:opensource>"],
        false,
    ),
    reasoning("<think:opensource>", Syntax::Hy3, &["</think:opensource>"]),
    orphan_close("</think:opensource>", Syntax::Hy3),
    // neutral
    block(
        "<function_call>",
        Syntax::FunctionCall,
        &["</function_call>"],
        false,
    ),
    block("```tool_call", Syntax::ToolCallFence, &["```"], false),
];
