//! Integration tests: the `toolscope` subcommands run as a user runs them (check, diff, parse,
//! render, regenerate, export), and hostile inputs under memory and time guards.
//!
//! One module per former test file; shared helpers in `tests/support`. Run one module with
//! `cargo test --test cli MODULE::`.

#[path = "../support/mod.rs"]
mod support;

mod check_cases;
mod check_inputs;
mod check_sessions;
mod check_vocab;
mod claude_code_fixture;
mod codex_additional_tools;
mod diagnose_probe_offline;
mod diff_cli;
mod docs_fixes;
mod fix_other_parser;
mod parser_cli;
mod regenerate_engines;
mod replay_export;
mod responses_session;
mod run_agent;
mod safe_cli;
mod safe_inputs;
mod safe_templates;
mod template_cli;
mod try_text;
