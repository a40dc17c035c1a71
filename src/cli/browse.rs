//! `toolscope` (no subcommand) and `toolscope open FILE…`: the inspector.

use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `toolscope open`.
#[derive(Debug, clap::Args)]
pub struct OpenArgs {
    /// Session files (.jsonl) or HAR files to open.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Colour theme: a built-in name (dark, light, high-contrast), a theme in
    /// <config dir>/toolscope/themes/NAME.toml, or a path to a theme .toml file.
    #[arg(long, value_name = "NAME|PATH", env = "TOOLSCOPE_THEME")]
    pub theme: Option<String>,
}

/// Opens the inspector on `files`, or on `./sessions/` when empty. Honours `NO_COLOR` and
/// `TOOLSCOPE_THEME`.
///
/// Errors: a file that does not exist, an invalid theme or keymap, no terminal.
pub fn run(files: Vec<PathBuf>) -> anyhow::Result<ExitCode> {
    run_with_theme(files, std::env::var("TOOLSCOPE_THEME").ok())
}

/// [`run`] with an explicit `--theme`.
pub fn run_with_theme(files: Vec<PathBuf>, theme: Option<String>) -> anyhow::Result<ExitCode> {
    for f in &files {
        if !f.exists() {
            anyhow::bail!("{}: no such file", f.display());
        }
    }
    let opts = crate::tui::Options {
        theme,
        no_color: crate::tui::theme::no_color_env(),
    };
    crate::tui::run(files, &opts)?;
    Ok(ExitCode::SUCCESS)
}
