//! Control markers: finding them in a template source or a rendered prompt, classifying them by
//! role (turns, reasoning, tool declarations, tool calls, tool results, BOS/EOS, media), and
//! reading the turn-role sequence of a render. Pure.
//!
//! A *marker* is a piece of text that chat templates use as structure rather than content. The
//! shapes recognised (see /work/shared/notes/tool-call-syntaxes.md for the families):
//!
//! * `<|name|>` (ChatML, Llama 3, Kimi, harmony; also Gemma 4's string delimiter `<|"|>`),
//! * `<|name>` and `<name|>` (Gemma 4 open/close: `<|turn>`, `<turn|>`, `<|tool_call>`),
//! * `<｜name｜>` (DeepSeek, full-width bars U+FF5C),
//! * XML-like tags `<name>`, `</name>`, `<ns:name>` (Hermes `<tool_call>`, `<think>`,
//!   `<start_of_turn>`, `<s>`, `</s>`); and `<name=…>` (Qwen3-Coder `<function=…>`,
//!   `<parameter=…>`), normalised to `<name=…>`,
//! * `[NAME]` / `[/NAME]` in upper case (Mistral `[TOOL_CALLS]`, `[INST]`).
//!
//! Classification is by name, following the vocabularies of the families above; what no rule
//! claims is [`Role::Other`].

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// What a marker is used for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Turn structure: `<|im_start|>`, `<|turn>`, `<|start_header_id|>`, `<|eot_id|>`, `[INST]`.
    Turn,
    /// Reasoning: `<think>`, `<|channel>`, `<|think|>`.
    Reasoning,
    /// Tool declarations in the system part: `<tools>`, `<|tool>`, `[AVAILABLE_TOOLS]`.
    ToolDeclaration,
    /// Tool calls: `<tool_call>`, `<|tool_call>`, `<|python_tag|>`, `[TOOL_CALLS]`, `<function=…>`.
    ToolCall,
    /// Tool results: `<tool_response>`, `<|tool_response>`, `[TOOL_RESULTS]`.
    ToolResult,
    /// Beginning of sequence: the template's `bos_token`, `<s>`, `<bos>`, `<|begin_of_text|>`.
    Bos,
    /// End of sequence: the template's `eos_token`, `</s>`, `<eos>`, `<|end_of_text|>`.
    Eos,
    /// Images, audio, video placeholders.
    Media,
    /// Anything else marker-shaped (`<|"|>`, `<IMPORTANT>`).
    Other,
}

impl Role {
    /// All roles in report order.
    pub const ALL: [Role; 9] = [
        Role::Turn,
        Role::Reasoning,
        Role::ToolDeclaration,
        Role::ToolCall,
        Role::ToolResult,
        Role::Bos,
        Role::Eos,
        Role::Media,
        Role::Other,
    ];

    /// Stable snake_case name (the JSON key).
    pub fn name(self) -> &'static str {
        match self {
            Role::Turn => "turn",
            Role::Reasoning => "reasoning",
            Role::ToolDeclaration => "tool_declaration",
            Role::ToolCall => "tool_call",
            Role::ToolResult => "tool_result",
            Role::Bos => "bos",
            Role::Eos => "eos",
            Role::Media => "media",
            Role::Other => "other",
        }
    }
}

/// One marker occurrence: its (normalised) text and byte range in the scanned text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkerHit {
    /// Normalised marker text (`<function=…>` for `<function=get_weather>`).
    pub text: String,
    /// Byte offset of the first byte, 0-based.
    pub start: usize,
    /// Byte offset one past the last byte.
    pub end: usize,
}

const MAX_MARKER: usize = 48;

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':' | '▁' | '"')
}

/// Length in bytes of a marker starting at `s[0..]`, and its normalised text, if one starts there.
pub fn marker_at(s: &str) -> Option<(usize, String)> {
    let bytes = s.as_bytes();
    let first = *bytes.first()?;
    let window = &s[..floor_char_boundary(s, MAX_MARKER.min(s.len()))];
    if first == b'<' {
        let rest = &window[1..];
        // <｜…｜>
        if let Some(inner) = rest.strip_prefix('｜') {
            let close = inner.find("｜>")?;
            let name = &inner[..close];
            if !name.is_empty() && !name.contains(char::is_whitespace) && !name.contains('<') {
                let len = 1 + '｜'.len_utf8() + close + "｜>".len();
                return Some((len, s[..len].to_owned()));
            }
            return None;
        }
        // <|name|> or <|name>
        if let Some(inner) = rest.strip_prefix('|') {
            let n: usize = inner
                .chars()
                .take_while(|&c| is_name_char(c))
                .map(char::len_utf8)
                .sum();
            if n == 0 {
                return None;
            }
            let after = &inner[n..];
            if after.starts_with("|>") {
                let len = 2 + n + 2;
                return Some((len, s[..len].to_owned()));
            }
            if after.starts_with('>') && !inner[..n].contains('"') {
                let len = 2 + n + 1;
                return Some((len, s[..len].to_owned()));
            }
            return None;
        }
        // </name>, <name>, <name|>, <name=…>
        let (slash, body) = match rest.strip_prefix('/') {
            Some(b) => (1, b),
            None => (0, rest),
        };
        let mut chars = body.chars();
        let c0 = chars.next()?;
        if !(c0.is_ascii_alphabetic() || c0 == '_') {
            return None;
        }
        let n: usize = body
            .chars()
            .take_while(|&c| is_name_char(c) && c != '"')
            .map(char::len_utf8)
            .sum();
        let after = &body[n..];
        let head = 1 + slash;
        if after.starts_with("|>") && slash == 0 {
            let len = head + n + 2;
            return Some((len, s[..len].to_owned()));
        }
        if after.starts_with('>') {
            let len = head + n + 1;
            return Some((len, s[..len].to_owned()));
        }
        if after.starts_with('=') && slash == 0 {
            // <function=NAME> — keep the tag, elide the value.
            let close = after.find('>')?;
            let value = &after[1..close];
            if value.contains('<') || value.contains('\n') || close > 64 {
                return None;
            }
            let len = head + n + close + 1;
            return Some((len, format!("<{}=…>", &body[..n])));
        }
        return None;
    }
    if first == b'[' {
        let rest = &window[1..];
        let (slash, body) = match rest.strip_prefix('/') {
            Some(b) => (1, b),
            None => (0, rest),
        };
        let n = body
            .bytes()
            .take_while(|b| b.is_ascii_uppercase() || *b == b'_')
            .count();
        if n >= 3 && body[n..].starts_with(']') && body.as_bytes()[0].is_ascii_uppercase() {
            let len = 1 + slash + n + 1;
            return Some((len, s[..len].to_owned()));
        }
    }
    None
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Every marker occurrence in `text`, left to right, non-overlapping.
///
/// Jinja comments (`{# … #}`) are skipped when `skip_jinja_comments` is set (template sources).
pub fn scan(text: &str, skip_jinja_comments: bool) -> Vec<MarkerHit> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < text.len() {
        let rest = &text[i..];
        if skip_jinja_comments && rest.starts_with("{#") {
            match rest.find("#}") {
                Some(e) => {
                    i += e + 2;
                    continue;
                }
                None => break,
            }
        }
        let b = rest.as_bytes()[0];
        if (b == b'<' || b == b'[')
            && let Some((len, norm)) = marker_at(rest)
        {
            out.push(MarkerHit {
                text: norm,
                start: i,
                end: i + len,
            });
            i += len;
            continue;
        }
        // Nothing starts before the next `<`, `[` (or `{` of a Jinja comment): all ASCII, so
        // the jump lands on a character boundary.
        i += 1 + rest.as_bytes()[1..]
            .iter()
            .position(|&c| c == b'<' || c == b'[' || (skip_jinja_comments && c == b'{'))
            .unwrap_or(rest.len() - 1);
    }
    // Prose placeholders (Qwen3's `<function-name>`) are not markers: the same rule as
    // `token.pseudo_special` ([`crate::tokens::is_placeholder`]).
    let all: std::collections::HashSet<String> = out.iter().map(|h| h.text.clone()).collect();
    let all: std::collections::HashSet<&str> = all.iter().map(String::as_str).collect();
    let keep: Vec<bool> = out
        .iter()
        .map(|h| !crate::tokens::is_placeholder(&h.text, &all))
        .collect();
    let mut k = keep.into_iter();
    out.retain(|_| k.next().unwrap_or(true));
    out
}

/// Bare lower-case name of a marker: `<|im_start|>` → `im_start`, `</tool_call>` → `tool_call`.
fn bare(marker: &str) -> String {
    marker
        .trim_start_matches(['<', '['])
        .trim_end_matches(['>', ']'])
        .trim_matches(|c| c == '|' || c == '｜' || c == '/')
        .trim_end_matches("=…")
        .to_lowercase()
}

/// True for markers that close something (`</x>`, `<x|>`, `[/X]`, `…_end|>`).
pub fn is_closing(marker: &str) -> bool {
    let b = bare(marker);
    marker.starts_with("</")
        || marker.starts_with("[/")
        || (marker.ends_with("|>") && !marker.starts_with("<|") && !marker.starts_with("<｜"))
        || b.ends_with("_end")
        || b.starts_with("end_")
        || b.ends_with("end")
}

/// Classifies a marker by name. `bos`/`eos` are the template's `bos_token`/`eos_token`, when
/// known; they win over the name rules.
pub fn classify(marker: &str, bos: Option<&str>, eos: Option<&str>) -> Role {
    if bos.is_some_and(|b| !b.is_empty() && b == marker) {
        return Role::Bos;
    }
    if eos.is_some_and(|e| !e.is_empty() && e == marker) {
        return Role::Eos;
    }
    let b = bare(marker);
    let has = |k: &str| b.contains(k);
    if matches!(b.as_str(), "bos" | "s" | "begin_of_text" | "startoftext")
        || b.contains("begin▁of▁sentence")
    {
        return Role::Bos;
    }
    if matches!(b.as_str(), "eos" | "end_of_text" | "endoftext") || b.contains("end▁of▁sentence")
    {
        return Role::Eos;
    }
    if marker == "</s>" {
        return Role::Eos;
    }
    if has("tool_response")
        || has("tool_result")
        || has("tool_output")
        || has("tool▁output")
        || has("observation")
        || b == "function_output"
    {
        return Role::ToolResult;
    }
    if has("tool_call")
        || has("toolcall")
        || has("tool▁call")
        || has("function_call")
        || has("python_tag")
        || has("start_action")
        || has("end_action")
        || has("call_id")
        || has("arg_key")
        || has("arg_value")
        || matches!(
            b.as_str(),
            "function=…"
                | "parameter=…"
                | "function"
                | "parameter"
                | "invoke"
                | "args"
                | "call"
                | "eom_id"
        )
        || b.starts_with("function=")
        || b.starts_with("parameter=")
        || b.starts_with("minimax:tool")
        || b.starts_with("seed:tool")
        || b.contains("dsml")
    {
        return Role::ToolCall;
    }
    if matches!(
        b.as_str(),
        "tools"
            | "tool"
            | "available_tools"
            | "functions"
            | "tool_list"
            | "tool_declare"
            | "tool_definitions"
    ) || has("available_tools")
        || has("tool_declare")
        || has("tools_section")
    {
        return Role::ToolDeclaration;
    }
    if has("think") || has("thought") || has("reasoning") || b == "channel" || has("analysis") {
        return Role::Reasoning;
    }
    if has("image") || has("video") || has("audio") || has("vision") || has("_pad") || has("media")
    {
        return Role::Media;
    }
    if has("im_start")
        || has("im_end")
        || has("im_sep")
        || b == "turn"
        || has("of_turn")
        || has("header_id")
        || b == "eot_id"
        || b == "start"
        || b == "end"
        || b == "message"
        || b == "return"
        || matches!(
            b.as_str(),
            "inst" | "system_prompt" | "system" | "user" | "assistant" | "developer"
        )
        || has("user｜")
        || has("assistant｜")
        || b == "user"
        || b == "assistant"
        || has("turn_token")
        || has("role")
    {
        return Role::Turn;
    }
    Role::Other
}

/// True for markers that open a turn and are followed by the role name
/// (`<|im_start|>user`, `<|turn>model`, `<|start_header_id|>user<|end_header_id|>`,
/// `<start_of_turn>user`, harmony `<|start|>assistant`).
pub fn opens_turn_with_role(marker: &str) -> bool {
    matches!(
        bare(marker).as_str(),
        "im_start" | "turn" | "start_header_id" | "start_of_turn" | "start"
    ) && (!marker.ends_with("|>") || marker.starts_with("<|"))
}

/// Most chat templates an [`Inventories`] keeps.
pub const TEMPLATE_INVENTORY_CACHE: usize = 8;

/// Marker inventories of chat template sources, kept by their owner across the exchanges it
/// analyses (`check` asks for the same template's inventory for every exchange of a session):
/// at most [`TEMPLATE_INVENTORY_CACHE`] templates, keyed by source, BOS and EOS text, emptied
/// when full. Not `Sync`: one per worker thread (the owner is [`crate::analysis::Caches`]).
#[derive(Debug, Default)]
pub struct Inventories {
    kept: std::cell::RefCell<Vec<(InventoryKey, std::sync::Arc<MarkerInventory>)>>,
}

type InventoryKey = (String, Option<String>, Option<String>);

impl Inventories {
    /// [`MarkerInventory::of`] the chat template `source` (Jinja comments skipped), from the
    /// kept ones when this source, BOS and EOS were asked for before.
    pub fn of_template(
        &self,
        source: &str,
        bos: Option<&str>,
        eos: Option<&str>,
    ) -> std::sync::Arc<MarkerInventory> {
        let mut kept = self.kept.borrow_mut();
        if let Some((_, inv)) = kept
            .iter()
            .find(|((s, b, e), _)| s == source && b.as_deref() == bos && e.as_deref() == eos)
        {
            return inv.clone();
        }
        if kept.len() >= TEMPLATE_INVENTORY_CACHE {
            kept.clear();
        }
        let inv = std::sync::Arc::new(MarkerInventory::of(source, true, bos, eos));
        let key = (
            source.to_owned(),
            bos.map(str::to_owned),
            eos.map(str::to_owned),
        );
        kept.push((key, inv.clone()));
        inv
    }
}

/// Markers of one text, grouped by role, with occurrence counts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MarkerInventory {
    /// role name → marker → occurrences.
    pub by_role: BTreeMap<Role, BTreeMap<String, usize>>,
}

impl MarkerInventory {
    /// Inventory of `text`. `template_source` skips Jinja comments.
    pub fn of(
        text: &str,
        template_source: bool,
        bos: Option<&str>,
        eos: Option<&str>,
    ) -> MarkerInventory {
        let mut inv = MarkerInventory::default();
        for h in scan(text, template_source) {
            *inv.by_role
                .entry(classify(&h.text, bos, eos))
                .or_default()
                .entry(h.text)
                .or_default() += 1;
        }
        // BOS/EOS strings that are not marker-shaped (e.g. a bare word) still count when present.
        for (tok, role) in [(bos, Role::Bos), (eos, Role::Eos)] {
            if let Some(t) =
                tok.filter(|t| !t.is_empty() && marker_at(t).is_none_or(|(l, _)| l != t.len()))
            {
                let n = text.matches(t).count();
                if n > 0 {
                    inv.by_role.entry(role).or_default().insert(t.to_owned(), n);
                }
            }
        }
        inv
    }

    /// Whether `marker` is one of the markers of `role` (no copy of the set).
    pub fn has(&self, role: Role, marker: &str) -> bool {
        self.by_role
            .get(&role)
            .is_some_and(|m| m.contains_key(marker))
    }

    /// The set of markers of `role`.
    pub fn set(&self, role: Role) -> BTreeSet<String> {
        self.by_role
            .get(&role)
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// Occurrences of `role` markers: marker → count.
    pub fn counts(&self, role: Role) -> BTreeMap<String, usize> {
        self.by_role.get(&role).cloned().unwrap_or_default()
    }
}

/// The sequence of turn roles in a rendered prompt: the word right after each turn-opening
/// marker (`<|im_start|>assistant` → `assistant`; `<|start_header_id|>ipython<|end_header_id|>`
/// → `ipython`; `<|turn>model` → `model`). A turn opener followed by no word gives `""`.
pub fn turn_roles(rendered: &str) -> Vec<String> {
    let hits = scan(rendered, false);
    let mut out = Vec::new();
    for h in &hits {
        if !opens_turn_with_role(&h.text) {
            continue;
        }
        let after = &rendered[h.end..];
        let word: String = after
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '-')
            .collect();
        out.push(word);
    }
    out
}

/// What a template source says about BOS/EOS: whether it prints the `bos_token` / `eos_token`
/// variables itself, and literal BOS/EOS markers it writes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BosEos {
    /// The template writes `bos_token` (so a server that also adds BOS doubles it unless it
    /// strips it; llama.cpp tools/server checks this, build 11434).
    pub prints_bos_token: bool,
    /// The template writes `eos_token`.
    pub prints_eos_token: bool,
    /// The BOS string the source declares (tokenizer_config / GGUF / server), if known.
    pub bos_token: Option<String>,
    /// The EOS string the source declares, if known.
    pub eos_token: Option<String>,
}

impl BosEos {
    /// Reads the template source for `{{ bos_token }}` / `{{- bos_token }}` / `bos_token +`…
    pub fn of(source: &str, bos: Option<&str>, eos: Option<&str>) -> BosEos {
        let code = strip_jinja_comments(source);
        let uses = |var: &str| {
            let mut from = 0;
            while let Some(p) = code[from..].find(var) {
                let at = from + p;
                let before = code[..at].chars().next_back();
                let after = code[at + var.len()..].chars().next();
                let word_edge =
                    |c: Option<char>| c.is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
                if word_edge(before) && word_edge(after) {
                    // inside an output or a set expression, not in a condition like `if bos_token`
                    let line_start = code[..at].rfind('\n').map_or(0, |i| i + 1);
                    let ctx = &code[line_start..at];
                    let expr_open = ctx
                        .rfind("{{")
                        .is_some_and(|o| ctx.rfind("}}").is_none_or(|c| c < o));
                    if expr_open || ctx.trim_end().ends_with('+') || ctx.trim_end().ends_with('~') {
                        return true;
                    }
                }
                from = at + var.len();
            }
            false
        };
        BosEos {
            prints_bos_token: uses("bos_token"),
            prints_eos_token: uses("eos_token"),
            bos_token: bos.filter(|s| !s.is_empty()).map(str::to_owned),
            eos_token: eos.filter(|s| !s.is_empty()).map(str::to_owned),
        }
    }
}

/// The template source with `{# … #}` comments removed.
pub fn strip_jinja_comments(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let mut rest = source;
    while let Some(p) = rest.find("{#") {
        out.push_str(&rest[..p]);
        match rest[p..].find("#}") {
            Some(e) => rest = &rest[p + e + 2..],
            None => {
                rest = "";
                break;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(s: &str) -> Vec<String> {
        scan(s, false).into_iter().map(|h| h.text).collect()
    }

    #[test]
    fn shapes() {
        assert_eq!(
            texts("<|im_start|>user\nhi<|im_end|>"),
            ["<|im_start|>", "<|im_end|>"]
        );
        assert_eq!(
            texts("<|turn>model\n<|tool_call>call:f{a:<|\"|>x<|\"|>}<tool_call|><turn|>"),
            [
                "<|turn>",
                "<|tool_call>",
                "<|\"|>",
                "<|\"|>",
                "<tool_call|>",
                "<turn|>"
            ]
        );
        assert_eq!(
            texts("<tool_call>\n<function=get_x>\n<parameter=a>\n1\n</parameter>"),
            [
                "<tool_call>",
                "<function=…>",
                "<parameter=…>",
                "</parameter>"
            ]
        );
        assert_eq!(
            texts("[TOOL_CALLS][{\"a\":1}] [INST] x [/INST] [1, 2]"),
            ["[TOOL_CALLS]", "[INST]", "[/INST]"]
        );
        assert_eq!(
            texts("<｜tool▁calls▁begin｜><｜tool▁sep｜>"),
            ["<｜tool▁calls▁begin｜>", "<｜tool▁sep｜>"]
        );
        assert_eq!(texts("if a < b and c > d or x<y"), Vec::<String>::new());
        assert_eq!(texts("{# <|ignored|> #}<s>",), ["<|ignored|>", "<s>"]);
        assert_eq!(scan("{# <|ignored|> #}<s>", true).len(), 1);
    }

    #[test]
    fn roles() {
        assert_eq!(classify("<|im_start|>", None, None), Role::Turn);
        assert_eq!(classify("<|eot_id|>", None, None), Role::Turn);
        assert_eq!(classify("<think>", None, None), Role::Reasoning);
        assert_eq!(classify("<|channel>", None, None), Role::Reasoning);
        assert_eq!(classify("<tools>", None, None), Role::ToolDeclaration);
        assert_eq!(classify("<|tool>", None, None), Role::ToolDeclaration);
        assert_eq!(classify("<tool|>", None, None), Role::ToolDeclaration);
        assert_eq!(classify("<tool_call|>", None, None), Role::ToolCall);
        assert_eq!(classify("<function=…>", None, None), Role::ToolCall);
        assert_eq!(classify("<|python_tag|>", None, None), Role::ToolCall);
        assert_eq!(classify("<tool_response>", None, None), Role::ToolResult);
        assert_eq!(classify("<|begin_of_text|>", None, None), Role::Bos);
        assert_eq!(classify("<bos>", Some("<bos>"), None), Role::Bos);
        assert_eq!(classify("<|image_pad|>", None, None), Role::Media);
        assert_eq!(classify("<|\"|>", None, None), Role::Other);
    }

    #[test]
    fn roles_sequence() {
        let p = "<|im_start|>system\nx<|im_end|>\n<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n";
        assert_eq!(turn_roles(p), ["system", "user", "assistant"]);
        let l = "<|start_header_id|>ipython<|end_header_id|>\n\n1<|eot_id|>";
        assert_eq!(turn_roles(l), ["ipython"]);
        let g = "<|turn>system\nx<turn|>\n<|turn>model\n";
        assert_eq!(turn_roles(g), ["system", "model"]);
    }

    #[test]
    fn bos_usage() {
        assert!(BosEos::of("{{- bos_token }}{% for m in messages %}", None, None).prints_bos_token);
        assert!(BosEos::of("{{ bos_token + '<|im_start|>' }}", None, None).prints_bos_token);
        assert!(!BosEos::of("{# {{ bos_token }} #}hello", None, None).prints_bos_token);
        assert!(!BosEos::of("{% if bos_token %}x{% endif %}", None, None).prints_bos_token);
    }

    #[test]
    fn prose_placeholders_are_not_markers() {
        // Qwen3-0.6B's tool instructions (llama.cpp models/templates/Qwen-Qwen3-0.6B.jinja).
        let t = "<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>";
        let found: Vec<String> = scan(t, false).into_iter().map(|h| h.text).collect();
        assert_eq!(found, ["<tool_call>", "</tool_call>"]);
    }
}
