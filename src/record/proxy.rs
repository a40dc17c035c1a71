//! The recording reverse proxy behind `toolscope proxy`.
//!
//! Every request on every path is forwarded to the upstream (plain HTTP/1.1), and the
//! response is streamed back frame by frame as it arrives: nothing is buffered on the client's
//! path, so each SSE chunk reaches the client as soon as the upstream sends it. The same
//! frames are recorded ([`crate::record::recorder`]), so the recorded bytes are the bytes the
//! client got, each with its receive offset.
//!
//! * Concurrent requests become separate exchanges with their own ids.
//! * A client that disconnects drops the response body; that drops the upstream response, which
//!   closes the upstream connection (llama-server then cancels the generation) and records the
//!   partial exchange as `client_disconnected`.
//! * An upstream that resets mid-body ends the client's response the same way (the chunked
//!   body is cut off, not completed) and the exchange is recorded as `upstream_error`; the
//!   error text tells a reset (TCP RST) from a close before the body ended, with how long the
//!   upstream had been silent. An upstream that cannot be reached gives the client HTTP 502
//!   with a plain-text reason.
//! * Bodies are recorded in bounded memory ([`crate::record::spill`]): a request body up to
//!   1 MiB is read whole before it is forwarded (so a kept connection the upstream closed can
//!   take it again); a longer one is forwarded as it arrives, on a fresh connection, and
//!   recorded on the way.
//! * Shutdown ([`ProxyHandle::shutdown_with`]): stop accepting, let running exchanges finish
//!   for a grace period (idle keep-alive connections close at once), then cut the rest and
//!   record them as `shutdown` with what they received; a second signal skips the wait.
//!
//! Server side: hyper 1 (`http1`); upstream side: hyper's low-level `client::conn::http1`
//! over a `TCP_NODELAY` socket. The upstream connection has no task of its own: the response
//! body (`RecordingBody`) drives it from inside the client connection's task, so a chunk
//! read from the upstream is decoded, recorded and handed to the client's encoder in the same
//! poll — no cross-task wake-up per chunk, and the client's socket is written whenever the
//! upstream socket has nothing more to read (never held back waiting for more). Each client
//! connection keeps its own upstream connection alive for its next request (HTTP/1.1
//! keep-alive mirrored one to one). `benches/proxy.rs` measures the overhead against a direct
//! connection.

use crate::session::ServerKind;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use anyhow::{Context, bail};
use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body as HttpBody, Frame, Incoming, SizeHint};
use hyper::client::conn::http1 as client_h1;
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Request as HRequest, Response as HResponse, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

use crate::record::annotate::detect_engine;
use crate::record::now_rfc3339;
use crate::record::recorder::{ActiveExchange, RecordEvent, Recorder, RecorderConfig, RequestSink};
use crate::record::spill::SPILL_AT;
use crate::session::{Header, Outcome, write::new_header};

/// Boxed error type of the proxied bodies.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Proxy settings.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    /// Upstream base URL, `http://host:port` with an optional path prefix (no TLS).
    pub upstream: String,
    /// Address to listen on; loopback unless the user asks otherwise. Port 0 picks a free port.
    pub listen: SocketAddr,
    /// Session file to create or append to.
    pub session: PathBuf,
    /// Store `authorization`, `x-api-key`, `api-key`, cookies verbatim.
    pub keep_secrets: bool,
    /// Label for every exchange (`send`); `None` for proxied traffic.
    pub label: Option<String>,
    /// Probe the upstream for its engine (`/props`, `/v1/models`, `/api/version`) and, for
    /// llama-server, fetch `/apply-template` + `/tokenize` after each chat exchange.
    pub detect_engine: bool,
    /// `--regenerate`: re-run each chat exchange whose raw text was not captured through the
    /// engine's raw completion endpoint after it ended, off the client's path (llama-server
    /// `/completion`; a vLLM or Ollama upstream through
    /// [`crate::record::regenerate::regenerate_on_engine`]; see
    /// [`RecorderConfig::regenerate`]).
    pub regenerate: bool,
    /// The proxy is `send`'s internal hop: the recorded `host` header is the upstream's (what
    /// a direct request carries), not the hop's ephemeral loopback port.
    pub direct: bool,
    /// `--otlp URL`: send OTLP/HTTP JSON spans to this collector as exchanges end
    /// ([`crate::record::otlp`]); `None`: no live traces, requests go upstream untouched.
    pub otlp: Option<String>,
    /// Timeout of each collector POST (`--otlp-timeout`).
    pub otlp_timeout: Duration,
}

impl ProxyConfig {
    /// Defaults: listen on `127.0.0.1:0`, redact secrets, detect the engine.
    pub fn new(upstream: &str, session: PathBuf) -> ProxyConfig {
        ProxyConfig {
            upstream: upstream.to_owned(),
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            session,
            keep_secrets: false,
            label: None,
            detect_engine: true,
            regenerate: false,
            direct: false,
            otlp: None,
            otlp_timeout: crate::record::otlp::DEFAULT_TIMEOUT,
        }
    }
}

/// The recording proxy.
pub struct Proxy;

/// A running proxy. Stop it with [`ProxyHandle::shutdown`] or
/// [`ProxyHandle::shutdown_with`] (dropping it stops accepting but does not wait for the
/// session to be written).
pub struct ProxyHandle {
    addr: SocketAddr,
    recorder: Recorder,
    header: Header,
    /// Stop accepting; connections finish their current exchange, then close.
    stop: CancellationToken,
    /// Drop every connection now (the end of the grace period).
    cut: CancellationToken,
    conns: Arc<ConnCount>,
    task: Option<tokio::task::JoinHandle<()>>,
    /// How long a shutdown waits for the OTLP exporter to drain.
    otlp_wait: Duration,
}

/// How a shutdown went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShutdownReport {
    /// Every exchange ended within the grace period.
    pub settled: bool,
    /// Exchanges cut and recorded as [`Outcome::Shutdown`].
    pub cut: usize,
    /// `--otlp`: spans sent and dropped, once the exporter has drained.
    pub otlp: Option<crate::record::otlp::OtlpStats>,
}

/// Open client connections, to wait for them after the cut.
#[derive(Default)]
struct ConnCount {
    n: std::sync::atomic::AtomicUsize,
    zero: Notify,
}

struct ConnGuard(Arc<ConnCount>);

impl ConnCount {
    fn enter(self: &Arc<Self>) -> ConnGuard {
        self.n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        ConnGuard(self.clone())
    }

    async fn wait_zero(&self, timeout: Duration) {
        let _ = tokio::time::timeout(timeout, async {
            loop {
                let notified = self.zero.notified();
                if self.n.load(std::sync::atomic::Ordering::SeqCst) == 0 {
                    return;
                }
                notified.await;
            }
        })
        .await;
    }
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        if self.0.n.fetch_sub(1, std::sync::atomic::Ordering::SeqCst) == 1 {
            self.0.zero.notify_waiters();
        }
    }
}

#[derive(Clone)]
struct Upstream {
    /// `host:port` as given, without userinfo (the `Host` header sent upstream).
    authority: String,
    /// `host:port` with the default port 80 filled in (what is connected to).
    connect: String,
    prefix: String,
    /// `http://host:port/prefix`, without userinfo: what is printed and recorded.
    base: String,
    /// `base` with the userinfo as given, for toolscope's own requests (engine detection,
    /// `/apply-template`); reqwest sends it as Basic credentials.
    base_with_auth: String,
    /// `Authorization: Basic …` built from `user:password@` in the URL (RFC 7617), sent
    /// upstream when the client sent no `authorization` of its own.
    basic_auth: Option<HeaderValue>,
    /// [`ProxyConfig::direct`].
    direct: bool,
}

fn parse_upstream(url: &str) -> anyhow::Result<Upstream> {
    // messages never echo credentials (session::redact)
    let shown = crate::session::redact::redact_url(url).into_owned();
    let uri: Uri = url
        .parse()
        .with_context(|| format!("upstream URL {shown:?} is not a URL"))?;
    match uri.scheme_str() {
        Some("http") => {}
        Some("https") => bail!(
            "upstream {shown}: https is not supported (local inference servers speak plain HTTP)"
        ),
        _ => bail!("upstream {shown:?}: expected http://HOST:PORT"),
    }
    let given = uri
        .authority()
        .with_context(|| format!("upstream {shown:?} has no host"))?
        .as_str();
    let (userinfo, authority) = match given.rsplit_once('@') {
        Some((u, a)) => (Some(u), a.to_owned()),
        None => (None, given.to_owned()),
    };
    let prefix = uri.path().trim_end_matches('/').to_owned();
    let connect = match uri.port_u16() {
        Some(_) => authority.clone(),
        None => format!("{authority}:80"),
    };
    let basic_auth = userinfo.and_then(|u| {
        use base64::Engine as _;
        let u = percent_decode_userinfo(u);
        HeaderValue::from_str(&format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(u)
        ))
        .ok()
    });
    Ok(Upstream {
        direct: false,
        base: format!("http://{authority}{prefix}"),
        base_with_auth: format!("http://{given}{prefix}"),
        authority,
        connect,
        prefix,
        basic_auth,
    })
}

/// `user:pa%40ss` → `user:pa@ss` (userinfo is percent-encoded in a URL, RFC 3986 §3.2.1).
fn percent_decode_userinfo(u: &str) -> Vec<u8> {
    let b = u.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%'
            && i + 2 < b.len()
            && let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2]))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    out
}

/// Hop-by-hop headers (RFC 9110 §7.6.1) that a proxy must not forward.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// True for a hop-by-hop header name (lower-case), which belongs to one connection.
pub fn is_hop(name: &str) -> bool {
    HOP_BY_HOP.contains(&name)
}

fn header_pairs(h: &hyper::HeaderMap) -> Vec<(String, String)> {
    h.iter()
        .map(|(k, v)| {
            (
                k.as_str().to_owned(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect()
}

impl Proxy {
    /// Binds `cfg.listen`, detects the upstream engine, writes the session header and starts
    /// serving. Events for every exchange go to `events` when given (the TUI's live view).
    ///
    /// Errors: the upstream URL is not `http://…`; the address cannot be bound; the session
    /// file cannot be opened. An unreachable upstream is not an error here (engine `unknown`).
    pub async fn spawn(
        cfg: ProxyConfig,
        events: Option<mpsc::Sender<RecordEvent>>,
    ) -> anyhow::Result<ProxyHandle> {
        let mut upstream = parse_upstream(&cfg.upstream)?;
        upstream.direct = cfg.direct;
        let listener = TcpListener::bind(cfg.listen)
            .await
            .with_context(|| format!("binding {}", cfg.listen))?;
        let addr = listener.local_addr()?;
        let mut header = new_header(now_rfc3339());
        header.upstream = Some(if cfg.keep_secrets {
            upstream.base_with_auth.clone()
        } else {
            crate::session::redact::redact_url(&upstream.base_with_auth).into_owned()
        });
        let mut render_from = None;
        let mut learn_engine_from = None;
        let mut ollama_show_from = None;
        let mut regenerate_on = None;
        if cfg.detect_engine {
            let (engine, props) = detect_engine(&upstream.base_with_auth).await;
            if engine.kind == ServerKind::LlamaServer {
                render_from = Some(upstream.base_with_auth.clone());
            }
            // Ollama: /api/show per model, the template source (issue #14)
            if engine.kind == ServerKind::Ollama {
                ollama_show_from = Some(upstream.base_with_auth.clone());
            }
            // --regenerate on engines that render a chat request themselves.
            if matches!(engine.kind, ServerKind::Vllm | ServerKind::Ollama) {
                regenerate_on = Some((upstream.base_with_auth.clone(), engine.kind.clone()));
            }
            // Not answering yet (still loading): retried after each exchange.
            if engine.kind.is_unknown() {
                learn_engine_from = Some(upstream.base.clone());
            }
            header.engine = Some(engine);
            header.props = props;
        }
        let bos_token = header
            .props
            .as_ref()
            .and_then(|p| p.get("bos_token"))
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned);
        let otlp = match &cfg.otlp {
            Some(url) => {
                let o = crate::record::otlp::Otlp::start(url, cfg.otlp_timeout, header.clone())?;
                crate::record::otlp::check_not_self(o.endpoint(), addr)?;
                Some(o)
            }
            None => None,
        };
        let recorder = Recorder::open(
            RecorderConfig {
                session: cfg.session.clone(),
                keep_secrets: cfg.keep_secrets,
                label: cfg.label.clone(),
                render_from,
                bos_token,
                learn_engine_from,
                regenerate: cfg.regenerate,
                ollama_show_from,
                regenerate_on,
                otlp,
            },
            &header,
            events,
        )?;
        let stop = CancellationToken::new();
        let cut = CancellationToken::new();
        let conns = Arc::new(ConnCount::default());
        let rec = recorder.clone();
        let (stop2, cut2, conns2) = (stop.clone(), cut.clone(), conns.clone());
        let task = tokio::spawn(async move {
            loop {
                tokio::select! {
                    biased;
                    _ = stop2.cancelled() => break,
                    accepted = listener.accept() => {
                        let Ok((stream, _peer)) = accepted else {
                            tokio::time::sleep(Duration::from_millis(10)).await;
                            continue;
                        };
                        let _ = stream.set_nodelay(true);
                        let upstream = upstream.clone();
                        let rec = rec.clone();
                        let (stop, cut, guard) = (stop2.clone(), cut2.clone(), conns2.enter());
                        let conns3 = conns2.clone();
                        tokio::spawn(async move {
                            let _guard = guard;
                            // This client connection's upstream connection, kept between its requests.
                            let slot = Slot::default();
                            let ws = WsCtx { stop: stop.clone(), cut: cut.clone(), conns: conns3.clone() };
                            let svc = hyper::service::service_fn(move |req| handle(req, slot.clone(), upstream.clone(), rec.clone(), ws.clone()));
                            let conn = hyper::server::conn::http1::Builder::new()
                                .keep_alive(true)
                                .serve_connection(TokioIo::new(stream), svc)
                                .with_upgrades();
                            let mut conn = std::pin::pin!(conn);
                            tokio::select! {
                                biased;
                                _ = cut.cancelled() => return,
                                _ = conn.as_mut() => return,
                                _ = stop.cancelled() => {}
                            }
                            // shutting down: finish the exchange running on this connection (an
                            // idle keep-alive connection closes now), unless cut first
                            conn.as_mut().graceful_shutdown();
                            tokio::select! {
                                biased;
                                _ = cut.cancelled() => {}
                                _ = conn.as_mut() => {}
                            }
                        });
                    }
                }
            }
        });
        Ok(ProxyHandle {
            addr,
            recorder,
            header,
            stop,
            cut,
            conns,
            task: Some(task),
            otlp_wait: cfg.otlp_timeout * 2 + Duration::from_secs(1),
        })
    }
}

impl ProxyHandle {
    /// The bound address (the real port when listening on port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The session file being written.
    pub fn session_path(&self) -> PathBuf {
        self.recorder.session_path().to_owned()
    }

    /// The header line written for this session (engine detected, props snapshot).
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The live trace exporter (`--otlp`), for its [`crate::record::otlp::Otlp::stats`].
    pub fn otlp(&self) -> Option<&crate::record::otlp::Otlp> {
        self.recorder.otlp()
    }

    /// The recorder (to wait for exchanges with [`Recorder::settle`]).
    pub fn recorder(&self) -> &Recorder {
        &self.recorder
    }

    /// [`ProxyHandle::shutdown_with`] with no early stop. Returns whether every exchange
    /// ended within `grace` (the others are recorded as [`Outcome::Shutdown`]).
    pub async fn shutdown(self, grace: Duration) -> bool {
        self.shutdown_with(grace, std::future::pending())
            .await
            .settled
    }

    /// Stops accepting at once and waits up to `grace` for the exchanges in flight (and their
    /// llama-server annotations) to end; idle keep-alive connections close at once. When
    /// `grace` passes, or `hurry` completes first (a second Ctrl-C / SIGTERM), every exchange
    /// still running is cut and recorded as [`Outcome::Shutdown`] with the request and response
    /// bytes received so far. Then everything queued is written and flushed, and the session
    /// closed. Annotations still pending 2 s after a cut are dropped. With `--otlp`, the span
    /// exporter is drained last ([`crate::record::otlp::Otlp::finish`]): not at all after a
    /// hurry, and cut short when `hurry` completes during the drain.
    pub async fn shutdown_with(
        mut self,
        grace: Duration,
        hurry: impl Future<Output = ()>,
    ) -> ShutdownReport {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
        let mut hurry = std::pin::pin!(hurry);
        let mut hurried = false;
        let settled = tokio::select! {
            s = self.recorder.settle(grace) => s,
            () = &mut hurry => {
                hurried = true;
                false
            }
        };
        if !settled {
            self.recorder.cut_in_flight();
            self.cut.cancel();
            // connection tasks drop their exchanges at once; give them a moment to run
            self.conns.wait_zero(Duration::from_secs(5)).await;
            self.recorder.settle(Duration::from_secs(2)).await;
        }
        let cut = self.recorder.cut_count();
        let rec = self.recorder.clone();
        let _ = tokio::task::spawn_blocking(move || rec.close()).await;
        // every ended exchange has been offered: drain the exporter (each POST is bounded by
        // its timeout; what is still queued after two of them is counted as dropped). After a
        // hurry nothing more is waited for; otherwise a hurry during the drain cuts it.
        let otlp = match self.recorder.otlp() {
            Some(o) if hurried => Some(o.finish(Duration::ZERO, std::future::pending()).await),
            Some(o) => Some(o.finish(self.otlp_wait, hurry).await),
            None => None,
        };
        ShutdownReport { settled, cut, otlp }
    }
}

impl Drop for ProxyHandle {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

fn text_response(status: StatusCode, text: String) -> HResponse<BoxBody<Bytes, BoxError>> {
    let mut r = HResponse::new(
        Full::new(Bytes::from(text))
            .map_err(|e: Infallible| -> BoxError { match e {} })
            .boxed(),
    );
    *r.status_mut() = status;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// The body sent upstream: a buffered request body, or one forwarded as it arrives.
type UpBody = BoxBody<Bytes, BoxError>;

fn full_body(b: Bytes) -> UpBody {
    Full::new(b)
        .map_err(|e: Infallible| -> BoxError { match e {} })
        .boxed()
}

/// A request body longer than [`SPILL_AT`]: the frames read so far, then the rest of the
/// client's body as it arrives, each frame recorded on the way. A client that fails mid-body
/// leaves its error in `client_error` (the exchange is then the client's fault, not the
/// upstream's).
struct StreamingRequest {
    prefix: std::collections::VecDeque<Bytes>,
    inner: Incoming,
    sink: RequestSink,
    client_error: Arc<Mutex<Option<String>>>,
}

impl HttpBody for StreamingRequest {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        if let Some(b) = this.prefix.pop_front() {
            return Poll::Ready(Some(Ok(Frame::data(b))));
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(d) = frame.data_ref() {
                    this.sink.push(d);
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => {
                let msg = format!(
                    "reading the request body from the client failed after {} bytes: {e}",
                    this.sink.len()
                );
                if let Ok(mut c) = this.client_error.lock() {
                    *c = Some(msg);
                }
                Poll::Ready(Some(Err(Box::new(e))))
            }
            other => other.map(|o| o.map(|r| r.map_err(|e| -> BoxError { Box::new(e) }))),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.prefix.is_empty() && self.inner.is_end_stream()
    }
}

/// `e` and its sources, `: `-joined.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut chain = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        let t = s.to_string();
        if !chain.contains(&t) {
            chain.push_str(": ");
            chain.push_str(&t);
        }
        src = s.source();
    }
    chain
}

/// The recorded text for an upstream body that ended in an error: a reset (TCP RST) and a
/// close before the body ended (a stall, then FIN) read differently, each with how long the
/// upstream had been silent and how much arrived.
fn body_error_text(e: &(dyn std::error::Error + 'static), quiet_ms: u64, bytes: u64) -> String {
    let mut reset = false;
    let mut src: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = src {
        if let Some(io) = s.downcast_ref::<std::io::Error>()
            && matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::ConnectionAborted
            )
        {
            reset = true;
        }
        src = s.source();
    }
    let incomplete = e
        .downcast_ref::<hyper::Error>()
        .is_some_and(|h| h.is_incomplete_message());
    let chain = error_chain(e);
    let lead = if reset {
        "the upstream reset the connection (TCP RST) mid-response"
    } else if incomplete || chain.contains("end of file") || chain.contains("unexpected EOF") {
        "the upstream closed the connection before the response body ended"
    } else {
        "the upstream response body failed mid-response"
    };
    format!("{lead}, {quiet_ms} ms after its last byte, {bytes} body bytes received ({chain})")
}

/// What a WebSocket pass-through needs from the listener: shutdown tokens and the connection
/// count (an upgraded connection outlives its HTTP connection's task).
#[derive(Clone)]
struct WsCtx {
    stop: CancellationToken,
    cut: CancellationToken,
    conns: Arc<ConnCount>,
}

/// True for an HTTP/1.1 WebSocket upgrade request (RFC 6455 §4.1: `Upgrade: websocket`,
/// `Connection: Upgrade`).
fn is_websocket_upgrade(h: &hyper::HeaderMap) -> bool {
    let has = |name: hyper::header::HeaderName, token: &str| {
        h.get_all(name).iter().any(|v| {
            v.to_str()
                .is_ok_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
        })
    };
    has(hyper::header::UPGRADE, "websocket") && has(hyper::header::CONNECTION, "upgrade")
}

/// A WebSocket upgrade: forwarded to the upstream on a fresh connection with its `Connection`
/// and `Upgrade` headers; on `101` both connections are joined and recorded
/// ([`crate::record::websocket`]); any other answer is forwarded and recorded as an ordinary
/// exchange.
async fn upgrade(
    mut req: HRequest<Incoming>,
    upstream: Upstream,
    rec: Recorder,
    ws: WsCtx,
) -> HResponse<BoxBody<Bytes, BoxError>> {
    let client_up = hyper::upgrade::on(&mut req);
    let path = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| "/".into());
    let req_headers = header_pairs(req.headers());
    let target = format!("{}{}", upstream.prefix, path);
    let mut up = HRequest::builder()
        .method(req.method().clone())
        .uri(&target);
    if let Some(h) = up.headers_mut() {
        for (k, v) in req.headers() {
            let keep = k == hyper::header::CONNECTION || k == hyper::header::UPGRADE;
            if (keep || !is_hop(k.as_str())) && k != hyper::header::HOST {
                h.append(k.clone(), v.clone());
            }
        }
        if let Ok(host) = HeaderValue::from_str(&upstream.authority) {
            h.insert(hyper::header::HOST, host);
        }
        if let Some(auth) = &upstream.basic_auth
            && !h.contains_key(hyper::header::AUTHORIZATION)
        {
            h.insert(hyper::header::AUTHORIZATION, auth.clone());
        }
    }
    let method = req.method().as_str().to_owned();
    let fail = |msg: String| {
        let mut a = rec.begin(&method, &path, req_headers.clone(), b"");
        a.request_done();
        a.finish(Outcome::UpstreamError, Some(msg.clone()));
        text_response(StatusCode::BAD_GATEWAY, msg + "\n")
    };
    let Ok(up) = up.body(full_body(Bytes::new())) else {
        return fail(format!(
            "toolscope proxy: cannot build the upstream upgrade request for {}{target}",
            upstream.base
        ));
    };
    let sent = async {
        let tcp = TcpStream::connect(&upstream.connect)
            .await
            .map_err(|e| -> BoxError {
                format!("connecting to {}: {e}", upstream.connect).into()
            })?;
        let _ = tcp.set_nodelay(true);
        let (mut sender, conn) = client_h1::Builder::new()
            .handshake::<_, UpBody>(TokioIo::new(tcp))
            .await?;
        tokio::spawn(conn.with_upgrades());
        Ok::<_, BoxError>(sender.send_request(up).await?)
    }
    .await;
    let resp = match sent {
        Ok(r) => r,
        Err(e) => {
            return fail(format!(
                "toolscope proxy: upstream {} failed: {}",
                upstream.base,
                error_chain(&*e)
            ));
        }
    };
    let status = resp.status();
    let mut forwarded = Vec::new();
    let mut out = HResponse::builder().status(status);
    if let Some(h) = out.headers_mut() {
        for (k, v) in resp.headers() {
            let keep = status == StatusCode::SWITCHING_PROTOCOLS
                && (k == hyper::header::CONNECTION || k == hyper::header::UPGRADE);
            if keep || !is_hop(k.as_str()) {
                h.append(k.clone(), v.clone());
                forwarded.push((
                    k.as_str().to_owned(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                ));
            }
        }
    }
    if status != StatusCode::SWITCHING_PROTOCOLS {
        // Refused (llama-server has no WebSocket: 404): an ordinary exchange.
        let mut a = rec.begin(&method, &path, req_headers, b"");
        a.head(status.as_u16(), forwarded);
        let body = match resp.into_body().collect().await {
            Ok(b) => b.to_bytes(),
            Err(e) => {
                a.finish(
                    Outcome::UpstreamError,
                    Some(format!(
                        "reading the upstream's answer to the upgrade failed: {e}"
                    )),
                );
                return text_response(StatusCode::BAD_GATEWAY, format!("toolscope proxy: {e}\n"));
            }
        };
        a.chunk(&body);
        a.finish(Outcome::Complete, None);
        return match out.body(full_body(body)) {
            Ok(r) => r,
            Err(e) => text_response(StatusCode::BAD_GATEWAY, format!("toolscope proxy: {e}\n")),
        };
    }
    let recorder = crate::record::websocket::WsRecorder::new(
        rec,
        path,
        req_headers,
        status.as_u16(),
        forwarded,
    );
    let guard = ws.conns.enter();
    tokio::spawn(async move {
        let _guard = guard;
        let (c, u) = tokio::join!(client_up, hyper::upgrade::on(resp));
        if let (Ok(c), Ok(u)) = (c, u) {
            crate::record::websocket::pump(
                TokioIo::new(c),
                TokioIo::new(u),
                recorder,
                ws.cut,
                ws.stop,
            )
            .await;
        }
    });
    match out.body(full_body(Bytes::new())) {
        Ok(r) => r,
        Err(e) => text_response(StatusCode::BAD_GATEWAY, format!("toolscope proxy: {e}\n")),
    }
}

async fn handle(
    req: HRequest<Incoming>,
    slot: Slot,
    upstream: Upstream,
    rec: Recorder,
    ws: WsCtx,
) -> Result<HResponse<BoxBody<Bytes, BoxError>>, Infallible> {
    if is_websocket_upgrade(req.headers()) {
        return Ok(upgrade(req, upstream, rec, ws).await);
    }
    let (parts, mut body) = req.into_parts();
    let path = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| "/".into());
    let mut req_headers = header_pairs(&parts.headers);
    if upstream.direct {
        // `send`'s internal hop: record the host a direct request carries
        for (k, v) in req_headers.iter_mut() {
            if k.eq_ignore_ascii_case("host") {
                v.clone_from(&upstream.authority);
            }
        }
    }
    // The exchange starts with the request head, so a shutdown or a client that goes away
    // mid-upload still records what arrived.
    let mut active = rec.begin_request(parts.method.as_str(), &path, req_headers);
    let sink = active.request_sink();
    let (frames, size, whole) = match read_body_start(&mut body, &sink).await {
        Ok(r) => r,
        Err(msg) => {
            // The client went away (or sent a broken body) before the request was complete.
            active.finish(Outcome::ClientDisconnected, Some(msg.clone()));
            return Ok(text_response(
                StatusCode::BAD_REQUEST,
                format!("toolscope proxy: {msg}\n"),
            ));
        }
    };
    // live view: the request (its body while it is in memory)
    active.request_done();
    let client_error = Arc::new(Mutex::new(None::<String>));
    // A whole body is kept (≤ 1 MiB) so a kept connection that turns out closed can take it
    // again; a longer one streams once, on a fresh connection.
    let buffered: Option<Bytes> = whole.then(|| {
        let mut b = bytes::BytesMut::with_capacity(size);
        for f in &frames {
            b.extend_from_slice(f);
        }
        b.freeze()
    });
    let streaming = match &buffered {
        Some(_) => None,
        None => Some(StreamingRequest {
            prefix: frames,
            inner: body,
            sink: sink.clone(),
            client_error: client_error.clone(),
        }),
    };
    // proxy --otlp: the exchange span's place, propagated upstream as `traceparent`
    // (W3C Trace Context, "tracestate Header": a `tracestate` is the vendor data of the trace
    // its `traceparent` names and is discarded without a valid one, so when the exchange
    // starts a trace of its own the client's `tracestate` is not forwarded)
    let mut restarted = false;
    let traceparent = rec.otlp().map(|o| {
        let t = o.route(&path, &header_pairs(&parts.headers), buffered.as_deref());
        let v = HeaderValue::from_str(&t.upstream_header()).ok();
        restarted = t.parent.is_none();
        active.set_trace(t);
        v
    });
    let out = Outgoing {
        parts: &parts,
        target: format!("{}{}", upstream.prefix, path),
        upstream: &upstream,
        traceparent: traceparent.flatten(),
        drop_tracestate: restarted,
    };
    let (resp, conn) = match forward(&out, buffered, streaming, &slot).await {
        Ok(r) => r,
        Err(Forward::Build(e)) => {
            let msg = format!(
                "toolscope proxy: cannot build the upstream request for {}{}: {e}",
                upstream.base, out.target
            );
            active.finish(Outcome::UpstreamError, Some(msg.clone()));
            return Ok(text_response(StatusCode::BAD_GATEWAY, msg + "\n"));
        }
        Err(Forward::Failed(e)) => {
            if let Some(c) = client_error.lock().ok().and_then(|mut c| c.take()) {
                active.finish(Outcome::ClientDisconnected, Some(c.clone()));
                return Ok(text_response(
                    StatusCode::BAD_REQUEST,
                    format!("toolscope proxy: {c}\n"),
                ));
            }
            let msg = format!(
                "toolscope proxy: upstream {} failed: {}",
                upstream.base,
                error_chain(&*e)
            );
            active.finish(Outcome::UpstreamError, Some(msg.clone()));
            return Ok(text_response(StatusCode::BAD_GATEWAY, msg + "\n"));
        }
    };
    Ok(respond(resp, conn, slot, active))
}

/// Reads a request body up to [`SPILL_AT`] bytes (or its end), each frame recorded in `sink`:
/// the frames, their size, and whether that was the whole body. `Err`: the client's body
/// failed first.
async fn read_body_start(
    body: &mut Incoming,
    sink: &RequestSink,
) -> Result<(std::collections::VecDeque<Bytes>, usize, bool), String> {
    let mut frames = std::collections::VecDeque::new();
    let mut size = 0usize;
    while size <= SPILL_AT {
        match body.frame().await {
            None => return Ok((frames, size, true)),
            Some(Ok(frame)) => {
                if let Ok(d) = frame.into_data() {
                    sink.push(&d);
                    size += d.len();
                    frames.push_back(d);
                }
            }
            Some(Err(e)) => {
                return Err(format!(
                    "reading the request body failed after {size} bytes: {e}"
                ));
            }
        }
    }
    Ok((frames, size, false))
}

/// The request as it goes upstream: the client's method and headers (hop-by-hop ones
/// dropped), the upstream's `Host`, Basic credentials from the upstream URL when the client
/// sent none, and the `traceparent` of `proxy --otlp`.
struct Outgoing<'a> {
    parts: &'a hyper::http::request::Parts,
    target: String,
    upstream: &'a Upstream,
    traceparent: Option<HeaderValue>,
    /// The client's `tracestate` is left out (the exchange started a new trace).
    drop_tracestate: bool,
}

impl Outgoing<'_> {
    fn build(&self, b: UpBody) -> Result<HRequest<UpBody>, hyper::http::Error> {
        let mut up = HRequest::builder()
            .method(self.parts.method.clone())
            .uri(&self.target);
        if let Some(h) = up.headers_mut() {
            for (k, v) in self.parts.headers.iter() {
                if self.drop_tracestate && k.as_str() == "tracestate" {
                    continue;
                }
                if !is_hop(k.as_str()) && k != hyper::header::HOST {
                    h.append(k.clone(), v.clone());
                }
            }
            if let Ok(host) = HeaderValue::from_str(&self.upstream.authority) {
                h.insert(hyper::header::HOST, host);
            }
            if let Some(auth) = &self.upstream.basic_auth
                && !h.contains_key(hyper::header::AUTHORIZATION)
            {
                h.insert(hyper::header::AUTHORIZATION, auth.clone());
            }
            if let Some(tp) = &self.traceparent {
                h.insert(HeaderName::from_static("traceparent"), tp.clone());
            }
        }
        up.body(b)
    }
}

/// Why [`forward`] got no response head.
enum Forward {
    /// The upstream request could not be built (a bad target).
    Build(hyper::http::Error),
    /// Sending failed (connect, write, or no answer).
    Failed(BoxError),
}

/// Sends the request upstream and waits for the response head: on the client connection's
/// kept upstream connection when it has one (a buffered body only), again on a fresh
/// connection when the kept one turns out closed before the request was written.
async fn forward(
    out: &Outgoing<'_>,
    buffered: Option<Bytes>,
    mut streaming: Option<StreamingRequest>,
    slot: &Slot,
) -> Result<(HResponse<Incoming>, Option<UpstreamConn>), Forward> {
    let mut next_body = || -> Option<UpBody> {
        match &buffered {
            Some(b) => Some(full_body(b.clone())),
            None => streaming.take().map(|s| s.boxed()),
        }
    };
    let first = out
        .build(next_body().expect("a body"))
        .map_err(Forward::Build)?;
    let kept = slot.lock().ok().and_then(|mut s| s.take());
    let mut first = Some(first);
    let sent = match kept {
        // A kept connection the upstream closed meanwhile fails before the request is
        // written: send it again on a fresh connection (buffered bodies only).
        Some(conn) if buffered.is_some() => match conn.send(first.take().expect("unused")).await {
            Err(SendError::NotSent(_)) => None,
            r => Some(r.map_err(SendError::into_inner)),
        },
        _ => None,
    };
    let sent = match sent {
        Some(r) => r,
        None => {
            let req = match first.take() {
                Some(r) => Some(r),
                None => next_body().and_then(|b| out.build(b).ok()),
            };
            match (req, UpstreamConn::connect(&out.upstream.connect).await) {
                (Some(req), Ok(conn)) => conn.send(req).await.map_err(SendError::into_inner),
                (None, _) => Err("the request body could not be sent again".into()),
                (_, Err(e)) => Err(e),
            }
        }
    };
    sent.map_err(Forward::Failed)
}

/// The client's response: the upstream's status and headers (hop-by-hop ones dropped,
/// recorded), and its body forwarded and recorded frame by frame ([`RecordingBody`]).
fn respond(
    resp: HResponse<Incoming>,
    conn: Option<UpstreamConn>,
    slot: Slot,
    mut active: ActiveExchange,
) -> HResponse<BoxBody<Bytes, BoxError>> {
    let (rparts, rbody) = resp.into_parts();
    let mut out = HResponse::builder()
        .status(rparts.status)
        .version(hyper::Version::HTTP_11);
    let mut forwarded = Vec::new();
    if let Some(h) = out.headers_mut() {
        for (k, v) in rparts.headers.iter() {
            if !is_hop(k.as_str()) {
                h.append(HeaderName::clone(k), v.clone());
                forwarded.push((
                    k.as_str().to_owned(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                ));
            }
        }
    }
    active.head(rparts.status.as_u16(), forwarded);
    let body = RecordingBody::new(rbody, conn, slot, active);
    match out.body(body.boxed()) {
        Ok(r) => r,
        Err(e) => text_response(
            StatusCode::BAD_GATEWAY,
            format!("toolscope proxy: bad upstream response head: {e}\n"),
        ),
    }
}

type UpstreamSocket = TokioIo<TcpStream>;

/// One upstream HTTP/1.1 connection, driven by whoever holds it (it has no task of its own).
struct UpstreamConn {
    sender: client_h1::SendRequest<UpBody>,
    conn: Pin<Box<client_h1::Connection<UpstreamSocket, UpBody>>>,
}

/// Where a client connection keeps its idle upstream connection between requests.
type Slot = Arc<Mutex<Option<UpstreamConn>>>;

/// Drives `conn` once; `Some(result)` when the connection has ended.
fn poll_conn(
    conn: &mut Pin<Box<client_h1::Connection<UpstreamSocket, UpBody>>>,
    cx: &mut TaskContext<'_>,
) -> Option<hyper::Result<()>> {
    match conn.as_mut().poll(cx) {
        Poll::Ready(r) => Some(r),
        Poll::Pending => None,
    }
}

impl UpstreamConn {
    /// Opens a connection to `addr` (`host:port`) with `TCP_NODELAY`.
    async fn connect(addr: &str) -> Result<UpstreamConn, BoxError> {
        let tcp = TcpStream::connect(addr)
            .await
            .map_err(|e| -> BoxError { format!("connecting to {addr}: {e}").into() })?;
        let _ = tcp.set_nodelay(true);
        let (sender, conn) = client_h1::Builder::new()
            .handshake(TokioIo::new(tcp))
            .await?;
        Ok(UpstreamConn {
            sender,
            conn: Box::pin(conn),
        })
    }

    /// Sends `req` and waits for the response head, driving the connection meanwhile.
    /// Returns the response and, unless the connection ended meanwhile, the connection (its
    /// body still to be read through it).
    async fn send(
        mut self,
        req: HRequest<UpBody>,
    ) -> Result<(HResponse<Incoming>, Option<UpstreamConn>), SendError> {
        // Ready: the connection is idle and open (a kept one may have been closed upstream).
        std::future::poll_fn(|cx| {
            if let Some(r) = poll_conn(&mut self.conn, cx) {
                let why = match r {
                    Ok(()) => "the upstream closed the connection".into(),
                    Err(e) => e.into(),
                };
                return Poll::Ready(Err(SendError::NotSent(why)));
            }
            self.sender
                .poll_ready(cx)
                .map_err(|e| SendError::NotSent(e.into()))
        })
        .await?;
        let mut ended = false;
        let mut resp = std::pin::pin!(self.sender.send_request(req));
        let resp = std::future::poll_fn(|cx| {
            if !ended {
                ended = poll_conn(&mut self.conn, cx).is_some();
            }
            resp.as_mut().poll(cx)
        })
        .await
        .map_err(|e| {
            // Canceled: never written. Incomplete message: the upstream closed the connection
            // without a byte of answer — a kept connection it closed just as the request went
            // out (the keep-alive race); it answered nothing, so the request may go again.
            if e.is_canceled() || e.is_incomplete_message() {
                SendError::NotSent(e.into())
            } else {
                SendError::Failed(e.into())
            }
        })?;
        Ok((resp, (!ended).then_some(self)))
    }
}

/// Why [`UpstreamConn::send`] got no response head.
enum SendError {
    /// The connection was closed before the request was written: safe to send again.
    NotSent(BoxError),
    /// The request may have reached the upstream.
    Failed(BoxError),
}

impl SendError {
    fn into_inner(self) -> BoxError {
        match self {
            SendError::NotSent(e) | SendError::Failed(e) => e,
        }
    }
}

/// The upstream response body, forwarded frame by frame and recorded on the way. Polling it
/// also drives the upstream connection (see the module docs); when the body ends whole the
/// connection goes back to the client connection's [`Slot`] for its next request.
struct RecordingBody {
    inner: Incoming,
    conn: Option<UpstreamConn>,
    slot: Slot,
    active: Option<ActiveExchange>,
}

impl RecordingBody {
    fn new(
        inner: Incoming,
        conn: Option<UpstreamConn>,
        slot: Slot,
        active: ActiveExchange,
    ) -> RecordingBody {
        let mut b = RecordingBody {
            inner,
            conn,
            slot,
            active: Some(active),
        };
        if b.inner.is_end_stream() {
            b.end(Outcome::Complete, None);
        }
        b
    }

    fn error_text(&self, e: &hyper::Error) -> String {
        let (quiet, bytes) = self
            .active
            .as_ref()
            .map_or((0, 0), |a| (a.quiet_ms(), a.body_len()));
        body_error_text(e, quiet, bytes)
    }

    fn end(&mut self, outcome: Outcome, error: Option<String>) {
        if let Some(a) = self.active.take() {
            a.finish(outcome, error);
        }
        // Only a connection whose response was read whole can carry the next request.
        if let Some(conn) = self.conn.take()
            && outcome == Outcome::Complete
            && let Ok(mut s) = self.slot.lock()
        {
            *s = Some(conn);
        }
    }
}

impl HttpBody for RecordingBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        // Drive the upstream connection here: it reads the socket and hands the next decoded
        // chunk to `inner` (or its error), waking this same task.
        let mut conn_error = None;
        if let Some(c) = this.conn.as_mut()
            && let Some(r) = poll_conn(&mut c.conn, cx)
        {
            conn_error = r.err();
            this.conn = None;
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Some(Ok(frame))) => {
                if let (Some(data), Some(a)) = (frame.data_ref(), this.active.as_mut()) {
                    a.chunk(data);
                }
                if this.inner.is_end_stream() {
                    this.end(Outcome::Complete, None);
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => {
                let text = this.error_text(&e);
                this.end(Outcome::UpstreamError, Some(text));
                Poll::Ready(Some(Err(Box::new(e))))
            }
            Poll::Ready(None) => {
                match conn_error {
                    Some(e) => {
                        let text = this.error_text(&e);
                        this.end(Outcome::UpstreamError, Some(text))
                    }
                    None => this.end(Outcome::Complete, None),
                }
                Poll::Ready(None)
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
