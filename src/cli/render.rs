//! `toolscope render --template SRC --request FILE [--vocab SRC] [--now T] [--strict]
//! [--engine transformers|llama.cpp[@BUILD]|ollama[@VERSION]] [--format text|json]`.
//!
//! `text` prints exactly the rendered prompt (no trailing newline added) and nothing else;
//! `json` prints `{"prompt", "tokens": [{"id", "piece", "special"}], "findings": [...]}`.
//! Errors (unreadable source, malformed request, template error) exit 2 naming the file and
//! the position.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use serde_json::{Value, json};

use crate::cli::Format;
use crate::gguf;
use crate::record::client::ServerClient;
use crate::template::source::{TemplateError, TemplateFormat};
use crate::template::{RenderInput, TemplateSource};
use crate::tokens::{self, Token, Vocab};

/// Arguments of `toolscope render`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Template source: a .jinja file, tokenizer_config.json / chat_template.json, a .gguf, a
    /// llama-server URL (reads GET /props), or an Ollama URL `http://host:11434/api/show?model=NAME`
    /// or a saved `/api/show` answer, or a Go template file (`.gotmpl` / `.tmpl`) (a Go
    /// template: the request is then an Ollama /api/chat body, rendered as Ollama renders it).
    #[arg(long, value_name = "SRC")]
    pub template: String,
    /// Request body: an OpenAI chat body (messages, tools; optionally add_generation_prompt,
    /// bos_token, eos_token, chat_template_kwargs beside them) or an Anthropic messages body.
    #[arg(long, value_name = "FILE")]
    pub request: std::path::PathBuf,
    /// Vocabulary to split the prompt with: a .gguf, a HF tokenizer.json (or a
    /// tokenizer_config.json beside one: its bos_token / add_bos_token apply), or a
    /// llama-server URL (POST /tokenize with pieces). Default: the template source's own vocabulary (GGUF).
    #[arg(long, value_name = "SRC")]
    pub vocab: Option<String>,
    /// Clock for strftime_now, RFC 3339 (e.g. 2026-11-29T12:00:00Z). Default: the current time.
    #[arg(long, value_name = "T")]
    pub now: Option<String>,
    /// Undefined variables are errors (with template line and column).
    #[arg(long)]
    pub strict: bool,
    /// Which API the request body speaks (default: detected from its shape).
    #[arg(long, value_parser = ["openai", "anthropic"])]
    pub api: Option<String>,
    /// Render profile: `transformers`, `llama.cpp` (build 11434), `llama.cpp@BUILD` (Jinja
    /// templates), `ollama` or `ollama@VERSION` (Go templates). Default: the source's engine (a
    /// llama-server URL → llama.cpp at its build), else transformers for a Jinja template and
    /// Ollama for a Go template; a profile of the other language is an error.
    #[arg(long, value_name = "ENGINE")]
    pub engine: Option<crate::template::Profile>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

fn is_url(s: &str) -> bool {
    s.starts_with("http://") || s.starts_with("https://")
}

/// Loads a template source, the one loader every `--template` uses (render, check, flatten,
/// diff): a llama-server URL (`/props` chat_template, BOS/EOS), an Ollama `/api/show?model=M`
/// URL, a `.gguf` (`tokenizer.chat_template`), a `.jinja`, `tokenizer_config.json` or
/// `tokenizer.json`, or `corpus:NAME.jinja` (llama.cpp `models/templates`, `$TOOLSCOPE_CORPUS`).
/// Errors name the source (file, URL) and, for malformed JSON, the line and column.
pub fn load_template(src: &str) -> anyhow::Result<TemplateSource> {
    if let Some(name) = src.strip_prefix("corpus:") {
        let p = corpus_path(name);
        let mut s = load_template(&p.display().to_string())?;
        s.origin = p.display().to_string();
        return Ok(s);
    }
    if is_url(src) {
        if let Some((base, model)) = ollama_url(src) {
            let v = crate::cli::runtime().block_on(ServerClient::new(&base).ollama_show(&model))?;
            return Ok(TemplateSource::from_ollama_show(src, &v)?);
        }
        let v = crate::cli::runtime().block_on(ServerClient::new(src).props())?;
        let mut s = TemplateSource::from_props(&v)?;
        s.origin = format!("{}/props", src.trim_end_matches('/'));
        return Ok(s);
    }
    let path = Path::new(src);
    if path.extension().is_some_and(|e| e == "gguf") {
        let md = read_gguf(path)?;
        return Ok(TemplateSource::from_gguf(src, &md)?);
    }
    let bytes = crate::input::read_file(path)?;
    Ok(TemplateSource::from_bytes(src, &bytes)?)
}

/// `$TOOLSCOPE_CORPUS/NAME` (default `~/.cache/toolscope/src/llama.cpp/models/templates`, where
/// scripts/setup.sh unpacks the corpus).
pub fn corpus_path(name: &str) -> PathBuf {
    let dir = std::env::var_os("TOOLSCOPE_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            dirs::home_dir()
                .unwrap_or_default()
                .join(".cache/toolscope/src/llama.cpp/models/templates")
        });
    dir.join(name)
}

fn read_gguf(path: &Path) -> anyhow::Result<gguf::GgufMetadata> {
    let f = crate::input::open_regular(path)?;
    gguf::read_metadata(std::io::BufReader::with_capacity(1 << 20, f))
        .with_context(|| path.display().to_string())
}

fn ollama_url(src: &str) -> Option<(String, String)> {
    let (base, rest) = src.split_once("/api/show")?;
    let model = rest
        .trim_start_matches('?')
        .split('&')
        .find_map(|kv| kv.strip_prefix("model="))?;
    Some((base.to_owned(), model.to_owned()))
}

/// A vocabulary: local, or a server that tokenizes for us.
pub enum VocabSource {
    Local(Box<Vocab>),
    Server(String),
}

/// Loads `--vocab` (see [`Args::vocab`]).
pub fn load_vocab(src: &str) -> anyhow::Result<VocabSource> {
    if is_url(src) {
        return Ok(VocabSource::Server(src.to_owned()));
    }
    let path = Path::new(src);
    if path.extension().is_some_and(|e| e == "gguf") {
        let md = read_gguf(path)?;
        return Ok(VocabSource::Local(Box::new(Vocab::from_gguf(src, &md)?)));
    }
    let bytes = crate::input::read_file(path)?;
    if gguf::is_gguf(&bytes) {
        let md = gguf::read_metadata(&bytes[..]).with_context(|| src.to_owned())?;
        return Ok(VocabSource::Local(Box::new(Vocab::from_gguf(src, &md)?)));
    }
    if let Ok(cfg) = serde_json::from_slice::<Value>(&bytes)
        && cfg.get("model").is_none()
        && (cfg.get("chat_template").is_some() || cfg.get("added_tokens_decoder").is_some())
    {
        return tokenizer_config_vocab(path, &cfg).map(|v| VocabSource::Local(Box::new(v)));
    }
    Ok(VocabSource::Local(Box::new(Vocab::from_tokenizer_json(
        src, &bytes,
    )?)))
}

/// A `tokenizer_config.json` holds no vocabulary: the `tokenizer.json` beside it does. Its
/// `bos_token` (string or AddedToken object) and `add_bos_token` override what the
/// tokenizer.json suggests (transformers reads them the same way).
fn tokenizer_config_vocab(path: &Path, cfg: &Value) -> anyhow::Result<Vocab> {
    let tj = path.with_file_name("tokenizer.json");
    let bytes = crate::input::read_file(&tj).with_context(|| {
        format!(
            "{}: a tokenizer_config.json holds no vocabulary, and there is no readable {} beside it: pass the tokenizer.json as --vocab",
            path.display(),
            tj.display()
        )
    })?;
    let mut v = Vocab::from_tokenizer_json(&tj.display().to_string(), &bytes)?;
    let bos = cfg.get("bos_token").and_then(|b| {
        b.as_str()
            .or_else(|| b.get("content").and_then(Value::as_str))
    });
    if let Some(b) = bos {
        v.bos_id = v.special_id(b).or(v.bos_id);
    }
    let eos = cfg.get("eos_token").and_then(|b| {
        b.as_str()
            .or_else(|| b.get("content").and_then(Value::as_str))
    });
    if let Some(e) = eos {
        v.eos_id = v.special_id(e).or(v.eos_id);
    }
    if let Some(add) = cfg.get("add_bos_token").and_then(Value::as_bool) {
        v.add_bos = add;
    }
    v.origin = path.display().to_string();
    Ok(v)
}

/// Whether a request body looks like an Anthropic messages body (top-level `system`, or
/// content blocks of type `tool_use` / `tool_result` / `thinking`, or `stop_sequences`).
pub fn looks_anthropic(body: &Value) -> bool {
    if body.get("system").is_some() || body.get("stop_sequences").is_some() {
        return true;
    }
    if body
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(|t| t.iter().any(|t| t.get("input_schema").is_some()))
    {
        return true;
    }
    body.get("messages")
        .and_then(Value::as_array)
        .is_some_and(|ms| {
            ms.iter().any(|m| {
                m.get("content")
                    .and_then(Value::as_array)
                    .is_some_and(|bs| {
                        bs.iter().any(|b| {
                            matches!(
                                b.get("type").and_then(Value::as_str),
                                Some("tool_use" | "tool_result" | "thinking")
                            )
                        })
                    })
            })
        })
}

/// Renders a request body with a template source as the engine would
/// ([`TemplateSource::render_request`]: a Jinja template reads it as OpenAI or Anthropic
/// ([`RenderInput`]) with BOS/EOS defaulted from the source; a Go template as Ollama). `now`
/// is the `strftime_now` / `currentDate` clock (`None`: the reproducible 1970 default).
/// Returns the prompt and the input (its `notes` say what normalisation changed). Errors: the
/// source has no template, or the render fails.
pub fn render_request(
    source: &TemplateSource,
    body: &Value,
    anthropic: bool,
    now: Option<time::OffsetDateTime>,
    strict: bool,
) -> anyhow::Result<(String, RenderInput)> {
    render_request_with(source, body, anthropic, now, strict, None)
}

/// [`render_request`] under a render profile: `profile` (`--engine`), else the source's
/// ([`TemplateSource::profile_for`]). Errors: as [`TemplateSource::render_request`].
pub fn render_request_with(
    source: &TemplateSource,
    body: &Value,
    anthropic: bool,
    now: Option<time::OffsetDateTime>,
    strict: bool,
    profile: Option<crate::template::Profile>,
) -> anyhow::Result<(String, RenderInput)> {
    let opts = crate::template::RenderOptions {
        now,
        strict,
        profile,
        ..Default::default()
    };
    Ok(source.render_request(body, anthropic, &opts)?)
}

/// Gives `source` the special-token texts of the `--vocab` model, as llama-server gives them to
/// the template: `bos_token` / `eos_token` are the vocabulary's BOS / EOS texts (an empty
/// string when it has none), and its add-BOS / add-EOS flags decide which printed BOS / EOS the
/// llama.cpp profile removes (`common_chat_templates_init` and `common_chat_template_direct_apply`,
/// common/chat.cpp, b11434). Under the llama.cpp profile (`engine`, else the source's) the
/// vocabulary's texts replace the source's, as the server's model does; otherwise they only fill
/// what the source lacks. A server URL answers with its `/props` `bos_token` / `eos_token`.
/// Errors: the server cannot be reached or its `/props` is malformed.
pub fn apply_vocab(
    source: &mut TemplateSource,
    vocab: &VocabSource,
    engine: Option<crate::template::Profile>,
) -> anyhow::Result<()> {
    let llama = engine.or(source.profile).is_some_and(|e| e.is_llama_cpp());
    let (bos, eos, flags) = match vocab {
        VocabSource::Local(v) => (
            Some(v.bos_text().unwrap_or_default().to_owned()),
            Some(v.eos_text().unwrap_or_default().to_owned()),
            Some(crate::template::llama::VocabFlags {
                add_bos: v.add_bos,
                add_eos: v.add_eos,
            }),
        ),
        VocabSource::Server(url) => {
            let props = crate::cli::runtime().block_on(ServerClient::new(url).props())?;
            let p = TemplateSource::from_props(&props).unwrap_or_default();
            (p.bos_token, p.eos_token, None)
        }
    };
    if llama || source.bos_token.is_none() {
        source.bos_token = bos.or(source.bos_token.take());
    }
    if llama || source.eos_token.is_none() {
        source.eos_token = eos.or(source.eos_token.take());
    }
    if flags.is_some() && (llama || source.vocab_flags.is_none()) {
        source.vocab_flags = flags;
    }
    Ok(())
}

/// A prompt split by a vocabulary, with the BOS the vocabulary knows.
#[derive(Debug, Clone)]
pub struct Tokenized {
    /// The tokens, a zero-width BOS first when the engine adds one.
    pub tokens: Vec<Token>,
    /// BOS id (local vocabularies; `None` from a server, which does not say).
    pub bos_id: Option<u32>,
    /// BOS text (the vocabulary's, or `bos_hint` for a server).
    pub bos_text: Option<String>,
}

/// Tokenizes `prompt` as the engine feeds it: locally ([`tokens::tokenize_prompt`], BOS added
/// when the vocabulary says so) or by the server's `POST /tokenize` with pieces (the server adds
/// its BOS itself). `bos_hint` is the BOS text to assume for a server. Errors: the server
/// cannot be reached or answers no tokens.
pub fn tokenize_with(
    vocab: &VocabSource,
    prompt: &str,
    bos_hint: Option<&str>,
) -> anyhow::Result<Tokenized> {
    Ok(match vocab {
        VocabSource::Local(v) => Tokenized {
            tokens: tokens::tokenize_prompt(v, prompt),
            bos_id: v.bos_id,
            bos_text: v.bos_text().map(str::to_owned),
        },
        VocabSource::Server(url) => {
            let pieces = crate::cli::runtime().block_on(ServerClient::new(url).tokenize(prompt))?;
            Tokenized {
                tokens: tokens::tokens_from_pieces(prompt, &pieces),
                bos_id: None,
                bos_text: bos_hint.map(str::to_owned),
            }
        }
    })
}

/// The one shape check of a chat request (`render --request`, `check --request`): a JSON object
/// whose `messages` is an array of message objects. A malformed request names its JSON Pointer
/// here (`FILE: /messages: missing …`), not a template line that trips over it.
pub fn check_chat_request(req_name: &str, body: &Value) -> anyhow::Result<()> {
    if !body.is_object() {
        bail!(
            "{req_name}: the request must be a JSON object with \"messages\", got {}",
            crate::json_kind(body)
        );
    }
    match body.get("messages") {
        Some(Value::Array(_)) => {}
        None => bail!(
            "{req_name}: /messages: missing: a chat request needs a \"messages\" array (a completion request has \"prompt\"; pass --api completion to check one)"
        ),
        Some(m) => bail!(
            "{req_name}: /messages: expected an array of messages, got {}",
            crate::json_kind(m)
        ),
    }
    if let Some(Value::Array(ms)) = body.get("messages")
        && let Some((i, m)) = ms.iter().enumerate().find(|(_, m)| !m.is_object())
    {
        bail!(
            "{req_name}: /messages/{i}: expected a message object with \"role\", got {}",
            crate::json_kind(m)
        );
    }
    Ok(())
}

/// Runs `toolscope render`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let req_name = args.request.display().to_string();
    let text = crate::input::read_text(&args.request)?;
    let body: Value = serde_json::from_str(&text).map_err(|e| super::json_error(&req_name, &e))?;
    check_chat_request(&req_name, &body)?;
    let anthropic = match args.api.as_deref() {
        Some("anthropic") => true,
        Some(_) => false,
        None => looks_anthropic(&body),
    };
    let now = match &args.now {
        Some(t) => time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339)
            .with_context(|| {
            format!("--now {t}: not an RFC 3339 time (e.g. 2026-11-29T12:00:00Z)")
        })?,
        None => time::OffsetDateTime::now_utc(),
    };
    let mut source = load_template(&args.template)?;
    let vocab = args.vocab.as_deref().map(load_vocab).transpose()?;
    if let Some(v) = &vocab
        && source.format != TemplateFormat::Go
    {
        apply_vocab(&mut source, v, args.engine)?;
    }
    let opts = crate::template::RenderOptions {
        now: Some(now),
        strict: args.strict,
        profile: args.engine,
        ..Default::default()
    };
    // the one render entry point picks the renderer: an Ollama Go template (the request an
    // Ollama /api/chat or /api/generate body, rendered as Ollama's server does, issue #14)
    // under a Jinja profile, or a Jinja template under the Ollama profile, is an error there
    let (prompt, input) = source
        .render_request(&body, anthropic, &opts)
        .map_err(|e| match e {
            TemplateError::Go(e) => anyhow::anyhow!("{req_name}: {} ({e})", source.origin),
            e => e.into(),
        })?;
    if source.format == TemplateFormat::Go {
        match args.format {
            Format::Text => {
                let mut out = std::io::stdout().lock();
                out.write_all(prompt.as_bytes())?;
                out.flush()?;
            }
            Format::Json => {
                let v = serde_json::json!({"prompt": prompt, "template_format": "go", "origin": source.origin});
                crate::text::print_json(&format!("{}\n", serde_json::to_string_pretty(&v)?));
            }
        }
        return Ok(std::process::ExitCode::SUCCESS);
    }
    for n in &input.notes {
        let note = format!("toolscope: note: {req_name}: {n}");
        crate::errln!("{}", crate::text::visible(&note));
    }
    match args.format {
        // the prompt byte for byte into a pipe or file (a reference for `cmp`); on a terminal
        // through the one sanitiser, so a template's escape sequences are shown, never obeyed
        Format::Text => {
            if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
                crate::text::print_out(&prompt);
            } else {
                crate::text::print_out_raw(&prompt);
            }
        }
        Format::Json => {
            let vocab = match vocab {
                Some(v) => Some(v),
                None => source
                    .vocab
                    .clone()
                    .map(|v| VocabSource::Local(Box::new(v))),
            };
            let (toks, bos_id, bos_text) = match vocab {
                Some(v) => {
                    let t = tokenize_with(&v, &prompt, input.bos_token.as_deref())?;
                    (t.tokens, t.bos_id, t.bos_text)
                }
                None => (Vec::new(), None, None),
            };
            let mut findings = Vec::new();
            if !toks.is_empty() {
                findings.extend(tokens::pseudo_special(&prompt, &toks));
                findings.extend(tokens::bos_duplicate(&toks, bos_id, bos_text.as_deref()));
            }
            let tokens_json: Vec<Value> = toks
                .iter()
                .map(|t| json!({"id": t.id, "piece": t.piece, "special": t.special}))
                .collect();
            let out = json!({"prompt": prompt, "tokens": tokens_json, "findings": findings});
            crate::text::print_json(&format!("{}\n", serde_json::to_string_pretty(&out)?));
        }
    }
    Ok(ExitCode::SUCCESS)
}
