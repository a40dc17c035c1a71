//! `toolscope serve`: answer an agent's requests from a recorded session (see
//! [`crate::record::serve`] and docs/replay.md).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;

use crate::record::serve::{ServeConfig, ServeHandle, Timing};
use crate::session::read_session;
use crate::session::replay::MatchMode;

/// Arguments of `toolscope serve`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Session file (.jsonl) whose recorded responses are served.
    pub session: PathBuf,
    /// Address to listen on. Loopback by default.
    #[arg(long, default_value = "127.0.0.1:8081")]
    pub listen: SocketAddr,
    /// When responses are written: `recorded` (the recorded offsets of the head and of every
    /// chunk), `fast` (no waits) or `xN` (recorded offsets divided by N, e.g. x10).
    #[arg(long, default_value = "recorded", value_parser = Timing::parse)]
    pub timing: Timing,
    /// `sequence`: the n-th request of a path gets the n-th recording of that path (bodies must
    /// be equal); `request`: looked up by normalised JSON body.
    #[arg(long = "match", value_enum, default_value_t = MatchMode::Sequence)]
    pub mode: MatchMode,
    /// Session file where requests that match no recording are recorded with their error.
    /// Default: SESSION's name with `.unmatched.jsonl`, next to it.
    #[arg(long = "session", value_name = "OUT")]
    pub unmatched: Option<PathBuf>,
}

/// `DIR/NAME.unmatched.jsonl` for `DIR/NAME.jsonl`.
pub fn default_unmatched_path(session: &Path) -> PathBuf {
    let stem = session
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "session".into());
    session.with_file_name(format!("{stem}.unmatched.jsonl"))
}

/// Serves until Ctrl-C; prints one line per request. Exit 0 on a clean stop, 2 when the
/// session cannot be read or the address bound.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let session = read_session(&args.session)?;
    for w in &session.warnings {
        crate::errln!("toolscope serve: {}: {w}", args.session.display());
    }
    if !args.listen.ip().is_loopback() {
        crate::errln!(
            "toolscope serve: warning: listening on non-loopback {} — anyone on the network can read the recorded session through it",
            args.listen
        );
    }
    let unmatched = args
        .unmatched
        .clone()
        .unwrap_or_else(|| default_unmatched_path(&args.session));
    let rt = super::runtime();
    rt.block_on(async move {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let cfg = ServeConfig {
            listen: args.listen,
            timing: args.timing,
            mode: args.mode,
            unmatched_session: unmatched.clone(),
        };
        // installed once, before the start line announces the server: a SIGINT that lands
        // while a log line is written is still seen (see cli/signals.rs)
        let mut signals = super::signals::Signals::new()?;
        let server = ServeHandle::spawn(session, cfg, Some(tx))
            .await
            .context("starting the replay server")?;
        crate::errln!(
            "toolscope serve: {} recorded response(s) from {} on {} (timing {}, match {}); unmatched requests → {}",
            server.servable(),
            args.session.display(),
            server.url(),
            match args.timing {
                Timing::Recorded => "recorded".to_owned(),
                Timing::Fast => "fast".to_owned(),
                Timing::Scaled(f) => format!("x{f}"),
            },
            match args.mode {
                MatchMode::Sequence => "sequence",
                MatchMode::Request => "request",
            },
            unmatched.display()
        );
        loop {
            tokio::select! {
                ev = rx.recv() => match ev {
                    Some(s) => crate::outln!("{s}"),
                    None => break,
                },
                _ = signals.next() => break,
            }
        }
        server.shutdown().await;
        Ok(ExitCode::SUCCESS)
    })
}
