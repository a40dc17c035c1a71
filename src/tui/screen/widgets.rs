//! Drawing pieces the areas share: the bordered block, a scrolled document with search
//! highlights.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};

use crate::tui::doc::Doc;
use crate::tui::state::State;

pub(crate) fn block<'a>(title: &'a str, focused: bool, state: &State) -> Block<'a> {
    let st = &state.theme.styles;
    Block::default()
        .borders(Borders::ALL)
        .border_style(if focused {
            st.border_focused
        } else {
            st.border
        })
        .title(Span::styled(
            format!(" {title} "),
            if focused { st.title } else { st.muted },
        ))
}

pub(crate) fn draw_doc(
    state: &State,
    f: &mut Frame,
    area: Rect,
    d: &Doc,
    sc: crate::tui::state::Scroll,
    focused: bool,
    search: Option<&str>,
) {
    let st = &state.theme.styles;
    if area.height == 0 {
        return;
    }
    let h = area.height as usize;
    let offset = if sc.cursor >= sc.offset + h {
        sc.cursor + 1 - h
    } else {
        sc.offset.min(sc.cursor)
    };
    let mut lines = Vec::with_capacity(h);
    for (i, l) in d.lines.iter().enumerate().skip(offset).take(h) {
        let mut l = match search {
            Some(q) if !q.is_empty() => highlight_matches(l, q, st.search_match),
            _ => l.clone(),
        };
        if i == sc.cursor && d.items.get(i).is_some_and(Option::is_some) {
            l = l.style(if focused {
                st.selected_unfocused
            } else {
                Style::default()
            });
        }
        lines.push(l);
    }
    let p = Paragraph::new(lines);
    let wrap = state.session.as_ref().is_some_and(|s| s.wrap);
    f.render_widget(
        if wrap {
            p.wrap(Wrap { trim: false })
        } else {
            p
        },
        area,
    );
}

/// Splits spans so that case-insensitive occurrences of `q` get `style` patched on.
pub(crate) fn highlight_matches(line: &Line<'static>, q: &str, style: Style) -> Line<'static> {
    let ql = q.to_lowercase();
    let mut out = Vec::new();
    for sp in &line.spans {
        let text = sp.content.as_ref();
        let lower = text.to_lowercase();
        if lower.len() != text.len() || !lower.contains(&ql) {
            out.push(sp.clone());
            continue;
        }
        let mut pos = 0;
        while let Some(p) = lower[pos..].find(&ql) {
            let s = pos + p;
            if s > pos {
                out.push(Span::styled(text[pos..s].to_owned(), sp.style));
            }
            out.push(Span::styled(
                text[s..s + ql.len()].to_owned(),
                sp.style.patch(style),
            ));
            pos = s + ql.len();
        }
        if pos < text.len() {
            out.push(Span::styled(text[pos..].to_owned(), sp.style));
        }
    }
    Line::from(out).style(line.style)
}
