//! Splitting a prompt into diffable tokens: with a vocabulary when one is given, else a
//! marker-aware splitter that keeps every control marker whole. Pure.

use serde::{Deserialize, Serialize};

use crate::tokens::markers;

/// One unit of a token-level diff.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DiffToken {
    /// The token's text (lossy UTF-8 for byte pieces).
    pub text: String,
    /// A special token / control marker (kept whole, never split or merged).
    pub special: bool,
    /// Vocabulary id, when tokenized with a vocabulary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<u32>,
}

/// Splits `text` into markers (see [`markers::scan`]), runs of word characters, single
/// newlines, runs of other whitespace, and single punctuation characters. Concatenating the
/// pieces gives `text` back. `extra_specials` (e.g. a vocab's BOS `<bos>` or special tokens
/// that are not marker-shaped) are also kept whole.
pub fn split_markers(text: &str, extra_specials: &[String]) -> Vec<DiffToken> {
    let mut out = Vec::new();
    let mut i = 0;
    let mut word_start: Option<usize> = None;
    let flush = |out: &mut Vec<DiffToken>, ws: &mut Option<usize>, end: usize| {
        if let Some(s) = ws.take() {
            out.push(DiffToken {
                text: text[s..end].to_owned(),
                special: false,
                id: None,
            });
        }
    };
    while i < text.len() {
        let rest = &text[i..];
        if let Some(sp) = extra_specials
            .iter()
            .filter(|s| !s.is_empty())
            .find(|s| rest.starts_with(s.as_str()))
        {
            flush(&mut out, &mut word_start, i);
            out.push(DiffToken {
                text: sp.clone(),
                special: true,
                id: None,
            });
            i += sp.len();
            continue;
        }
        let c = rest.chars().next().unwrap_or(' ');
        if (c == '<' || c == '[')
            && let Some((len, _)) = markers::marker_at(rest)
        {
            flush(&mut out, &mut word_start, i);
            out.push(DiffToken {
                text: rest[..len].to_owned(),
                special: true,
                id: None,
            });
            i += len;
            continue;
        }
        if c.is_alphanumeric() || c == '_' {
            if word_start.is_none() {
                word_start = Some(i);
            }
            i += c.len_utf8();
            continue;
        }
        flush(&mut out, &mut word_start, i);
        if c == '\n' {
            out.push(DiffToken {
                text: "\n".into(),
                special: false,
                id: None,
            });
            i += 1;
        } else if c.is_whitespace() {
            let n: usize = rest
                .chars()
                .take_while(|&c| c.is_whitespace() && c != '\n')
                .map(char::len_utf8)
                .sum();
            out.push(DiffToken {
                text: rest[..n].to_owned(),
                special: false,
                id: None,
            });
            i += n;
        } else {
            out.push(DiffToken {
                text: c.to_string(),
                special: false,
                id: None,
            });
            i += c.len_utf8();
        }
    }
    flush(&mut out, &mut word_start, text.len());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_whole_markers() {
        let s = "<|im_start|>user\nWhat's  the <tool_call>{\"a\": 1}</tool_call>é<|im_end|>\n";
        let t = split_markers(s, &[]);
        assert_eq!(t.iter().map(|t| t.text.as_str()).collect::<String>(), s);
        let specials: Vec<&str> = t
            .iter()
            .filter(|t| t.special)
            .map(|t| t.text.as_str())
            .collect();
        assert_eq!(
            specials,
            ["<|im_start|>", "<tool_call>", "</tool_call>", "<|im_end|>"]
        );
        assert!(t.iter().any(|t| t.text == "  "));
        assert!(t.iter().any(|t| t.text == "What"));
    }

    #[test]
    fn extra_specials() {
        let t = split_markers("BOSxhello", &["BOSx".into()]);
        assert_eq!(
            t[0],
            DiffToken {
                text: "BOSx".into(),
                special: true,
                id: None
            }
        );
        assert_eq!(t[1].text, "hello");
    }
}
