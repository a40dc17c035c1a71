//! Proxy overhead benchmark (plain `main`, prints figures): a local fast upstream streams
//! 20,000 SSE events; the same request is read directly and through the recording proxy, in
//! alternation in the same run. Prints wall times (median and best of N) and the ratio
//! proxy/direct (goal ≤ 1.10), checks every proxied body is byte-identical to the direct one,
//! and that every proxied exchange is in the session with exactly those bytes.
//!
//! Run: `cargo bench --bench proxy` (release). `TOOLSCOPE_BENCH_RUNS` sets N (default 9),
//! `TOOLSCOPE_BENCH_EVENTS` the event count (default 20000).

use std::convert::Infallible;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use toolscope::record::proxy::{Proxy, ProxyConfig};
use toolscope::session::{Outcome, read_session};

fn event(i: usize) -> Bytes {
    Bytes::from(format!(
        "data: {{\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1764441138,\"model\":\"bench\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"tok{i} \"}},\"finish_reason\":null}}]}}\n\n"
    ))
}

async fn upstream(listener: tokio::net::TcpListener, events: usize) {
    let frames: std::sync::Arc<Vec<Bytes>> = std::sync::Arc::new(
        (0..events)
            .map(event)
            .chain([Bytes::from_static(b"data: [DONE]\n\n")])
            .collect(),
    );
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let frames = frames.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |_req| {
                let frames = frames.clone();
                async move {
                    let body = StreamBody::new(futures::stream::iter(
                        (0..frames.len())
                            .map(move |i| Ok::<_, Infallible>(Frame::data(frames[i].clone()))),
                    ));
                    Ok::<_, Infallible>(
                        hyper::Response::builder()
                            .header("content-type", "text/event-stream")
                            .header("cache-control", "no-cache")
                            .body(body)
                            .unwrap(),
                    )
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

async fn fetch(
    client: &Client<HttpConnector, Full<Bytes>>,
    url: &str,
) -> (Duration, Vec<u8>, usize) {
    let body = Bytes::from_static(
        br#"{"model":"bench","stream":true,"messages":[{"role":"user","content":"go"}]}"#,
    );
    let req = hyper::Request::post(url)
        .header("content-type", "application/json")
        .body(Full::new(body))
        .unwrap();
    let t = Instant::now();
    let resp = client.request(req).await.expect("request");
    assert_eq!(resp.status(), 200);
    let mut body = resp.into_body().into_data_stream();
    let mut out = Vec::with_capacity(4 << 20);
    let mut reads = 0;
    while let Some(c) = body.next().await {
        out.extend_from_slice(&c.expect("chunk"));
        reads += 1;
    }
    (t.elapsed(), out, reads)
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let runs: usize = std::env::var("TOOLSCOPE_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(9);
    let events: usize = std::env::var("TOOLSCOPE_BENCH_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let up = l.local_addr().unwrap();
        tokio::spawn(upstream(l, events));
        let dir = tempfile::tempdir().unwrap();
        let session = dir.path().join("bench.jsonl");
        let mut cfg = ProxyConfig::new(&format!("http://{up}"), session.clone());
        cfg.detect_engine = false;
        let proxy = Proxy::spawn(cfg, None).await.unwrap();
        let mut conn = HttpConnector::new();
        conn.set_nodelay(true);
        let client: Client<HttpConnector, Full<Bytes>> = Client::builder(TokioExecutor::new()).build(conn);
        let direct_url = format!("http://{up}/v1/chat/completions");
        let proxy_url = format!("{}/v1/chat/completions", proxy.url());

        // Warm-up (connections, allocator) — not counted.
        let (_, reference, _) = fetch(&client, &direct_url).await;
        let (_, warm, _) = fetch(&client, &proxy_url).await;
        assert_eq!(warm, reference, "proxied body differs from direct body");
        let mut direct = Vec::new();
        let mut proxied = Vec::new();
        let mut reads = (0, 0);
        for _ in 0..runs {
            let (t, b, r) = fetch(&client, &direct_url).await;
            assert_eq!(b, reference);
            direct.push(t);
            reads.0 = r;
            let (t, b, r) = fetch(&client, &proxy_url).await;
            assert_eq!(b, reference, "proxied body differs from direct body");
            proxied.push(t);
            reads.1 = r;
        }
        assert!(proxy.shutdown(Duration::from_secs(60)).await);
        let s = read_session(&session).unwrap();
        assert_eq!(s.exchanges.len(), runs + 1, "every proxied exchange recorded");
        let mut chunks = 0;
        for ex in &s.exchanges {
            assert_eq!(ex.outcome, Outcome::Complete);
            assert_eq!(ex.response_bytes(), reference, "recorded bytes == client bytes");
            chunks = ex.response.as_ref().unwrap().chunks.as_ref().unwrap().len();
        }
        let file_len = std::fs::metadata(&session).unwrap().len();
        let best_d = *direct.iter().min().unwrap();
        let best_p = *proxied.iter().min().unwrap();
        let md = median(&mut direct);
        let mp = median(&mut proxied);
        println!("proxy bench: {events} SSE events, {} bytes per response, {runs} runs each (alternating), cores: {}", reference.len(), std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0));
        println!("  direct : median {:>9.3} ms   best {:>9.3} ms   ({} client reads)", md.as_secs_f64() * 1e3, best_d.as_secs_f64() * 1e3, reads.0);
        println!("  proxied: median {:>9.3} ms   best {:>9.3} ms   ({} client reads, {} recorded chunks)", mp.as_secs_f64() * 1e3, best_p.as_secs_f64() * 1e3, reads.1, chunks);
        println!("  ratio proxied/direct: median {:.3}x   best {:.3}x   (goal <= 1.10x)", mp.as_secs_f64() / md.as_secs_f64(), best_p.as_secs_f64() / best_d.as_secs_f64());
        println!("  bytes identical: yes ({} runs); exchanges recorded: {} of {}; session file {} bytes", runs + 1, s.exchanges.len(), runs + 1, file_len);
    });
}
