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
//!   body is cut off, not completed) and the exchange is recorded as `upstream_error`. An
//!   upstream that cannot be reached gives the client HTTP 502 with a plain-text reason.
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
use tokio::sync::{mpsc, oneshot};

use crate::record::recorder::{
    ActiveExchange, RecordEvent, Recorder, RecorderConfig, detect_engine, now_rfc3339,
};
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
        }
    }
}

/// The recording proxy.
pub struct Proxy;

/// A running proxy. Stop it with [`ProxyHandle::shutdown`] (dropping it stops accepting but
/// does not wait for the session to be written).
pub struct ProxyHandle {
    addr: SocketAddr,
    recorder: Recorder,
    header: Header,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

#[derive(Clone)]
struct Upstream {
    /// `host:port` as given (the `Host` header sent upstream).
    authority: String,
    /// `host:port` with the default port 80 filled in (what is connected to).
    connect: String,
    prefix: String,
    base: String,
}

fn parse_upstream(url: &str) -> anyhow::Result<Upstream> {
    let uri: Uri = url
        .parse()
        .with_context(|| format!("upstream URL {url:?} is not a URL"))?;
    match uri.scheme_str() {
        Some("http") => {}
        Some("https") => bail!(
            "upstream {url}: https is not supported (local inference servers speak plain HTTP)"
        ),
        _ => bail!("upstream {url:?}: expected http://HOST:PORT"),
    }
    let authority = uri
        .authority()
        .with_context(|| format!("upstream {url:?} has no host"))?
        .to_string();
    let prefix = uri.path().trim_end_matches('/').to_owned();
    let connect = match uri.port_u16() {
        Some(_) => authority.clone(),
        None => format!("{authority}:80"),
    };
    Ok(Upstream {
        base: format!("http://{authority}{prefix}"),
        authority,
        connect,
        prefix,
    })
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
        let upstream = parse_upstream(&cfg.upstream)?;
        let listener = TcpListener::bind(cfg.listen)
            .await
            .with_context(|| format!("binding {}", cfg.listen))?;
        let addr = listener.local_addr()?;
        let mut header = new_header(now_rfc3339());
        header.upstream = Some(upstream.base.clone());
        let mut render_from = None;
        if cfg.detect_engine {
            let (engine, props) = detect_engine(&upstream.base).await;
            if engine.kind == "llama-server" {
                render_from = Some(upstream.base.clone());
            }
            header.engine = Some(engine);
            header.props = props;
        }
        let recorder = Recorder::open(
            RecorderConfig {
                session: cfg.session.clone(),
                keep_secrets: cfg.keep_secrets,
                label: cfg.label.clone(),
                render_from,
            },
            &header,
            events,
        )?;
        let (stop_tx, mut stop_rx) = oneshot::channel::<()>();
        let rec = recorder.clone();
        let task = tokio::spawn(async move {
            loop {
                tokio::select! {
                    biased;
                    _ = &mut stop_rx => break,
                    accepted = listener.accept() => {
                        let Ok((stream, _peer)) = accepted else {
                            tokio::time::sleep(Duration::from_millis(10)).await;
                            continue;
                        };
                        let _ = stream.set_nodelay(true);
                        let upstream = upstream.clone();
                        let rec = rec.clone();
                        tokio::spawn(async move {
                            // This client connection's upstream connection, kept between its requests.
                            let slot = Slot::default();
                            let svc = hyper::service::service_fn(move |req| handle(req, slot.clone(), upstream.clone(), rec.clone()));
                            let _ = hyper::server::conn::http1::Builder::new()
                                .keep_alive(true)
                                .serve_connection(TokioIo::new(stream), svc)
                                .await;
                        });
                    }
                }
            }
        });
        Ok(ProxyHandle {
            addr,
            recorder,
            header,
            stop: Some(stop_tx),
            task: Some(task),
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

    /// The recorder (to wait for exchanges with [`Recorder::settle`]).
    pub fn recorder(&self) -> &Recorder {
        &self.recorder
    }

    /// Stops accepting, waits up to `timeout` for in-flight exchanges and annotations, writes
    /// everything queued and closes the session. Returns false when the wait timed out (the
    /// exchanges still in flight are then lost, as after a crash).
    pub async fn shutdown(mut self, timeout: Duration) -> bool {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
        let settled = self.recorder.settle(timeout).await;
        let rec = self.recorder.clone();
        let _ = tokio::task::spawn_blocking(move || rec.close()).await;
        settled
    }
}

impl Drop for ProxyHandle {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
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

async fn handle(
    req: HRequest<Incoming>,
    slot: Slot,
    upstream: Upstream,
    rec: Recorder,
) -> Result<HResponse<BoxBody<Bytes, BoxError>>, Infallible> {
    let (parts, body) = req.into_parts();
    let path = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| "/".into());
    let req_headers = header_pairs(&parts.headers);
    let body = match body.collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            // The client went away (or sent a broken body) before the request was complete.
            let active = rec.begin(parts.method.as_str(), &path, req_headers, b"");
            active.finish(
                Outcome::ClientDisconnected,
                Some(format!("reading the request body failed: {e}")),
            );
            return Ok(text_response(
                StatusCode::BAD_REQUEST,
                format!("toolscope proxy: reading the request body failed: {e}\n"),
            ));
        }
    };
    let mut active = rec.begin(parts.method.as_str(), &path, req_headers, &body);

    let target = format!("{}{}", upstream.prefix, path);
    let build = || {
        let mut up = HRequest::builder()
            .method(parts.method.clone())
            .uri(&target);
        if let Some(h) = up.headers_mut() {
            for (k, v) in parts.headers.iter() {
                if !is_hop(k.as_str()) && k != hyper::header::HOST {
                    h.append(k.clone(), v.clone());
                }
            }
            if let Ok(host) = HeaderValue::from_str(&upstream.authority) {
                h.insert(hyper::header::HOST, host);
            }
        }
        up.body(Full::new(body.clone()))
    };
    let first = match build() {
        Ok(r) => r,
        Err(e) => {
            let msg = format!(
                "toolscope proxy: cannot build the upstream request for {}{target}: {e}",
                upstream.base
            );
            active.finish(Outcome::UpstreamError, Some(msg.clone()));
            return Ok(text_response(StatusCode::BAD_GATEWAY, msg + "\n"));
        }
    };
    let kept = slot.lock().ok().and_then(|mut s| s.take());
    let mut first = Some(first);
    let mut sent = match kept {
        // A kept connection the upstream closed meanwhile fails before the request is
        // written: send it again on a fresh connection.
        Some(conn) => match conn.send(first.take().expect("unused")).await {
            Err(SendError::NotSent(_)) => None,
            r => Some(r.map_err(SendError::into_inner)),
        },
        None => None,
    };
    if sent.is_none() {
        sent = Some(match UpstreamConn::connect(&upstream.connect).await {
            Ok(conn) => conn
                .send(
                    first
                        .take()
                        .map_or_else(build, Ok)
                        .expect("built once already"),
                )
                .await
                .map_err(SendError::into_inner),
            Err(e) => Err(e),
        });
    }
    let (resp, conn) = match sent.expect("set above") {
        Ok(r) => r,
        Err(e) => {
            let mut chain = e.to_string();
            let mut src = std::error::Error::source(&*e);
            while let Some(s) = src {
                chain.push_str(": ");
                chain.push_str(&s.to_string());
                src = s.source();
            }
            let msg = format!(
                "toolscope proxy: upstream {} failed: {chain}",
                upstream.base
            );
            active.finish(Outcome::UpstreamError, Some(msg.clone()));
            return Ok(text_response(StatusCode::BAD_GATEWAY, msg + "\n"));
        }
    };
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
        Ok(r) => Ok(r),
        Err(e) => Ok(text_response(
            StatusCode::BAD_GATEWAY,
            format!("toolscope proxy: bad upstream response head: {e}\n"),
        )),
    }
}

type UpstreamSocket = TokioIo<TcpStream>;

/// One upstream HTTP/1.1 connection, driven by whoever holds it (it has no task of its own).
struct UpstreamConn {
    sender: client_h1::SendRequest<Full<Bytes>>,
    conn: Pin<Box<client_h1::Connection<UpstreamSocket, Full<Bytes>>>>,
}

/// Where a client connection keeps its idle upstream connection between requests.
type Slot = Arc<Mutex<Option<UpstreamConn>>>;

/// Drives `conn` once; `Some(result)` when the connection has ended.
fn poll_conn(
    conn: &mut Pin<Box<client_h1::Connection<UpstreamSocket, Full<Bytes>>>>,
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
        req: HRequest<Full<Bytes>>,
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
                this.end(
                    Outcome::UpstreamError,
                    Some(format!("upstream body failed mid-response: {e}")),
                );
                Poll::Ready(Some(Err(Box::new(e))))
            }
            Poll::Ready(None) => {
                match conn_error {
                    Some(e) => this.end(
                        Outcome::UpstreamError,
                        Some(format!("upstream connection failed mid-response: {e}")),
                    ),
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
