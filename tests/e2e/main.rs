//! Integration tests: end-to-end tests against a real llama-server (`#[ignore = "e2e: …"]`, run by
//! scripts/e2e.sh), and the few checks that share their setup.
//!
//! One module per former test file; shared helpers in `tests/support`. Run one module with
//! `cargo test --test e2e MODULE::`.

#[path = "../support/mod.rs"]
mod support;
#[path = "../template_support/mod.rs"]
mod template_support;

mod diff_e2e;
mod e2e_loop;
mod e2e_otlp;
mod e2e_probe;
mod e2e_raw;
mod e2e_record_llama;
mod e2e_record_proxy;
mod e2e_replay;
mod e2e_responses;
mod e2e_run;
mod e2e_try;
mod engine_builds_e2e;
mod engines_dynamo;
mod engines_llama;
mod engines_real;
mod shipped_views;
mod stream_regenerate;
mod template_e2e;
mod template_engine_e2e;
mod verdicts;
