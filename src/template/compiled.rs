//! A Jinja template compiled under a render profile ([`Profile`]): the profile dispatch over the
//! core renderer ([`super::render`], transformers' Jinja2) and the llama.cpp profile
//! ([`super::llama`]). Pure.

use super::input::RenderInput;
use super::llama::{self, LlamaTemplate};
use super::profile::Profile;
use super::render::{JinjaTemplate, RenderError, RenderErrorKind, RenderOptions};

/// A compiled template ready to render many inputs with the same options, under the profile
/// `opts.profile` named when it was compiled.
#[derive(Debug)]
pub struct CompiledTemplate {
    profile: Profile,
    compiled: Compiled,
}

#[derive(Debug)]
enum Compiled {
    /// transformers: the core renderer as it is.
    Transformers(JinjaTemplate),
    /// llama.cpp: its source patches, operators, Jinja engine and request handling.
    LlamaCpp(LlamaTemplate),
}

impl CompiledTemplate {
    /// Compiles `source` under `opts.profile` (default transformers): the core environment
    /// ([`JinjaTemplate::compile`]), or the llama.cpp profile's ([`llama::compile`]).
    /// Errors: [`RenderErrorKind::Syntax`] with line and column; the Ollama profile, which
    /// renders Go templates only, compiles no Jinja template.
    pub fn compile(source: &str, opts: &RenderOptions) -> Result<CompiledTemplate, RenderError> {
        let profile = opts.profile.unwrap_or_default();
        let compiled = match profile {
            Profile::Transformers => Compiled::Transformers(JinjaTemplate::compile(source, opts)?),
            Profile::LlamaCpp { build } => Compiled::LlamaCpp(llama::compile(source, opts, build)?),
            Profile::Ollama { .. } => {
                return Err(RenderError {
                    kind: RenderErrorKind::Syntax,
                    message: format!(
                        "the {profile} profile renders Ollama Go templates, not Jinja templates"
                    ),
                    name: opts
                        .name
                        .clone()
                        .unwrap_or_else(|| super::render::DEFAULT_NAME.to_owned()),
                    line: None,
                    column: None,
                });
            }
        };
        Ok(CompiledTemplate { profile, compiled })
    }

    /// Renders `input` under the template's profile: transformers' context
    /// ([`RenderInput::context`]), or llama-server's request handling ([`llama::render`]).
    pub fn render(&self, input: &RenderInput) -> Result<String, RenderError> {
        match &self.compiled {
            Compiled::Transformers(t) => t.render_context(&input.context()),
            Compiled::LlamaCpp(t) => llama::render(t, input),
        }
    }

    /// Under the llama.cpp profile, the render of the closed messages and the generation prompt
    /// llama-server's parser reads in front of the reply ([`llama::generation_prompt`]); `None`
    /// under transformers (no parser reads one).
    pub fn generation_prompt(
        &self,
        input: &RenderInput,
    ) -> Option<Result<(String, String), RenderError>> {
        match &self.compiled {
            Compiled::Transformers(_) => None,
            Compiled::LlamaCpp(t) => Some(llama::generation_prompt(t, input)),
        }
    }

    /// The profile this template was compiled for.
    pub fn profile(&self) -> Profile {
        self.profile
    }

    fn jinja(&self) -> &JinjaTemplate {
        match &self.compiled {
            Compiled::Transformers(t) => t,
            Compiled::LlamaCpp(t) => t.jinja(),
        }
    }

    /// The template name used in messages.
    pub fn name(&self) -> &str {
        self.jinja().name()
    }

    /// The template source compiled (before the `generation` rewrite; the llama.cpp profile's
    /// patched source).
    pub fn source(&self) -> &str {
        self.jinja().source()
    }

    /// Renders with an explicit JSON context object (no request handling; for the llama.cpp
    /// profile the context is used as given).
    pub fn render_context(&self, ctx: &serde_json::Value) -> Result<String, RenderError> {
        self.jinja().render_context(ctx)
    }
}

/// Renders `template` for `input` under `opts.profile`. Shape: the prompt text exactly as the
/// engine would feed it to the tokenizer (no BOS added here). Errors: [`RenderError`] with
/// line and column.
pub fn render(
    template: &str,
    input: &RenderInput,
    opts: &RenderOptions,
) -> Result<String, RenderError> {
    CompiledTemplate::compile(template, opts)?.render(input)
}
