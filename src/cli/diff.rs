//! `toolscope diff`.

use std::process::ExitCode;

/// Arguments of `toolscope diff`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Remaining arguments (not implemented yet).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub rest: Vec<String>,
}

/// Runs `toolscope diff`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`toolscope diff` is not implemented yet")
}
