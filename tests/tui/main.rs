//! Integration tests: the inspector: the app driven by keys, pane snapshots (insta, `snapshots/`),
//! raw replay, engines view, the session index it reads.
//!
//! One module per former test file; shared helpers in `tests/support`. Run one module with
//! `cargo test --test tui MODULE::`.

#[path = "../support/mod.rs"]
mod support;

mod tui_app;
mod tui_loop;
mod tui_panes;
mod tui_raw_replay;
mod tui_replay_engines;
mod tui_source;
mod tui_whatif;
