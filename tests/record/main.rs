//! Integration tests: the recorder (proxy faults, raw text capture, sessions, HAR import), replay
//! and `serve`, the session file format.
//!
//! One module per former test file; shared helpers in `tests/support`. Run one module with
//! `cargo test --test record MODULE::`.

#[path = "../support/mod.rs"]
mod support;

mod record_otlp;
mod record_proxy_faults;
mod record_raw;
mod record_responses;
mod record_session;
mod replay_ollama;
mod replay_ollama_show_record;
mod replay_serve;
mod safe_serve;
mod session_format;
