//! The Replay pane's right half, scrollable (`J`/`K`): the server stream at the replayed point
//! ([`super::replay`]) or the engines view ([`super::engines`]). Needs no [`crate::tui::State`].

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph, Wrap};

/// The Replay pane's right half: `title` over `lines`, wrapped and scrolled by `scroll` rows
/// (`J`/`K`; rows after wrapping, as the paragraph scrolls), the title saying so when they do
/// not fit ([`side_title`]). Returns the largest useful scroll: the wrapped rows that do not
/// fit below the title (0 when all fit); `scroll` is drawn at most that far.
pub(crate) fn draw_side(
    f: &mut Frame,
    area: Rect,
    title: &str,
    lines: &[Line<'static>],
    scroll: usize,
    st: &crate::tui::theme::Styles,
) -> usize {
    let para = Paragraph::new(lines.to_vec()).wrap(Wrap { trim: false });
    let inner = Block::default().title("").inner(area);
    let rows = para.line_count(inner.width.max(1));
    let max = rows.saturating_sub(inner.height as usize);
    let scroll = scroll.min(max);
    let b = Block::default().title(side_title(title, scroll, rows, inner.height as usize, st));
    f.render_widget(b, area);
    f.render_widget(
        para.scroll((scroll.min(u16::MAX as usize) as u16, 0)),
        inner,
    );
    max
}

/// The Replay pane's right-half title: `title`, and when its `rows` (after wrapping) do not
/// fit in `height` (or are scrolled), the first row shown of how many and the keys that
/// scroll it (`J`/`K`).
pub(crate) fn side_title(
    title: &str,
    scroll: usize,
    rows: usize,
    height: usize,
    st: &crate::tui::theme::Styles,
) -> Line<'static> {
    let mut spans = vec![Span::styled(title.to_owned(), st.muted)];
    if scroll > 0 || rows > height {
        spans.push(Span::styled(
            format!(" · line {}/{} · J/K scroll", scroll + 1, rows),
            st.key_help,
        ));
    }
    Line::from(spans)
}
