//! Content the model never saw: every request message, tool result and tool checked against
//! the rendered prompt (the server's render when recorded: `/apply-template`,
//! `__verbose.prompt`, or Ollama's render of its `/api/show` template).
//!
//! * `input.message_dropped` — a message whose text the prompt does not contain (a `system`
//!   message inside Anthropic `messages` that the template skips, a `developer` message, a
//!   user turn a template drops). One finding per message. Earlier assistant reasoning a
//!   template leaves out by design is one info note per exchange, not a fault.
//! * `loop.result_unrendered` — a tool result whose text the prompt does not contain.
//! * `input.tool_dropped` — a tool whose name the prompt never prints: the chat template
//!   dropped it (the layer is named; tools the API conversion drops are found where the
//!   conversion is, with the same id). One finding per tool.
//!
//! Messages are read in their chat shape ([`crate::diagnose::history::chat_messages`]: Anthropic
//! bodies converted as llama-server b11434 converts them, server-chat.cpp
//! `server_chat_convert_anthropic_to_oai`, which passes a `system` entry inside `messages`
//! through as a `role: "system"` message; whether it is printed is then the template's
//! choice).

use serde_json::Value;

use crate::diagnose::ExchangeContext;
use crate::finding::{Evidence, Finding, Pane, Rule, Severity};

/// Request texts shorter than this (bytes, trimmed) mark no span: a one-word message (`"search"`,
/// `"a"`) would otherwise cover the template's own text wherever that word stands (a printed
/// tool's `"name": "search"`), and each of its thousands of occurrences would be a span.
pub const MIN_SPAN_TEXT: usize = 16;

/// Where each request text was found in the prompt: `(start, end)` byte spans of message
/// contents and tool descriptions that occur verbatim (or JSON-escaped), sorted by start and
/// merged where they overlap. Texts shorter than [`MIN_SPAN_TEXT`] and repeated texts count
/// once or not at all. Used by the marker rules and the tool rules to tell the agent's own text
/// from what the template printed. Cost: O(distinct texts · prompt length).
pub fn request_text_spans(
    request: &Value,
    api: crate::session::Api,
    prompt: &str,
) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for t in request_texts(request, api) {
        if t.len() < MIN_SPAN_TEXT || !seen.insert(t.clone()) {
            continue;
        }
        out.extend(
            prompt
                .match_indices(t.as_str())
                .map(|(at, m)| (at, at + m.len())),
        );
        let esc = json_escaped(&t);
        if esc != t {
            out.extend(
                prompt
                    .match_indices(esc.as_str())
                    .map(|(at, m)| (at, at + m.len())),
            );
        }
    }
    out.sort_unstable();
    let mut merged: Vec<(usize, usize)> = Vec::with_capacity(out.len());
    for (s, e) in out {
        match merged.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    merged
}

/// Whether `[at, at + len)` lies inside one of `spans` (sorted, merged: [`request_text_spans`]).
pub fn inside_spans(spans: &[(usize, usize)], at: usize, len: usize) -> bool {
    let k = spans.partition_point(|&(s, _)| s <= at);
    k > 0 && at + len <= spans[k - 1].1
}

/// Every text the agent wrote into the request: message contents (system included) and tool
/// descriptions, trimmed, non-empty.
///
/// A content given as parts (Codex's `input_text` parts, OpenAI/Anthropic text blocks) gives
/// each part's text as well as the joined text: a template prints the parts with its own
/// separators, so only each part stands verbatim in the prompt.
pub fn request_texts(request: &Value, api: crate::session::Api) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for m in crate::diagnose::history::chat_messages(api, request).unwrap_or_default() {
        out.push(
            crate::diagnose::history::content_text(m.get("content"))
                .trim()
                .to_owned(),
        );
        if let Some(parts) = m.get("content").and_then(Value::as_array)
            && parts.len() > 1
        {
            out.extend(
                parts
                    .iter()
                    .filter_map(|p| p.get("text").and_then(Value::as_str))
                    .map(|t| t.trim().to_owned()),
            );
        }
    }
    out.retain(|t| !t.is_empty());
    if let Some(tools) = request.get("tools").and_then(Value::as_array) {
        for t in tools {
            if let Some(d) = t
                .pointer("/function/description")
                .or_else(|| t.get("description"))
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|d| !d.is_empty())
            {
                out.push(d.to_owned());
            }
        }
    }
    out
}

fn json_escaped(s: &str) -> String {
    let q = Value::String(s.to_owned()).to_string();
    q[1..q.len() - 1].to_owned()
}

/// True when `prompt` carries `text`: verbatim, JSON-escaped, or — for a long text a template
/// may trim or re-indent — its first and last 48 bytes (whitespace-trimmed) both.
pub fn prompt_contains(prompt: &str, text: &str) -> bool {
    let t = text.trim();
    if t.is_empty() || prompt.contains(t) || prompt.contains(json_escaped(t).as_str()) {
        return true;
    }
    if t.len() < 120 {
        return false;
    }
    let mut a = 48;
    while !t.is_char_boundary(a) {
        a += 1;
    }
    let mut b = t.len() - 48;
    while !t.is_char_boundary(b) {
        b -= 1;
    }
    let (head, tail) = (t[..a].trim(), t[b..].trim());
    (prompt.contains(head) || prompt.contains(json_escaped(head).as_str()))
        && (prompt.contains(tail) || prompt.contains(json_escaped(tail).as_str()))
}

/// Whether a content given as two or more text parts stands in `prompt` joined by a separator:
/// the template or the API conversion joins parts with its own (llama-server b11434 joins
/// Anthropic text blocks with `\n`), so the parts joined with nothing need not occur verbatim.
fn parts_in(prompt: &str, content: Option<&Value>) -> bool {
    let Some(parts) = content.and_then(Value::as_array) else {
        return false;
    };
    let texts: Vec<&str> = parts
        .iter()
        .filter_map(|p| p.as_str().or_else(|| p.get("text").and_then(Value::as_str)))
        .filter(|t| !t.trim().is_empty())
        .collect();
    // The parts joined as a template or conversion joins them, in their order: each part alone
    // would be found anywhere (`"Run"`, `"ls"` in a system prompt that says "Run ls").
    texts.len() > 1
        && ["\n", "\n\n"]
            .iter()
            .any(|sep| prompt_contains(prompt, &texts.join(sep)))
}

/// `input.message_dropped`, `loop.result_unrendered` and the reasoning note. Empty without a
/// request or a recorded render.
pub fn dropped_messages(cx: &ExchangeContext) -> Vec<Finding> {
    let (Some(req), Some(prompt)) = (&cx.request, &cx.server_prompt) else {
        return Vec::new();
    };
    let Some(msgs) = crate::diagnose::history::chat_messages(cx.api, req) else {
        return Vec::new();
    };
    let from_anthropic = cx.api == crate::session::Api::Anthropic;
    // Anthropic: `system` becomes message 0 of the converted list; pointers name the request.
    let shift = usize::from(from_anthropic && req.get("system").is_some_and(|s| !s.is_null()));
    let mut out = Vec::new();
    let mut reasoning_dropped = Vec::new();
    for (i, m) in msgs.iter().enumerate() {
        let msg = crate::diagnose::history::Msg::from_chat(m);
        let pointer = if from_anthropic && i < shift {
            "/system".to_owned()
        } else {
            format!("/messages/{}", i - shift)
        };
        if !msg.reasoning.trim().is_empty() && !prompt_contains(prompt, &msg.reasoning) {
            reasoning_dropped.push(i - shift);
        }
        if msg.text.trim().is_empty()
            || prompt_contains(prompt, &msg.text)
            || parts_in(prompt, m.get("content"))
        {
            continue;
        }
        let excerpt = Some(crate::diagnose::history::short(msg.text.trim(), 120));
        if msg.is_result() {
            out.push(
                Finding::new(
                    Rule::LoopResultUnrendered,
                    format!(
                        "the tool result at {pointer}{} is not in the rendered prompt: the model never saw the tool's answer",
                        msg.call_id.as_deref().map(|i| format!(" (for `{i}`)")).unwrap_or_default()
                    ),
                    "use a template that prints tool results (role \"tool\"), or send the result as the content the template prints",
                )
                .with_evidence(Evidence {
                    pane: Some(Pane::Template),
                    pointer: Some(pointer),
                    excerpt,
                    ..Default::default()
                }),
            );
        } else {
            out.push(
                Finding::new(
                    Rule::InputMessageDropped,
                    format!(
                        "the {} message at {pointer} ({} bytes) is not in the rendered prompt: the chat template dropped it and the model never saw it",
                        msg.role,
                        msg.text.len()
                    ),
                    if msg.role == "system" && i > 0 {
                        "this template prints only a leading system message: merge later system content into the first system message or a user turn"
                    } else {
                        "use a template that prints this role, or send the content in a role the template prints"
                    },
                )
                .with_evidence(Evidence {
                    pane: Some(Pane::Template),
                    pointer: Some(pointer),
                    excerpt,
                    ..Default::default()
                }),
            );
        }
    }
    if !reasoning_dropped.is_empty() {
        let list = reasoning_dropped
            .iter()
            .map(|i| format!("/messages/{i}"))
            .collect::<Vec<_>>()
            .join(", ");
        let mut f = Finding::new(
            Rule::InputMessageDropped,
            format!(
                "the template leaves out the reasoning of {} earlier assistant message{} ({list}): by design of this template, not a fault",
                reasoning_dropped.len(),
                if reasoning_dropped.len() == 1 { "" } else { "s" }
            ),
            "nothing to change; sending earlier reasoning back costs request bytes only",
        )
        .with_evidence(Evidence {
            pane: Some(Pane::Template),
            pointer: Some(format!("/messages/{}", reasoning_dropped[0])),
            ..Default::default()
        });
        f.severity = Severity::Info;
        out.push(f);
    }
    out
}

/// The request's tools (name, pointer) as the template receives them.
fn tool_names(req: &Value) -> Vec<(String, String)> {
    req.get("tools")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .enumerate()
                .filter_map(|(i, t)| {
                    t.pointer("/function/name")
                        .or_else(|| t.get("name"))
                        .and_then(Value::as_str)
                        .filter(|n| !n.is_empty())
                        .map(|n| (n.to_owned(), format!("/tools/{i}")))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// `input.tool_dropped` (layer: the chat template): a tool whose name the rendered prompt
/// never prints, one finding per tool. Empty without a render or tools.
pub fn dropped_tools(cx: &ExchangeContext) -> Vec<Finding> {
    let (Some(req), Some(prompt)) = (&cx.request, &cx.server_prompt) else {
        return Vec::new();
    };
    // A Responses tool whose `type` is not `function` is dropped by the API conversion before
    // any template sees it: `input.tool_dropped` says so once, from the conversion rule
    // (rules::responses::tool_dropped), not again here.
    let converted_away = |pointer: &str| {
        cx.api == crate::session::Api::Responses
            && req
                .pointer(pointer)
                .and_then(|t| t.get("type"))
                .and_then(Value::as_str)
                .is_some_and(|t| t != "function")
    };
    let tools = tool_names(req);
    if tools.is_empty() {
        return Vec::new();
    }
    let spans = request_text_spans(req, cx.api, prompt);
    tools
        .into_iter()
        .filter(|(name, pointer)| !printed(prompt, name, &spans) && !converted_away(pointer))
        .map(|(name, pointer)| {
            Finding::new(
                Rule::InputToolDropped,
                format!(
                    "tool `{name}` is not in the rendered prompt: the chat template dropped it, so the model cannot call it"
                ),
                "use a chat template that prints tools (llama-server --jinja with the model's tool-calling template)",
            )
            .with_evidence(Evidence {
                pane: Some(Pane::Tools),
                tool: Some(name),
                pointer: Some(pointer),
                ..Default::default()
            })
        })
        .collect()
}

/// Names of the request's tools that the prompt never prints (for the schema rules, which
/// leave those tools to `input.tool_dropped`). `api` is the request's API (its messages are
/// read in their chat shape to find the agent's own text).
pub fn tools_not_printed(req: &Value, api: crate::session::Api, prompt: &str) -> Vec<String> {
    let tools = tool_names(req);
    if tools.is_empty() {
        return Vec::new();
    }
    let spans = request_text_spans(req, api, prompt);
    tools
        .into_iter()
        .filter(|(n, _)| !printed(prompt, n, &spans))
        .map(|(n, _)| n)
        .collect()
}

/// Whether the template printed tool `name`: the name occurs as a word outside the agent's own
/// text (`spans`, from [`request_text_spans`]). Claude Code's system prompt names its tools in
/// prose ("use the Read tool"), so a name found only there is not a printed tool definition.
fn printed(prompt: &str, name: &str, spans: &[(usize, usize)]) -> bool {
    word_offsets(prompt, name).any(|at| !inside_spans(spans, at, name.len()))
}

/// Byte offsets where `name` occurs in `s` with no identifier character on either side.
fn word_offsets<'a>(s: &'a str, name: &'a str) -> impl Iterator<Item = usize> + 'a {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    s.match_indices(name).map(|(at, _)| at).filter(move |&st| {
        let en = st + name.len();
        !s[..st].chars().next_back().is_some_and(ident)
            && !s[en..].chars().next().is_some_and(ident)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::Api;
    use serde_json::json;

    /// A `system` entry inside Anthropic `messages` (Claude Code ≥ 2.1.154): llama-server
    /// b11434's conversion passes it through as a system message; a template that prints only
    /// a leading system message leaves it out.
    /// Codex sends its developer message as several `input_text` parts; the template prints
    /// them with its own separator, so a tag inside one part (`<skills_instructions>`) is found
    /// as the agent's text only through the part itself (seen live: Codex CLI 0.169.0 through
    /// the proxy to llama-server b11434 with the Qwen3 template).
    #[test]
    fn each_text_part_of_a_message_is_the_agents_text() {
        let req = json!({"input": [{"type": "message", "role": "developer", "content": [
            {"type": "input_text", "text": "You are Codex."},
            {"type": "input_text", "text": "<skills_instructions>\nUse skills.\n</skills_instructions>"}]}]});
        let prompt = "<|im_start|>system\nYou are Codex.\n\n<skills_instructions>\nUse skills.\n</skills_instructions><|im_end|>\n";
        let spans = request_text_spans(&req, Api::Responses, prompt);
        let at = prompt.find("<skills_instructions>").unwrap();
        assert!(
            spans.iter().any(|&(s, e)| s <= at && at + 21 <= e),
            "{spans:?}"
        );
    }

    #[test]
    fn a_system_entry_inside_anthropic_messages_that_the_template_skips() {
        let req = json!({"model": "m", "max_tokens": 10, "system": "You are a CLI.",
            "messages": [{"role": "user", "content": "List the files."},
                         {"role": "system", "content": "hook output: 3 files changed"}],
            "tools": [{"name": "Bash", "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}]});
        let cx = ExchangeContext {
            server_prompt: Some(
            "<start_of_turn>user\nYou are a CLI.\n\nList the files.<end_of_turn>\n<start_of_turn>model\n"
                .into(),
        ),
            ..crate::analysis::facts::from_pair(Api::Anthropic, Some(req), None)
        };
        let f = dropped_messages(&cx);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].rule, Rule::InputMessageDropped);
        assert_eq!(f[0].evidence.pointer.as_deref(), Some("/messages/1"));
        let t = dropped_tools(&cx);
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].evidence.tool.as_deref(), Some("Bash"));
    }

    /// Claude Code 2.1.328's system prompt names its tools in prose ("the Agent tool", "use
    /// Bash"); a ChatML render that prints no tool definitions still holds those names, inside
    /// the agent's text only. Its user turn is two text blocks, which llama-server b11434
    /// joins with `\n` (tests/data/claude-code): the message stands in the prompt part by part.
    #[test]
    fn tool_names_in_the_agents_prose_are_not_printed_tools() {
        let req = json!({"model": "m", "max_tokens": 10,
            "system": [{"type": "text", "text": "Use the Bash tool to run commands."}],
            "messages": [{"role": "user", "content": [
                {"type": "text", "text": "<system-reminder>\nbe brief\n</system-reminder>\n"},
                {"type": "text", "text": "List the files."}]}],
            "tools": [{"name": "Bash", "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}},
                      {"name": "Read", "input_schema": {"type": "object"}}]});
        let prompt = "<|im_start|>system\nUse the Bash tool to run commands.<|im_end|>\n<|im_start|>user\n<system-reminder>\nbe brief\n</system-reminder>\n\nList the files.<|im_end|>\n<|im_start|>assistant\n";
        let cx = ExchangeContext {
            server_prompt: Some(prompt.into()),
            ..crate::analysis::facts::from_pair(Api::Anthropic, Some(req.clone()), None)
        };
        let tools: Vec<_> = dropped_tools(&cx)
            .into_iter()
            .filter_map(|f| f.evidence.tool)
            .collect();
        assert_eq!(tools, ["Bash", "Read"]);
        assert!(
            dropped_messages(&cx).is_empty(),
            "{:#?}",
            dropped_messages(&cx)
        );
        // A template that prints the definition: `Bash` stands outside the agent's text.
        let printed = format!("{{\"name\": \"Bash\"}}\n{prompt}");
        assert_eq!(tools_not_printed(&req, Api::Anthropic, &printed), ["Read"]);
    }

    /// A one-word message equal to a tool's name does not hide the template's printed tool, and
    /// a message of short parts the template dropped is not found through words elsewhere
    /// (review of the Claude Code change: "search" as a user turn; parts "Run", "ls").
    #[test]
    fn short_agent_texts_hide_nothing() {
        let req = json!({"messages": [
            {"role": "system", "content": "Run ls to list the files."},
            {"role": "user", "content": "search"},
            {"role": "user", "content": [{"type": "text", "text": "Run"}, {"type": "text", "text": "ls"}]}],
            "tools": [{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}]});
        let prompt = "<|im_start|>system\nRun ls to list the files.\n<tools>{\"name\": \"search\"}</tools><|im_end|>\n<|im_start|>user\nsearch<|im_end|>\n<|im_start|>assistant\n";
        let cx = ExchangeContext {
            server_prompt: Some(prompt.into()),
            ..crate::analysis::facts::from_pair(Api::Openai, Some(req.clone()), None)
        };
        assert!(dropped_tools(&cx).is_empty(), "{:#?}", dropped_tools(&cx));
        let dropped: Vec<_> = dropped_messages(&cx)
            .into_iter()
            .filter_map(|f| f.evidence.pointer)
            .collect();
        assert_eq!(dropped, ["/messages/2"]);
        // Spans are merged and sorted; a repeated long text counts once per occurrence.
        let long = "x".repeat(20);
        let req = json!({"messages": [{"role": "user", "content": long}, {"role": "user", "content": long}]});
        let spans = request_text_spans(&req, Api::Openai, &format!("{long}|{long}"));
        assert_eq!(spans, [(0, 20), (21, 41)]);
        assert!(inside_spans(&spans, 21, 20) && !inside_spans(&spans, 19, 3));
    }

    #[test]
    fn unrendered_tool_result_and_reasoning_note() {
        let req = json!({"messages": [
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": "", "reasoning_content": "I should call the tool now.", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "w", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "sunny, 21 C"}]});
        let cx = ExchangeContext {
            server_prompt: Some("<|user|>weather?<|assistant|><tool_call>w</tool_call>".into()),
            ..crate::analysis::facts::from_pair(Api::Openai, Some(req), None)
        };
        let f = dropped_messages(&cx);
        let ids: Vec<(&str, Severity)> = f.iter().map(|f| (f.rule.id(), f.severity)).collect();
        assert_eq!(
            ids,
            [
                ("loop.result_unrendered", Severity::Error),
                ("input.message_dropped", Severity::Info)
            ]
        );
        assert!(
            prompt_contains("x \\\"a\\\" y", "\"a\""),
            "JSON-escaped form"
        );
    }
}
