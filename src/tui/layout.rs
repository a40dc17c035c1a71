//! Screen geometry: where the header, list, tabs, pane, footer and help go for a terminal size
//! and a state's shape. Shared by drawing ([`super::draw`]) and the state's scrolling and
//! mouse hit-testing ([`super::state`]); depends on neither, so they do not depend on each
//! other.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};

use super::keymap::{Ctx, Keymap};
use super::theme::Theme;

/// Pane titles in tab order (number keys 1–6).
pub const PANES: [&str; 6] = [
    "Tools", "Schema", "Template", "Stream", "Replay", "Findings",
];

/// How much of the screen the exchange list takes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ListLayout {
    /// The rows it needs (header, rows, borders), at most two fifths of the screen.
    #[default]
    Fit,
    /// Two fifths of the screen, however few rows.
    Fixed,
}

/// What of the state the geometry depends on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Shape {
    /// `Some(visible rows)` when a session is shown, `None` for the browser.
    pub session_rows: Option<usize>,
    pub layout: ListLayout,
}

/// Screen areas for the current state (shared by drawing and mouse hit-testing).
#[derive(Debug, Clone, Copy, Default)]
pub struct Areas {
    pub header: Rect,
    /// Exchanges list (or browser), with border.
    pub list: Rect,
    pub tabs: Rect,
    /// Detail pane, with border.
    pub pane: Rect,
    pub footer: Rect,
}

/// Computes the layout of a screen of `area` for a state of `shape`.
pub fn areas(area: Rect, shape: Shape) -> Areas {
    let [header, body, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(0),
        Constraint::Length(1),
    ])
    .areas(area);
    let Some(rows) = shape.session_rows else {
        return Areas {
            header,
            list: body,
            tabs: Rect::default(),
            pane: Rect::default(),
            footer,
        };
    };
    // The list takes the rows it needs (borders, header, rows), at most two fifths of the
    // screen; `-` fixes it at two fifths (mitmproxy's layout switch).
    let most = (body.height * 2 / 5).max(5);
    let list_h = match shape.layout {
        ListLayout::Fit => u16::try_from(rows)
            .unwrap_or(u16::MAX)
            .saturating_add(3)
            .clamp(4, most),
        ListLayout::Fixed => most,
    }
    .min(body.height);
    let [list, tabs, pane] = Layout::vertical([
        Constraint::Length(list_h),
        Constraint::Length(1),
        Constraint::Min(0),
    ])
    .areas(body);
    Areas {
        header,
        list,
        tabs,
        pane,
        footer,
    }
}

/// Column ranges `[start, end)` of the pane tabs, relative to the tabs row.
pub fn tab_ranges() -> Vec<(u16, u16)> {
    let mut x = 1u16;
    PANES
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let w = format!(" {} {} ", i + 1, p).chars().count() as u16;
            let r = (x, x + w);
            x += w + 1;
            r
        })
        .collect()
}

/// Help text lines, grouped by context, from the keymap.
pub fn help_lines(keymap: &Keymap, theme: &Theme) -> Vec<Line<'static>> {
    let st = &theme.styles;
    let groups: [(&str, Ctx); 12] = [
        ("Everywhere", Ctx::Global),
        ("Session browser", Ctx::Browser),
        ("Exchanges list", Ctx::List),
        ("Any pane", Ctx::Detail),
        ("Tools", Ctx::Tools),
        ("Template", Ctx::Template),
        ("Stream", Ctx::Stream),
        ("Replay", Ctx::Replay),
        ("Findings", Ctx::Findings),
        ("Diff view (d in Template)", Ctx::Diff),
        ("Loop view (L)", Ctx::Loop),
        ("What-if view (x in Findings)", Ctx::WhatIf),
    ];
    let mut lines = Vec::new();
    for (name, ctx) in groups {
        let bs: Vec<_> = keymap
            .bindings
            .iter()
            .filter(|b| b.contexts.contains(&ctx))
            .collect();
        if bs.is_empty() {
            continue;
        }
        lines.push(Line::from(Span::styled(name.to_owned(), st.header)));
        for b in bs {
            let keys = b
                .keys
                .iter()
                .map(|k| k.display())
                .collect::<Vec<_>>()
                .join(", ");
            lines.push(Line::from(vec![
                Span::styled(format!("  {keys:<16}"), st.key),
                Span::styled(b.help.to_owned(), st.base),
            ]));
        }
    }
    lines.push(Line::default());
    lines.push(Line::from(Span::styled(
        "Mouse: click tabs, rows and panes; the wheel scrolls.",
        st.muted,
    )));
    lines.push(Line::from(Span::styled(
        "Keys can be remapped in keymap.toml (docs/tui.md).",
        st.muted,
    )));
    lines
}

/// The help overlay's rectangle in a screen of `area`.
pub fn help_rect(area: Rect) -> Rect {
    let w = area.width.saturating_sub(8).min(76);
    let h = area.height.saturating_sub(4);
    Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + 2,
        width: w,
        height: h,
    }
}

/// Lines of help visible at once in a terminal of `area`.
pub fn help_height(area: Rect) -> usize {
    help_rect(area).height.saturating_sub(2) as usize
}
