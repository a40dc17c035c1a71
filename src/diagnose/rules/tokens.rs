//! Token rules over the server's tokenization of the rendered prompt.

use crate::diagnose::ExchangeContext;
use crate::finding::Finding;
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
/// `cx.server_tokens` (llama-server `/tokenize` pieces). The BOS is `cx.bos_id` /
/// `cx.bos_token` when known (the missing half is read off the first token), else a first token
/// whose piece is a well-known BOS text. The check itself is [`crate::tokens::bos_duplicate`].
/// Evidence: token index of the second BOS.
pub fn bos_duplicate(cx: &ExchangeContext) -> Vec<Finding> {
    let Some(pieces) = cx.server_tokens.as_deref() else {
        return Vec::new();
    };
    duplicate_bos_in(
        pieces,
        cx.server_prompt.as_deref(),
        cx.bos_id,
        cx.bos_token.as_deref(),
    )
}

/// [`bos_duplicate`] on bare `/tokenize` pieces (and the prompt they tokenize, when known).
pub fn duplicate_bos_in(
    pieces: &[TokenPiece],
    prompt: Option<&str>,
    bos_id: Option<u32>,
    bos_token: Option<&str>,
) -> Vec<Finding> {
    let toks = crate::tokens::tokens_from_pieces(prompt.unwrap_or(""), pieces);
    let Some(first) = toks.first() else {
        return Vec::new();
    };
    let (id, text) = match (bos_id, bos_token) {
        (Some(i), Some(t)) => (i, t.to_owned()),
        (Some(i), None) if first.id == i => (i, first.piece.clone()),
        (None, Some(t)) if first.piece == t => (first.id, t.to_owned()),
        (None, None) if KNOWN_BOS.contains(&first.piece.as_str()) => {
            (first.id, first.piece.clone())
        }
        _ => return Vec::new(),
    };
    crate::tokens::bos_duplicate(&toks, Some(id), Some(&text))
        .into_iter()
        .collect()
}

/// `token.pseudo_special` over the server's own render and tokenization (`cx.server_prompt`,
/// `cx.server_tokens`): marker text that is not one token ([`crate::tokens::pseudo_special`]).
pub fn pseudo_special(cx: &ExchangeContext) -> Vec<Finding> {
    let (Some(prompt), Some(pieces)) = (cx.server_prompt.as_deref(), cx.server_tokens.as_deref())
    else {
        return Vec::new();
    };
    crate::tokens::pseudo_special(prompt, &crate::tokens::tokens_from_pieces(prompt, pieces))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::Rule;
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
        let f = duplicate_bos_in(&toks, None, Some(1), None);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].rule, Rule::BosDuplicate);
        assert!(f[0].message.contains("positions 0, 1"), "{}", f[0].message);
        assert_eq!(f[0].evidence.token, Some(1));
        assert_eq!(duplicate_bos_in(&toks, None, None, None).len(), 1);
    }

    #[test]
    fn single_bos_is_fine() {
        let toks = [t(1, "<s>"), t(1, "<|im_start|>"), t(4093, "user")];
        assert!(duplicate_bos_in(&toks[..1], None, None, None).is_empty());
        assert!(duplicate_bos_in(&[t(1, "<s>"), t(4093, "user")], None, None, None).is_empty());
        assert!(duplicate_bos_in(&[t(5, "hi"), t(5, "hi")], None, None, None).is_empty());
    }

    #[test]
    fn pseudo_special_from_server_render() {
        // SmolLM2 splits the Qwen3 template's <tool_call> into 5 pieces (real-server.md)
        let mut cx = ExchangeContext::new(crate::session::Api::Openai);
        cx.server_prompt = Some("<|im_start|>x<tool_call>".into());
        cx.server_tokens = Some(vec![
            t(1, "<|im_start|>"),
            t(87, "x"),
            t(28, "<"),
            t(2598, "tool"),
            t(79, "_"),
            t(6462, "call"),
            t(30, ">"),
        ]);
        let f = pseudo_special(&cx);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].rule, crate::finding::Rule::TokenPseudoSpecial);
        cx.server_tokens = Some(vec![t(1, "<|im_start|>"), t(87, "x"), t(5, "<tool_call>")]);
        assert!(pseudo_special(&cx).is_empty());
    }
}
