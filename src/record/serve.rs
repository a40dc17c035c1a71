//! `toolscope serve`: answers an agent's requests from a recorded session, without the model.
//!
//! Matching is [`crate::session::replay`] (pure); this is the thin HTTP layer around it. A
//! matched request gets the recorded response as recorded: status, headers (hop-by-hop and
//! `content-length` excepted: they belong to each connection), and the body — for a recorded
//! stream, the same chunks, each written when its recorded offset (`t_us` from the request
//! start) comes, scaled by [`Timing`]. A recording whose outcome was partial
//! (`client_disconnected`, `upstream_error`) is replayed as far as it was recorded and then
//! the connection is cut, as the original client saw it; an exchange recorded without a
//! response (the upstream was unreachable) is answered `502` with the recorded error.
//!
//! A request nothing matches is answered `404` with a JSON body readable by both the OpenAI
//! and the Anthropic SDKs (`{"type": "error", "error": {"type": "toolscope_replay_mismatch",
//! "message", "nearest_exchange", "pointer", "recorded", "received"}}`) and is itself recorded,
//! with its answer and label `serve:unmatched`, into the mismatch session (created on the first
//! mismatch), so the user sees where the agent diverged from the recording.
//!
//! Limits (issue #27): a request body is read in pieces, kept in memory only up to
//! [`ServeConfig::parse_limit`] (twice the largest recorded request body plus 64 KiB, at most
//! [`MAX_PARSED_BODY`]) — a longer one cannot equal a recording, so it is not parsed: it goes
//! straight to the mismatch session, spilled to disk past 1 MiB ([`crate::record::spill`]),
//! up to [`MAX_REQUEST_BODY`] (then `413`). The 404 echoes at most [`ECHO_MAX`] bytes of each
//! differing value. A connection must send its request head within [`HEADER_READ_TIMEOUT`]
//! (an idle keep-alive connection is closed after it too), each piece of a body within
//! [`BODY_IDLE_TIMEOUT`] (`408` otherwise), and at most [`MAX_CONNECTIONS`] connections are
//! served at once (more wait in the listen backlog).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use futures::StreamExt as _;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Request as HRequest, Response as HResponse, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::record::now_rfc3339;
use crate::record::proxy::BoxError;
use crate::record::recorder::{Recorder, RecorderConfig};
use crate::session::read::Session;
use crate::session::replay::{MatchMode, Mismatch, ReplayIndex};
use crate::session::{Exchange, Outcome, write::new_header};

/// Longest wait for a request head, counted from when the connection is ready for one (a new
/// connection, or a kept-alive one after its last response): 10 s. hyper's
/// `header_read_timeout` (hyper 1.x `proto/h1/conn.rs`).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Longest wait for the next piece of a request body: 30 s (`408` after it).
pub const BODY_IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// Connections served at once: 256 (each costs a descriptor; more wait to be accepted).
pub const MAX_CONNECTIONS: usize = 256;

/// Longest request body read: 256 MiB (`413` after it; what arrived is recorded).
pub const MAX_REQUEST_BODY: u64 = 256 << 20;

/// Longest request body ever parsed for matching: 64 MiB.
pub const MAX_PARSED_BODY: usize = 64 << 20;

/// Most bytes of a differing value the 404 echoes (`recorded`, `received`).
pub const ECHO_MAX: usize = 1024;

/// How long a partial replay waits after its last recorded byte before cutting the
/// connection: hyper writes what it holds while the body waits (without it, a cut right after
/// the last chunk dropped that chunk, and with `--timing fast` everything).
const FLUSH_BEFORE_CUT: Duration = Duration::from_millis(50);

/// When recorded responses are written.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Timing {
    /// At the recorded offsets (head at `ttfb_us`, each chunk at its `t_us`).
    Recorded,
    /// As fast as possible.
    Fast,
    /// The recorded offsets divided by the factor (`x2`: twice as fast; `x0.5`: half speed).
    Scaled(f64),
}

impl Timing {
    /// The range of `xN` factors: [`MIN_FACTOR`, `MAX_FACTOR`] (1000× slower to 1000× faster).
    pub const MIN_FACTOR: f64 = 1e-3;
    /// See [`Timing::MIN_FACTOR`].
    pub const MAX_FACTOR: f64 = 1e3;
    /// The longest wait a recorded offset can ask for: 30 days (a recorded `t_us` near 2^64
    /// would otherwise overflow the clock).
    pub const MAX_DELAY: Duration = Duration::from_secs(30 * 24 * 3600);

    /// Parses `recorded`, `fast` or `xN` (N a number from 0.001 to 1000).
    ///
    /// Errors: anything else, with the accepted forms in the message.
    pub fn parse(s: &str) -> Result<Timing, String> {
        match s {
            "recorded" => Ok(Timing::Recorded),
            "fast" => Ok(Timing::Fast),
            _ => s
                .strip_prefix('x')
                .and_then(|n| n.parse::<f64>().ok())
                .filter(|f| (Self::MIN_FACTOR..=Self::MAX_FACTOR).contains(f))
                .map(Timing::Scaled)
                .ok_or_else(|| {
                    format!(
                        "expected recorded, fast or xN with N from {} to {} (e.g. x2)",
                        Self::MIN_FACTOR,
                        Self::MAX_FACTOR
                    )
                }),
        }
    }

    /// The delay for a recorded offset of `us` microseconds, at most [`Timing::MAX_DELAY`], or
    /// `None` for no wait.
    fn at(self, us: u64) -> Option<Duration> {
        let d = match self {
            Timing::Recorded => Duration::from_micros(us),
            Timing::Fast => return None,
            Timing::Scaled(f) => {
                Duration::try_from_secs_f64(us as f64 / 1e6 / f).unwrap_or(Self::MAX_DELAY)
            }
        };
        Some(d.min(Self::MAX_DELAY))
    }
}

/// Settings of [`ServeHandle::spawn`].
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Address to listen on (loopback unless the user asks otherwise; port 0 picks one).
    pub listen: SocketAddr,
    pub timing: Timing,
    pub mode: MatchMode,
    /// Where unmatched requests are recorded (created on the first one, appended to if it
    /// exists).
    pub unmatched_session: PathBuf,
}

impl ServeConfig {
    /// The longest request body compared with the recordings of `session`: twice its longest
    /// recorded request body plus 64 KiB, at most [`MAX_PARSED_BODY`].
    pub fn parse_limit(session: &Session) -> usize {
        let longest = session
            .exchanges
            .iter()
            .map(|e| e.request.body.len())
            .max()
            .unwrap_or(0);
        longest
            .saturating_mul(2)
            .saturating_add(64 << 10)
            .min(MAX_PARSED_BODY)
    }
}

/// What happened to one request (for the log line the CLI prints).
#[derive(Debug, Clone)]
pub enum Served {
    /// Answered with recorded exchange `exchange`.
    Matched {
        method: String,
        path: String,
        exchange: u64,
        status: u16,
    },
    /// No recording matched; `message` is the sentence sent in the error body.
    Unmatched {
        method: String,
        path: String,
        message: String,
    },
}

impl std::fmt::Display for Served {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Served::Matched {
                method,
                path,
                exchange,
                status,
            } => write!(f, "{method} {path} → exchange #{exchange} ({status})"),
            Served::Unmatched { message, .. } => write!(f, "404 {message}"),
        }
    }
}

struct State {
    session: Session,
    parse_limit: usize,
    index: Mutex<ReplayIndex>,
    timing: Timing,
    unmatched_path: PathBuf,
    unmatched: Mutex<Option<Recorder>>,
    log: Option<tokio::sync::mpsc::UnboundedSender<Served>>,
}

/// A running replay server.
pub struct ServeHandle {
    addr: SocketAddr,
    state: Arc<State>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl ServeHandle {
    /// Binds `cfg.listen` and serves `session`. Each request's outcome is sent to `log` when
    /// given.
    ///
    /// Errors: the address cannot be bound.
    pub async fn spawn(
        session: Session,
        cfg: ServeConfig,
        log: Option<tokio::sync::mpsc::UnboundedSender<Served>>,
    ) -> anyhow::Result<ServeHandle> {
        let listener = TcpListener::bind(cfg.listen)
            .await
            .with_context(|| format!("binding {}", cfg.listen))?;
        let addr = listener.local_addr()?;
        let index = ReplayIndex::new(&session.exchanges, cfg.mode);
        let state = Arc::new(State {
            parse_limit: ServeConfig::parse_limit(&session),
            session,
            index: Mutex::new(index),
            timing: cfg.timing,
            unmatched_path: cfg.unmatched_session,
            unmatched: Mutex::new(None),
            log,
        });
        let (stop_tx, mut stop_rx) = oneshot::channel::<()>();
        let st = state.clone();
        let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
        let task = tokio::spawn(async move {
            loop {
                // a free connection slot first: past MAX_CONNECTIONS, new connections wait in
                // the listen backlog instead of taking descriptors
                let permit = tokio::select! {
                    biased;
                    _ = &mut stop_rx => break,
                    p = slots.clone().acquire_owned() => match p {
                        Ok(p) => p,
                        Err(_) => break,
                    },
                };
                tokio::select! {
                    biased;
                    _ = &mut stop_rx => break,
                    accepted = listener.accept() => {
                        let Ok((stream, _)) = accepted else {
                            tokio::time::sleep(Duration::from_millis(10)).await;
                            continue;
                        };
                        let _ = stream.set_nodelay(true);
                        let st = st.clone();
                        tokio::spawn(async move {
                            let _permit = permit;
                            let svc = hyper::service::service_fn(move |req| handle(req, st.clone()));
                            let _ = hyper::server::conn::http1::Builder::new()
                                .timer(hyper_util::rt::TokioTimer::new())
                                .header_read_timeout(HEADER_READ_TIMEOUT)
                                .keep_alive(true)
                                .serve_connection(TokioIo::new(stream), svc)
                                .await;
                        });
                    }
                }
            }
        });
        Ok(ServeHandle {
            addr,
            state,
            stop: Some(stop_tx),
            task: Some(task),
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Number of recordings that can be served.
    pub fn servable(&self) -> usize {
        self.state.index.lock().map(|i| i.len()).unwrap_or(0)
    }

    /// Stops accepting and writes the unmatched requests recorded so far.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
        let rec = self.state.unmatched.lock().ok().and_then(|mut r| r.take());
        if let Some(rec) = rec {
            rec.settle(Duration::from_secs(10)).await;
            let _ = tokio::task::spawn_blocking(move || rec.close()).await;
        }
    }
}

impl Drop for ServeHandle {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

type Out = HResponse<BoxBody<Bytes, BoxError>>;

fn full(status: StatusCode, content_type: &'static str, body: Vec<u8>) -> Out {
    let mut r = HResponse::new(
        Full::new(Bytes::from(body))
            .map_err(|e: Infallible| -> BoxError { match e {} })
            .boxed(),
    );
    *r.status_mut() = status;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        HeaderValue::from_static(content_type),
    );
    r
}

/// Headers a replay must not copy: hop-by-hop (RFC 9110 §7.6.1) and the body length, which
/// hyper sets for the body it actually sends.
fn skip_header(name: &str) -> bool {
    crate::record::proxy::is_hop(name) || name == "content-length"
}

async fn handle(req: HRequest<Incoming>, st: Arc<State>) -> Result<Out, Infallible> {
    let start = Instant::now();
    let (parts, mut body) = req.into_parts();
    let method = parts.method.as_str().to_owned();
    let path = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| "/".into());
    let headers: Vec<(String, String)> = parts
        .headers
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_owned(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    // The body in pieces: in memory up to the parse limit; past it, the request cannot match a
    // recording and goes straight to the mismatch session (spilled to disk by its recorder).
    let mut buf = bytes::BytesMut::new();
    let mut total: u64 = 0;
    let mut long: Option<crate::record::recorder::ActiveExchange> = None;
    loop {
        let frame = match tokio::time::timeout(BODY_IDLE_TIMEOUT, body.frame()).await {
            Ok(None) => break,
            Ok(Some(Ok(f))) => f,
            Ok(Some(Err(e))) => {
                let msg = format!("reading the request body failed after {total} bytes: {e}");
                if let Some(a) = long {
                    a.finish(Outcome::ClientDisconnected, Some(msg.clone()));
                }
                return Ok(full(
                    StatusCode::BAD_REQUEST,
                    "text/plain; charset=utf-8",
                    format!("toolscope serve: {msg}\n").into_bytes(),
                ));
            }
            Err(_) => {
                let msg = format!(
                    "no piece of the request body for {} s after {total} bytes",
                    BODY_IDLE_TIMEOUT.as_secs()
                );
                if let Some(a) = long {
                    a.finish(Outcome::ClientDisconnected, Some(msg.clone()));
                }
                return Ok(full(
                    StatusCode::REQUEST_TIMEOUT,
                    "text/plain; charset=utf-8",
                    format!("toolscope serve: {msg}\n").into_bytes(),
                ));
            }
        };
        let Ok(d) = frame.into_data() else { continue };
        total += d.len() as u64;
        if total > MAX_REQUEST_BODY {
            let msg = format!(
                "the request body is longer than {MAX_REQUEST_BODY} bytes; reading stopped"
            );
            if let Some(a) = long.as_ref() {
                a.request_sink().push(&d);
            }
            if let Some(a) = long {
                a.finish(Outcome::ClientDisconnected, Some(msg.clone()));
            }
            return Ok(full(
                StatusCode::PAYLOAD_TOO_LARGE,
                "text/plain; charset=utf-8",
                format!("toolscope serve: {msg}\n").into_bytes(),
            ));
        }
        match long.as_ref() {
            Some(a) => a.request_sink().push(&d),
            None => {
                buf.extend_from_slice(&d);
                if buf.len() > st.parse_limit {
                    long = begin_unmatched(&st, &method, &path, headers.clone());
                    match long.as_ref() {
                        Some(a) => a.request_sink().push(&buf),
                        None => {
                            return Ok(full(
                                StatusCode::PAYLOAD_TOO_LARGE,
                                "text/plain; charset=utf-8",
                                b"toolscope serve: the request body is too long to compare and the mismatch session cannot be written\n".to_vec(),
                            ));
                        }
                    }
                    buf = bytes::BytesMut::new();
                }
            }
        }
    }
    if let Some(active) = long {
        let message = format!(
            "toolscope serve: no recorded response for {method} {}: its body ({total} bytes) is longer than any recorded request can match ({} bytes compared at most)",
            crate::session::redact::redact_query(&path),
            st.parse_limit
        );
        let err = serde_json::json!({
            "type": "error",
            "error": {"type": "toolscope_replay_mismatch", "message": message},
        });
        return Ok(answer_unmatched(&st, Some(active), &method, &path, err));
    }
    let body = buf.freeze();
    let found = match st.index.lock() {
        Ok(mut idx) => idx.lookup(&st.session.exchanges, &method, &path, &body),
        Err(_) => {
            return Ok(full(
                StatusCode::INTERNAL_SERVER_ERROR,
                "text/plain; charset=utf-8",
                b"toolscope serve: internal lock poisoned\n".to_vec(),
            ));
        }
    };
    match found {
        Ok(i) => {
            let ex = st.session.exchanges[i].clone();
            if let Some(log) = &st.log {
                let _ = log.send(Served::Matched {
                    method,
                    path: crate::session::redact::redact_query(&path).into_owned(),
                    exchange: ex.id,
                    status: ex.response.as_ref().map_or(502, |r| r.status),
                });
            }
            Ok(replay(ex, st.timing, start).await)
        }
        Err(m) => Ok(unmatched(&st, &method, &path, headers, &body, &m)),
    }
}

/// `v` when its JSON text is at most [`ECHO_MAX`] bytes, else a string holding the start of
/// that text and its length (`"[0,0,0,…" (48000001 bytes)`).
fn echo_excerpt(v: Option<serde_json::Value>) -> Option<serde_json::Value> {
    let v = v?;
    let text = v.to_string();
    if text.len() <= ECHO_MAX {
        return Some(v);
    }
    let mut end = ECHO_MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    Some(serde_json::Value::String(format!(
        "{}… ({} bytes)",
        &text[..end],
        text.len()
    )))
}

/// The error body of an unmatched request (see the module docs): the path with its secret
/// query values redacted ([`crate::session::redact::redact_query`]), each differing value
/// cut to [`ECHO_MAX`] bytes.
pub fn mismatch_body(m: &Mismatch, method: &str, path: &str) -> serde_json::Value {
    let path = crate::session::redact::redact_query(path);
    let message = format!("toolscope serve: {}", m.message(method, &path));
    let d = m.nearest.as_ref().and_then(|n| n.difference.as_ref());
    serde_json::json!({
        "type": "error",
        "error": {
            "type": "toolscope_replay_mismatch",
            "message": message,
            "nearest_exchange": m.nearest.as_ref().map(|n| n.exchange),
            "pointer": d.map(|d| d.pointer.clone()),
            "recorded": echo_excerpt(d.and_then(|d| d.recorded.clone())),
            "received": echo_excerpt(d.and_then(|d| d.received.clone())),
        }
    })
}

/// Starts recording an unmatched request in the mismatch session (created on the first one);
/// `None` (after a message on stderr) when it cannot be written.
fn begin_unmatched(
    st: &State,
    method: &str,
    path: &str,
    headers: Vec<(String, String)>,
) -> Option<crate::record::recorder::ActiveExchange> {
    let mut guard = st.unmatched.lock().ok()?;
    if guard.is_none() {
        let mut header = new_header(now_rfc3339());
        header.engine = st.session.header.engine.clone();
        header.source = Some(format!("serve:{}", st.session.path));
        match Recorder::open(
            RecorderConfig {
                session: st.unmatched_path.clone(),
                keep_secrets: false,
                label: Some("serve:unmatched".into()),
                ..Default::default()
            },
            &header,
            None,
        ) {
            Ok(r) => *guard = Some(r),
            Err(e) => crate::errln!("toolscope serve: {e:#}"),
        }
    }
    guard
        .as_ref()
        .map(|rec| rec.begin_request(method, path, headers))
}

fn unmatched(
    st: &State,
    method: &str,
    path: &str,
    headers: Vec<(String, String)>,
    body: &[u8],
    m: &Mismatch,
) -> Out {
    let active = begin_unmatched(st, method, path, headers);
    if let Some(a) = active.as_ref() {
        a.request_sink().push(body);
    }
    answer_unmatched(st, active, method, path, mismatch_body(m, method, path))
}

/// Answers `404` with `err`, records it as the answer of `active` (the request, once), logs it.
fn answer_unmatched(
    st: &State,
    active: Option<crate::record::recorder::ActiveExchange>,
    method: &str,
    path: &str,
    err: serde_json::Value,
) -> Out {
    let message = err["error"]["message"].as_str().unwrap_or("").to_owned();
    let mut text = serde_json::to_vec(&err).unwrap_or_default();
    text.push(b'\n');
    if let Some(mut active) = active {
        active.request_done();
        active.head(
            404,
            vec![("content-type".into(), "application/json".into())],
        );
        active.chunk(&Bytes::from(text.clone()));
        active.finish(Outcome::Complete, Some(message.clone()));
    }
    if let Some(log) = &st.log {
        let _ = log.send(Served::Unmatched {
            method: method.to_owned(),
            path: crate::session::redact::redact_query(path).into_owned(),
            message,
        });
    }
    let mut r = full(StatusCode::NOT_FOUND, "application/json", text);
    r.headers_mut().insert(
        HeaderName::from_static("x-toolscope-replay"),
        HeaderValue::from_static("mismatch"),
    );
    r
}

/// The recorded response of `ex`, written on `timing` from `start` (the request's arrival).
async fn replay(ex: Exchange, timing: Timing, start: Instant) -> Out {
    let Some(resp) = ex.response else {
        return full(
            StatusCode::BAD_GATEWAY,
            "text/plain; charset=utf-8",
            format!(
                "{}\n",
                ex.error
                    .as_deref()
                    .unwrap_or("toolscope serve: the recording has no response")
            )
            .into_bytes(),
        );
    };
    if let Some(d) = ex.timings.ttfb_us.and_then(|t| timing.at(t)) {
        tokio::time::sleep_until(start + d).await;
    }
    let partial = ex.outcome != Outcome::Complete;
    let why = ex
        .error
        .clone()
        .unwrap_or_else(|| "the recorded response ended here".into());
    let body: BoxBody<Bytes, BoxError> = match resp.chunks {
        Some(chunks) => {
            let frames =
                futures::stream::unfold((chunks.into_iter(), false), move |(mut it, ended)| {
                    let why = why.clone();
                    async move {
                        if ended {
                            return None;
                        }
                        match it.next() {
                            Some(c) => {
                                if let Some(d) = timing.at(c.t_us) {
                                    tokio::time::sleep_until(start + d).await;
                                }
                                Some((
                                    Ok::<_, BoxError>(Frame::data(Bytes::from(c.data.to_bytes()))),
                                    (it, false),
                                ))
                            }
                            None if partial => {
                                // let hyper flush the last chunk before the cut
                                tokio::time::sleep(FLUSH_BEFORE_CUT).await;
                                Some((Err(why.into()), (it, true)))
                            }
                            None => None,
                        }
                    }
                });
            BodyExt::boxed(StreamBody::new(frames))
        }
        None => {
            let bytes = resp.body.map(|b| b.to_bytes()).unwrap_or_default();
            if partial {
                let frames =
                    futures::stream::iter([Ok::<_, BoxError>(Frame::data(Bytes::from(bytes)))])
                        .chain(futures::stream::once(async move {
                            // let hyper flush what was recorded before the cut
                            tokio::time::sleep(FLUSH_BEFORE_CUT).await;
                            Err::<Frame<Bytes>, BoxError>(why.into())
                        }));
                BodyExt::boxed(StreamBody::new(frames))
            } else {
                Full::new(Bytes::from(bytes))
                    .map_err(|e: Infallible| -> BoxError { match e {} })
                    .boxed()
            }
        }
    };
    let mut out = HResponse::new(body);
    *out.status_mut() = StatusCode::from_u16(resp.status).unwrap_or(StatusCode::BAD_GATEWAY);
    for (k, v) in &resp.headers {
        if skip_header(&k.to_ascii_lowercase()) {
            continue;
        }
        if let (Ok(k), Ok(v)) = (
            HeaderName::from_bytes(k.as_bytes()),
            HeaderValue::from_str(v),
        ) {
            out.headers_mut().append(k, v);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timing_forms() {
        assert_eq!(Timing::parse("recorded"), Ok(Timing::Recorded));
        assert_eq!(Timing::parse("fast"), Ok(Timing::Fast));
        assert_eq!(Timing::parse("x2"), Ok(Timing::Scaled(2.0)));
        assert!(Timing::parse("x0").is_err());
        // issue #27 item 11: factors outside [0.001, 1000] are refused, not a panic later;
        // an offset near 2^64 µs waits at most MAX_DELAY
        for bad in ["x1e-320", "x1e-12", "xinf", "xNaN", "x1e300", "x-1"] {
            assert!(Timing::parse(bad).is_err(), "{bad}");
        }
        let slow = Timing::parse("x0.001").unwrap();
        assert_eq!(slow.at(u64::MAX - 1), Some(Timing::MAX_DELAY));
        assert_eq!(Timing::Recorded.at(u64::MAX), Some(Timing::MAX_DELAY));
        assert!(Timing::parse("2").is_err());
        assert_eq!(
            Timing::Scaled(2.0).at(1_000_000),
            Some(Duration::from_millis(500))
        );
        assert_eq!(Timing::Fast.at(5), None);
    }
}
