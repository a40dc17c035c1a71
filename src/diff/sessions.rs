//! Two sessions compared exchange by exchange: what changed when the same requests went to
//! another server (`toolscope resend`, then `toolscope diff A.jsonl --against B.jsonl`). Pure.
//!
//! Pairing: an exchange of B labelled `resend:<id>` or `try:<id>:<variant>` is paired with
//! exchange `<id>` of A;
//! without such labels, the n-th chat/completion exchange of B (id order) with the n-th of A.
//! Per pair: HTTP status, the server's rendered prompt (llama-server `server_render`
//! annotation) as a unified line diff, the model's output (its raw text when known, see
//! [`crate::stream::raw`], else the visible content, reasoning included), the tool calls
//! (`name(arguments)`, arguments as parsed JSON so key spacing does not count), the finish
//! reason, and the rule ids of the findings `check` reports on each side.
//!
//! This module does not analyse: each [`Side`] carries facts the caller took from the one
//! analysed exchange (`crate::analysis::AnalysedExchange`), so `check`, the inspector and this
//! diff read the same findings.

use serde::Serialize;

use crate::finding::Finding;
use crate::session::read::Session;
use crate::session::{Api, Exchange};
use crate::stream::AssistantMessage;

/// One side of a pair: what the analysed exchange says about it.
#[derive(Debug, Clone, Copy)]
pub struct Side<'a> {
    /// Exchange id in its session.
    pub id: u64,
    /// HTTP status, when a response arrived.
    pub status: Option<u16>,
    /// The server's rendered prompt (`/apply-template`), when recorded.
    pub server_prompt: Option<&'a str>,
    /// The server's answer as decoded.
    pub message: &'a AssistantMessage,
    /// The model's own raw text, when known ([`crate::stream::raw::RawOutput::models_text`]).
    pub raw_text: Option<&'a str>,
    /// Every finding of the exchange.
    pub findings: &'a [Finding],
}

/// A value on side A and side B.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change<T> {
    pub a: T,
    pub b: T,
}

/// What differs between two paired exchanges; `None` fields are equal.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairDiff {
    /// Exchange id in A and in B.
    pub a: u64,
    pub b: u64,
    pub status: Option<Change<Option<u16>>>,
    /// Unified diff of the server-rendered prompts (`--- A #id` / `+++ B #id`), or a note when
    /// one side has no render.
    pub render: Option<String>,
    /// Output text (raw text when recorded, else reasoning + content).
    pub output: Option<Change<String>>,
    pub calls: Option<Change<Vec<String>>>,
    pub finish: Option<Change<Option<String>>>,
    /// Rule ids, sorted and deduplicated.
    pub findings: Option<Change<Vec<String>>>,
}

impl PairDiff {
    /// True when nothing differs.
    pub fn is_same(&self) -> bool {
        self.status.is_none()
            && self.render.is_none()
            && self.output.is_none()
            && self.calls.is_none()
            && self.finish.is_none()
            && self.findings.is_none()
    }
}

fn is_llm(e: &Exchange) -> bool {
    e.api() != Api::Other && !e.label.as_deref().is_some_and(|l| l.starts_with("probe:"))
}

/// The pairs of `(A exchange, B exchange)` (see the module docs), in B's id order.
pub fn pair<'a>(a: &'a Session, b: &'a Session) -> Vec<(&'a Exchange, &'a Exchange)> {
    let mut bs: Vec<&Exchange> = b.exchanges.iter().filter(|e| is_llm(e)).collect();
    bs.sort_by_key(|e| e.id);
    let linked = bs
        .iter()
        .any(|e| e.label.as_deref().and_then(linked_id).is_some());
    if linked {
        return bs
            .into_iter()
            .filter_map(|e| Some((a.exchange(linked_id(e.label.as_deref()?)?)?, e)))
            .collect();
    }
    let mut as_: Vec<&Exchange> = a.exchanges.iter().filter(|e| is_llm(e)).collect();
    as_.sort_by_key(|e| e.id);
    as_.into_iter().zip(bs).collect()
}

/// The exchange of A a label of B links to: `resend:<id>` (`toolscope resend`) or
/// `try:<id>:<variant>` (`toolscope try`, the inspector's `x`).
fn linked_id(label: &str) -> Option<u64> {
    if let Some(id) = label.strip_prefix("resend:") {
        return id.parse().ok();
    }
    label.strip_prefix("try:")?.split(':').next()?.parse().ok()
}

/// The model's output as compared: its raw text when known, else reasoning and content.
fn output_text(side: &Side<'_>) -> String {
    let m = side.message;
    match side.raw_text {
        Some(raw) => raw.to_owned(),
        None if m.reasoning.is_empty() => m.content.clone(),
        None => format!("[reasoning] {}\n[content] {}", m.reasoning, m.content),
    }
}

fn calls(m: &AssistantMessage) -> Vec<String> {
    m.tool_calls
        .iter()
        .map(|c| {
            let args = c
                .arguments_json()
                .map(|v| v.to_string())
                .unwrap_or_else(|_| c.arguments.clone());
            format!("{}({args})", c.name)
        })
        .collect()
}

fn rule_ids(findings: &[Finding]) -> Vec<String> {
    let mut ids: Vec<String> = findings.iter().map(|f| f.rule.id().to_owned()).collect();
    ids.sort();
    ids.dedup();
    ids
}

fn changed<T: PartialEq>(a: T, b: T) -> Option<Change<T>> {
    (a != b).then_some(Change { a, b })
}

/// Compares one pair.
pub fn diff_pair(a: &Side<'_>, b: &Side<'_>) -> PairDiff {
    let (ma, mb) = (a.message, b.message);
    let render = match (a.server_prompt, b.server_prompt) {
        (Some(x), Some(y)) if x != y => Some(
            similar::TextDiff::from_lines(x, y)
                .unified_diff()
                .context_radius(2)
                .header(&format!("A #{}", a.id), &format!("B #{}", b.id))
                .to_string(),
        ),
        (Some(_), None) => Some(format!(
            "B #{} has no server render (not llama-server, or the fetch failed)",
            b.id
        )),
        (None, Some(_)) => Some(format!(
            "A #{} has no server render (not llama-server, or the fetch failed)",
            a.id
        )),
        _ => None,
    };
    PairDiff {
        a: a.id,
        b: b.id,
        status: changed(a.status, b.status),
        render,
        output: changed(output_text(a), output_text(b)),
        calls: changed(calls(ma), calls(mb)),
        finish: changed(ma.finish_reason.clone(), mb.finish_reason.clone()),
        findings: changed(rule_ids(a.findings), rule_ids(b.findings)),
    }
}

fn show<T: std::fmt::Debug>(v: &T) -> String {
    format!("{v:?}")
}

/// Text report: one block per pair, `= A #1 ↔ B #3: same` or the changed fields.
pub fn render_text(diffs: &[PairDiff]) -> String {
    let mut out = String::new();
    if diffs.is_empty() {
        out.push_str("no exchanges to pair (B has no resend:<id> labels and no chat exchanges)\n");
    }
    for d in diffs {
        if d.is_same() {
            out.push_str(&format!("= A #{} ↔ B #{}: same\n", d.a, d.b));
            continue;
        }
        out.push_str(&format!("≠ A #{} ↔ B #{}\n", d.a, d.b));
        if let Some(c) = &d.status {
            out.push_str(&format!("  status:   {} → {}\n", show(&c.a), show(&c.b)));
        }
        if let Some(c) = &d.finish {
            out.push_str(&format!("  finish:   {} → {}\n", show(&c.a), show(&c.b)));
        }
        if let Some(c) = &d.calls {
            out.push_str(&format!("  calls:    {} → {}\n", show(&c.a), show(&c.b)));
        }
        if let Some(c) = &d.findings {
            out.push_str(&format!("  findings: {} → {}\n", show(&c.a), show(&c.b)));
        }
        if let Some(c) = &d.output {
            out.push_str(&format!(
                "  output A: {}\n  output B: {}\n",
                show(&c.a),
                show(&c.b)
            ));
        }
        if let Some(r) = &d.render {
            out.push_str("  render:\n");
            for l in r.lines() {
                out.push_str("    ");
                out.push_str(l);
                out.push('\n');
            }
        }
    }
    out
}
