//! `toolscope diff`: two templates or two servers on the same requests.
//!
//! ```text
//! toolscope diff --template A --template B (SESSION | --request FILE) [--vocab SRC] [--format text|json]
//! toolscope diff --server URL_A --server URL_B (SESSION | --request FILE) [--format text|json]
//! ```
//!
//! Exit status: 0 when nothing differs, 1 when anything differs (prompts, markers, turn roles,
//! schema loss, structure, `/props`), 2 on unusable input. The JSON is documented in
//! docs/diff.md.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use serde_json::{Value, json};

use super::Format;
use crate::diff::{
    self, DiffReport, DiffToken, ExchangeDiff, PropsDiff, Rendered, SideInfo, TemplateSide,
    adapt::TemplateInput,
};
use crate::record::client::ServerClient;
use crate::session::{Api, read_session};

/// Arguments of `toolscope diff`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Template source, given twice (A then B): a .jinja file, tokenizer_config.json, a
    /// llama-server URL (its `/props` chat_template), or `corpus:NAME.jinja` (llama.cpp
    /// models/templates, $TOOLSCOPE_CORPUS).
    #[arg(long = "template", value_name = "SRC", num_args = 1)]
    pub templates: Vec<String>,
    /// llama-server base URL, given twice (A then B): each request is sent to both servers'
    /// `POST /apply-template` (no generation) and the prompts are diffed; `/props` compared.
    #[arg(
        long = "server",
        value_name = "URL",
        num_args = 1,
        conflicts_with = "templates"
    )]
    pub servers: Vec<String>,
    /// Session file (.jsonl): every OpenAI / Anthropic chat exchange is diffed.
    #[arg(value_name = "SESSION", required_unless_present = "request")]
    pub session: Option<PathBuf>,
    /// A single request body (OpenAI chat or Anthropic messages JSON) instead of a session.
    #[arg(long, value_name = "FILE", conflicts_with = "session")]
    pub request: Option<PathBuf>,
    /// API of `--request` (default: detected from the body).
    #[arg(long, value_parser = ["openai", "anthropic"])]
    pub api: Option<String>,
    /// Only this exchange id of the session.
    #[arg(long, value_name = "ID")]
    pub exchange: Option<u64>,
    /// Vocabulary for the token-level diff: a llama-server URL (`POST /tokenize`). Without it
    /// (and in --server mode, where each server tokenizes its own prompt) a marker-aware
    /// splitter keeps control markers whole.
    #[arg(long, value_name = "SRC")]
    pub vocab: Option<String>,
    /// Re-send the requests and diff the replies (not implemented yet).
    #[arg(long)]
    pub generate: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// One chat request to diff.
struct Item {
    id: Option<u64>,
    api: Api,
    body: Value,
}

fn is_url(s: &str) -> bool {
    s.starts_with("http://") || s.starts_with("https://")
}

fn load_items(args: &Args, notes: &mut Vec<String>) -> anyhow::Result<(Vec<Item>, usize)> {
    if let Some(path) = &args.request {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("{}: cannot read", path.display()))?;
        let body: Value = serde_json::from_str(&text).map_err(|e| {
            anyhow::anyhow!(
                "{}: line {} column {}: {e}",
                path.display(),
                e.line(),
                e.column()
            )
        })?;
        let api = match args.api.as_deref() {
            Some("anthropic") => Api::Anthropic,
            Some(_) => Api::Openai,
            None => detect_api(&body),
        };
        return Ok((
            vec![Item {
                id: None,
                api,
                body,
            }],
            0,
        ));
    }
    let path = args
        .session
        .as_ref()
        .context("a SESSION or --request FILE is required")?;
    let session = read_session(path)?;
    for w in &session.warnings {
        notes.push(format!("{}: {w} (line skipped)", path.display()));
    }
    let mut ex: Vec<_> = session.exchanges.iter().collect();
    ex.sort_by_key(|e| e.id);
    let mut items = Vec::new();
    let mut skipped = 0;
    for e in ex {
        if args.exchange.is_some_and(|id| id != e.id) {
            continue;
        }
        let api = e.api();
        if !matches!(api, Api::Openai | Api::Anthropic) {
            skipped += 1;
            notes.push(format!(
                "exchange {}: {} {} is not a chat request; skipped",
                e.id, e.request.method, e.request.path
            ));
            continue;
        }
        match e.request_json() {
            Some(body) => items.push(Item {
                id: Some(e.id),
                api,
                body,
            }),
            None => {
                skipped += 1;
                notes.push(format!(
                    "exchange {}: request body is not JSON; skipped",
                    e.id
                ));
            }
        }
    }
    if let Some(id) = args.exchange
        && items.is_empty()
        && skipped == 0
    {
        bail!("{}: no exchange with id {id}", path.display());
    }
    Ok((items, skipped))
}

/// Anthropic when the body has a top-level `system`, or content blocks of Anthropic types, or
/// tools with `input_schema`; else OpenAI.
fn detect_api(body: &Value) -> Api {
    let blocks = body
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|m| m.get("content")?.as_array())
        .flatten();
    let anthropic_block = blocks.into_iter().any(|b| {
        matches!(
            b.get("type").and_then(Value::as_str),
            Some("tool_use" | "tool_result" | "thinking")
        )
    });
    let anthropic_tools = body
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(|t| t.iter().any(|t| t.get("input_schema").is_some()));
    if body.get("system").is_some() || anthropic_block || anthropic_tools {
        Api::Anthropic
    } else {
        Api::Openai
    }
}

fn template_input(item: &Item) -> TemplateInput {
    match item.api {
        Api::Anthropic => TemplateInput::from_anthropic(&item.body),
        _ => TemplateInput::from_openai(&item.body),
    }
}

/// A loaded template source.
struct Loaded {
    template: String,
    bos: Option<String>,
    eos: Option<String>,
    origin: String,
}

fn token_str(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) => Some(s.clone()),
        Value::Object(o) => o.get("content").and_then(Value::as_str).map(str::to_owned),
        _ => None,
    }
}

fn corpus_path(name: &str) -> PathBuf {
    let dir = std::env::var_os("TOOLSCOPE_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            dirs::home_dir()
                .unwrap_or_default()
                .join(".cache/toolscope/src/llama.cpp/models/templates")
        });
    dir.join(name)
}

fn load_template(src: &str, rt: &tokio::runtime::Runtime) -> anyhow::Result<Loaded> {
    if is_url(src) {
        let props = rt.block_on(ServerClient::new(src).props())?;
        let template = props
            .get("chat_template")
            .and_then(Value::as_str)
            .with_context(|| format!("{src}/props has no chat_template"))?;
        return Ok(Loaded {
            template: template.to_owned(),
            bos: token_str(props.get("bos_token")),
            eos: token_str(props.get("eos_token")),
            origin: format!("{src}/props"),
        });
    }
    let path: PathBuf = match src.strip_prefix("corpus:") {
        Some(name) => corpus_path(name),
        None => PathBuf::from(src),
    };
    let bytes = std::fs::read(&path)
        .with_context(|| format!("{}: cannot read template source", path.display()))?;
    load_template_bytes(&path, &bytes)
}

fn load_template_bytes(path: &Path, bytes: &[u8]) -> anyhow::Result<Loaded> {
    let origin = path.display().to_string();
    if bytes.starts_with(b"GGUF") {
        bail!(
            "{origin}: GGUF template sources need the template module (not merged into this build yet); extract the template or use a server URL"
        );
    }
    let text = std::str::from_utf8(bytes)
        .map_err(|e| anyhow::anyhow!("{origin}: byte {}: not UTF-8", e.valid_up_to()))?;
    let trimmed = text.trim_start();
    if trimmed.starts_with('{')
        && !trimmed.starts_with("{%")
        && !trimmed.starts_with("{{")
        && !trimmed.starts_with("{#")
    {
        let v: Value = serde_json::from_str(text).map_err(|e| {
            anyhow::anyhow!("{origin}: line {} column {}: {e}", e.line(), e.column())
        })?;
        let template = match v.get("chat_template") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Array(named)) => named
                .iter()
                .find(|t| t.get("name").and_then(Value::as_str) == Some("default"))
                .or_else(|| named.first())
                .and_then(|t| t.get("template").and_then(Value::as_str))
                .map(str::to_owned)
                .with_context(|| format!("{origin}: chat_template list has no template"))?,
            _ => bail!(
                "{origin}: no \"chat_template\" in this JSON (expected a tokenizer_config.json)"
            ),
        };
        return Ok(Loaded {
            template,
            bos: token_str(v.get("bos_token")),
            eos: token_str(v.get("eos_token")),
            origin,
        });
    }
    Ok(Loaded {
        template: text.to_owned(),
        bos: None,
        eos: None,
        origin,
    })
}

fn pieces_to_tokens(pieces: &[crate::session::TokenPiece]) -> Vec<DiffToken> {
    pieces
        .iter()
        .map(|p| {
            let text = String::from_utf8_lossy(p.piece.as_bytes()).into_owned();
            let special = diff::markers::marker_at(&text).is_some_and(|(l, _)| l == text.len());
            DiffToken {
                text,
                special,
                id: Some(p.id),
            }
        })
        .collect()
}

/// Runs `toolscope diff`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.generate {
        bail!(
            "--generate is not implemented yet; `toolscope diff --server` compares the rendered prompts only"
        );
    }
    let rt = super::runtime();
    let mut notes = Vec::new();
    let report = if !args.servers.is_empty() {
        if args.servers.len() != 2 {
            bail!(
                "--server must be given exactly twice (A then B), got {}",
                args.servers.len()
            );
        }
        run_servers(&args, &rt, &mut notes)?
    } else {
        if args.templates.len() != 2 {
            bail!(
                "--template must be given exactly twice (A then B), got {}",
                args.templates.len()
            );
        }
        run_templates(&args, &rt, &mut notes)?
    };
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&report)?),
        Format::Text => print!("{}", diff::render_text(&report)),
    }
    Ok(if report.has_differences() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn run_templates(
    args: &Args,
    rt: &tokio::runtime::Runtime,
    notes: &mut Vec<String>,
) -> anyhow::Result<DiffReport> {
    let la = load_template(&args.templates[0], rt)?;
    let lb = load_template(&args.templates[1], rt)?;
    let (items, skipped) = load_items(args, notes)?;
    let vocab = args.vocab.as_deref().map(|v| {
        if is_url(v) {
            Ok(ServerClient::new(v))
        } else {
            Err(anyhow::anyhow!("--vocab {v}: only a llama-server URL is supported in this build (file vocabularies need the tokens module)"))
        }
    });
    let vocab = vocab.transpose()?;
    let structure = diff::structure(
        &TemplateSide {
            template: &la.template,
            bos: la.bos.as_deref(),
            eos: la.eos.as_deref(),
        },
        &TemplateSide {
            template: &lb.template,
            bos: lb.bos.as_deref(),
            eos: lb.eos.as_deref(),
        },
    );
    let mut out: Vec<ExchangeDiff> = Vec::new();
    for item in &items {
        let input = template_input(item);
        let render = |l: &Loaded| -> anyhow::Result<Rendered> {
            let prompt = diff::adapt::render(
                &l.template,
                &input,
                l.bos.as_deref().unwrap_or(""),
                l.eos.as_deref().unwrap_or(""),
            );
            let tokens = match (&vocab, &prompt) {
                (Some(c), Ok(p)) => Some(pieces_to_tokens(&rt.block_on(c.tokenize(p))?)),
                _ => None,
            };
            Ok(Rendered {
                prompt,
                tokens,
                bos: l.bos.clone(),
                eos: l.eos.clone(),
            })
        };
        let (ra, rb) = (render(&la)?, render(&lb)?);
        out.push(diff::diff_exchange(
            item.id,
            item.api.as_str(),
            input.tools.as_ref(),
            &ra,
            &rb,
        ));
    }
    if vocab.is_none() {
        notes
            .push("tokens: marker-aware splitter (give --vocab URL to diff real token ids)".into());
    }
    let side = |src: &str, l: &Loaded| SideInfo {
        source: src.to_owned(),
        kind: "template".into(),
        origin: Some(l.origin.clone()),
        ..SideInfo::default()
    };
    Ok(DiffReport::new(
        "templates",
        side(&args.templates[0], &la),
        side(&args.templates[1], &lb),
        Some(structure),
        None,
        out,
        skipped,
        std::mem::take(notes),
    ))
}

/// The body sent to `/apply-template`: OpenAI chat shape (Anthropic bodies converted), without
/// `stream`.
fn apply_body(item: &Item) -> Value {
    match item.api {
        Api::Anthropic => {
            let i = TemplateInput::from_anthropic(&item.body);
            let mut b = json!({"messages": i.messages});
            if let Some(t) = i.tools {
                b["tools"] = t;
            }
            b
        }
        _ => {
            let mut b = item.body.clone();
            if let Some(o) = b.as_object_mut() {
                o.remove("stream");
                o.remove("stream_options");
            }
            b
        }
    }
}

fn run_servers(
    args: &Args,
    rt: &tokio::runtime::Runtime,
    notes: &mut Vec<String>,
) -> anyhow::Result<DiffReport> {
    let ca = ServerClient::new(&args.servers[0]);
    let cb = ServerClient::new(&args.servers[1]);
    let pa = rt
        .block_on(ca.props())
        .with_context(|| format!("server A {}", args.servers[0]))?;
    let pb = rt
        .block_on(cb.props())
        .with_context(|| format!("server B {}", args.servers[1]))?;
    let (items, skipped) = load_items(args, notes)?;
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    let structure = match (s(&pa, "chat_template"), s(&pb, "chat_template")) {
        (Some(ta), Some(tb)) => {
            let (ba, ea, bb, eb) = (
                token_str(pa.get("bos_token")),
                token_str(pa.get("eos_token")),
                token_str(pb.get("bos_token")),
                token_str(pb.get("eos_token")),
            );
            Some(diff::structure(
                &TemplateSide {
                    template: &ta,
                    bos: ba.as_deref(),
                    eos: ea.as_deref(),
                },
                &TemplateSide {
                    template: &tb,
                    bos: bb.as_deref(),
                    eos: eb.as_deref(),
                },
            ))
        }
        _ => {
            notes.push(
                "a server reported no chat_template in /props; structural diff skipped".into(),
            );
            None
        }
    };
    let props = PropsDiff::of(&pa, &pb);
    let mut out = Vec::new();
    for item in &items {
        let body = apply_body(item);
        let fetch = |c: &ServerClient, p: &Value| -> Rendered {
            let prompt = rt
                .block_on(c.apply_template(&body))
                .map_err(|e| format!("{e:#}"));
            let tokens = match &prompt {
                Ok(text) => rt
                    .block_on(c.tokenize(text))
                    .ok()
                    .map(|t| pieces_to_tokens(&t)),
                Err(_) => None,
            };
            Rendered {
                prompt,
                tokens,
                bos: token_str(p.get("bos_token")),
                eos: token_str(p.get("eos_token")),
            }
        };
        let (ra, rb) = (fetch(&ca, &pa), fetch(&cb, &pb));
        let tools = template_input(item).tools;
        out.push(diff::diff_exchange(
            item.id,
            item.api.as_str(),
            tools.as_ref(),
            &ra,
            &rb,
        ));
    }
    let side = |src: &str, p: &Value| SideInfo {
        source: src.to_owned(),
        kind: "server".into(),
        origin: Some(format!("{}/props", src.trim_end_matches('/'))),
        build_info: s(p, "build_info"),
        chat_template_caps: p.get("chat_template_caps").cloned(),
        model: s(p, "model_path"),
    };
    Ok(DiffReport::new(
        "servers",
        side(&args.servers[0], &pa),
        side(&args.servers[1], &pb),
        structure,
        Some(props),
        out,
        skipped,
        std::mem::take(notes),
    ))
}
