//! JSON syntax highlighting with syntect, into ratatui lines. The syntax and theme sets load
//! once (first use, ~tens of ms) and are shared.

use std::sync::OnceLock;

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use syntect::easy::HighlightLines;
use syntect::highlighting::{FontStyle, ThemeSet};
use syntect::parsing::SyntaxSet;

fn syntaxes() -> &'static SyntaxSet {
    static S: OnceLock<SyntaxSet> = OnceLock::new();
    S.get_or_init(SyntaxSet::load_defaults_newlines)
}

fn themes() -> &'static ThemeSet {
    static T: OnceLock<ThemeSet> = OnceLock::new();
    T.get_or_init(ThemeSet::load_defaults)
}

/// Lines longer than this many bytes are not highlighted (kept plain) to bound the cost.
const MAX_LINE: usize = 4096;

/// Highlights `text` as JSON with syntect theme `theme` (a default theme name or a `.tmTheme`
/// path). `None` or an unknown theme gives plain lines in `base`.
pub fn json_lines(text: &str, theme: Option<&str>, base: Style) -> Vec<Line<'static>> {
    let loaded;
    let th = match theme {
        None => None,
        Some(name) => match themes().themes.get(name) {
            Some(t) => Some(t),
            None if name.ends_with(".tmTheme") => match ThemeSet::get_theme(name) {
                Ok(t) => {
                    loaded = t;
                    Some(&loaded)
                }
                Err(_) => None,
            },
            None => None,
        },
    };
    let Some(th) = th else {
        return text
            .lines()
            .map(|l| Line::from(Span::styled(l.to_owned(), base)))
            .collect();
    };
    let ss = syntaxes();
    let syntax = ss
        .find_syntax_by_extension("json")
        .unwrap_or_else(|| ss.find_syntax_plain_text());
    let mut h = HighlightLines::new(syntax, th);
    let mut out = Vec::new();
    for line in syntect::util::LinesWithEndings::from(text) {
        if line.len() > MAX_LINE {
            out.push(Line::from(Span::styled(
                line.trim_end_matches(['\n', '\r']).to_owned(),
                base,
            )));
            continue;
        }
        match h.highlight_line(line, ss) {
            Ok(ranges) => {
                let spans: Vec<Span<'static>> = ranges
                    .into_iter()
                    .filter_map(|(st, s)| {
                        let s = s.trim_end_matches(['\n', '\r']);
                        if s.is_empty() {
                            return None;
                        }
                        let mut style = base.fg(Color::Rgb(
                            st.foreground.r,
                            st.foreground.g,
                            st.foreground.b,
                        ));
                        if st.font_style.contains(FontStyle::BOLD) {
                            style = style.add_modifier(Modifier::BOLD);
                        }
                        if st.font_style.contains(FontStyle::ITALIC) {
                            style = style.add_modifier(Modifier::ITALIC);
                        }
                        Some(Span::styled(s.to_owned(), style))
                    })
                    .collect();
                out.push(Line::from(spans));
            }
            Err(_) => out.push(Line::from(Span::styled(
                line.trim_end_matches(['\n', '\r']).to_owned(),
                base,
            ))),
        }
    }
    out
}
