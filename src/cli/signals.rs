//! SIGINT and SIGTERM as one stream, installed once per command.
//!
//! A listener must outlive the loop that waits on it: tokio delivers a signal only to the
//! listeners that exist when it arrives, so a `tokio::signal::ctrl_c()` created anew on each turn
//! of a `select!` loop misses a SIGINT that lands while the loop body runs (tokio 1.x,
//! `signal/registry.rs`: a listener subscribes to a `watch` channel and sees only later
//! deliveries; once the handler is installed a signal with no listener is consumed,
//! tokio-rs/tokio#7905). `serve` hung after its SIGINT that way on a loaded CI machine.

use anyhow::Context;

/// SIGINT (Ctrl-C) and SIGTERM (`kill`, systemd, `timeout`), as one stream. Create it before
/// the work it interrupts; every signal delivered after [`Signals::new`] is seen by
/// [`Signals::next`], however late it is polled.
pub struct Signals {
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
}

impl Signals {
    /// Installs the handlers. Must run inside a tokio runtime.
    ///
    /// # Errors
    /// When the OS refuses the handler (`sigaction` failing).
    pub fn new() -> anyhow::Result<Signals> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Ok(Signals {
                int: signal(SignalKind::interrupt()).context("installing the SIGINT handler")?,
                term: signal(SignalKind::terminate()).context("installing the SIGTERM handler")?,
            })
        }
        #[cfg(not(unix))]
        Ok(Signals {})
    }

    /// The next SIGINT or SIGTERM; its name (`"SIGINT"`, `"SIGTERM"`, or `"Ctrl-C"` off Unix).
    /// Cancel-safe: dropping the future loses no signal.
    pub async fn next(&mut self) -> &'static str {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = self.int.recv() => "SIGINT",
                _ = self.term.recv() => "SIGTERM",
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            "Ctrl-C"
        }
    }
}
