//! `toolscope proxy`.

use std::process::ExitCode;

/// Arguments of `toolscope proxy`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Remaining arguments (not implemented yet).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub rest: Vec<String>,
}

/// Runs `toolscope proxy`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`toolscope proxy` is not implemented yet")
}
