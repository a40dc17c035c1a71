//! The network part of `toolscope probe`: sends each control of
//! [`crate::diagnose::probe`] to a server, records every exchange in a session (label
//! `probe:<control>`), and judges the replies.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::Value;

use crate::analysis::facts::exchange_context;
use crate::diagnose::probe::{Control, ProbeResult, Verdict, judge, request};
use crate::session::write::new_header;
use crate::session::{
    Api, Body, Exchange, Line, Outcome, Request, Response, Server, ServerKind, SessionWriter,
    Timings,
};

/// What to probe.
#[derive(Debug, Clone)]
pub struct ProbeOptions {
    /// Server base URL (scheme, host, port), e.g. `http://127.0.0.1:8080`.
    pub base_url: String,
    /// APIs to probe, in order.
    pub apis: Vec<Api>,
    /// `model` to put in the requests.
    pub model: Option<String>,
    /// Session file to record into (created, or appended to).
    pub session: PathBuf,
    /// Per-request timeout.
    pub timeout: Duration,
}

/// The result of a probe run.
#[derive(Debug, Clone)]
pub struct ProbeRun {
    pub results: Vec<ProbeResult>,
    /// Where the exchanges were recorded.
    pub session: PathBuf,
    /// llama-server `/props` `build_info`, when the server answered it.
    pub build_info: Option<String>,
}

fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// Runs every control against every API in `opts.apis`, recording as it goes (each exchange is
/// appended and flushed before the next request, so an interrupted probe keeps what it did).
///
/// Errors: the session file cannot be written. Network failures are recorded as exchanges with
/// outcome `upstream_error` and judged INCONCLUSIVE.
pub async fn run_probe(opts: &ProbeOptions) -> anyhow::Result<ProbeRun> {
    let base = opts.base_url.trim_end_matches('/').to_owned();
    let http = reqwest::Client::builder()
        .timeout(opts.timeout)
        .build()
        .context("building the HTTP client")?;
    let client = super::client::ServerClient::new(&base);
    // llama-server's /props (other servers answer 404, or something else that is not it).
    let props = client
        .props()
        .await
        .ok()
        .filter(|p| p.get("chat_template").is_some() || p.get("build_info").is_some());
    let build_info = props
        .as_ref()
        .and_then(|p| p.get("build_info"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let mut header = new_header(now_rfc3339());
    header.upstream = Some(crate::session::redact::redact_url(&base).into_owned());
    if let Some(p) = &props {
        header.engine = Some(Server {
            kind: ServerKind::LlamaServer,
            version: build_info.clone(),
            model: p
                .get("model_path")
                .and_then(Value::as_str)
                .map(str::to_owned),
        });
        header.props = Some(p.clone());
    }
    header.source = Some("probe".into());
    let mut writer = SessionWriter::open(&opts.session, &header)
        .with_context(|| format!("{}: cannot open the session", opts.session.display()))?;

    let mut results = Vec::new();
    for &api in &opts.apis {
        let path = if api == Api::Anthropic {
            "/v1/messages"
        } else {
            "/v1/chat/completions"
        };
        let mut baseline_called = None;
        for control in Control::ALL {
            let body = request(control, api, opts.model.as_deref());
            let id = writer.next_id();
            let exchange = send(&http, &base, path, id, control, &body).await;
            writer
                .append(&Line::Exchange(Box::new(exchange.clone())))
                .with_context(|| format!("{}: cannot append", opts.session.display()))?;
            // As the recorder does for llama-server: the server's own render and its pieces,
            // fetched after the exchange, so the session shows what the model was fed.
            // ... and the model's raw text from the slot that served it (GET /slots, with
            // LLAMA_SERVER_SLOTS_DEBUG=1), or why not.
            if let Some(p) = &props {
                let bos = p.get("bos_token").and_then(Value::as_str);
                let (anns, _) = super::annotate::exchange_annotations(
                    &client,
                    bos,
                    id,
                    api,
                    Some(body.clone()),
                )
                .await;
                for ann in anns {
                    writer
                        .append(&Line::Annotation(ann))
                        .with_context(|| format!("{}: cannot append", opts.session.display()))?;
                }
            }
            let cx = exchange_context(&exchange);
            let (mut verdict, mut evidence) = judge(control, &cx, baseline_called);
            if let Some(err) = &exchange.error {
                verdict = Verdict::Inconclusive;
                evidence = format!("request failed: {err}");
            }
            if control == Control::Baseline {
                baseline_called = Some(
                    cx.message
                        .as_ref()
                        .is_some_and(|m| !m.tool_calls.is_empty()),
                );
            }
            results.push(ProbeResult {
                control,
                api: api.as_str().into(),
                verdict,
                evidence,
                exchange: Some(id),
            });
        }
    }
    Ok(ProbeRun {
        results,
        session: opts.session.clone(),
        build_info,
    })
}

async fn send(
    http: &reqwest::Client,
    base: &str,
    path: &str,
    id: u64,
    control: Control,
    body: &Value,
) -> Exchange {
    let started = now_rfc3339();
    let t0 = Instant::now();
    let text = body.to_string();
    let mut ex = Exchange {
        id,
        started,
        label: Some(format!("probe:{}", control.name())),
        request: Request {
            method: "POST".into(),
            path: path.into(),
            headers: vec![("content-type".into(), "application/json".into())],
            body: Body::Text { text: text.clone() },
        },
        ..Default::default()
    };
    let url = format!("{base}{path}");
    match http
        .post(&url)
        .header("content-type", "application/json")
        .body(text)
        .send()
        .await
    {
        Err(e) => {
            ex.outcome = Outcome::UpstreamError;
            ex.error = Some(format!("POST {url}: {e}"));
        }
        Ok(resp) => {
            let ttfb = t0.elapsed().as_micros() as u64;
            let status = resp.status().as_u16();
            let headers = super::regenerate::recorded_headers(resp.headers());
            match resp.bytes().await {
                Ok(bytes) => {
                    ex.response = Some(Response {
                        status,
                        headers,
                        body: Some(Body::from_bytes(&bytes)),
                        chunks: None,
                    });
                }
                Err(e) => {
                    ex.response = Some(Response {
                        status,
                        headers,
                        body: None,
                        chunks: None,
                    });
                    ex.outcome = Outcome::UpstreamError;
                    ex.error = Some(format!("POST {url}: reading body: {e}"));
                }
            }
            ex.timings = Timings {
                ttfb_us: Some(ttfb),
                total_us: Some(t0.elapsed().as_micros() as u64),
            };
        }
    }
    ex
}
