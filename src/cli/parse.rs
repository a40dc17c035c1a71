//! `toolscope parse`.

use std::process::ExitCode;

/// Arguments of `toolscope parse`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Remaining arguments (not implemented yet).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub rest: Vec<String>,
}

/// Runs `toolscope parse`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`toolscope parse` is not implemented yet")
}
