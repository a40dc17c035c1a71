//! The Template pane's side-by-side diff view (local render ⟷ server render): its state,
//! keys and drawing. The pane's document itself is built in [`crate::tui::doc`].

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::tui::keymap::Action;
use crate::tui::state::{SessionView, State};

/// The side-by-side diff view over the Template pane (local render left, server right).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiffView {
    /// First row shown.
    pub top: usize,
    /// Columns scrolled to the right (both sides).
    pub left: usize,
    /// Row where the difference `n`/`N` last moved to starts.
    pub change: Option<usize>,
}

/// Rows where a run of differences starts (a non-equal row after an equal one).
pub fn change_starts(rows: &[crate::diff::Row]) -> Vec<usize> {
    use crate::diff::RowKind;
    (0..rows.len())
        .filter(|&i| {
            rows[i].kind != RowKind::Equal && (i == 0 || rows[i - 1].kind == RowKind::Equal)
        })
        .collect()
}

/// Why the Template pane's diff view cannot open, if it cannot.
pub(crate) fn diff_unavailable(t: &crate::tui::analysis::TemplateView) -> Option<String> {
    if t.diff.is_some() {
        return None;
    }
    Some(match (&t.local, &t.server) {
        (_, None) => "no server render recorded for this exchange: nothing to diff against".into(),
        (None, _) => "no local render: the session header has no /props chat_template".into(),
        (Some(Err(e)), _) => format!("no local render: {e}"),
        (Some(Ok(_)), Some(_)) => "no diff computed".into(),
    })
}

/// Keys in the diff view: scroll (rows, columns), jump between differences, back.
pub(crate) fn diff_action(s: &mut SessionView, action: Action, ph: usize) {
    let rows = s
        .analysis
        .as_ref()
        .and_then(|a| a.template.diff.as_deref())
        .unwrap_or(&[]);
    let starts = change_starts(rows);
    // One line of the pane is the diff's header.
    let h = ph.saturating_sub(1).max(1);
    let max = rows.len().saturating_sub(h);
    let Some(d) = &mut s.diff else { return };
    match action {
        Action::Back => {
            s.diff = None;
            return;
        }
        Action::Down => d.top += 1,
        Action::Up => d.top = d.top.saturating_sub(1),
        Action::PageDown => d.top += h,
        Action::PageUp => d.top = d.top.saturating_sub(h),
        Action::Top => d.top = 0,
        Action::Bottom => d.top = max,
        Action::Right => d.left += 8,
        Action::Left => d.left = d.left.saturating_sub(8),
        Action::NextChange | Action::PrevChange => {
            let cur = d.change;
            let next = if action == Action::NextChange {
                starts.iter().copied().find(|&i| cur.is_none_or(|c| i > c))
            } else {
                starts
                    .iter()
                    .rev()
                    .copied()
                    .find(|&i| cur.is_some_and(|c| i < c))
            };
            if let Some(i) = next {
                d.change = Some(i);
                d.top = i.saturating_sub(2);
            }
        }
        _ => {}
    }
    d.top = d.top.min(max);
}

/// The side-by-side diff view: the local render left, the server's right, one row per
/// [`crate::diff::Row`] (line numbers, a gutter mark, changed tokens in the diff styles).
pub(crate) fn draw_diff(
    state: &State,
    f: &mut Frame,
    area: Rect,
    a: &crate::tui::analysis::ExchangeAnalysis,
    rows: &[crate::diff::Row],
    d: crate::tui::screen::template::DiffView,
) {
    use crate::diff::RowKind;
    let st = &state.theme.styles;
    let [head, body] = Layout::vertical([Constraint::Length(1), Constraint::Min(0)]).areas(area);
    let starts = crate::tui::screen::template::change_starts(rows);
    let count = |k: RowKind| rows.iter().filter(|r| r.kind == k).count();
    let at = d
        .change
        .and_then(|c| starts.iter().position(|&x| x == c))
        .map(|i| format!("difference {}/{}", i + 1, starts.len()))
        .unwrap_or_else(|| format!("{} differences", starts.len()));
    let summary = if starts.is_empty() {
        Span::styled("identical renders", st.status_ok)
    } else {
        Span::styled(
            format!(
                "{at} · {} changed · {} only local · {} only server",
                count(RowKind::Changed),
                count(RowKind::Deleted),
                count(RowKind::Inserted)
            ),
            st.severity_warning,
        )
    };
    let server = a
        .template
        .server_source
        .as_deref()
        .unwrap_or("server render");
    f.render_widget(
        Paragraph::new(Line::from(vec![
            summary,
            Span::styled("   left: ", st.muted),
            Span::styled("local render", st.diff_removed),
            Span::styled("  right: ", st.muted),
            Span::styled(server.to_owned(), st.diff_added),
        ])),
        head,
    );
    let [left, mid, right] = Layout::horizontal([
        Constraint::Fill(1),
        Constraint::Length(1),
        Constraint::Fill(1),
    ])
    .areas(body);
    let h = body.height as usize;
    let shown = rows.iter().enumerate().skip(d.top).take(h);
    let width = rows
        .iter()
        .flat_map(|r| [&r.left, &r.right])
        .flatten()
        .map(|l| l.number)
        .max()
        .unwrap_or(1)
        .to_string()
        .len();
    let mut cols: [(Vec<Line>, Vec<Line>); 2] = Default::default();
    for (i, r) in shown {
        let current = d.change == Some(i);
        for (side, (gut, text)) in cols.iter_mut().enumerate() {
            let line = if side == 0 { &r.left } else { &r.right };
            let (changed, whole) = if side == 0 {
                (st.diff_deleted, st.diff_removed)
            } else {
                (st.diff_inserted, st.diff_added)
            };
            let mark = match (r.kind, line) {
                (RowKind::Fold, _) => " ",
                (_, None) => " ",
                (RowKind::Equal, _) => " ",
                (RowKind::Changed, _) => "~",
                (RowKind::Deleted, _) => "-",
                (RowKind::Inserted, _) => "+",
            };
            let num = line
                .as_ref()
                .map(|l| format!("{:>width$}", l.number))
                .unwrap_or_else(|| " ".repeat(width));
            let cursor = if current && side == 0 { "▶" } else { " " };
            gut.push(Line::from(vec![
                Span::styled(cursor, st.timeline_cursor),
                Span::styled(num, if mark == " " { st.muted } else { whole }),
                Span::styled(format!("{mark} "), whole),
            ]));
            text.push(match (r.kind, line) {
                (RowKind::Fold, _) => Line::from(Span::styled(
                    format!("⋯ {} equal lines", r.hidden),
                    st.muted,
                )),
                (_, None) => Line::from(Span::styled("", st.muted)),
                (_, Some(l)) => Line::from(
                    l.segments
                        .iter()
                        .map(|seg| {
                            let mut style = if seg.special {
                                st.special_token
                            } else {
                                st.base
                            };
                            if seg.changed {
                                style = style.patch(changed);
                            }
                            Span::styled(seg.text.clone(), style)
                        })
                        .collect::<Vec<_>>(),
                ),
            });
        }
    }
    let gw = (width + 3) as u16;
    for ((gut, text), r) in cols.into_iter().zip([left, right]) {
        let [g, t] = Layout::horizontal([Constraint::Length(gw), Constraint::Min(0)]).areas(r);
        f.render_widget(Paragraph::new(gut), g);
        f.render_widget(Paragraph::new(text).scroll((0, d.left as u16)), t);
    }
    let bar: Vec<Line> = (0..h)
        .map(|_| Line::from(Span::styled("│", st.border)))
        .collect();
    f.render_widget(Paragraph::new(bar), mid);
}
