//! The Findings pane: the exchange's and the session's findings in severity order, and
//! `Enter` jumping to a finding's evidence in its pane.

use crate::finding::{Finding, Pane};
use crate::tui::doc::Anchor;
use crate::tui::state::{Focus, SessionView, rebuild};
use crate::tui::theme::Theme;

/// The exchange's findings, then the session's, sorted errors first, then warnings, then
/// info; the sort is stable, so within a severity the order is diagnose's (exchange before
/// session).
pub(crate) fn findings_of(s: &SessionView) -> Vec<Finding> {
    let mut v: Vec<Finding> = s
        .analysis
        .as_ref()
        .map(|a| a.findings.clone())
        .unwrap_or_default();
    v.extend(s.session_findings.iter().cloned());
    v.sort_by_key(|f| std::cmp::Reverse(f.severity));
    v
}

pub(crate) fn jump_to_evidence(s: &mut SessionView, theme: &Theme, ph: usize) {
    let list = findings_of(s);
    let Some(Some(i)) = s.docs[Pane::Findings.index()]
        .items
        .get(s.panes[Pane::Findings.index()].cursor)
        .copied()
    else {
        return;
    };
    let Some(f) = list.get(i) else { return };
    let ev = &f.evidence;
    let pane = match ev.pane {
        Some(Pane::Findings) | None => return,
        Some(p) => p,
    };
    s.pane = pane;
    s.focus = Focus::Detail;
    if pane == Pane::Replay {
        if let Some(c) = ev.chunking {
            s.chunking = c;
        }
        if let Some(step) = ev.step {
            s.step = step;
        }
        rebuild(s, Pane::Replay, theme);
        return;
    }
    if pane == Pane::Tools {
        s.modes.collapsed.clear();
        rebuild(s, Pane::Tools, theme);
    }
    let d = &s.docs[pane.index()];
    let anchors: Vec<Anchor> = [
        ev.pointer.clone().map(Anchor::Pointer),
        ev.event.map(Anchor::Event),
        ev.token.map(Anchor::Token),
        ev.offset.map(Anchor::Offset),
        ev.tool.clone().map(Anchor::Tool),
    ]
    .into_iter()
    .flatten()
    .collect();
    // A tool-scoped pointer: find the tool first, then the pointer after it.
    let line = if let (Some(tool), Some(ptr)) = (&ev.tool, &ev.pointer) {
        let t = d.line_of(&Anchor::Tool(tool.clone()));
        let after = t.and_then(|t| {
            d.anchors.iter().filter(|(a, l)| *l >= t && matches!(a, Anchor::Pointer(p) if ptr.ends_with(p.as_str()) && p.len() > 1)).map(|(_, l)| *l).min()
        });
        after.or(t)
    } else {
        None
    };
    let line = line.or_else(|| anchors.iter().find_map(|a| d.line_of(a)));
    if let Some(l) = line {
        let len = d.lines.len();
        s.panes[pane.index()].set(l, len, ph);
    }
}
