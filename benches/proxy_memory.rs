//! The recording proxy's peak memory on huge bodies (plain `main`, prints figures; issue #16
//! item 5). A local upstream streams a 200 MB SSE response (1 KiB events); a client reads it
//! through `toolscope proxy` running as its own process, then sends a 200 MB request body
//! through a second one. Printed per case: the proxy process's peak resident memory
//! (`VmHWM` from `/proc/PID/status`, Linux), its resident memory after the exchange, and the
//! size of the session line written. Goal: peak ≤ 64 MB (before the bounded recorder: 833 MB
//! for the response, 724 MB for the request body).
//!
//! Run: `cargo bench --bench proxy_memory` (release). `TOOLSCOPE_BENCH_MB` sets the body size
//! in MB (default 200); `TOOLSCOPE_BENCH_BIN` measures another toolscope binary instead.

use std::convert::Infallible;
use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper_util::rt::TokioIo;

const EVENT: usize = 1024;

fn event(i: usize) -> Bytes {
    let head = format!("data: {{\"i\":{i},\"pad\":\"");
    let tail = "\"}\n\n";
    let pad = EVENT - head.len() - tail.len();
    Bytes::from(format!("{head}{}{tail}", "x".repeat(pad)))
}

/// `POST /v1/chat/completions` with `x-size: N`: N bytes of SSE. `POST /upload`: reads the
/// body, answers its length. Anything else (engine detection): 404.
async fn upstream(listener: tokio::net::TcpListener) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(
                |req: hyper::Request<hyper::body::Incoming>| async move {
                    let size: usize = req
                        .headers()
                        .get("x-size")
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(0);
                    let path = req.uri().path().to_owned();
                    let resp = match path.as_str() {
                        "/v1/chat/completions" => {
                            let n = size / EVENT;
                            let body = BodyExt::boxed(StreamBody::new(futures::stream::iter(
                                (0..n).map(|i| Ok::<_, Infallible>(Frame::data(event(i)))),
                            )));
                            hyper::Response::builder()
                                .header("content-type", "text/event-stream")
                                .body(body)
                                .unwrap()
                        }
                        "/upload" => {
                            let mut body = req.into_body();
                            let mut n = 0usize;
                            while let Some(Ok(f)) = body.frame().await {
                                n += f.data_ref().map_or(0, |d| d.len());
                            }
                            hyper::Response::builder()
                                .header("content-type", "application/json")
                                .body(BodyExt::boxed(
                                    Full::new(Bytes::from(format!("{{\"received\":{n}}}")))
                                        .map_err(|e| match e {}),
                                ))
                                .unwrap()
                        }
                        _ => hyper::Response::builder()
                            .status(404)
                            .body(BodyExt::boxed(
                                Full::new(Bytes::new()).map_err(|e| match e {}),
                            ))
                            .unwrap(),
                    };
                    Ok::<_, Infallible>(resp)
                },
            );
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

/// `VmHWM` and `VmRSS` of `pid`, in MB (10⁶ bytes).
fn memory_mb(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map_or(f64::NAN, |kb| kb * 1024.0 / 1e6)
    };
    (field("VmHWM:"), field("VmRSS:"))
}

struct Proxy {
    child: std::process::Child,
    url: String,
}

async fn start_proxy(upstream: &str, session: &Path) -> Proxy {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // TOOLSCOPE_BENCH_BIN: another toolscope binary to measure (e.g. main's, for a before/after)
    let bin = std::env::var_os("TOOLSCOPE_BENCH_BIN")
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_toolscope").into());
    let child = std::process::Command::new(bin)
        .args(["proxy", "--headless", "--upstream", upstream, "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--session")
        .arg(session)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("toolscope binary");
    for _ in 0..3000 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Proxy {
        child,
        url: format!("http://127.0.0.1:{port}"),
    }
}

/// Waits until the session has `lines` lines (the exchange was written), returns its size.
async fn written(session: &Path, lines: usize) -> u64 {
    for _ in 0..60_000 {
        if let Ok(b) = std::fs::read(session)
            && b.iter().filter(|&&c| c == b'\n').count() >= lines
        {
            return b.len() as u64;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the session line was not written");
}

fn stop(mut p: Proxy) {
    let _ = std::process::Command::new("kill")
        .arg("-TERM")
        .arg(p.child.id().to_string())
        .status();
    let _ = p.child.wait();
}

fn main() {
    let mb: usize = std::env::var("TOOLSCOPE_BENCH_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let size = mb * 1_000_000;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let up = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(upstream(listener));
        let dir = tempfile::tempdir().unwrap();
        let client = reqwest::Client::new();

        // 1. a streamed response of `size` bytes
        let session = dir.path().join("response.jsonl");
        let p = start_proxy(&up, &session).await;
        let (idle, _) = memory_mb(p.child.id());
        let t = Instant::now();
        let resp = client
            .post(format!("{}/v1/chat/completions", p.url))
            .header("x-size", size.to_string())
            .body("{\"model\":\"bench\",\"stream\":true,\"messages\":[]}")
            .send()
            .await
            .unwrap();
        let mut got = 0usize;
        let mut s = resp.bytes_stream();
        while let Some(Ok(b)) = s.next().await {
            got += b.len();
        }
        let secs = t.elapsed().as_secs_f64();
        let file = written(&session, 2).await;
        let (peak, rss) = memory_mb(p.child.id());
        println!(
            "proxy memory, {mb} MB streamed response ({got} bytes to the client in {secs:.1} s, session {:.0} MB): peak RSS {peak:.1} MB (idle {idle:.1} MB), RSS after {rss:.1} MB; goal peak ≤ 64 MB",
            file as f64 / 1e6
        );
        stop(p);

        // 2. a request body of `size` bytes
        let session = dir.path().join("request.jsonl");
        let p = start_proxy(&up, &session).await;
        let chunk = Bytes::from(vec![b'a'; 64 << 10]);
        let n = size / chunk.len();
        let body = reqwest::Body::wrap_stream(futures::stream::iter(
            (0..n).map(move |_| Ok::<_, Infallible>(chunk.clone())),
        ));
        let t = Instant::now();
        let resp = client
            .post(format!("{}/upload", p.url))
            .body(body)
            .send()
            .await
            .unwrap();
        let answer = resp.text().await.unwrap();
        let secs = t.elapsed().as_secs_f64();
        let file = written(&session, 2).await;
        let (peak, rss) = memory_mb(p.child.id());
        println!(
            "proxy memory, {mb} MB request body (upstream said {answer} in {secs:.1} s, session {:.0} MB): peak RSS {peak:.1} MB, RSS after {rss:.1} MB; goal peak ≤ 64 MB",
            file as f64 / 1e6
        );
        stop(p);
    });
}
