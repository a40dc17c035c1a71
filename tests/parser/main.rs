//! Integration tests: the tool-call parser (families, drift, engines' vectors, traces, properties),
//! stream decoding, and the rules on real llama-server replies.
//!
//! One module per former test file; shared helpers in `tests/support`. Run one module with
//! `cargo test --test parser MODULE::`.

#[path = "../support/mod.rs"]
mod support;

mod diagnose_real_server;
mod parser_cases;
mod parser_detect;
mod parser_drift;
mod parser_engine_vectors;
mod parser_engines;
mod parser_every_cut;
mod parser_families;
mod parser_props;
mod parser_trace;
mod parser_typing;
mod parser_vectors;
mod stream_decode;
mod stream_props;
