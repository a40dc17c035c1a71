//! The recording proxy against a local fake upstream (loopback only, bounded in count):
//! 200 SSE streams, 16 at once, with random client disconnects and upstream resets mid-stream.
//! Nothing may be mixed between exchanges, every completed exchange must be recorded whole,
//! partial ones marked; a client disconnect must cancel the upstream request.

use crate::support;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use toolscope::record::proxy::{Proxy, ProxyConfig, ProxyHandle};
use toolscope::session::{Outcome, read_session};

/// What the fake upstream did for one test stream id: events written, and whether a write
/// failed (the proxy closed the connection: the request was cancelled).
#[derive(Debug, Default, Clone)]
struct UpstreamLog {
    written: usize,
    write_failed: bool,
}

type Logs = Arc<Mutex<HashMap<u64, UpstreamLog>>>;

/// Reads one HTTP/1.1 request head (+ body by content-length); returns the head text
/// ([`support::read_http_request`]).
async fn read_request(s: &mut TcpStream) -> Option<String> {
    support::read_http_request(s).await.map(|(head, _)| head)
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// Fake SSE upstream. Request headers: `x-test-id: N`, `x-events: E` (events to send),
/// `x-reset-after: K` (send K events then reset the TCP connection). Events are
/// `data: {"stream":N,"seq":i,"pad":"…"}\n\n`, one chunked frame each, 1 ms apart.
async fn fake_upstream(listener: TcpListener, logs: Logs) {
    loop {
        let Ok((mut s, _)) = listener.accept().await else {
            continue;
        };
        let logs = logs.clone();
        tokio::spawn(async move {
            let _ = s.set_nodelay(true);
            // One request per connection is enough; keep-alive reuse is exercised by the pool.
            while let Some(head) = read_request(&mut s).await {
                let id: u64 = header(&head, "x-test-id")
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                let events: usize = header(&head, "x-events")
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(3);
                let reset: Option<usize> =
                    header(&head, "x-reset-after").and_then(|v| v.parse().ok());
                let head_out = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n";
                if s.write_all(head_out.as_bytes()).await.is_err() {
                    return;
                }
                for i in 0..events {
                    if reset == Some(i) {
                        #[allow(deprecated)] // zero linger: an immediate RST, no blocking
                        let _ = s.set_linger(Some(Duration::ZERO));
                        drop(s);
                        return;
                    }
                    let ev = format!(
                        "data: {{\"stream\":{id},\"seq\":{i},\"pad\":\"{}\"}}\n\n",
                        "x".repeat((id as usize * 7 + i) % 50)
                    );
                    let frame = format!("{:x}\r\n{ev}\r\n", ev.len());
                    if s.write_all(frame.as_bytes()).await.is_err() {
                        logs.lock().unwrap().entry(id).or_default().write_failed = true;
                        return;
                    }
                    logs.lock().unwrap().entry(id).or_default().written = i + 1;
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                if s.write_all(b"0\r\n\r\n").await.is_err() {
                    logs.lock().unwrap().entry(id).or_default().write_failed = true;
                    return;
                }
            }
        });
    }
}

/// A proxy in front of `upstream` (no engine detection), recording into a fresh temporary
/// folder (kept alive by the returned guard).
async fn proxy_to(upstream: &str) -> (tempfile::TempDir, std::path::PathBuf, ProxyHandle) {
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join("session.jsonl");
    let mut cfg = ProxyConfig::new(upstream, session.clone());
    cfg.detect_engine = false;
    let proxy = Proxy::spawn(cfg, None).await.unwrap();
    (dir, session, proxy)
}

/// `POST /v1/chat/completions` with `body` through `proxy`.
async fn post_chat(proxy: &ProxyHandle, body: &'static str) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", proxy.url()))
        .body(body)
        .send()
        .await
        .unwrap()
}

/// Writes a `200` response with a JSON `body` and its `content-length` (a fake upstream).
async fn write_json(s: &mut TcpStream, body: &str) {
    let resp = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(resp.as_bytes()).await.unwrap();
}

/// Deterministic xorshift generator (no external RNG, reproducible runs).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Plan {
    Complete { events: usize },
    ClientDrop { events: usize, after: usize },
    UpstreamReset { events: usize, after: usize },
}

/// Checks an SSE body's events all belong to `id` and are seq 0, 1, 2, … (a contiguous prefix).
/// Returns the number of whole events.
fn check_events(id: u64, body: &[u8]) -> usize {
    let text = std::str::from_utf8(body).expect("recorded SSE bytes are UTF-8 here");
    let mut n = 0;
    for block in text.split("\n\n") {
        let Some(data) = block.strip_prefix("data: ") else {
            assert!(
                block.is_empty() || !text.ends_with("\n\n"),
                "stream {id}: stray bytes {block:?}"
            );
            continue;
        };
        let Ok(v) = serde_json::from_str::<serde_json::Value>(data) else {
            continue;
        }; // cut last event
        assert_eq!(
            v["stream"], id,
            "stream {id}: an event of another stream was mixed in: {data}"
        );
        assert_eq!(
            v["seq"], n as u64,
            "stream {id}: events out of order or missing"
        );
        n += 1;
    }
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_hundred_streams_with_disconnects_and_resets() {
    let up = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let up_addr = up.local_addr().unwrap();
    let logs: Logs = Arc::default();
    tokio::spawn(fake_upstream(up, logs.clone()));

    let (_dir, session, proxy) = proxy_to(&format!("http://{up_addr}")).await;
    assert!(proxy.local_addr().ip().is_loopback());
    let url = format!("{}/v1/chat/completions", proxy.url());

    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let plans: Vec<Plan> = (0..200)
        .map(|_| match rng.below(3) {
            0 => Plan::Complete {
                events: 5 + rng.below(40) as usize,
            },
            1 => {
                let events = 60 + rng.below(40) as usize;
                Plan::ClientDrop {
                    events,
                    after: 1 + rng.below(20) as usize,
                }
            }
            _ => {
                let events = 30 + rng.below(20) as usize;
                Plan::UpstreamReset {
                    events,
                    after: 1 + rng.below(20) as usize,
                }
            }
        })
        .collect();

    let client = reqwest::Client::new();
    let received: Vec<(u64, Plan, Vec<u8>, bool)> =
        futures::stream::iter(plans.iter().copied().enumerate())
            .map(|(i, plan)| {
                let client = client.clone();
                let url = url.clone();
                async move {
                    let id = i as u64 + 1000;
                    let (events, reset) = match plan {
                        Plan::Complete { events } | Plan::ClientDrop { events, .. } => {
                            (events, None)
                        }
                        Plan::UpstreamReset { events, after } => (events, Some(after)),
                    };
                    let mut req = client
                        .post(&url)
                        .header("x-test-id", id.to_string())
                        .header("x-events", events.to_string())
                        .header("authorization", "Bearer sk-secret")
                        .body(format!("{{\"model\":\"m{id}\",\"stream\":true}}"));
                    if let Some(k) = reset {
                        req = req.header("x-reset-after", k.to_string());
                    }
                    let resp = req.send().await.expect("proxy answers");
                    assert_eq!(resp.status(), 200);
                    let mut got = Vec::new();
                    let mut errored = false;
                    let mut stream = resp.bytes_stream();
                    while let Some(c) = stream.next().await {
                        match c {
                            Ok(b) => got.extend_from_slice(&b),
                            Err(_) => {
                                errored = true;
                                break;
                            }
                        }
                        if let Plan::ClientDrop { after, .. } = plan
                            && got.windows(2).filter(|w| w == b"\n\n").count() >= after
                        {
                            break; // drop the stream: the client disconnects mid-response
                        }
                    }
                    (id, plan, got, errored)
                }
            })
            .buffer_unordered(16)
            .collect()
            .await;

    assert!(
        proxy.shutdown(Duration::from_secs(30)).await,
        "exchanges still in flight after 30 s"
    );
    let s = read_session(&session).unwrap();
    assert!(s.warnings.is_empty(), "{:?}", s.warnings);
    assert_eq!(
        s.exchanges.len(),
        200,
        "every exchange, complete or partial, is recorded"
    );
    let mut ids: Vec<u64> = s.exchanges.iter().map(|e| e.id).collect();
    ids.sort();
    assert_eq!(
        ids,
        (1..=200).collect::<Vec<_>>(),
        "exchange ids are unique and dense"
    );
    let by_test: HashMap<u64, &toolscope::session::Exchange> = s
        .exchanges
        .iter()
        .map(|e| {
            let h = e
                .request
                .headers
                .iter()
                .find(|(k, _)| k == "x-test-id")
                .expect("x-test-id recorded");
            (h.1.parse().unwrap(), e)
        })
        .collect();
    assert_eq!(by_test.len(), 200);
    let logs = logs.lock().unwrap().clone();
    let (mut n_complete, mut n_drop, mut n_reset) = (0, 0, 0);
    for (id, plan, got, errored) in &received {
        let ex = by_test[id];
        let auth = ex
            .request
            .headers
            .iter()
            .find(|(k, _)| k == "authorization")
            .unwrap();
        assert_eq!(auth.1, "Bearer [redacted]");
        assert_eq!(ex.model().as_deref(), Some(format!("m{id}").as_str()));
        let rec = ex.response_bytes();
        assert!(ex.is_stream(), "stream {id} recorded as chunks");
        let n = check_events(*id, &rec);
        match plan {
            Plan::Complete { events } => {
                n_complete += 1;
                assert!(!errored);
                assert_eq!(ex.outcome, Outcome::Complete, "stream {id}: {:?}", ex.error);
                assert_eq!(&rec, got, "stream {id}: recorded bytes == client bytes");
                assert_eq!(n, *events, "stream {id} recorded whole");
                let chunks = ex.response.as_ref().unwrap().chunks.as_ref().unwrap();
                assert!(
                    chunks.windows(2).all(|w| w[0].t_us <= w[1].t_us),
                    "offsets are monotonic"
                );
                assert!(ex.timings.ttfb_us.unwrap() <= chunks[0].t_us);
            }
            Plan::ClientDrop { events, after } => {
                n_drop += 1;
                assert_eq!(
                    ex.outcome,
                    Outcome::ClientDisconnected,
                    "stream {id}: {:?}",
                    ex.error
                );
                assert!(
                    rec.starts_with(got),
                    "stream {id}: client bytes are a prefix of the recording"
                );
                assert!(
                    n >= *after && n < *events,
                    "stream {id}: {n} events recorded of {events}"
                );
                let l = &logs[id];
                assert!(
                    l.write_failed && l.written < *events,
                    "stream {id}: upstream request not cancelled: {l:?}"
                );
            }
            Plan::UpstreamReset { after, .. } => {
                n_reset += 1;
                assert!(
                    errored,
                    "stream {id}: the client must see the upstream failure"
                );
                assert_eq!(ex.outcome, Outcome::UpstreamError, "stream {id}");
                assert!(ex.error.is_some());
                assert!(
                    rec.starts_with(got),
                    "stream {id}: client bytes are a prefix of the recording"
                );
                assert!(n <= *after, "stream {id}: more events recorded than sent");
            }
        }
    }
    assert!(
        n_complete > 40 && n_drop > 40 && n_reset > 40,
        "{n_complete} {n_drop} {n_reset}"
    );
}

#[tokio::test]
async fn unreachable_upstream_gives_502_and_plain_paths_pass_through() {
    // A port with nothing listening: bind, note the port, close.
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join("dead.jsonl");
    let mut cfg = ProxyConfig::new(&format!("http://{dead}"), session.clone());
    cfg.detect_engine = false;
    cfg.keep_secrets = true;
    let proxy = Proxy::spawn(cfg, None).await.unwrap();
    let resp = reqwest::Client::new()
        .get(format!("{}/v1/models?x=1", proxy.url()))
        .header("x-api-key", "k-123")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 502);
    let text = resp.text().await.unwrap();
    assert!(
        text.contains("toolscope proxy: upstream") && text.contains(&dead.to_string()),
        "{text}"
    );
    assert!(proxy.shutdown(Duration::from_secs(10)).await);
    let s = read_session(&session).unwrap();
    assert_eq!(s.exchanges.len(), 1);
    let ex = &s.exchanges[0];
    assert_eq!(ex.request.path, "/v1/models?x=1");
    assert_eq!(ex.outcome, Outcome::UpstreamError);
    assert!(ex.response.is_none());
    assert!(
        ex.request
            .headers
            .contains(&("x-api-key".into(), "k-123".into())),
        "--keep-secrets keeps the key"
    );
}

#[tokio::test]
async fn json_body_and_status_pass_through_unchanged() {
    // A tiny upstream answering 500 with a JSON body and a set-cookie header.
    let up = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let up_addr = up.local_addr().unwrap();
    let body = r#"{"error":{"code":500,"message":"The model produced output that does not match the expected peg-native format","type":"server_error"}}"#;
    tokio::spawn(async move {
        loop {
            let (mut s, _) = up.accept().await.unwrap();
            tokio::spawn(async move {
                while let Some(head) = read_request(&mut s).await {
                    assert!(
                        head.starts_with("POST /prefix/v1/chat/completions HTTP/1.1"),
                        "{head}"
                    );
                    let resp = format!(
                        "HTTP/1.1 500 Internal Server Error\r\ncontent-type: application/json; charset=utf-8\r\nset-cookie: sid=abc\r\ncontent-length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if s.write_all(resp.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    let (_dir, session, proxy) = proxy_to(&format!("http://{up_addr}/prefix/")).await;
    let resp = post_chat(&proxy, "{\"model\":\"x\"}").await;
    assert_eq!(resp.status(), 500);
    assert_eq!(
        resp.headers()["set-cookie"],
        "sid=abc",
        "the client gets the header; only the file is redacted"
    );
    assert_eq!(resp.text().await.unwrap(), body);
    assert!(proxy.shutdown(Duration::from_secs(10)).await);
    let s = read_session(&session).unwrap();
    let ex = &s.exchanges[0];
    assert_eq!(ex.outcome, Outcome::Complete);
    let r = ex.response.as_ref().unwrap();
    assert_eq!(r.status, 500);
    assert!(r.chunks.is_none());
    assert_eq!(r.body.as_ref().unwrap().to_text(), body);
    assert!(
        r.headers
            .contains(&("set-cookie".into(), "[redacted]".into()))
    );
    assert_eq!(
        s.header.upstream.as_deref(),
        Some(format!("http://{up_addr}/prefix").as_str())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_chunk_reaches_the_client_before_the_upstream_sends_the_next() {
    // Lockstep upstream: it sends the response head, then each event only after the client
    // (through the proxy) has seen the previous one. Any buffering on the forwarding side
    // (holding a chunk until more arrive) stalls the exchange and fails the wait below.
    let up = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let up_addr = up.local_addr().unwrap();
    let (seen_tx, mut seen_rx) = tokio::sync::mpsc::channel::<usize>(16);
    const EVENTS: usize = 5;
    let upstream = tokio::spawn(async move {
        let (mut s, _) = up.accept().await.unwrap();
        let _ = s.set_nodelay(true);
        read_request(&mut s).await.expect("request");
        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
        s.write_all(head.as_bytes()).await.unwrap();
        for i in 0..EVENTS {
            // Wait until the client saw the head (i = 0) or event i - 1.
            let got = tokio::time::timeout(Duration::from_secs(10), seen_rx.recv())
                .await
                .unwrap_or_else(|_| panic!("the proxy held back what came before event {i}"));
            assert_eq!(got, Some(i));
            let ev = format!("data: {{\"seq\":{i}}}\n\n");
            s.write_all(format!("{:x}\r\n{ev}\r\n", ev.len()).as_bytes())
                .await
                .unwrap();
        }
        s.write_all(b"0\r\n\r\n").await.unwrap();
    });
    let (_dir, session, proxy) = proxy_to(&format!("http://{up_addr}")).await;
    let resp = post_chat(&proxy, "{\"stream\":true}").await;
    assert_eq!(resp.status(), 200);
    seen_tx.send(0).await.unwrap();
    let mut got = Vec::new();
    let mut stream = resp.bytes_stream();
    let mut events = 0;
    while let Some(c) = stream.next().await {
        got.extend_from_slice(&c.unwrap());
        let n = got.windows(2).filter(|w| w == b"\n\n").count();
        while events < n {
            events += 1;
            if events < EVENTS {
                seen_tx.send(events).await.unwrap();
            }
        }
    }
    upstream.await.unwrap();
    assert_eq!(events, EVENTS);
    assert!(proxy.shutdown(Duration::from_secs(10)).await);
    let s = read_session(&session).unwrap();
    let ex = &s.exchanges[0];
    assert_eq!(ex.outcome, Outcome::Complete);
    assert_eq!(ex.response_bytes(), got);
    let chunks = ex.response.as_ref().unwrap().chunks.as_ref().unwrap();
    assert_eq!(
        chunks.len(),
        EVENTS,
        "one recorded chunk per upstream write"
    );
    assert!(ex.timings.ttfb_us.unwrap() < chunks[0].t_us);
    assert!(chunks.windows(2).all(|w| w[0].t_us < w[1].t_us));
}

/// Sends `GET path` on `s` (a kept-alive client connection) and reads the response, which
/// must carry `content-length`. Returns (head, body).
async fn get_on(s: &mut TcpStream, path: &str) -> (String, String) {
    let req = format!("GET {path} HTTP/1.1\r\nhost: proxy\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    let mut tmp = [0u8; 4096];
    loop {
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..pos]).to_string();
            let len: usize = header(&head, "content-length")
                .and_then(|v| v.parse().ok())
                .expect("content-length");
            if buf.len() >= pos + 4 + len {
                let body = String::from_utf8_lossy(&buf[pos + 4..pos + 4 + len]).to_string();
                return (head, body);
            }
        }
        let n = s.read(&mut tmp).await.unwrap();
        assert!(n > 0, "the proxy closed the client connection");
        buf.extend_from_slice(&tmp[..n]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_connection_keeps_its_upstream_connection_until_the_upstream_closes_it() {
    // The upstream answers two requests per connection, then closes it while idle (as a
    // keep-alive timeout does). One client connection sends four requests in a row: all must
    // pass, over exactly two upstream connections.
    let up = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let up_addr = up.local_addr().unwrap();
    let accepted = Arc::new(Mutex::new(0usize));
    let (closed_tx, mut closed_rx) = tokio::sync::mpsc::channel::<()>(8);
    // The first connection is closed only once the client has its second answer, so the
    // proxy is holding it idle when the upstream closes it.
    let release = Arc::new(tokio::sync::Notify::new());
    let rel = release.clone();
    let acc = accepted.clone();
    tokio::spawn(async move {
        loop {
            let (mut s, _) = up.accept().await.unwrap();
            let conn = next_conn(&acc);
            let closed_tx = closed_tx.clone();
            let rel = rel.clone();
            tokio::spawn(async move {
                for i in 0..2 {
                    if read_request(&mut s).await.is_none() {
                        break;
                    }
                    write_json(&mut s, &format!("{{\"conn\":{conn},\"request\":{i}}}")).await;
                }
                if conn == 1 {
                    rel.notified().await;
                }
                drop(s);
                let _ = closed_tx.send(()).await;
            });
        }
    });
    let (_dir, session, proxy) = proxy_to(&format!("http://{up_addr}")).await;
    let mut client = TcpStream::connect(proxy.local_addr()).await.unwrap();
    let mut bodies = Vec::new();
    for i in 1..=4 {
        let (head, body) = get_on(&mut client, "/v1/models").await;
        assert!(head.starts_with("HTTP/1.1 200"), "request {i}: {head}");
        bodies.push(body);
        if i == 2 {
            // The upstream closes the kept connection before request 3 is sent.
            release.notify_one();
            tokio::time::timeout(Duration::from_secs(10), closed_rx.recv())
                .await
                .unwrap();
        }
    }
    assert_eq!(
        bodies,
        [
            r#"{"conn":1,"request":0}"#,
            r#"{"conn":1,"request":1}"#,
            r#"{"conn":2,"request":0}"#,
            r#"{"conn":2,"request":1}"#
        ],
        "one upstream connection per two requests"
    );
    drop(client);
    assert!(proxy.shutdown(Duration::from_secs(10)).await);
    let s = read_session(&session).unwrap();
    assert_eq!(s.exchanges.len(), 4);
    assert!(s.exchanges.iter().all(|e| e.outcome == Outcome::Complete));
}

/// Counts an accepted upstream connection; returns its 1-based number.
fn next_conn(accepted: &Mutex<usize>) -> usize {
    let mut a = accepted.lock().unwrap();
    *a += 1;
    *a
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_connection_closed_instead_of_answered_is_retried_on_a_fresh_one() {
    // The keep-alive race llama-server shows after a stream: the upstream reads the next
    // request on the kept connection and closes it without a byte of answer. The proxy sends
    // the request again on a fresh connection; the client never sees the failure.
    let up = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let up_addr = up.local_addr().unwrap();
    let accepted = Arc::new(Mutex::new(0usize));
    let acc = accepted.clone();
    tokio::spawn(async move {
        loop {
            let (mut s, _) = up.accept().await.unwrap();
            let conn = next_conn(&acc);
            tokio::spawn(async move {
                while read_request(&mut s).await.is_some() {
                    write_json(&mut s, &format!("{{\"conn\":{conn}}}")).await;
                    if conn == 1 {
                        // Read the next request, then close without answering it.
                        let _ = read_request(&mut s).await;
                        return;
                    }
                }
            });
        }
    });
    let (_dir, session, proxy) = proxy_to(&format!("http://{up_addr}")).await;
    let mut client = TcpStream::connect(proxy.local_addr()).await.unwrap();
    let (h1, b1) = get_on(&mut client, "/v1/models").await;
    let (h2, b2) = get_on(&mut client, "/v1/models").await;
    assert!(
        h1.starts_with("HTTP/1.1 200") && h2.starts_with("HTTP/1.1 200"),
        "{h2}"
    );
    assert_eq!(
        (b1.as_str(), b2.as_str()),
        (r#"{"conn":1}"#, r#"{"conn":2}"#)
    );
    assert_eq!(*accepted.lock().unwrap(), 2);
    drop(client);
    assert!(proxy.shutdown(Duration::from_secs(10)).await);
    let s = read_session(&session).unwrap();
    assert_eq!(s.exchanges.len(), 2);
    assert!(s.exchanges.iter().all(|e| e.outcome == Outcome::Complete));
}

// ---------------------------------------------------------------------------------------------
// Issue #16: shutdown, redaction, bounded bodies, error texts, the `send` hop, escape sequences.
// ---------------------------------------------------------------------------------------------

/// Fake upstream streaming SSE slowly: event `i` of stream `x-test-id` every `x-delay-ms`
/// (default 100) ms, `x-events` events (default 1000: longer than any grace period here).
async fn slow_upstream(listener: TcpListener) {
    loop {
        let Ok((mut s, _)) = listener.accept().await else {
            continue;
        };
        tokio::spawn(async move {
            let Some(head) = read_request(&mut s).await else {
                return;
            };
            let id: u64 = header(&head, "x-test-id")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            let delay: u64 = header(&head, "x-delay-ms")
                .and_then(|v| v.parse().ok())
                .unwrap_or(100);
            let events: usize = header(&head, "x-events")
                .and_then(|v| v.parse().ok())
                .unwrap_or(1000);
            let head_out = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
            if s.write_all(head_out.as_bytes()).await.is_err() {
                return;
            }
            for i in 0..events {
                let ev = format!("data: {{\"stream\":{id},\"seq\":{i},\"pad\":\"\"}}\n\n");
                let frame = format!("{:x}\r\n{ev}\r\n", ev.len());
                if s.write_all(frame.as_bytes()).await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(delay)).await;
            }
            let _ = s.write_all(b"0\r\n\r\n").await;
        });
    }
}

/// A free loopback port (bound, noted, released).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `toolscope proxy --headless` as a child process, ready (its port accepts connections).
async fn proxy_bin(
    upstream: &str,
    session: &std::path::Path,
    extra: &[&str],
) -> (std::process::Child, String) {
    let port = free_port();
    #[allow(clippy::zombie_processes)] // waited on by `exited`, or killed on the hang guard
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_toolscope"))
        .args(["proxy", "--headless", "--upstream", upstream, "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--session")
        .arg(session)
        .args(extra)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // hang guard, not a timing assertion
    for _ in 0..3000 {
        if TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
            return (child, format!("http://127.0.0.1:{port}"));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("the proxy did not start listening");
}

fn signal(child: &std::process::Child, sig: &str) {
    let ok = std::process::Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(ok.success());
}

/// Waits for the child to exit (hang guard: 60 s); returns its output.
async fn exited(mut child: std::process::Child) -> std::process::Output {
    for _ in 0..6000 {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let _ = child.kill();
    panic!("hang guard: the proxy did not exit after the signal(s)");
}

/// Opens `n` streams through `url`, returns per stream the bytes received so far (shared, kept
/// growing by a task each) once every stream has at least `min_events` events.
async fn open_streams(url: &str, n: u64, min_events: usize) -> Vec<Arc<Mutex<Vec<u8>>>> {
    let mut got = Vec::new();
    for id in 0..n {
        let buf = Arc::new(Mutex::new(Vec::new()));
        got.push(buf.clone());
        let url = url.to_owned();
        tokio::spawn(async move {
            let resp = reqwest::Client::new()
                .post(format!("{url}/v1/chat/completions"))
                .header("x-test-id", id.to_string())
                .body(format!(
                    r#"{{"model":"m{id}","stream":true,"messages":[]}}"#
                ))
                .send()
                .await
                .unwrap();
            let mut s = resp.bytes_stream();
            while let Some(Ok(b)) = s.next().await {
                buf.lock().unwrap().extend_from_slice(&b);
            }
        });
    }
    for _ in 0..3000 {
        if got.iter().all(|b| {
            b.lock()
                .unwrap()
                .windows(2)
                .filter(|w| w == b"\n\n")
                .count()
                >= min_events
        }) {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("streams did not start");
}

/// Every exchange of `session` was cut by shutdown: outcome `shutdown`, the reason recorded,
/// and the events received so far kept whole and in order (at least what each client had
/// when the signal went out).
fn assert_cut(session: &std::path::Path, got_at_signal: &[usize]) {
    let s = read_session(session).unwrap();
    assert_eq!(s.exchanges.len(), got_at_signal.len(), "{:?}", s.warnings);
    for ex in &s.exchanges {
        let id: usize = ex
            .request
            .headers
            .iter()
            .find(|(k, _)| k == "x-test-id")
            .unwrap()
            .1
            .parse()
            .unwrap();
        assert_eq!(ex.outcome, Outcome::Shutdown, "stream {id}: {:?}", ex.error);
        let err = ex.error.as_deref().unwrap_or("");
        assert!(err.contains("cut by toolscope's shutdown"), "{err}");
        let n = check_events(id as u64, &ex.response_bytes());
        assert!(
            n >= got_at_signal[id],
            "stream {id}: {n} events recorded, the client had {}",
            got_at_signal[id]
        );
        assert_eq!(ex.model().as_deref(), Some(format!("m{id}").as_str()));
    }
}

fn events_in(b: &Arc<Mutex<Vec<u8>>>) -> usize {
    b.lock()
        .unwrap()
        .windows(2)
        .filter(|w| w == b"\n\n")
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_and_sigint_write_streams_running_past_the_grace_as_partial() {
    let up = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let up_url = format!("http://{}", up.local_addr().unwrap());
    tokio::spawn(slow_upstream(up));
    for sig in ["TERM", "INT"] {
        let dir = tempfile::tempdir().unwrap();
        let session = dir.path().join("s.jsonl");
        // streams last 1000 × 100 ms; the grace is 1 s
        let (child, url) = proxy_bin(&up_url, &session, &["--grace", "1"]).await;
        let got = open_streams(&url, 4, 2).await;
        let at_signal: Vec<usize> = got.iter().map(events_in).collect();
        signal(&child, sig);
        let out = exited(child).await;
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "SIG{sig}: {:?} {err}", out.status);
        assert!(
            err.contains("4 exchange(s) still running were cut"),
            "{err}"
        );
        assert_cut(&session, &at_signal);
        // the headless lines of the cut exchanges were printed too
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(stdout.matches("[shutdown: cut by").count(), 4, "{stdout}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_signal_cuts_at_once() {
    let up = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let up_url = format!("http://{}", up.local_addr().unwrap());
    tokio::spawn(slow_upstream(up));
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join("s.jsonl");
    // a grace far longer than the hang guard: only the second signal can end it in time
    let (mut child, url) = proxy_bin(&up_url, &session, &["--grace", "600"]).await;
    let got = open_streams(&url, 3, 1).await;
    signal(&child, "INT");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        child.try_wait().unwrap().is_none(),
        "still in its grace period"
    );
    let at_signal: Vec<usize> = got.iter().map(events_in).collect();
    signal(&child, "TERM");
    let out = exited(child).await;
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("SIGTERM again: cutting"), "{err}");
    assert_cut(&session, &at_signal);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_ending_within_the_grace_is_complete() {
    let up = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let up_url = format!("http://{}", up.local_addr().unwrap());
    tokio::spawn(slow_upstream(up));
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join("s.jsonl");
    let (child, url) = proxy_bin(&up_url, &session, &["--grace", "30"]).await;
    let client = reqwest::Client::new();
    let req = client
        .post(format!("{url}/v1/chat/completions"))
        .header("x-test-id", "0")
        .header("x-events", "8")
        .header("x-delay-ms", "100")
        .body(r#"{"model":"m0","stream":true,"messages":[]}"#)
        .send();
    let resp = req.await.unwrap();
    signal(&child, "TERM");
    let body = resp.bytes().await.unwrap();
    let out = exited(child).await;
    assert!(out.status.success());
    let s = read_session(&session).unwrap();
    assert_eq!(s.exchanges.len(), 1);
    assert_eq!(s.exchanges[0].outcome, Outcome::Complete);
    assert_eq!(s.exchanges[0].response_bytes(), body.to_vec());
    assert_eq!(check_events(0, &body), 8);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_and_escape_sequences_never_reach_the_file_or_the_terminal() {
    // upstream: answers JSON, remembers the request heads it got
    let up = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let up_addr = up.local_addr().unwrap();
    let heads = Arc::new(Mutex::new(Vec::<String>::new()));
    let heads2 = heads.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = up.accept().await else {
                continue;
            };
            let heads = heads2.clone();
            tokio::spawn(async move {
                while let Some(head) = read_request(&mut s).await {
                    heads.lock().unwrap().push(head);
                    write_json(
                        &mut s,
                        r#"{"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"ok"}}]}"#,
                    )
                    .await;
                }
            });
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join("s.jsonl");
    let upstream = format!("http://alice:S3CRET-PW@{up_addr}");
    let (child, url) = proxy_bin(&upstream, &session, &[]).await;
    let body =
        "{\"model\":\"m\\u001b]52;c;cm0gLXJm\\u0007\\u001b]0;title\\u0007\",\"messages\":[]}";
    let resp = reqwest::Client::new()
        .post(format!(
            "{url}/v1beta/models/g:generateContent?alt=sse&key=S3CRET-KEY&api_key=S3CRET-2&access_token=S3CRET-3&token=S3CRET-4"
        ))
        .header("x-goog-api-key", "S3CRET-HDR")
        .header("x-api-key", "S3CRET-5")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let _ = resp.bytes().await;
    // the line is printed when the exchange is written: wait for it in the file first
    for _ in 0..1000 {
        if std::fs::read_to_string(&session)
            .unwrap_or_default()
            .lines()
            .count()
            >= 2
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    signal(&child, "TERM");
    let out = exited(child).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // the terminal: no ESC, no BEL, the model shown visibly; no secret anywhere
    assert!(
        !out.stdout.contains(&0x1b) && !out.stdout.contains(&0x07),
        "{stdout}"
    );
    assert!(!out.stderr.contains(&0x1b), "{stderr}");
    assert!(stdout.contains("\\x1b]52;c;"), "{stdout}");
    assert!(
        !stdout.contains("S3CRET") && !stderr.contains("S3CRET"),
        "{stdout}{stderr}"
    );
    assert!(stderr.contains("http://[redacted]@"), "{stderr}");
    // the file: no secret; names kept; the escape bytes recorded untouched
    let file = std::fs::read_to_string(&session).unwrap();
    assert!(!file.contains("S3CRET"), "{file}");
    let s = read_session(&session).unwrap();
    let ex = &s.exchanges[0];
    assert_eq!(
        ex.request.path,
        "/v1beta/models/g:generateContent?alt=sse&key=[redacted]&api_key=[redacted]&access_token=[redacted]&token=[redacted]"
    );
    assert_eq!(ex.request.body.to_bytes(), body.as_bytes());
    assert_eq!(
        s.header.upstream.as_deref(),
        Some(format!("http://[redacted]@{up_addr}").as_str())
    );
    for k in ["x-goog-api-key", "x-api-key"] {
        assert!(
            ex.request
                .headers
                .contains(&(k.into(), "[redacted]".into())),
            "{k}"
        );
    }
    // on the wire the upstream got the key, and the URL's userinfo as Basic credentials
    let heads = heads.lock().unwrap();
    let post = heads
        .iter()
        .find(|h| h.starts_with("POST "))
        .expect("the request reached the upstream");
    assert!(post.contains("key=S3CRET-KEY"), "{post}");
    // base64("alice:S3CRET-PW")
    assert!(
        post.contains("authorization: Basic YWxpY2U6UzNDUkVULVBX"),
        "{post}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_reset_and_a_stall_then_close_record_different_errors() {
    // mode per request: `x-mode: reset` (2 events, then RST) or `close` (2 events, 300 ms of
    // silence, then FIN without the last chunk)
    let up = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let up_addr = up.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = up.accept().await else {
                continue;
            };
            tokio::spawn(async move {
                let Some(head) = read_request(&mut s).await else {
                    return;
                };
                let mode = header(&head, "x-mode").unwrap_or("").to_owned();
                let head_out = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
                s.write_all(head_out.as_bytes()).await.unwrap();
                for i in 0..2 {
                    let ev = format!("data: {{\"stream\":0,\"seq\":{i},\"pad\":\"\"}}\n\n");
                    s.write_all(format!("{:x}\r\n{ev}\r\n", ev.len()).as_bytes())
                        .await
                        .unwrap();
                }
                if mode == "reset" {
                    // let the head and events through first: a RST discards unread data
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    #[allow(deprecated)]
                    let _ = s.set_linger(Some(Duration::ZERO));
                    drop(s);
                } else {
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    let _ = s.shutdown().await;
                }
            });
        }
    });
    let (_dir, session, proxy) = proxy_to(&format!("http://{up_addr}")).await;
    for mode in ["reset", "close"] {
        let resp = reqwest::Client::new()
            .post(format!("{}/v1/chat/completions", proxy.url()))
            .header("x-mode", mode)
            .body("{}")
            .send()
            .await;
        if let Ok(resp) = resp {
            let _ = resp.bytes().await;
        }
    }
    assert!(proxy.shutdown(Duration::from_secs(10)).await);
    let s = read_session(&session).unwrap();
    assert_eq!(s.exchanges.len(), 2);
    let errs: Vec<&str> = s
        .exchanges
        .iter()
        .map(|e| e.error.as_deref().unwrap_or(""))
        .collect();
    assert!(
        s.exchanges
            .iter()
            .all(|e| e.outcome == Outcome::UpstreamError)
    );
    assert!(
        errs[0].contains("reset the connection (TCP RST)"),
        "{}",
        errs[0]
    );
    assert!(
        errs[1].contains("closed the connection before the response body ended"),
        "{}",
        errs[1]
    );
    // the stall is measured from the last byte: at least the 300 ms the upstream slept
    let ms: u64 = errs[1]
        .split(", ")
        .find_map(|p| p.strip_suffix(" ms after its last byte"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{}", errs[1]));
    assert!(ms >= 300, "{}", errs[1]);
    assert_ne!(errs[0], errs[1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_larger_than_the_memory_cap_are_recorded_byte_for_byte() {
    // upstream: echoes the request body's length, then streams 3 MiB of SSE in 4 KiB events
    let up = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let up_addr = up.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = up.accept().await else {
                continue;
            };
            tokio::spawn(async move {
                while read_request(&mut s).await.is_some() {
                    let head_out = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
                    s.write_all(head_out.as_bytes()).await.unwrap();
                    for i in 0..768 {
                        let ev = format!(
                            "data: {{\"stream\":0,\"seq\":{i},\"pad\":\"{}\"}}\n\n",
                            "é".repeat(2000)
                        );
                        s.write_all(format!("{:x}\r\n{ev}\r\n", ev.len()).as_bytes())
                            .await
                            .unwrap();
                    }
                    s.write_all(b"0\r\n\r\n").await.unwrap();
                }
            });
        }
    });
    let (_dir, session, proxy) = proxy_to(&format!("http://{up_addr}")).await;
    // a 3 MiB request body (text), forwarded as it arrives
    let body: String = (0..3 << 20)
        .map(|i| (b'a' + (i % 26) as u8) as char)
        .collect();
    let resp = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", proxy.url()))
        .body(body.clone())
        .send()
        .await
        .unwrap();
    let got = resp.bytes().await.unwrap();
    assert_eq!(check_events(0, &got), 768);
    assert!(proxy.shutdown(Duration::from_secs(30)).await);
    let s = read_session(&session).unwrap();
    let ex = &s.exchanges[0];
    assert_eq!(ex.outcome, Outcome::Complete, "{:?}", ex.error);
    assert_eq!(ex.request.body.to_bytes(), body.as_bytes());
    assert_eq!(ex.response_bytes(), got.to_vec());
    assert!(ex.response.as_ref().unwrap().chunks.as_ref().unwrap().len() >= 768);
    // nothing left behind beside the session
    let names: Vec<_> = std::fs::read_dir(session.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_records_the_upstream_host_not_its_internal_hop() {
    let up = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let up_addr = up.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = up.accept().await else {
                continue;
            };
            tokio::spawn(async move {
                while read_request(&mut s).await.is_some() {
                    write_json(&mut s, r#"{"choices":[]}"#).await;
                }
            });
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let opts = toolscope::record::send::SendOptions {
        url: format!("http://{up_addr}/v1/chat/completions?key=S3CRET"),
        api: None,
        session: dir.path().join("s.jsonl"),
        keep_secrets: false,
        headers: Vec::new(),
    };
    let r = toolscope::record::send::send(bytes::Bytes::from_static(b"{}"), &opts, |_| {})
        .await
        .unwrap();
    let ex = r.exchange.unwrap();
    let host = ex
        .request
        .headers
        .iter()
        .find(|(k, _)| k == "host")
        .map(|(_, v)| v.clone());
    assert_eq!(host.as_deref(), Some(up_addr.to_string().as_str()));
    assert_eq!(ex.request.path, "/v1/chat/completions?key=[redacted]");
}
