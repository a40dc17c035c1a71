//! Chat templates: sources (jinja file, tokenizer_config.json, GGUF metadata, server props) and
//! rendering faithful to transformers' `apply_chat_template`. Pure (file and URL loading lives
//! in [`crate::cli`] / [`crate::record`]).
//!
//! * [`source`] — [`source::TemplateSource`]: where a template comes from.
//! * [`input`] — [`input::RenderInput`]: messages, tools and flags from an OpenAI or Anthropic
//!   body, normalised as llama.cpp does.
//! * [`responses`] — llama-server's conversion of a Responses request to a chat body
//!   ([`responses::responses_to_chat`]).
//! * [`mod@render`] — [`render::render`]: minijinja configured as transformers' Jinja2.
//! * [`pyfmt`] — Python `str`/`repr`/`json.dumps`/`strftime` for template values.
//! * [`profile`] — [`Profile`]: the render profile (transformers, or llama.cpp at a build).
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
