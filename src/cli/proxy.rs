//! `toolscope proxy`: the recording reverse proxy.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;

use crate::record::proxy::{Proxy, ProxyConfig};
use crate::record::recorder::RecordEvent;
use crate::record::summary::one_line;

/// Arguments of `toolscope proxy`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Upstream inference server base URL, e.g. http://127.0.0.1:8080 (plain HTTP).
    #[arg(long)]
    pub upstream: String,
    /// Address to listen on. Loopback by default; a non-loopback address exposes the proxy
    /// (and your upstream) to the network.
    #[arg(long, default_value = "127.0.0.1:8081")]
    pub listen: SocketAddr,
    /// Session file to write (appended to when it exists). Default: sessions/<UTC time>.jsonl.
    #[arg(long)]
    pub session: Option<PathBuf>,
    /// Print one line per exchange instead of the live inspector.
    #[arg(long)]
    pub headless: bool,
    /// Colour theme of the live inspector (dark, light, high-contrast, or a .toml path).
    #[arg(long, value_name = "NAME|PATH", env = "TOOLSCOPE_THEME")]
    pub theme: Option<String>,
    /// Record authorization, x-api-key, api-key and cookie headers verbatim (default: redacted).
    #[arg(long)]
    pub keep_secrets: bool,
    /// After each chat exchange whose raw model text was not captured (llama-server without
    /// LLAMA_SERVER_SLOTS_DEBUG=1 or -v), re-run its rendered prompt through llama-server
    /// /completion with the same sampling settings, off the client's path. The text counts as the
    /// model's output only when toolscope's parse of it reproduces the server's answer.
    #[arg(long)]
    pub regenerate: bool,
}

/// `sessions/<UTC timestamp>.jsonl`, e.g. `sessions/2026-11-29T18-32-18Z.jsonl`.
pub fn default_session_path() -> PathBuf {
    let fmt = time::macros::format_description!("[year]-[month]-[day]T[hour]-[minute]-[second]Z");
    let stamp = time::OffsetDateTime::now_utc()
        .format(&fmt)
        .unwrap_or_else(|_| "session".into());
    PathBuf::from("sessions").join(format!("{stamp}.jsonl"))
}

/// Runs `toolscope proxy` until Ctrl-C. Exit 0 on a clean stop.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let session = args.session.clone().unwrap_or_else(default_session_path);
    if !args.listen.ip().is_loopback() {
        eprintln!(
            "toolscope proxy: warning: listening on non-loopback {} — anyone on the network can use the upstream through it",
            args.listen
        );
    }
    let rt = super::runtime();
    rt.block_on(async move {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<RecordEvent>(1024);
        let mut cfg = ProxyConfig::new(&args.upstream, session.clone());
        cfg.listen = args.listen;
        cfg.keep_secrets = args.keep_secrets;
        cfg.regenerate = args.regenerate;
        // Regenerations run after their exchange and take as long as a generation: wait for
        // them on stop (10 s is enough for the render and slot annotations).
        let settle = Duration::from_secs(if args.regenerate { 600 } else { 10 });
        let proxy = Proxy::spawn(cfg, Some(tx))
            .await
            .context("starting the proxy")?;
        let engine = proxy.header().engine.clone().unwrap_or_default();
        eprintln!(
            "toolscope proxy: http://{} → {} (engine: {}{}), recording to {}",
            proxy.local_addr(),
            args.upstream,
            engine.kind,
            engine.version.map(|v| format!(" {v}")).unwrap_or_default(),
            session.display()
        );
        let tty = std::io::IsTerminal::is_terminal(&std::io::stdout())
            && std::io::IsTerminal::is_terminal(&std::io::stdin());
        if !args.headless && !tty {
            eprintln!(
                "toolscope proxy: not a terminal; printing one line per exchange (as --headless)"
            );
        }
        if !args.headless && tty {
            // The inspector shows exchanges as they arrive, streams growing in place; quitting
            // it (q / Ctrl-C) stops the proxy.
            let opts = crate::tui::Options {
                theme: args.theme.clone(),
                no_color: crate::tui::theme::no_color_env(),
            };
            let result = crate::tui::run_live_records(
                session.display().to_string(),
                proxy.header().clone(),
                rx,
                &opts,
            )
            .await;
            eprintln!(
                "toolscope proxy: stopping; writing exchanges in flight (and pending annotations) to {}",
                session.display()
            );
            proxy.shutdown(settle).await;
            result?;
            return Ok(ExitCode::SUCCESS);
        }
        loop {
            tokio::select! {
                ev = rx.recv() => match ev {
                    Some(RecordEvent::Ended(ex)) => println!("{}", one_line(&ex)),
                    Some(RecordEvent::Warning(w)) => eprintln!("toolscope proxy: {w}"),
                    Some(_) => {}
                    None => break,
                },
                _ = tokio::signal::ctrl_c() => break,
            }
        }
        eprintln!(
            "toolscope proxy: stopping; writing exchanges in flight (and pending annotations) to {}",
            session.display()
        );
        proxy.shutdown(settle).await;
        Ok(ExitCode::SUCCESS)
    })
}
