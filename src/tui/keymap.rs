//! Key bindings: one table of (action, keys, contexts, help). The `?` help screen and the
//! footer are generated from it, so hints never drift from behaviour. Users override bindings in
//! `<config dir>/toolscope/keymap.toml`:
//!
//! ```toml
//! [keys]
//! down = ["j", "down", "ctrl-n"]
//! quit = ["ctrl-c", "ctrl-q"]
//! ```
//!
//! Key syntax: a character (`q`, `G`, `?`), a name (`enter`, `esc`, `tab`, `backtab`, `space`,
//! `up`, `down`, `left`, `right`, `home`, `end`, `pgup`, `pgdn`, `f1`…`f12`), optionally with
//! `ctrl-`, `alt-`, `shift-` prefixes; `<Ctrl-d>` style is accepted too.

use std::collections::BTreeMap;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde::Deserialize;

/// Everything a key can do. The vocabulary between input and state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Action {
    Quit,
    Back,
    Help,
    Up,
    Down,
    Left,
    Right,
    PageUp,
    PageDown,
    Top,
    Bottom,
    NextPane,
    PrevPane,
    Pane(u8),
    Select,
    Toggle,
    Search,
    SearchNext,
    SearchPrev,
    Filter,
    Copy,
    StepFirst,
    StepLast,
    Chunking,
    TemplateTokens,
    TemplateSource,
    /// Template pane: open the side-by-side diff of the local and server renders.
    TemplateDiff,
    /// Diff view: next / previous difference.
    NextChange,
    PrevChange,
    /// Text panes: wrap long lines (toggle).
    Wrap,
    /// Exchange list: only the rows it needs ↔ two fifths of the screen (mitmproxy's `-`).
    Layout,
    /// Replay pane: what each engine's parser would return, beside toolscope's read (toggle).
    Engines,
    /// Replay pane: scroll the right half (the server stream, or the engines view) down / up.
    SideDown,
    SideUp,
    /// The loop view: the session's conversations, turns, calls and results (toggle).
    LoopView,
    /// Findings pane: show the finding's fix and run it against the engine (what-if runs, as
    /// `toolscope try`); in the what-if view: run again.
    TryFix,
    /// What-if view: the runs' what-if session diffed against the original (`diff --against`).
    WhatIfDiff,
    /// What-if view: one run more / fewer per variant for the next run.
    MoreRuns,
    FewerRuns,
}

impl Action {
    /// Name used in keymap.toml.
    pub fn name(self) -> String {
        match self {
            Action::Pane(n) => format!("pane{n}"),
            other => {
                let s = format!("{other:?}");
                let mut out = String::new();
                for (i, c) in s.chars().enumerate() {
                    if c.is_uppercase() && i > 0 {
                        out.push('_');
                    }
                    out.push(c.to_ascii_lowercase());
                }
                out
            }
        }
    }
}

/// Where a binding applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ctx {
    /// Everywhere.
    Global,
    /// The session browser.
    Browser,
    /// The exchanges list.
    List,
    /// Any detail pane.
    Detail,
    Tools,
    Template,
    Stream,
    Replay,
    Findings,
    /// The side-by-side diff view (opened from the Template pane).
    Diff,
    /// The loop view (`L`).
    Loop,
    /// The what-if view (`x` on a finding with a fix).
    WhatIf,
}

/// A key with modifiers (shift folded into the character for printable keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Key {
    pub code: KeyCode,
    pub mods: KeyModifiers,
}

impl Key {
    /// Normalizes a crossterm key event (uppercase letters carry no SHIFT; BackTab no SHIFT).
    pub fn from_event(e: &KeyEvent) -> Key {
        let mut mods =
            e.modifiers & (KeyModifiers::CONTROL | KeyModifiers::ALT | KeyModifiers::SHIFT);
        if matches!(e.code, KeyCode::Char(_) | KeyCode::BackTab) {
            mods.remove(KeyModifiers::SHIFT);
        }
        let code = match e.code {
            KeyCode::Char(c) if mods.contains(KeyModifiers::CONTROL) => {
                KeyCode::Char(c.to_ascii_lowercase())
            }
            c => c,
        };
        Key { code, mods }
    }

    /// Parses `ctrl-c`, `<Ctrl-d>`, `G`, `pgdn`, `shift-tab`…
    pub fn parse(s: &str) -> Result<Key, String> {
        let t = s.trim().trim_start_matches('<').trim_end_matches('>');
        let mut mods = KeyModifiers::NONE;
        let mut rest = t;
        loop {
            let lower = rest.to_ascii_lowercase();
            if lower.len() > 1 && (lower.starts_with("ctrl-") || lower.starts_with("c-")) {
                mods |= KeyModifiers::CONTROL;
                rest = &rest[rest.find('-').map_or(0, |i| i + 1)..];
            } else if lower.len() > 1 && (lower.starts_with("alt-") || lower.starts_with("m-")) {
                mods |= KeyModifiers::ALT;
                rest = &rest[rest.find('-').map_or(0, |i| i + 1)..];
            } else if lower.len() > 1 && (lower.starts_with("shift-") || lower.starts_with("s-")) {
                mods |= KeyModifiers::SHIFT;
                rest = &rest[rest.find('-').map_or(0, |i| i + 1)..];
            } else {
                break;
            }
        }
        let code = match rest.to_ascii_lowercase().as_str() {
            "enter" | "return" | "cr" => KeyCode::Enter,
            "esc" | "escape" => KeyCode::Esc,
            "tab" if mods.contains(KeyModifiers::SHIFT) => {
                mods.remove(KeyModifiers::SHIFT);
                KeyCode::BackTab
            }
            "tab" => KeyCode::Tab,
            "backtab" => KeyCode::BackTab,
            "space" => KeyCode::Char(' '),
            "up" => KeyCode::Up,
            "down" => KeyCode::Down,
            "left" => KeyCode::Left,
            "right" => KeyCode::Right,
            "home" => KeyCode::Home,
            "end" => KeyCode::End,
            "pgup" | "pageup" => KeyCode::PageUp,
            "pgdn" | "pagedown" => KeyCode::PageDown,
            "backspace" => KeyCode::Backspace,
            "delete" | "del" => KeyCode::Delete,
            f if f.len() >= 2 && f.starts_with('f') && f[1..].parse::<u8>().is_ok() => {
                KeyCode::F(f[1..].parse().unwrap_or(1))
            }
            _ => {
                let mut chars = rest.chars();
                match (chars.next(), chars.next()) {
                    (Some(c), None) => {
                        if mods.contains(KeyModifiers::SHIFT) && c.is_ascii_alphabetic() {
                            mods.remove(KeyModifiers::SHIFT);
                            KeyCode::Char(c.to_ascii_uppercase())
                        } else if mods.contains(KeyModifiers::CONTROL) {
                            KeyCode::Char(c.to_ascii_lowercase())
                        } else {
                            KeyCode::Char(c)
                        }
                    }
                    _ => return Err(format!("unknown key {s:?}")),
                }
            }
        };
        if matches!(code, KeyCode::Char(_)) {
            mods.remove(KeyModifiers::SHIFT);
        }
        Ok(Key { code, mods })
    }

    /// Short display form (`^c`, `G`, `Tab`, `PgDn`, `←`).
    pub fn display(&self) -> String {
        let base = match self.code {
            KeyCode::Char(' ') => "Space".to_owned(),
            KeyCode::Char(c) => c.to_string(),
            KeyCode::Enter => "Enter".into(),
            KeyCode::Esc => "Esc".into(),
            KeyCode::Tab => "Tab".into(),
            KeyCode::BackTab => "S-Tab".into(),
            KeyCode::Up => "↑".into(),
            KeyCode::Down => "↓".into(),
            KeyCode::Left => "←".into(),
            KeyCode::Right => "→".into(),
            KeyCode::Home => "Home".into(),
            KeyCode::End => "End".into(),
            KeyCode::PageUp => "PgUp".into(),
            KeyCode::PageDown => "PgDn".into(),
            KeyCode::Backspace => "Bksp".into(),
            KeyCode::Delete => "Del".into(),
            KeyCode::F(n) => format!("F{n}"),
            other => format!("{other:?}"),
        };
        let mut p = String::new();
        if self.mods.contains(KeyModifiers::CONTROL) {
            p.push_str("Ctrl-");
        }
        if self.mods.contains(KeyModifiers::ALT) {
            p.push_str("Alt-");
        }
        if self.mods.contains(KeyModifiers::SHIFT) {
            p.push_str("Shift-");
        }
        p + &base
    }
}

/// One binding: an action, its keys, where it applies, and its help text.
#[derive(Debug, Clone, PartialEq)]
pub struct Binding {
    pub action: Action,
    pub keys: Vec<Key>,
    pub contexts: Vec<Ctx>,
    pub help: &'static str,
    /// Shown in the footer (the most useful few per context).
    pub footer: bool,
}

/// The key map.
#[derive(Debug, Clone, PartialEq)]
pub struct Keymap {
    pub bindings: Vec<Binding>,
}

/// keymap.toml layout.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct KeymapFile {
    #[serde(default)]
    keys: BTreeMap<String, Vec<String>>,
}

impl Default for Keymap {
    fn default() -> Self {
        use Ctx::*;
        let b = |action, keys: &[&str], contexts: &[Ctx], help, footer| Binding {
            action,
            keys: keys
                .iter()
                .map(|k| Key::parse(k).expect("default key parses"))
                .collect(),
            contexts: contexts.to_vec(),
            help,
            footer,
        };
        let mut bindings = vec![
            b(Action::Quit, &["ctrl-c", "Q"], &[Global], "quit now", false),
            b(
                Action::Back,
                &["q", "esc"],
                &[Global],
                "back (at the top: quit? y/n)",
                true,
            ),
            b(Action::Help, &["?", "f1"], &[Global], "this help", true),
            b(Action::Up, &["k", "up"], &[Global], "up", false),
            b(Action::Down, &["j", "down"], &[Global], "down", false),
            b(
                Action::PageUp,
                &["pgup", "ctrl-u"],
                &[Global],
                "page up",
                false,
            ),
            b(
                Action::PageDown,
                &["pgdn", "ctrl-d"],
                &[Global],
                "page down",
                false,
            ),
            b(
                Action::Top,
                &["g", "home"],
                &[
                    Browser, List, Tools, Template, Stream, Findings, Detail, Diff, Loop, WhatIf,
                ],
                "first",
                false,
            ),
            b(
                Action::Bottom,
                &["G", "end"],
                &[
                    Browser, List, Tools, Template, Stream, Findings, Detail, Diff, Loop, WhatIf,
                ],
                "last",
                false,
            ),
            b(Action::Select, &["enter"], &[Browser], "open session", true),
            b(
                Action::Select,
                &["enter"],
                &[List],
                "inspect exchange",
                true,
            ),
            b(
                Action::NextPane,
                &["tab"],
                &[List, Detail],
                "next pane",
                true,
            ),
            b(
                Action::PrevPane,
                &["backtab"],
                &[List, Detail],
                "previous pane",
                false,
            ),
            b(
                Action::Search,
                &["/"],
                &[Browser, List, Detail],
                "search",
                true,
            ),
            b(
                Action::SearchNext,
                &["n"],
                &[Browser, List, Detail],
                "next match",
                false,
            ),
            b(
                Action::SearchPrev,
                &["N"],
                &[Browser, List, Detail],
                "previous match",
                false,
            ),
            b(
                Action::Filter,
                &["f"],
                &[List],
                "filter (path: model: rule: status:)",
                true,
            ),
            b(
                Action::Copy,
                &["y"],
                &[List, Detail],
                "copy focused item (OSC 52)",
                true,
            ),
            b(Action::Left, &["h", "left"], &[Tools], "collapse", false),
            b(Action::Right, &["l", "right"], &[Tools], "expand", false),
            b(
                Action::Toggle,
                &["space", "enter"],
                &[Tools],
                "collapse/expand tool",
                true,
            ),
            b(
                Action::TemplateTokens,
                &["t"],
                &[Template],
                "tokens: prompt text / token pieces",
                true,
            ),
            b(
                Action::TemplateSource,
                &["s"],
                &[Template],
                "render: server / local",
                true,
            ),
            b(
                Action::TemplateDiff,
                &["d"],
                &[Template],
                "diff: local vs server side by side",
                true,
            ),
            b(
                Action::Back,
                &["q", "esc"],
                &[Diff],
                "back to the Template pane",
                true,
            ),
            b(Action::NextChange, &["n"], &[Diff], "next difference", true),
            b(
                Action::PrevChange,
                &["N"],
                &[Diff],
                "previous difference",
                false,
            ),
            b(Action::Left, &["h", "left"], &[Diff], "scroll left", false),
            b(
                Action::Right,
                &["l", "right"],
                &[Diff],
                "scroll right",
                false,
            ),
            b(
                Action::Select,
                &["enter"],
                &[Stream],
                "show event JSON",
                true,
            ),
            b(Action::Left, &["h", "left"], &[Replay], "step back", true),
            b(
                Action::Right,
                &["l", "right"],
                &[Replay],
                "step forward",
                true,
            ),
            b(
                Action::StepFirst,
                &["home", "g"],
                &[Replay],
                "first step",
                false,
            ),
            b(
                Action::StepLast,
                &["end", "G"],
                &[Replay],
                "last step",
                false,
            ),
            b(
                Action::Chunking,
                &["c"],
                &[Replay],
                "chunking: recorded / pieces / chars / ×2 / ×8 / whole",
                true,
            ),
            b(
                Action::Engines,
                &["e"],
                &[Replay],
                "engines: what llama.cpp / vLLM / SGLang would return",
                true,
            ),
            b(
                Action::SideDown,
                &["J", "shift-down"],
                &[Replay],
                "scroll the right half (server stream / engines) down",
                false,
            ),
            b(
                Action::SideUp,
                &["K", "shift-up"],
                &[Replay],
                "scroll the right half up",
                false,
            ),
            b(
                Action::Select,
                &["enter"],
                &[Findings],
                "jump to evidence",
                true,
            ),
            b(
                Action::TryFix,
                &["x"],
                &[Findings],
                "try the fix: runs original and fixed against the engine",
                true,
            ),
            b(
                Action::Wrap,
                &["w"],
                &[Detail, WhatIf],
                "wrap long lines",
                true,
            ),
            b(
                Action::LoopView,
                &["L"],
                &[List, Detail],
                "loop view: conversations, turns, calls → results",
                true,
            ),
            b(
                Action::Select,
                &["enter"],
                &[Loop],
                "open this exchange's panes",
                true,
            ),
            b(
                Action::Back,
                &["q", "esc", "L"],
                &[Loop],
                "close the loop view",
                true,
            ),
            b(
                Action::Back,
                &["q", "esc"],
                &[WhatIf],
                "close (runs going: cancel, keep what finished)",
                true,
            ),
            b(
                Action::WhatIfDiff,
                &["o"],
                &[WhatIf],
                "the what-if runs beside the original (diff --against)",
                true,
            ),
            b(Action::TryFix, &["x"], &[WhatIf], "run again", true),
            b(
                Action::MoreRuns,
                &["+"],
                &[WhatIf],
                "one run more per variant",
                false,
            ),
            b(
                Action::FewerRuns,
                &["-"],
                &[WhatIf],
                "one run fewer per variant",
                false,
            ),
            b(
                Action::Layout,
                &["-"],
                &[List, Detail],
                "list: rows it needs / two fifths",
                false,
            ),
        ];
        for n in 1..=6u8 {
            let key = n.to_string();
            bindings.push(b(
                Action::Pane(n),
                &[key.as_str()],
                &[List, Detail],
                PANE_HELP[n as usize - 1],
                false,
            ));
        }
        Keymap { bindings }
    }
}

const PANE_HELP: [&str; 6] = [
    "Tools pane",
    "Schema pane",
    "Template pane",
    "Stream pane",
    "Replay pane",
    "Findings pane",
];

impl Keymap {
    /// The action bound to `key` in the first matching context of `ctxs` (most specific
    /// first), then Global.
    pub fn action(&self, key: Key, ctxs: &[Ctx]) -> Option<Action> {
        for ctx in ctxs.iter().chain(std::iter::once(&Ctx::Global)) {
            if let Some(b) = self
                .bindings
                .iter()
                .find(|b| b.contexts.contains(ctx) && b.keys.contains(&key))
            {
                return Some(b.action);
            }
        }
        None
    }

    /// Bindings that apply in `ctxs` (most specific first), for the footer (`footer_only`) or
    /// help. A key shadowed by a more specific context is omitted.
    pub fn active(&self, ctxs: &[Ctx], footer_only: bool) -> Vec<&Binding> {
        let mut seen = Vec::new();
        let mut out = Vec::new();
        for ctx in ctxs.iter().chain(std::iter::once(&Ctx::Global)) {
            for b in self.bindings.iter().filter(|b| b.contexts.contains(ctx)) {
                if b.keys.iter().all(|k| seen.contains(k)) {
                    continue;
                }
                seen.extend(b.keys.iter().copied());
                if !footer_only || b.footer {
                    out.push(b);
                }
            }
        }
        out
    }

    /// Applies a user keymap file over the defaults: each named action's keys are replaced in
    /// every context it has.
    ///
    /// Errors: invalid TOML, unknown action or key (message names `origin`).
    pub fn merge_toml(&mut self, src: &str, origin: &str) -> anyhow::Result<()> {
        let file: KeymapFile = toml::from_str(src).map_err(|e| anyhow::anyhow!("{origin}: {e}"))?;
        for (name, keys) in file.keys {
            let parsed: Vec<Key> = keys
                .iter()
                .map(|k| Key::parse(k))
                .collect::<Result<_, _>>()
                .map_err(|e| anyhow::anyhow!("{origin}: keys.{name}: {e}"))?;
            let mut found = false;
            for b in self.bindings.iter_mut().filter(|b| b.action.name() == name) {
                b.keys = parsed.clone();
                found = true;
            }
            if !found {
                let mut names: Vec<String> =
                    self.bindings.iter().map(|b| b.action.name()).collect();
                names.dedup();
                anyhow::bail!(
                    "{origin}: keys.{name}: unknown action (known: {})",
                    names.join(", ")
                );
            }
        }
        Ok(())
    }

    /// Defaults merged with `<config_dir>/keymap.toml` when it exists.
    pub fn load(config_dir: Option<&std::path::Path>) -> anyhow::Result<Keymap> {
        let mut km = Keymap::default();
        if let Some(p) = config_dir
            .map(|d| d.join("keymap.toml"))
            .filter(|p| p.is_file())
        {
            let src =
                std::fs::read_to_string(&p).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?;
            km.merge_toml(&src, &p.display().to_string())?;
        }
        Ok(km)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_key_forms() {
        assert_eq!(
            Key::parse("ctrl-c").unwrap(),
            Key {
                code: KeyCode::Char('c'),
                mods: KeyModifiers::CONTROL
            }
        );
        assert_eq!(
            Key::parse("<Ctrl-d>").unwrap(),
            Key {
                code: KeyCode::Char('d'),
                mods: KeyModifiers::CONTROL
            }
        );
        assert_eq!(
            Key::parse("G").unwrap(),
            Key {
                code: KeyCode::Char('G'),
                mods: KeyModifiers::NONE
            }
        );
        assert_eq!(
            Key::parse("shift-tab").unwrap(),
            Key {
                code: KeyCode::BackTab,
                mods: KeyModifiers::NONE
            }
        );
        assert!(Key::parse("nokey").is_err());
    }

    #[test]
    fn event_normalization_matches_parse() {
        let e = KeyEvent::new(KeyCode::Char('G'), KeyModifiers::SHIFT);
        assert_eq!(Key::from_event(&e), Key::parse("G").unwrap());
    }

    #[test]
    fn specific_context_wins() {
        let km = Keymap::default();
        let right = Key::parse("right").unwrap();
        assert_eq!(
            km.action(right, &[Ctx::Replay, Ctx::Detail]),
            Some(Action::Right)
        );
        let g = Key::parse("g").unwrap();
        assert_eq!(
            km.action(g, &[Ctx::Replay, Ctx::Detail]),
            Some(Action::StepFirst)
        );
        assert_eq!(km.action(g, &[Ctx::List]), Some(Action::Top));
    }

    #[test]
    fn user_override_replaces_keys() {
        let mut km = Keymap::default();
        km.merge_toml("[keys]\ndown = [\"ctrl-n\"]\n", "keymap.toml")
            .unwrap();
        assert_eq!(
            km.action(Key::parse("ctrl-n").unwrap(), &[Ctx::List]),
            Some(Action::Down)
        );
        assert_eq!(km.action(Key::parse("j").unwrap(), &[Ctx::List]), None);
        let e = km
            .merge_toml("[keys]\nfly = [\"x\"]\n", "keymap.toml")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("keys.fly") && e.contains("unknown action"),
            "{e}"
        );
    }
}
