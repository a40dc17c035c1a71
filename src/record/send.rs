//! `toolscope send`: one request sent directly and recorded exactly like proxied traffic.
//!
//! The request goes through an in-process [`crate::record::proxy`] on an ephemeral loopback
//! port, so a sent exchange is recorded by the same code path as a proxied one (same header,
//! engine detection, chunk offsets, llama-server render annotation), with label `send`.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use bytes::Bytes;
use futures::StreamExt;
use tokio::sync::mpsc;

use crate::record::proxy::{Proxy, ProxyConfig};
use crate::record::recorder::RecordEvent;
use crate::session::{Api, Exchange};

/// What to send.
#[derive(Debug, Clone)]
pub struct SendOptions {
    /// Server URL: `http://host:port` (the API's path is appended) or a full endpoint URL
    /// such as `http://host:port/v1/messages` (used as is).
    pub url: String,
    /// Which endpoint to use when `url` has no path: OpenAI → `/v1/chat/completions`,
    /// Anthropic → `/v1/messages`. `None`: guessed from the body (see [`guess_api`]).
    pub api: Option<Api>,
    /// Session file to create or append to.
    pub session: PathBuf,
    /// Store secret headers verbatim.
    pub keep_secrets: bool,
    /// Extra request headers (e.g. `authorization`).
    pub headers: Vec<(String, String)>,
}

/// The recorded exchange of a send.
#[derive(Debug, Clone)]
pub struct SendResult {
    /// The exchange as written to the session (absent only if recording failed).
    pub exchange: Option<Exchange>,
    /// HTTP status the server answered.
    pub status: u16,
}

/// Anthropic when the body has Anthropic-only fields (`system` at top level, `max_tokens`
/// with `stop_sequences`, tools with `input_schema`, an object `tool_choice` with `type`),
/// else OpenAI.
pub fn guess_api(body: &serde_json::Value) -> Api {
    let anth_tools = body
        .get("tools")
        .and_then(|t| t.as_array())
        .is_some_and(|t| t.iter().any(|t| t.get("input_schema").is_some()));
    let anth_choice = body
        .get("tool_choice")
        .and_then(|c| c.get("type"))
        .and_then(|t| t.as_str())
        .is_some_and(|t| matches!(t, "auto" | "any" | "tool" | "none"));
    if body.get("system").is_some()
        || body.get("stop_sequences").is_some()
        || anth_tools
        || anth_choice
    {
        Api::Anthropic
    } else {
        Api::Openai
    }
}

/// Splits `url` into (base, path) following [`SendOptions::url`].
pub fn split_url(url: &str, api: Api) -> anyhow::Result<(String, String)> {
    let uri: hyper::Uri = url
        .parse()
        .with_context(|| format!("--url {url:?} is not a URL"))?;
    let authority = uri
        .authority()
        .with_context(|| format!("--url {url:?} has no host"))?;
    if uri.scheme_str() != Some("http") {
        bail!("--url {url:?}: expected http://HOST:PORT[/PATH]");
    }
    let base = format!("http://{authority}");
    let path = match uri.path_and_query().map(|p| p.as_str()).unwrap_or("/") {
        "" | "/" => match api {
            Api::Anthropic => "/v1/messages".to_owned(),
            _ => "/v1/chat/completions".to_owned(),
        },
        p => p.to_owned(),
    };
    Ok((base, path))
}

/// Sends `body` (JSON bytes), calls `on_chunk` with every response chunk as it arrives, and
/// records the exchange. Waits for the llama-server render annotation before returning.
///
/// Errors: bad URL; the session cannot be opened. An unreachable server is not an error: the
/// exchange is recorded as `upstream_error` and the result has status 502.
pub async fn send(
    body: Bytes,
    opts: &SendOptions,
    mut on_chunk: impl FnMut(&[u8]),
) -> anyhow::Result<SendResult> {
    let api = opts.api.unwrap_or_else(|| {
        serde_json::from_slice(&body)
            .map(|v| guess_api(&v))
            .unwrap_or(Api::Openai)
    });
    let (base, path) = split_url(&opts.url, api)?;
    let mut cfg = ProxyConfig::new(&base, opts.session.clone());
    cfg.keep_secrets = opts.keep_secrets;
    cfg.label = Some("send".into());
    cfg.direct = true; // record the upstream's host, not the internal hop's
    let (tx, mut rx) = mpsc::channel(4096);
    let proxy = Proxy::spawn(cfg, Some(tx)).await?;
    let http = reqwest::Client::builder()
        .build()
        .context("building the HTTP client")?;
    let mut req = http
        .post(format!("{}{}", proxy.url(), path))
        .header("content-type", "application/json");
    for (k, v) in &opts.headers {
        req = req.header(k, v);
    }
    let mut status = 0;
    match req.body(body).send().await {
        Ok(resp) => {
            status = resp.status().as_u16();
            let mut stream = resp.bytes_stream();
            while let Some(chunk) = stream.next().await {
                match chunk {
                    Ok(b) => on_chunk(&b),
                    Err(_) => break, // the server cut the body; the exchange records why
                }
            }
        }
        // without its URL: the query may hold a key (the recorded path is redacted)
        Err(e) => crate::errln!("toolscope send: {}", e.without_url()),
    }
    proxy.shutdown(Duration::from_secs(60)).await;
    let mut exchange = None;
    while let Ok(ev) = rx.try_recv() {
        if let RecordEvent::Ended(ex) = ev {
            exchange = Some(*ex);
        }
    }
    Ok(SendResult { exchange, status })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn url_and_api() {
        assert_eq!(
            split_url("http://127.0.0.1:8080", Api::Openai).unwrap(),
            (
                "http://127.0.0.1:8080".into(),
                "/v1/chat/completions".into()
            )
        );
        assert_eq!(
            split_url("http://127.0.0.1:8080/", Api::Anthropic)
                .unwrap()
                .1,
            "/v1/messages"
        );
        assert_eq!(
            split_url("http://h:1/completion?x=1", Api::Openai).unwrap(),
            ("http://h:1".into(), "/completion?x=1".into())
        );
        assert!(split_url("https://h:1", Api::Openai).is_err());
        assert_eq!(
            guess_api(&json!({"system": "s", "messages": []})),
            Api::Anthropic
        );
        assert_eq!(
            guess_api(&json!({"tools": [{"name": "f", "input_schema": {}}]})),
            Api::Anthropic
        );
        assert_eq!(
            guess_api(
                &json!({"messages": [], "tools": [{"type": "function"}], "tool_choice": "auto"})
            ),
            Api::Openai
        );
    }
}
