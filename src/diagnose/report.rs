//! The shape of `toolscope check` output, JSON and text.
//!
//! JSON: `{"exchanges":[{"index","api","model","content","reasoning","tool_calls":[{"name",
//! "arguments"}],"finish_reason"}],"findings":[{"rule","severity","exchange","message",
//! "evidence","hint"}]}`. `index` is the exchange id (1-based; 1 for a bare pair) within its
//! input file, named by `file` (exchanges) and `evidence.file` (findings): `check a.jsonl
//! b.jsonl` has two exchanges with index 1; `arguments` is the parsed JSON value, or the raw
//! string when it is not JSON.

use std::fmt::Write as _;

use serde::Serialize;
use serde_json::Value;

use super::ExchangeContext;
use super::rules::calls::arguments_value;
use crate::finding::{Finding, Severity};

/// One exchange as `check` lists it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExchangeSummary {
    /// Input file the exchange came from (session, HAR, or the bare pair's response file).
    pub file: String,
    /// Exchange id (1-based) within `file`.
    pub index: u64,
    /// `openai` or `anthropic`.
    pub api: String,
    /// Model named by the request, else by the response.
    pub model: Option<String>,
    pub content: String,
    pub reasoning: String,
    pub tool_calls: Vec<CallSummary>,
    pub finish_reason: Option<String>,
    /// Where the model's raw text came from (`slots debug (slot 0)`, `__verbose.content`,
    /// `regenerated, verified`, …) or `missing: <why>`; absent for bare pairs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw_text: Option<String>,
    /// HTTP status, for text output.
    #[serde(skip)]
    pub status: Option<u16>,
    /// Set when the exchange is partial (the client disconnected or the upstream failed
    /// mid-response): its recorded outcome and error. Its own signal, not a finding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial: Option<String>,
}

/// One tool call in [`ExchangeSummary`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallSummary {
    pub name: String,
    /// Parsed arguments, or the raw string when not JSON.
    pub arguments: Value,
}

/// The whole `check` result.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CheckReport {
    pub exchanges: Vec<ExchangeSummary>,
    pub findings: Vec<Finding>,
}

impl ExchangeSummary {
    /// Summarises a context from input `file`; `fallback_index` is used when the context has
    /// no id.
    pub fn from_context(cx: &ExchangeContext, fallback_index: u64, file: &str) -> ExchangeSummary {
        let m = cx.message.clone().unwrap_or_default();
        let model = cx
            .request
            .as_ref()
            .and_then(|r| r.get("model"))
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or(m.model.clone());
        ExchangeSummary {
            file: file.to_owned(),
            index: cx.id.unwrap_or(fallback_index),
            api: cx.api.as_str().to_owned(),
            model,
            content: m.content,
            reasoning: m.reasoning,
            tool_calls: m
                .tool_calls
                .iter()
                .map(|c| CallSummary {
                    name: c.name.clone(),
                    arguments: arguments_value(&c.arguments),
                })
                .collect(),
            finish_reason: m.finish_reason,
            raw_text: cx.raw.as_ref().map(raw_text_line),
            status: cx.status,
            partial: None,
        }
    }
}

impl ExchangeSummary {
    /// Whether finding `f` is about this exchange: same index, and the same file when the
    /// finding names one.
    pub fn owns(&self, f: &Finding) -> bool {
        f.exchange == Some(self.index) && f.evidence.file.as_ref().is_none_or(|x| *x == self.file)
    }
}

impl CheckReport {
    /// Highest severity among the findings.
    pub fn worst(&self) -> Option<Severity> {
        self.findings.iter().map(|f| f.severity).max()
    }

    /// Process exit code of `check`: 1 when any finding is a warning or an error, else 0.
    pub fn exit_code(&self) -> u8 {
        u8::from(self.worst().is_some_and(|s| s >= Severity::Warning))
    }

    /// The readable report: one block per exchange (its reply in brief, then its findings), then
    /// findings that belong to no exchange, then a summary line.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let mut last_source = None;
        for e in &self.exchanges {
            if last_source != Some(&e.file) && !e.file.is_empty() {
                let _ = writeln!(s, "{}", e.file);
                last_source = Some(&e.file);
            }
            let status = e.status.map(|st| format!(" HTTP {st}")).unwrap_or_default();
            let _ = writeln!(
                s,
                "#{} {} {}{} finish={}",
                e.index,
                e.api,
                e.model.as_deref().unwrap_or("-"),
                status,
                e.finish_reason.as_deref().unwrap_or("-")
            );
            if !e.reasoning.is_empty() {
                let _ = writeln!(s, "  reasoning: {}", one_line(&e.reasoning, 100));
            }
            if !e.content.is_empty() {
                let _ = writeln!(s, "  content:   {}", one_line(&e.content, 100));
            }
            if let Some(r) = &e.raw_text {
                let _ = writeln!(s, "  raw text:  {}", one_line(r, 160));
            }
            for c in &e.tool_calls {
                let _ = writeln!(
                    s,
                    "  call:      {}({})",
                    c.name,
                    one_line(&c.arguments.to_string(), 90)
                );
            }
            let mine: Vec<&Finding> = self.findings.iter().filter(|f| e.owns(f)).collect();
            if mine.is_empty() {
                let _ = writeln!(s, "  ok: no findings");
            }
            for f in mine {
                write_finding(&mut s, f);
            }
            s.push('\n');
        }
        let loose: Vec<&Finding> = self
            .findings
            .iter()
            .filter(|f| !self.exchanges.iter().any(|e| e.owns(f)))
            .collect();
        if !loose.is_empty() {
            let _ = writeln!(s, "(not tied to an exchange)");
            for f in loose {
                write_finding(&mut s, f);
            }
            s.push('\n');
        }
        let count = |sev| self.findings.iter().filter(|f| f.severity == sev).count();
        let _ = writeln!(
            s,
            "{} exchange(s), {} error(s), {} warning(s), {} info",
            self.exchanges.len(),
            count(Severity::Error),
            count(Severity::Warning),
            count(Severity::Info)
        );
        s
    }
}

/// `check`'s one line about an exchange's raw text: `<source>, N bytes`, or
/// `missing: <why> — <how>`.
pub(crate) fn raw_text_line(r: &crate::stream::raw::RawOutput) -> String {
    use crate::stream::raw::RawOutput;
    match r {
        RawOutput::Text { text, source, .. } => {
            format!("{}, {} bytes", source.label(), text.len())
        }
        RawOutput::Missing { why, how } => format!("missing: {why} — {how}"),
    }
}

fn write_finding(s: &mut String, f: &Finding) {
    let sev = match f.severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "info",
    };
    let _ = writeln!(s, "  {sev:<7} {}: {}", f.rule.id(), f.message);
    let ev = &f.evidence;
    let mut at = Vec::new();
    if let Some(p) = &ev.pointer {
        at.push(format!("pointer {p}"));
    }
    if let Some(e) = ev.event {
        at.push(format!("event {e}"));
    }
    if let Some(o) = ev.offset {
        at.push(format!("offset {o}"));
    }
    if let Some(t) = ev.token {
        at.push(format!("token {t}"));
    }
    if let Some(t) = &ev.tool {
        at.push(format!("tool {t}"));
    }
    if !at.is_empty() {
        let _ = writeln!(s, "          at {}", at.join(", "));
    }
    if let Some(x) = &ev.excerpt {
        let _ = writeln!(s, "          | {}", one_line(x, 100));
    }
    let _ = writeln!(s, "          hint: {}", f.hint);
}

/// `text` on one line (newlines shown as `⏎`), cut to `n` characters with `…`.
pub fn one_line(text: &str, n: usize) -> String {
    let flat: String = text
        .chars()
        .map(|c| if c == '\n' { '⏎' } else { c })
        .collect();
    if flat.chars().count() > n {
        format!("{}…", flat.chars().take(n).collect::<String>())
    } else {
        flat
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::Rule;

    #[test]
    fn exit_codes() {
        let mut r = CheckReport::default();
        assert_eq!(r.exit_code(), 0);
        r.findings.push(Finding {
            severity: Severity::Info,
            ..Finding::new(Rule::BosDuplicate, "m", "h")
        });
        assert_eq!(r.exit_code(), 0);
        r.findings
            .push(Finding::new(Rule::TokenPseudoSpecial, "m", "h"));
        assert_eq!(r.exit_code(), 1);
    }

    #[test]
    fn one_line_cuts() {
        assert_eq!(one_line("a\nbcd", 3), "a⏎b…");
    }
}
