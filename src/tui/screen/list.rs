//! The exchange list: rows (quick summaries, then analysed ones), the `f` filter, selecting a
//! row (which starts its analysis), drawing.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::widgets::block;
use crate::tui::analysis::Summary;
use crate::tui::doc;
use crate::tui::message::Effect;
use crate::tui::state::{Focus, SessionView, State, rebuild_all};
use crate::tui::theme::Theme;

pub(crate) fn status_style(state: &State, status: Option<u16>) -> Style {
    match status {
        Some(s) if s < 400 => state.theme.styles.status_ok,
        _ => state.theme.styles.status_error,
    }
}

pub(crate) fn draw_list(state: &State, f: &mut Frame, area: Rect) {
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

pub(crate) fn trunc(s: &str, w: usize) -> String {
    if s.chars().count() <= w {
        s.to_owned()
    } else {
        let mut t: String = s.chars().take(w.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

/// Stores a row's summary, keeping the counts; an analysed summary is not replaced by a quick
/// one that arrives later.
pub(crate) fn put_summary(s: &mut SessionView, row: usize, sum: Summary) {
    let Some(slot) = s.summaries.get_mut(row) else {
        return;
    };
    match slot {
        Some(old) if old.analyzed && !sum.analyzed => return,
        Some(old) => s.analyzed -= usize::from(old.analyzed),
        None => s.summarized += 1,
    }
    s.analyzed += usize::from(sum.analyzed);
    *slot = Some(sum);
}

pub(crate) fn select_row(
    s: &mut SessionView,
    epoch: u64,
    _lh: usize,
    theme: &Theme,
    _ph: usize,
) -> Vec<Effect> {
    let Some(&row) = s.visible.get(s.list.cursor) else {
        s.analysis = None;
        s.docs = Default::default();
        return Vec::new();
    };
    let mut fx = Vec::new();
    // Make sure the rows on screen are summarized.
    let lo = s.list.offset;
    let hi = (lo + _lh + 1).min(s.visible.len());
    let missing: Vec<usize> = s.visible[lo..hi]
        .iter()
        .copied()
        .filter(|&r| s.summaries[r].is_none())
        .collect();
    if let (Some(&a), Some(&b)) = (missing.iter().min(), missing.iter().max()) {
        fx.push(Effect::Summarize {
            epoch,
            rows: a..b + 1,
        });
    }
    if let Some(a) = s.cache.get(&row).cloned() {
        let same = s.analysis.as_ref().is_some_and(|x| x.row == row);
        s.analysis = Some(a);
        s.analyzing = None;
        if !same {
            s.panes = Default::default();
            s.step = 0;
            s.side_scroll = 0;
            s.modes.collapsed.clear();
            s.diff = None;
            rebuild_all(s, theme);
        }
        return fx;
    }
    if s.analyzing != Some(row) {
        s.analyzing = Some(row);
        fx.push(Effect::Analyze { epoch, row });
    }
    fx
}

/// Text of a list row, for search.
pub fn row_text(s: &Summary) -> String {
    format!(
        "{} {} {} {} {}",
        s.method,
        s.path,
        s.model.as_deref().unwrap_or(""),
        s.status.map(|x| x.to_string()).unwrap_or_default(),
        s.rules.iter().map(|r| r.id()).collect::<Vec<_>>().join(" ")
    )
}

/// A parsed `f` filter: space-separated terms, each `path:`, `model:`, `rule:`, `status:` or a
/// bare word (matches path or model). All terms must match; case-insensitive substring, except
/// `status:` which matches a prefix of the code (`status:5` = 5xx) and `rule:` which matches a
/// prefix of a rule id (`rule:schema` = every schema.* rule).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter {
    pub terms: Vec<(String, String)>,
}

impl Filter {
    pub fn parse(s: &str) -> Filter {
        Filter {
            terms: s
                .split_whitespace()
                .map(|t| match t.split_once(':') {
                    Some((k, v)) if ["path", "model", "rule", "status"].contains(&k) => {
                        (k.to_owned(), v.to_lowercase())
                    }
                    _ => (String::new(), t.to_lowercase()),
                })
                .collect(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    pub fn matches(&self, s: &Summary) -> bool {
        let model = s.model.as_deref().unwrap_or("").to_lowercase();
        let path = s.path.to_lowercase();
        self.terms.iter().all(|(k, v)| match k.as_str() {
            "path" => path.contains(v),
            "model" => model.contains(v),
            "status" => s
                .status
                .map(|x| x.to_string())
                .unwrap_or_else(|| "none".into())
                .starts_with(v.as_str()),
            "rule" => s.rules.iter().any(|r| r.id().starts_with(v.as_str())),
            _ => path.contains(v) || model.contains(v),
        })
    }
}
