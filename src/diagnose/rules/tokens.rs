//! Token rules over the server's tokenization of the rendered prompt.

use crate::diagnose::ExchangeContext;
use crate::finding::{Evidence, Finding, Pane, Rule};
use crate::session::TokenPiece;

/// BOS texts of common vocabularies, used when the context does not name the BOS token:
/// Llama 2 / Mistral `<s>`, Gemma `<bos>`, Llama 3 `<|begin_of_text|>`, GPT-NeoX/Phi
/// `<|startoftext|>`, DeepSeek `<｜begin▁of▁sentence｜>`, `[gMASK]<sop>` is not a BOS.
const KNOWN_BOS: &[&str] = &[
    "<s>",
    "<bos>",
    "<|begin_of_text|>",
    "<|startoftext|>",
    "<｜begin▁of▁sentence｜>",
    "<|endoftext|><|startoftext|>",
];

/// `bos.duplicate`: the prompt's tokenization starts with the BOS token twice (the template
/// printed `bos_token` and the server added BOS again; llama.cpp PR #7332). Looks at
/// `cx.server_tokens`; the BOS is `cx.bos_id` / `cx.bos_token` when known, else a token whose
/// piece is a well-known BOS text. Evidence: token index of the second BOS.
pub fn bos_duplicate(cx: &ExchangeContext) -> Vec<Finding> {
    let Some(tokens) = cx.server_tokens.as_deref() else {
        return Vec::new();
    };
    duplicate_bos_in(tokens, cx.bos_id, cx.bos_token.as_deref())
}

/// [`bos_duplicate`] on a bare token list.
pub fn duplicate_bos_in(
    tokens: &[TokenPiece],
    bos_id: Option<u32>,
    bos_token: Option<&str>,
) -> Vec<Finding> {
    let is_bos = |t: &TokenPiece| {
        let piece = String::from_utf8_lossy(t.piece.as_bytes());
        match (bos_id, bos_token) {
            (Some(id), _) => t.id == id,
            (None, Some(b)) => piece == b,
            (None, None) => KNOWN_BOS.contains(&piece.as_ref()),
        }
    };
    let Some(first) = tokens.first().filter(|t| is_bos(t)) else {
        return Vec::new();
    };
    let run = tokens
        .iter()
        .take_while(|t| t.id == first.id && t.piece == first.piece)
        .count();
    if run < 2 {
        return Vec::new();
    }
    let piece = String::from_utf8_lossy(first.piece.as_bytes()).into_owned();
    let positions = if run == 2 {
        "0 and 1".to_owned()
    } else {
        format!("0 to {}", run - 1)
    };
    vec![Finding::new(
        Rule::BosDuplicate,
        format!("the prompt starts with {run} BOS tokens {piece:?} (id {}) at positions {positions}", first.id),
        "the template prints bos_token and the server adds BOS too: drop bos_token from the template or start the server with --no-add-bos / add_bos_token=false",
    )
    .with_evidence(Evidence { pane: Some(Pane::Template), token: Some(1), excerpt: Some(piece.repeat(run)), ..Default::default() })]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::Piece;

    fn t(id: u32, p: &str) -> TokenPiece {
        TokenPiece {
            id,
            piece: Piece::Text(p.into()),
        }
    }

    #[test]
    fn doubled_bos_reported_at_positions_0_and_1() {
        let toks = [
            t(1, "<s>"),
            t(1, "<s>"),
            t(1, "<|im_start|>"),
            t(4093, "user"),
        ];
        // case 09 gives <|im_start|> id 1 as well: the run still ends at the different piece.
        let f = duplicate_bos_in(&toks, Some(1), Some("<s>"));
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].rule, Rule::BosDuplicate);
        assert!(
            f[0].message.contains("positions 0 and 1"),
            "{}",
            f[0].message
        );
        assert_eq!(f[0].evidence.token, Some(1));
        assert_eq!(duplicate_bos_in(&toks, None, None).len(), 1);
    }

    #[test]
    fn single_bos_is_fine() {
        let toks = [t(1, "<s>"), t(1, "<|im_start|>"), t(4093, "user")];
        assert!(duplicate_bos_in(&toks[..1], None, None).is_empty());
        assert!(duplicate_bos_in(&[t(1, "<s>"), t(4093, "user")], None, None).is_empty());
        assert!(duplicate_bos_in(&[t(5, "hi"), t(5, "hi")], None, None).is_empty());
    }
}
