//! Drawing the whole screen: a pure function of [`State`] composed from the areas in
//! [`super::screen`]. Nothing here changes state or does I/O.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph};

use super::layout::PANES;
use super::screen::browser::draw_browser;
use super::screen::help::draw_help;
use super::screen::list::draw_list;
use super::screen::replay::draw_replay;
use super::screen::status::{draw_footer, draw_header};
use super::screen::stream;
use super::screen::template::draw_diff;
use super::screen::widgets::{block, draw_doc};
use super::state::{Focus, Overlay, Screen, State};
use crate::finding::Pane;

pub use super::layout::{Areas, help_height, tab_ranges};

/// Screen areas for the current state (shared by drawing and mouse hit-testing):
/// [`super::layout::areas`] of the state's [`State::shape`].
pub fn areas(area: Rect, state: &State) -> Areas {
    super::layout::areas(area, state.shape())
}

/// Draws the whole screen.
pub fn draw(state: &State, f: &mut Frame) {
    let st = &state.theme.styles;
    let area = f.area();
    f.render_widget(Block::default().style(st.base), area);
    let a = areas(area, state);
    draw_header(state, f, a.header);
    match (state.screen, &state.session) {
        (Screen::Session, Some(s)) if s.whatif.is_some() => {
            if let Some(v) = &s.whatif {
                super::screen::whatif::draw(state, f, a.list.union(a.pane), v);
            }
        }
        (Screen::Session, Some(s)) if s.loop_view.is_some() => {
            if let Some(v) = &s.loop_view {
                super::screen::loop_view::draw(state, f, a.list.union(a.pane), v);
            }
        }
        (Screen::Session, Some(_)) => {
            draw_list(state, f, a.list);
            draw_tabs(state, f, a.tabs);
            draw_pane(state, f, a.pane);
        }
        _ => draw_browser(state, f, a.list),
    }
    draw_footer(state, f, a.footer);
    if let Overlay::Help(off) = state.overlay {
        draw_help(state, f, area, off);
    }
}

fn draw_tabs(state: &State, f: &mut Frame, area: Rect) {
    let st = &state.theme.styles;
    let Some(s) = &state.session else { return };
    let counts = [
        s.analysis.as_ref().map(|a| a.tools.len()),
        s.analysis.as_ref().map(|a| a.schema.len()),
        None,
        s.analysis.as_ref().map(|a| a.events.len()),
        None,
        Some(state.findings().len()),
    ];
    let mut spans = vec![Span::raw(" ")];
    for (i, p) in PANES.iter().enumerate() {
        let style = if i == s.pane.index() {
            st.tab_active
        } else {
            st.tab
        };
        spans.push(Span::styled(format!(" {} {} ", i + 1, p), style));
        spans.push(Span::styled("│", st.border));
    }
    let _ = counts;
    if s.analyzing.is_some() {
        spans.push(Span::styled("  analysing…", st.info));
    }
    f.render_widget(Paragraph::new(Line::from(spans)), area);
}

fn draw_pane(state: &State, f: &mut Frame, area: Rect) {
    let st = &state.theme.styles;
    let Some(s) = &state.session else { return };
    let focused = s.focus == Focus::Detail;
    let title = match (s.pane, s.analysis.as_ref()) {
        (_, None) => PANES[s.pane.index()].to_owned(),
        (Pane::Tools, Some(a)) => format!("Tools · {}", a.tools.len()),
        (Pane::Schema, Some(a)) => format!("Schema · {} parameters", a.schema.len()),
        (Pane::Template, Some(_)) if s.diff.is_some() => {
            "Template · diff: local ⟷ server".to_owned()
        }
        (Pane::Template, Some(_)) => format!(
            "Template · {}",
            if s.modes.local { "local" } else { "server" }
        ),
        (Pane::Stream, Some(a)) => format!("Stream · {} events", a.events.len()),
        (Pane::Replay, Some(a)) => {
            let n = a.replay.len(s.chunking);
            format!(
                "Replay · {} · step {}/{n}",
                s.chunking.label(),
                if n == 0 { 0 } else { s.step + 1 }
            )
        }
        (_, Some(_)) => format!("Findings · {}", state.findings().len()),
    };
    let b = block(&title, focused, state);
    let inner = b.inner(area);
    f.render_widget(b, area);
    let Some(a) = &s.analysis else {
        let msg = if s.visible.is_empty() {
            "Nothing selected."
        } else {
            "Analysing the exchange…"
        };
        f.render_widget(Paragraph::new(Span::styled(msg, st.muted)), inner);
        return;
    };
    if s.pane == Pane::Replay {
        draw_replay(state, f, inner, a);
        return;
    }
    if let (Pane::Template, Some(d), Some(rows)) = (s.pane, s.diff, a.template.diff.as_deref()) {
        draw_diff(state, f, inner, a, rows, d);
        return;
    }
    let search = s
        .search
        .as_ref()
        .filter(|_| focused)
        .map(|x| x.query.as_str());
    if s.pane == Pane::Stream && !a.events.is_empty() {
        stream::draw(state, f, inner, a, focused, search);
        return;
    }
    draw_doc(
        state,
        f,
        inner,
        &s.docs[s.pane.index()],
        s.panes[s.pane.index()],
        focused,
        search,
    );
}
