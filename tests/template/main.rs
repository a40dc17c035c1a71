//! Integration tests: template rendering (transformers conformance, Ollama Go templates, engine
//! renders of shipped sessions), schema flattening and loss, tokens, template diffs.
//!
//! One module per former test file; shared helpers in `tests/support`. Run one module with
//! `cargo test --test template MODULE::`.

#[path = "../support/mod.rs"]
mod support;
#[path = "../template_support/mod.rs"]
mod template_support;

mod diff_corpus;
mod diff_engine;
mod gotmpl_ollama_vectors;
mod schema_corpus;
mod schema_flatten;
mod schema_loss;
mod schema_props;
mod schema_rank;
mod template_conformance;
mod template_sessions_engine;
mod tokens_gguf;
