//! `toolscope` (no subcommand) and `toolscope open FILE…`: the inspector.

use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `toolscope open`.
#[derive(Debug, clap::Args)]
pub struct OpenArgs {
    /// Session files (.jsonl) or HAR files to open.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
}

/// Opens the inspector on `files`, or on `./sessions/` when empty.
pub fn run(_files: Vec<PathBuf>) -> anyhow::Result<ExitCode> {
    anyhow::bail!("the inspector is not implemented yet")
}
