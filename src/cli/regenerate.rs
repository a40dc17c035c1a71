//! `toolscope regenerate SESSION --url URL [--exchange N]`: re-run an exchange's rendered
//! prompt as a raw completion (any chat exchange with `--exchange N`; by default every one the
//! server's own parser rejected, llama-server's HTTP 500 "does not match the expected …
//! format"), record it into the same session (label `regenerate:<id>`) with a `raw_text`
//! annotation for the original exchange, and replay toolscope's parser on the raw text so the
//! user sees where the call broke. The text counts as the model's output for the original
//! exchange only when toolscope's parse of it reproduces the server's answer ("regenerated,
//! verified"); otherwise it is "regenerated, diverged at byte N".
//!
//! Per engine (`--engine`, default the session's): llama-server renders with `/apply-template`,
//! vLLM with `/tokenize` (messages), Ollama with its `/api/show` template; `--template SRC`
//! renders locally instead (SGLang needs it), `--prompt-file` takes a prompt verbatim.
//! `--endpoint completion|v1-completions|ollama-generate` overrides the engine's raw endpoint.
//!
//! [`crate::record::regenerate`] does the requests, [`crate::parser`] the replay; this reads
//! the session and prints.
//! Exit 0 when every regenerated text parses without a malformed block, 1 when one is
//! malformed (or the regeneration itself failed), 2 on unusable input (no such file, no
//! exchange to regenerate).

use crate::session::ServerKind;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use serde_json::Value;

use crate::parser::{Syntax, parse};
use crate::record::regenerate::{Endpoint, Prompt, RegenOptions, is_parse_error, regenerate_with};
use crate::session::{SessionWriter, read_session};
use crate::stream::raw as toolscope_raw;

/// Arguments of `toolscope regenerate`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Session file with the failed exchange(s); the regenerated ones are appended to it.
    pub session: PathBuf,
    /// The server to regenerate on (http://HOST:PORT: llama-server, vLLM, SGLang or Ollama): it
    /// must run the same model and template as when the session was recorded (the engine renders
    /// the prompt again: llama-server `/apply-template`, vLLM `/tokenize`, Ollama `/api/show`'s
    /// template; SGLang needs `--template`).
    #[arg(long)]
    pub url: String,
    /// Only this exchange, any chat exchange (default: every exchange the server's parser
    /// rejected).
    #[arg(long, value_name = "N")]
    pub exchange: Option<u64>,
    /// The server at --url: `llama-server`, `vllm`, `sglang`, `ollama` (default: the session's
    /// server). Picks how the prompt is rendered and the default --endpoint. (`--engine KIND`,
    /// its former name, still works.)
    #[arg(long, alias = "engine", value_name = "KIND", value_parser = parse_server)]
    pub server: Option<ServerKind>,
    /// The raw completion endpoint (default: the engine's: llama-server `completion`, vLLM and
    /// SGLang `v1-completions`, Ollama `ollama-generate`).
    #[arg(long, value_enum)]
    pub endpoint: Option<Endpoint>,
    /// Render the prompt locally from this template source (as `render --template`: a .jinja,
    /// tokenizer_config.json, .gguf, corpus:NAME.jinja) instead of asking the engine; needed for
    /// SGLang, which cannot render a chat request without generating.
    #[arg(long, value_name = "SRC", conflicts_with = "prompt_file")]
    pub template: Option<String>,
    /// Use this file's bytes verbatim as the rendered prompt (e.g. one copied from the engine's
    /// debug log).
    #[arg(long, value_name = "FILE")]
    pub prompt_file: Option<PathBuf>,
}

/// `--server KIND`: one of the known server kinds (as a session names them).
fn parse_server(s: &str) -> Result<ServerKind, String> {
    let kind = ServerKind::parse(s);
    if kind.is_known() {
        Ok(kind)
    } else {
        let known: Vec<&str> = ServerKind::KNOWN.iter().map(ServerKind::as_str).collect();
        Err(format!(
            "unknown server {s:?}: expected one of {}",
            known.join(", ")
        ))
    }
}

/// Runs `toolscope regenerate`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if !(args.url.starts_with("http://") || args.url.starts_with("https://")) {
        bail!(
            "--url {}: not an http(s) URL (e.g. http://127.0.0.1:8080)",
            args.url
        );
    }
    let name = args.session.display().to_string();
    let session = read_session(&args.session).map_err(|e| anyhow::anyhow!("{e}"))?;
    let targets = targets(&session, args.exchange, &name)?;
    let engine = args
        .server
        .clone()
        .or_else(|| session.header.engine.as_ref().map(|e| e.kind.clone()))
        .filter(|k| !k.is_unknown())
        .unwrap_or(ServerKind::LlamaServer);
    check_endpoint(args.endpoint, &engine)?;
    let local = match &args.template {
        Some(src) => Some(crate::cli::render::load_template(src)?),
        None => None,
    };
    let file_prompt = match &args.prompt_file {
        Some(p) => Some(file_prompt(p)?),
        None => None,
    };
    let template = local.as_ref().map(|s| s.template.clone()).or_else(|| {
        session
            .header
            .props
            .as_ref()
            .and_then(|p| p.get("chat_template"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    });
    let mut writer = SessionWriter::open(&args.session, &session.header)
        .with_context(|| format!("{name}: cannot open for append"))?;
    let rt = super::runtime();
    let mut bad = false;
    let mut recorded = 0usize;
    for ex in &targets {
        let prompt = match (&local, &file_prompt) {
            (Some(src), _) => match local_prompt(src, ex) {
                Ok(p) => Some(p),
                Err(e) => {
                    crate::errln!("toolscope: {name}: #{}: {e:#}", ex.id);
                    bad = true;
                    continue;
                }
            },
            (None, p) => p.clone(),
        };
        let opts = RegenOptions {
            server: Some(engine.clone()),
            endpoint: args.endpoint,
            prompt,
            template: template.clone(),
            label: None,
        };
        let r = match rt.block_on(regenerate_with(&args.url, ex, &mut writer, &opts)) {
            Ok(r) => r,
            Err(e) => {
                crate::errln!("toolscope: {name}: #{}: {e:#}", ex.id);
                bad = true;
                continue;
            }
        };
        recorded += 1;
        if report(ex, &r, template.as_deref()) {
            bad = true;
        }
    }
    if recorded == 0 {
        // every regeneration failed before its exchange was appended
        crate::outln!("nothing recorded in {name} (every regeneration failed: see above)");
    } else {
        crate::outln!(
            "recorded in {name}; `toolscope open {name}` replays it step by step (Replay pane)"
        );
    }
    Ok(ExitCode::from(u8::from(bad)))
}

/// The exchanges to regenerate: exchange `only`, else every one the server's parser rejected.
fn targets(
    session: &crate::session::read::Session,
    only: Option<u64>,
    name: &str,
) -> anyhow::Result<Vec<crate::session::Exchange>> {
    let targets: Vec<_> = session
        .exchanges
        .iter()
        .filter(|e| match only {
            Some(n) => e.id == n,
            None => is_parse_error(e),
        })
        .cloned()
        .collect();
    if session.exchanges.is_empty() {
        bail!("{name}: the session has no exchanges to regenerate");
    }
    if targets.is_empty() {
        match only {
            Some(n) => bail!("{name}: no exchange #{n}"),
            None => bail!(
                "{name}: no exchange failed in the server's parser (HTTP 500 \"does not match the expected … format\"); name one with --exchange N"
            ),
        }
    }
    Ok(targets)
}

/// The raw endpoints that exist on one engine only: `--endpoint` refused on another.
fn check_endpoint(endpoint: Option<Endpoint>, engine: &ServerKind) -> anyhow::Result<()> {
    match endpoint {
        Some(Endpoint::Completion)
            if matches!(
                engine,
                ServerKind::Vllm | ServerKind::Sglang | ServerKind::Ollama
            ) =>
        {
            bail!(
                "--endpoint completion is llama-server's own POST /completion; {engine} has none (use --endpoint {}, or --server llama-server if --url is a llama-server)",
                if *engine == ServerKind::Ollama {
                    "ollama-generate"
                } else {
                    "v1-completions"
                }
            )
        }
        Some(Endpoint::OllamaGenerate) if *engine != ServerKind::Ollama => bail!(
            "--endpoint ollama-generate is Ollama's POST /api/generate; {engine} has none (use --server ollama if --url is an Ollama server)"
        ),
        _ => Ok(()),
    }
}

/// `--prompt-file`: the file's bytes as the prompt, verbatim.
fn file_prompt(p: &std::path::Path) -> anyhow::Result<Prompt> {
    let bytes = crate::input::read_file(p)?;
    let text =
        String::from_utf8(bytes).map_err(|e| anyhow::anyhow!("{}: not UTF-8: {e}", p.display()))?;
    Ok(Prompt {
        text,
        token_ids: None,
        from: format!("file {}", p.display()),
    })
}

/// Prints one regeneration (`ex` re-run as `r`) and toolscope's parse of its raw text; true
/// when that text has a malformed call block.
fn report(
    ex: &crate::session::Exchange,
    r: &crate::record::regenerate::Regenerated,
    template: Option<&str>,
) -> bool {
    let tools = ex.request_json().and_then(|b| b.get("tools").cloned());
    let syntax = template
        .and_then(Syntax::detect_from_template)
        .or_else(|| Syntax::detect_from_text(&r.raw_text));
    let out = parse(&r.raw_text, syntax, tools.as_ref());
    crate::outln!(
        "#{} → #{} ({}): {} bytes of raw text, syntax {}",
        ex.id,
        r.exchange.id,
        r.exchange.label.as_deref().unwrap_or(""),
        r.raw_text.len(),
        syntax.map_or("auto", |s| s.name())
    );
    if let crate::session::Annotation::RawText {
        prompt_from: Some(f),
        ..
    } = &r.annotation
    {
        crate::outln!("  prompt from: {f}");
    }
    crate::outln!("  raw: {:?}", r.raw_text);
    if let toolscope_raw::RawOutput::Text { source, .. } =
        toolscope_raw::raw_output(ex, std::slice::from_ref(&r.annotation))
    {
        crate::outln!("  as the model's output: {}", source.label());
    }
    for c in &out.tool_calls {
        crate::outln!("  call:      {}({})", c.name, c.arguments);
    }
    for m in &out.malformed {
        crate::outln!(
            "  malformed: at byte {} ({}): {} — {:?}",
            m.offset,
            m.syntax,
            m.message,
            m.text
        );
    }
    for p in &out.repairs {
        crate::outln!(
            "  repair:    at byte {} ({}): {}",
            p.offset,
            p.kind,
            p.message
        );
    }
    if !out.content.is_empty() {
        crate::outln!("  content:   {:?}", out.content);
    }
    !out.malformed.is_empty()
}

/// toolscope's render of exchange `ex`'s chat body under template source `src` (the source's
/// render profile; `strftime_now` = the exchange's start time), labelled `local render of
/// <origin>`.
fn local_prompt(
    src: &crate::template::TemplateSource,
    ex: &crate::session::Exchange,
) -> anyhow::Result<Prompt> {
    let body = ex
        .request_json()
        .with_context(|| format!("exchange {}: request body is not JSON", ex.id))?;
    let anthropic = ex.api() == crate::session::Api::Anthropic;
    // strftime_now: the time of the exchange, as the engine rendered it then.
    let now =
        time::OffsetDateTime::parse(&ex.started, &time::format_description::well_known::Rfc3339)
            .ok();
    let (text, _) = crate::cli::render::render_request(src, &body, anthropic, now, false)?;
    Ok(Prompt {
        text,
        token_ids: None,
        from: format!("local render of {}", src.origin),
    })
}
