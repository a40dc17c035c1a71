//! Pane documents: each detail pane (but Replay's step view) is a list of styled lines built
//! from the analysis view-model when it arrives or a pane mode changes. Scrolling, search, copy
//! and evidence jumps work on these uniformly.

use ratatui::style::Style;
use ratatui::text::{Line, Span};

use crate::finding::{Finding, Severity};

use super::analysis::{Chunking, ExchangeAnalysis};
use super::highlight;
use super::theme::Theme;

/// Where a line shows a piece of evidence (Findings' Enter jumps to it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Anchor {
    Tool(String),
    /// JSON Pointer (tool parameters or request body).
    Pointer(String),
    Event(usize),
    /// Byte offset in the rendered prompt.
    Offset(usize),
    Token(usize),
}

/// A pane's content.
#[derive(Debug, Clone, Default)]
pub struct Doc {
    pub lines: Vec<Line<'static>>,
    /// Per line: the item it belongs to (tool, event, finding, schema row), if any.
    pub items: Vec<Option<usize>>,
    pub anchors: Vec<(Anchor, usize)>,
    /// Copyable text per item.
    pub copy: Vec<String>,
}

impl Doc {
    fn push(&mut self, line: Line<'static>, item: Option<usize>) {
        self.lines.push(line);
        self.items.push(item);
    }

    fn text(&mut self, s: impl Into<String>, style: Style, item: Option<usize>) {
        self.push(Line::from(Span::styled(s.into(), style)), item);
    }

    /// Plain text of line `i` (for search).
    pub fn plain(&self, i: usize) -> String {
        self.lines
            .get(i)
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .unwrap_or_default()
    }

    /// First line of `item`.
    pub fn line_of_item(&self, item: usize) -> Option<usize> {
        self.items.iter().position(|x| *x == Some(item))
    }

    /// Line of an anchor: exact match, else the longest pointer prefix.
    pub fn line_of(&self, anchor: &Anchor) -> Option<usize> {
        if let Some((_, l)) = self.anchors.iter().find(|(a, _)| a == anchor) {
            return Some(*l);
        }
        match anchor {
            Anchor::Pointer(p) => self
                .anchors
                .iter()
                .filter_map(|(a, l)| match a {
                    Anchor::Pointer(q) if p.ends_with(q.as_str()) || p.starts_with(q.as_str()) => {
                        Some((q.len(), *l))
                    }
                    _ => None,
                })
                .max()
                .map(|(_, l)| l),
            Anchor::Offset(o) => self
                .anchors
                .iter()
                .filter_map(|(a, l)| matches!(a, Anchor::Offset(x) if x <= o).then_some(*l))
                .max(),
            _ => None,
        }
    }
}

/// Pane-local display modes that docs depend on.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Modes {
    /// Collapsed tool indices.
    pub collapsed: std::collections::BTreeSet<usize>,
    /// Template: show token pieces instead of prompt text.
    pub tokens: bool,
    /// Template: show the local render instead of the server's.
    pub local: bool,
}

/// Tools pane: one header per tool (▾/▸), its JSON highlighted beneath unless collapsed.
pub fn tools(a: &ExchangeAnalysis, modes: &Modes, theme: &Theme) -> Doc {
    let st = &theme.styles;
    let mut d = Doc::default();
    if a.tools.is_empty() {
        d.text("This request sends no tools.", st.muted, None);
        return d;
    }
    if let Some(tc) = a.request.as_ref().and_then(|r| r.get("tool_choice")) {
        d.text(format!("tool_choice: {tc}"), st.info, None);
    }
    for (i, t) in a.tools.iter().enumerate() {
        d.copy.push(t.json.clone());
        let open = !modes.collapsed.contains(&i);
        d.anchors
            .push((Anchor::Tool(t.name.clone()), d.lines.len()));
        d.anchors
            .push((Anchor::Pointer(t.pointer.clone()), d.lines.len()));
        d.push(
            Line::from(vec![
                Span::styled(if open { "▾ " } else { "▸ " }, st.accent),
                Span::styled(t.name.clone(), st.title),
                Span::styled(
                    format!("  ({} params)  {}", t.params, t.description),
                    st.muted,
                ),
            ]),
            Some(i),
        );
        if let Some(why) = &t.dropped {
            d.push(
                Line::from(vec![
                    Span::raw("  "),
                    Span::styled(format!("DROPPED: {why}"), st.severity_warning),
                ]),
                Some(i),
            );
        }
        if open {
            // Anchor parameter lines by key for evidence jumps.
            for line in highlight::json_lines(&t.json, theme.syntect.as_deref(), st.base) {
                let plain: String = line.spans.iter().map(|s| s.content.as_ref()).collect();
                let trimmed = plain.trim_start();
                if let Some(rest) = trimmed.strip_prefix('"')
                    && let Some(end) = rest.find("\":")
                {
                    let key = &rest[..end];
                    d.anchors
                        .push((Anchor::Pointer(format!("/properties/{key}")), d.lines.len()));
                }
                let mut spans = vec![Span::raw("  ")];
                spans.extend(line.spans);
                d.push(Line::from(spans), Some(i));
            }
        }
    }
    d
}

/// Schema pane: per parameter, the original fragment, the flattened one, and what was lost.
pub fn schema(a: &ExchangeAnalysis, theme: &Theme) -> Doc {
    let st = &theme.styles;
    let mut d = Doc::default();
    if a.schema.is_empty() {
        d.text("No tool parameters to flatten.", st.muted, None);
        return d;
    }
    let flattened = a.schema.iter().any(|r| r.flattened.is_some());
    if !flattened {
        d.text(
            "Flattening changes none of these parameters: the template gets them as given.",
            st.muted,
            None,
        );
    }
    let mut tool = "";
    for (i, r) in a.schema.iter().enumerate() {
        if r.tool != tool {
            tool = &r.tool;
            d.anchors
                .push((Anchor::Tool(tool.to_owned()), d.lines.len()));
            d.text(tool.to_owned(), st.title, None);
        }
        d.copy.push(r.original.clone());
        d.anchors
            .push((Anchor::Pointer(r.pointer.clone()), d.lines.len()));
        let mark = if r.lost_in_prompt {
            Span::styled("✗ ", st.severity_error)
        } else if r.change.is_some() {
            Span::styled("~ ", st.severity_warning)
        } else {
            Span::raw("  ")
        };
        d.push(
            Line::from(vec![mark, Span::styled(r.pointer.clone(), st.header)]),
            Some(i),
        );
        d.push(
            Line::from(vec![
                Span::styled("    original   ", st.muted),
                Span::styled(r.original.clone(), st.base),
            ]),
            Some(i),
        );
        if let Some(f) = &r.flattened {
            d.push(
                Line::from(vec![
                    Span::styled("    flattened  ", st.muted),
                    Span::styled(f.clone(), st.diff_added),
                ]),
                Some(i),
            );
        }
        if let Some(c) = &r.change {
            d.push(
                Line::from(vec![
                    Span::styled("    change     ", st.muted),
                    Span::styled(c.clone(), st.severity_warning),
                ]),
                Some(i),
            );
        }
        if r.lost_in_prompt {
            d.push(
                Line::from(Span::styled(
                    "    never reached the prompt",
                    st.severity_error,
                )),
                Some(i),
            );
        }
    }
    d
}

/// Template pane: the rendered prompt with special tokens highlighted and pseudo-special
/// markers flagged, or the token pieces; server or local render.
pub fn template(a: &ExchangeAnalysis, modes: &Modes, theme: &Theme) -> Doc {
    let st = &theme.styles;
    let t = &a.template;
    let mut d = Doc::default();
    let (prompt, origin) = shown_render(t, modes);
    template_header(&mut d, t, modes, origin, theme);
    // The token list is the server's only; the comparison is about prompt text.
    if !modes.tokens || modes.local {
        d.push(Line::from(template_compare(t, modes, theme)), None);
    }
    if !t.pseudo_specials.is_empty() {
        d.push(
            Line::from(vec![
                Span::styled(
                    "pseudo-special (split into ordinary pieces): ",
                    st.severity_warning,
                ),
                Span::styled(t.pseudo_specials.join(" "), st.pseudo_special),
            ]),
            None,
        );
    }
    if modes.tokens && !modes.local {
        template_tokens(&mut d, t, theme);
        return d;
    }
    let Some(prompt) = prompt else { return d };
    d.copy.push(prompt.clone());
    let mut markers: Vec<(&str, Style)> = t
        .specials
        .iter()
        .map(|s| (s.as_str(), st.special_token))
        .collect();
    markers.extend(
        t.pseudo_specials
            .iter()
            .map(|s| (s.as_str(), st.pseudo_special)),
    );
    let Some(rows) = &t.diff else {
        let mut off = 0;
        for line in prompt.split('\n') {
            d.anchors.push((Anchor::Offset(off), d.lines.len()));
            let mut spans = vec![Span::raw("  ")];
            spans.extend(mark_spans(line, &markers, st.base));
            d.push(Line::from(spans), Some(0));
            off += line.len() + 1;
        }
        return d;
    };
    template_diff_side(&mut d, rows, &markers, modes, theme);
    d
}

/// The render the Template pane shows (server or local, by `modes.local`) and where it came
/// from (or why there is none).
fn shown_render(
    t: &crate::analysis::template::TemplateView,
    modes: &Modes,
) -> (Option<String>, String) {
    if modes.local {
        let from = t.local_source.as_deref().unwrap_or("/props chat_template");
        match &t.local {
            Some(Ok(p)) => (Some(p.clone()), format!("local render ({from})")),
            Some(Err(e)) => (None, format!("local render failed: {e}")),
            None => (
                None,
                "local render: the session header has no /props chat_template".to_owned(),
            ),
        }
    } else {
        (
            t.server.clone(),
            t.server_source.clone().unwrap_or_else(|| {
                "server render: not recorded for this exchange (record with a llama-server \
                 upstream); s: local render"
                    .into()
            }),
        )
    }
}

/// The Template pane's first line: text or tokens, the render's origin, the BOS count.
fn template_header(
    d: &mut Doc,
    t: &crate::analysis::template::TemplateView,
    modes: &Modes,
    origin: String,
    theme: &Theme,
) {
    let st = &theme.styles;
    let bos = match (t.bos_count, &t.bos_token) {
        (Some(n), Some(b)) => format!("  BOS {b} ×{n}{}", if n > 1 { " (doubled!)" } else { "" }),
        (Some(n), None) => format!("  BOS ×{n}"),
        _ => String::new(),
    };
    d.push(
        Line::from(vec![
            Span::styled(
                format!("[{}] ", if modes.tokens { "tokens" } else { "text" }),
                st.accent,
            ),
            Span::styled(origin, st.info),
            Span::styled(
                bos,
                if t.bos_count.unwrap_or(0) > 1 {
                    st.severity_error
                } else {
                    st.muted
                },
            ),
        ]),
        None,
    );
}

/// How the shown render compares with the other one.
fn template_compare(
    t: &crate::analysis::template::TemplateView,
    modes: &Modes,
    theme: &Theme,
) -> Span<'static> {
    let st = &theme.styles;
    let other = if modes.local { "server" } else { "local" };
    match (&t.diff, &t.server, &t.local) {
        (Some(rows), _, _) => {
            let n = rows
                .iter()
                .filter(|r| r.kind != crate::diff::RowKind::Equal)
                .count();
            if n == 0 {
                Span::styled(format!("identical to the {other} render"), st.status_ok)
            } else {
                Span::styled(
                    format!(
                        "{n} line{} differ from the {other} render (marked ~ changed, + only here; \
                         d: side by side)",
                        if n == 1 { "" } else { "s" }
                    ),
                    st.severity_warning,
                )
            }
        }
        (None, None, _) => Span::styled(
            "no server render (/apply-template) recorded for this exchange: nothing to compare",
            st.muted,
        ),
        (None, Some(_), _) => {
            Span::styled("no local render to compare with (s: see why)", st.muted)
        }
    }
}

/// The server's token pieces, one per line (`t` in the Template pane).
fn template_tokens(d: &mut Doc, t: &crate::analysis::template::TemplateView, theme: &Theme) {
    let st = &theme.styles;
    let Some(tokens) = &t.tokens else {
        d.text(
            "No token pieces recorded for this exchange.",
            st.muted,
            None,
        );
        return;
    };
    let mut off = 0;
    for (i, tok) in tokens.iter().enumerate() {
        let piece = String::from_utf8_lossy(tok.piece.as_bytes()).into_owned();
        let style = if t.specials.contains(&piece) {
            st.special_token
        } else {
            st.base
        };
        d.anchors.push((Anchor::Token(i), d.lines.len()));
        d.anchors.push((Anchor::Offset(off), d.lines.len()));
        off += tok.piece.as_bytes().len();
        d.copy.push(piece.clone());
        d.push(
            Line::from(vec![
                Span::styled(format!("{i:>5} "), st.muted),
                Span::styled(format!("{:>7} ", tok.id), st.muted),
                Span::styled(format!("{piece:?}"), style),
            ]),
            Some(i),
        );
    }
}

/// The shown side of the local (left) / server (right) diff: a gutter mark per line, changed
/// tokens in the side's diff style, and one note where the other render has lines this one
/// lacks.
fn template_diff_side(
    d: &mut Doc,
    rows: &[crate::diff::Row],
    markers: &[(&str, Style)],
    modes: &Modes,
    theme: &Theme,
) {
    let st = &theme.styles;
    let other = if modes.local { "server" } else { "local" };
    let (changed_style, gutter_style) = if modes.local {
        (st.diff_deleted, st.diff_removed)
    } else {
        (st.diff_inserted, st.diff_added)
    };
    let mut off = 0;
    let mut missing = 0usize;
    let flush = |d: &mut Doc, missing: &mut usize| {
        if *missing > 0 {
            d.text(
                format!(
                    "  ⋯ {} line{} only in the {other} render",
                    *missing,
                    if *missing == 1 { "" } else { "s" }
                ),
                st.muted,
                None,
            );
            *missing = 0;
        }
    };
    for r in rows {
        let side = if modes.local { &r.left } else { &r.right };
        let Some(side) = side else {
            if r.kind != crate::diff::RowKind::Fold {
                missing += 1;
            }
            continue;
        };
        flush(d, &mut missing);
        let gutter = match r.kind {
            crate::diff::RowKind::Changed => Span::styled("~ ", gutter_style),
            crate::diff::RowKind::Equal | crate::diff::RowKind::Fold => Span::raw("  "),
            _ => Span::styled("+ ", gutter_style),
        };
        let mut spans = vec![gutter];
        let mut len = 0;
        for seg in &side.segments {
            len += seg.text.len();
            let base = if seg.changed {
                st.base.patch(changed_style)
            } else {
                st.base
            };
            spans.extend(mark_spans(&seg.text, markers, base).into_iter().map(|sp| {
                if seg.changed {
                    sp.patch_style(changed_style)
                } else {
                    sp
                }
            }));
        }
        d.anchors.push((Anchor::Offset(off), d.lines.len()));
        d.push(Line::from(spans), Some(0));
        off += len + 1;
    }
    flush(d, &mut missing);
}

fn mark_spans(line: &str, markers: &[(&str, Style)], base: Style) -> Vec<Span<'static>> {
    let mut spans = Vec::new();
    let mut rest = line;
    while !rest.is_empty() {
        let hit = markers
            .iter()
            .filter_map(|(m, s)| rest.find(m).map(|p| (p, *m, *s)))
            .min_by_key(|(p, m, _)| (*p, usize::MAX - m.len()));
        match hit {
            Some((p, m, s)) => {
                if p > 0 {
                    spans.push(Span::styled(rest[..p].to_owned(), base));
                }
                spans.push(Span::styled(m.to_owned(), s));
                rest = &rest[p + m.len()..];
            }
            None => {
                spans.push(Span::styled(rest.to_owned(), base));
                break;
            }
        }
    }
    spans
}

/// Stream pane: one line per SSE event: number, receive time (ms from the request start), size
/// on the wire, the `event:` name when the stream names its events, and what the event meant
/// to the reply ([`crate::analysis::StreamEvent::meaning`]); the raw data is beside it.
pub fn stream(a: &ExchangeAnalysis, theme: &Theme) -> Doc {
    let st = &theme.styles;
    let mut d = Doc::default();
    if let Some(p) = crate::analysis::partial_note(&a.exchange) {
        d.text(format!("partial: {p}"), st.severity_warning, None);
    }
    if a.events.is_empty() {
        let what = if a.exchange.is_stream() {
            "The stream has no events."
        } else {
            "Not a streamed response (no SSE events); the body is shown on copy."
        };
        d.text(what, st.muted, None);
        if let Some(b) = a.exchange.response.as_ref().and_then(|r| r.body.as_ref()) {
            d.copy.push(b.to_text().into_owned());
            for l in highlight::json_lines(&pretty(&b.to_text()), theme.syntect.as_deref(), st.base)
            {
                d.push(l, Some(0));
            }
        }
        return d;
    }
    let named = a.events.iter().any(|e| e.event.is_some());
    for e in &a.events {
        d.anchors.push((Anchor::Event(e.index), d.lines.len()));
        d.copy.push(e.data.clone());
        let t = e
            .t_us
            .map(|t| format!("{:>9.1}ms", t as f64 / 1000.0))
            .unwrap_or_else(|| "          —".into());
        let mut spans = vec![
            Span::styled(format!("{:>4} ", e.index), st.muted),
            Span::styled(t, st.info),
            Span::styled(format!("{:>6}B ", e.size), st.muted),
        ];
        // Named events (Anthropic `event:` lines) show the name; OpenAI's unnamed ones do not.
        if named {
            let name = e.event.as_deref().unwrap_or("");
            spans.push(Span::styled(
                format!("{:<19} ", cut_chars(name, 19)),
                st.accent,
            ));
        }
        spans.push(Span::styled(e.meaning.clone(), st.base));
        d.push(Line::from(spans), Some(e.index));
    }
    d
}

fn cut_chars(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

/// Pretty-prints JSON text; non-JSON is returned as is.
pub fn pretty(s: &str) -> String {
    serde_json::from_str::<serde_json::Value>(s)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| s.to_owned())
}

/// Findings pane: exchange findings, then session-level ones.
pub fn findings(list: &[Finding], theme: &Theme) -> Doc {
    let st = &theme.styles;
    let mut d = Doc::default();
    if list.is_empty() {
        d.text("No findings for this exchange.", st.status_ok, None);
        return d;
    }
    for (i, f) in list.iter().enumerate() {
        let sev = match f.severity {
            Severity::Error => ("error  ", st.severity_error),
            Severity::Warning => ("warning", st.severity_warning),
            Severity::Info => ("info   ", st.severity_info),
        };
        d.copy
            .push(serde_json::to_string_pretty(f).unwrap_or_default());
        let scope = if f.exchange.is_some() {
            ""
        } else {
            "[session] "
        };
        d.push(
            Line::from(vec![
                Span::styled(format!("{} ", sev.0), sev.1),
                Span::styled(format!("{:<30} ", f.rule.id()), st.header),
                Span::styled(format!("{scope}{}", f.message), st.base),
            ]),
            Some(i),
        );
        let mut ev = Vec::new();
        if let Some(p) = f.evidence.pane {
            ev.push(format!("→ {p:?}"));
        }
        if let Some(t) = &f.evidence.tool {
            ev.push(format!("tool {t}"));
        }
        if let Some(p) = &f.evidence.pointer {
            ev.push(p.clone());
        }
        if let Some(e) = f.evidence.event {
            ev.push(format!("event {e}"));
        }
        if let Some(s) = f.evidence.step {
            ev.push(format!("step {s}"));
        }
        if let Some(o) = f.evidence.offset {
            ev.push(format!("offset {o}"));
        }
        if let Some(t) = f.evidence.token {
            ev.push(format!("token {t}"));
        }
        if !ev.is_empty() {
            d.push(
                Line::from(vec![
                    Span::raw("          "),
                    Span::styled(ev.join("  "), st.accent),
                ]),
                Some(i),
            );
        }
        if let Some(x) = &f.evidence.excerpt {
            d.push(
                Line::from(vec![
                    Span::raw("          "),
                    Span::styled(x.clone(), st.muted),
                ]),
                Some(i),
            );
        }
        d.push(
            Line::from(vec![
                Span::styled("          hint: ", st.muted),
                Span::styled(f.hint.clone(), st.info),
            ]),
            Some(i),
        );
        if let Some(fix) = &f.fix {
            d.push(
                Line::from(vec![
                    Span::styled(format!("          fix ({}): ", fix.id()), st.muted),
                    Span::styled(fix.change.clone(), st.accent),
                ]),
                Some(i),
            );
        }
    }
    d
}

/// Replay pane's left side at `step` of `chunking`: chunk, state, buffer, events; and the text
/// so far.
pub fn replay(a: &ExchangeAnalysis, chunking: Chunking, step: usize, theme: &Theme) -> Doc {
    let st = &theme.styles;
    let r = &a.replay;
    let mut d = Doc::default();
    if r.text().is_empty() {
        let why = match &a.raw {
            Some(raw) if raw.models_text().is_none() => {
                format!("No generated text to replay: {}.", raw.describe())
            }
            _ => "No generated text to replay.".to_owned(),
        };
        d.text(why, st.muted, None);
        return d;
    }
    if !r.has(chunking) {
        d.text(
            "No token pieces recorded for this reply (the stream lists them with OpenAI \
             `logprobs: true` or llama-server `n_probs`): press c for another chunking.",
            st.muted,
            None,
        );
        return d;
    }
    let Some(s) = r.step(chunking, step) else {
        d.text("No generated text to replay.", st.muted, None);
        return d;
    };
    let text = r.text();
    d.copy.push(text[..floor_char(text, s.end)].to_owned());
    d.push(
        Line::from(vec![
            Span::styled("chunk   ", st.muted),
            Span::styled(format!("{:?}", s.chunk), st.accent),
        ]),
        Some(0),
    );
    d.push(
        Line::from(vec![
            Span::styled("syntax  ", st.muted),
            Span::styled(r.syntax().unwrap_or("auto").to_owned(), st.info),
        ]),
        Some(0),
    );
    d.push(
        Line::from(vec![
            Span::styled("state   ", st.muted),
            Span::styled(s.state.clone(), st.header),
        ]),
        Some(0),
    );
    d.push(
        Line::from(vec![
            Span::styled("buffer  ", st.muted),
            Span::styled(format!("{:?}", s.buffer), st.base),
        ]),
        Some(0),
    );
    d.text("events", st.muted, Some(0));
    for e in &s.events {
        d.push(
            Line::from(vec![Span::raw("  "), Span::styled(e.clone(), st.base)]),
            Some(0),
        );
    }
    d.text(format!("text so far: {}", r.source()), st.muted, Some(0));
    let upto = floor_char(text, s.end);
    for l in text[..upto].split('\n') {
        d.push(
            Line::from(vec![Span::raw("  "), Span::styled(l.to_owned(), st.base)]),
            Some(0),
        );
    }
    d
}

/// The server's reply after `n` events (Replay's right side); the whole reply when it was not
/// streamed.
pub fn server_view(a: &ExchangeAnalysis, n: usize, theme: &Theme) -> Doc {
    let st = &theme.styles;
    let mut d = Doc::default();
    if a.message.is_none() {
        // an answer without an assistant message (an HTTP error, a body that is no chat
        // reply) is still a reply: show its status and body, not "no reply"
        let body = a
            .exchange
            .response
            .as_ref()
            .and_then(|r| r.body.as_ref())
            .map(|b| b.to_text().into_owned());
        match a.summary.status {
            Some(status) => {
                d.text(
                    format!("no assistant message: HTTP {status}"),
                    st.muted,
                    None,
                );
                if let Some(b) = body.filter(|b| !b.is_empty()) {
                    let shown: String = b.chars().take(2000).collect();
                    for l in crate::text::visible(&shown).split('\n') {
                        d.text(l.to_owned(), st.base, None);
                    }
                }
                d.text(
                    "e: the engines view (each engine's answer to the raw text)",
                    st.muted,
                    None,
                );
            }
            None => d.text("No server reply.", st.muted, None),
        }
        return d;
    }
    let v = &a.replay.server_view(n);
    if a.replay.marks.is_empty() {
        d.text("the whole reply (not streamed)", st.muted, None);
    } else {
        d.text(
            format!(
                "after {} of {} events",
                n.min(a.events.len()),
                a.events.len()
            ),
            st.muted,
            None,
        );
    }
    if !v.reasoning.is_empty() {
        d.text("reasoning_content", st.muted, None);
        for l in v.reasoning.split('\n') {
            d.text(format!("  {l}"), st.base, None);
        }
    }
    d.text("content", st.muted, None);
    for l in v.content.split('\n') {
        d.text(format!("  {l}"), st.base, None);
    }
    for c in &v.calls {
        d.push(
            Line::from(vec![
                Span::styled(
                    format!("call[{}] ", c.index.map_or("?".into(), |i| i.to_string())),
                    st.muted,
                ),
                Span::styled(c.name.clone(), st.title),
                Span::styled(format!(" {}", c.arguments), st.base),
            ]),
            None,
        );
    }
    if let Some(f) = &v.finish_reason {
        d.push(
            Line::from(vec![
                Span::styled("finish_reason ", st.muted),
                Span::styled(f.clone(), st.accent),
            ]),
            None,
        );
    }
    d
}

fn floor_char(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Severity ordering helper for list colouring.
pub fn worst(rules: &[crate::finding::Rule]) -> Option<Severity> {
    rules.iter().map(|r| r.severity()).max()
}
