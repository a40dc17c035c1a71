//! The Replay pane's engines view (`e`, issue #13 item 3): for the exchange's raw text, what
//! toolscope reads and what each engine's own tool-call parser for the exchange's family is
//! returns ([`crate::parser::engines::expected`]: llama.cpp build 11434, vLLM 0.33.0, SGLang
//! 0.5.23; calls, arguments after each engine's typing, content, reasoning, and where two
//! engines disagree), beside what the recorded server answered, so the user sees whether switching
//! engines would fix the call. It takes the Replay pane's right half (the server stream) while
//! open.
//!
//! The text is the one the Replay pane replays (the analysed exchange's raw output,
//! [`crate::stream::raw::RawOutput`]); when there is none, the view says why and what to change
//! ([`RawOutput::describe`](crate::stream::raw::RawOutput::describe)), as the pane does.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use crate::analysis::AnalysedExchange;
use crate::parser::engines::{self, Outcome};
use crate::parser::trace::cut;
use crate::parser::{ParseOutput, Syntax};

use crate::tui::analysis::ExchangeAnalysis;
use crate::tui::theme::Theme;

/// The view's state, kept in the session's Replay state: open or not, and the lines of the
/// exchange (row) they were built for (rebuilt when the exchange changes while open).
#[derive(Debug, Clone, Default)]
pub struct EnginesView {
    /// Shown instead of the server stream (toggled by `e`).
    pub open: bool,
    /// (row, lines) of the last build.
    built: Option<(usize, Vec<Line<'static>>)>,
}

impl EnginesView {
    /// Toggles the view; builds its lines for `a` when it opens.
    pub fn toggle(&mut self, a: &ExchangeAnalysis, theme: &Theme) {
        self.open = !self.open;
        self.refresh(a, theme);
    }

    /// Rebuilds the lines when open and `a` is another exchange than the one built for.
    pub fn refresh(&mut self, a: &ExchangeAnalysis, theme: &Theme) {
        if self.open && self.built.as_ref().is_none_or(|(row, _)| *row != a.row) {
            self.built = Some((a.row, lines(a, theme)));
        }
    }

    /// The lines for exchange `row`, when built.
    pub fn lines_for(&self, row: usize) -> Option<&[Line<'static>]> {
        self.built
            .as_ref()
            .filter(|(r, _)| *r == row)
            .map(|(_, l)| l.as_slice())
    }
}

/// Draws the view in `area` (the Replay pane's right half), scrolled by `scroll` wrapped rows
/// (`J`/`K`; the title says so when the view does not fit); returns the largest useful scroll
/// ([`super::side::draw_side`]).
pub fn draw(
    view: &EnginesView,
    f: &mut Frame,
    area: Rect,
    a: &ExchangeAnalysis,
    theme: &Theme,
    scroll: usize,
) -> usize {
    let st = &theme.styles;
    let owned;
    let body = match view.lines_for(a.row) {
        Some(l) => l,
        None => {
            owned = lines(a, theme);
            &owned[..]
        }
    };
    super::side::draw_side(f, area, " what each engine would return", body, scroll, st)
}

/// A text shown quoted and cut (model text may hold escape sequences: `{:?}` shows them
/// escaped).
fn quoted(s: &str, n: usize) -> String {
    format!("{:?}", cut(s, n))
}

/// What the view shows for an exchange: the family its replay text is read in, how that family
/// was picked, toolscope's strict read in it and each engine's outcome
/// ([`engines::expected`], tools from the request), in [`engines::Engine::ALL`] order.
#[derive(Debug, Clone)]
pub struct Verdicts {
    pub family: Syntax,
    /// How the family was picked, in the view's words.
    pub how: &'static str,
    pub ours: ParseOutput,
    pub engines: Vec<engines::EngineOutcome>,
}

/// The verdicts the view shows for `a`'s replay text ([`AnalysedExchange::replay`]): the family
/// is the Replay parser's syntax (the template's markers, else the text's), else the one the
/// calls read or the text's markers imply ([`engines::family_for`]). `None`: no text, or no
/// call family (every engine returns the text as content). The one computation behind the
/// view's rows, so tests check the view's own verdicts against the engines' code
/// (tests/e2e/engines_*.rs).
pub fn verdicts(a: &AnalysedExchange) -> Option<Verdicts> {
    let text = a.replay.text();
    if text.is_empty() {
        return None;
    }
    let tools = a.request.as_ref();
    let chosen = a.replay.traces.as_ref().and_then(|t| t.syntax);
    let read = crate::parser::parse(text, chosen, tools);
    let family = engines::family_for(chosen, &read, text)?;
    let how = if chosen == Some(family) {
        "from the template's markers, else the text's"
    } else if read.tool_calls.is_empty() {
        "from the text's markers"
    } else {
        "from the calls read"
    };
    let (ours, engines) = engines::expected_with(family, text, tools, a.llama_prompt.as_ref());
    Some(Verdicts {
        family,
        how,
        ours,
        engines,
    })
}

/// The view's lines for one exchange.
pub fn lines(a: &ExchangeAnalysis, theme: &Theme) -> Vec<Line<'static>> {
    let st = &theme.styles;
    let mut out: Vec<Line<'static>> = Vec::new();
    let kv = |k: &str, v: String, style| {
        Line::from(vec![
            Span::styled(format!("{k:<10} "), st.muted),
            Span::styled(v, style),
        ])
    };
    let text = a.replay.text();
    if text.is_empty() {
        let why = match &a.raw {
            Some(raw) if raw.models_text().is_none() => {
                format!(
                    "No raw text to give the engines' parsers: {}.",
                    raw.describe()
                )
            }
            _ => "No raw text to give the engines' parsers: the model wrote nothing.".to_owned(),
        };
        out.push(Line::from(Span::styled(why, st.muted)));
        return out;
    }
    let Some(v) = verdicts(a) else {
        out.push(Line::from(Span::styled(
            "No call family: the template names none and the text has no call markers, so \
             every engine returns the text as content.",
            st.muted,
        )));
        return out;
    };
    let (family, how, ours, list) = (v.family, v.how, v.ours, v.engines);
    out.push(kv("family", format!("{family} ({how})"), st.info));
    // what the recorded server answered: its own parse error (rule `server.parse_error`,
    // the owner of that fact), else the status and the calls it delivered
    if let Some(status) = a.summary.status {
        let parse_error = a
            .findings
            .iter()
            .find(|f| f.rule == crate::finding::Rule::ServerParseError)
            .and_then(|f| f.evidence.excerpt.clone());
        let what = match parse_error {
            Some(e) => format!("HTTP {status}: {}", cut(&e, 160)),
            None => format!(
                "HTTP {status}, {}",
                match a.summary.tool_calls {
                    0 => "no call".to_owned(),
                    n => format!("{n} call(s)"),
                }
            ),
        };
        let style = if status >= 400 {
            st.status_error
        } else {
            st.status_ok
        };
        out.push(kv("recorded", what, style));
    }
    out.push(Line::default());
    out.push(kv(
        "toolscope",
        engines::calls_summary(&ours.tool_calls),
        st.header,
    ));
    for c in &ours.tool_calls {
        out.push(kv(
            "",
            format!("{}({})", c.name, cut(&c.arguments.to_string(), 80)),
            st.base,
        ));
    }
    if !ours.content.trim().is_empty() {
        out.push(kv(
            "",
            format!("content {}", quoted(ours.content.trim(), 60)),
            st.base,
        ));
    }
    for r in &ours.repairs {
        out.push(kv(
            "",
            format!("repair {} at byte {}", r.kind, r.offset),
            st.severity_warning,
        ));
    }
    for m in &ours.malformed {
        out.push(kv(
            "",
            format!("malformed {} block at byte {}", m.syntax, m.offset),
            st.severity_warning,
        ));
    }
    for e in &list {
        out.push(Line::default());
        let style = match e.outcome {
            Outcome::Calls { .. } => st.status_ok,
            Outcome::Content { .. } => st.severity_warning,
            Outcome::Error { .. } => st.status_error,
        };
        out.push(Line::from(vec![
            Span::styled(format!("{:<10} ", e.engine.name()), st.header),
            Span::styled(
                e.parser.map_or(format!("{} (no parser)", e.release), |p| {
                    format!("{} parser {p}", e.release)
                }),
                st.muted,
            ),
        ]));
        out.push(kv("", e.outcome.summary(), style));
        if !matches!(e.outcome, Outcome::Error { .. }) {
            for line in e.outcome.detail(80) {
                out.push(kv("", line, st.base));
            }
        }
        if let Some(d) = e.defect {
            out.push(kv("", format!("engine defect: {d}"), st.severity_warning));
        }
        out.push(kv("", e.why.clone(), st.muted));
    }
    let differ = engines::disagreements(&list);
    out.push(Line::default());
    if differ.is_empty() {
        out.push(kv("engines", "agree".to_owned(), st.status_ok));
    }
    for d in differ {
        out.push(kv("engines", d, st.severity_warning));
    }
    out.push(Line::default());
    out.push(Line::from(vec![
        Span::styled(format!("{:<10} ", "Ollama"), st.header),
        Span::styled(
            "not modelled: toolscope has no model of Ollama's parsers",
            st.muted,
        ),
    ]));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::raw::RawOutput;

    fn plain(lines: &[Line<'static>]) -> String {
        lines
            .iter()
            .map(|l| {
                l.spans
                    .iter()
                    .map(|s| s.content.as_ref())
                    .collect::<String>()
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// No raw text: the view says why and what to change, in RawOutput's own words.
    #[test]
    fn without_raw_text_it_says_why_and_how() {
        let theme = Theme::resolve(Some("dark"), None, false).unwrap();
        let mut a = ExchangeAnalysis::default();
        a.analysed.raw = Some(RawOutput::Missing {
            why: "streamed response: `__verbose.content` is empty in stream mode".into(),
            how: "start llama-server with LLAMA_SERVER_SLOTS_DEBUG=1".into(),
        });
        let text = plain(&lines(&a, &theme));
        assert!(text.contains("is empty in stream mode"), "{text}");
        assert!(text.contains("LLAMA_SERVER_SLOTS_DEBUG=1"), "{text}");
        assert!(!text.contains("llama.cpp"), "{text}");
    }
}
