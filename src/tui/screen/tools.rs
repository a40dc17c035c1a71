//! The Tools pane's keys (collapse and expand a tool). Its document is built in
//! [`crate::tui::doc`] and drawn as any document ([`super::widgets::draw_doc`]).

use crate::finding::Pane;
use crate::tui::keymap::Action;
use crate::tui::state::{SessionView, rebuild};
use crate::tui::theme::Theme;

/// `Space`/`←`/`→` on a tool in the Tools pane: collapse or expand it (`←` collapses, `→`
/// expands, `Space` toggles), keeping the cursor on the tool.
pub(crate) fn toggle(s: &mut SessionView, action: Action, theme: &Theme, ph: usize) {
    let cursor = s.panes[Pane::Tools.index()].cursor;
    if let Some(Some(item)) = s.docs[Pane::Tools.index()].items.get(cursor).copied() {
        let collapsed = s.modes.collapsed.contains(&item);
        let want = match action {
            Action::Left => true,
            Action::Right => false,
            _ => !collapsed,
        };
        if want {
            s.modes.collapsed.insert(item);
        } else {
            s.modes.collapsed.remove(&item);
        }
        rebuild(s, Pane::Tools, theme);
        let line = s.docs[Pane::Tools.index()].line_of_item(item).unwrap_or(0);
        let n = s.docs[Pane::Tools.index()].lines.len();
        s.panes[Pane::Tools.index()].set(line, n, ph);
    }
}
