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

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
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
    /// Parses `recorded`, `fast` or `xN` (N a positive number).
    ///
    /// Errors: anything else, with the accepted forms in the message.
    pub fn parse(s: &str) -> Result<Timing, String> {
        match s {
            "recorded" => Ok(Timing::Recorded),
            "fast" => Ok(Timing::Fast),
            _ => s
                .strip_prefix('x')
                .and_then(|n| n.parse::<f64>().ok())
                .filter(|f| f.is_finite() && *f > 0.0)
                .map(Timing::Scaled)
                .ok_or_else(|| {
                    format!("--timing {s:?}: expected recorded, fast or xN (N > 0, e.g. x2)")
                }),
        }
    }

    /// The delay for a recorded offset of `us` microseconds, or `None` for no wait.
    fn at(self, us: u64) -> Option<Duration> {
        match self {
            Timing::Recorded => Some(Duration::from_micros(us)),
            Timing::Fast => None,
            Timing::Scaled(f) => Some(Duration::from_secs_f64(us as f64 / 1e6 / f)),
        }
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
            session,
            index: Mutex::new(index),
            timing: cfg.timing,
            unmatched_path: cfg.unmatched_session,
            unmatched: Mutex::new(None),
            log,
        });
        let (stop_tx, mut stop_rx) = oneshot::channel::<()>();
        let st = state.clone();
        let task = tokio::spawn(async move {
            loop {
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
                            let svc = hyper::service::service_fn(move |req| handle(req, st.clone()));
                            let _ = hyper::server::conn::http1::Builder::new()
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
    let (parts, body) = req.into_parts();
    let method = parts.method.as_str().to_owned();
    let path = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| "/".into());
    let body = match body.collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            return Ok(full(
                StatusCode::BAD_REQUEST,
                "text/plain; charset=utf-8",
                format!("toolscope serve: reading the request body failed: {e}\n").into_bytes(),
            ));
        }
    };
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
                    path,
                    exchange: ex.id,
                    status: ex.response.as_ref().map_or(502, |r| r.status),
                });
            }
            Ok(replay(ex, st.timing, start).await)
        }
        Err(m) => {
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
            Ok(unmatched(&st, &method, &path, headers, &body, &m))
        }
    }
}

/// The error body of an unmatched request (see the module docs).
pub fn mismatch_body(m: &Mismatch, method: &str, path: &str) -> serde_json::Value {
    let message = format!("toolscope serve: {}", m.message(method, path));
    let d = m.nearest.as_ref().and_then(|n| n.difference.as_ref());
    serde_json::json!({
        "type": "error",
        "error": {
            "type": "toolscope_replay_mismatch",
            "message": message,
            "nearest_exchange": m.nearest.as_ref().map(|n| n.exchange),
            "pointer": d.map(|d| d.pointer.clone()),
            "recorded": d.and_then(|d| d.recorded.clone()),
            "received": d.and_then(|d| d.received.clone()),
        }
    })
}

fn unmatched(
    st: &State,
    method: &str,
    path: &str,
    headers: Vec<(String, String)>,
    body: &[u8],
    m: &Mismatch,
) -> Out {
    let err = mismatch_body(m, method, path);
    let message = err["error"]["message"].as_str().unwrap_or("").to_owned();
    let mut text = serde_json::to_vec(&err).unwrap_or_default();
    text.push(b'\n');
    if let Ok(mut guard) = st.unmatched.lock() {
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
                Err(e) => eprintln!("toolscope serve: {e:#}"),
            }
        }
        if let Some(rec) = guard.as_ref() {
            let mut active = rec.begin(method, path, headers, body);
            active.head(
                404,
                vec![("content-type".into(), "application/json".into())],
            );
            active.chunk(&Bytes::from(text.clone()));
            active.finish(Outcome::Complete, Some(message.clone()));
        }
    }
    if let Some(log) = &st.log {
        let _ = log.send(Served::Unmatched {
            method: method.to_owned(),
            path: path.to_owned(),
            message: message.clone(),
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
                            None if partial => Some((Err(why.into()), (it, true))),
                            None => None,
                        }
                    }
                });
            BodyExt::boxed(StreamBody::new(frames))
        }
        None => {
            let bytes = resp.body.map(|b| b.to_bytes()).unwrap_or_default();
            if partial {
                let frames = futures::stream::iter([
                    Ok::<_, BoxError>(Frame::data(Bytes::from(bytes))),
                    Err(why.into()),
                ]);
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
        assert!(Timing::parse("2").is_err());
        assert_eq!(
            Timing::Scaled(2.0).at(1_000_000),
            Some(Duration::from_millis(500))
        );
        assert_eq!(Timing::Fast.at(5), None);
    }
}
