//! The header line (session, engine, progress) and the footer (key hints from the keymap,
//! the prompt line, status messages).

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::tui::keymap::Ctx;
use crate::tui::state::{InputKind, Overlay, Screen, State};

pub(crate) fn draw_header(state: &State, f: &mut Frame, area: Rect) {
    let st = &state.theme.styles;
    let mut spans = vec![Span::styled(" toolscope ", st.title)];
    if let (Screen::Session, Some(s)) = (state.screen, &state.session) {
        spans.push(Span::styled(format!("{} ", s.source.name), st.base));
        let shown = if s.filter.is_empty() {
            format!("{} exchanges", s.source.len())
        } else {
            format!(
                "{}/{} exchanges  filter: {}",
                s.visible.len(),
                s.source.len(),
                s.filter
            )
        };
        spans.push(Span::styled(shown, st.muted));
        if let Some(e) = &s.source.header.engine {
            spans.push(Span::styled(
                format!("  {} {}", e.kind, e.version.as_deref().unwrap_or("")),
                st.muted,
            ));
        }
        if s.live {
            spans.push(Span::styled("  ● live", st.severity_error));
        }
        if s.summarized < s.source.len() {
            spans.push(Span::styled(
                format!("  reading {}/{}", s.summarized, s.source.len()),
                st.info,
            ));
        } else if s.analyzed < s.source.len() {
            spans.push(Span::styled(
                format!("  analysing {}/{}", s.analyzed, s.source.len()),
                st.info,
            ));
        }
    } else {
        spans.push(Span::styled("sessions", st.base));
    }
    if let Some(l) = &state.loading {
        let pct = (l.done * 100).checked_div(l.total).unwrap_or(0);
        spans.push(Span::styled(
            format!("  opening {} {pct}%", l.what),
            st.info,
        ));
    }
    f.render_widget(Paragraph::new(Line::from(spans)), area);
}

pub(crate) fn draw_footer(state: &State, f: &mut Frame, area: Rect) {
    let st = &state.theme.styles;
    if state.overlay == Overlay::ConfirmQuit {
        let line = Line::from(vec![
            Span::styled("quit toolscope? ", st.severity_warning),
            Span::styled("y", st.key),
            Span::styled("/", st.key_help),
            Span::styled("n", st.key),
            Span::styled("  (y or q quits, any other key stays)", st.key_help),
        ]);
        f.render_widget(Paragraph::new(line), area);
        return;
    }
    if let Overlay::Input { kind, text } = &state.overlay {
        let label = match kind {
            InputKind::Search => "/",
            InputKind::Filter => "filter (path: model: rule: status:) ",
        };
        let line = Line::from(vec![
            Span::styled(label, st.key),
            Span::styled(text.clone(), st.base),
            Span::styled("█", st.muted),
        ]);
        f.render_widget(Paragraph::new(line), area);
        return;
    }
    if let Some(msg) = &state.status {
        f.render_widget(Paragraph::new(Span::styled(msg.clone(), st.info)), area);
        return;
    }
    let spans = fit_hints(&footer_hints(state), area.width as usize, state);
    f.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// The footer's hints where the focus is, from the keymap: (key, what it does), in keymap
/// order (the focused pane's first), plus `1-6 panes` where number keys work.
pub fn footer_hints(state: &State) -> Vec<(String, String)> {
    let ctxs = state.contexts();
    let mut out: Vec<(String, String)> = state
        .keymap
        .active(&ctxs, true)
        .into_iter()
        .filter_map(|b| Some((b.keys.first()?.display(), b.help.to_owned())))
        .collect();
    if ctxs.iter().any(|c| matches!(c, Ctx::List | Ctx::Detail)) {
        out.push(("1-6".into(), "panes".into()));
    }
    out
}

/// Lays hints out in `width` columns: full texts when they fit; else the longest helps
/// shortened, one by one, to their words before a `(` or `:`; else hints dropped from the end,
/// keeping the help hint (`?`) after a `…`. Never wider than `width`.
pub(crate) fn fit_hints(
    hints: &[(String, String)],
    width: usize,
    state: &State,
) -> Vec<Span<'static>> {
    let st = &state.theme.styles;
    let short = |h: &str| -> String {
        let cut = h.find(['(', ':']).unwrap_or(h.len());
        h[..cut].trim_end().to_owned()
    };
    let w = |k: &str, h: &str| k.chars().count() + 1 + h.chars().count() + 2;
    let full: Vec<(String, String)> = hints.to_vec();
    let total = |v: &[(String, String)]| v.iter().map(|(k, h)| w(k, h)).sum::<usize>();
    let mut items = full.clone();
    // Shorten the longest hints first, one at a time, until the line fits.
    while total(&items) > width {
        let Some(i) = (0..items.len())
            .filter(|&i| short(&items[i].1) != items[i].1)
            .max_by_key(|&i| (items[i].1.chars().count(), usize::MAX - i))
        else {
            break;
        };
        items[i].1 = short(&items[i].1);
    }
    let mut elided = false;
    if total(&items) > width {
        let help_key = state
            .keymap
            .bindings
            .iter()
            .find(|b| b.action == crate::tui::keymap::Action::Help)
            .and_then(|b| b.keys.first())
            .map(|k| k.display());
        let help = items
            .iter()
            .position(|(k, _)| Some(k) == help_key.as_ref())
            .map(|i| items.remove(i));
        let reserve = help.as_ref().map_or(0, |(k, h)| w(k, h)) + 2;
        let mut kept = Vec::new();
        let mut used = 0;
        for it in items {
            let iw = w(&it.0, &it.1);
            if used + iw + reserve > width {
                break;
            }
            used += iw;
            kept.push(it);
        }
        elided = true;
        items = kept;
        items.extend(help);
    }
    let mut spans = Vec::new();
    let mut used = 0;
    for (i, (k, h)) in items.iter().enumerate() {
        if elided && i + 1 == items.len() && used + 2 <= width {
            spans.push(Span::styled("… ", st.key_help));
            used += 2;
        }
        let iw = w(k, h);
        if used + iw - 2 > width {
            break;
        }
        spans.push(Span::styled(k.clone(), st.key));
        spans.push(Span::styled(format!(" {h}  "), st.key_help));
        used += iw;
    }
    spans
}
