//! `toolscope diff`: two templates or two servers on the same requests.
//!
//! ```text
//! toolscope diff --template A --template B (SESSION | --request FILE) [--vocab SRC] [--format text|json]
//! toolscope diff --server URL_A --server URL_B (SESSION | --request FILE) [--format text|json]
//! toolscope diff --engine A --engine B [--template SRC] (SESSION | --request FILE) [--format text|json]
//! ```
//!
//! Exit status: 0 when nothing differs, 1 when anything differs (prompts, markers, turn roles,
//! schema loss, structure, `/props`), 2 on unusable input. The JSON is documented in
//! docs/diff.md.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use serde_json::Value;

use super::Format;
use super::render::VocabSource;
use crate::diff::{
    self, DiffReport, ExchangeDiff, PropsDiff, Rendered, SideInfo, TemplateSide, adapt::RenderInput,
};
use crate::record::client::ServerClient;
use crate::session::{Api, read_session};
use crate::template::render::RenderOptions;
use crate::template::source::TemplateSource;

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
    /// Render profile (`transformers`, `llama.cpp`, `llama.cpp@BUILD`). Given once: both
    /// `--template` sides render under it (default: each source's engine, else transformers).
    /// Given twice (A then B): the same template — `--template SRC` once, or the session's
    /// recorded `/props` template — rendered under the two profiles.
    #[arg(
        long = "engine",
        value_name = "ENGINE",
        num_args = 1,
        conflicts_with = "servers"
    )]
    pub engines: Vec<crate::template::Profile>,
    /// Session file (.jsonl): every OpenAI / Anthropic chat exchange is diffed.
    #[arg(value_name = "SESSION", required_unless_present = "request")]
    pub session: Option<PathBuf>,
    /// A single request body (OpenAI chat or Anthropic messages JSON) instead of a session.
    #[arg(long, value_name = "FILE", conflicts_with = "session")]
    pub request: Option<PathBuf>,
    /// API of `--request` (default: detected from the body).
    #[arg(long, value_parser = ["openai", "anthropic", "responses"])]
    pub api: Option<String>,
    /// Only this exchange id of the session.
    #[arg(long, value_name = "ID")]
    pub exchange: Option<u64>,
    /// Vocabulary for the token-level diff: a .gguf, a tokenizer.json, or a llama-server URL
    /// (`POST /tokenize`). Without it, a side whose template source is a GGUF uses that GGUF's
    /// vocabulary, and otherwise a marker-aware splitter keeps control markers whole. In
    /// --server mode each server tokenizes its own prompt.
    #[arg(long, value_name = "SRC")]
    pub vocab: Option<String>,
    /// Clock for `strftime_now` in templates (RFC 3339); default: the Unix epoch, so renders
    /// are reproducible.
    #[arg(long, value_name = "T")]
    pub now: Option<String>,
    /// With --server: also re-send each request (non-streaming) to both servers and diff the
    /// replies (content, reasoning, tool calls, finish_reason).
    #[arg(long)]
    pub generate: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Compare SESSION exchange by exchange with this session (e.g. one `toolscope resend`
    /// wrote): rendered prompt, output, calls, finish reason, findings (docs/replay.md).
    #[arg(long, value_name = "SESSION_B", requires = "session", conflicts_with_all = ["templates", "servers"])]
    pub against: Option<PathBuf>,
}

/// One chat request to diff.
struct Item {
    id: Option<u64>,
    api: Api,
    body: Value,
    /// Recorded request path (session input).
    path: Option<String>,
}

fn load_items(args: &Args, notes: &mut Vec<String>) -> anyhow::Result<(Vec<Item>, usize)> {
    if let Some(path) = &args.request {
        let text = crate::input::read_text(path)?;
        let body: Value =
            serde_json::from_str(&text).map_err(|e| super::json_error(path.display(), &e))?;
        let api = match args.api.as_deref() {
            Some("anthropic") => Api::Anthropic,
            Some("responses") => Api::Responses,
            Some(_) => Api::Openai,
            None => detect_api(&body),
        };
        return Ok((
            vec![Item {
                id: None,
                api,
                body,
                path: None,
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
        if !matches!(api, Api::Openai | Api::Anthropic | Api::Responses) {
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
                path: Some(e.request.path.clone()),
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
    if items.is_empty() {
        notes.push(format!(
            "{}: no OpenAI, Anthropic or Responses chat exchange to diff",
            path.display()
        ));
    }
    Ok((items, skipped))
}

/// Responses when the body has `input` and no `messages`; Anthropic when it has a top-level `system`, or content blocks of Anthropic types, or
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
    if body.get("messages").is_none() && body.get("input").is_some() {
        Api::Responses
    } else if body.get("system").is_some() || anthropic_block || anthropic_tools {
        Api::Anthropic
    } else {
        Api::Openai
    }
}

/// What the template sees: [`RenderInput::from_openai_request`], or for Anthropic bodies
/// [`RenderInput::from_anthropic_request`] (converted as llama-server converts them).
fn template_input(item: &Item) -> RenderInput {
    match item.api {
        Api::Anthropic => RenderInput::from_anthropic_request(&item.body),
        // converted as llama-server converts it; a body the server refuses renders as sent
        Api::Responses => RenderInput::from_openai_request(&responses_chat(&item.body)),
        _ => RenderInput::from_openai_request(&item.body),
    }
}

/// A Responses body as the chat body llama-server b11434 converts it to
/// ([`crate::template::responses::responses_to_chat`]); the body itself when the server would
/// refuse it.
fn responses_chat(body: &Value) -> Value {
    crate::template::responses::responses_to_chat(body)
        .map(|c| c.body)
        .unwrap_or_else(|_| body.clone())
}

fn token_str(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) => Some(s.clone()),
        Value::Object(o) => o.get("content").and_then(Value::as_str).map(str::to_owned),
        _ => None,
    }
}

/// Runs `toolscope diff`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if let (Some(b), Some(a)) = (&args.against, &args.session) {
        return super::resend::run_session_diff(a, b, args.format == Format::Json);
    }
    if args.generate && args.servers.is_empty() {
        bail!("--generate needs --server URL_A --server URL_B (templates alone do not generate)");
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
    } else if args.engines.len() == 2 {
        let (la, label) = match args.templates.as_slice() {
            [t] => (super::render::load_template(t)?, t.clone()),
            [] => session_template(&args)?,
            _ => bail!(
                "--engine A --engine B diffs one template: give --template once (or a session with /props), got {}",
                args.templates.len()
            ),
        };
        let sides = [
            (
                format!("{} · {label}", args.engines[0]),
                la.clone(),
                Some(args.engines[0]),
            ),
            (
                format!("{} · {label}", args.engines[1]),
                la,
                Some(args.engines[1]),
            ),
        ];
        run_templates(&args, "engines", sides, &rt, &mut notes)?
    } else {
        if args.templates.len() != 2 {
            bail!(
                "--template must be given exactly twice (A then B), got {}{}",
                args.templates.len(),
                if args.engines.len() > 2 {
                    "; --engine once or twice"
                } else {
                    ""
                }
            );
        }
        let engine = args.engines.first().copied();
        let sides = [
            (
                args.templates[0].clone(),
                super::render::load_template(&args.templates[0])?,
                engine,
            ),
            (
                args.templates[1].clone(),
                super::render::load_template(&args.templates[1])?,
                engine,
            ),
        ];
        run_templates(&args, "templates", sides, &rt, &mut notes)?
    };
    match args.format {
        Format::Json => {
            crate::text::print_json(&format!("{}\n", serde_json::to_string_pretty(&report)?));
        }
        Format::Text => {
            crate::text::print_out(&diff::render_text(&report));
        }
    }
    Ok(if report.has_differences() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// The session's recorded llama-server template (`/props` in the header) as a source, for
/// `--engine A --engine B` without `--template`.
fn session_template(args: &Args) -> anyhow::Result<(TemplateSource, String)> {
    let path = args
        .session
        .as_ref()
        .context("--engine A --engine B needs --template SRC, or a SESSION recorded with /props")?;
    let session = read_session(path)?;
    let props = session.header.props.as_ref().with_context(|| {
        format!(
            "{}: the session has no recorded /props template; give --template SRC",
            path.display()
        )
    })?;
    let mut src = TemplateSource::from_props(props)?;
    src.origin = format!("{} (/props)", path.display());
    Ok((src, format!("{} /props template", path.display())))
}

fn run_templates(
    args: &Args,
    mode: &str,
    sides: [(String, TemplateSource, Option<crate::template::Profile>); 2],
    rt: &tokio::runtime::Runtime,
    notes: &mut Vec<String>,
) -> anyhow::Result<DiffReport> {
    let [(label_a, la, engine_a), (label_b, lb, engine_b)] = sides;
    let (items, skipped) = load_items(args, notes)?;
    let vocab = args
        .vocab
        .as_deref()
        .map(super::render::load_vocab)
        .transpose()?;
    let now = match &args.now {
        Some(t) => Some(
            time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339)
                .with_context(|| format!("--now {t}: not an RFC 3339 time"))?,
        ),
        None => None,
    };
    let opts = RenderOptions {
        now,
        ..RenderOptions::default()
    };
    let structure = diff::structure(
        &TemplateSide {
            template: &la.template,
            bos: la.bos_token.as_deref(),
            eos: la.eos_token.as_deref(),
        },
        &TemplateSide {
            template: &lb.template,
            bos: lb.bos_token.as_deref(),
            eos: lb.eos_token.as_deref(),
        },
    );
    let mut tokenizer_note =
        "tokens: marker-aware splitter (give --vocab to diff real tokens)".to_owned();
    let mut out: Vec<ExchangeDiff> = Vec::new();
    for item in &items {
        let input = template_input(item);
        let render = |l: &TemplateSource,
                      engine: Option<crate::template::Profile>|
         -> anyhow::Result<Rendered> {
            let opts = RenderOptions {
                profile: engine.or(opts.profile),
                ..opts.clone()
            };
            let prompt = l.render(&input, &opts).map_err(|e| e.to_string());
            let tokens = match (&vocab, &prompt, &l.vocab) {
                (Some(VocabSource::Local(v)), Ok(p), _) => Some(diff::adapt::tokenize(v, p)),
                (Some(VocabSource::Server(url)), Ok(p), _) => {
                    let pieces = rt.block_on(ServerClient::new(url).tokenize(p))?;
                    Some(diff::adapt::tokens_from_pieces(p, &pieces))
                }
                (None, Ok(p), Some(v)) => Some(diff::adapt::tokenize(v, p)),
                _ => None,
            };
            let bos = input.bos_token.clone().or_else(|| l.bos_token.clone());
            let eos = input.eos_token.clone().or_else(|| l.eos_token.clone());
            Ok(Rendered {
                prompt,
                tokens,
                bos,
                eos,
            })
        };
        let (ra, rb) = (render(&la, engine_a)?, render(&lb, engine_b)?);
        if ra.tokens.is_some() || rb.tokens.is_some() {
            tokenizer_note = match &args.vocab {
                Some(v) => format!("tokens: vocabulary {v}"),
                None => "tokens: each side's own GGUF vocabulary where it has one".to_owned(),
            };
        }
        for n in &input.notes {
            notes.push(format!(
                "{}: {n}",
                item.id
                    .map(|i| format!("exchange {i}"))
                    .unwrap_or_else(|| "request".into())
            ));
        }
        out.push(diff::diff_exchange(
            item.id,
            item.api.as_str(),
            input.tools.as_ref(),
            &ra,
            &rb,
        ));
    }
    notes.push(tokenizer_note);
    let side = |src: &str, l: &TemplateSource, e: Option<crate::template::Profile>| SideInfo {
        source: src.to_owned(),
        kind: "template".into(),
        origin: Some(l.origin.clone()),
        engine: Some(l.profile_for(e).to_string()),
        ..SideInfo::default()
    };
    Ok(DiffReport::new(
        mode,
        side(&label_a, &la, engine_a),
        side(&label_b, &lb, engine_b),
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
        Api::Anthropic => crate::template::input::anthropic_to_openai(&item.body),
        _ => {
            let mut b = if item.api == Api::Responses {
                responses_chat(&item.body)
            } else {
                item.body.clone()
            };
            if let Some(o) = b.as_object_mut() {
                o.remove("stream");
                o.remove("stream_options");
            }
            b
        }
    }
}

/// Re-sends `item` to `base` (same path as recorded, or the API's chat path for --request) with
/// `stream: false`, and reads the reply as an [`AssistantMessage`](crate::stream::message::AssistantMessage).
async fn generate(
    http: &reqwest::Client,
    base: &str,
    item: &Item,
) -> Result<crate::stream::message::AssistantMessage, String> {
    let path = item.path.clone().unwrap_or_else(|| {
        match item.api {
            Api::Anthropic => "/v1/messages",
            Api::Responses => "/v1/responses",
            _ => "/v1/chat/completions",
        }
        .to_owned()
    });
    let url = format!("{}{}", base.trim_end_matches('/'), path);
    let mut body = item.body.clone();
    if let Some(o) = body.as_object_mut() {
        o.insert("stream".into(), Value::Bool(false));
        o.remove("stream_options");
    }
    let resp = http
        .post(&url)
        .json(&body)
        .send()
        .await
        .map_err(|e| format!("POST {url}: {e}"))?;
    let status = resp.status();
    let text = resp
        .text()
        .await
        .map_err(|e| format!("POST {url}: reading body: {e}"))?;
    if !status.is_success() {
        return Err(format!(
            "POST {url}: HTTP {status}: {}",
            text.chars().take(300).collect::<String>()
        ));
    }
    let v: Value =
        serde_json::from_str(&text).map_err(|e| format!("POST {url}: body is not JSON: {e}"))?;
    crate::stream::message::from_response_json(item.api.as_str(), &v)
        .ok_or_else(|| format!("POST {url}: not a {} reply", item.api.as_str()))
}

/// A note when the two builds read the template's replies with different llama.cpp formats
/// ([`crate::template::llama::reply_format`]): the prompts can be identical while the same
/// generated text parses differently (or is refused) — `--generate` shows it.
fn reply_format_note(pa: &Value, pb: &Value) -> Option<String> {
    use crate::template::Profile;
    use crate::template::llama::{BuildRules, reply_format};
    let side = |p: &Value| {
        let build_info = p.get("build_info").and_then(Value::as_str);
        let Profile::LlamaCpp { build } = Profile::from_llama_build_info(build_info) else {
            return None;
        };
        let template = p.get("chat_template").and_then(Value::as_str)?;
        Some((
            build_info.unwrap_or("?").to_owned(),
            reply_format(template, &BuildRules::for_build(build))?,
        ))
    };
    let ((ba, fa), (bb, fb)) = (side(pa)?, side(pb)?);
    (fa != fb).then(|| {
        format!(
            "reply parser: A ({ba}) reads this template's replies with llama.cpp's {fa} format, B ({bb}) with {fb} (common/chat.cpp of each build); identical prompts can still parse differently — compare replies with --generate"
        )
    })
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
    if let Some(n) = reply_format_note(&pa, &pb) {
        notes.push(n);
    }
    let http = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(300))
        .build()?;
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
                    .map(|t| diff::adapt::tokens_from_pieces(text, &t)),
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
        let mut d = diff::diff_exchange(item.id, item.api.as_str(), tools.as_ref(), &ra, &rb);
        if args.generate {
            let ga = rt.block_on(generate(&http, &args.servers[0], item));
            let gb = rt.block_on(generate(&http, &args.servers[1], item));
            d = d.with_reply(diff::diff_replies(&ga, &gb));
        }
        out.push(d);
    }
    let side = |src: &str, p: &Value| SideInfo {
        source: src.to_owned(),
        kind: "server".into(),
        origin: Some(format!("{}/props", src.trim_end_matches('/'))),
        build_info: s(p, "build_info"),
        chat_template_caps: p.get("chat_template_caps").cloned(),
        model: s(p, "model_path"),
        engine: None,
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
