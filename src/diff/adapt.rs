//! The stages `diff` builds on, in one place: template rendering ([`crate::template::render()`]),
//! tool-call syntax detection
//! ([`crate::parser::Syntax::detect_from_template`]) and tokenization ([`crate::tokens`]). Pure.

use crate::parser::Syntax;
use crate::session::TokenPiece;
use crate::template::render as render_template;
use crate::template::render::RenderOptions;
use crate::template::source::TemplateSource;
use crate::tokens::{self, Vocab};

pub use crate::template::input::RenderInput;

use super::split::DiffToken;

/// Renders `source` for `input` under a render profile — the one function every caller (the
/// inspector's Template pane, `render`, `check`, `flatten`, `diff`) renders a request from a
/// template source with:
///
/// * profile: `opts.engine`, else the source's engine (a llama-server `/props` source: the
///   llama.cpp profile at its `build_info`), else transformers
///   ([`crate::template::Profile`]);
/// * template: the source's named `tool_use` template when the request has tools (both
///   transformers and llama.cpp pick it so), else the default;
/// * `bos_token`/`eos_token` default to the source's when the request does not set them; for
///   the llama.cpp profile the source's vocabulary flags (adds BOS/EOS) apply unless
///   `opts.vocab` was set.
///
/// `opts.name` defaults to the source's origin.
///
/// Errors: the render error as one line, `NAME:LINE:COLUMN: message`.
pub fn render(
    source: &TemplateSource,
    input: &RenderInput,
    opts: &RenderOptions,
) -> Result<String, String> {
    let input = input
        .clone()
        .with_default_tokens(source.bos_token.as_deref(), source.eos_token.as_deref());
    let opts = profile_options(source, opts);
    render_template(source.select(&input), &input, &opts).map_err(|e| e.to_string())
}

/// `opts` completed from `source` as [`render`] does: the name, the profile
/// (`opts.engine` → the source's engine → transformers) and the vocabulary flags.
pub fn profile_options(source: &TemplateSource, opts: &RenderOptions) -> RenderOptions {
    let mut opts = opts.clone();
    if opts.name.is_none() {
        opts.name = Some(source.origin.clone());
    }
    if opts.profile.is_none() {
        opts.profile = Some(source.profile.unwrap_or_default());
    }
    if opts.vocab == Default::default() {
        opts.vocab = source.vocab_flags.unwrap_or_else(|| {
            crate::template::llama::VocabFlags::guess_from_bos(source.bos_token.as_deref())
        });
    }
    opts
}

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

/// The prompt `source` renders for a chat request `body` (OpenAI, or Anthropic when
/// `anthropic`) under a render profile: `engine`, else the source's ([`profile_options`]);
/// `now` is `strftime_now`'s time. The input is returned with it. `render --request`,
/// `check`'s local render and `try`'s template fix render through this.
///
/// Errors: the source has no chat template; the template fails to render.
pub fn render_request(
    source: &TemplateSource,
    body: &serde_json::Value,
    anthropic: bool,
    now: Option<time::OffsetDateTime>,
    strict: bool,
    engine: Option<crate::template::Profile>,
) -> anyhow::Result<(String, crate::template::RenderInput)> {
    use crate::template::RenderInput;
    let input = if anthropic {
        RenderInput::from_anthropic_request(body)
    } else {
        RenderInput::from_openai_request(body)
    };
    let input = input.with_default_tokens(source.bos_token.as_deref(), source.eos_token.as_deref());
    let template = source.select(&input);
    if template.is_empty() {
        anyhow::bail!("{}: the source has no chat template", source.origin);
    }
    let opts = crate::diff::adapt::profile_options(
        source,
        &RenderOptions {
            now,
            strict,
            name: Some(source.origin.clone()),
            profile: engine,
            ..Default::default()
        },
    );
    let prompt = crate::template::render(template, &input, &opts)?;
    Ok((prompt, input))
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
