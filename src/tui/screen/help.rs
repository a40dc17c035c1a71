//! The `?` help overlay, generated from the keymap.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Clear, Paragraph};

use super::widgets::block;
use crate::tui::state::State;

/// Help text lines, grouped by context, from the keymap ([`crate::tui::layout::help_lines`]).
pub fn help_lines(state: &State) -> Vec<Line<'static>> {
    crate::tui::layout::help_lines(&state.keymap, &state.theme)
}

/// The largest help scroll offset at the state's terminal size (the last line at the bottom).
pub fn help_max_offset(state: &State) -> usize {
    state.help_max_offset()
}

pub(crate) fn draw_help(state: &State, f: &mut Frame, area: Rect, off: usize) {
    let r = crate::tui::layout::help_rect(area);
    f.render_widget(Clear, r);
    let b = block("Help — keys (? q Esc close; j/k g/G scroll)", true, state)
        .style(state.theme.styles.base);
    let inner = b.inner(r);
    f.render_widget(b, r);
    let lines = help_lines(state);
    let off = off.min(lines.len().saturating_sub(inner.height as usize));
    f.render_widget(Paragraph::new(lines).scroll((off as u16, 0)), inner);
}
