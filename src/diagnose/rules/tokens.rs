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
///
/// With `cx.vocab_render` (`check --vocab`) the check runs on that tokenization instead, with
/// the vocabulary's BOS (a BOS the engine adds is its zero-width first token).
pub fn bos_duplicate(cx: &ExchangeContext) -> Vec<Finding> {
    if let Some(v) = &cx.vocab_render {
        return crate::tokens::bos_duplicate(&v.tokens, v.bos_id, v.bos_text.as_deref())
            .into_iter()
            .collect();
    }
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
    // Only the leading run of BOS tokens is judged, and every token of that run has the first
    // one's id: the pieces up to the first other id are enough.
    let run = pieces
        .iter()
        .take_while(|p| pieces.first().is_some_and(|f| p.id == f.id))
        .count();
    let toks = crate::tokens::tokens_from_pieces(
        prompt.unwrap_or(""),
        &pieces[..pieces.len().min(run + 1)],
    );
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

/// The tokenized prompt the token rules judge: toolscope's render split by `--vocab`
/// (`cx.vocab_render`) when set, else the server's own render and `/tokenize` pieces
/// (`cx.server_prompt`, `cx.server_tokens`).
fn tokenized(cx: &ExchangeContext) -> Option<(&str, std::borrow::Cow<'_, [crate::tokens::Token]>)> {
    if let Some(v) = &cx.vocab_render {
        return Some((
            v.prompt.as_str(),
            std::borrow::Cow::Borrowed(v.tokens.as_slice()),
        ));
    }
    let (prompt, pieces) = (cx.server_prompt.as_deref()?, cx.server_tokens.as_deref()?);
    Some((
        prompt,
        std::borrow::Cow::Owned(crate::tokens::tokens_from_pieces(prompt, pieces)),
    ))
}

/// The marker rules of one exchange, over one tokenization of its prompt: every
/// [`special_split`] finding, then the [`pseudo_special`] ones at other offsets (a marker the
/// parser needs is reported once, as `token.special_split`, an error, not again as merely
/// looking special, a warning).
pub fn markers(cx: &ExchangeContext) -> Vec<Finding> {
    let Some((prompt, tokens)) = tokenized(cx) else {
        return Vec::new();
    };
    let mut out = split_in(cx, prompt, &tokens);
    let split_at: Vec<Option<usize>> = out.iter().map(|f| f.evidence.offset).collect();
    out.extend(
        template_markers(cx, prompt, crate::tokens::pseudo_special(prompt, &tokens))
            .filter(|f| !split_at.contains(&f.evidence.offset)),
    );
    out
}

/// The marker findings that judge the template's own markers: a marker standing inside text
/// the agent sent (a message's content, a tool description: Claude Code's
/// `<system-reminder>`, `<pasted_content>`, `<name>`, `<functions>`) is the agent's text, not
/// the template's vocabulary, and is left out. When a marker text occurs both in the agent's
/// text and elsewhere in the prompt, the first occurrence outside the agent's text is judged.
fn template_markers<'a>(
    cx: &'a ExchangeContext,
    prompt: &'a str,
    found: Vec<Finding>,
) -> impl Iterator<Item = Finding> + 'a {
    let spans = cx
        .request
        .as_ref()
        .map(|r| super::input::request_text_spans(r, cx.api, prompt))
        .unwrap_or_default();
    let inside = move |at: usize, len: usize| super::input::inside_spans(&spans, at, len);
    found.into_iter().filter_map(move |mut f| {
        let (Some(at), Some(text)) = (f.evidence.offset, f.evidence.excerpt.clone()) else {
            return Some(f);
        };
        if !inside(at, text.len()) {
            return Some(f);
        }
        // another occurrence outside the agent's text?
        let other = prompt
            .match_indices(text.as_str())
            .map(|(i, _)| i)
            .find(|&i| !inside(i, text.len()))?;
        f.evidence.offset = Some(other);
        f.evidence.token = None;
        Some(f)
    })
}

/// `token.pseudo_special` over the tokenized prompt (`--vocab` render, else the server's):
/// marker text that is not one token ([`crate::tokens::pseudo_special`]).
pub fn pseudo_special(cx: &ExchangeContext) -> Vec<Finding> {
    let Some((prompt, tokens)) = tokenized(cx) else {
        return Vec::new();
    };
    template_markers(cx, prompt, crate::tokens::pseudo_special(prompt, &tokens)).collect()
}

/// `token.special_split`: a marker the parser of this exchange's tool-call syntax keys on
/// (`<tool_call>`, `<|tool_call>`, `[TOOL_CALLS]`, `<think>`, …) stands in the server's render
/// but is several ordinary pieces in this vocabulary, so the model writes it as sub-tokens and a
/// token-level trigger (a grammar's trigger token, a streaming parser keyed on the special
/// token) never sees it (vllm#58315, mlx-lm#1335). The syntax comes from the chat template's
/// markers (the template that rendered the `--vocab` prompt, when that is judged), else from the
/// generated text. Only markers that look like control markers
/// ([`crate::tokens::find_markers`]) count; evidence: first token of the first occurrence.
/// The prompt is the `--vocab` render when there is one, else the server's.
pub fn special_split(cx: &ExchangeContext) -> Vec<Finding> {
    let Some((prompt, tokens)) = tokenized(cx) else {
        return Vec::new();
    };
    split_in(cx, prompt, &tokens)
}

/// [`special_split`] over an already tokenized prompt.
fn split_in(cx: &ExchangeContext, prompt: &str, tokens: &[crate::tokens::Token]) -> Vec<Finding> {
    let generated = cx
        .raw_text
        .as_deref()
        .or(cx.message.as_ref().map(|m| m.content.as_str()));
    let template = match &cx.vocab_render {
        Some(v) => v.template.as_deref(),
        None => cx.template.as_deref(),
    };
    let Some(syntax) = template
        .and_then(crate::parser::Syntax::detect_from_template)
        .or_else(|| generated.and_then(crate::parser::Syntax::detect_from_text))
    else {
        return Vec::new();
    };
    split_markers(prompt, tokens, syntax)
}

/// [`special_split`] on a tokenized prompt for a known syntax.
pub fn split_markers(
    prompt: &str,
    tokens: &[crate::tokens::Token],
    syntax: crate::parser::Syntax,
) -> Vec<Finding> {
    use crate::finding::{Evidence, Pane, Rule};
    let mut out = Vec::new();
    for marker in syntax.markers() {
        if crate::tokens::find_markers(marker) != [(0, marker.len())] {
            continue;
        }
        let Some(start) = prompt.find(marker) else {
            continue;
        };
        let end = start + marker.len();
        let covering: Vec<(usize, &crate::tokens::Token)> = tokens
            .iter()
            .enumerate()
            .filter(|(_, t)| t.end > start && t.start < end && t.end > t.start)
            .collect();
        if covering.len() < 2 {
            continue;
        }
        let list = covering
            .iter()
            .map(|(_, t)| format!("`{}`", t.piece.escape_debug()))
            .collect::<Vec<_>>()
            .join(",");
        out.push(
            Finding::new(
                Rule::TokenSpecialSplit,
                format!(
                    "the {} parser needs `{marker}`, but this vocabulary has no such token: it is {} pieces ({list}), so the model writes it piece by piece and token-level triggers never fire",
                    syntax.name(),
                    covering.len()
                ),
                "use the model's own chat template (whose markers are special tokens in its vocabulary), or a parser that matches the marker as text",
            )
            .with_evidence(Evidence {
                pane: Some(Pane::Template),
                offset: Some(start),
                token: Some(covering[0].0),
                excerpt: Some(marker.to_owned()),
                ..Default::default()
            }),
        );
    }
    out
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
    fn a_longer_bos_run_is_reported_whole() {
        // the judged prefix ends at the first other id: a third BOS is still counted, and the
        // offset of the second is the prompt's
        let toks = [
            t(1, "<s>"),
            t(1, "<s>"),
            t(1, "<s>"),
            t(7, "hi"),
            t(1, "<s>"),
        ];
        let f = duplicate_bos_in(&toks, Some("<s><s><s>hi<s>"), Some(1), Some("<s>"));
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].message.contains("3 BOS tokens"), "{}", f[0].message);
        assert!(
            f[0].message.contains("positions 0, 1, 2"),
            "{}",
            f[0].message
        );
        assert_eq!(
            (f[0].evidence.token, f[0].evidence.offset),
            (Some(1), Some(3))
        );
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
        let cx = ExchangeContext {
            server_prompt: Some("<|im_start|>x<tool_call>".into()),
            ..ExchangeContext::new(crate::session::Api::Openai)
        };
        let cx = ExchangeContext {
            server_tokens: Some(vec![
                t(1, "<|im_start|>"),
                t(87, "x"),
                t(28, "<"),
                t(2598, "tool"),
                t(79, "_"),
                t(6462, "call"),
                t(30, ">"),
            ]),
            ..cx
        };
        let f = pseudo_special(&cx);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].rule, crate::finding::Rule::TokenPseudoSpecial);
        let cx = ExchangeContext {
            server_tokens: Some(vec![t(1, "<|im_start|>"), t(87, "x"), t(5, "<tool_call>")]),
            ..cx
        };
        assert!(pseudo_special(&cx).is_empty());
    }

    #[test]
    fn special_split_names_the_parsers_marker_once() {
        // SmolLM2 pieces of the Qwen3 template's markers (real-server.md: `<tool_call>` is 5
        // pieces, `<think>` 3; `<|im_start|>` is one special token).
        let prompt = "<|im_start|>system\n<tool_call>\n</tool_call><think>";
        let toks = vec![
            t(1, "<|im_start|>"),
            t(9690, "system"),
            t(198, "\n"),
            t(28, "<"),
            t(2598, "tool"),
            t(79, "_"),
            t(6462, "call"),
            t(30, ">"),
            t(198, "\n"),
            t(1790, "</"),
            t(2598, "tool"),
            t(79, "_"),
            t(6462, "call"),
            t(30, ">"),
            t(28, "<"),
            t(28489, "think"),
            t(30, ">"),
        ];
        let cx = ExchangeContext {
            server_prompt: Some(prompt.into()),
            server_tokens: Some(toks),
            ..ExchangeContext::new(crate::session::Api::Openai)
        };
        // No syntax known (no template, no generated text): nothing to say.
        assert!(special_split(&cx).is_empty());
        let cx = ExchangeContext {
            template: Some("{{ '<tool_call>' }}".into()),
            ..cx
        };
        let f = special_split(&cx);
        let got: Vec<(&str, Option<usize>)> = f
            .iter()
            .map(|f| (f.evidence.excerpt.as_deref().unwrap(), f.evidence.token))
            .collect();
        assert_eq!(
            got,
            vec![
                ("<think>", Some(14)),
                ("<tool_call>", Some(3)),
                ("</tool_call>", Some(9))
            ]
        );
        assert!(f.iter().all(|f| f.rule == Rule::TokenSpecialSplit));
        assert!(
            f[1].message.contains("hermes parser needs `<tool_call>`")
                && f[1].message.contains("5 pieces"),
            "{}",
            f[1].message
        );
        // check_exchange reports those markers once, as special_split, not again as pseudo_special.
        let all = crate::diagnose::check_exchange(&cx);
        assert_eq!(
            all.iter()
                .filter(|f| f.rule == Rule::TokenSpecialSplit)
                .count(),
            3
        );
        assert_eq!(
            all.iter()
                .filter(|f| f.rule == Rule::TokenPseudoSpecial)
                .count(),
            0,
            "{all:?}"
        );
        // With the markers as single special tokens there is nothing to report.
        let cx = ExchangeContext {
            server_prompt: Some("<tool_call></tool_call>".into()),
            server_tokens: Some(vec![t(5, "<tool_call>"), t(6, "</tool_call>")]),
            ..cx
        };
        assert!(special_split(&cx).is_empty());
    }
}
