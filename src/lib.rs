//! toolscope — a terminal inspector for LLM tool calling against local inference servers.
//!
//! The modules, bottom-up: each imports only modules declared before it (tests/arch/layering.rs
//! fails on an import cycle or a module declared before one it imports). The pure stages take
//! data and return data (tests/arch/purity.rs); I/O lives in the last four.
//!
//! ```text
//!  text  finding  gguf  input ──▶ session                         leaves: data and formats
//!                                    │
//!  budget ──▶ gotmpl ──▶ tokens ──▶ template ──▶ schema ──▶ parser ──▶ stream     pure stages
//!                                    │
//!                        diagnose (rules) · diff (comparison)      pure: judge, compare
//!                                    │
//!                        analysis (one analysed exchange: facts → rules → views)   pure
//!                                    │
//!  export (HAR, OTLP) · record (network) ──▶ tui (terminal) ──▶ cli (subcommands)   I/O
//! ```
//!
//! * [`text`] — terminal-safe text (escape sequences made visible), UTF-8 positions.
//! * [`finding`] — [`Finding`] and every [`Rule`] id: what the stages report.
//! * [`gguf`] — GGUF metadata reader (model files: chat template, vocabulary), shared by
//!   [`template`] and [`tokens`].
//! * [`input`] — reading input files with errors that name the file and position.
//! * [`session`] — the session file format (JSON Lines), reading and writing, the session
//!   index ([`session::index`]); HAR import.
//! * [`budget`] — the template memory/fuel budget, shared by both renderers.
//! * [`gotmpl`] — a Go `text/template` interpreter (Ollama's chat templates).
//! * [`tokens`] — vocabularies, tokenization of a rendered prompt, special-token checks, the
//!   marker inventory ([`tokens::markers`]).
//! * [`template`] — chat template sources and rendering as transformers' `apply_chat_template`,
//!   llama.cpp and Ollama.
//! * [`schema`] — JSON Schema flattening and schema-loss detection against a render.
//! * [`parser`] — tolerant incremental tool-call parsing with a replayable trace.
//! * [`stream`] — SSE / NDJSON decoding and reassembly; the model's raw output.
//! * [`diagnose`] — findings over an exchange: every rule in [`finding::Rule`]; only judges.
//! * [`diff`] — template, engine and session comparison.
//! * [`analysis`] — one analysed exchange, built once from all of the above (its facts, the
//!   rules' only input, in [`analysis::facts`]); the inspector's panes, `check` and `export`
//!   read it. Pure.
//! * [`conversation`] — exchanges grouped into an agent's conversations, calls linked to
//!   their results, prompt reuse per turn; the loop rules. Pure.
//! * [`export`] — sessions as HAR 1.2 and OpenTelemetry traces.
//! * [`record`] — the recording reverse proxy, direct sends, probes and the llama-server API
//!   client. The only module (with [`tui`] and [`cli`]) that touches the network or the clock.
//! * [`tui`] — the inspector.
//! * [`cli`] — the `toolscope` subcommands: arguments, reading inputs, reports.

// Bottom-up, one group per layer (rustfmt sorts within a group).
// leaves: data and formats
pub mod finding;
pub mod gguf;
pub mod text;

pub mod input;
pub mod session;

// pure stages
pub mod budget;
pub mod gotmpl;

pub mod tokens;

pub mod template;

pub mod schema;

pub mod parser;
pub mod stream;

// pure: judge, compare, one analysed exchange
pub mod diagnose;
pub mod diff;

pub mod analysis;

// the agent's loop across analysed exchanges
pub mod conversation;

// I/O: files, network, terminal
pub mod export;
pub mod record;
pub mod tui;

pub mod cli;

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
