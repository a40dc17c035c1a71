//! `toolscope import`: HAR 1.2 → session file.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};

use crate::session::har::{har_to_session_with, session_lines};

/// Arguments of `toolscope import`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// HAR file (browsers' devtools, mitmproxy, HTTP Toolkit).
    pub har: PathBuf,
    /// Session file to write (sessions/NAME.jsonl). Refuses to overwrite unless --force.
    #[arg(short = 'o', long = "output")]
    pub output: PathBuf,
    /// Overwrite the output file if it exists.
    #[arg(long)]
    pub force: bool,
    /// Keep authorization, api-key and cookie headers verbatim (default: redacted).
    #[arg(long)]
    pub keep_secrets: bool,
}

/// Converts the HAR file and writes the session. Prints the number of exchanges.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let name = args.har.display().to_string();
    let bytes = crate::input::read_file(&args.har)?;
    let har: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| super::json_error(&name, &e))?;
    let session = har_to_session_with(&name, &har, args.keep_secrets)?;
    if args.output.exists() && !args.force {
        bail!(
            "{}: already exists (use --force to overwrite)",
            args.output.display()
        );
    }
    if let Some(parent) = args.output.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("{}: cannot create folder", parent.display()))?;
    }
    let mut out = Vec::new();
    for line in session_lines(&session) {
        serde_json::to_writer(&mut out, &line)?;
        out.push(b'\n');
    }
    std::fs::write(&args.output, out)
        .with_context(|| format!("{}: cannot write", args.output.display()))?;
    let partial = session.exchanges.iter().filter(|e| e.is_partial()).count();
    crate::errln!(
        "toolscope import: {} exchange(s) ({} partial) from {name} → {}",
        session.exchanges.len(),
        partial,
        args.output.display()
    );
    Ok(ExitCode::SUCCESS)
}
