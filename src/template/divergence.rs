//! `template.engine_divergence`: where a local render differs from the engine's own render
//! (llama-server `POST /apply-template`, recorded as `Annotation::ServerRender`).

use crate::finding::{Evidence, Finding, Pane, Rule};

/// The first byte offset where `local` and `engine` differ (`None` when identical). When one is
/// a prefix of the other, the offset is the shorter length. Offsets are moved back to a UTF-8
/// character boundary of both texts.
pub fn first_difference(local: &str, engine: &str) -> Option<usize> {
    if local == engine {
        return None;
    }
    let a = local.as_bytes();
    let b = engine.as_bytes();
    let mut i = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    while i > 0 && !(local.is_char_boundary(i) && engine.is_char_boundary(i)) {
        i -= 1;
    }
    Some(i)
}

/// Up to `n` characters either side of `offset` in `s`, with control characters escaped
/// (`\n` shown as `\n`), for a one-line excerpt.
pub fn excerpt(s: &str, offset: usize, n: usize) -> String {
    let offset = s.floor_char_boundary(offset.min(s.len()));
    let before: String = s[..offset].chars().rev().take(n).collect::<Vec<_>>().into_iter().rev().collect();
    let after: String = s[offset..].chars().take(n).collect();
    format!("{}⟨{}", before.escape_debug(), after.escape_debug())
}

/// Compares a local render with the engine's: `None` when byte-identical, else a
/// `template.engine_divergence` finding whose evidence offset is the first differing byte and
/// whose message shows ~30 characters of both sides there (`⟨` marks the offset).
pub fn engine_divergence(local: &str, engine: &str, engine_name: &str) -> Option<Finding> {
    let at = first_difference(local, engine)?;
    let (line, col) = {
        let before = &local[..at];
        (before.matches('\n').count() + 1, before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1)
    };
    let msg = format!(
        "local render and {engine_name} differ from byte {at} (line {line}, column {col}; local {} bytes, {engine_name} {} bytes): local \"{}\" vs {engine_name} \"{}\"",
        local.len(),
        engine.len(),
        excerpt(local, at, 30),
        excerpt(engine, at, 30)
    );
    Some(
        Finding::new(
            Rule::TemplateEngineDivergence,
            msg,
            "the engine renders this template differently from transformers/Jinja2: check the template's Python-only constructs, or trust the engine's prompt when debugging this server",
        )
        .with_evidence(Evidence { pane: Some(Pane::Template), offset: Some(at), excerpt: Some(excerpt(engine, at, 30)), ..Default::default() }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets() {
        assert_eq!(first_difference("abc", "abc"), None);
        assert_eq!(first_difference("abc", "abd"), Some(2));
        assert_eq!(first_difference("ab", "abc"), Some(2));
        // "é" is 2 bytes: c3 a9 vs "è" c3 a8 — first byte equal, report the character start.
        assert_eq!(first_difference("xé", "xè"), Some(1));
        let f = engine_divergence("<|im_start|>user\nhi", "<|im_start|>user\nho", "llama-server").unwrap();
        assert_eq!(f.evidence.offset, Some(18));
        assert!(f.message.contains("line 2, column 2"), "{}", f.message);
    }
}
