//! Drawing: pure functions of [`State`]. Nothing here changes state or does I/O.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};

use super::analysis::Chunking;
use super::doc::{self, Doc};
use super::keymap::Ctx;
use super::layout::PANES;
use super::state::{Focus, InputKind, Overlay, Screen, State};
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

fn draw_header(state: &State, f: &mut Frame, area: Rect) {
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

fn block<'a>(title: &'a str, focused: bool, state: &State) -> Block<'a> {
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

fn fmt_size(n: u64) -> String {
    match n {
        n if n >= 1 << 30 => format!("{:.1} GB", n as f64 / (1u64 << 30) as f64),
        n if n >= 1 << 20 => format!("{:.1} MB", n as f64 / (1u64 << 20) as f64),
        n if n >= 1 << 10 => format!("{:.1} KB", n as f64 / 1024.0),
        n => format!("{n} B"),
    }
}

fn draw_browser(state: &State, f: &mut Frame, area: Rect) {
    let st = &state.theme.styles;
    let b = block("Sessions", true, state);
    let inner = b.inner(area);
    f.render_widget(b, area);
    let Some(br) = &state.browser else {
        if state.loading.is_some() {
            f.render_widget(Paragraph::new(Span::styled("Opening…", st.muted)), inner);
        }
        return;
    };
    if br.entries.is_empty() {
        let dir = br
            .dir
            .as_ref()
            .map(|d| d.display().to_string())
            .unwrap_or_else(|| "./sessions".into());
        let text = vec![
            Line::from(Span::styled(
                format!("No sessions in {dir}/ yet."),
                st.title,
            )),
            Line::default(),
            Line::from("Record one by pointing your agent at the recording proxy:"),
            Line::from(Span::styled(
                format!(
                    "  toolscope proxy --upstream http://127.0.0.1:8080 --session {dir}/first.jsonl"
                ),
                st.accent,
            )),
            Line::from(
                "  then set the agent's base URL to the proxy's listen address (see --listen).",
            ),
            Line::default(),
            Line::from("Or record a single request:"),
            Line::from(Span::styled(
                format!(
                    "  toolscope send request.json --url http://127.0.0.1:8080  (writes into {dir}/)"
                ),
                st.accent,
            )),
            Line::default(),
            Line::from("Or open files directly:"),
            Line::from(Span::styled(
                "  toolscope open FILE.jsonl|FILE.har …",
                st.accent,
            )),
            Line::default(),
            Line::from(Span::styled("q quits", st.muted)),
        ];
        f.render_widget(Paragraph::new(text).wrap(Wrap { trim: false }), inner);
        return;
    }
    // The file column is as wide as the longest name shown (20..=48), so the engine and model
    // beside it stay readable at 80 columns.
    let name_of = |e: &super::state::BrowserEntry| {
        e.path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let nw = br
        .entries
        .iter()
        .map(|e| name_of(e).chars().count())
        .max()
        .unwrap_or(0)
        .clamp(20, 48);
    let mut lines = vec![Line::from(Span::styled(
        format!(
            "{:<nw$} {:>10} {:>5}  {:<26} {:<8} {}",
            "FILE", "SIZE", "EXCH", "WORST FINDING", "LABEL", "CREATED / ENGINE · MODEL"
        ),
        st.header,
    ))];
    let h = inner.height.saturating_sub(1) as usize;
    for (i, e) in br.entries.iter().enumerate().skip(br.scroll.offset).take(h) {
        let name = name_of(e);
        let style = if i == br.scroll.cursor {
            st.selected
        } else {
            st.base
        };
        let (count, worst, worst_style, label) = match &e.survey {
            None => ("…".to_owned(), "…".to_owned(), st.muted, String::new()),
            Some(sv) => {
                let worst = match (sv.worst, &sv.note) {
                    (Some(r), _) => format!("{r} ({})", sv.findings),
                    (None, Some(_)) => "?".to_owned(),
                    (None, None) => "none".to_owned(),
                };
                let ws = match sv.worst.map(|r| r.severity()) {
                    Some(crate::finding::Severity::Error) => st.severity_error,
                    Some(crate::finding::Severity::Warning) => st.severity_warning,
                    Some(crate::finding::Severity::Info) => st.severity_info,
                    None => st.status_ok,
                };
                (sv.exchanges.to_string(), worst, ws, sv.label.clone())
            }
        };
        let cut = |s: &str, n: usize| s.chars().take(n).collect::<String>();
        lines.push(Line::from(vec![
            Span::styled(
                format!("{:<nw$} {:>10} {:>5}  ", name, fmt_size(e.size), count),
                style,
            ),
            Span::styled(
                format!("{:<26} ", cut(&worst, 26)),
                if i == br.scroll.cursor {
                    style
                } else {
                    worst_style
                },
            ),
            Span::styled(format!("{:<8} {}", cut(&label, 8), e.info), style),
        ]));
    }
    f.render_widget(Paragraph::new(lines), inner);
}

fn status_style(state: &State, status: Option<u16>) -> Style {
    match status {
        Some(s) if s < 400 => state.theme.styles.status_ok,
        _ => state.theme.styles.status_error,
    }
}

fn draw_list(state: &State, f: &mut Frame, area: Rect) {
    let st = &state.theme.styles;
    let Some(s) = &state.session else { return };
    let focused = s.focus == Focus::List;
    let b = block("Exchanges", focused, state);
    let inner = b.inner(area);
    f.render_widget(b, area);
    let w = inner.width as usize;
    // Fixed columns: id 5, method 7, status 6, calls 6, findings 9, duration 10; path and model share the rest.
    let fixed = 5 + 7 + 6 + 6 + 9 + 10 + 6;
    let flex = w.saturating_sub(fixed);
    let path_w = (flex * 3 / 5).max(8);
    let model_w = flex.saturating_sub(path_w).max(6);
    let mut lines = vec![Line::from(Span::styled(
        format!(
            "{:>4} {:<7} {:<pw$} {:<mw$} {:>6} {:>6} {:>9} {:>10}",
            "#",
            "METHOD",
            "PATH",
            "MODEL",
            "STATUS",
            "CALLS",
            "FINDINGS",
            "DURATION",
            pw = path_w,
            mw = model_w
        ),
        st.header,
    ))];
    let h = inner.height.saturating_sub(1) as usize;
    if s.visible.is_empty() {
        let msg = if s.source.is_empty() {
            "No exchanges in this session."
        } else {
            "No exchange matches the filter (Esc clears it)."
        };
        lines.push(Line::from(Span::styled(msg, st.muted)));
    }
    let matches = s
        .search
        .as_ref()
        .filter(|_| focused)
        .map(|x| x.matches.as_slice())
        .unwrap_or(&[]);
    for (i, &row) in s.visible.iter().enumerate().skip(s.list.offset).take(h) {
        let selected = i == s.list.cursor;
        let line = match s.summaries.get(row).and_then(|x| x.as_ref()) {
            None => Line::from(Span::styled(
                format!(
                    "{:>4} …",
                    s.source.rows[row]
                        .id
                        .map(|x| x.to_string())
                        .unwrap_or_default()
                ),
                st.muted,
            )),
            Some(x) => {
                let dur = x
                    .duration_ms
                    .map(|d| {
                        if d >= 1000.0 {
                            format!("{:.2}s", d / 1000.0)
                        } else {
                            format!("{d:.0}ms")
                        }
                    })
                    .unwrap_or_else(|| "—".into());
                let status = x
                    .status
                    .map(|c| c.to_string())
                    .unwrap_or_else(|| "—".into());
                // llama-server reports its model as the GGUF path: the file name is the name.
                let model = x.model.as_deref().unwrap_or_default();
                // control characters shown visibly (text::visible_line), so the terminal drops
                // none of them and the columns keep their width
                let model = crate::text::visible_line(model.rsplit('/').next().unwrap_or(model))
                    .into_owned();
                let path = crate::text::visible_line(&match &x.label {
                    Some(l) => format!("{}  {l}", x.path),
                    None => x.path.clone(),
                })
                .into_owned();
                let nf = x.rules.len();
                let worst = doc::worst(&x.rules);
                let fstyle = match worst {
                    Some(crate::finding::Severity::Error) => st.severity_error,
                    Some(crate::finding::Severity::Warning) => st.severity_warning,
                    _ => st.muted,
                };
                let mark = if x.partial {
                    "!"
                } else if x.stream {
                    "~"
                } else {
                    " "
                };
                Line::from(vec![
                    Span::styled(format!("{:>4}{mark}", x.id), st.muted),
                    Span::styled(format!("{:<7} ", x.method), st.base),
                    Span::styled(
                        format!("{:<pw$} ", trunc(&path, path_w), pw = path_w),
                        st.base,
                    ),
                    Span::styled(
                        format!("{:<mw$} ", trunc(&model, model_w), mw = model_w),
                        st.muted,
                    ),
                    Span::styled(format!("{status:>6} "), status_style(state, x.status)),
                    Span::styled(
                        if x.analyzed {
                            format!("{:>6} ", x.tool_calls)
                        } else {
                            format!("{:>6} ", "…")
                        },
                        st.base,
                    ),
                    Span::styled(
                        format!(
                            "{:>9} ",
                            if !x.analyzed {
                                "…".to_owned()
                            } else if nf == 0 {
                                "·".to_owned()
                            } else {
                                nf.to_string()
                            }
                        ),
                        fstyle,
                    ),
                    Span::styled(format!("{dur:>10}"), st.muted),
                ])
            }
        };
        let line = if selected {
            line.style(if focused {
                st.selected
            } else {
                st.selected_unfocused
            })
        } else if matches.contains(&i) {
            line.style(st.search_match)
        } else {
            line
        };
        lines.push(line);
    }
    f.render_widget(Paragraph::new(lines), inner);
}

fn trunc(s: &str, w: usize) -> String {
    if s.chars().count() <= w {
        s.to_owned()
    } else {
        let mut t: String = s.chars().take(w.saturating_sub(1)).collect();
        t.push('…');
        t
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
        let [left, right] = if s.stream_zoom {
            [Rect::default(), inner]
        } else {
            Layout::horizontal([Constraint::Percentage(62), Constraint::Percentage(38)])
                .areas(inner)
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
            lines.extend(super::highlight::json_lines(
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

fn draw_doc(
    state: &State,
    f: &mut Frame,
    area: Rect,
    d: &Doc,
    sc: super::state::Scroll,
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
fn highlight_matches(line: &Line<'static>, q: &str, style: Style) -> Line<'static> {
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

/// A chunking's name in the Replay pane's selector (the title says it in full).
fn short_label(c: Chunking) -> &'static str {
    match c {
        Chunking::Recorded => "recorded",
        Chunking::PerPiece => "pieces",
        Chunking::PerChar => "chars",
        Chunking::Every2 => "×2",
        Chunking::Every8 => "×8",
        Chunking::Whole => "whole",
    }
}

fn draw_replay(state: &State, f: &mut Frame, area: Rect, a: &super::analysis::ExchangeAnalysis) {
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
        super::engines::draw(&s.replay_engines, f, right, a, &state.theme, s.side_scroll);
        return;
    }
    draw_side(
        f,
        right,
        " server stream at the same point",
        &s.server_doc.lines,
        s.side_scroll,
        st,
    );
}

/// The Replay pane's right half: `title` over `lines`, wrapped and scrolled by `scroll` lines
/// (`J`/`K`), the title saying so when they do not fit ([`side_title`]).
pub(super) fn draw_side(
    f: &mut Frame,
    area: Rect,
    title: &str,
    lines: &[Line<'static>],
    scroll: usize,
    st: &super::theme::Styles,
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
fn side_title(
    title: &str,
    scroll: usize,
    lines: &[Line<'_>],
    area: Rect,
    st: &super::theme::Styles,
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

fn draw_footer(state: &State, f: &mut Frame, area: Rect) {
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
fn fit_hints(hints: &[(String, String)], width: usize, state: &State) -> Vec<Span<'static>> {
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
            .find(|b| b.action == super::keymap::Action::Help)
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

/// Help text lines, grouped by context, from the keymap ([`super::layout::help_lines`]).
pub fn help_lines(state: &State) -> Vec<Line<'static>> {
    super::layout::help_lines(&state.keymap, &state.theme)
}

/// The largest help scroll offset at the state's terminal size (the last line at the bottom).
pub fn help_max_offset(state: &State) -> usize {
    state.help_max_offset()
}

fn draw_help(state: &State, f: &mut Frame, area: Rect, off: usize) {
    let r = super::layout::help_rect(area);
    f.render_widget(Clear, r);
    let b = block("Help — keys (? q Esc close; j/k g/G scroll)", true, state)
        .style(state.theme.styles.base);
    let inner = b.inner(r);
    f.render_widget(b, r);
    let lines = help_lines(state);
    let off = off.min(lines.len().saturating_sub(inner.height as usize));
    f.render_widget(Paragraph::new(lines).scroll((off as u16, 0)), inner);
}

/// The side-by-side diff view: the local render left, the server's right, one row per
/// [`crate::diff::Row`] (line numbers, a gutter mark, changed tokens in the diff styles).
fn draw_diff(
    state: &State,
    f: &mut Frame,
    area: Rect,
    a: &super::analysis::ExchangeAnalysis,
    rows: &[crate::diff::Row],
    d: super::state::DiffView,
) {
    use crate::diff::RowKind;
    let st = &state.theme.styles;
    let [head, body] = Layout::vertical([Constraint::Length(1), Constraint::Min(0)]).areas(area);
    let starts = super::state::change_starts(rows);
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
