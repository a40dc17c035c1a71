//! The inspector TUI: exchange list and panes (Tools, Schema, Template, Stream, Replay,
//! Findings). A thin layer over the analysis modules.
//!
//! Layout of this module (see docs/tui.md):
//! * [`app`] — the controller: `Tui::run(input)` with a biased `select!` over the message
//!   queue, the input stream and SIGINT; draws when the queue drains.
//! * [`state`] — the state the UI task owns, updated by input and [`message::Message`]s.
//! * [`screen`] — one file per area (browser, list, each pane, help, header/footer): the
//!   area's own state, keys and drawing. [`draw`] composes them: drawing is a pure function
//!   of the state. [`doc`] builds the panes' documents.
//! * [`layout`] — screen geometry, shared by drawing and the state (neither depends on the
//!   other).
//! * [`analysis`] — the view-model computed off the UI task from the session and the analysis
//!   modules.
//! * [`live`] — the live proxy view: recorder events applied to the session index.
//! * [`keymap`], [`theme`], [`highlight`] — keys (footer and help generated from them),
//!   TOML themes, syntect JSON highlighting.

pub mod analysis;
pub mod app;
pub mod doc;
pub mod draw;
pub mod highlight;
pub mod keymap;
pub mod layout;
pub mod live;
pub mod message;
pub mod screen;
pub mod state;
pub mod theme;

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use crossterm::event::{DisableMouseCapture, EnableMouseCapture, EventStream};
use crossterm::execute;
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;

pub use app::Tui;
pub use message::Message;
pub use state::State;

/// How to start the inspector.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// `--theme NAME|PATH` (None = dark).
    pub theme: Option<String>,
    /// Drop colours (`NO_COLOR`).
    pub no_color: bool,
}

/// `<config dir>/toolscope` (keymap.toml, themes/).
pub fn config_dir() -> Option<PathBuf> {
    dirs::config_dir().map(|d| d.join("toolscope"))
}

/// Builds the initial state: keymap and theme from the config dir, terminal size `size`.
///
/// Errors: an invalid keymap.toml or theme (message names the file).
pub fn initial_state(opts: &Options, size: (u16, u16)) -> anyhow::Result<State> {
    let cfg = config_dir();
    let keymap = keymap::Keymap::load(cfg.as_deref())?;
    let theme = theme::Theme::resolve(opts.theme.as_deref(), cfg.as_deref(), opts.no_color)?;
    Ok(State::new(keymap, theme, size))
}

/// Restores the terminal (leave alternate screen, disable raw mode and mouse capture).
/// Safe to call more than once.
pub fn restore_terminal() {
    let _ = execute!(std::io::stdout(), DisableMouseCapture);
    ratatui::restore();
}

/// Set while a [`TerminalGuard`] holds the terminal: the panic hook restores it only then.
static TERMINAL_TAKEN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Owns the terminal's raw mode / alternate screen / mouse capture for the inspector's
/// lifetime: [`TerminalGuard::enter`] sets them up, dropping the guard restores the terminal,
/// on a normal return, an error return and while a panic unwinds; a panic hook (installed
/// once) restores it before the panic message is printed, so the message is readable. Ctrl-C
/// is a key in raw mode (and SIGINT is handled by [`Tui::run`]), so it ends in a drop too.
pub struct TerminalGuard(());

impl TerminalGuard {
    /// Enters raw mode and the alternate screen and enables mouse capture.
    ///
    /// Errors: the terminal cannot be initialised (not a terminal).
    pub fn enter() -> anyhow::Result<(TerminalGuard, Terminal<CrosstermBackend<std::io::Stdout>>)> {
        static HOOK: std::sync::Once = std::sync::Once::new();
        HOOK.call_once(|| {
            let prev = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                if TERMINAL_TAKEN.swap(false, std::sync::atomic::Ordering::SeqCst) {
                    restore_terminal();
                }
                prev(info);
            }));
        });
        let terminal = ratatui::try_init()
            .map_err(|e| anyhow::anyhow!("cannot initialise the terminal: {e}"))?;
        TERMINAL_TAKEN.store(true, std::sync::atomic::Ordering::SeqCst);
        let guard = TerminalGuard(());
        let _ = execute!(std::io::stdout(), EnableMouseCapture);
        Ok((guard, terminal))
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        if TERMINAL_TAKEN.swap(false, std::sync::atomic::Ordering::SeqCst) {
            restore_terminal();
        }
    }
}

/// Writes `text` to the system clipboard through the terminal (OSC 52).
pub fn osc52(text: &str) {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(text.as_bytes());
    let mut out = std::io::stdout();
    let _ = write!(out, "\x1b]52;c;{b64}\x07");
    let _ = out.flush();
}

/// Runs the inspector on `files` (empty = the session browser over `./sessions/`).
/// Blocks until the user quits; the terminal is restored on return, panic and Ctrl-C.
///
/// Errors: terminal setup, invalid theme/keymap. File errors are shown in the UI.
pub fn run(files: Vec<PathBuf>, opts: &Options) -> anyhow::Result<()> {
    let mut state = initial_state(opts, crossterm::terminal::size().unwrap_or((80, 24)))?;
    let fx = if files.is_empty() {
        let dir = PathBuf::from("sessions");
        state.open_files(crate::session::index::list_sessions(&dir), Some(dir))
    } else {
        state.open_files(files, None)
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(run_on_terminal(state, fx, |_| None))
}

/// Runs the inspector over a live `toolscope proxy`: `events` is the recorder's event channel
/// (`record::proxy::Proxy::spawn(cfg, Some(tx))`). Exchanges appear when their request
/// arrives; status, chunks (streams growing in place) and the final exchange update the same
/// row. `header` is the proxy's session header (`ProxyHandle::header()`), `name` the session
/// path. Returns when the user quits; the caller then shuts the proxy down.
///
/// Must be called from within a multi-threaded tokio runtime.
pub async fn run_live_records(
    name: String,
    header: crate::session::Header,
    upstream: String,
    mut events: tokio::sync::mpsc::Receiver<crate::record::recorder::RecordEvent>,
    opts: &Options,
) -> anyhow::Result<()> {
    let (mut state, fx) = live_state(name, header, opts)?;
    state.live_upstream = Some(upstream);
    run_on_terminal(state, fx, |tx| {
        Some(tokio::spawn(async move {
            while let Some(ev) = events.recv().await {
                if tx.send(Message::Record(ev)).is_err() {
                    break;
                }
            }
        }))
    })
    .await
}

/// The state of a live view: an empty in-memory session named `name`.
fn live_state(
    name: String,
    header: crate::session::Header,
    opts: &Options,
) -> anyhow::Result<(State, Vec<message::Effect>)> {
    let mut state = initial_state(opts, crossterm::terminal::size().unwrap_or((80, 24)))?;
    let session = crate::session::read::Session {
        path: name,
        header,
        ..Default::default()
    };
    let fx = state.show_source(
        Arc::new(crate::session::index::SessionSource::from_session(session)),
        true,
    );
    Ok((state, fx))
}

/// Takes the terminal ([`TerminalGuard`]), runs the inspector until the user quits, and
/// restores the terminal. `feed` may start a task that sends [`Message`]s (a live proxy); it
/// is aborted on return.
async fn run_on_terminal(
    state: State,
    fx: Vec<message::Effect>,
    feed: impl FnOnce(
        tokio::sync::mpsc::UnboundedSender<Message>,
    ) -> Option<tokio::task::JoinHandle<()>>,
) -> anyhow::Result<()> {
    let (_guard, terminal) = TerminalGuard::enter()?;
    let mut tui = Tui::new(terminal, state, false).with_clipboard(osc52);
    let feeder = feed(tui.sender());
    tui.run_effects(fx);
    let r = tui.run(EventStream::new()).await;
    if let Some(f) = feeder {
        f.abort();
    }
    r.map_err(Into::into)
}
