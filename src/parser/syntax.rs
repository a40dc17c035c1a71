//! Tool-call syntaxes, their markers, and detection from a template or from raw text.

use serde::{Deserialize, Serialize};

/// A tool-call syntax (the "format" a model writes its calls in).
///
/// Names (`name()` / `from_name()`, the `--syntax` values) follow the field's usual names.
/// Marker strings follow llama.cpp common/chat*.cpp (build 11434) and the model cards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Syntax {
    /// Hermes 2 Pro / Qwen2.5 / Qwen3: `<tool_call>{"name", "arguments"}</tool_call>`.
    Hermes,
    /// Qwen3-Coder: `<tool_call><function=N><parameter=k>v</parameter></function></tool_call>`,
    /// values typed by the tool schema.
    Qwen3Coder,
    /// Gemma 4: `<|tool_call>call:N{k:<|"|>text<|"|>,n:3}<tool_call|>`; reasoning in
    /// `<|channel>thought … <channel|>`.
    Gemma4,
    /// Llama 3.x: `{"name", "parameters"}`, optionally after `<|python_tag|>`.
    Llama3,
    /// Mistral: `[TOOL_CALLS]` + JSON array (v3), or `name[CALL_ID]id[ARGS]{…}` (newer).
    Mistral,
    /// DeepSeek R1/V3/V3.1: `<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>N`
    /// + fenced JSON (V3.1: `N<｜tool▁sep｜>{json}`), full-width bar U+FF5C and U+2581.
    DeepSeekV3,
    /// Kimi K2: `<|tool_calls_section_begin|><|tool_call_begin|>functions.N:IDX
    /// <|tool_call_argument_begin|>{json}<|tool_call_end|><|tool_calls_section_end|>`.
    KimiK2,
    /// GPT-OSS harmony: `<|channel|>commentary to=functions.N <|constrain|>json<|message|>{json}<|call|>`;
    /// reasoning in the `analysis` channel.
    GptOss,
    /// Anthropic-style XML: `<invoke name="N"><parameter name="k">v</parameter></invoke>`
    /// (also inside `<function_calls>` or MiniMax's `<minimax:tool_call>`), values typed by the schema.
    AnthropicXml,
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
        Syntax::Gemma4,
        Syntax::Llama3,
        Syntax::Mistral,
        Syntax::DeepSeekV3,
        Syntax::KimiK2,
        Syntax::GptOss,
        Syntax::AnthropicXml,
        Syntax::FunctionCall,
        Syntax::ToolCallFence,
    ];

    /// The `--syntax` name, e.g. `"qwen3-coder"`.
    pub fn name(self) -> &'static str {
        match self {
            Syntax::Hermes => "hermes",
            Syntax::Qwen3Coder => "qwen3-coder",
            Syntax::Gemma4 => "gemma4",
            Syntax::Llama3 => "llama3",
            Syntax::Mistral => "mistral",
            Syntax::DeepSeekV3 => "deepseek-v3",
            Syntax::KimiK2 => "kimi-k2",
            Syntax::GptOss => "gpt-oss",
            Syntax::AnthropicXml => "anthropic-xml",
            Syntax::FunctionCall => "function-call",
            Syntax::ToolCallFence => "tool-call-fence",
        }
    }

    /// Looks a syntax up by name or common alias (case-insensitive; `_` and `-` equivalent):
    /// `qwen`/`qwen2.5`/`qwen3` → hermes, `harmony` → gpt-oss, `deepseek`/`deepseek-r1` →
    /// deepseek-v3, `invoke`/`minimax` → anthropic-xml, `llama`/`llama3.1` → llama3,
    /// `kimi` → kimi-k2, `gemma` → gemma4, `fence` → tool-call-fence. `None` for unknown names
    /// (and for `auto`, which callers handle as "no syntax").
    pub fn from_name(name: &str) -> Option<Syntax> {
        let n = name.trim().to_ascii_lowercase().replace('_', "-");
        Some(match n.as_str() {
            "hermes" | "hermes2" | "hermes-2-pro" | "qwen" | "qwen2.5" | "qwen3" => Syntax::Hermes,
            "qwen3-coder" | "qwen3coder" | "qwen-coder" | "seed-oss" => Syntax::Qwen3Coder,
            "gemma4" | "gemma-4" | "gemma" => Syntax::Gemma4,
            "llama3" | "llama-3" | "llama" | "llama3.1" | "llama3.2" | "llama3.3" | "llama-3.x" => {
                Syntax::Llama3
            }
            "mistral" | "mistral-nemo" | "devstral" => Syntax::Mistral,
            "deepseek-v3" | "deepseek" | "deepseek-r1" | "deepseek-v3.1" => Syntax::DeepSeekV3,
            "kimi-k2" | "kimi" => Syntax::KimiK2,
            "gpt-oss" | "harmony" => Syntax::GptOss,
            "anthropic-xml" | "anthropic" | "invoke" | "minimax" | "minimax-m2" => {
                Syntax::AnthropicXml
            }
            "function-call" | "function_call" => Syntax::FunctionCall,
            "tool-call-fence" | "fence" | "tool-call-fences" | "fenced" => Syntax::ToolCallFence,
            _ => return None,
        })
    }

    /// The marker texts this syntax's parser keys on: block starts and ends, wrappers, and the
    /// `<think>`/`</think>` reasoning markers every syntax accepts. Used by the
    /// `token.special_split` rule to ask whether each is one token in a vocabulary.
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
        }
        let mut seen = std::collections::HashSet::new();
        out.retain(|t| seen.insert(*t));
        out
    }

    /// Detects the syntax a chat template teaches from the markers in its source text
    /// (the Jinja source, not a render). Most specific markers are checked first; `None` when
    /// the template has no known tool-call markers.
    pub fn detect_from_template(template: &str) -> Option<Syntax> {
        let has = |s: &str| template.contains(s);
        if has("<|tool_call>") || has("<tool_call|>") {
            Some(Syntax::Gemma4)
        } else if has("<|tool_calls_section_begin|>") {
            Some(Syntax::KimiK2)
        } else if has("tool▁calls▁begin") || has("tool▁call▁begin") {
            Some(Syntax::DeepSeekV3)
        } else if has("<|channel|>") && has("<|message|>") {
            Some(Syntax::GptOss)
        } else if has("<function=") && has("<parameter=") {
            Some(Syntax::Qwen3Coder)
        } else if has("<tool_call>") {
            Some(Syntax::Hermes)
        } else if has("[TOOL_CALLS]") {
            Some(Syntax::Mistral)
        } else if has("<invoke name=") || has("<invoke name=\\\"") {
            Some(Syntax::AnthropicXml)
        } else if has("<function_call>") {
            Some(Syntax::FunctionCall)
        } else if has("```tool_call") {
            Some(Syntax::ToolCallFence)
        } else if has("<|python_tag|>") || (has("<|start_header_id|>") && has("\"parameters\"")) {
            Some(Syntax::Llama3)
        } else {
            None
        }
    }

    /// Detects the syntax of raw model text: the syntax of the earliest start marker found
    /// (`<tool_call>` followed by `<function=` counts as qwen3-coder), else `llama3` when the
    /// text (after whitespace) starts with `{` and contains `"name"`. `None` when nothing matches.
    pub fn detect_from_text(text: &str) -> Option<Syntax> {
        let mut best: Option<(usize, Syntax)> = None;
        for m in MARKERS {
            let Some(sx) = m.syntax else { continue };
            if !matches!(m.kind, MarkerKind::Block { .. } | MarkerKind::HarmonyHeader) {
                continue;
            }
            if let Some(p) = text.find(m.text)
                && best.is_none_or(|(b, _)| p < b)
            {
                let mut sx = sx;
                if sx == Syntax::Hermes
                    && text[p + m.text.len()..]
                        .trim_start()
                        .starts_with("<function=")
                {
                    sx = Syntax::Qwen3Coder;
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
    /// `</think>` with no `<think>` before it: the prompt opened the thinking block, so the
    /// text so far was reasoning.
    OrphanThinkClose,
    /// Wrapper or orphan marker removed from content (`<function_calls>`, `<|end|>`, …).
    Drop,
    /// GPT-OSS message header, held until `<|message|>`.
    HarmonyHeader,
}

/// One marker of one syntax (`syntax: None` = every syntax: reasoning).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Marker {
    pub text: &'static str,
    pub syntax: Option<Syntax>,
    pub kind: MarkerKind,
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
    }
}
const fn drop(text: &'static str, s: Syntax) -> Marker {
    Marker {
        text,
        syntax: Some(s),
        kind: MarkerKind::Drop,
    }
}

pub(crate) const THINK_ENDS: &[&str] = &["</think>"];
/// Kimi K2 may open its calls inside the thinking block (llama.cpp test-chat.cpp, Kimi-K2-Thinking).
pub(crate) const THINK_ENDS_KIMI: &[&str] = &[
    "</think>",
    "<|tool_calls_section_begin|>",
    "<|tool_call_begin|>",
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

/// Every marker. Longest-match wins when several match at one position.
pub(crate) const MARKERS: &[Marker] = &[
    Marker {
        text: "<think>",
        syntax: None,
        kind: MarkerKind::Reasoning { ends: THINK_ENDS },
    },
    Marker {
        text: "</think>",
        syntax: None,
        kind: MarkerKind::OrphanThinkClose,
    },
    // hermes / qwen3-coder share <tool_call>; the body decides.
    block("<tool_call>", Syntax::Hermes, &["</tool_call>"], false),
    block("<tool_call>", Syntax::Qwen3Coder, &["</tool_call>"], false),
    block("<function=", Syntax::Qwen3Coder, &["</function>"], false),
    drop("</tool_call>", Syntax::Qwen3Coder),
    // gemma 4
    block("<|tool_call>", Syntax::Gemma4, &["<tool_call|>"], false),
    Marker {
        text: "<|channel>thought",
        syntax: Some(Syntax::Gemma4),
        kind: MarkerKind::Reasoning {
            ends: GEMMA_THOUGHT_ENDS,
        },
    },
    drop("<channel|>", Syntax::Gemma4),
    drop("<|channel>", Syntax::Gemma4),
    // llama 3
    block(
        "<|python_tag|>",
        Syntax::Llama3,
        &["<|eom_id|>", "<|eot_id|>"],
        true,
    ),
    // mistral
    Marker {
        text: "[TOOL_CALLS]",
        syntax: Some(Syntax::Mistral),
        kind: MarkerKind::Block {
            end: End::MistralJson,
        },
    },
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
    // kimi
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
    // gpt-oss harmony
    Marker {
        text: "<|channel|>",
        syntax: Some(Syntax::GptOss),
        kind: MarkerKind::HarmonyHeader,
    },
    Marker {
        text: "<|start|>",
        syntax: Some(Syntax::GptOss),
        kind: MarkerKind::HarmonyHeader,
    },
    drop("<|end|>", Syntax::GptOss),
    drop("<|return|>", Syntax::GptOss),
    drop("<|call|>", Syntax::GptOss),
    // anthropic-style xml
    block("<invoke", Syntax::AnthropicXml, &["</invoke>"], false),
    drop("<function_calls>", Syntax::AnthropicXml),
    drop("</function_calls>", Syntax::AnthropicXml),
    drop("<minimax:tool_call>", Syntax::AnthropicXml),
    drop("</minimax:tool_call>", Syntax::AnthropicXml),
    // neutral
    block(
        "<function_call>",
        Syntax::FunctionCall,
        &["</function_call>"],
        false,
    ),
    block("```tool_call", Syntax::ToolCallFence, &["```"], false),
];
