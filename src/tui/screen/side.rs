//! The Replay pane's right half, scrollable (`J`/`K`): the server stream at the replayed point
//! ([`super::replay`]) or the engines view ([`super::engines`]). Needs no [`crate::tui::State`].

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph, Wrap};

/// The Replay pane's right half: `title` over `lines`, wrapped and scrolled by `scroll` lines
/// (`J`/`K`), the title saying so when they do not fit ([`side_title`]).
pub(crate) fn draw_side(
    f: &mut Frame,
    area: Rect,
    title: &str,
    lines: &[Line<'static>],
    scroll: usize,
    st: &crate::tui::theme::Styles,
) {
    let b = Block::default().title(side_title(title, scroll, lines, area, st));
    let inner = b.inner(area);
    f.render_widget(b, area);
    f.render_widget(
        Paragraph::new(lines.to_vec())
            .wrap(Wrap { trim: false })
            .scroll((scroll.min(u16::MAX as usize) as u16, 0)),
        inner,
    );
}

/// The Replay pane's right-half title: `title`, and when its `lines` do not fit in `area` (or
/// are scrolled), where it stands and the keys that scroll it (`J`/`K`).
pub(crate) fn side_title(
    title: &str,
    scroll: usize,
    lines: &[Line<'_>],
    area: Rect,
    st: &crate::tui::theme::Styles,
) -> Line<'static> {
    let width = area.width.max(1) as usize;
    // rows after wrapping (at least one per line; a word-wrapped line may take one more)
    let rows: usize = lines.iter().map(|l| l.width().div_ceil(width).max(1)).sum();
    let mut spans = vec![Span::styled(title.to_owned(), st.muted)];
    if scroll > 0 || rows > area.height.saturating_sub(1) as usize {
        spans.push(Span::styled(
            format!(" · line {}/{} · J/K scroll", scroll + 1, lines.len()),
            st.key_help,
        ));
    }
    Line::from(spans)
}
