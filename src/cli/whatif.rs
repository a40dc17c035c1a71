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
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use serde::Serialize;

use crate::record::whatif::TryOptions;
use crate::session::{Api, read_session};

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
    #[arg(long, value_name = "K", default_value_t = crate::record::whatif::DEFAULT_RUNS)]
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
    /// Seconds one run may take to be answered in full (0.1–86400); a run past it is cut,
    /// recorded as partial and counted as a failure (`timeout`).
    #[arg(long, value_name = "SECONDS", default_value_t = crate::record::whatif::DEFAULT_TIMEOUT.as_secs_f64(), value_parser = timeout_secs)]
    pub timeout: f64,
    /// Output format of the summary (progress goes to stderr).
    #[arg(long, value_enum, default_value_t)]
    pub format: super::Format,
}

pub use crate::record::whatif::{VariantReport, default_out};

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
    refuse_redacted(
        &name,
        args.url.as_deref(),
        session.header.upstream.as_deref(),
    )?;
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
    let template = args
        .template
        .as_deref()
        .map(crate::cli::render::load_template)
        .transpose()?;
    let (variants, notes) = crate::record::whatif::plan_variants(
        &args.fixes,
        template.as_ref(),
        &session.header,
        &original,
        &request,
        &analysed,
    )?;
    for n in &notes {
        crate::errln!("toolscope try: {n}");
    }
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| default_out(&args.session));
    let opts = TryOptions {
        url: url.clone(),
        session: out.clone(),
        engine: session
            .header
            .engine
            .as_ref()
            .map_or_else(crate::session::ServerKind::unknown, |e| e.kind.clone()),
        seed: args.seed,
        headers,
        timeout: std::time::Duration::from_secs_f64(args.timeout),
    };
    let total: usize = variants
        .iter()
        .map(|v| crate::record::whatif::runs_of(v, args.runs))
        .sum();
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
    let (reports, complete) = rt
        .block_on(async {
            // one listener for the whole run (cli/signals.rs)
            let mut signals = super::signals::Signals::new()?;
            let cancel = async move {
                signals.next().await;
            };
            let job = crate::record::whatif::Job {
                original: &original,
                header: &session.header,
                request: &request,
                variants: &variants,
                runs: args.runs,
                opts: &opts,
            };
            crate::record::whatif::run_variants(job, cancel, print_progress).await
        })
        .map_err(|e| anyhow::anyhow!("{name}: {e:#}"))?;
    if !complete {
        crate::errln!("\ntoolscope try: interrupted; the runs that finished are kept");
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

/// `--timeout`: seconds, 0.1 to 86,400.
fn timeout_secs(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if (0.1..=86_400.0).contains(&v) => Ok(v),
        Ok(_) => Err("must be between 0.1 and 86400 seconds".into()),
        Err(e) => Err(format!("not a number of seconds: {e}")),
    }
}

/// The recorded upstream's credentials were redacted (`http://[redacted]@host`): running
/// against it would send the placeholder, so without `--url` it is refused.
fn refuse_redacted(name: &str, url: Option<&str>, upstream: Option<&str>) -> anyhow::Result<()> {
    if url.is_none() && upstream.is_some_and(|u| u.contains(crate::session::redact::REDACTED)) {
        bail!("{name}: the session's upstream credentials were redacted when recorded; pass --url");
    }
    Ok(())
}

/// One finished run on stderr: `[3/10] original run 3/5: length no call`.
fn print_progress(p: crate::record::whatif::Progress<'_>) {
    crate::errln!(
        "  [{}/{}] {} run {}/{}: {}{}",
        p.done,
        p.total,
        p.variant.name,
        p.index + 1,
        p.runs,
        p.outcome.line(),
        // the outcome line already says why when it has an error
        p.run
            .error
            .as_deref()
            .filter(|_| p.outcome.error.is_none())
            .map(|e| format!(" ({})", crate::text::visible(e)))
            .unwrap_or_default()
    );
    let _ = std::io::stderr().flush();
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
        let _ = writeln!(
            s,
            "  finish:   {}",
            crate::text::visible(&v.tally.finish_line())
        );
        let _ = writeln!(
            s,
            "  findings: {}",
            crate::text::visible(&v.tally.findings_line())
        );
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::whatif::{RunOutcome, Tally};

    #[test]
    fn the_finish_line_is_sanitised() {
        let run = RunOutcome {
            status: Some(200),
            valid_call: false,
            calls: Vec::new(),
            finish: "stop\u{1b}[2J\u{202e}x".into(),
            rules: Vec::new(),
            content: String::new(),
            reasoning: String::new(),
            error: None,
        };
        let tally = Tally::of(std::slice::from_ref(&run));
        let v = VariantReport {
            name: "original".into(),
            fix: None,
            interval: tally.interval(),
            unstable: false,
            tally,
            runs: vec![run],
            exchanges: Vec::new(),
        };
        let r = Report {
            session: "s.jsonl".into(),
            exchange: 1,
            what_if: "s.try.jsonl".into(),
            url: "http://127.0.0.1:1".into(),
            complete: true,
            variants: vec![v],
        };
        let text = render_text(&r);
        assert!(!text.contains('\u{1b}'), "{text:?}");
        assert!(!text.contains('\u{202e}'), "{text:?}");
    }
}
