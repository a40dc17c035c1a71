//! `toolscope try SESSION --exchange N [--fix ID|all] [--url URL] [--runs K] [--seed S]`:
//! runs a recorded exchange's request K times against the engine as recorded (the original)
//! and with each fix applied, records every run into a what-if session (label
//! `try:<id>:<variant>`), and prints per variant the valid-call rate with its 95 % Wilson
//! interval, the finish reasons and the findings that remain. Without `--fix` it measures how
//! repeatable the exchange is and flags an outcome that changes between runs.
//!
//! Glue only: the fixes come from the analysis ([`crate::diagnose::fix`]), the changed requests
//! and tallies from [`crate::analysis::whatif`], the runs from [`crate::record::whatif`].

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use serde::Serialize;
use serde_json::Value;

use crate::analysis::whatif::{self, RunOutcome, Tally};
use crate::finding::{Edit, Fix};
use crate::record::regenerate::Prompt;
use crate::record::whatif::{Plan, TryOptions, Variant, outcome, run_once};
use crate::session::{Api, Exchange, read_session};

/// Arguments of `toolscope try`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Session file (.jsonl) holding the exchange.
    pub session: PathBuf,
    /// The exchange to try (its id in the session).
    #[arg(long, value_name = "N")]
    pub exchange: u64,
    /// The fix to apply: a fix id (flatten_schemas, template, stop_client_side,
    /// force_named_tool, other_api, drop_tools, max_tokens, other_parser) or `all` (every fix
    /// the exchange's findings carry). Repeatable. Without it, only the original request runs
    /// (how repeatable the exchange is).
    #[arg(long = "fix", value_name = "ID|all")]
    pub fixes: Vec<String>,
    /// The engine to run against (default: the session's recorded upstream).
    #[arg(long)]
    pub url: Option<String>,
    /// Runs per variant.
    #[arg(long, value_name = "K", default_value_t = 5)]
    pub runs: usize,
    /// Sampling seed of the first run; run i gets S+i (when the engine takes seeds). Default:
    /// the request's own settings.
    #[arg(long, value_name = "S")]
    pub seed: Option<u64>,
    /// The other chat template for fix `template` (a .jinja, tokenizer_config.json, .gguf or
    /// corpus:NAME.jinja, as `render --template`).
    #[arg(long, value_name = "SRC")]
    pub template: Option<String>,
    /// What-if session to write. Default: SESSION's name with `.try.jsonl`, next to it.
    #[arg(long = "session", value_name = "OUT")]
    pub out: Option<PathBuf>,
    /// Extra request header, `Name: value` (repeatable).
    #[arg(short = 'H', long = "header", value_name = "NAME: VALUE")]
    pub headers: Vec<String>,
    /// Output format of the summary (progress goes to stderr).
    #[arg(long, value_enum, default_value_t)]
    pub format: super::Format,
}

/// `DIR/NAME.try.jsonl` for `DIR/NAME.jsonl`.
pub fn default_out(session: &Path) -> PathBuf {
    let stem = session
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "session".into());
    session.with_file_name(format!("{stem}.try.jsonl"))
}

/// One variant's result, as `--format json` prints it.
#[derive(Debug, Serialize)]
pub struct VariantReport {
    /// `original` or the fix id.
    pub name: String,
    /// The fix applied.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<Fix>,
    /// The runs tallied.
    pub tally: Tally,
    /// The valid-call rate's 95 % Wilson interval (low, high).
    pub interval: (f64, f64),
    /// True when the outcome changed between runs.
    pub unstable: bool,
    /// Each run's outcome, in order.
    pub runs: Vec<RunOutcome>,
    /// Ids of the run exchanges in the what-if session.
    pub exchanges: Vec<u64>,
}

/// The whole report of `--format json`.
#[derive(Debug, Serialize)]
pub struct Report {
    pub session: String,
    pub exchange: u64,
    pub what_if: String,
    pub url: String,
    /// False when Ctrl-C stopped the runs (what finished is kept).
    pub complete: bool,
    pub variants: Vec<VariantReport>,
}

/// Runs `toolscope try`. Exit 0 when every planned run finished, 1 when Ctrl-C stopped them,
/// 2 for unusable input.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let name = args.session.display().to_string();
    let session = read_session(&args.session).map_err(|e| anyhow::anyhow!("{e}"))?;
    let original = session
        .exchanges
        .iter()
        .find(|e| e.id == args.exchange)
        .cloned()
        .with_context(|| format!("{name}: no exchange #{}", args.exchange))?;
    let api = original.api();
    if !matches!(api, Api::Openai | Api::Anthropic | Api::Ollama) {
        bail!(
            "{name}: exchange #{} ({}) is not a chat exchange",
            original.id,
            original.request.path
        );
    }
    let request = original.request_json().with_context(|| {
        format!(
            "{name}: exchange #{}: request body is not JSON",
            original.id
        )
    })?;
    let url = args
        .url
        .clone()
        .or_else(|| session.header.upstream.clone())
        .with_context(|| format!("{name}: the session names no upstream; give --url"))?;
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        bail!("--url {url}: not an http(s) URL (e.g. http://127.0.0.1:8080)");
    }
    if args.runs == 0 {
        bail!("--runs 0: nothing to run");
    }
    let mut headers = Vec::new();
    for h in &args.headers {
        let Some((k, v)) = h.split_once(':') else {
            bail!("-H {h:?}: expected 'Name: value'");
        };
        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
    }
    let annotations = session
        .annotations
        .get(&original.id)
        .map_or(&[][..], Vec::as_slice);
    let analysed = crate::analysis::analyse(
        original.clone(),
        crate::analysis::Context {
            header: &session.header,
            annotations,
        },
        crate::analysis::Depth::Findings,
    );
    let variants = plan(&args, &session.header, &original, &request, &analysed)?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| default_out(&args.session));
    let engine = session
        .header
        .engine
        .as_ref()
        .map(|e| e.kind.clone())
        .unwrap_or_else(|| "unknown".into());
    let opts = TryOptions {
        url: url.clone(),
        session: out.clone(),
        engine,
        seed: args.seed,
        headers,
    };
    let total: usize = variants.iter().map(|v| runs_of(v, args.runs)).sum();
    crate::errln!(
        "toolscope try: #{} of {name} → {url}: {} variant(s), {total} run(s), recorded in {}",
        original.id,
        variants.len(),
        out.display()
    );
    for v in &variants {
        if let Some(f) = &v.fix {
            crate::errln!("  {}: {}", v.name, crate::text::visible(&f.change));
        }
    }
    let rt = super::runtime();
    let mut reports = Vec::new();
    let mut complete = true;
    let mut done = 0usize;
    // one listener for the whole run: a Ctrl-C between two runs is seen by the next (cli/signals.rs)
    let mut signals = rt.block_on(async { super::signals::Signals::new() })?;
    'variants: for v in &variants {
        let mut outcomes = Vec::new();
        let mut ids = Vec::new();
        for i in 0..runs_of(v, args.runs) {
            let step = rt.block_on(async {
                tokio::select! {
                    r = run_once(&original, &session.header, v, i, &opts) => Some(r),
                    _ = signals.next() => None,
                }
            });
            let Some(r) = step else {
                complete = false;
                crate::errln!("\ntoolscope try: interrupted; the runs that finished are kept");
                reports.push(report(v, outcomes, ids));
                break 'variants;
            };
            done += 1;
            let o = outcome(&r, &request);
            if let Some(e) = &r.exchange {
                ids.push(e.id);
            }
            crate::errln!(
                "  [{done}/{total}] {} run {}/{}: {}{}",
                v.name,
                i + 1,
                runs_of(v, args.runs),
                o.line(),
                r.error
                    .as_deref()
                    .map(|e| format!(" ({})", crate::text::visible(e)))
                    .unwrap_or_default()
            );
            let _ = std::io::stderr().flush();
            outcomes.push(o);
        }
        reports.push(report(v, outcomes, ids));
    }
    let report = Report {
        session: name.clone(),
        exchange: original.id,
        what_if: out.display().to_string(),
        url,
        complete,
        variants: reports,
    };
    match args.format {
        super::Format::Json => {
            crate::text::print_json(&format!("{}\n", serde_json::to_string_pretty(&report)?));
        }
        super::Format::Text => {
            crate::text::print_out(&render_text(&report));
        }
    }
    Ok(if complete {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// A parser variant's outcome does not change between runs: it runs once.
fn runs_of(v: &Variant, k: usize) -> usize {
    match v.plan {
        Plan::Reparse { .. } => 1,
        _ => k,
    }
}

fn report(v: &Variant, runs: Vec<RunOutcome>, exchanges: Vec<u64>) -> VariantReport {
    let tally = Tally::of(&runs);
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

/// The text summary: one block per variant.
pub fn render_text(r: &Report) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "try #{} of {} against {}{}",
        r.exchange,
        r.session,
        r.url,
        if r.complete { "" } else { " (interrupted)" }
    );
    for v in &r.variants {
        let _ = writeln!(s, "\n{}", v.name);
        if let Some(f) = &v.fix {
            let _ = writeln!(s, "  fix:      {}", crate::text::visible(&f.change));
        }
        let _ = writeln!(s, "  {}", v.tally.rate_line());
        let _ = writeln!(s, "  finish:   {}", v.tally.finish_line());
        let _ = writeln!(s, "  findings: {}", v.tally.findings_line());
        if v.unstable {
            let _ = writeln!(
                s,
                "  UNSTABLE: the outcome changed between runs of the same request:"
            );
            for (line, n) in &v.tally.outcomes {
                let _ = writeln!(s, "    ×{n} {}", crate::text::visible(line));
            }
        } else if v.tally.runs > 1 {
            let _ = writeln!(s, "  repeatable: the same outcome in every run");
        }
    }
    let _ = writeln!(
        s,
        "\nrecorded in {} (compare: toolscope diff {} --against {})",
        r.what_if, r.session, r.what_if
    );
    s
}

/// The variants to run: the original, then each fix asked for.
fn plan(
    args: &Args,
    header: &crate::session::Header,
    original: &Exchange,
    request: &Value,
    analysed: &crate::analysis::AnalysedExchange,
) -> anyhow::Result<Vec<Variant>> {
    let api = original.api();
    let mut variants = vec![Variant {
        name: "original".into(),
        fix: None,
        plan: Plan::Resend(whatif::VariantRequest {
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
    for id in &args.fixes {
        if id == "all" {
            for f in &attached {
                if !wanted.iter().any(|(w, _)| w.id() == f.id()) {
                    wanted.push(((*f).clone(), false));
                }
            }
            if args.template.is_some() && !wanted.iter().any(|(w, _)| w.id() == "template") {
                wanted.extend(
                    crate::diagnose::fix::by_id("template", api, request, None).map(|f| (f, false)),
                );
            }
            continue;
        }
        if !Edit::IDS.contains(&id.as_str()) {
            bail!(
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
    for (fix, named) in wanted {
        let planned = plan_fix(args, header, original, request, analysed, &fix);
        let plan = match planned {
            Ok(p) => p,
            Err(e) if !named => {
                crate::errln!("toolscope try: skipping fix {}: {e:#}", fix.id());
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
    Ok(variants)
}

/// How fix `fix` runs on this exchange.
fn plan_fix(
    args: &Args,
    header: &crate::session::Header,
    original: &Exchange,
    request: &Value,
    analysed: &crate::analysis::AnalysedExchange,
    fix: &Fix,
) -> anyhow::Result<Plan> {
    let api = original.api();
    Ok({
        match &fix.edit {
            Edit::Template { drop_bos, .. } => {
                regenerate_plan(args, header, original, request, *drop_bos)?
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
                let calls = whatif::reparse_calls(&fix.edit, raw, template, request.get("tools"))
                    .map_err(|e| anyhow::anyhow!("--fix {}: {e}", fix.id()))?;
                Plan::Reparse { calls }
            }
            edit => Plan::Resend(
                whatif::fixed_request(edit, api, &original.request.path, request)
                    .map_err(|e| anyhow::anyhow!("--fix {}: {e}", fix.id()))?,
            ),
        }
    })
}

/// The prompt of fix `template`: `--template SRC` (or, with `drop_bos`, the session's own
/// template without its leading BOS) rendered locally under the engine's profile (the
/// session's llama.cpp build), `strftime_now` = the exchange's start time.
fn regenerate_plan(
    args: &Args,
    header: &crate::session::Header,
    original: &Exchange,
    request: &Value,
    drop_bos: bool,
) -> anyhow::Result<Plan> {
    use crate::template::TemplateSource;
    let session_source = header
        .props
        .as_ref()
        .and_then(|p| TemplateSource::from_props(p).ok());
    let mut source = match (&args.template, &session_source) {
        (Some(src), _) => crate::cli::render::load_template(src)?,
        (None, Some(s)) if drop_bos => {
            let mut s = s.clone();
            s.template = whatif::template_without_bos(&s.template, s.bos_token.as_deref());
            s.origin = format!("{} without its leading BOS", s.origin);
            s
        }
        _ => bail!(
            "--fix template: name the other template with --template SRC (a .jinja, tokenizer_config.json, .gguf or corpus:NAME.jinja)"
        ),
    };
    // the engine's profile and tokens: the session's server, where the source does not say
    if let Some(s) = &session_source {
        source.engine = source.engine.or(s.engine);
        source.vocab_flags = source.vocab_flags.or(s.vocab_flags);
        source.bos_token = source.bos_token.clone().or(s.bos_token.clone());
        source.eos_token = source.eos_token.clone().or(s.eos_token.clone());
    }
    let now = time::OffsetDateTime::parse(
        &original.started,
        &time::format_description::well_known::Rfc3339,
    )
    .ok();
    let anthropic = original.api() == Api::Anthropic;
    let (text, _) = crate::cli::render::render_request(&source, request, anthropic, now, false)?;
    Ok(Plan::Regenerate {
        template: source.template.clone(),
        prompt: Prompt {
            text,
            token_ids: None,
            from: format!("local render of {}", source.origin),
        },
    })
}
