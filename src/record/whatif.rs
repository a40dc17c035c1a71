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
    /// The server's kind (llama-server, vLLM, SGLang, Ollama; `unknown`): picks the raw
    /// completion endpoint and whether runs get seeds.
    pub engine: crate::session::ServerKind,
    /// Run `i` (0-based) gets sampling seed `seed + i` when the engine takes seeds; `None`
    /// keeps the request's own.
    pub seed: Option<u64>,
    /// Extra request headers (`authorization` for a server that needs one).
    pub headers: Vec<(String, String)>,
    /// How long one run may take to be answered in full (`try --timeout`, default
    /// [`DEFAULT_TIMEOUT`]); a run past it is cut and counts as a failure.
    pub timeout: Duration,
}

/// A run's time limit when none is given: 600 s (a slow CPU model answering a long prompt
/// takes minutes; an engine that never answers is cut).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

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
    /// The failure was toolscope's own, not the engine's (the in-process proxy did not start,
    /// the what-if session could not be opened, the request could not be built): such a run
    /// is not an engine run and is never tallied ([`run_variants`] stops with it).
    pub local: bool,
    /// The engine gave no complete answer within [`TryOptions::timeout`]: the exchange is
    /// recorded as cut, the run tallied as a failure.
    pub timed_out: bool,
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
        local: false,
        timed_out: false,
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
                Ok(sent) => {
                    run.exchange = sent.exchange;
                    run.annotations = sent.annotations;
                    run.header = Some(sent.header);
                    run.timed_out = sent.timed_out;
                    if sent.timed_out {
                        run.error = Some(format!(
                            "no complete answer within {} s (cut)",
                            opts.timeout.as_secs_f64()
                        ));
                    }
                    if run.exchange.is_none() {
                        run.error = Some("the proxy recorded no exchange".into());
                        run.local = true;
                    }
                }
                Err(e) => {
                    run.error = Some(format!("{e:#}"));
                    run.local = true;
                }
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
                server: opts.engine.is_known().then(|| opts.engine.clone()),
                endpoint: None,
                prompt: Some(prompt.clone()),
                template: Some(template.clone()),
                label: Some(label),
            };
            let mut writer = match SessionWriter::open(&opts.session, header) {
                Ok(w) => w,
                Err(e) => {
                    run.error = Some(format!("{e:#}"));
                    run.local = true;
                    return run;
                }
            };
            let result = tokio::time::timeout(
                opts.timeout,
                regenerate_with(&opts.url, &ex, &mut writer, &ropts),
            )
            .await
            .unwrap_or_else(|_| {
                run.timed_out = true;
                Err(anyhow::anyhow!(
                    "no complete answer within {} s",
                    opts.timeout.as_secs_f64()
                ))
            });
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

/// What [`send`] recorded.
struct Sent {
    exchange: Option<Exchange>,
    annotations: Vec<Annotation>,
    header: Header,
    /// The answer did not end within the timeout (the exchange was cut).
    timed_out: bool,
}

/// Sends one request through a fresh recording proxy in front of `opts.url` (label `label`)
/// and returns the recorded exchange, its annotations and the header the proxy wrote; an
/// answer not complete within `opts.timeout` is cut (recorded as partial). Errors are
/// toolscope's own (the proxy, the method, the body): an unreachable or failing engine is a
/// recorded exchange, not an error.
async fn send(
    original: &Exchange,
    path: &str,
    body: &Value,
    label: &str,
    opts: &TryOptions,
) -> anyhow::Result<Sent> {
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
    let req = req.body(serde_json::to_vec(body)?);
    let answered = tokio::time::timeout(opts.timeout, async {
        if let Ok(resp) = req.send().await {
            let mut stream = resp.bytes_stream();
            while let Some(chunk) = stream.next().await {
                if chunk.is_err() {
                    break; // recorded by the proxy as upstream_error
                }
            }
        }
    })
    .await;
    let timed_out = answered.is_err();
    // after a timeout the exchange still running is cut at once (recorded as partial)
    let grace = if timed_out {
        Duration::ZERO
    } else {
        Duration::from_secs(60)
    };
    proxy.shutdown(grace).await;
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
    Ok(Sent {
        exchange,
        annotations,
        header,
        timed_out,
    })
}

/// The outcome of `run`: its exchange analysed like any other (findings remaining), judged
/// against the tools of `declared` (the original request's). A run that failed counts as an
/// `error` outcome without a call.
pub fn outcome(run: &Run, declared: &Value) -> RunOutcome {
    if run.timed_out {
        let waited = run
            .error
            .clone()
            .unwrap_or_else(|| "no complete answer within the run's time limit".to_owned());
        let mut o = match &run.exchange {
            Some(_) => outcome(
                &Run {
                    timed_out: false,
                    ..run.clone()
                },
                declared,
            ),
            None => outcome_of_error(&waited),
        };
        o.finish = "timeout".into();
        o.valid_call = false;
        o.error = Some(waited);
        // the text a cut stream had got so far differs from run to run; it is not the
        // outcome (the repeatability comparison would call identical timeouts unstable)
        o.content.clear();
        o.reasoning.clear();
        return o;
    }
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
            error: None,
        },
        (None, None) => outcome_of_error(run.error.as_deref().unwrap_or("no exchange")),
    }
}

/// The outcome of a run that recorded nothing: an `error` with no call.
fn outcome_of_error(error: &str) -> RunOutcome {
    RunOutcome {
        status: None,
        valid_call: false,
        calls: Vec::new(),
        finish: "error".into(),
        rules: Vec::new(),
        content: String::new(),
        reasoning: String::new(),
        error: Some(error.to_owned()),
    }
}

/// Runs per variant when none is asked for (`try --runs`, the inspector's `x`).
pub const DEFAULT_RUNS: usize = 5;

/// `DIR/NAME.try.jsonl` for `DIR/NAME.jsonl`: where a what-if session is written by default.
pub fn default_out(session: &std::path::Path) -> PathBuf {
    let stem = session
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "session".into());
    session.with_file_name(format!("{stem}.try.jsonl"))
}

/// One variant's result (`try --format json`'s `variants[]`, the inspector's what-if view).
#[derive(Debug, Clone, serde::Serialize)]
pub struct VariantReport {
    /// `original` or the fix id.
    pub name: String,
    /// The fix applied.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<Fix>,
    /// The runs tallied.
    pub tally: whatif::Tally,
    /// The valid-call rate's 95 % Wilson interval (low, high).
    pub interval: (f64, f64),
    /// True when the outcome changed between runs.
    pub unstable: bool,
    /// Each run's outcome, in order.
    pub runs: Vec<RunOutcome>,
    /// Ids of the run exchanges in the what-if session.
    pub exchanges: Vec<u64>,
}

impl VariantReport {
    /// The report of `v` over the runs that finished.
    pub fn of(v: &Variant, runs: Vec<RunOutcome>, exchanges: Vec<u64>) -> VariantReport {
        let tally = whatif::Tally::of(&runs);
        VariantReport {
            name: v.name.clone(),
            fix: v.fix.clone(),
            interval: tally.interval(),
            unstable: tally.unstable(),
            tally,
            runs,
            exchanges,
        }
    }
}

/// Runs of variant `v` when `k` are asked for: a parser variant's outcome does not change
/// between runs, it runs once.
pub fn runs_of(v: &Variant, k: usize) -> usize {
    match v.plan {
        Plan::Reparse { .. } => 1,
        _ => k,
    }
}

/// One finished run, as [`run_variants`] reports it.
#[derive(Debug)]
pub struct Progress<'a> {
    pub variant: &'a Variant,
    /// 0-based run number within the variant, and the variant's run count.
    pub index: usize,
    pub runs: usize,
    /// Runs finished over all variants, and the total planned.
    pub done: usize,
    pub total: usize,
    pub run: &'a Run,
    pub outcome: &'a RunOutcome,
}

/// What [`run_variants`] runs: `variants` of exchange `original` (its session header
/// `header`), `runs` times each ([`runs_of`]), judged against the tools `request` (the
/// original's) declares.
#[derive(Debug, Clone, Copy)]
pub struct Job<'a> {
    pub original: &'a Exchange,
    pub header: &'a Header,
    pub request: &'a Value,
    pub variants: &'a [Variant],
    pub runs: usize,
    pub opts: &'a TryOptions,
}

/// Runs every variant of `job` against `job.opts.url`, one run after the other, reporting each
/// finished run to `progress`. Stops when `cancel` completes: the runs that finished are kept
/// (the variant in progress reported with them) and `complete` is false. `toolscope try` and
/// the inspector's `x` both run through this.
///
/// Errors: a run that failed on toolscope's side ([`Run::local`]: the in-process proxy did not
/// start, the what-if session could not be opened or is locked): it is not an engine run, so
/// nothing more is run and nothing is tallied for it.
pub async fn run_variants(
    job: Job<'_>,
    cancel: impl std::future::Future<Output = ()>,
    mut progress: impl FnMut(Progress<'_>),
) -> anyhow::Result<(Vec<VariantReport>, bool)> {
    let Job {
        original,
        header,
        request,
        variants,
        runs: k,
        opts,
    } = job;
    tokio::pin!(cancel);
    let total: usize = variants.iter().map(|v| runs_of(v, k)).sum();
    let mut reports = Vec::new();
    let mut done = 0usize;
    for v in variants {
        let mut outcomes = Vec::new();
        let mut ids = Vec::new();
        let runs = runs_of(v, k);
        for index in 0..runs {
            let step = tokio::select! {
                r = run_once(original, header, v, index, opts) => Some(r),
                _ = &mut cancel => None,
            };
            let Some(run) = step else {
                reports.push(VariantReport::of(v, outcomes, ids));
                return Ok((reports, false));
            };
            if run.local {
                let why = run.error.clone().unwrap_or_default();
                return Err(anyhow::anyhow!(
                    "{} run {} of {runs} could not be made here (not an engine run; nothing tallied for it): {why}",
                    v.name,
                    index + 1
                ));
            }
            done += 1;
            let o = outcome(&run, request);
            if let Some(e) = &run.exchange {
                ids.push(e.id);
            }
            progress(Progress {
                variant: v,
                index,
                runs,
                done,
                total,
                run: &run,
                outcome: &o,
            });
            outcomes.push(o);
        }
        reports.push(VariantReport::of(v, outcomes, ids));
    }
    Ok((reports, true))
}

/// The variants to run for exchange `original` (its request `request`, its analysis
/// `analysed` with the findings' fixes, its session header `header`): the original, then each
/// fix of `fixes` (a fix id, or `all`: every fix the findings carry). `template`: the other
/// template for fix `template` (`try --template SRC`, loaded). Returns the variants and notes
/// on fixes `all` brought in that cannot be planned here (skipped).
///
/// Errors: an unknown fix id; a fix named that neither a finding carries nor the request
/// takes; a fix named that cannot be planned (no raw text to reparse, no template).
pub fn plan_variants(
    fixes: &[String],
    template: Option<&crate::template::TemplateSource>,
    header: &Header,
    original: &Exchange,
    request: &Value,
    analysed: &crate::analysis::AnalysedExchange,
) -> anyhow::Result<(Vec<Variant>, Vec<String>)> {
    use crate::finding::Edit;
    let api = original.api();
    let mut variants = vec![Variant {
        name: "original".into(),
        fix: None,
        plan: Plan::Resend(VariantRequest {
            path: original.request.path.clone(),
            body: request.clone(),
        }),
    }];
    let session_template = header
        .props
        .as_ref()
        .and_then(|p| p.get("chat_template"))
        .and_then(Value::as_str);
    let attached: Vec<&Fix> = analysed
        .findings
        .iter()
        .filter_map(|f| f.fix.as_ref())
        .collect();
    // (fix, asked for by name): a fix that `all` brought in and cannot be planned is skipped
    let mut wanted: Vec<(Fix, bool)> = Vec::new();
    for id in fixes {
        if id == "all" {
            for f in &attached {
                if !wanted.iter().any(|(w, _)| w.id() == f.id()) {
                    wanted.push(((*f).clone(), false));
                }
            }
            if template.is_some() && !wanted.iter().any(|(w, _)| w.id() == "template") {
                wanted.extend(
                    crate::diagnose::fix::by_id("template", api, request, None).map(|f| (f, false)),
                );
            }
            continue;
        }
        if !Edit::IDS.contains(&id.as_str()) {
            anyhow::bail!(
                "--fix {id}: no such fix (one of {}, or all)",
                Edit::IDS.join(", ")
            );
        }
        if let Some(w) = wanted.iter_mut().find(|(w, _)| w.id() == id) {
            w.1 = true;
            continue;
        }
        let fix = attached
            .iter()
            .find(|f| f.id() == id)
            .map(|f| (*f).clone())
            .or_else(|| crate::diagnose::fix::by_id(id, api, request, session_template))
            .with_context(|| {
                format!(
                    "--fix {id}: no finding of exchange #{} has it and it does not apply to this request (the findings' fixes: {})",
                    original.id,
                    if attached.is_empty() {
                        "none".to_owned()
                    } else {
                        attached.iter().map(|f| f.id()).collect::<Vec<_>>().join(", ")
                    }
                )
            })?;
        wanted.push((fix, true));
    }
    let mut notes = Vec::new();
    for (fix, named) in wanted {
        let plan = match plan_fix(template, header, original, request, analysed, &fix) {
            Ok(p) => p,
            Err(e) if !named => {
                notes.push(format!("skipping fix {}: {e:#}", fix.id()));
                continue;
            }
            Err(e) => return Err(e),
        };
        variants.push(Variant {
            name: fix.id().to_owned(),
            fix: Some(fix),
            plan,
        });
    }
    Ok((variants, notes))
}

/// How fix `fix` runs on this exchange.
fn plan_fix(
    template: Option<&crate::template::TemplateSource>,
    header: &Header,
    original: &Exchange,
    request: &Value,
    analysed: &crate::analysis::AnalysedExchange,
    fix: &Fix,
) -> anyhow::Result<Plan> {
    use crate::finding::Edit;
    Ok(match &fix.edit {
        Edit::Template { drop_bos, .. } => {
            regenerate_plan(template, header, original, request, *drop_bos)?
        }
        Edit::OtherParser { .. } => {
            let raw = analysed
                .raw
                .as_ref()
                .and_then(|r| r.models_text())
                .with_context(|| {
                    format!(
                        "--fix {}: exchange #{} has no recorded raw text to parse",
                        fix.id(),
                        original.id
                    )
                })?;
            let template = header
                .props
                .as_ref()
                .and_then(|p| p.get("chat_template"))
                .and_then(Value::as_str);
            let calls = whatif::reparse_calls(
                &fix.edit,
                raw,
                template,
                request.get("tools"),
                analysed.llama_prompt.as_ref(),
            )
            .map_err(|e| anyhow::anyhow!("--fix {}: {e}", fix.id()))?;
            Plan::Reparse { calls }
        }
        edit => Plan::Resend(
            whatif::fixed_request(edit, original.api(), &original.request.path, request)
                .map_err(|e| anyhow::anyhow!("--fix {}: {e}", fix.id()))?,
        ),
    })
}

/// The prompt of fix `template`: `template` (`--template SRC`; or, with `drop_bos`, the
/// session's own template without its leading BOS) rendered locally under the engine's
/// profile (the session's llama.cpp build), `strftime_now` = the exchange's start time.
fn regenerate_plan(
    template: Option<&crate::template::TemplateSource>,
    header: &Header,
    original: &Exchange,
    request: &Value,
    drop_bos: bool,
) -> anyhow::Result<Plan> {
    use crate::template::TemplateSource;
    let session_source = header
        .props
        .as_ref()
        .and_then(|p| TemplateSource::from_props(p).ok());
    let mut source = match (template, &session_source) {
        (Some(src), _) => src.clone(),
        (None, Some(s)) if drop_bos => {
            let mut s = s.clone();
            s.template = whatif::template_without_bos(&s.template, s.bos_token.as_deref());
            s.origin = format!("{} without its leading BOS", s.origin);
            s
        }
        _ => anyhow::bail!(
            "--fix template: name the other template with --template SRC (a .jinja, tokenizer_config.json, .gguf or corpus:NAME.jinja)"
        ),
    };
    // the engine's profile and tokens: the session's server, where the source does not say
    if let Some(s) = &session_source {
        source.profile = source.profile.or(s.profile);
        source.vocab_flags = source.vocab_flags.or(s.vocab_flags);
        source.bos_token = source.bos_token.clone().or(s.bos_token.clone());
        source.eos_token = source.eos_token.clone().or(s.eos_token.clone());
    }
    let now = time::OffsetDateTime::parse(
        &original.started,
        &time::format_description::well_known::Rfc3339,
    )
    .ok();
    let anthropic = original.api() == crate::session::Api::Anthropic;
    let opts = crate::template::RenderOptions {
        now,
        ..Default::default()
    };
    let (text, _) = source.render_request(request, anthropic, &opts)?;
    Ok(Plan::Regenerate {
        template: source.template.clone(),
        prompt: Prompt {
            text,
            token_ids: None,
            from: format!("local render of {}", source.origin),
        },
    })
}
