//! gpt-oss (harmony) as vLLM 0.33.0 and the Dynamo frontend read it: both tokenize the text
//! with OpenAI's `o200k_harmony` encoding and run openai-harmony's `StreamableParser` over the
//! token ids (vLLM: the Python wheel openai-harmony 0.0.4 through `HarmonyParser`,
//! vllm/parser/harmony.py; Dynamo: the crate openai-harmony 0.0.8 through
//! `parse_tool_calls_harmony_complete`, dynamo-parsers src/tool_calling/harmony/harmony_parser.rs).
//! Pure.
//!
//! The parser is a port of openai-harmony's `StreamableParser` (src/encoding.rs
//! `process_next`, `parse_header_from_tokens`) over the text split at the encoding's special
//! tokens: its state changes only at a special token, so a run of ordinary tokens is one step.
//! Both engines start it with `role = assistant` (the prompt ends in `<|start|>assistant`), so
//! it begins inside that message's header: a text that repeats `<|start|>assistant` has
//! `<|start|>assistant` in its first header, which does not parse ("unexpected tokens
//! remaining in message header").

use serde_json::Value;

use super::Outcome;
use crate::parser::ParsedCall;

/// One token step: a special token, or a run of ordinary text between two.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tok<'a> {
    Special(&'a str),
    Text(&'a str),
}

impl<'a> Tok<'a> {
    fn text(self) -> &'a str {
        match self {
            Tok::Special(s) | Tok::Text(s) => s,
        }
    }
}

/// The named special tokens of `o200k_harmony` (openai-harmony
/// src/tiktoken_ext/public_encodings.rs); `<|reserved_N|>` fill the rest of 199998..=201088.
const NAMED: &[&str] = &[
    "<|startoftext|>",
    "<|endoftext|>",
    "<|return|>",
    "<|constrain|>",
    "<|channel|>",
    "<|start|>",
    "<|end|>",
    "<|message|>",
    "<|call|>",
];
/// The stop tokens that end a message's content (registry.rs `stop_formatting_tokens`).
const STOP: &[&str] = &["<|return|>", "<|call|>", "<|end|>"];

fn is_special(s: &str) -> bool {
    NAMED.contains(&s)
        || s.strip_prefix("<|reserved_")
            .and_then(|r| r.strip_suffix("|>"))
            .and_then(|n| n.parse::<u32>().ok())
            .is_some_and(|n| (200_000..=201_088).contains(&n))
}

/// `text` as `encode_with_special_tokens` steps through it.
fn tokens(text: &str) -> Vec<Tok<'_>> {
    let mut out = Vec::new();
    let (mut cursor, mut from) = (0, 0);
    while let Some(i) = text[from..].find("<|").map(|i| from + i) {
        let Some(j) = text[i + 2..].find("|>").map(|j| i + 2 + j + 2) else {
            break;
        };
        if is_special(&text[i..j]) {
            if cursor < i {
                out.push(Tok::Text(&text[cursor..i]));
            }
            out.push(Tok::Special(&text[i..j]));
            cursor = j;
            from = j;
        } else {
            from = i + 2;
        }
    }
    if cursor < text.len() {
        out.push(Tok::Text(&text[cursor..]));
    }
    out
}

/// A parsed harmony message.
#[derive(Debug, Clone, PartialEq)]
struct Message {
    role: String,
    channel: Option<String>,
    recipient: Option<String>,
    content_type: Option<String>,
    text: String,
}

struct Header {
    role: String,
    channel: Option<String>,
    recipient: Option<String>,
    content_type: Option<String>,
}

enum State {
    ExpectStart,
    Header(String),
    Content(Header, String),
}

/// openai-harmony's `StreamableParser` (0.0.4 and 0.0.8 in strict mode read a whole text alike).
struct Parser {
    state: State,
    next_role: Option<String>,
    messages: Vec<Message>,
}

impl Parser {
    fn assistant() -> Self {
        Parser {
            state: State::Header(String::new()),
            next_role: Some("assistant".into()),
            messages: Vec::new(),
        }
    }

    /// One step; `None` is the end of the text (`process_eos`). `Err`: a `HarmonyError`.
    fn process(&mut self, tok: Option<Tok>) -> Result<(), String> {
        match (&mut self.state, tok) {
            (State::ExpectStart, Some(Tok::Special("<|start|>"))) => {
                self.state = State::Header(String::new());
            }
            (State::ExpectStart, Some(t)) => {
                return Err(format!(
                    "unexpected token {:?} while expecting start",
                    t.text()
                ));
            }
            (State::ExpectStart, None) => {}
            (State::Header(h), Some(Tok::Special("<|message|>"))) => {
                let h = std::mem::take(h);
                self.state = State::ExpectStart;
                let header = parse_header(&h, self.next_role.as_deref())?;
                self.next_role = None;
                self.state = State::Content(header, String::new());
            }
            (State::Header(h), Some(t)) => h.push_str(t.text()),
            (State::Header(_), None) => {
                return Err("unexpected EOS while waiting for message header".into());
            }
            (State::Content(_, c), Some(t)) if !is_stop(t) => c.push_str(t.text()),
            (State::Content(..), _) => {
                let State::Content(h, text) =
                    std::mem::replace(&mut self.state, State::ExpectStart)
                else {
                    unreachable!()
                };
                self.messages.push(Message {
                    role: h.role,
                    channel: h.channel,
                    recipient: h.recipient,
                    content_type: h.content_type,
                    text,
                });
            }
        }
        Ok(())
    }
}

fn is_stop(t: Tok) -> bool {
    matches!(t, Tok::Special(s) if STOP.contains(&s))
}

const ROLES: &[&str] = &["user", "assistant", "system", "developer", "tool"];

/// `parse_header_from_tokens` (openai-harmony src/encoding.rs) on the header's decoded text.
fn parse_header(header: &str, role: Option<&str>) -> Result<Header, String> {
    let mut h = header.to_string();
    let mut channel = None;
    if let Some(idx) = h.find("<|channel|>") {
        let after = &h[idx + "<|channel|>".len()..];
        let end = after
            .find(|c: char| c.is_whitespace() || c == '<')
            .unwrap_or(after.len());
        if end == 0 {
            return Err("channel marker present but no channel value found in header".into());
        }
        channel = Some(after[..end].to_string());
        h = format!("{}{}", &h[..idx], &after[end..]);
    }
    let mut h = h.trim().to_string();
    if h.contains("<|constrain|>") {
        h = h
            .replace("<|constrain|>", " <|constrain|>")
            .trim()
            .to_string();
    }
    let mut parts: Vec<&str> = h.split_ascii_whitespace().collect();
    let role = match role {
        Some(r) => r.to_string(),
        None => {
            let first = *parts
                .first()
                .ok_or("message header did not contain a role")?;
            if ROLES.contains(&first) {
                first.to_string()
            } else if parts.len() > 1 || first.starts_with("to=") {
                parts.remove(0);
                "tool".to_string()
            } else {
                return Err(format!("Unknown role: {first}"));
            }
        }
    };
    if parts.first() == Some(&role.as_str()) {
        parts.remove(0);
    }
    let (mut recipient, mut content_type) = (None, None);
    if let Some(last) = parts.pop() {
        if let Some(r) = last.strip_prefix("to=") {
            recipient = Some(r.to_string());
        } else if parts.is_empty() {
            recipient = Some(last.to_string());
        } else {
            content_type = Some(last.to_string());
            if let Some(r) = parts.pop() {
                recipient = Some(r.strip_prefix("to=").unwrap_or(r).to_string());
            }
        }
    }
    if !parts.is_empty() {
        return Err(format!(
            "unexpected tokens remaining in message header: {parts:?}"
        ));
    }
    Ok(Header {
        role,
        channel,
        recipient,
        content_type,
    })
}

fn call(name: &str, args: &str) -> ParsedCall {
    ParsedCall {
        name: name.to_string(),
        arguments: serde_json::from_str(args).unwrap_or_else(|_| Value::String(args.into())),
        syntax: Some("gpt-oss".into()),
        span: None,
        id: None,
    }
}

/// vllm/parser/harmony.py `_normalize_recipient`.
fn normalize_recipient(r: Option<String>) -> Option<String> {
    let r = r?;
    match r.find("<|constrain|>") {
        None => Some(r),
        Some(i) => Some(r[..i].trim_end().to_string()).filter(|s| !s.is_empty()),
    }
}

/// vllm/entrypoints/openai/parser/harmony_utils.py:33 `is_function_recipient` (chat path: no
/// allowed-names set).
fn is_function_recipient(r: &str) -> bool {
    const BUILTIN: &[&str] = &["python", "browser", "container"];
    if r.is_empty() || r.starts_with("<|") || r == "assistant" {
        return false;
    }
    if let Some(name) = r.strip_prefix("functions.") {
        return !name.is_empty();
    }
    !BUILTIN.contains(&r) && !BUILTIN.contains(&r.split('.').next().unwrap_or(r))
}

/// The messages vLLM's `HarmonyParser.parse` completes: `process_chunk` skips a token the
/// parser rejects (harmony.py:330, `except HarmonyError: continue`); `flush` ends the text and,
/// when that fails, returns the tokens of the open message decoded as a `final` message
/// (harmony.py:135-160).
fn vllm_messages(text: &str) -> (Vec<Message>, bool) {
    let mut p = Parser::assistant();
    let mut done = 0;
    let mut current = String::new();
    let mut recovered = false;
    for t in tokens(text) {
        if p.process(Some(t)).is_err() {
            continue;
        }
        if p.messages.len() > done {
            done = p.messages.len();
            current.clear();
        } else {
            current.push_str(t.text());
        }
    }
    let mut messages = std::mem::take(&mut p.messages);
    if p.process(None).is_err() {
        recovered = true;
        messages.push(Message {
            role: "assistant".into(),
            channel: Some("final".into()),
            recipient: None,
            content_type: None,
            text: current,
        });
    } else {
        messages.append(&mut p.messages);
    }
    (messages, recovered)
}

/// What vLLM 0.33.0 returns for a gpt-oss text: `HarmonyParser.parse` (vllm/parser/harmony.py:
/// 176-235; the server picks it for `model_type == "gpt_oss"`, chat_completion/serving.py:172,
/// with the `openai_gptoss` reasoning parser the model's config fills in, models/config.py:546)
/// then `assemble_chat_message_fields` (calls kept only when the request has tools).
pub(super) fn vllm(text: &str, tools: Option<&Value>) -> (Outcome, String) {
    let (messages, recovered) = vllm_messages(text);
    let (mut reasoning, mut content, mut calls) = (Vec::new(), Vec::new(), Vec::new());
    for m in messages {
        if m.role != "assistant" {
            continue;
        }
        let recipient = normalize_recipient(m.recipient);
        let channel = m.channel.as_deref();
        match recipient.as_deref() {
            Some(r) if is_function_recipient(r) => {
                let name = r.strip_prefix("functions.").unwrap_or(r);
                let raw = m
                    .content_type
                    .as_deref()
                    .is_some_and(|t| !t.contains("json"));
                let args = match serde_json::from_str::<Value>(&m.text) {
                    Ok(v) if !raw => v.to_string(),
                    _ => m.text.clone(),
                };
                calls.push(call(name, &args));
            }
            // harmony.py:213-217: empty text is skipped (the match guards `if text`)
            _ if channel == Some("analysis") && !m.text.is_empty() => reasoning.push(m.text),
            r if (channel == Some("final") || (channel == Some("commentary") && r.is_none()))
                && !m.text.is_empty() =>
            {
                content.push(m.text)
            }
            _ => {}
        }
    }
    let has_tools = tools
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty());
    if !has_tools {
        calls.clear();
    }
    let mut why = String::from(
        "HarmonyParser reads the token ids with openai-harmony's StreamableParser, started \
         inside the assistant header (harmony_utils.py `get_streamable_parser_for_assistant`)",
    );
    if text.trim_start().starts_with("<|start|>assistant") {
        why.push_str(
            "; the text repeats `<|start|>assistant`, so the first header does not parse and that \
             message is skipped token by token (harmony.py:330)",
        );
    }
    if recovered {
        why.push_str(
            "; the text ends inside a message header: flush returns the open message's text as \
             content (harmony.py:141)",
        );
    }
    let outcome = Outcome::Calls {
        content: content.join("\n").trim().to_string(),
        reasoning: reasoning.join("\n"),
        tool_calls: calls,
    };
    (outcome, why)
}

// --- Dynamo -----------------------------------------------------------------------------------

/// dynamo-parsers harmony_parser.rs:343 `parse_tool_calls_harmony_complete`: (calls, normal
/// text).
fn dynamo_complete(text: &str) -> (Vec<ParsedCall>, String) {
    let mut p = Parser::assistant();
    let strict = tokens(text)
        .into_iter()
        .try_for_each(|t| p.process(Some(t)))
        .and_then(|()| p.process(None));
    if strict.is_err() {
        // harmony_parser.rs:361-380: the regex fallback
        let (calls, residual) = calls_via_regex(text);
        if !calls.is_empty() {
            return (calls, strip_protocol(&residual));
        }
        return (Vec::new(), after_parse_failure(text));
    }
    let has_call_stop = text.contains("<|call|>");
    let recipientless = recipientless_commentary_call(text);
    let (mut calls, mut normal) = (Vec::new(), String::new());
    for m in p.messages {
        if m.role != "assistant" {
            continue;
        }
        let channel = m.channel.as_deref();
        let recipient = m.recipient.as_deref().unwrap_or("");
        if matches!(channel, Some("commentary" | "analysis")) && recipient.starts_with("functions.")
        {
            let name = &recipient["functions.".len()..];
            if has_call_stop && !name.is_empty() {
                calls.push(call(name, &serialize_arguments(&m.text)));
            }
        } else if channel == Some("final")
            || (channel == Some("commentary")
                && recipient.is_empty()
                && !(recipientless
                    && (m.content_type.as_deref() == Some("<|constrain|>json")
                        || m.text.trim_start().starts_with(['{', '[']))))
        {
            normal.push_str(&m.text);
        }
    }
    (calls, normal)
}

/// harmony_parser.rs:207 `serialize_harmony_arguments`.
fn serialize_arguments(raw: &str) -> String {
    let t = raw.trim();
    serde_json::from_str::<Value>(t).map_or_else(|_| t.to_string(), |v| v.to_string())
}

/// Where `<|channel|>{label}` next opens at or after `from`, with an optional
/// `<|start|>assistant` right before it: (match start, end of `label`).
fn channel_at(text: &str, from: usize, label: &str) -> Option<(usize, usize)> {
    let pat = format!("<|channel|>{label}");
    let i = from + text[from..].find(&pat)?;
    Some((start_of(text, from, i), i + pat.len()))
}

/// `i`, or where `<|start|>assistant` right before it starts (not before `from`).
fn start_of(text: &str, from: usize, i: usize) -> usize {
    const START: &str = "<|start|>assistant";
    if text[..i].ends_with(START) && i - START.len() >= from {
        i - START.len()
    } else {
        i
    }
}

/// `find` from `at`: the first of `ends` (its end), or the end of the text when `eof`.
fn first_of(text: &str, at: usize, ends: &[&str], eof: bool) -> Option<(usize, usize)> {
    ends.iter()
        .filter_map(|e| text[at..].find(e).map(|i| (at + i, at + i + e.len())))
        .min()
        .or(eof.then_some((text.len(), text.len())))
}

/// harmony_parser.rs:31 `commentary_block_regex` captures, in order: (calls, the text around
/// them trimmed).
fn calls_via_regex(text: &str) -> (Vec<ParsedCall>, String) {
    let (mut calls, mut residual, mut cursor, mut from) = (Vec::new(), String::new(), 0, 0);
    while let Some(i) = text[from..].find("<|channel|>").map(|i| from + i) {
        from = i + 1;
        let after = i + "<|channel|>".len();
        let Some(label) = ["commentary to=functions.", "analysis to=functions."]
            .iter()
            .find(|l| text[after..].starts_with(**l))
        else {
            continue;
        };
        let (start, body) = (start_of(text, cursor, i), after + label.len());
        let name_len = text[body..]
            .find(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | '.' | '-')))
            .unwrap_or(text.len() - body);
        let Some(msg) = (name_len > 0)
            .then(|| text[body + name_len..].find("<|message|>"))
            .flatten()
            .map(|m| body + name_len + m + "<|message|>".len())
        else {
            continue;
        };
        let Some(end) = text[msg..].find("<|call|>").map(|e| msg + e) else {
            continue;
        };
        residual.push_str(&text[cursor..start]);
        let name = &text[body..body + name_len];
        calls.push(call(name, &serialize_arguments(text[msg..end].trim())));
        cursor = end + "<|call|>".len();
        from = cursor;
    }
    residual.push_str(&text[cursor..]);
    (calls, residual.trim().to_string())
}

/// One cleanup regex of `strip_harmony_protocol_from_normal_text` applied to every match:
/// `find(text, from)` gives the next match (start, end, replacement); a match is never empty.
fn replace_all(
    text: &str,
    changed: &mut bool,
    find: impl Fn(&str, usize) -> Option<(usize, usize, String)>,
) -> String {
    let (mut out, mut cursor) = (String::new(), 0);
    while let Some((s, e, rep)) = find(text, cursor) {
        *changed = true;
        out.push_str(&text[cursor..s]);
        out.push_str(&rep);
        cursor = e;
    }
    out.push_str(&text[cursor..]);
    out
}

/// A `[<|start|>assistant]<|channel|>{label}…<|message|>(body)…(ends|\z)` block from `from`.
fn block(
    text: &str,
    from: usize,
    label: &str,
    ends: &[&str],
    keep_body: bool,
) -> Option<(usize, usize, String)> {
    let mut at = from;
    loop {
        let (start, after) = channel_at(text, at, label)?;
        let body = text[after..]
            .find("<|message|>")
            .map(|m| after + m + "<|message|>".len());
        // `final` has `<|message|>` right after the label
        let body = if label == "final" {
            text[after..]
                .starts_with("<|message|>")
                .then_some(after + "<|message|>".len())
        } else {
            body
        };
        if let Some(b) = body {
            let (end_body, end) = first_of(text, b, ends, true)?;
            let rep = if keep_body {
                text[b..end_body].to_string()
            } else {
                String::new()
            };
            return Some((start, end, rep));
        }
        at = after;
    }
}

/// harmony_parser.rs:109 `strip_harmony_protocol_from_normal_text`: the harmony envelopes
/// removed (a `final` message's body kept), the result trimmed; the text unchanged when
/// nothing matched.
fn strip_protocol(text: &str) -> String {
    let mut changed = false;
    let t = replace_all(text, &mut changed, |t, f| {
        block(t, f, "commentary", &["<|call|>"], false)
    });
    let t = replace_all(&t, &mut changed, |t, f| {
        channel_at(t, f, "commentary").map(|(s, _)| (s, t.len(), String::new()))
    });
    let t = replace_all(&t, &mut changed, |t, f| {
        block(t, f, "analysis", &["<|call|>", "<|end|>"], false)
    });
    let t = replace_all(&t, &mut changed, |t, f| {
        block(t, f, "final", &["<|return|>", "<|end|>"], true)
    });
    let t = replace_all(&t, &mut changed, |t, f| {
        let m = f + t[f..].find("<|message|>")?;
        let (_, e) = first_of(t, m + "<|message|>".len(), &["<|call|>"], true)?;
        Some((m, e, String::new()))
    });
    let t = replace_all(&t, &mut changed, |t, f| {
        const SPECIALS: &[&str] = &[
            "<|start|>",
            "<|channel|>",
            "<|constrain|>",
            "<|message|>",
            "<|call|>",
            "<|end|>",
            "<|return|>",
        ];
        first_of(t, f, SPECIALS, false).map(|(s, e)| (s, e, String::new()))
    });
    if changed {
        t.trim().to_string()
    } else {
        text.to_string()
    }
}

/// harmony_parser.rs:192 `normal_text_after_parse_failure`: bare text with no harmony
/// envelope is dropped.
fn after_parse_failure(text: &str) -> String {
    let cleaned = strip_protocol(text);
    if cleaned == text && !text.trim().is_empty() {
        String::new()
    } else {
        cleaned
    }
}

/// harmony_parser.rs:232 `contains_recipientless_commentary_call`.
fn recipientless_commentary_call(text: &str) -> bool {
    let mut rest = text;
    while let Some(c) = rest.find("<|channel|>commentary") {
        let after = &rest[c + "<|channel|>commentary".len()..];
        let Some(m) = after.find("<|message|>") else {
            return false;
        };
        let header = &after[..m];
        let body = &after[m + "<|message|>".len()..];
        rest = body;
        if header.split_whitespace().any(|p| p.starts_with("to=")) {
            continue;
        }
        let Some(call) = body.find("<|call|>") else {
            continue;
        };
        let boundary = ["<|end|>", "<|return|>", "<|start|>", "<|channel|>"]
            .iter()
            .filter_map(|b| body.find(b))
            .min();
        if boundary.is_none_or(|b| call < b) {
            return true;
        }
    }
    false
}

/// The jail's start markers for `harmony` (config.rs:688).
const STARTS: &[&str] = &[
    "<|start|>assistant<|channel|>commentary",
    "<|channel|>commentary",
];

/// The jail on the text as one delta (jail/mod.rs): text before the first start marker passes
/// as content unless it holds `<|channel|>` (then the whole text is held, jail/mod.rs:1464);
/// the held text is parsed up to its last `<|call|>` (`find_tool_call_end_position_harmony`,
/// harmony/mod.rs:10) and what follows goes through the jail again; a held text no call came
/// out of is released as the parser's normal text (jail/mod.rs:2791).
fn jail(text: &str, calls: &mut Vec<ParsedCall>, content: &mut String) {
    let first = STARTS.iter().filter_map(|m| text.find(m)).min();
    let held = match first {
        Some(i) if !text[..i].contains("<|channel|>") => {
            content.push_str(&text[..i]);
            &text[i..]
        }
        Some(_) => text,
        // harmony_parser.rs:448 `detect_tool_call_start_harmony` (non-strict)
        None if text.contains("<|call|>") || text.contains("<|channel|>") => text,
        None => {
            content.push_str(text);
            return;
        }
    };
    let (section, rest) = match held.rfind("<|call|>") {
        Some(e) => held.split_at(e + "<|call|>".len()),
        None => (held, ""),
    };
    let (found, normal) = dynamo_complete(section);
    if !found.is_empty() || normal.is_empty() || section.contains("<|channel|>") {
        content.push_str(&normal);
    } else {
        // no call and no harmony envelope: the held text is released verbatim
        content.push_str(section);
    }
    calls.extend(found);
    if !rest.is_empty() {
        jail(rest, calls, content);
    }
}

/// Dynamo's verdict for a gpt-oss text (`--dyn-tool-call-parser harmony`): the jail, then the
/// aggregator's re-parse of a choice left with text and no calls (its normal text replaces the
/// choice's when the text has `<|channel|>`).
pub(super) fn dynamo(text: &str) -> (Outcome, String) {
    let (mut calls, mut content) = (Vec::new(), String::new());
    jail(text, &mut calls, &mut content);
    let mut why = String::from(
        "the harmony parser tokenizes with o200k_harmony and reads the messages with \
         openai-harmony's StreamableParser (strict); when that fails, the regex fallback reads \
         each `<|channel|>commentary to=functions.NAME …<|message|>ARGS<|call|>` \
         (harmony_parser.rs:361) and strips the harmony envelopes from the text left",
    );
    if calls.is_empty() && !content.is_empty() {
        let (again, normal) = dynamo_complete(&content);
        if !again.is_empty() {
            calls = again;
            content = normal;
            why.push_str("; the aggregator's re-parse reads the calls");
        } else if content.contains("<|channel|>") {
            content = normal;
            why.push_str("; the aggregator's re-parse keeps its normal text");
        }
    }
    let outcome = Outcome::Calls {
        content: content.trim().to_string(),
        reasoning: String::new(),
        tool_calls: calls,
    };
    (outcome, why)
}
