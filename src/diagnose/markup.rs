//! Finding tool-call and tool-result markup in text the server returned as plain content.
//!
//! Call markup is recognised by the start markers of the syntaxes in the field (see
//! docs/check.md and the parser's syntax table): Hermes/Qwen `<tool_call>`, Qwen3-Coder
//! `<function=N>`, Gemma 4 `<|tool_call>`, DeepSeek `<｜tool▁calls▁begin｜>`, Kimi K2,
//! Mistral `[TOOL_CALLS]`, Llama `<|python_tag|>`, MiniMax / prompt-emulated `<invoke name=`,
//! `<function_call>`, Command R7B, Nemotron, LFM2, FunctionGemma, fenced `tool_call` blocks, and
//! a bare `{"name": <known tool>, "arguments"|"parameters": …}` object.

use serde_json::Value;

/// Call markup found in a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallMarkup {
    /// Byte offset of the marker in the text.
    pub offset: usize,
    /// Syntax family name (`hermes`, `gemma4`, `bare_json`, …).
    pub syntax: &'static str,
    /// The marker text (or the start of the bare JSON).
    pub marker: String,
    /// Tool name, when it could be read.
    pub name: Option<String>,
}

/// Start markers of call syntaxes, with their family names. Longer markers first where one is
/// a prefix of another.
const CALL_MARKERS: &[(&str, &str)] = &[
    ("<seed:tool_call>", "seed-oss"),
    ("<minimax:tool_call>", "minimax"),
    ("<tool_call>", "hermes"),
    ("<|tool_call>", "gemma4"),
    ("<function_call>", "function_call"),
    ("<function=", "qwen3-coder"),
    ("<｜tool▁calls▁begin｜>", "deepseek"),
    ("<｜tool▁call▁begin｜>", "deepseek"),
    ("<｜DSML｜function_calls>", "deepseek-dsml"),
    ("<｜DSML｜tool_calls>", "deepseek-dsml"),
    ("<|tool_calls_section_begin|>", "kimi-k2"),
    ("[TOOL_CALLS]", "mistral"),
    ("<|python_tag|>", "llama3"),
    ("<invoke name=", "invoke"),
    ("<|START_ACTION|>", "command-r7b"),
    ("<TOOLCALL>", "nemotron"),
    ("<|tool_call_start|>", "lfm2"),
    ("<start_function_call>", "functiongemma"),
    ("```tool_call", "fenced"),
    ("to=functions.", "gpt-oss"),
];

/// Tool-result markers a model must never write itself (the template writes them for `tool`
/// messages): Hermes/Qwen `<tool_response>`, Gemma 4 `<|tool_response>`, `<tool_result>`,
/// Anthropic-prompted `<function_results>`, DeepSeek `<｜tool▁output▁begin｜>`, Mistral
/// `[TOOL_RESULTS]`, Llama 3 `ipython` header, FunctionGemma `<start_function_response>`,
/// Command R7B `<|START_TOOL_RESULT|>`.
const RESULT_MARKERS: &[&str] = &[
    "<tool_response>",
    "<|tool_response>",
    "<tool_result>",
    "<function_results>",
    "<｜tool▁output▁begin｜>",
    "<｜tool▁outputs▁begin｜>",
    "[TOOL_RESULTS]",
    "<|start_header_id|>ipython",
    "<start_function_response>",
    "<|START_TOOL_RESULT|>",
];

/// Call markup in `text`, in order of offset. `tools` (the request's `tools` array) lets a bare
/// JSON object count as a call only when it names an offered tool.
pub fn find_call_markup(text: &str, tool_names: &[String]) -> Vec<CallMarkup> {
    let mut out: Vec<CallMarkup> = Vec::new();
    for &(marker, syntax) in CALL_MARKERS {
        let mut from = 0;
        while let Some(pos) = text[from..].find(marker) {
            let at = from + pos;
            from = at + marker.len();
            if out
                .iter()
                .any(|m| m.offset <= at && at < m.offset + m.marker.len())
            {
                continue;
            }
            out.push(CallMarkup {
                offset: at,
                syntax,
                marker: marker.to_owned(),
                name: name_after(&text[at + marker.len()..]),
            });
        }
    }
    // Bare JSON objects naming an offered tool.
    for (at, _) in text.match_indices('{') {
        if out.iter().any(|m| m.offset <= at && at < m.offset + 200) {
            continue;
        }
        let mut de = serde_json::Deserializer::from_str(&text[at..]).into_iter::<Value>();
        if let Some(Ok(v)) = de.next() {
            let name = v
                .get("name")
                .and_then(Value::as_str)
                .or_else(|| v.pointer("/function/name").and_then(Value::as_str));
            let has_args = ["arguments", "parameters", "input"]
                .iter()
                .any(|k| v.get(k).is_some() || v.get("function").and_then(|f| f.get(k)).is_some());
            if let Some(n) = name.filter(|n| has_args && tool_names.iter().any(|t| t == n)) {
                out.push(CallMarkup {
                    offset: at,
                    syntax: "bare_json",
                    marker: "{".into(),
                    name: Some(n.to_owned()),
                });
            }
        }
    }
    out.sort_by_key(|m| m.offset);
    out
}

/// Reads a tool name right after a call marker: `{"name": "N"`, `N>` (`<function=N>`),
/// `call:N{` (Gemma 4), `"N"` (`<invoke name="N">`), `functions.N` (Kimi/GPT-OSS).
fn name_after(rest: &str) -> Option<String> {
    let head: String = rest.chars().take(300).collect();
    if let Some(i) = head.find("\"name\"") {
        let after = head[i + 6..]
            .trim_start()
            .strip_prefix(':')?
            .trim_start()
            .strip_prefix('"')?;
        return after
            .split('"')
            .next()
            .map(str::to_owned)
            .filter(|s| !s.is_empty());
    }
    let h = head.trim_start();
    let h = h
        .strip_prefix("call:")
        .or_else(|| h.strip_prefix("functions."))
        .unwrap_or(h);
    let h = h.trim_start_matches(['"', '\'']);
    let name: String = h
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '-' || *c == '.')
        .collect();
    (!name.is_empty()).then_some(name)
}

/// Offsets and markers of tool-result blocks written in `text`.
pub fn find_result_markup(text: &str) -> Vec<(usize, &'static str)> {
    let mut out: Vec<(usize, &'static str)> = RESULT_MARKERS
        .iter()
        .filter_map(|m| text.find(m).map(|at| (at, *m)))
        .collect();
    out.sort();
    out
}

/// An excerpt of at most `n` characters of `text` starting at byte `at` (clamped to a char
/// boundary).
pub fn excerpt(text: &str, at: usize, n: usize) -> String {
    let mut start = at.min(text.len());
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    text[start..].chars().take(n).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hermes_block_with_name() {
        let t = "ok\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>";
        let m = find_call_markup(t, &[]);
        assert_eq!(m.len(), 1);
        assert_eq!(
            (m[0].offset, m[0].syntax, m[0].name.as_deref()),
            (3, "hermes", Some("get_weather"))
        );
    }

    #[test]
    fn other_syntaxes() {
        assert_eq!(
            find_call_markup("<|tool_call>call:get_time{tz:1}<tool_call|>", &[])[0]
                .name
                .as_deref(),
            Some("get_time")
        );
        assert_eq!(
            find_call_markup("<function=set_limit>\n", &[])[0].syntax,
            "qwen3-coder"
        );
        assert_eq!(
            find_call_markup("<invoke name=\"f\">", &[])[0]
                .name
                .as_deref(),
            Some("f")
        );
        assert!(find_call_markup("plain answer {not json}", &["f".into()]).is_empty());
    }

    #[test]
    fn bare_json_needs_known_tool() {
        let t = r#"{"name": "get_time", "arguments": {"city": "Lisbon"}}"#;
        assert_eq!(
            find_call_markup(t, &["get_time".into()])[0].syntax,
            "bare_json"
        );
        assert!(find_call_markup(t, &["other".into()]).is_empty());
    }

    #[test]
    fn results() {
        assert_eq!(
            find_result_markup("x<tool_response>\n{}\n</tool_response>"),
            vec![(1, "<tool_response>")]
        );
        assert!(find_result_markup("<tool_call>").is_empty());
    }
}
