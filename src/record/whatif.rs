//! What-if runs against a live engine (`toolscope try`, the inspector's fix key): one run of
//! one variant of a recorded exchange — the original request, or a fix applied — recorded into
//! a what-if session with label `try:<id>:<variant>`.
//!
//! * A re-sent variant ([`Plan::Resend`]) goes out through an in-process recording proxy
//!   ([`crate::record::proxy`], as `resend` does), so the run is recorded as proxied traffic is:
//!   chunks with offsets, engine detection, and llama-server's render (`/apply-template`,
//!   `/tokenize`) and slot text annotations.
//! * A template variant ([`Plan::Regenerate`]) goes through the `regenerate` path
//!   ([`crate::record::regenerate::regenerate_with`]): the prompt rendered locally, generated
//!   through the engine's raw completion endpoint with the recorded sampling settings; the text
//!   is parsed under the template's call format.
//! * A parser variant ([`Plan::Reparse`]) sends nothing: the calls were read from the recorded
//!   raw text ([`crate::analysis::whatif::reparse_calls`]).
//!
//! The pure half (requests, outcomes, tallies) is [`crate::analysis::whatif`].

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use futures::StreamExt;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::analysis::whatif::{self, RunOutcome, VariantRequest};
use crate::finding::Fix;
use crate::record::proxy::{Proxy, ProxyConfig};
use crate::record::recorder::RecordEvent;
use crate::record::regenerate::{Prompt, RegenOptions, regenerate_with};
use crate::session::redact::REDACTED;
use crate::session::{Annotation, Exchange, Header, SessionWriter};

/// How a variant's runs are made.
#[derive(Debug, Clone)]
pub enum Plan {
    /// Send this request (the original's, or a fix's [`whatif::fixed_request`]).
    Resend(VariantRequest),
    /// Generate from this locally rendered prompt through the raw completion endpoint; parse
    /// the text under `template`'s call format.
    Regenerate { prompt: Prompt, template: String },
    /// The calls another parser reads from the recorded raw text (no request).
    Reparse { calls: Vec<(String, String)> },
}

/// One variant of an exchange.
#[derive(Debug, Clone)]
pub struct Variant {
    /// `original`, or the fix id.
    pub name: String,
    /// The fix applied (`None` for the original).
    pub fix: Option<Fix>,
    pub plan: Plan,
}

/// Where and how runs go.
#[derive(Debug, Clone)]
pub struct TryOptions {
    /// The engine's base URL (`http://host:port`).
    pub url: String,
    /// The what-if session file (created, or appended to).
    pub session: PathBuf,
    /// Engine kind (`llama-server`, `vllm`, `sglang`, `ollama`; `unknown`): picks the raw
    /// completion endpoint and whether runs get seeds.
    pub engine: String,
    /// Run `i` (0-based) gets sampling seed `seed + i` when the engine takes seeds; `None`
    /// keeps the request's own.
    pub seed: Option<u64>,
    /// Extra request headers (`authorization` for a server that needs one).
    pub headers: Vec<(String, String)>,
}

/// One finished run.
#[derive(Debug, Clone)]
pub struct Run {
    /// The variant's name.
    pub variant: String,
    /// 0-based run number within the variant.
    pub index: usize,
    /// The recorded exchange (`None` for a parser variant, or when the run failed).
    pub exchange: Option<Exchange>,
    /// The annotations recorded for it (server render, slot text).
    pub annotations: Vec<Annotation>,
    /// The session header the proxy wrote (engine, `/props`), for the run's analysis.
    pub header: Option<Header>,
    /// Calls read from the raw text (template and parser variants).
    pub calls: Option<Vec<(String, String)>>,
    /// Why the run failed before anything was recorded.
    pub error: Option<String>,
}

/// Headers never copied onto a what-if request.
fn dropped(name: &str, value: &str) -> bool {
    crate::record::proxy::is_hop(name)
        || matches!(name, "host" | "content-length" | "accept-encoding")
        || value.contains(REDACTED)
}

/// Makes run `index` of `variant` of exchange `original` (its session header `header`).
/// Never fails: a run that could not be made says why in [`Run::error`].
pub async fn run_once(
    original: &Exchange,
    header: &Header,
    variant: &Variant,
    index: usize,
    opts: &TryOptions,
) -> Run {
    let mut run = Run {
        variant: variant.name.clone(),
        index,
        exchange: None,
        annotations: Vec::new(),
        header: None,
        calls: None,
        error: None,
    };
    let label = whatif::label(original.id, &variant.name);
    let seeded = |body: &Value| match opts.seed {
        Some(s) => whatif::with_seed(
            original.api(),
            body,
            s.wrapping_add(index as u64),
            whatif::engine_takes_seed(&opts.engine),
        ),
        None => body.clone(),
    };
    match &variant.plan {
        Plan::Reparse { calls } => run.calls = Some(calls.clone()),
        Plan::Resend(req) => {
            let body = seeded(&req.body);
            match send(original, &req.path, &body, &label, opts).await {
                Ok((ex, anns, h)) => {
                    run.exchange = ex;
                    run.annotations = anns;
                    run.header = Some(h);
                    if run.exchange.is_none() {
                        run.error = Some("the proxy recorded no exchange".into());
                    }
                }
                Err(e) => run.error = Some(format!("{e:#}")),
            }
        }
        Plan::Regenerate { prompt, template } => {
            let mut ex = original.clone();
            if let Some(body) = original.request_json() {
                ex.request.body = crate::session::Body::from_bytes(
                    serde_json::to_vec(&seeded(&body))
                        .unwrap_or_default()
                        .as_slice(),
                );
            }
            let ropts = RegenOptions {
                engine: if opts.engine == "unknown" {
                    String::new()
                } else {
                    opts.engine.clone()
                },
                endpoint: None,
                prompt: Some(prompt.clone()),
                template: Some(template.clone()),
                label: Some(label),
            };
            let result = async {
                let mut writer = SessionWriter::open(&opts.session, header)?;
                regenerate_with(&opts.url, &ex, &mut writer, &ropts).await
            }
            .await;
            match result {
                Ok(r) => {
                    let tools = original
                        .request_json()
                        .and_then(|b| b.get("tools").cloned());
                    let syntax = crate::parser::Syntax::detect_from_template(template)
                        .or_else(|| crate::parser::Syntax::detect_from_text(&r.raw_text));
                    let out = crate::parser::parse(&r.raw_text, syntax, tools.as_ref());
                    run.calls = Some(
                        out.tool_calls
                            .into_iter()
                            .map(|c| (c.name, c.arguments.to_string()))
                            .collect(),
                    );
                    run.exchange = Some(r.exchange);
                    run.header = Some(header.clone());
                }
                Err(e) => run.error = Some(format!("{e:#}")),
            }
        }
    }
    run
}

/// Sends one request through a fresh recording proxy in front of `opts.url` (label `label`)
/// and returns the recorded exchange, its annotations and the header the proxy wrote.
async fn send(
    original: &Exchange,
    path: &str,
    body: &Value,
    label: &str,
    opts: &TryOptions,
) -> anyhow::Result<(Option<Exchange>, Vec<Annotation>, Header)> {
    let http = reqwest::Client::builder()
        .build()
        .context("building the HTTP client")?;
    let mut cfg = ProxyConfig::new(&opts.url, opts.session.clone());
    cfg.label = Some(label.to_owned());
    let (tx, mut rx) = mpsc::channel(4096);
    let proxy = Proxy::spawn(cfg, Some(tx)).await?;
    let header = proxy.header().clone();
    let method = reqwest::Method::from_bytes(original.request.method.as_bytes())
        .with_context(|| format!("bad method {:?}", original.request.method))?;
    let mut req = http.request(method, format!("{}{path}", proxy.url()));
    for (k, v) in &original.request.headers {
        if !dropped(k, v) && !opts.headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(k)) {
            req = req.header(k, v);
        }
    }
    for (k, v) in &opts.headers {
        req = req.header(k, v);
    }
    let sent = req.body(serde_json::to_vec(body)?).send().await;
    if let Ok(resp) = sent {
        let mut stream = resp.bytes_stream();
        while let Some(chunk) = stream.next().await {
            if chunk.is_err() {
                break; // recorded by the proxy as upstream_error
            }
        }
    }
    proxy.shutdown(Duration::from_secs(60)).await;
    let mut exchange = None;
    let mut annotations = Vec::new();
    while let Ok(ev) = rx.try_recv() {
        match ev {
            RecordEvent::Ended(e) => exchange = Some(*e),
            RecordEvent::Annotated(a) => annotations.push(a),
            _ => {}
        }
    }
    if let Some(id) = exchange.as_ref().map(|e| e.id) {
        annotations.retain(|a| a.exchange() == id);
    }
    Ok((exchange, annotations, header))
}

/// The outcome of `run`: its exchange analysed like any other (findings remaining), judged
/// against the tools of `declared` (the original request's). A run that failed counts as an
/// `error` outcome without a call.
pub fn outcome(run: &Run, declared: &Value) -> RunOutcome {
    match (&run.exchange, &run.calls) {
        (Some(ex), calls) => {
            let header = run.header.clone().unwrap_or_default();
            let ctx = crate::analysis::Context {
                header: &header,
                annotations: &run.annotations,
            };
            let a = crate::analysis::analyse(ex.clone(), ctx, crate::analysis::Depth::Findings);
            whatif::outcome(&a, declared, calls.as_deref())
        }
        (None, Some(calls)) => RunOutcome {
            status: None,
            valid_call: whatif::valid_calls(declared, calls),
            calls: calls.iter().map(|(n, a)| format!("{n}({a})")).collect(),
            finish: "parsed".into(),
            rules: Vec::new(),
            content: String::new(),
            reasoning: String::new(),
        },
        (None, None) => RunOutcome {
            status: None,
            valid_call: false,
            calls: Vec::new(),
            finish: "error".into(),
            rules: Vec::new(),
            content: run.error.clone().unwrap_or_default(),
            reasoning: String::new(),
        },
    }
}
