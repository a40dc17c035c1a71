//! `toolscope resend`: send recorded requests to another server (another engine, build, model
//! or template) and record the answers, each exchange labelled `resend:<id>` with the id of
//! the exchange it re-sends.
//!
//! Each request goes out as recorded — method, path (appended to the target base URL), body
//! bytes, headers except hop-by-hop ones, `host`, `content-length` and redacted secrets — through
//! an in-process [`crate::record::proxy`] on an ephemeral loopback port, so the answers are
//! recorded exactly as proxied traffic is (engine detection, chunk offsets, llama-server render
//! annotations). Requests are sent one after the other, in id order. A Responses exchange
//! recorded over a WebSocket is re-sent as the equivalent streamed `POST`
//! ([`websocket_as_post`]).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use futures::StreamExt;
use tokio::sync::mpsc;

use crate::record::proxy::{Proxy, ProxyConfig};
use crate::record::recorder::RecordEvent;
use crate::session::redact::REDACTED;
use crate::session::replay::servable;
use crate::session::{Api, Exchange};

/// What to re-send and where.
#[derive(Debug, Clone)]
pub struct ResendOptions {
    /// Target base URL, `http://host:port` (a path prefix is kept).
    pub url: String,
    /// Exchange ids to re-send; empty: every chat or completion exchange (OpenAI, Anthropic,
    /// Ollama, `/completion`) that is the client's own traffic.
    pub exchanges: Vec<u64>,
    /// Session file to write (created, or appended to).
    pub session: PathBuf,
    /// Extra headers (e.g. `authorization` for a server that needs one), replacing recorded
    /// ones of the same name.
    pub headers: Vec<(String, String)>,
}

/// One re-sent exchange.
#[derive(Debug, Clone)]
pub struct Resent {
    /// Id of the exchange re-sent.
    pub original: u64,
    /// The new exchange as recorded (`label` `resend:<original>`); `None` if recording failed.
    pub exchange: Option<Exchange>,
}

/// Headers never copied onto a re-sent request.
fn dropped(name: &str, value: &str) -> bool {
    crate::record::proxy::is_hop(name)
        || matches!(name, "host" | "content-length" | "accept-encoding")
        || value.contains(REDACTED)
}

/// The exchanges `resend` picks from `exchanges` for `ids` (all LLM exchanges when empty), in
/// id order. Errors: an id that is not in the session.
pub fn select<'a>(exchanges: &'a [Exchange], ids: &[u64]) -> anyhow::Result<Vec<&'a Exchange>> {
    let mut out: Vec<&Exchange> = if ids.is_empty() {
        exchanges
            .iter()
            .filter(|e| servable(e) && e.api() != Api::Other)
            .collect()
    } else {
        ids.iter()
            .map(|id| {
                exchanges.iter().find(|e| e.id == *id).with_context(|| {
                    format!("--exchange {id}: no exchange with that id in the session")
                })
            })
            .collect::<anyhow::Result<_>>()?
    };
    out.sort_by_key(|e| e.id);
    out.dedup_by_key(|e| e.id);
    Ok(out)
}

/// The URL a recorded request target is sent to: `base` (scheme, host, port) with the
/// recorded target as its path and query — only ever a path. A target that does not start
/// with `/` gets one (`@127.0.0.1:9/v1/x` → `/@127.0.0.1:9/v1/x`, a path on `base`'s host,
/// not an authority); a fragment is dropped (never sent on the wire).
///
/// Errors: `base` is not an absolute URL.
pub fn target_url(base: &str, recorded: &str) -> anyhow::Result<reqwest::Url> {
    let mut url = reqwest::Url::parse(base).with_context(|| format!("bad base URL {base:?}"))?;
    let target = recorded.split('#').next().unwrap_or("");
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (target, None),
    };
    let prefix = url.path().trim_end_matches('/').to_owned();
    let sep = if path.starts_with('/') { "" } else { "/" };
    url.set_path(&format!("{prefix}{sep}{path}"));
    url.set_query(query);
    Ok(url)
}

/// Re-sends `chosen` to `opts.url`, recording each answer. `on_done` is called after each.
///
/// Errors: a bad URL, or a session that cannot be opened. An unreachable server is not an error
/// (the exchange is recorded as `upstream_error`).
pub async fn resend(
    chosen: &[&Exchange],
    opts: &ResendOptions,
    mut on_done: impl FnMut(&Resent),
) -> anyhow::Result<Vec<Resent>> {
    let http = reqwest::Client::builder()
        .build()
        .context("building the HTTP client")?;
    let mut out = Vec::new();
    for ex in chosen {
        let mut cfg = ProxyConfig::new(&opts.url, opts.session.clone());
        cfg.label = Some(format!("resend:{}", ex.id));
        let (tx, mut rx) = mpsc::channel(4096);
        let proxy = Proxy::spawn(cfg, Some(tx)).await?;
        let (method, body) = match websocket_as_post(ex) {
            Some(b) => (reqwest::Method::POST, b),
            None => (
                reqwest::Method::from_bytes(ex.request.method.as_bytes()).with_context(|| {
                    format!("exchange {}: bad method {:?}", ex.id, ex.request.method)
                })?,
                ex.request.body.to_bytes(),
            ),
        };
        let ws = ex.websocket.is_some();
        let mut req = http.request(method, target_url(&proxy.url(), &ex.request.path)?);
        for (k, v) in &ex.request.headers {
            let websocket_only = ws && k.starts_with("sec-websocket-");
            let replaced = opts.headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(k));
            if !(dropped(k, v) || websocket_only || replaced) {
                req = req.header(k, v);
            }
        }
        if ws {
            req = req.header("content-type", "application/json");
        }
        for (k, v) in &opts.headers {
            req = req.header(k, v);
        }
        match req.body(body).send().await {
            Ok(resp) => {
                let mut body = resp.bytes_stream();
                while let Some(chunk) = body.next().await {
                    if chunk.is_err() {
                        break; // recorded by the proxy as upstream_error
                    }
                }
            }
            Err(e) => crate::errln!("toolscope resend: exchange {}: {e}", ex.id),
        }
        proxy.shutdown(Duration::from_secs(60)).await;
        let mut exchange = None;
        while let Ok(ev) = rx.try_recv() {
            if let RecordEvent::Ended(e) = ev {
                exchange = Some(*e);
            }
        }
        let r = Resent {
            original: ex.id,
            exchange,
        };
        on_done(&r);
        out.push(r);
    }
    Ok(out)
}

/// A Responses exchange recorded over a WebSocket, as the equivalent streamed HTTP request:
/// its `response.create` message without `type`, with `"stream": true` (the WebSocket mode's
/// implicit streaming; OpenAI API reference, "WebSocket events"). `None` for other exchanges
/// or a message that is not a JSON object.
pub fn websocket_as_post(ex: &Exchange) -> Option<Vec<u8>> {
    ex.websocket.as_ref()?;
    let mut v: serde_json::Value = ex.request.body.json().ok()?;
    let o = v.as_object_mut()?;
    o.shift_remove("type");
    o.insert("stream".into(), serde_json::Value::Bool(true));
    serde_json::to_vec(&v).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue #27 item 5: a recorded path is a path on the target, never an authority.
    #[test]
    fn a_recorded_path_never_names_another_host() {
        let base = "http://127.0.0.1:4000";
        for (path, want) in [
            (
                "/v1/chat/completions",
                "http://127.0.0.1:4000/v1/chat/completions",
            ),
            (
                "@127.0.0.1:9/v1/chat/completions",
                "http://127.0.0.1:4000/@127.0.0.1:9/v1/chat/completions",
            ),
            (
                "//evil.example/v1/x",
                "http://127.0.0.1:4000//evil.example/v1/x",
            ),
            (
                "http://evil.example/v1/x",
                "http://127.0.0.1:4000/http://evil.example/v1/x",
            ),
            (":9/x?key=1#frag", "http://127.0.0.1:4000/:9/x?key=1"),
            ("/a?b=c", "http://127.0.0.1:4000/a?b=c"),
        ] {
            let u = target_url(base, path).unwrap();
            assert_eq!(u.as_str(), want, "{path}");
            assert_eq!(
                (u.host_str(), u.port(), u.username(), u.password()),
                (Some("127.0.0.1"), Some(4000), "", None),
                "{path}"
            );
        }
        let u = target_url("http://h:1/prefix/", "/v1/x").unwrap();
        assert_eq!(u.as_str(), "http://h:1/prefix/v1/x");
    }

    #[test]
    fn secrets_and_hop_headers_are_not_resent() {
        assert!(dropped("authorization", "Bearer [redacted]"));
        assert!(dropped("content-length", "12"));
        assert!(!dropped("content-type", "application/json"));
        assert!(!dropped("x-stainless-lang", "python"));
    }
}
