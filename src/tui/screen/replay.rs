//! The Replay pane: the chunking selector, the timeline, toolscope's parser (left) and the
//! server stream or the engines view (right); its keys.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};

use super::side::draw_side;
use crate::finding::Pane;
use crate::tui::analysis::Chunking;
use crate::tui::keymap::Action;
use crate::tui::message::Effect;
use crate::tui::state::{SessionView, State, rebuild};
use crate::tui::theme::Theme;

/// A chunking's name in the Replay pane's selector (the title says it in full).
pub(crate) fn short_label(c: Chunking) -> &'static str {
    match c {
        Chunking::Recorded => "recorded",
        Chunking::PerPiece => "pieces",
        Chunking::PerChar => "chars",
        Chunking::Every2 => "×2",
        Chunking::Every8 => "×8",
        Chunking::Whole => "whole",
    }
}

pub(crate) fn draw_replay(
    state: &State,
    f: &mut Frame,
    area: Rect,
    a: &crate::tui::analysis::ExchangeAnalysis,
) {
    let st = &state.theme.styles;
    let Some(s) = &state.session else { return };
    let [selector, bar, body] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Min(0),
    ])
    .areas(area);
    let mut sel = vec![Span::styled("chunking: ", st.muted)];
    for c in Chunking::ALL {
        sel.push(Span::styled(
            format!(" {} ", short_label(c)),
            if c == s.chunking {
                st.tab_active
            } else {
                st.tab
            },
        ));
    }
    f.render_widget(Paragraph::new(Line::from(sel)), selector);
    // Timeline: one cell per step, or steps bucketed into the width.
    let w = bar.width.saturating_sub(12) as usize;
    let n = a.replay.len(s.chunking);
    let mut cells = vec![Span::styled(
        format!("{:>5}/{:<5} ", if n == 0 { 0 } else { s.step + 1 }, n),
        st.muted,
    )];
    if n > 0 && w > 0 {
        let cur = s.step * w / n.max(1);
        let mut t = String::new();
        let mut u = String::new();
        for i in 0..w.min(n.max(1) * 4).max(1) {
            if i < cur {
                t.push('━');
            } else if i > cur {
                u.push('─');
            }
        }
        cells.push(Span::styled(t, st.timeline_done));
        cells.push(Span::styled("●", st.timeline_cursor));
        cells.push(Span::styled(u, st.timeline_todo));
    }
    f.render_widget(Paragraph::new(Line::from(cells)), bar);
    let [left, right] =
        Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(body);
    let lb = Block::default()
        .borders(Borders::RIGHT)
        .border_style(st.border)
        .title(Span::styled("toolscope parser", st.muted));
    let li = lb.inner(left);
    f.render_widget(lb, left);
    f.render_widget(
        Paragraph::new(s.docs[4].lines.clone()).wrap(Wrap { trim: false }),
        li,
    );
    if s.replay_engines.open {
        let max = super::engines::draw(&s.replay_engines, f, right, a, &state.theme, s.side_scroll);
        s.side_max.set(max);
        return;
    }
    let max = draw_side(
        f,
        right,
        " server stream at the same point",
        &s.server_doc.lines,
        s.side_scroll,
        st,
    );
    s.side_max.set(max);
}

pub(crate) fn replay_action(s: &mut SessionView, action: Action, theme: &Theme) -> Vec<Effect> {
    let Some(a) = s.analysis.clone() else {
        return Vec::new();
    };
    let n = a.replay.len(s.chunking);
    let before = (s.step, s.chunking);
    match action {
        Action::Left | Action::Up => s.step = s.step.saturating_sub(1),
        Action::Right | Action::Down => s.step = (s.step + 1).min(n.saturating_sub(1)),
        Action::PageUp => s.step = s.step.saturating_sub(10),
        Action::PageDown => s.step = (s.step + 10).min(n.saturating_sub(1)),
        Action::StepFirst | Action::Top => s.step = 0,
        Action::StepLast | Action::Bottom => s.step = n.saturating_sub(1),
        Action::Chunking => {
            // Keep the same text position across chunkings.
            let end = a.replay.end(s.chunking, s.step).unwrap_or(0);
            let next = (s.chunking.index() + 1) % Chunking::ALL.len();
            s.chunking = Chunking::ALL[next];
            s.step = a.replay.find(s.chunking, end);
        }
        Action::Engines => {
            s.replay_engines.toggle(&a, theme);
            s.side_scroll = 0;
        }
        Action::SideDown | Action::SideUp => {
            // at most until the right half's last wrapped row is at the bottom (as last drawn)
            s.side_scroll = if action == Action::SideDown {
                (s.side_scroll + 1).min(s.side_max.get())
            } else {
                s.side_scroll.saturating_sub(1)
            };
        }
        _ => {}
    }
    if (s.step, s.chunking) != before {
        rebuild(s, Pane::Replay, theme);
    }
    Vec::new()
}
