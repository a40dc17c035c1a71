//! The recording proxy in front of an Ollama upstream fetches each model's `/api/show` once
//! (off the client's path) and annotates every `/api/chat` exchange with it; the Template pane
//! then renders the exchange through that template. The upstream is a loopback stand-in that
//! answers Ollama's engine probe (`GET /api/version`), `/api/show` and `/api/chat`.

use crate::support;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use toolscope::analysis::{Context, Depth, analyse};
use toolscope::record::proxy::{Proxy, ProxyConfig};
use toolscope::session::{Annotation, read_session};

/// One request: (head, body as text) — [`support::read_http_request`].
async fn read_request(s: &mut TcpStream) -> Option<(String, String)> {
    let (head, body) = support::read_http_request(s).await?;
    Some((head, String::from_utf8_lossy(&body).into_owned()))
}

const TEMPLATE: &str = "{{- range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>\n{{ end }}<|im_start|>assistant\n";

async fn fake_ollama(listener: TcpListener, shows: Arc<AtomicUsize>) {
    loop {
        let Ok((mut s, _)) = listener.accept().await else {
            return;
        };
        let shows = shows.clone();
        tokio::spawn(async move {
            while let Some((head, body)) = read_request(&mut s).await {
                let line = head.lines().next().unwrap_or_default().to_owned();
                let (status, ctype, text) = if line.starts_with("GET /api/version") {
                    (
                        "200 OK",
                        "application/json",
                        r#"{"version":"0.12.0"}"#.to_owned(),
                    )
                } else if line.starts_with("POST /api/show") {
                    shows.fetch_add(1, Ordering::SeqCst);
                    let model: serde_json::Value = serde_json::from_str(&body).unwrap();
                    let show = serde_json::json!({"template": TEMPLATE, "license": "L".repeat(5000),
                        "modelfile": "FROM x", "system": format!("You are {}.", model["model"].as_str().unwrap()),
                        "capabilities": ["completion"], "details": {"family": "qwen2"}});
                    ("200 OK", "application/json", show.to_string())
                } else if line.starts_with("POST /api/chat") {
                    let l1 = r#"{"model":"m","created_at":"2025-01-01T00:00:00Z","message":{"role":"assistant","content":"hi"},"done":false}"#;
                    let l2 = r#"{"model":"m","created_at":"2025-01-01T00:00:00Z","message":{"role":"assistant","content":""},"done_reason":"stop","done":true}"#;
                    ("200 OK", "application/x-ndjson", format!("{l1}\n{l2}\n"))
                } else {
                    (
                        "404 Not Found",
                        "text/plain",
                        "404 page not found".to_owned(),
                    )
                };
                let resp = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: {ctype}\r\ncontent-length: {}\r\n\r\n{text}",
                    text.len()
                );
                if s.write_all(resp.as_bytes()).await.is_err() {
                    return;
                }
            }
        });
    }
}

#[tokio::test]
async fn api_show_is_fetched_once_per_model_and_renders_the_template_pane() {
    let up = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = up.local_addr().unwrap();
    let shows = Arc::new(AtomicUsize::new(0));
    tokio::spawn(fake_ollama(up, shows.clone()));
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join("s.jsonl");
    let proxy = Proxy::spawn(
        ProxyConfig::new(&format!("http://{addr}"), session.clone()),
        None,
    )
    .await
    .unwrap();
    let http = reqwest::Client::new();
    for model in ["qwen", "qwen", "llama"] {
        let body =
            serde_json::json!({"model": model, "messages": [{"role": "user", "content": "Hello"}]});
        let r = http
            .post(format!("{}/api/chat", proxy.url()))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        r.bytes().await.unwrap();
    }
    assert!(proxy.shutdown(Duration::from_secs(10)).await);
    assert_eq!(shows.load(Ordering::SeqCst), 2, "one /api/show per model");
    let s = read_session(&session).unwrap();
    assert_eq!(
        s.header.engine.as_ref().map(|e| e.kind.as_str()),
        Some("ollama")
    );
    for (id, model) in [(1, "qwen"), (2, "qwen"), (3, "llama")] {
        let anns = s.annotations.get(&id).map_or(&[][..], Vec::as_slice);
        let (m, show) = Annotation::latest_ollama_show(anns).expect("an /api/show annotation");
        assert_eq!(m, model);
        assert_eq!(show["template"], TEMPLATE);
        assert!(show.get("license").is_none(), "trimmed: {show}");
        // the Template pane: the model's SYSTEM first (ChatHandler), then the conversation
        let a = analyse(
            s.exchange(id).unwrap().clone(),
            Context {
                header: &s.header,
                annotations: anns,
            },
            Depth::Panes,
        );
        assert_eq!(
            a.template.local,
            Some(Ok(format!(
                "<|im_start|>system\nYou are {model}.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n"
            )))
        );
    }
}
