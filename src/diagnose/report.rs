//! The shape of `toolscope check` output, JSON and text.
//!
//! Written as found (src/cli/check.rs): an exchange's listing and its findings as soon as it
//! is analysed, so `check` keeps [`Tally`] counts, not the report.
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
use crate::finding::{Finding, Severity};
use crate::stream::message::arguments_value;

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
    /// Where the model's raw text came from (`raw output: slots debug (slot 0)`,
    /// `raw output: regenerated, verified`, …) or why it is missing and how to get it
    /// ([`crate::analysis::describe_raw`]); absent for bare pairs.
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

impl ExchangeSummary {
    /// Summarises a context from input `file`; `fallback_index` is used when the context has
    /// no id.
    pub fn from_context(cx: &ExchangeContext, fallback_index: u64, file: &str) -> ExchangeSummary {
        ExchangeSummary {
            raw_text: cx.raw.as_ref().map(raw_text_line),
            ..ExchangeSummary::of(
                file,
                cx.id.unwrap_or(fallback_index),
                cx.api,
                cx.request.as_ref(),
                cx.message.as_ref(),
                cx.status,
            )
        }
    }

    /// The listing of exchange `index` of `file`: its API, the model the request names (else
    /// the reply's), the reply in brief (`message`), the HTTP status. `partial` and `raw_text` are left unset.
    pub fn of(
        file: &str,
        index: u64,
        api: crate::session::Api,
        request: Option<&Value>,
        message: Option<&crate::stream::AssistantMessage>,
        status: Option<u16>,
    ) -> ExchangeSummary {
        let m = message.cloned().unwrap_or_default();
        let model = request
            .and_then(|r| r.get("model"))
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or(m.model.clone());
        ExchangeSummary {
            file: file.to_owned(),
            index,
            api: api.as_str().to_owned(),
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
            raw_text: None,
            status,
            partial: None,
        }
    }
}

/// Counts of what `check` has written so far: exchanges listed and findings by severity.
/// The report itself is written as it is found (src/cli/check.rs), so this is all that is
/// kept of it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Exchanges listed.
    pub exchanges: usize,
    pub errors: usize,
    pub warnings: usize,
    pub info: usize,
}

impl Tally {
    /// Counts finding `f`.
    pub fn count(&mut self, f: &Finding) {
        match f.severity {
            Severity::Error => self.errors += 1,
            Severity::Warning => self.warnings += 1,
            Severity::Info => self.info += 1,
        }
    }

    /// Number of findings counted.
    pub fn findings(&self) -> usize {
        self.errors + self.warnings + self.info
    }

    /// Highest severity among the findings counted.
    pub fn worst(&self) -> Option<Severity> {
        if self.errors > 0 {
            Some(Severity::Error)
        } else if self.warnings > 0 {
            Some(Severity::Warning)
        } else if self.info > 0 {
            Some(Severity::Info)
        } else {
            None
        }
    }

    /// Process exit code of `check`: 1 when any finding is a warning or an error, else 0.
    pub fn exit_code(&self) -> u8 {
        u8::from(self.worst().is_some_and(|s| s >= Severity::Warning))
    }

    /// The text report's closing line: `N exchange(s), E error(s), W warning(s), I info`.
    pub fn summary_line(&self) -> String {
        format!(
            "{} exchange(s), {} error(s), {} warning(s), {} info\n",
            self.exchanges, self.errors, self.warnings, self.info
        )
    }
}

/// The text report's block for one exchange: a line naming `e.file` when it differs from
/// `last_file` (which is updated), the exchange's id, API, model, status and finish reason,
/// why it is partial (`partial:`, a client that disconnected, an upstream that failed, a
/// shutdown), its reply in brief, then `findings` (its own) with evidence and hint, and a blank line.
pub fn text_block(
    e: &ExchangeSummary,
    findings: &[Finding],
    last_file: &mut Option<String>,
) -> String {
    let mut s = String::new();
    if last_file.as_deref() != Some(e.file.as_str()) && !e.file.is_empty() {
        let _ = writeln!(s, "{}", e.file);
        *last_file = Some(e.file.clone());
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
    if let Some(p) = &e.partial {
        let _ = writeln!(s, "  partial:   {}", one_line(p, 160));
    }
    if !e.reasoning.is_empty() {
        let _ = writeln!(s, "  reasoning: {}", one_line(&e.reasoning, 100));
    }
    if !e.content.is_empty() {
        let _ = writeln!(s, "  content:   {}", one_line(&e.content, 100));
    }
    if let Some(r) = &e.raw_text {
        let _ = writeln!(s, "  {}", one_line(r, 160));
    }
    for c in &e.tool_calls {
        let _ = writeln!(
            s,
            "  call:      {}({})",
            c.name,
            one_line(&c.arguments.to_string(), 90)
        );
    }
    if findings.is_empty() {
        let _ = writeln!(s, "  ok: no findings");
    }
    for f in findings {
        s.push_str(&text_finding(f));
    }
    s.push('\n');
    s
}

/// The heading of the text report's findings that belong to no listed exchange (a damaged
/// session line, a pre-flight lint, a bare `--tokens`); they follow it, each as
/// [`text_finding`], then a blank line.
pub const TEXT_LOOSE_HEADING: &str = "(not tied to an exchange)\n";

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

/// One finding as the text report shows it: severity, rule and message, then its evidence
/// (`at pointer …, event …, offset …, token …, tool …`), excerpt, hint and fix, indented.
pub fn text_finding(f: &Finding) -> String {
    let mut s = String::new();
    write_finding(&mut s, f);
    s
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
    if let Some(fix) = &f.fix {
        let _ = writeln!(
            s,
            "          fix ({}, toolscope try --fix {}): {}",
            fix.apply.as_str(),
            fix.id(),
            fix.change
        );
    }
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
        let mut r = Tally::default();
        assert_eq!(r.exit_code(), 0);
        r.count(&Finding {
            severity: Severity::Info,
            ..Finding::new(Rule::BosDuplicate, "m", "h")
        });
        assert_eq!(r.exit_code(), 0);
        r.count(&Finding::new(Rule::TokenPseudoSpecial, "m", "h"));
        assert_eq!(r.exit_code(), 1);
        assert_eq!(
            r.summary_line(),
            "0 exchange(s), 0 error(s), 1 warning(s), 1 info\n"
        );
    }

    #[test]
    fn one_line_cuts() {
        assert_eq!(one_line("a\nbcd", 3), "a⏎b…");
    }
}
