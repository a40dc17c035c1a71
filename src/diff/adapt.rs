//! The stages `diff` builds on, in one place: tool-call syntax detection
//! ([`crate::parser::Syntax::detect_from_template`]) and tokenization ([`crate::tokens`]).
//! Rendering is the template source's own ([`crate::template::TemplateSource::render`]). Pure.

use crate::parser::Syntax;
use crate::session::TokenPiece;
use crate::tokens::{self, Vocab};

pub use crate::template::input::RenderInput;

use super::split::DiffToken;

/// The tool-call syntax a template implies for the parser: the name of the family the
/// parser's own detection picks ([`Syntax::detect_from_template`], named by [`Syntax::name`]:
/// `hermes`, `qwen3-coder`, `gemma4`, `glm4.5`, `lfm2`, `deepseek-v3.2`, … every family the
/// parser reads); else `functionary-v3.1` for a template that writes `<function=` calls
/// without the `<|start_header_id|>` header the parser's Functionary v3.1 detection also asks
/// for (llama.cpp's autoparser reads `<function=NAME>…</function>` calls as Functionary 3.1's,
/// common/chat-diff-analyzer.cpp, build 11434); `None` when the template writes no known
/// tool-call markers.
pub fn implied_syntax(template: &str) -> Option<String> {
    if let Some(s) = Syntax::detect_from_template(template) {
        return Some(s.name().to_owned());
    }
    template
        .contains("<function=")
        .then(|| "functionary-v3.1".to_owned())
}

/// Tokens of `prompt` under `vocab` (llama.cpp splitting with `parse_special`, no BOS added).
pub fn tokenize(vocab: &Vocab, prompt: &str) -> Vec<DiffToken> {
    diff_tokens(tokens::tokenize(vocab, prompt))
}

/// Tokens of `prompt` from a llama-server `/tokenize` answer (pieces aligned with the prompt;
/// a piece that is one whole marker counts as special, since the server does not say).
pub fn tokens_from_pieces(prompt: &str, pieces: &[TokenPiece]) -> Vec<DiffToken> {
    diff_tokens(tokens::tokens_from_pieces(prompt, pieces))
}

fn diff_tokens(toks: Vec<tokens::Token>) -> Vec<DiffToken> {
    toks.into_iter()
        .map(|t| DiffToken {
            text: t.piece,
            special: t.special,
            id: Some(t.id),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syntax_names() {
        assert_eq!(
            implied_syntax("{{ '<tool_call>\\n{\"name\": ' }}").as_deref(),
            Some("hermes")
        );
        assert_eq!(
            implied_syntax("<tool_call>\n<function=x>\n<parameter=a>").as_deref(),
            Some("qwen3-coder")
        );
        assert_eq!(
            implied_syntax("{{ '<|tool_call>call:' }}").as_deref(),
            Some("gemma4")
        );
        assert_eq!(
            implied_syntax("<|tool_call_start|>[").as_deref(),
            Some("lfm2")
        );
        assert_eq!(implied_syntax("plain chat"), None);
        assert_eq!(
            implied_syntax("{{ '<function=' + name + '>' }}").as_deref(),
            Some("functionary-v3.1")
        );
    }

    /// The markers this function once named itself (before the parser read those families)
    /// are now named by the parser's detection, under its names.
    #[test]
    fn former_descriptive_names_are_parser_families() {
        for (marker, name) in [
            ("<start_function_call>", "functiongemma"),
            ("<seed:tool_call>", "seed-oss"),
            ("<minimax:tool_call>", "anthropic-xml"),
            ("<｜DSML｜", "deepseek-v3.2"),
            ("<arg_key>", "glm4.5"),
            ("<|tool_call_start|>", "lfm2"),
            ("<TOOLCALL>", "nemotron-v2"),
            ("<|START_ACTION|>", "command-r7b"),
        ] {
            assert_eq!(
                Syntax::detect_from_template(marker).map(Syntax::name),
                Some(name),
                "{marker}"
            );
        }
    }
}
