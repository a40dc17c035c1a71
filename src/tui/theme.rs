//! Themes: a small semantic palette (TOML, `themes/*.toml`) expanded into per-widget styles.
//!
//! Lookup for `--theme NAME`: `<config dir>/toolscope/themes/NAME.toml`, then the built-in
//! themes (embedded with `include_str!`). `--theme PATH` reads that file. A user theme may set
//! only some palette slots; the rest come from the built-in theme of the same name, else dark.
//! With `NO_COLOR` set (any non-empty value, <https://no-color.org>), every colour is dropped
//! and only bold/reverse/underline remain.

use std::path::{Path, PathBuf};
use std::str::FromStr;

use ratatui::style::{Color, Modifier, Style};
use serde::Deserialize;

/// Built-in themes: (name, TOML source).
pub const BUILTIN: &[(&str, &str)] = &[
    ("dark", include_str!("../../themes/dark.toml")),
    ("light", include_str!("../../themes/light.toml")),
    (
        "high-contrast",
        include_str!("../../themes/high-contrast.toml"),
    ),
];

/// A theme file.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ThemeFile {
    pub name: Option<String>,
    /// syntect theme name, `.tmTheme` path, or `none`.
    pub syntect: Option<String>,
    #[serde(default)]
    pub palette: PaletteFile,
}

/// Palette slots as written in TOML (all optional so user files can override a few).
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct PaletteFile {
    pub fg: Option<String>,
    pub bg: Option<String>,
    pub muted: Option<String>,
    pub primary: Option<String>,
    pub accent: Option<String>,
    pub success: Option<String>,
    pub warning: Option<String>,
    pub error: Option<String>,
    pub info: Option<String>,
    pub border: Option<String>,
    pub border_focused: Option<String>,
    pub selection_fg: Option<String>,
    pub selection_bg: Option<String>,
    pub special: Option<String>,
    pub match_bg: Option<String>,
    pub inserted: Option<String>,
    pub deleted: Option<String>,
}

/// The semantic palette.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Palette {
    pub fg: Color,
    pub bg: Color,
    pub muted: Color,
    pub primary: Color,
    pub accent: Color,
    pub success: Color,
    pub warning: Color,
    pub error: Color,
    pub info: Color,
    pub border: Color,
    pub border_focused: Color,
    pub selection_fg: Color,
    pub selection_bg: Color,
    /// Special tokens in a rendered prompt.
    pub special: Color,
    /// Background of search matches.
    pub match_bg: Color,
    /// Background of text only in the right/new side of a diff (the server's render).
    pub inserted: Color,
    /// Background of text only in the left/old side of a diff (toolscope's local render).
    pub deleted: Color,
}

/// A resolved theme: name, palette, per-widget styles, syntect theme name.
#[derive(Debug, Clone)]
pub struct Theme {
    pub name: String,
    /// syntect theme name or path; `None` for no syntax colouring.
    pub syntect: Option<String>,
    pub palette: Palette,
    pub styles: Styles,
    /// True when colours were dropped (`NO_COLOR`).
    pub no_color: bool,
}

/// Per-widget styles, derived from the palette. Views use only these.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Styles {
    pub base: Style,
    pub muted: Style,
    pub border: Style,
    pub border_focused: Style,
    pub title: Style,
    pub tab: Style,
    pub tab_active: Style,
    pub header: Style,
    pub selected: Style,
    /// Selected row when its pane is not focused.
    pub selected_unfocused: Style,
    pub status_ok: Style,
    pub status_error: Style,
    pub severity_error: Style,
    pub severity_warning: Style,
    pub severity_info: Style,
    pub special_token: Style,
    pub pseudo_special: Style,
    pub search_match: Style,
    pub key: Style,
    pub key_help: Style,
    pub timeline_done: Style,
    pub timeline_todo: Style,
    pub timeline_cursor: Style,
    /// Whole lines only on the left / right side of a diff (gutter and line numbers).
    pub diff_removed: Style,
    pub diff_added: Style,
    /// Changed tokens on the left (deleted) / right (inserted) side of a diff.
    pub diff_deleted: Style,
    pub diff_inserted: Style,
    pub accent: Style,
    pub info: Style,
}

fn color(slot: &str, v: &Option<String>, fallback: Color) -> anyhow::Result<Color> {
    match v {
        None => Ok(fallback),
        Some(s) => Color::from_str(s.trim()).map_err(|_| anyhow::anyhow!("palette.{slot}: unknown colour {s:?} (use \"#rrggbb\", a colour name or an ANSI index)")),
    }
}

impl Palette {
    fn from_file(p: &PaletteFile, base: &Palette) -> anyhow::Result<Palette> {
        Ok(Palette {
            fg: color("fg", &p.fg, base.fg)?,
            bg: color("bg", &p.bg, base.bg)?,
            muted: color("muted", &p.muted, base.muted)?,
            primary: color("primary", &p.primary, base.primary)?,
            accent: color("accent", &p.accent, base.accent)?,
            success: color("success", &p.success, base.success)?,
            warning: color("warning", &p.warning, base.warning)?,
            error: color("error", &p.error, base.error)?,
            info: color("info", &p.info, base.info)?,
            border: color("border", &p.border, base.border)?,
            border_focused: color("border_focused", &p.border_focused, base.border_focused)?,
            selection_fg: color("selection_fg", &p.selection_fg, base.selection_fg)?,
            selection_bg: color("selection_bg", &p.selection_bg, base.selection_bg)?,
            special: color("special", &p.special, base.special)?,
            match_bg: color("match_bg", &p.match_bg, base.match_bg)?,
            inserted: color("inserted", &p.inserted, base.inserted)?,
            deleted: color("deleted", &p.deleted, base.deleted)?,
        })
    }

    const RESET: Palette = Palette {
        fg: Color::Reset,
        bg: Color::Reset,
        muted: Color::Reset,
        primary: Color::Reset,
        accent: Color::Reset,
        success: Color::Reset,
        warning: Color::Reset,
        error: Color::Reset,
        info: Color::Reset,
        border: Color::Reset,
        border_focused: Color::Reset,
        selection_fg: Color::Reset,
        selection_bg: Color::Reset,
        special: Color::Reset,
        match_bg: Color::Reset,
        inserted: Color::Reset,
        deleted: Color::Reset,
    };
}

impl Styles {
    /// Expands a palette into widget styles.
    pub fn from_palette(p: &Palette) -> Styles {
        let s = Style::default();
        Styles {
            base: s.fg(p.fg).bg(p.bg),
            muted: s.fg(p.muted),
            border: s.fg(p.border),
            border_focused: s.fg(p.border_focused),
            title: s.fg(p.primary).add_modifier(Modifier::BOLD),
            tab: s.fg(p.muted),
            tab_active: s
                .fg(p.primary)
                .add_modifier(Modifier::BOLD | Modifier::UNDERLINED),
            header: s.fg(p.primary).add_modifier(Modifier::BOLD),
            selected: s
                .fg(p.selection_fg)
                .bg(p.selection_bg)
                .add_modifier(Modifier::BOLD),
            selected_unfocused: s.bg(p.selection_bg),
            status_ok: s.fg(p.success),
            status_error: s.fg(p.error).add_modifier(Modifier::BOLD),
            severity_error: s.fg(p.error).add_modifier(Modifier::BOLD),
            severity_warning: s.fg(p.warning).add_modifier(Modifier::BOLD),
            severity_info: s.fg(p.info),
            special_token: s.fg(p.special).add_modifier(Modifier::BOLD),
            pseudo_special: s
                .fg(p.error)
                .add_modifier(Modifier::UNDERLINED | Modifier::BOLD),
            search_match: s.bg(p.match_bg).add_modifier(Modifier::BOLD),
            key: s.fg(p.accent).add_modifier(Modifier::BOLD),
            key_help: s.fg(p.muted),
            timeline_done: s.fg(p.primary),
            timeline_todo: s.fg(p.muted),
            timeline_cursor: s.fg(p.warning).add_modifier(Modifier::BOLD),
            diff_removed: s.fg(p.error),
            diff_added: s.fg(p.success),
            diff_deleted: s.bg(p.deleted).add_modifier(Modifier::BOLD),
            diff_inserted: s.bg(p.inserted).add_modifier(Modifier::BOLD),
            accent: s.fg(p.accent),
            info: s.fg(p.info),
        }
    }

    /// The same styles without colours (NO_COLOR): modifiers only; selection becomes reversed.
    pub fn without_colors(&self) -> Styles {
        fn strip(s: Style) -> Style {
            Style {
                fg: None,
                bg: None,
                underline_color: None,
                ..s
            }
        }
        let mut out = *self;
        for st in [
            &mut out.base,
            &mut out.muted,
            &mut out.border,
            &mut out.border_focused,
            &mut out.title,
            &mut out.tab,
            &mut out.tab_active,
            &mut out.header,
            &mut out.selected,
            &mut out.selected_unfocused,
            &mut out.status_ok,
            &mut out.status_error,
            &mut out.severity_error,
            &mut out.severity_warning,
            &mut out.severity_info,
            &mut out.special_token,
            &mut out.pseudo_special,
            &mut out.search_match,
            &mut out.key,
            &mut out.key_help,
            &mut out.timeline_done,
            &mut out.timeline_todo,
            &mut out.timeline_cursor,
            &mut out.diff_removed,
            &mut out.diff_added,
            &mut out.diff_deleted,
            &mut out.diff_inserted,
            &mut out.accent,
            &mut out.info,
        ] {
            *st = strip(*st);
        }
        out.selected = out.selected.add_modifier(Modifier::REVERSED);
        out.selected_unfocused = out.selected_unfocused.add_modifier(Modifier::REVERSED);
        out.search_match = out.search_match.add_modifier(Modifier::REVERSED);
        out.timeline_cursor = out.timeline_cursor.add_modifier(Modifier::REVERSED);
        // Without colour, changed tokens stay visible: reversed, and struck out when deleted.
        out.diff_inserted = out.diff_inserted.add_modifier(Modifier::REVERSED);
        out.diff_deleted = out
            .diff_deleted
            .add_modifier(Modifier::REVERSED | Modifier::CROSSED_OUT);
        out
    }
}

impl Theme {
    /// The default theme (dark), with colours.
    pub fn default_theme() -> Theme {
        Theme::builtin("dark").expect("built-in dark theme parses")
    }

    /// A built-in theme by name.
    pub fn builtin(name: &str) -> anyhow::Result<Theme> {
        let (_, src) = BUILTIN.iter().find(|(n, _)| *n == name).ok_or_else(|| {
            anyhow::anyhow!(
                "unknown theme {name:?} (built-in: {})",
                BUILTIN
                    .iter()
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })?;
        Theme::from_toml(src, &format!("built-in theme {name}"), None)
    }

    /// Parses a theme file; missing slots come from `base` (else from the built-in theme named
    /// in the file, else dark). `origin` names the file in errors.
    pub fn from_toml(src: &str, origin: &str, base: Option<&Theme>) -> anyhow::Result<Theme> {
        let file: ThemeFile = toml::from_str(src).map_err(|e| anyhow::anyhow!("{origin}: {e}"))?;
        let base_theme;
        let base = match base {
            Some(b) => Some(b),
            None => {
                let name = file.name.as_deref().unwrap_or("dark");
                let builtin = BUILTIN
                    .iter()
                    .find(|(n, _)| *n == name)
                    .or_else(|| BUILTIN.first());
                match builtin {
                    Some((_, bsrc)) if *bsrc != src => {
                        base_theme =
                            Theme::from_toml(bsrc, "built-in theme", Some(&Theme::reset()))?;
                        Some(&base_theme)
                    }
                    _ => None,
                }
            }
        };
        let base_palette = base.map_or(Palette::RESET, |b| b.palette);
        let palette = Palette::from_file(&file.palette, &base_palette)
            .map_err(|e| anyhow::anyhow!("{origin}: {e}"))?;
        let syntect = match file
            .syntect
            .or_else(|| base.and_then(|b| b.syntect.clone()))
        {
            Some(s) if s == "none" => None,
            other => other,
        };
        Ok(Theme {
            name: file
                .name
                .or_else(|| base.map(|b| b.name.clone()))
                .unwrap_or_else(|| "custom".into()),
            syntect,
            styles: Styles::from_palette(&palette),
            palette,
            no_color: false,
        })
    }

    fn reset() -> Theme {
        Theme {
            name: "reset".into(),
            syntect: None,
            palette: Palette::RESET,
            styles: Styles::from_palette(&Palette::RESET),
            no_color: false,
        }
    }

    /// Resolves `--theme NAME|PATH` (None = dark), applying the user's config directory
    /// overrides and `no_color`.
    ///
    /// Errors: unknown name, unreadable or invalid file (message names the file).
    pub fn resolve(
        spec: Option<&str>,
        config_dir: Option<&Path>,
        no_color: bool,
    ) -> anyhow::Result<Theme> {
        let spec = spec.unwrap_or("dark");
        let looks_like_path = spec.contains('/') || spec.ends_with(".toml");
        let mut theme = if looks_like_path {
            let p = PathBuf::from(spec);
            let src =
                std::fs::read_to_string(&p).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?;
            Theme::from_toml(&src, &p.display().to_string(), None)?
        } else {
            let user = config_dir
                .map(|d| d.join("themes").join(format!("{spec}.toml")))
                .filter(|p| p.is_file());
            match user {
                Some(p) => {
                    let src = std::fs::read_to_string(&p)
                        .map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?;
                    let base = Theme::builtin(spec).ok();
                    Theme::from_toml(&src, &p.display().to_string(), base.as_ref())?
                }
                None => Theme::builtin(spec)?,
            }
        };
        if no_color {
            theme.styles = theme.styles.without_colors();
            theme.syntect = None;
            theme.no_color = true;
        }
        Ok(theme)
    }
}

/// True when the `NO_COLOR` environment variable is set to a non-empty value.
pub fn no_color_env() -> bool {
    std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_parse_and_differ() {
        let d = Theme::builtin("dark").unwrap();
        let l = Theme::builtin("light").unwrap();
        let h = Theme::builtin("high-contrast").unwrap();
        assert_eq!(d.palette.error, Color::Rgb(0xbf, 0x61, 0x6a));
        assert_eq!(l.syntect.as_deref(), Some("InspiredGitHub"));
        assert_eq!(h.syntect, None);
        assert_eq!(h.palette.fg, Color::White);
        // Every built-in theme names its own diff colours (not the reset fallback).
        for t in [&d, &l, &h] {
            assert_ne!(t.palette.inserted, Color::Reset, "{}", t.name);
            assert_ne!(t.palette.deleted, Color::Reset, "{}", t.name);
            assert_ne!(t.palette.inserted, t.palette.deleted, "{}", t.name);
        }
    }

    #[test]
    fn user_override_keeps_other_slots() {
        let base = Theme::builtin("dark").unwrap();
        let t =
            Theme::from_toml("[palette]\nerror = \"#010203\"\n", "user.toml", Some(&base)).unwrap();
        assert_eq!(t.palette.error, Color::Rgb(1, 2, 3));
        assert_eq!(t.palette.success, base.palette.success);
        assert_eq!(t.syntect.as_deref(), Some("base16-ocean.dark"));
    }

    #[test]
    fn bad_colour_names_file_and_slot() {
        let e = Theme::from_toml("[palette]\nerror = \"nope\"\n", "x.toml", None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("x.toml") && e.contains("palette.error"), "{e}");
    }

    #[test]
    fn no_color_strips_colours() {
        let t = Theme::resolve(Some("dark"), None, true).unwrap();
        assert_eq!(t.styles.status_error.fg, None);
        assert!(t.styles.selected.add_modifier.contains(Modifier::REVERSED));
    }
}
