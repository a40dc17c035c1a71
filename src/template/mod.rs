//! Chat templates: sources (jinja file, tokenizer_config.json, GGUF metadata, server props) and
//! rendering faithful to transformers' `apply_chat_template`. Pure (file and URL loading lives
//! in [`crate::cli`] / [`crate::record`]).
//!
//! * [`source`] — [`source::TemplateSource`]: where a template comes from, and the one render
//!   entry point ([`source::TemplateSource::render`], [`source::TemplateSource::render_request`])
//!   that picks the renderer from the source's format and the profile.
//! * [`profile`] — [`Profile`]: the render profile (transformers, llama.cpp at a build, Ollama
//!   at a version), parsed from `--engine`; [`Profile::for_server`] for a recorded server.
//! * [`input`] — [`input::RenderInput`]: messages, tools and flags from an OpenAI or Anthropic
//!   body, normalised as llama.cpp does.
//! * [`responses`] — llama-server's conversion of a Responses request to a chat body
//!   ([`responses::responses_to_chat`]).
//! * [`mod@render`] — [`render::JinjaTemplate`], the core renderer: minijinja configured as
//!   transformers' Jinja2 (it names no profile).
//! * [`compiled`] — [`CompiledTemplate`]: a Jinja template compiled under a Jinja profile
//!   (the core renderer, or the llama.cpp profile built on it).
//! * [`pyfmt`] — Python `str`/`repr`/`json.dumps`/`strftime` for template values.
//! * [`llama`] — the llama.cpp profile: llama-server's request handling and Jinja engine.
//! * [`ollama`] — Ollama's template handling over the Go `text/template` interpreter
//!   ([`crate::gotmpl`]): [`ollama::render_ollama`].
//! * [`divergence`] — `template.engine_divergence` against an engine's own render.

pub mod compiled;
pub mod divergence;
pub mod input;
pub mod llama;
pub mod ollama;
pub mod profile;
pub mod pyfmt;
pub mod render;
pub mod responses;
pub mod source;

pub use compiled::{CompiledTemplate, render};
pub use input::RenderInput;
pub use profile::Profile;
pub use render::{RenderError, RenderErrorKind, RenderOptions};
pub use source::TemplateSource;
