//! The `toolscope` subcommands. Each submodule has a clap `Args` and a `run` that returns the
//! process exit code. What is here: parsing arguments, reading files and URLs, validating
//! input (unusable input is exit 2, naming the file and position), shaping and writing reports
//! (`check`'s streaming [`check::ReportWriter`]), driving the network commands. What is not:
//! judging an exchange ([`crate::analysis`], [`crate::diagnose`]), rendering, parsing.

use std::process::ExitCode;

pub mod browse;
pub mod check;
pub mod diff;
pub mod flatten;
pub mod import;
pub mod parse;
pub mod probe;
pub mod proxy;
pub mod regenerate;
pub mod render;
// `toolscope run AGENT -- ARGS`: the proxy in front of one agent run
pub mod run;
pub mod send;
// replay, export and re-send of recorded sessions (docs/replay.md)
pub mod export;
pub mod resend;
pub mod serve;
pub mod signals;
// `toolscope try` (a keyword in Rust, hence the module's name)
pub mod whatif;

/// Exit code for unusable input (message names file and position).
pub const EXIT_UNUSABLE: u8 = 2;

/// Prints `error: …` (with its causes) to stderr and returns exit code 2.
pub fn fail(err: &anyhow::Error) -> ExitCode {
    // messages quote file names, template text and recorded content: shown, never obeyed
    crate::errln!(
        "toolscope: error: {}",
        crate::text::visible(&format!("{err:#}"))
    );
    ExitCode::from(EXIT_UNUSABLE)
}

/// A multi-threaded tokio runtime for the network subcommands.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// Output format shared by the analysis subcommands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    #[default]
    Text,
    Json,
}

/// The one shape of a malformed-JSON error in every subcommand:
/// `FILE:LINE:COLUMN: invalid JSON: REASON` (1-based line and column, as serde_json counts).
pub fn json_error(file: impl std::fmt::Display, e: &serde_json::Error) -> anyhow::Error {
    anyhow::anyhow!(
        "{file}:{}:{}: invalid JSON: {}",
        e.line(),
        e.column(),
        crate::json_reason(e)
    )
}
