//! toolscope — a terminal inspector for LLM tool calling against local inference servers.
//!
//! The modules read as the pipeline an agent's tool call travels through:
//!
//! ```text
//! record ──▶ session ──▶ schema ──▶ template ──▶ tokens ──▶ stream ──▶ parser ──▶ diagnose ──▶ diff
//!  (I/O)      (data)     └──────────────── pure analysis: data in, data out ───────────────┘
//!                                                   tui (I/O: terminal) shows all of it
//! ```
//!
//! * [`record`] — the recording reverse proxy, direct sends, probes and the llama-server API
//!   client. The only module (with [`tui`] and [`cli`]) that touches the network or the clock.
//! * [`session`] — the session file format (JSON Lines), reading and writing, the session
//!   index ([`session::index`]); HAR import.
//! * [`schema`] — JSON Schema flattening and schema-loss detection against a render.
//! * [`budget`] — the template memory/fuel budget, shared by both renderers.
//! * [`gotmpl`] — a Go `text/template` interpreter (Ollama's chat templates).
//! * [`template`] — chat template sources and rendering as transformers' `apply_chat_template`,
//!   llama.cpp and Ollama.
//! * [`gguf`] — GGUF metadata reader (model files: chat template, vocabulary), shared by
//!   [`template`] and [`tokens`].
//! * [`tokens`] — vocabularies, tokenization of a rendered prompt, special-token checks, the
//!   marker inventory ([`tokens::markers`]).
//! * [`stream`] — SSE decoding and reassembly of OpenAI / Anthropic streams.
//! * [`parser`] — tolerant incremental tool-call parsing with a replayable trace.
//! * [`diagnose`] — findings over an exchange: every rule in [`finding::Rule`].
//! * [`diff`] — template and engine comparison.
//! * [`analysis`] — one analysed exchange, built once from all of the above; the inspector's
//!   panes and `check` read it. Pure.
//! * [`export`] — sessions as HAR 1.2 and OpenTelemetry traces.
//! * [`tui`] — the inspector.
//! * [`cli`] — the `toolscope` subcommands (thin glue).

pub mod analysis;
pub mod budget;
pub mod cli;
pub mod conversation;
pub mod diagnose;
pub mod diff;
pub mod export;
pub mod finding;
pub mod gguf;
pub mod gotmpl;
pub mod input;
pub mod parser;
pub mod record;
pub mod schema;
pub mod session;
pub mod stream;
pub mod template;
pub mod text;
pub mod tokens;
pub mod tui;

pub use finding::{Evidence, Finding, Pane, Rule, Severity};

/// serde_json's error message without its trailing " at line L column C", for messages that
/// print the position first (`FILE:LINE:COLUMN: invalid JSON: REASON`).
pub fn json_reason(e: &serde_json::Error) -> String {
    let msg = e.to_string();
    match msg.rsplit_once(" at line ") {
        Some((reason, _)) => reason.to_owned(),
        None => msg,
    }
}

/// The JSON type of `v` in words, for messages: `null`, `a boolean`, `a number`, `a string`,
/// `an array`, `an object`.
pub fn json_kind(v: &serde_json::Value) -> &'static str {
    use serde_json::Value;
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
