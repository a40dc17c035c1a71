//! The Stream pane: SSE events (left) and the selected event's JSON (right).

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};

use super::widgets::draw_doc;
use crate::tui::analysis::ExchangeAnalysis;
use crate::tui::doc;
use crate::tui::state::State;

/// The Stream pane: the event list (left) and the selected event's JSON (right; `Enter`
/// zooms it to the whole pane).
pub(crate) fn draw(
    state: &State,
    f: &mut Frame,
    inner: Rect,
    a: &ExchangeAnalysis,
    focused: bool,
    search: Option<&str>,
) {
    let st = &state.theme.styles;
    let Some(s) = &state.session else { return };
    let [left, right] = if s.stream_zoom {
        [Rect::default(), inner]
    } else {
        Layout::horizontal([Constraint::Percentage(62), Constraint::Percentage(38)]).areas(inner)
    };
    draw_doc(state, f, left, &s.docs[3], s.panes[3], focused, search);
    let ev = s.docs[3]
        .items
        .get(s.panes[3].cursor)
        .copied()
        .flatten()
        .and_then(|i| a.events.get(i));
    if let Some(ev) = ev {
        let head = format!(
            "event {} · {} B · {}",
            ev.index,
            ev.size,
            ev.event.as_deref().unwrap_or("message")
        );
        let mut lines = vec![Line::from(Span::styled(head, st.muted))];
        lines.extend(crate::tui::highlight::json_lines(
            &doc::pretty(&ev.data),
            state.theme.syntect.as_deref(),
            st.base,
        ));
        let b = Block::default()
            .borders(if s.stream_zoom {
                Borders::NONE
            } else {
                Borders::LEFT
            })
            .border_style(st.border);
        let r = b.inner(right);
        f.render_widget(b, right);
        f.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), r);
    }
}
