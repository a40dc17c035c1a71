//! Live traces (`toolscope proxy --otlp URL`): OTLP/HTTP JSON spans sent to a collector as
//! exchanges end, off the client's path.
//!
//! * **Shape.** A trace per conversation ([`crate::conversation`]): a span per exchange with
//!   the GenAI attributes `export --format otel` writes (one builder,
//!   [`crate::export::otel::span_of_exchange`]), findings as span events, and an
//!   `execute_tool {name}` span per answered call between two turns
//!   ([`crate::export::otel::tool_span`]: from the end of the exchange whose reply made the call
//!   to the start of the request that carried its result, parented on the calling exchange's
//!   span). A sub-agent conversation's first exchange links to the span of the exchange whose
//!   call started it.
//! * **Context.** When a request arrives ([`Otlp::route`]) its chat history is looked up in a
//!   [`Continuations`] index: a request that continues an earlier one joins that
//!   conversation's trace, one that continues none starts a trace. A W3C `traceparent` on the
//!   client's request wins: the exchange span joins that trace with the incoming span as its
//!   parent. Either way the request goes upstream with `traceparent: 00-{trace}-{exchange
//!   span}-{flags}`, so an engine that traces (vLLM `--otlp-traces-endpoint`) nests its span
//!   under the exchange.
//! * **Never on the client's path.** The ended exchange is offered to a bounded queue
//!   ([`EXCHANGE_QUEUE`]; full: counted as dropped); a background task analyses it (findings,
//!   the [`LiveFold`] that links calls to results) and queues its spans ([`SPAN_QUEUE`]); a
//!   second task posts them in batches with a request timeout. A collector that is down,
//!   hangs or answers an error costs the batch, counted in [`OtlpStats::dropped`].

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc;

use crate::conversation::{Continuations, LiveFold, Msg, TurnInput, chat_messages};
use crate::export::otel::{SpanPlace, export_request, span_of_exchange, tool_span, unix_nanos};
use crate::session::{Api, Exchange, Header};

/// Ended exchanges waiting for their spans to be built; one more is dropped (and counted).
pub const EXCHANGE_QUEUE: usize = 64;
/// Spans waiting to be posted; one more is dropped (and counted).
pub const SPAN_QUEUE: usize = 4096;
/// Spans per POST at most.
pub const BATCH: usize = 256;
/// The collector POST's default timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// A W3C Trace Context `traceparent` (version `00`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceParent {
    /// 32 lowercase hex digits, not all zero.
    pub trace: String,
    /// The parent span: 16 lowercase hex digits, not all zero.
    pub span: String,
    /// Trace flags (bit 0: sampled).
    pub flags: u8,
}

impl TraceParent {
    /// Parses a `traceparent` header value (W3C Trace Context §3.2): `00-{32 hex}-{16
    /// hex}-{2 hex}`, lowercase; a later version is read by its first four fields (it must
    /// then go on with `-` or end). Version `ff`, all-zero ids, upper-case or a wrong length:
    /// `None` (the header is then ignored, as the specification says).
    pub fn parse(v: &str) -> Option<TraceParent> {
        let v = v.trim_matches([' ', '\t']);
        let b = v.as_bytes();
        let hex = |s: &[u8]| {
            !s.is_empty()
                && s.iter()
                    .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c))
        };
        if b.len() < 55 || !hex(&b[..2]) || &b[..2] == b"ff" {
            return None;
        }
        if b[2] != b'-' || b[35] != b'-' || b[52] != b'-' {
            return None;
        }
        if &b[..2] == b"00" && b.len() != 55 {
            return None;
        }
        if b.len() > 55 && b[55] != b'-' {
            return None;
        }
        let (trace, span, flags) = (&b[3..35], &b[36..52], &b[53..55]);
        if !hex(trace) || !hex(span) || !hex(flags) {
            return None;
        }
        if trace.iter().all(|&c| c == b'0') || span.iter().all(|&c| c == b'0') {
            return None;
        }
        Some(TraceParent {
            trace: v[3..35].to_owned(),
            span: v[36..52].to_owned(),
            flags: u8::from_str_radix(&v[53..55], 16).ok()?,
        })
    }

    /// The header value: `00-{trace}-{span}-{flags}`.
    pub fn header(&self) -> String {
        format!("00-{}-{}-{:02x}", self.trace, self.span, self.flags)
    }
}

/// Where one exchange's span goes, decided when its request arrives ([`Otlp::route`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExchangeTrace {
    /// The exchange span's trace (the incoming `traceparent`'s, else its conversation's).
    pub trace: String,
    /// The exchange span's id.
    pub span: String,
    /// The incoming `traceparent`'s span, the exchange span's parent.
    pub parent: Option<String>,
    /// Trace flags to propagate (the incoming ones, else sampled).
    pub flags: u8,
}

impl ExchangeTrace {
    /// The `traceparent` sent upstream: this trace, the exchange span as the parent.
    pub fn upstream_header(&self) -> String {
        TraceParent {
            trace: self.trace.clone(),
            span: self.span.clone(),
            flags: self.flags,
        }
        .header()
    }
}

/// What the exporter did so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OtlpStats {
    /// Spans the collector accepted (HTTP 2xx).
    pub sent: u64,
    /// Spans lost: queue full, collector down, hanging past the timeout, or answering an
    /// error; an exchange dropped before its spans were built counts as one.
    pub dropped: u64,
    /// POSTs that failed.
    pub failed_posts: u64,
}

#[derive(Default)]
struct Counters {
    /// Spans accepted into the span queue.
    queued: AtomicU64,
    /// Of those, spans whose POST failed.
    failed: AtomicU64,
    sent: AtomicU64,
    dropped: AtomicU64,
    failed_posts: AtomicU64,
    /// Ended exchanges accepted into the exchange queue ([`Otlp::offer`]).
    offered: AtomicU64,
    /// Of those, exchanges the builder task took from the queue (turned into spans, or
    /// counted as dropped when their analysis failed).
    built: AtomicU64,
}

/// The request-time index: conversations by history, each with its trace.
#[derive(Default)]
struct Router {
    index: Continuations,
    /// Per index entry: the conversation's trace.
    traces: Vec<String>,
}

struct Ended {
    ex: Exchange,
    trace: Option<ExchangeTrace>,
}

struct Inner {
    endpoint: String,
    router: Mutex<Router>,
    tx: Mutex<Option<mpsc::Sender<Ended>>>,
    counters: Counters,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    timeout: Duration,
}

/// The live exporter: cheap to clone. Start it with [`Otlp::start`], route each request with
/// [`Otlp::route`], hand it each ended exchange with [`Otlp::offer`], stop it with
/// [`Otlp::finish`].
#[derive(Clone)]
pub struct Otlp {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Otlp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Otlp")
            .field("endpoint", &self.endpoint_shown())
            .finish()
    }
}

/// `URL/v1/traces`, or `URL` when its path already ends with `/v1/traces`. Only `http://` (the
/// recorder has no TLS; the scheme in any case). Errors (naming the flag, userinfo redacted):
/// not a URL, no host, a query or fragment (it would stand before the appended path), a port
/// over 65535.
pub fn traces_endpoint(url: &str) -> anyhow::Result<String> {
    let shown = crate::session::redact::redact_url(url).into_owned();
    let bad = |why: &str| anyhow::anyhow!("--otlp {shown:?}: {why}");
    let u: hyper::Uri = url
        .trim()
        .parse()
        .map_err(|e| bad(&format!("not a URL: {e}")))?;
    if !u
        .scheme_str()
        .is_some_and(|s| s.eq_ignore_ascii_case("http"))
    {
        return Err(bad("expected http://HOST:PORT[/PATH] (no TLS)"));
    }
    let Some(authority) = u.authority() else {
        return Err(bad("expected http://HOST:PORT[/PATH] (no host)"));
    };
    if u.query().is_some() || url.contains('#') {
        return Err(bad(
            "a query or fragment cannot take the /v1/traces path: drop it",
        ));
    }
    // hyper takes any digits as a port; a port must fit 16 bits
    if let Some(p) = authority.as_str().rsplit_once(':').map(|(_, p)| p)
        && !p.is_empty()
        && !p.ends_with(']')
        && p.parse::<u16>().is_err()
    {
        return Err(bad(&format!("port {p} is not a port (1 to 65535)")));
    }
    let path = u.path().trim_end_matches('/');
    let path = if path.ends_with("/v1/traces") {
        path.to_owned()
    } else {
        format!("{path}/v1/traces")
    };
    Ok(format!("http://{authority}{path}"))
}

/// Refuses a collector URL that points at the proxy itself (`listen`, the bound address): each
/// POST of spans would be recorded as an exchange, traced and POSTed again, without end.
/// Compares the endpoint's host (a loopback IP, `localhost`, or the listen IP) and port.
pub fn check_not_self(endpoint: &str, listen: std::net::SocketAddr) -> anyhow::Result<()> {
    let Ok(u) = endpoint.parse::<hyper::Uri>() else {
        return Ok(());
    };
    let (Some(host), Some(port)) = (u.host(), u.port_u16().or(Some(80))) else {
        return Ok(());
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let ip: Option<std::net::IpAddr> = host.parse().ok();
    let same_host = host.eq_ignore_ascii_case("localhost")
        || ip
            .is_some_and(|ip| ip == listen.ip() || (ip.is_loopback() && listen.ip().is_loopback()))
        || (listen.ip().is_unspecified() && ip.is_some_and(|ip| ip.is_loopback()));
    if same_host && port == listen.port() {
        anyhow::bail!(
            "--otlp {}: that is this proxy's own address ({listen}): its span POSTs would be recorded and traced without end; point --otlp at the collector",
            crate::session::redact::redact_url(endpoint)
        );
    }
    Ok(())
}

/// 64 random bits (never zero): the process's random hash keys over a counter and the clock.
fn random_u64() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.finish().max(1)
}

/// A new trace id: 32 lowercase hex digits.
pub fn new_trace_id() -> String {
    format!("{:016x}{:016x}", random_u64(), random_u64())
}

/// A new span id: 16 lowercase hex digits.
pub fn new_span_id() -> String {
    format!("{:016x}", random_u64())
}

/// The chat history of a request body (after its `content-encoding`), as the conversation
/// grouping keys it; `None` for anything that is not a chat request.
fn history(path: &str, headers: &[(String, String)], body: &[u8]) -> Option<Vec<Msg>> {
    let api = Api::from_path(path);
    if !api.is_generation() {
        return None;
    }
    let bytes = crate::session::encoding::decode_request_body(headers, body, 1 << 20).ok()?;
    let v: Value = serde_json::from_slice(&bytes).ok()?;
    let msgs = chat_messages(api, &v)?;
    Some(msgs.iter().map(Msg::from_chat).collect())
}

impl Otlp {
    /// Starts the exporter's two background tasks (on the current tokio runtime) for the
    /// collector at `url` ([`traces_endpoint`]); `header` describes the resource (engine,
    /// upstream). `timeout` bounds each POST.
    pub fn start(url: &str, timeout: Duration, header: Header) -> anyhow::Result<Otlp> {
        let endpoint = traces_endpoint(url)?;
        let (tx, rx) = mpsc::channel::<Ended>(EXCHANGE_QUEUE);
        let (stx, srx) = mpsc::channel::<Value>(SPAN_QUEUE);
        let inner = Arc::new(Inner {
            endpoint,
            router: Mutex::new(Router::default()),
            tx: Mutex::new(Some(tx)),
            counters: Counters::default(),
            tasks: Mutex::new(Vec::new()),
            timeout,
        });
        let provider = header.engine.as_ref().map(|e| e.kind.to_string());
        let builder = tokio::spawn(build_spans(
            rx,
            stx,
            inner.clone(),
            header.clone(),
            provider,
        ));
        let sender = tokio::spawn(post_spans(srx, inner.clone(), header));
        if let Ok(mut t) = inner.tasks.lock() {
            t.push(builder);
            t.push(sender);
        }
        Ok(Otlp { inner })
    }

    /// The collector endpoint spans are posted to.
    pub fn endpoint(&self) -> &str {
        &self.inner.endpoint
    }

    /// [`Otlp::endpoint`] as printed: URL userinfo redacted.
    pub fn endpoint_shown(&self) -> String {
        crate::session::redact::redact_url(&self.inner.endpoint).into_owned()
    }

    /// Decides where a request's exchange span goes, when the request has arrived (`path`
    /// with its query, the headers as received, the body when it is whole): the trace of the
    /// conversation it continues, or a new one; under the incoming `traceparent` when there is
    /// a valid one. Hashes the request's messages; no I/O.
    pub fn route(
        &self,
        path: &str,
        headers: &[(String, String)],
        body: Option<&[u8]>,
    ) -> ExchangeTrace {
        let incoming = headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("traceparent"))
            .and_then(|(_, v)| TraceParent::parse(v));
        let msgs = body.and_then(|b| history(path, headers, b));
        let conv_trace = match (&msgs, self.inner.router.lock()) {
            (Some(m), Ok(mut r)) => {
                let t = match r.index.parent(m) {
                    Some(p) => r.traces[p].clone(),
                    None => incoming
                        .as_ref()
                        .map_or_else(new_trace_id, |i| i.trace.clone()),
                };
                r.index.insert(m);
                r.traces.push(t.clone());
                Some(t)
            }
            _ => None,
        };
        match incoming {
            Some(i) => ExchangeTrace {
                trace: i.trace,
                span: new_span_id(),
                parent: Some(i.span),
                flags: i.flags,
            },
            None => ExchangeTrace {
                trace: conv_trace.unwrap_or_else(new_trace_id),
                span: new_span_id(),
                parent: None,
                flags: 1,
            },
        }
    }

    /// Hands over an ended exchange (bodies while in memory) and where its span goes (`None`:
    /// routed now, e.g. a WebSocket exchange). Never waits: a full queue drops it (counted).
    pub fn offer(&self, ex: Exchange, trace: Option<ExchangeTrace>) {
        let sent = match self.inner.tx.lock() {
            Ok(g) => g
                .as_ref()
                .is_some_and(|tx| tx.try_send(Ended { ex, trace }).is_ok()),
            Err(_) => false,
        };
        let c = &self.inner.counters;
        if sent {
            c.offered.fetch_add(1, Ordering::Relaxed);
        } else {
            c.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The counts so far.
    pub fn stats(&self) -> OtlpStats {
        let c = &self.inner.counters;
        OtlpStats {
            sent: c.sent.load(Ordering::Relaxed),
            dropped: c.dropped.load(Ordering::Relaxed),
            failed_posts: c.failed_posts.load(Ordering::Relaxed),
        }
    }

    /// Closes the queue and waits up to `wait` for what it holds to be posted (each POST is
    /// bounded by the timeout), or until `hurry` completes (a second Ctrl-C / SIGTERM): then
    /// the tasks are stopped at once. Spans still queued after that are counted as dropped,
    /// and so is each ended exchange the builder had not yet taken from its queue (one span
    /// each: its exchange span; the tool spans it would have opened are not counted).
    pub async fn finish(&self, wait: Duration, hurry: impl Future<Output = ()>) -> OtlpStats {
        if let Ok(mut g) = self.inner.tx.lock() {
            g.take();
        }
        let tasks: Vec<_> = match self.inner.tasks.lock() {
            Ok(mut t) => t.drain(..).collect(),
            Err(_) => Vec::new(),
        };
        let aborts: Vec<_> = tasks.iter().map(|t| t.abort_handle()).collect();
        let deadline = tokio::time::Instant::now() + wait;
        let drain = async {
            for t in tasks {
                let _ = tokio::time::timeout_at(deadline, t).await;
            }
        };
        tokio::select! {
            () = drain => {}
            () = hurry => {}
        }
        for a in &aborts {
            a.abort();
        }
        // spans queued but never posted (the wait ran out) are dropped too
        let c = &self.inner.counters;
        let queued = c.queued.swap(0, Ordering::Relaxed);
        let done = c.sent.load(Ordering::Relaxed) + c.failed.swap(0, Ordering::Relaxed);
        let unbuilt = c
            .offered
            .swap(0, Ordering::Relaxed)
            .saturating_sub(c.built.swap(0, Ordering::Relaxed));
        c.dropped
            .fetch_add(queued.saturating_sub(done) + unbuilt, Ordering::Relaxed);
        self.stats()
    }
}

/// Per exchange already folded: its span's trace and id, and its end (µs since the epoch).
struct Folded {
    trace: String,
    span: String,
    end_us: Option<i64>,
}

/// The builder task: analyses each ended exchange, folds it into the conversations, and
/// queues its exchange span and the tool spans of the calls its request answered.
async fn build_spans(
    mut rx: mpsc::Receiver<Ended>,
    stx: mpsc::Sender<Value>,
    inner: Arc<Inner>,
    header: Header,
    provider: Option<String>,
) {
    let header = Arc::new(header);
    let mut fold = LiveFold::new();
    let mut folded: HashMap<u64, Folded> = HashMap::new();
    let queue = |span: Value| match stx.try_send(span) {
        Ok(()) => {
            inner.counters.queued.fetch_add(1, Ordering::Relaxed);
        }
        Err(_) => {
            inner.counters.dropped.fetch_add(1, Ordering::Relaxed);
        }
    };
    while let Some(Ended { ex, trace }) = rx.recv().await {
        let trace = match trace {
            Some(t) => t,
            None => {
                let body = ex.request.body.bytes();
                let o = Otlp {
                    inner: inner.clone(),
                };
                o.route(&ex.request.path, &ex.request.headers, Some(&body))
            }
        };
        let h = header.clone();
        // the analysis is CPU work: off the runtime's threads
        let analysed = tokio::task::spawn_blocking(move || {
            if !ex.api().is_generation() {
                return (ex, Vec::new(), None);
            }
            let ctx = crate::analysis::Context {
                header: &h,
                annotations: &[],
            };
            let a = crate::analysis::analyse(ex, ctx, crate::analysis::Depth::Findings);
            let turn = TurnInput::from_analysed(&a);
            (a.exchange, a.findings, turn)
        })
        .await;
        let Ok((ex, findings, turn)) = analysed else {
            inner.counters.dropped.fetch_add(1, Ordering::Relaxed);
            inner.counters.built.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        let mut place = SpanPlace {
            trace: trace.trace.clone(),
            span: trace.span.clone(),
            parent: trace.parent.clone(),
            links: Vec::new(),
        };
        let mut end_us = None;
        if let Some(turn) = turn {
            end_us = turn
                .started_us
                .zip(turn.total_us)
                .map(|(s, d)| s + d as i64);
            let started_ns = turn.started_us.map(|s| s.max(0) as u128 * 1000);
            let p = fold.push(turn);
            for &i in &p.answered {
                let link = &fold.state().calls[i];
                let Some(caller) = folded.get(&link.exchange) else {
                    continue;
                };
                let start = caller.end_us.map_or(0, |e| e.max(0) as u128 * 1000);
                let tool = SpanPlace {
                    trace: caller.trace.clone(),
                    span: new_span_id(),
                    parent: Some(caller.span.clone()),
                    links: Vec::new(),
                };
                let end = started_ns.unwrap_or_else(|| unix_nanos(&ex.started));
                queue(tool_span(&tool, link, start, end));
            }
            if let Some((by, _)) = p.started_by
                && let Some(caller) = folded.get(&by)
            {
                place
                    .links
                    .push((caller.trace.clone(), caller.span.clone()));
            }
        }
        // counted as built with its span queued, no await point between: an abort of this
        // task leaves every offered exchange either built or counted as unbuilt
        inner.counters.built.fetch_add(1, Ordering::Relaxed);
        queue(span_of_exchange(
            &place,
            provider.as_deref(),
            &ex,
            &findings,
        ));
        folded.insert(
            ex.id,
            Folded {
                trace: trace.trace,
                span: trace.span,
                end_us,
            },
        );
    }
}

/// The sender task: posts queued spans in batches of up to [`BATCH`], each POST bounded by
/// the timeout; a failed POST's spans are counted as dropped.
async fn post_spans(mut srx: mpsc::Receiver<Value>, inner: Arc<Inner>, header: Header) {
    let client = match reqwest::Client::builder()
        .timeout(inner.timeout)
        .connect_timeout(inner.timeout)
        .build()
    {
        Ok(c) => c,
        Err(_) => reqwest::Client::new(),
    };
    let mut batch = Vec::with_capacity(BATCH);
    while let Some(first) = srx.recv().await {
        batch.push(first);
        while batch.len() < BATCH {
            match srx.try_recv() {
                Ok(s) => batch.push(s),
                Err(_) => break,
            }
        }
        let n = batch.len() as u64;
        let body = export_request(&header, std::mem::take(&mut batch));
        let ok = match client
            .post(&inner.endpoint)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
        {
            Ok(r) => r.status().is_success(),
            Err(_) => false,
        };
        let c = &inner.counters;
        if ok {
            c.sent.fetch_add(n, Ordering::Relaxed);
        } else {
            c.dropped.fetch_add(n, Ordering::Relaxed);
            c.failed.fetch_add(n, Ordering::Relaxed);
            c.failed_posts.fetch_add(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Exchanges still in the exchange queue when the exporter is cut are drops: on a
    /// current-thread runtime the builder task has not run yet when `finish` stops it, so
    /// none of the five offered exchanges became a span.
    #[tokio::test(flavor = "current_thread")]
    async fn exchanges_the_builder_never_took_are_counted_as_dropped() {
        let o = Otlp::start(
            "http://127.0.0.1:9",
            Duration::from_secs(5),
            Header::default(),
        )
        .unwrap();
        for id in 0..5 {
            o.offer(
                Exchange {
                    id,
                    ..Default::default()
                },
                None,
            );
        }
        let stats = o.finish(Duration::ZERO, std::future::ready(())).await;
        assert_eq!((stats.sent, stats.dropped), (0, 5), "{stats:?}");
    }

    #[test]
    fn traceparent_parse_and_format() {
        let v = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let t = TraceParent::parse(v).unwrap();
        assert_eq!(t.trace, "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(t.span, "00f067aa0ba902b7");
        assert_eq!(t.flags, 1);
        assert_eq!(t.header(), v);
        // a later version with more fields is read by its first four
        assert!(TraceParent::parse(&format!("cc{}-what", &v[2..])).is_some());
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
        ] {
            assert_eq!(TraceParent::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn endpoint_gets_v1_traces_once() {
        assert_eq!(
            traces_endpoint("http://127.0.0.1:4318").unwrap(),
            "http://127.0.0.1:4318/v1/traces"
        );
        assert_eq!(
            traces_endpoint("http://127.0.0.1:4318/v1/traces/").unwrap(),
            "http://127.0.0.1:4318/v1/traces"
        );
        assert_eq!(
            traces_endpoint("http://c:4318/otel").unwrap(),
            "http://c:4318/otel/v1/traces"
        );
        assert!(traces_endpoint("https://c:4318").is_err());
        assert!(traces_endpoint("c:4318").is_err());
        // review: a query or fragment ended up before /v1/traces; an impossible port passed
        assert_eq!(
            traces_endpoint("HTTP://c:4318/").unwrap(),
            "http://c:4318/v1/traces"
        );
        for bad in [
            "http://c:4318?tenant=a",
            "http://c:4318/#x",
            "http://c:99999",
        ] {
            let e = traces_endpoint(bad).unwrap_err().to_string();
            assert!(e.starts_with("--otlp"), "{bad}: {e}");
        }
        // credentials never in the message
        let e = traces_endpoint("http://u:s3cret@c:4318?x")
            .unwrap_err()
            .to_string();
        assert!(!e.contains("s3cret"), "{e}");
    }

    #[test]
    fn a_collector_at_the_proxys_own_address_is_refused() {
        let listen: std::net::SocketAddr = "127.0.0.1:18904".parse().unwrap();
        for own in [
            "http://127.0.0.1:18904/v1/traces",
            "http://localhost:18904/v1/traces",
            "http://127.0.0.2:18904/v1/traces",
        ] {
            assert!(check_not_self(own, listen).is_err(), "{own}");
        }
        for other in [
            "http://127.0.0.1:4318/v1/traces",
            "http://10.0.0.1:18904/v1/traces",
        ] {
            assert!(check_not_self(other, listen).is_ok(), "{other}");
        }
        let any: std::net::SocketAddr = "0.0.0.0:18904".parse().unwrap();
        assert!(check_not_self("http://127.0.0.1:18904/v1/traces", any).is_err());
    }
}
