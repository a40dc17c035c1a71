//! `toolscope serve` over real recordings (loopback only, no model): every servable exchange of
//! every shipped session comes back byte for byte — the recorded bytes are the reference — and a
//! request that matches nothing gets the documented 404 and is recorded.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use futures::StreamExt;
use serde_json::Value;
use toolscope::record::serve::{ServeConfig, ServeHandle, Timing};
use toolscope::session::replay::{MatchMode, servable};
use toolscope::session::{Exchange, Outcome, read_session};

fn sessions() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut v: Vec<PathBuf> = std::fs::read_dir(root.join("sessions"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    v.sort();
    v.push(root.join("tests/data/replay/ollama-docs.jsonl"));
    v
}

fn config(unmatched: PathBuf, mode: MatchMode) -> ServeConfig {
    ServeConfig {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        timing: Timing::Fast,
        mode,
        unmatched_session: unmatched,
    }
}

/// Sends `ex`'s request as recorded; returns (status, content-type, body bytes received).
async fn send(http: &reqwest::Client, base: &str, ex: &Exchange) -> (u16, Option<String>, Vec<u8>) {
    let method = reqwest::Method::from_bytes(ex.request.method.as_bytes()).unwrap();
    let resp = http
        .request(method, format!("{base}{}", ex.request.path))
        .header("content-type", "application/json")
        .body(ex.request.body.to_bytes())
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let ct = resp
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned());
    let mut body = Vec::new();
    let mut stream = resp.bytes_stream();
    while let Some(chunk) = stream.next().await {
        match chunk {
            Ok(b) => body.extend_from_slice(&b),
            Err(_) => break,
        }
    }
    (status, ct, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_shipped_session_is_served_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let http = reqwest::Client::new();
    let mut served = 0;
    for path in sessions() {
        let session = read_session(&path).unwrap();
        let unmatched = dir.path().join("u.jsonl");
        let h = ServeHandle::spawn(
            session.clone(),
            config(unmatched.clone(), MatchMode::Sequence),
            None,
        )
        .await
        .unwrap();
        let mut exs: Vec<&Exchange> = session.exchanges.iter().filter(|e| servable(e)).collect();
        exs.sort_by_key(|e| e.id);
        for ex in exs {
            let (status, ct, body) = send(&http, &h.url(), ex).await;
            let r = ex.response.as_ref().unwrap();
            let name = format!("{} #{}", path.display(), ex.id);
            assert_eq!(status, r.status, "{name}");
            assert_eq!(ct.as_deref(), ex.response_header("content-type"), "{name}");
            assert_eq!(body, ex.response_bytes(), "{name}");
            assert_eq!(ex.outcome, Outcome::Complete, "{name}");
            served += 1;
        }
        h.shutdown().await;
        assert!(!unmatched.exists(), "{}: nothing unmatched", path.display());
    }
    // a, b, c, d×2, e, f×2, g (h is probes only), and the five Ollama docs exchanges
    assert_eq!(served, 14);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_diverging_request_gets_the_nearest_recording_and_pointer_and_is_recorded() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let session = read_session(&root.join("sessions/a-two-tools-stream.jsonl")).unwrap();
    let ex = session.exchange(1).unwrap().clone();
    let mut body: Value = ex.request.body.json().unwrap();
    let last = body["messages"].as_array().unwrap().len() - 1;
    let old = body["messages"][last]["content"].clone();
    body["messages"][last]["content"] = Value::from("something else");
    let dir = tempfile::tempdir().unwrap();
    let unmatched = dir.path().join("run.unmatched.jsonl");
    for mode in [MatchMode::Sequence, MatchMode::Request] {
        let h = ServeHandle::spawn(session.clone(), config(unmatched.clone(), mode), None)
            .await
            .unwrap();
        let resp = reqwest::Client::new()
            .post(format!("{}/v1/chat/completions", h.url()))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 404);
        assert_eq!(resp.headers()["x-toolscope-replay"], "mismatch");
        let err: Value = resp.json().await.unwrap();
        assert_eq!(err["type"], "error");
        let e = &err["error"];
        assert_eq!(e["type"], "toolscope_replay_mismatch");
        assert_eq!(e["nearest_exchange"], 1);
        assert_eq!(e["pointer"], format!("/messages/{last}/content"));
        assert_eq!(
            (&e["recorded"], &e["received"]),
            (&old, &Value::from("something else"))
        );
        assert!(
            e["message"]
                .as_str()
                .unwrap()
                .contains(&format!("nearest recorded request: exchange #1 (POST /v1/chat/completions); first difference at /messages/{last}/content")),
            "{e}"
        );
        h.shutdown().await;
    }
    // both mismatches are in the unmatched session, with the request as sent and the answer
    let u = read_session(&unmatched).unwrap();
    assert_eq!(u.exchanges.len(), 2);
    for x in &u.exchanges {
        assert_eq!(x.label.as_deref(), Some("serve:unmatched"));
        assert_eq!(x.request.body.json().unwrap(), body);
        assert_eq!(x.response.as_ref().unwrap().status, 404);
        assert!(x.error.as_deref().unwrap().contains("first difference at"));
    }
}
