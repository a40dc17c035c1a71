//! `toolscope proxy`: the recording reverse proxy.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;

use crate::record::proxy::{Proxy, ProxyConfig};
use crate::record::recorder::RecordEvent;
use crate::record::summary::one_line;

/// The recording options `toolscope proxy` and `toolscope run` share (flattened into both
/// argument sets): a flag added here reaches `run` with no change to it, and
/// [`ProxyOptions::config`] is the one place that turns them into a [`ProxyConfig`].
#[derive(Debug, Clone, clap::Args)]
pub struct ProxyOptions {
    /// Upstream inference server base URL, e.g. http://127.0.0.1:8080 (plain HTTP).
    #[arg(long)]
    pub upstream: String,
    /// Session file to write (appended to when it exists). Default: sessions/<UTC time>.jsonl.
    #[arg(long)]
    pub session: Option<PathBuf>,
    /// Record credentials verbatim: secret headers (authorization, x-api-key, api-key,
    /// x-goog-api-key, cookies, …), secret query parameters (key, api_key, access_token,
    /// token, …) and URL userinfo (default: redacted; see docs/session-format.md).
    #[arg(long)]
    pub keep_secrets: bool,
    /// After each chat exchange whose raw model text was not captured (llama-server without
    /// LLAMA_SERVER_SLOTS_DEBUG=1 or -v; vLLM; Ollama), re-run the engine's own render of it
    /// through its raw completion endpoint (llama-server /completion, vLLM /v1/completions from
    /// /tokenize's token ids, Ollama /api/generate raw) with the same sampling settings, off the
    /// client's path. The text counts as the model's output only when toolscope's parse of it
    /// reproduces the server's answer.
    #[arg(long)]
    pub regenerate: bool,
    /// On Ctrl-C or SIGTERM, seconds to let running exchanges finish before they are cut and
    /// recorded as partial (outcome `shutdown`). A second signal cuts at once.
    /// From 0 to 86400 (one day).
    #[arg(long, default_value_t = 10.0, value_name = "SECONDS", value_parser = parse_grace)]
    pub grace: f64,
    /// Send live traces to an OpenTelemetry collector: OTLP/HTTP JSON spans POSTed to
    /// URL/v1/traces as exchanges end (a trace per conversation, a span per exchange, tool
    /// spans between turns, findings as events; see docs/record.md). Requests go upstream
    /// with a W3C traceparent. Never delays the client: spans the collector does not take in
    /// time are dropped and counted.
    #[arg(long, value_name = "URL")]
    pub otlp: Option<String>,
    /// Timeout of each POST to the --otlp collector, in seconds (0.1 to 600).
    #[arg(long, default_value_t = 5.0, value_name = "SECONDS", value_parser = parse_otlp_timeout)]
    pub otlp_timeout: f64,
}

/// `--otlp-timeout`: seconds from 0.1 to 600.
fn parse_otlp_timeout(s: &str) -> Result<f64, String> {
    s.parse::<f64>()
        .ok()
        .filter(|f| (0.1..=600.0).contains(f))
        .ok_or_else(|| "expected seconds from 0.1 to 600".to_owned())
}

impl ProxyOptions {
    /// The session file: `--session`, else [`default_session_path`].
    pub fn session_path(&self) -> PathBuf {
        self.session.clone().unwrap_or_else(default_session_path)
    }

    /// How long stopping waits for the exchanges in flight: `--grace`, and with
    /// `--regenerate` at least 600 s (regenerations run after their exchange and take as long
    /// as a generation; a second signal still cuts at once).
    pub fn grace(&self) -> Duration {
        let grace = Duration::from_secs_f64(self.grace);
        if self.regenerate {
            grace.max(Duration::from_secs(600))
        } else {
            grace
        }
    }

    /// The proxy's settings: these options, listening on `listen`, recording to `session`.
    pub fn config(&self, listen: SocketAddr, session: PathBuf) -> ProxyConfig {
        let mut cfg = ProxyConfig::new(&self.upstream, session);
        cfg.listen = listen;
        cfg.keep_secrets = self.keep_secrets;
        cfg.regenerate = self.regenerate;
        cfg.otlp = self.otlp.clone();
        cfg.otlp_timeout = Duration::from_secs_f64(self.otlp_timeout);
        cfg
    }
}

/// Arguments of `toolscope proxy`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// What is recorded and how (shared with `toolscope run`).
    #[command(flatten)]
    pub proxy: ProxyOptions,
    /// Address to listen on. Loopback by default; a non-loopback address exposes the proxy
    /// (and your upstream) to the network.
    #[arg(long, default_value = "127.0.0.1:8081")]
    pub listen: SocketAddr,
    /// Print one line per exchange instead of the live inspector.
    #[arg(long)]
    pub headless: bool,
    /// Colour theme of the live inspector (dark, light, high-contrast, or a .toml path).
    #[arg(long, value_name = "NAME|PATH", env = "TOOLSCOPE_THEME")]
    pub theme: Option<String>,
}

/// `--grace`: a number of seconds from 0 to 86,400 (`inf`, `1e300`, `NaN`, negative refused:
/// clap exits 2 naming the flag).
fn parse_grace(s: &str) -> Result<f64, String> {
    s.parse::<f64>()
        .ok()
        .filter(|f| (0.0..=86_400.0).contains(f))
        .ok_or_else(|| "expected seconds from 0 to 86400".to_owned())
}

/// `sessions/<UTC timestamp>.jsonl`, e.g. `sessions/2026-11-29T18-32-18Z.jsonl`.
pub fn default_session_path() -> PathBuf {
    let fmt = time::macros::format_description!("[year]-[month]-[day]T[hour]-[minute]-[second]Z");
    let stamp = time::OffsetDateTime::now_utc()
        .format(&fmt)
        .unwrap_or_else(|_| "session".into());
    PathBuf::from("sessions").join(format!("{stamp}.jsonl"))
}

/// Where a headless proxy prints its one line per exchange: stdout for `proxy --headless`,
/// stderr for `run` (whose stdout is the agent's), or held until [`Lines::release`] (`run`
/// with an agent on the terminal, whose screen the lines would break into).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lines {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
    /// Kept, for stderr later.
    Held(Vec<String>),
}

impl Lines {
    /// Prints (or holds) one exchange's line through the sanitiser: the client's model field
    /// and path are shown, never obeyed by the terminal.
    fn print(&mut self, ex: &crate::session::Exchange) {
        let line = crate::text::visible_line(&one_line(ex)).into_owned();
        match self {
            Lines::Stdout => crate::outln!("{line}"),
            Lines::Stderr => crate::errln!("{line}"),
            Lines::Held(held) => held.push(line),
        }
    }

    /// Prints the held lines on stderr; from now on lines go to stderr.
    pub fn release(&mut self) {
        if let Lines::Held(held) = std::mem::replace(self, Lines::Stderr) {
            for line in held {
                crate::errln!("{line}");
            }
        }
    }
}

/// A recording proxy started from [`ProxyOptions`]: its handle, its event stream, the session
/// it writes and the grace period it stops with.
pub struct Started {
    /// The running proxy.
    pub proxy: crate::record::proxy::ProxyHandle,
    /// One [`RecordEvent`] per exchange start, chunk, end, annotation and warning.
    pub events: tokio::sync::mpsc::Receiver<RecordEvent>,
    /// The session file being written.
    pub session: PathBuf,
    /// [`ProxyOptions::grace`].
    pub grace: Duration,
}

/// Starts the recording proxy of `proxy` and `run` on `listen` and prints its start line on
/// stderr (`toolscope proxy: http://ADDR → UPSTREAM (engine: …), recording to SESSION`; the
/// upstream without its credentials).
///
/// # Errors
/// As [`Proxy::spawn`]: an upstream URL that is not `http://…`, an address that cannot be
/// bound, a session file that cannot be opened.
pub async fn start(opts: &ProxyOptions, listen: SocketAddr) -> anyhow::Result<Started> {
    let session = opts.session_path();
    if !listen.ip().is_loopback() {
        crate::errln!(
            "toolscope proxy: warning: listening on non-loopback {listen} — anyone on the network can use the upstream through it"
        );
    }
    // the upstream as printed: never its credentials
    let shown_upstream = crate::session::redact::redact_url(&opts.upstream).into_owned();
    let (tx, events) = tokio::sync::mpsc::channel::<RecordEvent>(1024);
    let proxy = Proxy::spawn(opts.config(listen, session.clone()), Some(tx))
        .await
        .context("starting the proxy")?;
    let engine = proxy.header().engine.clone().unwrap_or_default();
    crate::errln!(
        "{}",
        crate::text::visible(&format!(
            "toolscope proxy: http://{} → {} (engine: {}{}), recording to {}",
            proxy.local_addr(),
            shown_upstream,
            engine.kind,
            engine.version.map(|v| format!(" {v}")).unwrap_or_default(),
            session.display()
        ))
    );
    if let Some(o) = proxy.otlp() {
        crate::errln!(
            "{}",
            crate::text::visible(&format!(
                "toolscope proxy: live traces to {} (OTLP/HTTP JSON)",
                o.endpoint_shown()
            ))
        );
    }
    Ok(Started {
        proxy,
        events,
        session,
        grace: opts.grace(),
    })
}

/// The headless proxy's loop: one line per ended exchange (to `lines`) and each warning (to
/// stderr) until `until` completes, whose output is returned; `None` when the event stream
/// ended first (the proxy is gone).
pub async fn print_until<F: std::future::Future>(
    events: &mut tokio::sync::mpsc::Receiver<RecordEvent>,
    lines: &mut Lines,
    until: F,
) -> Option<F::Output> {
    let mut until = std::pin::pin!(until);
    loop {
        tokio::select! {
            ev = events.recv() => match ev {
                Some(RecordEvent::Ended(ex)) => lines.print(&ex),
                Some(RecordEvent::Warning(w)) => {
                    crate::errln!("toolscope proxy: {}", crate::text::visible(&w))
                }
                Some(_) => {}
                None => return None,
            },
            out = &mut until => return Some(out),
        }
    }
}

/// Runs `toolscope proxy` until Ctrl-C. Exit 0 on a clean stop.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let rt = super::runtime();
    rt.block_on(async move {
        let mut signals = super::signals::Signals::new()?;
        let Started {
            proxy,
            mut events,
            session,
            grace,
        } = start(&args.proxy, args.listen).await?;
        let tty = std::io::IsTerminal::is_terminal(&std::io::stdout())
            && std::io::IsTerminal::is_terminal(&std::io::stdin());
        if !args.headless && !tty {
            crate::errln!(
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
            // SIGTERM (or SIGINT from outside: the inspector reads Ctrl-C as a key) stops too
            let result = tokio::select! {
                r = crate::tui::run_live_records(
                    session.display().to_string(),
                    proxy.header().clone(),
                    args.proxy.upstream.clone(),
                    events,
                    &opts,
                ) => r,
                _ = signals.next() => Ok(()),
            };
            stop(proxy, grace, &mut signals, &session, None, Stopping::Signal).await;
            result?;
            return Ok(ExitCode::SUCCESS);
        }
        let mut lines = Lines::Stdout;
        print_until(&mut events, &mut lines, signals.next()).await;
        stop(
            proxy,
            grace,
            &mut signals,
            &session,
            Some((&mut events, &mut lines)),
            Stopping::Signal,
        )
        .await;
        Ok(ExitCode::SUCCESS)
    })
}

/// Why the proxy stops ([`stop`]): the first line says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopping {
    /// A Ctrl-C / SIGTERM (`proxy`): a second one cuts what is still in flight.
    Signal,
    /// The agent of `toolscope run` exited: a Ctrl-C / SIGTERM now cuts what is in flight.
    AgentExited,
}

/// Shuts the proxy down: stop accepting, wait up to `grace` (a signal during the wait cuts at
/// once, the OTLP export's drain too), record what is still running as `shutdown`, flush;
/// prints the remaining exchange lines (headless) and what was cut. The first line says why it
/// stops (`cause`); after an agent's exit with nothing in flight it is left out.
pub async fn stop(
    proxy: crate::record::proxy::ProxyHandle,
    grace: Duration,
    signals: &mut super::signals::Signals,
    session: &std::path::Path,
    rx: Option<(&mut tokio::sync::mpsc::Receiver<RecordEvent>, &mut Lines)>,
    cause: Stopping,
) {
    let running = proxy.recorder().in_flight();
    let wait = grace.as_secs_f64();
    match cause {
        Stopping::Signal => crate::errln!(
            "toolscope proxy: stopping: no new connections; waiting up to {wait:.1} s for {running} exchange(s) in flight (a second Ctrl-C/SIGTERM cuts them now)"
        ),
        Stopping::AgentExited if running > 0 => crate::errln!(
            "toolscope proxy: the agent exited; waiting up to {wait:.1} s for {running} exchange(s) in flight (Ctrl-C/SIGTERM cuts them now)"
        ),
        Stopping::AgentExited => {}
    }
    let report = proxy
        .shutdown_with(grace, async {
            let sig = signals.next().await;
            let again = match cause {
                Stopping::Signal => " again",
                Stopping::AgentExited => "",
            };
            crate::errln!(
                "toolscope proxy: {sig}{again}: cutting the exchanges in flight and the trace export now"
            );
        })
        .await;
    if let Some((rx, lines)) = rx {
        while let Ok(ev) = rx.try_recv() {
            if let RecordEvent::Ended(ex) = ev {
                lines.print(&ex);
            }
        }
    }
    let cut = match report.cut {
        0 => String::new(),
        n => format!(
            "; {n} exchange(s) still running were cut and recorded as partial (outcome shutdown)"
        ),
    };
    let otlp = match report.otlp {
        Some(o) => format!(
            "; otlp: {} span(s) sent, {} dropped{}",
            o.sent,
            o.dropped,
            match o.failed_posts {
                0 => String::new(),
                n => format!(" ({n} POST(s) to the collector failed or timed out)"),
            }
        ),
        None => String::new(),
    };
    crate::errln!(
        "{}",
        crate::text::visible(&format!(
            "toolscope proxy: stopped{cut}{otlp}; session written to {}",
            session.display()
        ))
    );
}
