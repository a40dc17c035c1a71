//! Shared helpers for the whole-app TUI tests: key events from a key list, the screen as text,
//! and a session opened, driven and captured in one call.

use std::path::PathBuf;

use crossterm::event::{Event, KeyEvent, KeyEventKind, KeyEventState};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use toolscope::tui::keymap::{Key, Keymap};
use toolscope::tui::theme::Theme;
use toolscope::tui::{State, Tui};

/// The key event of one key name (`"j"`, `"enter"`, `"ctrl-u"`: the keymap's key names).
pub fn key(k: &str) -> std::io::Result<Event> {
    let key = Key::parse(k).unwrap();
    Ok(Event::Key(KeyEvent {
        code: key.code,
        modifiers: key.mods,
        kind: KeyEventKind::Press,
        state: KeyEventState::NONE,
    }))
}

/// Key events from a space-separated key list (`"j j 4 enter"`).
pub fn keys(spec: &str) -> Vec<std::io::Result<Event>> {
    spec.split_whitespace().map(key).collect()
}

/// The terminal's cells as text, one line per row.
pub fn screen(tui: &Tui<TestBackend>) -> String {
    let buf = tui.terminal.backend().buffer();
    let mut out = String::new();
    for y in 0..buf.area.height {
        for x in 0..buf.area.width {
            out.push_str(buf[(x, y)].symbol());
        }
        out.push('\n');
    }
    out
}

/// Opens `session` (a path from the crate root) in a `width`×`height` inspector with the dark
/// theme, presses `spec`'s keys and returns the screen.
pub async fn screen_after(session: &str, (width, height): (u16, u16), spec: &str) -> String {
    let theme = Theme::resolve(Some("dark"), None, false).unwrap();
    let mut state = State::new(Keymap::default(), theme, (width, height));
    let fx = state.open_files(vec![PathBuf::from(session)], None);
    let mut tui = Tui::new(
        Terminal::new(TestBackend::new(width, height)).unwrap(),
        state,
        true,
    );
    tui.run_effects(fx);
    tui.run(futures::stream::iter(keys(spec))).await.unwrap();
    screen(&tui)
}
