//! `toolscope send`: send one request directly and record it.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use crate::record::send::{SendOptions, send};
use crate::record::summary::one_line;
use crate::session::{Api, Outcome};

/// API selector for `--api`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ApiArg {
    /// `/v1/chat/completions`
    Openai,
    /// `/v1/messages`
    Anthropic,
}

/// Arguments of `toolscope send`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Request body (JSON file; `-` reads stdin).
    pub request: PathBuf,
    /// Server URL: http://HOST:PORT (the API's endpoint is appended) or a full endpoint URL.
    #[arg(long)]
    pub url: String,
    /// Endpoint when --url has no path (default: guessed from the body).
    #[arg(long, value_enum)]
    pub api: Option<ApiArg>,
    /// Session file to write or append to. Default: sessions/<UTC time>.jsonl.
    #[arg(long)]
    pub session: Option<PathBuf>,
    /// Extra request header `NAME: VALUE` (repeatable).
    #[arg(long = "header", short = 'H')]
    pub headers: Vec<String>,
    /// Record secret headers verbatim.
    #[arg(long)]
    pub keep_secrets: bool,
}

/// Sends the request, streams the response body to stdout, prints a summary line to stderr.
/// Exit 0 when the server answered 2xx, 1 otherwise, 2 on unusable input.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let bytes = crate::input::read_file_or_stdin(&args.request)?;
    if let Err(e) = serde_json::from_slice::<serde_json::Value>(&bytes) {
        return Err(super::json_error(args.request.display(), &e));
    }
    let mut headers = Vec::new();
    for h in &args.headers {
        let (k, v) = h
            .split_once(':')
            .with_context(|| format!("--header {h:?}: expected NAME: VALUE"))?;
        headers.push((k.trim().to_owned(), v.trim().to_owned()));
    }
    let session = args
        .session
        .clone()
        .unwrap_or_else(super::proxy::default_session_path);
    let opts = SendOptions {
        url: args.url.clone(),
        api: args.api.map(|a| match a {
            ApiArg::Openai => Api::Openai,
            ApiArg::Anthropic => Api::Anthropic,
        }),
        session: session.clone(),
        keep_secrets: args.keep_secrets,
        headers,
    };
    let rt = super::runtime();
    let result = rt.block_on(async {
        let mut out = std::io::stdout().lock();
        send(bytes.into(), &opts, |chunk| {
            let _ = out.write_all(chunk);
            let _ = out.flush();
        })
        .await
    })?;
    crate::outln!();
    match &result.exchange {
        Some(ex) => crate::errln!(
            "toolscope send: {} → {}",
            crate::text::visible_line(&one_line(ex)),
            crate::text::visible_line(&session.display().to_string())
        ),
        None => crate::errln!("toolscope send: HTTP {} (not recorded)", result.status),
    }
    let ok = (200..300).contains(&result.status)
        && result
            .exchange
            .as_ref()
            .is_some_and(|e| e.outcome == Outcome::Complete);
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
