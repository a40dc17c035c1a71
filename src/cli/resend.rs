//! `toolscope resend`: re-send recorded requests to another server and record the answers
//! ([`crate::record::resend`]); and the session-against-session half of `toolscope diff`
//! ([`crate::diff::sessions`]).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::bail;

use crate::record::resend::{ResendOptions, resend, select};
use crate::session::read_session;

/// Arguments of `toolscope resend`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Session file (.jsonl) whose requests are re-sent.
    pub session: PathBuf,
    /// Target server base URL, e.g. http://127.0.0.1:8080 (plain HTTP).
    #[arg(long)]
    pub url: String,
    /// Exchange ids to re-send (repeatable; default: every chat/completion exchange).
    #[arg(long = "exchange", value_name = "ID", num_args = 1..)]
    pub exchanges: Vec<u64>,
    /// Session file to write. Default: SESSION's name with `.resend.jsonl`, next to it.
    #[arg(long = "session", value_name = "OUT")]
    pub out: Option<PathBuf>,
    /// Extra request header, `Name: value` (repeatable), replacing a recorded one.
    #[arg(short = 'H', long = "header", value_name = "NAME: VALUE")]
    pub headers: Vec<String>,
}

/// `DIR/NAME.resend.jsonl` for `DIR/NAME.jsonl`.
pub fn default_out(session: &Path) -> PathBuf {
    let stem = session
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "session".into());
    session.with_file_name(format!("{stem}.resend.jsonl"))
}

/// Re-sends and prints one line per exchange. Exit 0 when every answer is a complete 2xx,
/// 1 otherwise, 2 for unusable input.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let session = read_session(&args.session)?;
    for w in &session.warnings {
        crate::errln!("toolscope resend: {}: {w}", args.session.display());
    }
    let mut headers = Vec::new();
    for h in &args.headers {
        let Some((k, v)) = h.split_once(':') else {
            bail!("-H {h:?}: expected 'Name: value'");
        };
        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
    }
    let chosen = select(&session.exchanges, &args.exchanges)?;
    if chosen.is_empty() {
        bail!(
            "{}: no chat or completion exchanges to re-send",
            args.session.display()
        );
    }
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| default_out(&args.session));
    let opts = ResendOptions {
        url: args.url.clone(),
        exchanges: args.exchanges.clone(),
        session: out.clone(),
        headers,
    };
    let rt = super::runtime();
    let results = rt.block_on(resend(&chosen, &opts, |r| match &r.exchange {
        Some(e) => crate::outln!(
            "#{} → #{} {}",
            r.original,
            e.id,
            crate::record::summary::one_line(e)
        ),
        None => crate::outln!("#{} → not recorded", r.original),
    }))?;
    crate::errln!(
        "toolscope resend: {} exchange(s) re-sent to {} → {} (compare: toolscope diff {} --against {})",
        results.len(),
        args.url,
        out.display(),
        args.session.display(),
        out.display()
    );
    let all_ok = results.iter().all(|r| {
        r.exchange
            .as_ref()
            .is_some_and(|e| !e.is_partial() && e.response.as_ref().is_some_and(|r| r.status < 300))
    });
    Ok(if all_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `toolscope diff A --against B`: per paired exchange, what changed. Exit 0 when nothing
/// differs, 1 otherwise.
pub fn run_session_diff(a: &Path, b: &Path, json: bool) -> anyhow::Result<ExitCode> {
    let sa = read_session(a)?;
    let sb = read_session(b)?;
    for (p, s) in [(a, &sa), (b, &sb)] {
        for w in &s.warnings {
            crate::errln!("toolscope diff: {}: {w}", p.display());
        }
    }
    // Each side through the one analysed exchange (issue #17), then the pure diff.
    let diffs = crate::analysis::whatif::session_diffs(&sa, &sb);
    if json {
        crate::text::print_json(&format!("{}\n", serde_json::to_string_pretty(&diffs)?));
    } else {
        crate::text::print_out(&crate::diff::sessions::render_text(&diffs));
    }
    Ok(if diffs.iter().all(|d| d.is_same()) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
