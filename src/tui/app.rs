//! The controller: one UI task owns the [`State`]; input arrives as a stream, background work
//! reports through one message queue, and a frame is drawn only when the queue has drained, so
//! a burst of messages (summaries, live SSE updates) costs one frame.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crossterm::event::Event;
use futures::{Stream, StreamExt};
use ratatui::Terminal;
use ratatui::backend::Backend;
use tokio::sync::mpsc;

use super::analysis;
use super::message::{Effect, Message};
use super::source::SessionSource;
use super::state::State;

/// Runs background work: on tokio's blocking pool, or inline (tests: deterministic order).
#[derive(Clone)]
pub struct Worker {
    tx: mpsc::UnboundedSender<Message>,
    inline: bool,
    pending: Arc<AtomicUsize>,
    /// Row of the latest analysis request + 1 (older requests still queued are skipped, so
    /// holding `j` does not queue one decode per row passed).
    wanted: Arc<AtomicUsize>,
    /// The state's current epoch: row work for an older session stops early.
    epoch: Arc<AtomicU64>,
}

impl Worker {
    fn spawn(&self, f: impl FnOnce(&mpsc::UnboundedSender<Message>) + Send + 'static) {
        if self.inline {
            f(&self.tx);
            return;
        }
        self.pending.fetch_add(1, Ordering::SeqCst);
        let tx = self.tx.clone();
        let pending = self.pending.clone();
        tokio::task::spawn_blocking(move || {
            f(&tx);
            pending.fetch_sub(1, Ordering::SeqCst);
        });
    }

    /// Background tasks still running.
    pub fn pending(&self) -> usize {
        self.pending.load(Ordering::SeqCst)
    }
}

/// The inspector application over a ratatui backend.
pub struct Tui<B: Backend> {
    pub terminal: Terminal<B>,
    pub state: State,
    tx: mpsc::UnboundedSender<Message>,
    rx: mpsc::UnboundedReceiver<Message>,
    worker: Worker,
    clipboard: Box<dyn FnMut(&str) + Send>,
    /// Frames drawn so far.
    pub frames: u64,
}

impl<B: Backend> Tui<B> {
    /// A controller over `terminal`. `inline` runs background work synchronously (tests).
    pub fn new(terminal: Terminal<B>, state: State, inline: bool) -> Tui<B> {
        let (tx, rx) = mpsc::unbounded_channel();
        let worker = Worker {
            tx: tx.clone(),
            inline,
            pending: Arc::new(AtomicUsize::new(0)),
            wanted: Arc::new(AtomicUsize::new(0)),
            epoch: Arc::new(AtomicU64::new(0)),
        };
        Tui {
            terminal,
            state,
            tx,
            rx,
            worker,
            clipboard: Box::new(|_| {}),
            frames: 0,
        }
    }

    /// Sets what `y` does with the copied text (the binary writes OSC 52).
    pub fn with_clipboard(mut self, f: impl FnMut(&str) + Send + 'static) -> Self {
        self.clipboard = Box::new(f);
        self
    }

    /// A sender background producers (the live proxy) use to report.
    pub fn sender(&self) -> mpsc::UnboundedSender<Message> {
        self.tx.clone()
    }

    /// Starts effects (from state construction or updates).
    pub fn run_effects(&mut self, effects: Vec<Effect>) {
        let mut queue = effects;
        while !queue.is_empty() {
            for e in std::mem::take(&mut queue) {
                self.effect(e);
            }
            // Inline work reported synchronously: apply it now so its follow-up effects run.
            if self.worker.inline {
                while let Ok(m) = self.rx.try_recv() {
                    queue.extend(self.state.on_message(m));
                }
            }
        }
    }

    fn effect(&mut self, e: Effect) {
        self.worker.epoch.store(self.state.epoch, Ordering::Relaxed);
        match e {
            Effect::Copy(text) => {
                (self.clipboard)(&text);
                self.state.status = Some(format!(
                    "copied {} bytes to the clipboard (OSC 52)",
                    text.len()
                ));
            }
            Effect::Open { epoch, path } => self.worker.spawn(move |tx| {
                let mut progress = |done, total| {
                    let _ = tx.send(Message::IndexProgress { epoch, done, total });
                };
                let result = SessionSource::open(&path, &mut progress)
                    .map(Arc::new)
                    .map_err(|e| format!("{e:#}"));
                let _ = tx.send(Message::Opened { epoch, result });
            }),
            Effect::Summarize { epoch, rows } => {
                let Some(src) = self.state.session.as_ref().map(|s| s.source.clone()) else {
                    return;
                };
                let current = self.worker.epoch.clone();
                self.worker.spawn(move |tx| {
                    let items = rows
                        .take_while(|_| current.load(Ordering::Relaxed) == epoch)
                        .map(|row| (row, src.quick_summary(row)))
                        .collect();
                    let _ = tx.send(Message::Summaries { epoch, items });
                });
            }
            Effect::Diagnose { epoch, rows } => {
                let Some(src) = self.state.session.as_ref().map(|s| s.source.clone()) else {
                    return;
                };
                let current = self.worker.epoch.clone();
                self.worker.spawn(move |tx| {
                    let mut batch = Vec::new();
                    let mut sent = std::time::Instant::now();
                    for row in rows {
                        if current.load(Ordering::Relaxed) != epoch {
                            return;
                        }
                        let sum = match src.load(row) {
                            Ok(ex) => {
                                let ctx = analysis::Context {
                                    header: &src.header,
                                    server_render: src.server_render(ex.id),
                                };
                                analysis::summarize_in(&ex, Some(ctx))
                            }
                            Err(e) => analysis::damaged_summary(src.rows[row].id, e),
                        };
                        batch.push((row, sum));
                        if batch.len() >= 256 || sent.elapsed().as_millis() >= 100 {
                            sent = std::time::Instant::now();
                            if tx
                                .send(Message::Summaries {
                                    epoch,
                                    items: std::mem::take(&mut batch),
                                })
                                .is_err()
                            {
                                return;
                            }
                        }
                    }
                    let _ = tx.send(Message::Summaries {
                        epoch,
                        items: batch,
                    });
                });
            }
            Effect::Analyze { epoch, row } => {
                let Some(src) = self.state.session.as_ref().map(|s| s.source.clone()) else {
                    return;
                };
                self.worker.wanted.store(row + 1, Ordering::SeqCst);
                let wanted = self.worker.wanted.clone();
                self.worker.spawn(move |tx| {
                    if wanted.load(Ordering::SeqCst) != row + 1 {
                        return;
                    }
                    let a = match src.load(row) {
                        Ok(ex) => {
                            let id = ex.id;
                            let ctx = analysis::Context {
                                header: &src.header,
                                server_render: src.server_render(id),
                            };
                            analysis::analyze(row, ex, ctx)
                        }
                        Err(e) => {
                            let mut a = analysis::ExchangeAnalysis {
                                row,
                                summary: analysis::damaged_summary(src.rows[row].id, e.clone()),
                                ..Default::default()
                            };
                            a.findings.push(crate::finding::Finding::new(
                                crate::finding::Rule::SessionDamaged,
                                format!("{}: {e}", src.name),
                                "the other lines are intact; re-record this exchange",
                            ));
                            a
                        }
                    };
                    let _ = tx.send(Message::Analyzed {
                        epoch,
                        row,
                        analysis: Arc::new(a),
                    });
                });
            }
        }
    }

    /// Applies every queued message (non-blocking) and draws when something changed. Returns
    /// whether a frame was drawn. For benchmarks and embedding; [`Tui::run`] does the same in
    /// its loop.
    pub fn pump(&mut self) -> std::io::Result<bool> {
        let mut dirty = false;
        while let Ok(m) = self.rx.try_recv() {
            let fx = self.state.on_message(m);
            self.run_effects(fx);
            dirty = true;
        }
        if dirty {
            self.draw()?;
        }
        Ok(dirty)
    }

    /// Handles one input event and draws the resulting frame.
    pub fn input(&mut self, ev: &Event) -> std::io::Result<()> {
        let fx = self.state.on_event(ev);
        self.run_effects(fx);
        self.draw()
    }

    /// Background tasks still running.
    pub fn pending(&self) -> usize {
        self.worker.pending()
    }

    /// Draws one frame now.
    pub fn draw(&mut self) -> std::io::Result<()> {
        let state = &self.state;
        self.terminal
            .draw(|f| super::view::draw(state, f))
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        self.frames += 1;
        Ok(())
    }

    /// Runs until quit, or until `input` ends and background work is done (tests).
    ///
    /// The loop: drain the message queue, draw if anything changed, then wait with a biased
    /// `select!` on (1) messages, (2) input, (3) SIGINT.
    pub async fn run<S>(&mut self, input: S) -> std::io::Result<()>
    where
        S: Stream<Item = std::io::Result<Event>> + Unpin,
    {
        let mut input = input.fuse();
        let mut input_done = false;
        let mut dirty = true;
        if let Ok(sz) = self.terminal.size() {
            self.state.size = (sz.width, sz.height);
        }
        let ctrl_c = tokio::signal::ctrl_c();
        tokio::pin!(ctrl_c);
        loop {
            while let Ok(m) = self.rx.try_recv() {
                let fx = self.state.on_message(m);
                self.run_effects(fx);
                dirty = true;
            }
            if self.state.quit {
                break;
            }
            if dirty {
                self.draw()?;
                dirty = false;
            }
            if input_done && self.worker.pending() == 0 && self.rx.is_empty() {
                break;
            }
            tokio::select! {
                biased;
                Some(m) = self.rx.recv() => {
                    let fx = self.state.on_message(m);
                    self.run_effects(fx);
                    dirty = true;
                }
                ev = input.next(), if !input_done => match ev {
                    Some(Ok(ev)) => {
                        let fx = self.state.on_event(&ev);
                        self.run_effects(fx);
                        dirty = true;
                    }
                    Some(Err(e)) => return Err(e),
                    None => input_done = true,
                },
                _ = &mut ctrl_c => self.state.quit = true,
            }
        }
        Ok(())
    }
}
