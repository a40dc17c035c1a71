//! `toolscope probe URL`: checks whether a server honours `tool_choice` (named, none,
//! required) and stop strings, one line per control. Exit 0 all honored, 1 any fault (IGNORED,
//! MATCHED_IN_REASONING), 2 only inconclusive or unusable input.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use super::Format;
use crate::diagnose::probe::{ProbeResult, exit_code};
use crate::record::probe::{ProbeOptions, ProbeRun, run_probe};
use crate::session::Api;

/// Which API(s) to probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ApiChoice {
    /// `/v1/chat/completions`.
    Openai,
    /// `/v1/messages`.
    Anthropic,
    /// Both, OpenAI first.
    #[default]
    Both,
}

/// Arguments of `toolscope probe`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Server base URL, e.g. http://127.0.0.1:8080.
    pub url: String,
    /// API(s) to probe.
    #[arg(long, value_enum, default_value_t = ApiChoice::Both)]
    pub api: ApiChoice,
    /// `model` to send (servers serving one model ignore it).
    #[arg(long, value_name = "M")]
    pub model: Option<String>,
    /// Session file to record the probe's exchanges into (default: sessions/probe-<time>.jsonl).
    #[arg(long, value_name = "PATH")]
    pub session: Option<PathBuf>,
    /// Per-request timeout in seconds (1 to 86400).
    #[arg(long, default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub timeout: u64,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// The report: one line per control, `API  CONTROL  VERDICT  evidence`.
pub fn format_report(run: &ProbeRun, url: &str) -> String {
    let mut s = format!(
        "probe {url}{}\n",
        run.build_info
            .as_deref()
            .map(|b| format!(" (build {b})"))
            .unwrap_or_default()
    );
    for r in &run.results {
        s.push_str(&format_line(r));
        s.push('\n');
    }
    s.push_str(&format!("recorded in {}\n", run.session.display()));
    s
}

/// One report line.
pub fn format_line(r: &ProbeResult) -> String {
    format!(
        "{:<9} {:<17} {:<20} {}",
        r.api,
        r.control.name(),
        r.verdict.label(),
        r.evidence
    )
}

/// Runs `toolscope probe`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if !(args.url.starts_with("http://") || args.url.starts_with("https://")) {
        anyhow::bail!("{}: not an http(s) URL", args.url);
    }
    let apis = match args.api {
        ApiChoice::Openai => vec![Api::Openai],
        ApiChoice::Anthropic => vec![Api::Anthropic],
        ApiChoice::Both => vec![Api::Openai, Api::Anthropic],
    };
    let session = args.session.clone().unwrap_or_else(|| {
        let stamp = time::OffsetDateTime::now_utc();
        PathBuf::from(format!(
            "sessions/probe-{:04}{:02}{:02}-{:02}{:02}{:02}.jsonl",
            stamp.year(),
            u8::from(stamp.month()),
            stamp.day(),
            stamp.hour(),
            stamp.minute(),
            stamp.second()
        ))
    });
    let opts = ProbeOptions {
        base_url: args.url.clone(),
        apis,
        model: args.model.clone(),
        session,
        timeout: Duration::from_secs(args.timeout),
    };
    let run = super::runtime().block_on(run_probe(&opts))?;
    match args.format {
        Format::Text => {
            crate::text::print_out(&format_report(&run, &args.url));
        }
        Format::Json => {
            crate::text::print_json(&format!(
                "{}\n",
                serde_json::to_string_pretty(
                    &serde_json::json!({"url": args.url, "build_info": run.build_info, "session": run.session, "results": run.results})
                )?
            ));
        }
    }
    Ok(ExitCode::from(exit_code(&run.results)))
}
