//! The session browser (`toolscope` over a folder): its entries and the background survey of
//! each file, drawing, and its keys.

use std::path::PathBuf;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};

use super::widgets::block;
use crate::tui::keymap::Action;
use crate::tui::message::Effect;
use crate::tui::state::{Scroll, State};

/// One file in the session browser.
#[derive(Debug, Clone, PartialEq)]
pub struct BrowserEntry {
    pub path: PathBuf,
    pub size: u64,
    /// Created time and engine from the header line, when readable.
    pub info: String,
    /// Exchange count, worst finding and label, once the background survey has read the file.
    pub survey: Option<Survey>,
}

/// What the browser shows of a session file after reading it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Survey {
    /// Exchanges in the file.
    pub exchanges: usize,
    /// The most severe finding (`None`: no finding, or not analysed).
    pub worst: Option<crate::finding::Rule>,
    /// Number of findings (warnings and errors included).
    pub findings: usize,
    /// The exchanges' labels (`probe`, `send`; the part before `:`), or the header's `source`.
    pub label: String,
    /// Why the file could not be surveyed, or why findings were not counted.
    pub note: Option<String>,
}

/// The session browser.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Browser {
    pub entries: Vec<BrowserEntry>,
    pub scroll: Scroll,
    /// The folder browsed (for the empty state), if any.
    pub dir: Option<PathBuf>,
}

pub(crate) fn fmt_size(n: u64) -> String {
    match n {
        n if n >= 1 << 30 => format!("{:.1} GB", n as f64 / (1u64 << 30) as f64),
        n if n >= 1 << 20 => format!("{:.1} MB", n as f64 / (1u64 << 20) as f64),
        n if n >= 1 << 10 => format!("{:.1} KB", n as f64 / 1024.0),
        n => format!("{n} B"),
    }
}

pub(crate) fn draw_browser(state: &State, f: &mut Frame, area: Rect) {
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
    let name_of = |e: &crate::tui::screen::browser::BrowserEntry| {
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

impl State {
    pub(crate) fn browser_action(&mut self, action: Action) -> Vec<Effect> {
        let Some(b) = &mut self.browser else {
            if action == Action::Back {
                self.confirm_quit();
            }
            return Vec::new();
        };
        let len = b.entries.len();
        let h = (self.size.1 as usize).saturating_sub(6);
        match action {
            Action::Back => self.confirm_quit(),
            Action::Up => b.scroll.move_by(-1, len, h),
            Action::Down => b.scroll.move_by(1, len, h),
            Action::PageUp => b.scroll.move_by(-(h as isize), len, h),
            Action::PageDown => b.scroll.move_by(h as isize, len, h),
            Action::Top => b.scroll.set(0, len, h),
            Action::Bottom => b.scroll.set(len.saturating_sub(1), len, h),
            Action::SearchNext | Action::SearchPrev => {
                self.search_step(action == Action::SearchNext)
            }
            Action::Select => {
                if let Some(e) = b.entries.get(b.scroll.cursor) {
                    let p = e.path.clone();
                    return self.open_session(p);
                }
            }
            _ => {}
        }
        Vec::new()
    }
}
