//! The recording core shared by the proxy and `send`: exchange ids, in-flight exchanges, the
//! session writer thread, live events, and the llama-server render annotations.
//!
//! Every exchange is built in memory while it runs ([`ActiveExchange`]) and written as one
//! JSON line when it ends — complete, cut by the client (its drop), or failed upstream. Lines
//! go through one writer thread that owns the [`SessionWriter`], so concurrent exchanges never
//! mix and file I/O stays off the client's path; each line is flushed when written.
//!
//! The client's path does the least per chunk: [`ActiveExchange::chunk`] appends the bytes to
//! one growing [`Spill`] and notes (end offset, receive time in µs). Splitting that buffer into
//! [`Chunk`]s (UTF-8 check, text or base64), building the [`Exchange`], the
//! [`RecordEvent::Ended`] event and the JSON encoding all happen on the writer thread.
//!
//! Memory is bounded per exchange: request and response bodies (and the chunk marks) stay in
//! memory up to [`crate::record::spill::SPILL_AT`] (1 MiB) each, then move to an unlinked
//! temporary file beside the session, and the writer streams them into the line in 64 KiB
//! pieces. Live events carry bodies only while they are in memory.
//!
//! Shutdown: [`Recorder::cut_in_flight`] marks every exchange still running, when its guard
//! is dropped, as [`Outcome::Shutdown`] with what it received so far.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::Value;
use tokio::sync::{Notify, mpsc};

use super::annotate::{Enrichment, Llama, ollama_model};
use super::now_rfc3339;
use crate::record::client::ServerClient;
use crate::record::spill::{Spill, mark_bytes, write_body_json, write_chunks_json};
use crate::session::redact::{redact_query, redact_value};
use crate::session::{
    Annotation, Api, Body, Chunk, Exchange, Header, Line, Outcome, Request, Response, SessionWriter,
};

/// What the recorder reports live (for the TUI's live view and `--headless` printing).
#[derive(Debug, Clone)]
pub enum RecordEvent {
    /// A request arrived; its exchange id is reserved. `request` is already redacted.
    Started {
        id: u64,
        started: String,
        request: Request,
    },
    /// Response status and headers arrived after `ttfb_us` microseconds.
    Head {
        id: u64,
        status: u16,
        headers: Vec<(String, String)>,
        ttfb_us: u64,
    },
    /// One body chunk, exactly as forwarded to the client, `t_us` after the request start.
    /// Dropped (never blocks the client) when the event channel is full.
    Chunk { id: u64, t_us: u64, bytes: Bytes },
    /// The exchange ended and was queued for writing (complete or partial).
    Ended(Box<Exchange>),
    /// A later fact about an exchange (llama-server render), queued for writing.
    Annotated(Annotation),
    /// Something went wrong in the recorder itself (e.g. the session file is not writable).
    Warning(String),
}

/// Recorder settings.
#[derive(Debug, Clone, Default)]
pub struct RecorderConfig {
    /// Session file (created with `header`, or appended to when it exists).
    pub session: PathBuf,
    /// Store secret headers verbatim (default: redacted, see [`crate::session::redact`]).
    pub keep_secrets: bool,
    /// `label` for every exchange (`send`), or `None` for proxied traffic.
    pub label: Option<String>,
    /// Upstream base URL for the `/apply-template` + `/tokenize` annotations; set only when the
    /// upstream is llama-server.
    pub render_from: Option<String>,
    /// llama-server's BOS text (`/props` `bos_token`): a slot's prompt in `/slots` may carry it
    /// in front of the rendered prompt.
    pub bos_token: Option<String>,
    /// Upstream base URL to retry engine detection against after each exchange while the
    /// engine is unknown (the server was still loading when the recorder started). What is
    /// learnt is written as an [`Annotation::Engine`]; for llama-server the annotations then
    /// start.
    pub learn_engine_from: Option<String>,
    /// `proxy --regenerate`: after a chat exchange whose raw text was not captured, re-run its
    /// rendered prompt through llama-server `/completion` (off the client's path), record that
    /// exchange (label `regenerate:<id>`) and an [`Annotation::RawText`] with its verdict.
    pub regenerate: bool,
    /// Ollama upstream base URL: after each `/api/chat` / `/api/generate` exchange, the
    /// model's `POST /api/show` (fetched once per model, off the client's path) is written as
    /// an [`Annotation::OllamaShow`] — the template source for Ollama exchanges.
    pub ollama_show_from: Option<String>,
    /// `proxy --regenerate` on an upstream that is not llama-server: `(base URL, engine kind)`
    /// for `vllm` or `ollama` (engines that render a chat request themselves;
    /// [`crate::record::regenerate::regenerate_on_engine`]).
    pub regenerate_on: Option<(String, crate::session::ServerKind)>,
    /// `proxy --otlp`: the live trace exporter each ended exchange is offered to (from the
    /// writer thread, never the client's path; [`crate::record::otlp`]).
    pub otlp: Option<crate::record::otlp::Otlp>,
}

enum WriterMsg {
    Line(Box<Line>),
    /// An ended exchange with its response body still raw: the writer thread splits `body`
    /// into chunks (`marks`: end offset, receive µs) or stores it whole, emits
    /// [`RecordEvent::Ended`] and writes the line.
    Ended(Box<RawExchange>),
    Flush(std::sync::mpsc::Sender<()>),
}

struct RawExchange {
    ex: Exchange,
    /// The request body as received.
    req: Spill,
    /// The response body as forwarded.
    body: Spill,
    /// `Some` for `text/event-stream`: per chunk, its end offset in `body` and receive µs
    /// ([`mark_bytes`] records).
    marks: Option<Spill>,
    /// `proxy --otlp`: where the exchange's span goes.
    trace: Option<crate::record::otlp::ExchangeTrace>,
}

/// Stand-ins serialized where the streamed bodies go; JSON text never contains them outside
/// a string, and inside a string their quotes would be escaped.
const REQ_MARK: &str = "\u{0}toolscope:request-body\u{0}";
const RESP_MARK: &str = "\u{0}toolscope:response-body\u{0}";

impl RawExchange {
    /// The exchange for live events: bodies and chunks filled in when they are still in
    /// memory (at most [`crate::record::spill::SPILL_AT`] each), left empty otherwise.
    fn event_exchange(&self) -> Exchange {
        let mut ex = self.ex.clone();
        ex.request.body = self.req.body_in_memory().unwrap_or_default();
        if let Some(r) = ex.response.as_mut() {
            match (&self.marks, self.body.in_memory()) {
                (Some(marks), Some(body)) => {
                    r.chunks = marks.in_memory().map(|m| {
                        let mut start = 0usize;
                        m.chunks_exact(16)
                            .map(|rec| {
                                let end =
                                    u64::from_le_bytes(rec[..8].try_into().expect("8")) as usize;
                                let t_us = u64::from_le_bytes(rec[8..].try_into().expect("8"));
                                let data = Body::from_bytes(&body[start.min(end)..end]);
                                start = end;
                                Chunk { t_us, data }
                            })
                            .collect()
                    });
                }
                (None, Some(body)) => r.body = Some(Body::from_bytes(body)),
                _ => {}
            }
        }
        ex
    }

    /// Writes the exchange as one session line, streaming the bodies from their spills
    /// (byte-identical to serializing the whole [`Exchange`]).
    fn write(mut self, writer: &mut SessionWriter) -> std::io::Result<()> {
        let mut ex = std::mem::take(&mut self.ex);
        ex.request.body = Body::Text {
            text: REQ_MARK.into(),
        };
        let resp_mark = Body::Text {
            text: RESP_MARK.into(),
        };
        let resp_token = match (ex.response.as_mut(), self.marks.is_some()) {
            (Some(r), true) => {
                let c = vec![Chunk {
                    t_us: 0,
                    data: resp_mark,
                }];
                let t = serde_json::to_string(&c).map_err(std::io::Error::other)?;
                r.chunks = Some(c);
                Some(t)
            }
            (Some(r), false) => {
                let t = serde_json::to_string(&resp_mark).map_err(std::io::Error::other)?;
                r.body = Some(resp_mark);
                Some(t)
            }
            (None, _) => None,
        };
        let req_token = serde_json::to_string(&Body::Text {
            text: REQ_MARK.into(),
        })
        .map_err(std::io::Error::other)?;
        let line =
            serde_json::to_string(&Line::Exchange(Box::new(ex))).map_err(std::io::Error::other)?;
        let a = line
            .find(&req_token)
            .ok_or_else(|| std::io::Error::other("request body stand-in not found"))?;
        let after_req = a + req_token.len();
        let b = match &resp_token {
            Some(t) => Some(
                line[after_req..]
                    .find(t.as_str())
                    .map(|i| after_req + i)
                    .ok_or_else(|| std::io::Error::other("response stand-in not found"))?,
            ),
            None => None,
        };
        let RawExchange {
            mut req,
            mut body,
            marks,
            ..
        } = self;
        writer.append_with(|w| {
            w.write_all(&line.as_bytes()[..a])?;
            write_body_json(w, &mut req)?;
            match (b, &resp_token) {
                (Some(b), Some(t)) => {
                    w.write_all(&line.as_bytes()[after_req..b])?;
                    match marks {
                        Some(mut m) => write_chunks_json(w, &mut body, &mut m)?,
                        None => write_body_json(w, &mut body)?,
                    }
                    w.write_all(&line.as_bytes()[b + t.len()..])
                }
                _ => w.write_all(&line.as_bytes()[after_req..]),
            }
        })
    }
}

pub(super) struct Inner {
    pub(super) cfg: RecorderConfig,
    pub(super) next_id: AtomicU64,
    writer: Mutex<Option<std::sync::mpsc::Sender<WriterMsg>>>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    pub(super) events: Option<mpsc::Sender<RecordEvent>>,
    /// Exchanges started and not yet queued, plus annotation fetches pending.
    busy: AtomicUsize,
    idle: Notify,
    /// The llama-server upstream for annotations (render, slots, regeneration), once known.
    pub(super) llama: std::sync::RwLock<Option<Llama>>,
    /// Where to retry engine detection while it is unknown; `None` once learnt.
    pub(super) learn_from: Mutex<Option<String>>,
    /// `(base, engine kind)` of a vLLM or Ollama upstream to regenerate on (`--regenerate`).
    pub(super) regen_on: std::sync::RwLock<Option<(String, crate::session::ServerKind)>>,
    /// A detection is running (at most one at a time).
    pub(super) learning: std::sync::atomic::AtomicBool,
    /// Lines written (exchanges + annotations), for tests and benches.
    written: Arc<AtomicU64>,
    /// The runtime the recorder was opened on (late events from the writer thread).
    pub(super) rt: Option<tokio::runtime::Handle>,
    /// Set by [`Recorder::cut_in_flight`]: exchanges dropped from now on were cut by shutdown.
    cut: std::sync::atomic::AtomicBool,
    /// Exchanges recorded as [`Outcome::Shutdown`].
    cut_count: AtomicUsize,
    /// Folder for spilled bodies (the session's).
    spill_dir: PathBuf,
    /// Ollama `/api/show` answers by model (trimmed) or why they failed: fetched once each.
    pub(super) ollama_shows:
        tokio::sync::Mutex<std::collections::HashMap<String, Result<Value, String>>>,
}

/// A cheap-to-clone handle on one session being recorded.
#[derive(Clone)]
pub struct Recorder {
    pub(super) inner: Arc<Inner>,
}

/// Sends `ev` without blocking: chunks are best-effort (dropped when the channel is full);
/// start/head/end/annotations must arrive, so a full channel hands them to a task on `rt`.
pub(super) fn emit_to(
    tx: &mpsc::Sender<RecordEvent>,
    rt: Option<&tokio::runtime::Handle>,
    ev: RecordEvent,
) {
    match tx.try_send(ev) {
        Ok(()) => {}
        Err(mpsc::error::TrySendError::Full(ev)) if !matches!(ev, RecordEvent::Chunk { .. }) => {
            let tx = tx.clone();
            let rt = tokio::runtime::Handle::try_current()
                .ok()
                .or_else(|| rt.cloned());
            if let Some(h) = rt {
                h.spawn(async move {
                    let _ = tx.send(ev).await;
                });
            }
        }
        Err(_) => {}
    }
}

impl Recorder {
    /// Opens (or appends to) the session file and starts the writer thread.
    ///
    /// Errors: the file cannot be created, or it exists and is not a readable session.
    pub fn open(
        cfg: RecorderConfig,
        header: &Header,
        events: Option<mpsc::Sender<RecordEvent>>,
    ) -> anyhow::Result<Recorder> {
        let mut writer = SessionWriter::open(&cfg.session, header).map_err(|e| {
            anyhow::anyhow!(
                "{}: cannot open session for writing: {e:#}",
                cfg.session.display()
            )
        })?;
        let first_id = writer.next_id();
        let (tx, rx) = std::sync::mpsc::channel::<WriterMsg>();
        let written = Arc::new(AtomicU64::new(0));
        let written2 = written.clone();
        let events2 = events.clone();
        let rt = tokio::runtime::Handle::try_current().ok();
        let rt2 = rt.clone();
        let path = cfg.session.clone();
        let otlp = cfg.otlp.clone();
        let thread = std::thread::Builder::new()
            .name("toolscope-session-writer".into())
            .spawn(move || {
                let mut failed = false;
                for msg in rx {
                    let result = match msg {
                        WriterMsg::Line(line) => writer.append(&line),
                        WriterMsg::Ended(mut raw) => {
                            let ex =
                                (events2.is_some() || otlp.is_some()).then(|| raw.event_exchange());
                            if let (Some(o), Some(ex)) = (&otlp, &ex) {
                                o.offer(ex.clone(), raw.trace.take());
                            }
                            if let (Some(ev), Some(ex)) = (&events2, ex) {
                                emit_to(ev, rt2.as_ref(), RecordEvent::Ended(Box::new(ex)));
                            }
                            raw.write(&mut writer)
                        }
                        WriterMsg::Flush(done) => {
                            let _ = done.send(());
                            continue;
                        }
                    };
                    {
                        match result {
                            Ok(()) => {
                                written2.fetch_add(1, Ordering::SeqCst);
                            }
                            Err(e) if !failed => {
                                failed = true;
                                let msg =
                                    format!("{}: writing the session failed: {e}", path.display());
                                crate::errln!("toolscope: {msg}");
                                if let Some(ev) = &events2 {
                                    let _ = ev.try_send(RecordEvent::Warning(msg));
                                }
                            }
                            Err(_) => {}
                        }
                    }
                }
            })?;
        let llama = cfg.render_from.as_deref().map(|base| Llama {
            client: ServerClient::new(base),
            bos: cfg.bos_token.clone(),
            template: header
                .props
                .as_ref()
                .and_then(|p| p.get("chat_template"))
                .and_then(Value::as_str)
                .map(str::to_owned),
        });
        let learn_from = cfg.learn_engine_from.clone().filter(|_| llama.is_none());
        let regen_on = cfg.regenerate_on.clone().filter(|_| cfg.regenerate);
        let spill_dir = cfg
            .session
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), Path::to_owned);
        Ok(Recorder {
            inner: Arc::new(Inner {
                cfg,
                next_id: AtomicU64::new(first_id),
                writer: Mutex::new(Some(tx)),
                thread: Mutex::new(Some(thread)),
                events,
                busy: AtomicUsize::new(0),
                idle: Notify::new(),
                llama: std::sync::RwLock::new(llama),
                learn_from: Mutex::new(learn_from),
                regen_on: std::sync::RwLock::new(regen_on),
                learning: std::sync::atomic::AtomicBool::new(false),
                written,
                rt,
                cut: std::sync::atomic::AtomicBool::new(false),
                cut_count: AtomicUsize::new(0),
                spill_dir,
                ollama_shows: Default::default(),
            }),
        })
    }

    /// From now on, every exchange still running whose guard is dropped is recorded as
    /// [`Outcome::Shutdown`] (the proxy calls this when the grace period ends, then drops the
    /// connections).
    pub fn cut_in_flight(&self) {
        self.inner.cut.store(true, Ordering::SeqCst);
    }

    /// Exchanges recorded as [`Outcome::Shutdown`] so far.
    pub fn cut_count(&self) -> usize {
        self.inner.cut_count.load(Ordering::SeqCst)
    }

    /// Exchanges started and not yet queued for writing, plus pending annotation fetches.
    pub fn in_flight(&self) -> usize {
        self.inner.busy.load(Ordering::SeqCst)
    }

    /// The live trace exporter (`proxy --otlp`), when there is one.
    pub fn otlp(&self) -> Option<&crate::record::otlp::Otlp> {
        self.inner.cfg.otlp.as_ref()
    }

    /// The session file.
    pub fn session_path(&self) -> &Path {
        &self.inner.cfg.session
    }

    /// Number of lines (exchanges and annotations) written so far.
    pub fn lines_written(&self) -> u64 {
        self.inner.written.load(Ordering::SeqCst)
    }

    pub(super) fn queue(&self, line: Line) {
        if let Ok(guard) = self.inner.writer.lock()
            && let Some(tx) = guard.as_ref()
        {
            let _ = tx.send(WriterMsg::Line(Box::new(line)));
        }
    }

    pub(super) fn emit(&self, ev: RecordEvent) {
        if let Some(tx) = &self.inner.events {
            emit_to(tx, self.inner.rt.as_ref(), ev);
        }
    }

    pub(super) fn busy_inc(&self) {
        self.inner.busy.fetch_add(1, Ordering::SeqCst);
    }

    pub(super) fn busy_dec(&self) {
        if self.inner.busy.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.inner.idle.notify_waiters();
        }
    }

    /// Starts an exchange for a request whose body is already whole (method, path with query,
    /// headers as received, body): [`Recorder::begin_request`], the body, and
    /// [`ActiveExchange::request_done`].
    pub fn begin(
        &self,
        method: &str,
        path: &str,
        headers: Vec<(String, String)>,
        body: &[u8],
    ) -> ActiveExchange {
        let mut a = self.begin_request(method, path, headers);
        a.request_sink().push(body);
        a.request_done();
        a
    }

    /// Starts an exchange as soon as a request's head arrives; its body follows through
    /// [`ActiveExchange::request_sink`]. Headers and secret query values are redacted here
    /// unless `keep_secrets` ([`crate::session::redact`]). The returned guard records the
    /// exchange when finished, or as [`Outcome::ClientDisconnected`] when dropped unfinished
    /// ([`Outcome::Shutdown`] after [`Recorder::cut_in_flight`]).
    pub fn begin_request(
        &self,
        method: &str,
        path: &str,
        headers: Vec<(String, String)>,
    ) -> ActiveExchange {
        let start = Instant::now();
        let id = self.inner.next_id.fetch_add(1, Ordering::SeqCst);
        let headers = if self.inner.cfg.keep_secrets {
            headers
        } else {
            headers
                .into_iter()
                .map(|(k, v)| {
                    let v = redact_value(&k, &v);
                    (k, v)
                })
                .collect()
        };
        let path = if self.inner.cfg.keep_secrets {
            path.to_owned()
        } else {
            redact_query(path).into_owned()
        };
        let request = Request {
            method: method.to_owned(),
            path,
            headers,
            body: Body::default(),
        };
        let started = now_rfc3339();
        self.busy_inc();
        ActiveExchange {
            rec: self.clone(),
            start,
            ex: Some(Exchange {
                id,
                started,
                label: self.inner.cfg.label.clone(),
                request,
                ..Default::default()
            }),
            sse: false,
            req: RequestSink(Arc::new(Mutex::new(Spill::new(&self.inner.spill_dir)))),
            announced: false,
            body: Spill::new(&self.inner.spill_dir),
            marks: Spill::new(&self.inner.spill_dir),
            last_chunk_us: None,
            tail: Vec::new(),
            heads: Default::default(),
            trace: None,
        }
    }

    /// Queues an ended exchange (raw body, see [`RawExchange`]) and starts its llama-server
    /// render annotation. Cheap: this runs on the client's path when a response ends.
    fn ended(&self, raw: RawExchange) {
        let ex = &raw.ex;
        if ex.outcome == Outcome::Shutdown {
            self.inner.cut_count.fetch_add(1, Ordering::SeqCst);
        }
        // A request body too large to keep in memory is not rendered (the annotation would
        // hold it again), nor is an exchange cut by shutdown.
        let req_body = raw.req.body_in_memory();
        // HTTP 415: the server refused the body's content-encoding (llama-server b11434 does
        // for zstd) and rendered nothing.
        let chat = matches!(ex.api(), Api::Openai | Api::Anthropic | Api::Responses)
            && ex.request.method == "POST"
            && req_body.is_some()
            && ex.outcome != Outcome::Shutdown
            && ex.response.as_ref().is_none_or(|r| r.status != 415);
        let llama = self.inner.llama.read().ok().and_then(|l| l.clone());
        let learn = match llama {
            Some(_) => None,
            None => self.inner.learn_from.lock().ok().and_then(|l| l.clone()),
        };
        // The whole exchange (bodies while in memory), for verifying a regeneration against
        // what the server sent.
        let original = (chat && self.inner.cfg.regenerate).then(|| raw.event_exchange());
        let ollama = self
            .inner
            .cfg
            .ollama_show_from
            .clone()
            .and_then(|base| ollama_model(ex, req_body.as_ref()).map(|m| (base, m)));
        // --regenerate on a vLLM / Ollama upstream (chat bodies, Ollama's /api/chat too).
        let regen_on = match &llama {
            None if self.inner.cfg.regenerate => {
                self.inner.regen_on.read().ok().and_then(|r| r.clone())
            }
            _ => None,
        };
        let other = regen_on.filter(|_| {
            matches!(ex.api(), Api::Openai | Api::Anthropic | Api::Ollama)
                && ex.request.method == "POST"
                && req_body.is_some()
                && ex.outcome != Outcome::Shutdown
                && ex.response.as_ref().is_some_and(|r| r.status < 400)
        });
        let other = other.map(|o| (o, raw.event_exchange()));
        let id = ex.id;
        let request = chat.then(|| {
            let mut request = ex.request.clone();
            request.body = req_body.clone().unwrap_or_default();
            request
        });
        if let Ok(guard) = self.inner.writer.lock()
            && let Some(tx) = guard.as_ref()
        {
            let _ = tx.send(WriterMsg::Ended(Box::new(raw)));
        }
        self.enrich(Enrichment {
            id,
            ollama,
            other,
            llama,
            learn,
            chat,
            request,
            original,
        });
        self.busy_dec();
    }

    pub(super) fn write_annotation(&self, ann: Annotation) {
        self.emit(RecordEvent::Annotated(ann.clone()));
        self.queue(Line::Annotation(ann));
    }

    /// Waits until no exchange is in flight and no annotation is pending (at most `timeout`),
    /// then until everything queued so far is on disk. Returns false on timeout.
    pub async fn settle(&self, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.inner.idle.notified();
            if self.inner.busy.load(Ordering::SeqCst) == 0 {
                break;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return false;
            }
        }
        self.flush().await;
        true
    }

    /// Waits until every line queued so far is written.
    pub async fn flush(&self) {
        let (tx, rx) = std::sync::mpsc::channel();
        let sent = match self.inner.writer.lock() {
            Ok(g) => g
                .as_ref()
                .is_some_and(|w| w.send(WriterMsg::Flush(tx)).is_ok()),
            Err(_) => false,
        };
        if sent {
            let _ =
                tokio::task::spawn_blocking(move || rx.recv_timeout(Duration::from_secs(30))).await;
        }
    }

    /// Stops the writer thread after writing everything queued. Later lines are dropped.
    pub fn close(&self) {
        if let Ok(mut g) = self.inner.writer.lock() {
            g.take();
        }
        if let Ok(mut t) = self.inner.thread.lock()
            && let Some(t) = t.take()
        {
            let _ = t.join();
        }
    }
}

/// One exchange being recorded. Finish it with [`ActiveExchange::finish`]; dropping it
/// unfinished records it as [`Outcome::ClientDisconnected`] (or [`Outcome::Shutdown`] after
/// [`Recorder::cut_in_flight`]) with everything received so far.
pub struct ActiveExchange {
    rec: Recorder,
    start: Instant,
    ex: Option<Exchange>,
    sse: bool,
    /// The request body as it arrives (shared with the body forwarded upstream).
    req: RequestSink,
    /// Whether [`RecordEvent::Started`] was sent.
    announced: bool,
    /// The response body so far, every chunk appended as forwarded.
    body: Spill,
    /// For `text/event-stream`: per chunk, its end offset in `body` and receive µs.
    marks: Spill,
    /// When the last response chunk arrived (µs since the request start).
    last_chunk_us: Option<u64>,
    /// The last [`TAIL`]–2×[`TAIL`] bytes of the response body (the body itself may be spilled
    /// to disk): enough to see whether it ends with its API's terminal event.
    tail: Vec<u8>,
    /// The start of the stream's last event: names a Responses terminal event longer than
    /// [`TAIL`] (`response.completed` repeats the whole output).
    heads: crate::stream::sse::EventHeads,
    /// `proxy --otlp`: where the exchange's span goes ([`ActiveExchange::set_trace`]).
    trace: Option<crate::record::otlp::ExchangeTrace>,
}

/// How much of a response body's end [`ActiveExchange`] keeps in memory for the terminal-event
/// check (a llama-server `/completion` final event with its settings is a few KiB).
const TAIL: usize = 64 << 10;

/// Where a request body is recorded while it is forwarded upstream: cheap to clone, shared
/// between the exchange and the upstream request's body.
#[derive(Clone)]
pub struct RequestSink(Arc<Mutex<Spill>>);

impl RequestSink {
    /// Records the next piece of the request body.
    pub fn push(&self, data: &[u8]) {
        if let Ok(mut s) = self.0.lock() {
            s.push(data);
        }
    }

    /// Bytes recorded so far.
    pub fn len(&self) -> u64 {
        self.0.lock().map(|s| s.len()).unwrap_or(0)
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn take(&self, dir: &Path) -> Spill {
        match self.0.lock() {
            Ok(mut s) => std::mem::replace(&mut *s, Spill::new(dir)),
            Err(_) => Spill::new(dir),
        }
    }
}

impl ActiveExchange {
    /// The exchange id.
    pub fn id(&self) -> u64 {
        self.ex.as_ref().map(|e| e.id).unwrap_or(0)
    }

    /// Microseconds since the request started.
    pub fn elapsed_us(&self) -> u64 {
        self.start.elapsed().as_micros() as u64
    }

    /// Milliseconds since the last response chunk (or since the head when none came).
    pub fn quiet_ms(&self) -> u64 {
        let last = self
            .last_chunk_us
            .or_else(|| self.ex.as_ref().and_then(|e| e.timings.ttfb_us))
            .unwrap_or(0);
        self.elapsed_us().saturating_sub(last) / 1000
    }

    /// Bytes of response body received so far.
    pub fn body_len(&self) -> u64 {
        self.body.len()
    }

    /// Where the request body goes as it arrives.
    pub fn request_sink(&self) -> RequestSink {
        self.req.clone()
    }

    /// The request body is complete: sends [`RecordEvent::Started`] (with the body while it
    /// is in memory, at most [`crate::record::spill::SPILL_AT`] bytes).
    pub fn request_done(&mut self) {
        if self.announced {
            return;
        }
        self.announced = true;
        if self.rec.inner.events.is_none() {
            return;
        }
        let Some(ex) = self.ex.as_ref() else { return };
        let mut request = ex.request.clone();
        if let Ok(s) = self.req.0.lock() {
            request.body = s.body_in_memory().unwrap_or_default();
        }
        self.rec.emit(RecordEvent::Started {
            id: ex.id,
            started: ex.started.clone(),
            request,
        });
    }

    /// Sets where the exchange's span goes (`proxy --otlp`, decided when the request arrived).
    pub fn set_trace(&mut self, trace: crate::record::otlp::ExchangeTrace) {
        self.trace = Some(trace);
    }

    /// Records the response status line and headers (redacted unless `keep_secrets`).
    /// `text/event-stream` and `application/x-ndjson` responses are then recorded chunk by chunk.
    pub fn head(&mut self, status: u16, headers: Vec<(String, String)>) {
        self.request_done();
        let t = self.elapsed_us();
        let keep = self.rec.inner.cfg.keep_secrets;
        let headers: Vec<(String, String)> = if keep {
            headers
        } else {
            headers
                .into_iter()
                .map(|(k, v)| {
                    let v = redact_value(&k, &v);
                    (k, v)
                })
                .collect()
        };
        // SSE and Ollama's NDJSON (`application/x-ndjson`) are both recorded read by read.
        self.sse = headers.iter().any(|(k, v)| {
            k.eq_ignore_ascii_case("content-type") && {
                let v = v.trim_start().to_ascii_lowercase();
                v.starts_with("text/event-stream") || v.starts_with("application/x-ndjson")
            }
        });
        let id = self.id();
        if let Some(ex) = self.ex.as_mut() {
            ex.timings.ttfb_us = Some(t);
            ex.response = Some(Response {
                status,
                headers: headers.clone(),
                body: None,
                chunks: None,
            });
        }
        self.rec.emit(RecordEvent::Head {
            id,
            status,
            headers,
            ttfb_us: t,
        });
    }

    /// [`ActiveExchange::head`] for a response recorded message by message whatever its
    /// content type (a WebSocket's `101`: one chunk per server message).
    pub fn head_stream(&mut self, status: u16, headers: Vec<(String, String)>) {
        self.head(status, headers);
        self.sse = true;
    }

    /// Attaches the WebSocket connection and frames the exchange travelled on.
    pub fn set_websocket(&mut self, ws: crate::session::WebSocket) {
        if let Some(ex) = self.ex.as_mut() {
            ex.websocket = Some(ws);
        }
    }

    /// Records one body chunk exactly as forwarded to the client: appended to the body's
    /// [`Spill`] and, for streams, one (end offset, µs) mark — no per-chunk allocation or
    /// encoding here (that is the writer thread's job).
    pub fn chunk(&mut self, data: &Bytes) {
        let t = self.elapsed_us();
        self.last_chunk_us = Some(t);
        self.body.push(data);
        self.tail.extend_from_slice(data);
        if self.tail.len() > 2 * TAIL {
            self.tail.drain(..self.tail.len() - TAIL);
        }
        if self.sse {
            self.marks.push(&mark_bytes(self.body.len(), t));
            self.heads.feed(data);
        }
        if self.rec.inner.events.is_some() {
            let id = self.id();
            self.rec.emit(RecordEvent::Chunk {
                id,
                t_us: t,
                bytes: data.clone(),
            });
        }
    }

    /// Ends the exchange with `outcome` (and an error text for partial ones) and queues it.
    pub fn finish(mut self, outcome: Outcome, error: Option<String>) {
        self.end(outcome, error);
    }

    fn end(&mut self, outcome: Outcome, error: Option<String>) {
        let Some(mut ex) = self.ex.take() else { return };
        ex.timings.total_us = Some(self.elapsed_us());
        ex.outcome = outcome;
        ex.error = error;
        let dir = &self.rec.inner.spill_dir;
        let marks = std::mem::replace(&mut self.marks, Spill::new(dir));
        let marks = self.sse.then_some(marks);
        let req = self.req.take(dir);
        let body = std::mem::replace(&mut self.body, Spill::new(dir));
        self.rec.ended(RawExchange {
            ex,
            req,
            body,
            marks,
            trace: self.trace.take(),
        });
    }
}

impl Drop for ActiveExchange {
    fn drop(&mut self) {
        if self.ex.is_some() {
            if self.rec.inner.cut.load(Ordering::SeqCst) {
                let got = self.body.len();
                let sent = self.req.len();
                self.end(
                    Outcome::Shutdown,
                    Some(format!(
                        "cut by toolscope's shutdown (SIGINT/SIGTERM) after the grace period, {} ms after the last response byte; recorded what had arrived: {sent} request bytes, {got} response bytes",
                        self.quiet_ms()
                    )),
                );
            } else if self.ex.as_ref().is_some_and(|e| e.response.is_some())
                && (crate::stream::sse::ends_with_terminal_event(&self.tail)
                    || self.heads.ends_with_responses_terminal())
            {
                // A client that closes once it has read the terminal event (`[DONE]`,
                // `message_stop`, `response.completed`, an Ollama line with `"done": true`;
                // the official openai SDK and Codex do) got the whole response.
                self.end(Outcome::Complete, None);
            } else {
                self.end(Outcome::ClientDisconnected, Some("the client closed the connection before the response ended; upstream request cancelled".into()));
            }
        }
    }
}
