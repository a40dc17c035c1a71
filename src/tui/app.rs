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
use super::state::State;
use crate::session::index::SessionSource;

/// How urgent a background job is: lower runs first. Jobs of one class take turns, one slice
/// each, so a long job (listing 2,000 rows) does not hold back a short one (the selected
/// exchange's analysis).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Priority {
    /// Indexing a file the user asked to open.
    Open,
    /// What the screen waits for: list rows, the selected exchange.
    Screen,
    /// Findings counts for every row.
    Background,
}

/// A unit of background work, run in slices: each call does a bounded piece (a few rows) and
/// returns true while more remains, so the worker can take a more urgent job in between.
type Slice = Box<dyn FnMut(&mpsc::UnboundedSender<Message>) -> bool + Send>;

struct Job {
    priority: Priority,
    /// Submission order; a job that yields gets a new one (round robin within a priority).
    seq: u64,
    run: Slice,
}

impl PartialEq for Job {
    fn eq(&self, o: &Job) -> bool {
        (self.priority, self.seq) == (o.priority, o.seq)
    }
}
impl Eq for Job {}
impl PartialOrd for Job {
    fn partial_cmp(&self, o: &Job) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Job {
    /// Max-heap order: the most urgent, then the oldest, is greatest.
    fn cmp(&self, o: &Job) -> std::cmp::Ordering {
        (o.priority, o.seq).cmp(&(self.priority, self.seq))
    }
}

/// Runs background work on one dedicated thread (most urgent slice first; the UI task keeps
/// the other core), or inline (tests: deterministic order). Submitting is a channel send: the
/// UI task never waits on a lock the worker holds.
#[derive(Clone)]
pub struct Worker {
    tx: mpsc::UnboundedSender<Message>,
    /// `None` when inline.
    jobs: Option<std::sync::mpsc::Sender<Job>>,
    seq: Arc<AtomicU64>,
    pending: Arc<AtomicUsize>,
    /// Row of the latest analysis request + 1 (older requests still queued are skipped, so
    /// holding `j` does not queue one decode per row passed).
    wanted: Arc<AtomicUsize>,
    /// The state's current epoch: row work for an older session stops early.
    epoch: Arc<AtomicU64>,
}

impl Worker {
    fn new(tx: mpsc::UnboundedSender<Message>, inline: bool) -> Worker {
        let pending = Arc::new(AtomicUsize::new(0));
        let jobs = (!inline).then(|| {
            let (jobs, queue) = std::sync::mpsc::channel::<Job>();
            let (tx, pending) = (tx.clone(), pending.clone());
            std::thread::Builder::new()
                .name("toolscope-analysis".into())
                .spawn(move || run_jobs(queue, &tx, &pending))
                .expect("spawn the analysis thread");
            jobs
        });
        Worker {
            tx,
            jobs,
            seq: Arc::new(AtomicU64::new(0)),
            pending,
            wanted: Arc::new(AtomicUsize::new(0)),
            epoch: Arc::new(AtomicU64::new(0)),
        }
    }

    fn inline(&self) -> bool {
        self.jobs.is_none()
    }

    /// Queues `run` (called until it returns false), or runs it to the end when inline.
    fn submit(
        &self,
        priority: Priority,
        mut run: impl FnMut(&mpsc::UnboundedSender<Message>) -> bool + Send + 'static,
    ) {
        let Some(jobs) = &self.jobs else {
            while run(&self.tx) {}
            return;
        };
        self.pending.fetch_add(1, Ordering::SeqCst);
        let job = Job {
            priority,
            seq: self.seq.fetch_add(1, Ordering::Relaxed),
            run: Box::new(run),
        };
        if jobs.send(job).is_err() {
            self.pending.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// A one-piece job.
    fn spawn(
        &self,
        priority: Priority,
        f: impl FnOnce(&mpsc::UnboundedSender<Message>) + Send + 'static,
    ) {
        let mut f = Some(f);
        self.submit(priority, move |tx| {
            if let Some(f) = f.take() {
                f(tx);
            }
            false
        });
    }

    /// Background tasks still running.
    pub fn pending(&self) -> usize {
        self.pending.load(Ordering::SeqCst)
    }
}

/// The worker thread: takes every queued job, runs one slice of the most urgent, repeats. Ends
/// when the [`Worker`]s are gone.
fn run_jobs(
    queue: std::sync::mpsc::Receiver<Job>,
    tx: &mpsc::UnboundedSender<Message>,
    pending: &AtomicUsize,
) {
    let mut heap = std::collections::BinaryHeap::new();
    let mut seq = u64::MAX / 2;
    loop {
        if heap.is_empty() {
            match queue.recv() {
                Ok(j) => heap.push(j),
                Err(_) => return,
            }
        }
        heap.extend(queue.try_iter());
        let Some(mut job) = heap.pop() else { continue };
        if (job.run)(tx) {
            seq += 1;
            job.seq = seq;
            heap.push(job);
        } else {
            pending.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// Files larger than this are counted but not analysed for the browser's worst finding.
const SURVEY_ANALYSE_MAX: u64 = 32 << 20;

/// Reads a session file for the browser: exchange count, label, and (for files up to
/// [`SURVEY_ANALYSE_MAX`]) the worst finding over its exchanges and damaged lines, analysed as
/// `check` analyses them.
pub fn survey(path: &std::path::Path) -> super::screen::browser::Survey {
    use crate::analysis::{Depth, analyse};
    let src = match SessionSource::open(path, &mut |_, _| {}) {
        Ok(s) => s,
        Err(e) => {
            return super::screen::browser::Survey {
                note: Some(format!("{e:#}")),
                ..Default::default()
            };
        }
    };
    let mut out = super::screen::browser::Survey {
        exchanges: src.len(),
        label: src.header.source.clone().unwrap_or_default(),
        ..Default::default()
    };
    let mut labels: Vec<String> = Vec::new();
    let mut rules: Vec<crate::finding::Rule> = src
        .warnings
        .iter()
        .map(|_| crate::finding::Rule::SessionDamaged)
        .collect();
    let deep = src.size <= SURVEY_ANALYSE_MAX;
    for row in 0..src.len() {
        match src.load(row) {
            Ok(ex) => {
                if let Some(l) = ex.label.as_deref() {
                    let l = l.split(':').next().unwrap_or(l).to_owned();
                    if !labels.contains(&l) {
                        labels.push(l);
                    }
                }
                if deep {
                    let anns = src.annotations_of(ex.id);
                    rules.extend(
                        analyse(
                            ex,
                            crate::analysis::index::context(&src, &anns),
                            Depth::Findings,
                        )
                        .summary
                        .rules,
                    );
                }
            }
            Err(_) => rules.push(crate::finding::Rule::SessionDamaged),
        }
    }
    if !labels.is_empty() {
        out.label = labels.join(",");
    }
    if !deep {
        out.note = Some("findings not counted (file over 32 MiB): open it".into());
    }
    out.findings = rules.len();
    out.worst = rules.iter().copied().max_by_key(|r| r.severity());
    out
}

/// The inspector application over a ratatui backend.
pub struct Tui<B: Backend> {
    pub terminal: Terminal<B>,
    pub state: State,
    tx: mpsc::UnboundedSender<Message>,
    rx: mpsc::UnboundedReceiver<Message>,
    worker: Worker,
    clipboard: Box<dyn FnMut(&str) + Send>,
    /// Stops the running what-if job ([`Effect::CancelTry`]).
    try_stop: Option<tokio::sync::oneshot::Sender<()>>,
    /// Frames drawn so far.
    pub frames: u64,
}

impl<B: Backend> Tui<B> {
    /// A controller over `terminal`. `inline` runs background work synchronously (tests).
    pub fn new(terminal: Terminal<B>, state: State, inline: bool) -> Tui<B> {
        let (tx, rx) = mpsc::unbounded_channel();
        let worker = Worker::new(tx.clone(), inline);
        Tui {
            terminal,
            state,
            tx,
            rx,
            worker,
            clipboard: Box::new(|_| {}),
            try_stop: None,
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
            if self.worker.inline() {
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
            Effect::Open { epoch, path } => self.worker.spawn(Priority::Open, move |tx| {
                let mut progress = |done, total| {
                    let _ = tx.send(Message::IndexProgress { epoch, done, total });
                };
                let result = SessionSource::open(&path, &mut progress)
                    .map(Arc::new)
                    .map_err(|e| format!("{e:#}"));
                let _ = tx.send(Message::Opened { epoch, result });
            }),
            Effect::Survey { paths } => {
                let mut paths = paths.into_iter();
                self.worker.submit(Priority::Background, move |tx| {
                    let Some(path) = paths.next() else {
                        return false;
                    };
                    let survey = survey(&path);
                    tx.send(Message::Surveyed { path, survey }).is_ok() && paths.len() > 0
                });
            }
            Effect::Summarize { epoch, rows } => {
                let Some(src) = self.state.session.as_ref().map(|s| s.source.clone()) else {
                    return;
                };
                let current = self.worker.epoch.clone();
                let mut rows = rows;
                // 64 quick rows (~a few ms) per slice.
                self.worker.submit(Priority::Screen, move |tx| {
                    if current.load(Ordering::Relaxed) != epoch {
                        return false;
                    }
                    let items: Vec<_> = rows
                        .by_ref()
                        .take(64)
                        .map(|row| {
                            let id = src.rows.get(row).and_then(|r| r.id);
                            (
                                row,
                                crate::analysis::index::row_summary(id, src.light_load(row)),
                            )
                        })
                        .collect();
                    !items.is_empty()
                        && tx.send(Message::Summaries { epoch, items }).is_ok()
                        && !rows.is_empty()
                });
            }
            Effect::Diagnose { epoch, rows } => {
                let Some(src) = self.state.session.as_ref().map(|s| s.source.clone()) else {
                    return;
                };
                let current = self.worker.epoch.clone();
                let mut rows = rows;
                let mut batch = Vec::new();
                let mut sent = std::time::Instant::now();
                // One row per slice (an exchange's analysis can take tens of ms); a batch is
                // reported every 100 ms and at the end.
                self.worker.submit(Priority::Background, move |tx| {
                    if current.load(Ordering::Relaxed) != epoch {
                        return false;
                    }
                    let next = rows.next();
                    if let Some(row) = next {
                        let sum = match src.load(row) {
                            Ok(ex) => {
                                let anns = src.annotations_of(ex.id);
                                analysis::summarize(
                                    ex,
                                    crate::analysis::index::context(&src, &anns),
                                )
                            }
                            Err(e) => analysis::damaged_summary(src.rows[row].id, e),
                        };
                        batch.push((row, sum));
                    }
                    let done = next.is_none() || rows.is_empty();
                    if (done || sent.elapsed().as_millis() >= 100) && !batch.is_empty() {
                        sent = std::time::Instant::now();
                        let items = std::mem::take(&mut batch);
                        if tx.send(Message::Summaries { epoch, items }).is_err() {
                            return false;
                        }
                    }
                    !done
                });
            }
            Effect::Loop { epoch } => {
                let Some(src) = self.state.session.as_ref().map(|s| s.source.clone()) else {
                    return;
                };
                self.worker.spawn(Priority::Screen, move |tx| {
                    let data = Arc::new(super::screen::loop_view::compute(&src));
                    let _ = tx.send(Message::Looped { epoch, data });
                });
            }
            Effect::Try(job) => self.start_try(job),
            Effect::CancelTry => {
                if let Some(stop) = self.try_stop.take() {
                    let _ = stop.send(());
                }
            }
            Effect::TryDiff(job) => self.worker.spawn(Priority::Screen, move |tx| {
                let report =
                    super::screen::whatif::TryReport::Diffed(super::screen::whatif::diff(&job));
                let _ = tx.send(Message::Try {
                    epoch: job.epoch,
                    job: job.job,
                    report,
                });
            }),
            Effect::Analyze { epoch, row } => {
                let Some(src) = self.state.session.as_ref().map(|s| s.source.clone()) else {
                    return;
                };
                self.worker.wanted.store(row + 1, Ordering::SeqCst);
                let wanted = self.worker.wanted.clone();
                self.worker.spawn(Priority::Screen, move |tx| {
                    if wanted.load(Ordering::SeqCst) != row + 1 {
                        return;
                    }
                    let a = match src.load(row) {
                        Ok(ex) => {
                            let anns = src.annotations_of(ex.id);
                            analysis::analyze(row, ex, crate::analysis::index::context(&src, &anns))
                        }
                        Err(e) => {
                            let r = src.rows[row];
                            analysis::damaged(row, r.id, &src.name, r.line, e)
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

    /// Starts a what-if job: a task on the runtime, not the analysis thread (the runs wait on
    /// the engine); a job still running is stopped first.
    fn start_try(&mut self, job: Box<super::screen::whatif::TryJob>) {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        if let Some(old) = self.try_stop.replace(stop) {
            let _ = old.send(());
        }
        let tx = self.tx.clone();
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            // driven without a runtime (Tui::input from a plain thread): say so, do not panic
            let _ = tx.send(Message::Try {
                epoch: job.epoch,
                job: job.job,
                report: super::screen::whatif::TryReport::Done(Err(
                    "what-if runs need the async runtime (Tui::run)".into(),
                )),
            });
            return;
        };
        rt.spawn(super::screen::whatif::run(
            job,
            async move {
                let _ = stopped.await;
            },
            tx,
        ));
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
            .draw(|f| super::draw::draw(state, f))
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
            if input_done && self.worker.pending() == 0 && self.rx.is_empty() && !self.state.busy()
            {
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
