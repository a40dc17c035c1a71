//! `toolscope send`.

use std::process::ExitCode;

/// Arguments of `toolscope send`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Remaining arguments (not implemented yet).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub rest: Vec<String>,
}

/// Runs `toolscope send`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`toolscope send` is not implemented yet")
}
