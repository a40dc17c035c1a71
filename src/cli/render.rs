//! `toolscope render`.

use std::process::ExitCode;

/// Arguments of `toolscope render`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Remaining arguments (not implemented yet).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub rest: Vec<String>,
}

/// Runs `toolscope render`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`toolscope render` is not implemented yet")
}
