//! The loop view (`L`): the session's agent loop across exchanges, from
//! [`crate::conversation`]. One screen over the list and panes:
//!
//! * each conversation and its turns (exchange, tool time since the previous turn's last
//!   response byte, model time from request start to last response byte);
//! * under each turn the calls of its reply, as siblings (`├─`/`└─`: parallel calls), each
//!   with its call id and the result that answered it (`→ #exchange msg N`: the exchange whose
//!   request carried the result, 0-based index in its `messages`), or `no result`;
//! * a sub-agent conversation nested under the call that started it;
//! * per turn the prompt reuse against the previous turn's prompt plus reply (shared prefix,
//!   first differing token, the cause) beside the engine's own counters (llama-server
//!   `timings.cache_n` / `prompt_n`, `usage…cached_tokens`);
//! * the loop findings ([`crate::conversation::rules`]).
//!
//! Enter on a turn, call or finding opens that exchange's panes; q/Esc closes the view. The
//! loop is computed off the UI task ([`compute`], every generation exchange analysed at
//! [`crate::analysis::Depth::Findings`], as `check` does) when the view opens.

use std::collections::HashMap;
use std::sync::Arc;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};

use crate::conversation::{CallLink, Conversation, Loop, Reuse, Turn, TurnInput, short};
use crate::finding::{Finding, Severity};
use crate::session::index::SessionSource;
use crate::tui::doc::Doc;
use crate::tui::keymap::Action;
use crate::tui::message::Effect;
use crate::tui::state::{Focus, Scroll, SessionView, State};

use super::widgets::{block, draw_doc};
use crate::tui::theme::Theme;

/// A session's loop and its findings, computed off the UI task.
#[derive(Debug, Clone, Default)]
pub struct LoopData {
    pub conv: Loop,
    /// [`crate::conversation::rules::findings`] of the loop.
    pub findings: Vec<Finding>,
}

/// The view's state: the loop (once computed), its document, and the cursor.
#[derive(Debug, Clone, Default)]
pub struct LoopView {
    pub data: Option<Arc<LoopData>>,
    pub doc: Doc,
    /// Per item of `doc` (lines with an item can be opened): the exchange id Enter opens.
    pub targets: Vec<u64>,
    pub scroll: Scroll,
}

/// Draws the view over the list and panes (`area`: from the list's top to the pane's bottom).
pub(crate) fn draw(state: &State, f: &mut Frame, area: Rect, v: &LoopView) {
    let title = match &v.data {
        None => "Loop · computing the session's conversations…".to_owned(),
        Some(d) => format!(
            "Loop · {} conversations · {} calls · {} findings (Enter opens the exchange)",
            d.conv.conversations.len(),
            d.conv.calls.len(),
            d.findings.len()
        ),
    };
    let b = block(&title, true, state);
    let inner = b.inner(area);
    f.render_widget(b, area);
    draw_doc(state, f, inner, &v.doc, v.scroll, true, None);
}

/// The loop of every generation exchange of `src`, in exchange id order (rows that do not
/// load are skipped; their `session.damaged` findings are the list's).
pub fn compute(src: &SessionSource) -> LoopData {
    let mut b = crate::conversation::Builder::new();
    for row in 0..src.len() {
        let Ok(ex) = src.load(row) else { continue };
        if !ex.api().is_generation() {
            continue;
        }
        let anns = src.annotations_of(ex.id);
        let ctx = crate::analysis::index::context(src, &anns);
        let a = crate::analysis::analyse(ex, ctx, crate::analysis::Depth::Findings);
        if let Some(t) = TurnInput::from_analysed(&a) {
            b.push(t);
        }
    }
    let conv = b.finish();
    let findings = crate::conversation::rules::findings(&conv);
    LoopData { conv, findings }
}

impl LoopView {
    /// Shows `data` (the cursor stays where it was, within the new document).
    pub fn set(&mut self, data: Arc<LoopData>, theme: &Theme) {
        let (doc, targets) = build(&data, theme);
        self.doc = doc;
        self.targets = targets;
        self.data = Some(data);
        let len = self.doc.lines.len();
        self.scroll.cursor = self.scroll.cursor.min(len.saturating_sub(1));
    }

    /// The exchange the line under the cursor opens.
    pub fn target(&self) -> Option<u64> {
        let item = self.doc.items.get(self.scroll.cursor).copied().flatten()?;
        self.targets.get(item).copied()
    }
}

/// `L`: opens the view and asks for the loop.
pub(crate) fn open(s: &mut SessionView, epoch: u64) -> Vec<Effect> {
    s.loop_view = Some(LoopView::default());
    vec![Effect::Loop { epoch }]
}

/// A key while the view is open. `h`: the view's height in lines.
pub(crate) fn action(
    s: &mut SessionView,
    a: Action,
    h: usize,
    select: impl FnOnce(&mut SessionView) -> Vec<Effect>,
) -> (Vec<Effect>, Option<String>) {
    let Some(v) = &mut s.loop_view else {
        return (Vec::new(), None);
    };
    let len = v.doc.lines.len();
    match a {
        Action::Up => v.scroll.move_by(-1, len, h),
        Action::Down => v.scroll.move_by(1, len, h),
        Action::PageUp => v.scroll.move_by(-(h as isize), len, h),
        Action::PageDown => v.scroll.move_by(h as isize, len, h),
        Action::Top => v.scroll.set(0, len, h),
        Action::Bottom => v.scroll.set(len.saturating_sub(1), len, h),
        Action::Back | Action::LoopView => s.loop_view = None,
        Action::Select => {
            let Some(ex) = v.target() else {
                return (Vec::new(), None);
            };
            let Some(row) = s.source.row_of(ex) else {
                return (
                    Vec::new(),
                    Some(format!("exchange {ex} is not in the session")),
                );
            };
            let Some(pos) = s.visible.iter().position(|&r| r == row) else {
                return (
                    Vec::new(),
                    Some(format!(
                        "exchange {ex} is hidden by the filter (f to change it)"
                    )),
                );
            };
            s.loop_view = None;
            s.list.cursor = pos;
            s.focus = Focus::Detail;
            return (select(s), None);
        }
        _ => {}
    }
    (Vec::new(), None)
}

/// Builds the view's document: conversations (sub-agents nested under their call), then the
/// loop findings. Returns the document and the exchange each item opens.
pub fn build(d: &LoopData, theme: &Theme) -> (Doc, Vec<u64>) {
    let mut b = Builder {
        d,
        st: &theme.styles,
        doc: Doc::default(),
        targets: Vec::new(),
        turn_no: HashMap::new(),
    };
    for c in &d.conv.conversations {
        for (i, t) in c.turns.iter().enumerate() {
            b.turn_no.insert(t.exchange, (c.id, i + 1));
        }
    }
    let st = b.st;
    if d.conv.conversations.is_empty() {
        b.line(
            vec![Span::styled(
                "No chat generations in this session: no loop to show.",
                st.muted,
            )],
            None,
        );
    }
    for c in d
        .conv
        .conversations
        .iter()
        .filter(|c| c.started_by.is_none())
    {
        b.conversation(c, 0);
    }
    b.line(Vec::new(), None);
    let n = d.findings.len();
    b.line(
        vec![Span::styled(format!("Loop findings · {n}"), st.header)],
        None,
    );
    if n == 0 {
        // `loop.call_unanswered` judges a call only when a next turn exists: a session's
        // last reply may end with calls no request answered yet (shown `→ no result` above)
        let open = d.conv.calls.iter().filter(|c| c.result.is_none()).count();
        let text = if open == 0 {
            "  none: every call answered, no unknown result id, no repeated call, no avoidable re-prefill".to_owned()
        } else {
            format!(
                "  none: {open} call(s) of the last reply have no result yet (no later request to answer them); no unknown result id, no repeated call, no avoidable re-prefill"
            )
        };
        b.line(vec![Span::styled(text, st.status_ok)], None);
    }
    for f in &d.findings {
        let (label, style) = match f.severity {
            Severity::Error => ("error  ", st.severity_error),
            Severity::Warning => ("warning", st.severity_warning),
            Severity::Info => ("info   ", st.severity_info),
        };
        let spans = vec![
            Span::styled(format!("  {label} "), style),
            Span::styled(format!("{} ", f.rule.id()), st.header),
            Span::styled(
                f.exchange.map(|e| format!("#{e} ")).unwrap_or_default(),
                st.accent,
            ),
            Span::styled(f.message.clone(), st.base),
        ];
        let copy = serde_json::to_string_pretty(f).unwrap_or_default();
        match f.exchange {
            Some(e) => b.item(spans, e, copy),
            None => b.line(spans, None),
        }
    }
    (b.doc, b.targets)
}

struct Builder<'a> {
    d: &'a LoopData,
    st: &'a crate::tui::theme::Styles,
    doc: Doc,
    targets: Vec<u64>,
    /// Exchange → (conversation, 1-based turn number).
    turn_no: HashMap<u64, (usize, usize)>,
}

impl Builder<'_> {
    fn line(&mut self, spans: Vec<Span<'static>>, item: Option<usize>) {
        self.doc.lines.push(Line::from(spans));
        self.doc.items.push(item);
    }

    /// A line Enter opens exchange `ex` from.
    fn item(&mut self, spans: Vec<Span<'static>>, ex: u64, copy: String) {
        let i = self.targets.len();
        self.targets.push(ex);
        self.doc.copy.push(copy);
        self.line(spans, Some(i));
    }

    fn conversation(&mut self, c: &Conversation, depth: usize) {
        let st = self.st;
        let pad = "  ".repeat(depth);
        let model: u64 = c.turns.iter().filter_map(|t| t.model_us).sum();
        let tool: i64 = c.turns.iter().filter_map(|t| t.tool_us).sum();
        let kind = match c.started_by {
            Some((ex, i)) => format!(" · sub-agent of #{ex} call {i}"),
            None => String::new(),
        };
        let first = c.turns.first().map_or(0, |t| t.exchange);
        self.item(
            vec![Span::styled(
                format!(
                    "{pad}Conversation {}{kind} · {} turn{} · model {}{}",
                    c.id + 1,
                    c.turns.len(),
                    if c.turns.len() == 1 { "" } else { "s" },
                    dur(model as i64),
                    if c.turns.iter().any(|t| t.tool_us.is_some()) {
                        format!(" · tools {}", dur(tool))
                    } else {
                        String::new()
                    },
                ),
                st.header,
            )],
            first,
            format!("conversation {}", c.id + 1),
        );
        for (i, t) in c.turns.iter().enumerate() {
            self.turn(t, i + 1, depth + 1);
        }
    }

    fn turn(&mut self, t: &Turn, n: usize, depth: usize) {
        let st = self.st;
        let pad = "  ".repeat(depth);
        let mut spans = vec![
            Span::styled(format!("{pad}turn {n} "), st.title),
            Span::styled(format!("#{}", t.exchange), st.accent),
            Span::styled(
                format!("  {} msgs (+{})", t.messages, t.new_messages),
                st.muted,
            ),
        ];
        if let Some(us) = t.tool_us {
            spans.push(Span::styled(format!("  tool {}", dur(us)), st.base));
        }
        if let Some(us) = t.model_us {
            spans.push(Span::styled(format!("  model {}", dur(us as i64)), st.base));
        }
        if !t.reply_kept {
            spans.push(Span::styled(
                "  previous reply re-sent changed",
                st.severity_warning,
            ));
        }
        if t.calls.is_empty() {
            spans.push(Span::styled("  no calls", st.muted));
        }
        self.item(spans, t.exchange, format!("exchange {}", t.exchange));
        if let Some(r) = &t.reuse {
            let spans = reuse_spans(r, &pad, st);
            self.item(spans, t.exchange, format!("{r:?}"));
        }
        let k = t.calls.len();
        for (j, &ci) in t.calls.iter().enumerate() {
            let Some(c) = self.d.conv.calls.get(ci) else {
                continue;
            };
            let c = c.clone();
            self.call(&c, &pad, j + 1 == k, depth);
        }
    }

    fn call(&mut self, c: &CallLink, pad: &str, last: bool, depth: usize) {
        let st = self.st;
        let branch = if last { "└─" } else { "├─" };
        let mut spans = vec![
            Span::styled(format!("{pad}  {branch} "), st.muted),
            Span::styled(
                format!("{}({})", c.call.name, short(&c.call.arguments, 48)),
                st.base,
            ),
            Span::styled(
                format!("  {}", c.call.id.as_deref().unwrap_or("(no id)")),
                st.muted,
            ),
        ];
        match c.result {
            Some((ex, m)) => {
                let turn = self
                    .turn_no
                    .get(&ex)
                    .map(|(_, n)| format!(" (turn {n})"))
                    .unwrap_or_default();
                spans.push(Span::styled(
                    format!("  → #{ex} msg {m}{turn}"),
                    st.status_ok,
                ));
                if let Some(text) = &c.result_text {
                    spans.push(Span::styled(format!("  {:?}", short(text, 40)), st.muted));
                }
            }
            None if !c.subagents.is_empty() => {}
            None => spans.push(Span::styled("  → no result", st.severity_error)),
        }
        let target = c.result.map_or(c.exchange, |r| r.0);
        self.item(
            spans,
            target,
            serde_json::to_string_pretty(c).unwrap_or_default(),
        );
        let subs = c.subagents.clone();
        for id in subs {
            if let Some(sub) = self.d.conv.conversations.get(id) {
                let sub = sub.clone();
                self.conversation(&sub, depth + 2);
            }
        }
    }
}

/// `reuse 245/260 tokens · first diff token 245 (in the reply) · cause · engine cache_n 245`.
fn reuse_spans(r: &Reuse, pad: &str, st: &crate::tui::theme::Styles) -> Vec<Span<'static>> {
    let unit = r.unit;
    let mut spans = vec![Span::styled(
        format!("{pad}  reuse {}/{} {unit}", r.shared, r.prompt),
        st.base,
    )];
    match r.first_diff {
        Some(i) => spans.push(Span::styled(
            format!(
                " · first diff {} {i} ({})",
                unit.trim_end_matches('s'),
                if r.in_prompt {
                    "in the previous prompt"
                } else {
                    "after the previous reply"
                }
            ),
            st.muted,
        )),
        None => spans.push(Span::styled(" · whole prompt shared", st.muted)),
    }
    let cause_style: Style = if r.cause == crate::conversation::Cause::None {
        st.muted
    } else {
        st.severity_warning
    };
    spans.push(Span::styled(
        format!(" · {}", r.cause.describe()),
        cause_style,
    ));
    let e = &r.engine;
    let mut eng = Vec::new();
    if let Some(n) = e.cache_n {
        eng.push(format!("cache_n {n}"));
    }
    if let Some(n) = e.prompt_n {
        eng.push(format!("prompt_n {n}"));
    }
    if let Some(n) = e.cached_tokens {
        eng.push(format!("cached_tokens {n}"));
    }
    if !eng.is_empty() {
        spans.push(Span::styled(
            format!(" · engine {}", eng.join(" ")),
            st.info,
        ));
    }
    spans
}

/// `412 ms`, `1.23 s` (negative: the next request started before the last byte, shown as is).
fn dur(us: i64) -> String {
    if us.abs() < 1_000_000 {
        format!("{} ms", us / 1000)
    } else {
        format!("{:.2} s", us as f64 / 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(dur(412_345), "412 ms");
        assert_eq!(dur(1_234_567), "1.23 s");
        assert_eq!(dur(-5_000), "-5 ms");
    }
}
