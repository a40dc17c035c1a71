//! Prompt reuse between one turn and the next: how much of the previous turn's prompt plus
//! reply the engine could keep in its prompt cache, where the new prompt first differs, and the
//! request field (or template behaviour) that made it differ.
//!
//! The model follows llama-server b11434 (`tools/server/server-context.cpp`, the slot's
//! `n_past` before `slot.stats.n_prompt_cached = n_past`): the slot's cache holds the previous
//! prompt's tokens and the tokens it generated; the new prompt reuses their common prefix, and
//! when the whole new prompt is cached one token is still evaluated (`n_past--`,
//! `[TAG_PROMPT_LOGITS]`). The engine reports that number as `timings.cache_n` and
//! `usage.prompt_tokens_details.cached_tokens` (`tools/server/server-task.cpp`).

use serde::Serialize;
use serde_json::Value;

use super::{Msg, TurnInput};

/// A rendered prompt and its tokenization, as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PromptTokens {
    /// The prompt text.
    pub text: String,
    /// `(token id, piece length in bytes)` per token (llama-server `/tokenize` with pieces),
    /// when recorded.
    pub tokens: Option<Vec<(u32, u32)>>,
    /// Where it came from (`server /apply-template`, `server __verbose.prompt`, `local render`).
    pub source: String,
}

/// The engine's own prompt-cache counters for one exchange, as it reported them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct EngineCounters {
    /// llama-server `timings.cache_n`: prompt tokens taken from the slot's cache.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_n: Option<u64>,
    /// llama-server `timings.prompt_n`: prompt tokens evaluated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_n: Option<u64>,
    /// `usage.prompt_tokens_details.cached_tokens` (OpenAI chat), `usage.input_tokens_details
    /// .cached_tokens` (Responses), `usage.cache_read_input_tokens` (Anthropic).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
}

impl EngineCounters {
    /// Reads the counters from a response body (non-streamed JSON) or, for a stream, from the
    /// last events that carry `timings` / `usage` (only the stream's last 64 KiB are read).
    pub fn of_exchange(ex: &crate::session::Exchange) -> EngineCounters {
        let mut out = EngineCounters::default();
        let Some(r) = &ex.response else {
            return out;
        };
        if r.chunks.is_none() {
            if let Some(v) = r.body.as_ref().and_then(|b| b.json().ok()) {
                out.fill(&v);
            }
            return out;
        }
        let bytes = ex.response_bytes();
        let tail = &bytes[bytes.len().saturating_sub(64 * 1024)..];
        let text = String::from_utf8_lossy(tail);
        for line in text.lines().rev() {
            let data = line
                .strip_prefix("data:")
                .map(str::trim_start)
                .unwrap_or(line);
            if !(data.contains("\"timings\"") || data.contains("\"usage\"")) {
                continue;
            }
            if let Ok(v) = serde_json::from_str::<Value>(data) {
                out.fill(&v);
                // a Responses `response.completed` carries usage under `response`
                if let Some(inner) = v.get("response") {
                    out.fill(inner);
                }
            }
            if out.cache_n.is_some() && out.cached_tokens.is_some() {
                break;
            }
        }
        out
    }

    fn fill(&mut self, v: &Value) {
        let u = |p: &str| v.pointer(p).and_then(Value::as_u64);
        self.cache_n = self.cache_n.or(u("/timings/cache_n"));
        self.prompt_n = self.prompt_n.or(u("/timings/prompt_n"));
        self.cached_tokens = self
            .cached_tokens
            .or(u("/usage/prompt_tokens_details/cached_tokens"))
            .or(u("/usage/input_tokens_details/cached_tokens"))
            .or(u("/usage/cache_read_input_tokens"))
            .or(u("/message/usage/cache_read_input_tokens"));
    }
}

/// Why the new prompt differs from the previous prompt plus reply before where it had to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Cause {
    /// Nothing before the new messages changed.
    None,
    /// The system prompt changed; `timestamp` when the changed text is a date or time.
    SystemPrompt {
        timestamp: bool,
        /// The changed text, before and after.
        before: String,
        after: String,
    },
    /// Claude Code's `x-anthropic-billing-header: … cch=…;` line at the head of the system
    /// prompt changed (it changes per request; llama-server b11434 rewrites it on
    /// `/v1/messages`, `normalize_anthropic_billing_header` in server-chat.cpp).
    HeaderField { before: String, after: String },
    /// The same tools in another order.
    ToolsReordered,
    /// Tools added, removed or changed.
    ToolsChanged,
    /// The agent sent an earlier message differently (0-based index in `messages`).
    HistoryRewrittenByAgent { message: usize },
    /// The request's history is unchanged but the template renders it differently this turn
    /// (e.g. it prints the current date, or moves content as the conversation grows).
    HistoryRewrittenByTemplate { date: bool },
    /// The previous reply is rendered differently from what the model generated and the reply
    /// carried reasoning the template does not print for earlier turns (by design of the
    /// template: a note).
    ReasoningDropped,
    /// The previous reply is rendered differently from what the model generated (the template
    /// writes calls or whitespace its own way).
    ReplyRerendered,
}

impl Cause {
    /// Words for messages.
    pub fn describe(&self) -> String {
        match self {
            Cause::None => "nothing before the new messages changed".into(),
            Cause::SystemPrompt {
                timestamp: true,
                before,
                after,
            } => format!("a timestamp in the system prompt changed (`{before}` → `{after}`)"),
            Cause::SystemPrompt { before, after, .. } => {
                format!("the system prompt changed (`{before}` → `{after}`)")
            }
            Cause::HeaderField { before, after } => format!(
                "the x-anthropic-billing-header field in the system prompt changed (`{before}` → `{after}`)"
            ),
            Cause::ToolsReordered => "the tools were sent in another order".into(),
            Cause::ToolsChanged => "the tool list changed".into(),
            Cause::HistoryRewrittenByAgent { message } => {
                format!("the agent re-sent message {message} of the history differently")
            }
            Cause::HistoryRewrittenByTemplate { date: true } => {
                "the template prints the current date, which changed".into()
            }
            Cause::HistoryRewrittenByTemplate { date: false } => {
                "the request's history is unchanged but the template renders it differently".into()
            }
            Cause::ReasoningDropped => {
                "the template does not print the previous reply's reasoning (by design)".into()
            }
            Cause::ReplyRerendered => {
                "the template renders the previous reply differently from the generated text".into()
            }
        }
    }

    /// The request field a user changes to fix it, as a JSON Pointer-like name.
    pub fn field(&self) -> Option<String> {
        match self {
            Cause::SystemPrompt { .. } | Cause::HeaderField { .. } => {
                Some("/messages/0/content".into())
            }
            Cause::ToolsReordered | Cause::ToolsChanged => Some("/tools".into()),
            Cause::HistoryRewrittenByAgent { message } => Some(format!("/messages/{message}")),
            _ => None,
        }
    }
}

/// Prompt reuse of one turn against its parent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Reuse {
    /// Tokens (or bytes, when `unit` is `bytes`) in this turn's prompt.
    pub prompt: usize,
    /// Tokens in the parent's prompt.
    pub parent_prompt: usize,
    /// Reusable prefix: tokens shared with the parent's prompt plus its generated reply, as
    /// the engine counts them (one less when the whole prompt is shared).
    pub shared: usize,
    /// 0-based index of the first token that differs (`None`: the whole prompt is shared).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_diff: Option<usize>,
    /// Byte offset of that token in this turn's prompt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset: Option<usize>,
    /// Text around the difference: the parent's prompt-plus-reply there, and this prompt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
    /// True when the difference lies inside the parent's prompt (not in its reply).
    pub in_prompt: bool,
    /// `tokens` or `bytes` (no tokenization recorded).
    pub unit: &'static str,
    pub cause: Cause,
    /// The engine's counters for this turn.
    pub engine: EngineCounters,
}

/// Prompt reuse of `child` against `parent` (`new_from`: index of the child's first message
/// after the parent's history). `None` when either prompt was not recorded.
pub fn reuse(parent: &TurnInput, child: &TurnInput, new_from: usize) -> Option<Reuse> {
    let pp = parent.prompt.as_ref()?;
    let cp = child.prompt.as_ref()?;
    let reply = parent.raw_reply.as_deref().unwrap_or("");
    let (unit, prompt, parent_prompt, shared_raw, offset, in_prompt) =
        match (&pp.tokens, &cp.tokens) {
            (Some(pt), Some(ct)) => {
                let mut n = pt
                    .iter()
                    .zip(ct.iter())
                    .take_while(|(a, b)| a.0 == b.0)
                    .count();
                let mut off: usize = ct[..n].iter().map(|t| t.1 as usize).sum();
                let in_prompt = n < pt.len();
                if !in_prompt {
                    // the cache goes on with the generated tokens: count the new prompt's
                    // tokens that spell the reply's text
                    let text = cp.text.as_bytes();
                    let r = reply.as_bytes();
                    let mut at = 0;
                    while n < ct.len() {
                        let len = ct[n].1 as usize;
                        match (text.get(off..off + len), r.get(at..at + len)) {
                            (Some(a), Some(b)) if a == b && len > 0 => {
                                n += 1;
                                off += len;
                                at += len;
                            }
                            _ => break,
                        }
                    }
                }
                ("tokens", ct.len(), pt.len(), n, off, in_prompt)
            }
            _ => {
                let old = format!("{}{}", pp.text, reply);
                let n = common_prefix(old.as_bytes(), cp.text.as_bytes());
                let n = floor_char(&cp.text, n);
                (
                    "bytes",
                    cp.text.len(),
                    pp.text.len(),
                    n,
                    n,
                    n < pp.text.len(),
                )
            }
        };
    let whole = shared_raw >= prompt;
    let shared = if whole && prompt > 0 {
        prompt - 1
    } else {
        shared_raw
    };
    let old_full = format!("{}{}", pp.text, reply);
    let (before, after) = if whole {
        (None, None)
    } else {
        (
            Some(window(&old_full, offset)),
            Some(window(&cp.text, offset)),
        )
    };
    let cause = if whole {
        Cause::None
    } else if in_prompt {
        request_cause(parent, child).unwrap_or_else(|| Cause::HistoryRewrittenByTemplate {
            date: after.as_deref().is_some_and(looks_like_time)
                || before.as_deref().is_some_and(looks_like_time),
        })
    } else if offset >= pp.text.len() + reply.len() || offset >= cp.text.len() {
        Cause::None
    } else if parent
        .reply
        .as_ref()
        .is_some_and(|r| !r.reasoning.is_empty() && !cp.text.contains(r.reasoning.trim()))
    {
        Cause::ReasoningDropped
    } else {
        let _ = new_from;
        Cause::ReplyRerendered
    };
    Some(Reuse {
        prompt,
        parent_prompt,
        shared,
        first_diff: (!whole).then_some(shared_raw),
        offset: (!whole).then_some(offset),
        before,
        after,
        in_prompt: !whole && in_prompt,
        unit,
        cause,
        engine: child.engine,
    })
}

/// The first request field, in prompt order, that differs between the parent's request and
/// the child's: system prompt, tools, then each earlier message.
fn request_cause(parent: &TurnInput, child: &TurnInput) -> Option<Cause> {
    let sys = |t: &TurnInput| -> Option<String> {
        t.messages
            .first()
            .filter(|m| m.role == "system" || m.role == "developer")
            .map(|m| m.text.clone())
    };
    let (ps, cs) = (sys(parent), sys(child));
    if ps != cs {
        let (a, b) = (ps.unwrap_or_default(), cs.unwrap_or_default());
        let (before, after) = changed(&a, &b);
        if a.starts_with("x-anthropic-billing-header:")
            && a.find('\n')
                .is_none_or(|nl| common_prefix(a.as_bytes(), b.as_bytes()) < nl)
            && (before.contains("cch=") || a.contains("cch="))
        {
            return Some(Cause::HeaderField { before, after });
        }
        return Some(Cause::SystemPrompt {
            timestamp: looks_like_time(&before) || looks_like_time(&after),
            before,
            after,
        });
    }
    if parent.tools_key != child.tools_key {
        let mut a = parent.tools.clone();
        let mut b = child.tools.clone();
        a.sort();
        b.sort();
        return Some(if a == b && parent.tools != child.tools {
            Cause::ToolsReordered
        } else {
            Cause::ToolsChanged
        });
    }
    let start = usize::from(sys(parent).is_some());
    for i in start..parent.messages.len() {
        if child.messages.get(i).map(Msg::key) != Some(parent.messages[i].key()) {
            return Some(Cause::HistoryRewrittenByAgent { message: i });
        }
    }
    None
}

/// The differing middle of `a` and `b` (common prefix and suffix removed), widened to whole
/// words, each at most 80 bytes.
fn changed(a: &str, b: &str) -> (String, String) {
    let p = common_prefix(a.as_bytes(), b.as_bytes());
    let s = a
        .bytes()
        .rev()
        .zip(b.bytes().rev())
        .take_while(|(x, y)| x == y)
        .count()
        .min(a.len() - p)
        .min(b.len() - p);
    let widen = |t: &str, end: usize| -> String {
        let mut st = floor_char(t, p);
        while st > 0 && !t.as_bytes()[st - 1].is_ascii_whitespace() && p - st < 24 {
            st -= 1;
            while !t.is_char_boundary(st) {
                st -= 1;
            }
        }
        let mut en = end;
        while en < t.len() && !t.as_bytes()[en].is_ascii_whitespace() && en - end < 24 {
            en += 1;
        }
        let en = ceil_char(t, en);
        super::short(&t[st..en.max(st)], 80)
    };
    (widen(a, a.len() - s), widen(b, b.len() - s))
}

/// True when `s` holds something that reads as a date or time: `HH:MM`, `YYYY-MM-DD`,
/// `DD/MM/YYYY`, a 10-digit Unix time, or a month name next to a number.
pub fn looks_like_time(s: &str) -> bool {
    let b = s.as_bytes();
    let digit = |i: usize| b.get(i).is_some_and(u8::is_ascii_digit);
    for (i, &c) in b.iter().enumerate() {
        if c == b':' && i >= 1 && digit(i - 1) && digit(i + 1) && digit(i + 2) {
            return true;
        }
        if (c == b'-' || c == b'/') && i >= 2 && digit(i - 1) && digit(i - 2) && digit(i + 1) {
            return true;
        }
    }
    if s.split(|c: char| !c.is_ascii_digit())
        .any(|run| run.len() >= 10)
    {
        return true;
    }
    const MONTHS: [&str; 12] = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ];
    let lower = s.to_ascii_lowercase();
    MONTHS.iter().any(|m| lower.contains(m)) && b.iter().any(u8::is_ascii_digit)
}

fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

fn floor_char(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_char(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// `s` from 20 bytes before `at` to 40 after (character boundaries kept).
fn window(s: &str, at: usize) -> String {
    let st = floor_char(s, at.saturating_sub(20));
    let en = ceil_char(s, at.saturating_add(40));
    s.get(st..en).unwrap_or("").to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(sys: &str, user: &[&str], prompt: &str, toks: &[(u32, &str)]) -> TurnInput {
        let mut messages = vec![Msg::from_chat(
            &serde_json::json!({"role": "system", "content": sys}),
        )];
        for u in user {
            messages.push(Msg::from_chat(
                &serde_json::json!({"role": "user", "content": u}),
            ));
        }
        TurnInput {
            messages,
            prompt: Some(PromptTokens {
                text: prompt.into(),
                tokens: Some(toks.iter().map(|(i, p)| (*i, p.len() as u32)).collect()),
                source: "test".into(),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_changed_timestamp_in_the_system_prompt_is_the_cause() {
        let a = turn(
            "Now: 10:41:07.",
            &["hi"],
            "S Now 10:41 U hi A",
            &[
                (1, "S "),
                (2, "Now "),
                (3, "10:41"),
                (4, " U hi"),
                (5, " A"),
            ],
        );
        let b = turn(
            "Now: 10:41:09.",
            &["hi", "more"],
            "S Now 10:42 U hi A ok U more A",
            &[(1, "S "), (2, "Now "), (6, "10:42"), (4, " U hi")],
        );
        let r = reuse(&a, &b, 2).unwrap();
        assert_eq!((r.shared, r.first_diff, r.offset), (2, Some(2), Some(6)));
        assert!(r.in_prompt);
        assert!(
            matches!(&r.cause, Cause::SystemPrompt { timestamp: true, before, after } if before == "10:41:07." && after == "10:41:09."),
            "{:?}",
            r.cause
        );
    }

    #[test]
    fn the_reply_is_followed_token_by_token_and_a_whole_match_keeps_one_token() {
        let mut a = turn(
            "s",
            &["hi"],
            "<s>hi<a>",
            &[(1, "<s>"), (2, "hi"), (3, "<a>")],
        );
        a.raw_reply = Some("ok".into());
        let b = turn(
            "s",
            &["hi", "x"],
            "<s>hi<a>ok<e>",
            &[(1, "<s>"), (2, "hi"), (3, "<a>"), (9, "ok"), (4, "<e>")],
        );
        let r = reuse(&a, &b, 3).unwrap();
        assert_eq!(r.shared, 4, "prompt 3 + reply 1");
        assert_eq!(
            r.cause,
            Cause::None,
            "the difference is the new content after the reply"
        );
        assert!(!r.in_prompt);
        let c = turn("s", &["hi"], "<s>hi", &[(1, "<s>"), (2, "hi")]);
        let r = reuse(&a, &c, 2).unwrap();
        assert_eq!(
            (r.shared, r.first_diff),
            (1, None),
            "whole prompt cached: n_past - 1"
        );
    }

    #[test]
    fn time_shapes() {
        for s in ["10:41", "2026-12-02", "02/12/2026", "1764640000", "Dec 2"] {
            assert!(looks_like_time(s), "{s}");
        }
        for s in ["hello", "a-b", "v1", "x: y"] {
            assert!(!looks_like_time(s), "{s}");
        }
    }
}
