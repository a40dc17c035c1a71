//! `toolscope check`: headless diagnosis of sessions, HAR files, or a bare request/response
//! pair. Glue only: loads files (and a template URL), builds
//! [`crate::diagnose::ExchangeContext`]s, runs [`crate::diagnose::check_exchange`], prints.
//!
//! Exit codes: 0 no warning or error, 1 at least one, 2 unusable input (message names the file
//! and the position).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use serde_json::Value;

use super::Format;
use super::render::{VocabSource, load_template, load_vocab, tokenize_with};
use crate::diagnose::report::{CheckReport, ExchangeSummary};
use crate::diagnose::{ExchangeContext, VocabRender, check_exchange, load, request};
use crate::finding::Finding;
use crate::session::{Api, Piece, TokenPiece};
use crate::template::TemplateSource;

/// API of a bare request/response pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ApiArg {
    /// OpenAI chat completions (`/v1/chat/completions`).
    Openai,
    /// Anthropic messages (`/v1/messages`).
    Anthropic,
    /// Raw completion (llama-server `/completion`, OpenAI `/v1/completions`).
    Completion,
}

/// Arguments of `toolscope check`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Chat template: a .jinja file, tokenizer_config.json, or a llama-server URL (its /props).
    #[arg(long, value_name = "SRC")]
    pub template: Option<String>,
    /// Vocabulary: tokenizer.json, .gguf, or a llama-server URL (its /tokenize). Each
    /// exchange's request is rendered with the template (--template, else the session's
    /// /props) and split with it; the token rules (bos.duplicate, token.pseudo_special,
    /// token.special_split) then judge that tokenization. Default: the --template GGUF's own.
    #[arg(long, value_name = "SRC")]
    pub vocab: Option<String>,
    /// Request body (JSON) of a bare pair.
    #[arg(long, value_name = "F")]
    pub request: Option<PathBuf>,
    /// Non-streamed response body (JSON) of a bare pair.
    #[arg(long, value_name = "F", conflicts_with = "response_sse")]
    pub response: Option<PathBuf>,
    /// Streamed response body (text/event-stream) of a bare pair.
    #[arg(long, value_name = "F")]
    pub response_sse: Option<PathBuf>,
    /// A llama-server `/tokenize` answer with pieces (`{"tokens":[{"id","piece"}]}`).
    #[arg(long, value_name = "F")]
    pub tokens: Option<PathBuf>,
    /// API of the bare pair (guessed from its bodies when omitted; a `/completion` stream is
    /// recognised by its `content`/`stop` events).
    #[arg(long, value_enum)]
    pub api: Option<ApiArg>,
    /// Render profile for the token rules' render: `transformers`, `llama.cpp` or
    /// `llama.cpp@BUILD` (default: the template's engine — a session's /props template or a
    /// llama-server URL render as llama.cpp — else transformers).
    #[arg(long, value_name = "ENGINE")]
    pub engine: Option<crate::template::Engine>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Session (.jsonl) or HAR files.
    #[arg(value_name = "SESSION_OR_HAR")]
    pub files: Vec<PathBuf>,
}

/// Reads a file, naming it in the error.
fn read(path: &Path) -> anyhow::Result<Vec<u8>> {
    Ok(crate::input::read_file(path)?)
}

/// Parses JSON, naming the file, line and column on error.
fn parse_json(path: &Path, bytes: &[u8]) -> anyhow::Result<Value> {
    serde_json::from_slice(bytes).map_err(|e| super::json_error(path.display(), &e))
}

/// Reads a `/tokenize` answer: `{"tokens":[…]}` or a bare array; tokens are `{"id","piece"}`
/// objects (piece a string or byte array) or bare ids (llama-server's answer without
/// `with_pieces`). A bare id is named by `vocab` (its stored piece); without a local vocabulary
/// it is an error naming the file and the token: the token rules judge pieces, and an id alone
/// would silently pass every one of them.
pub fn parse_tokens(
    path: &Path,
    v: &Value,
    vocab: Option<&crate::tokens::Vocab>,
) -> anyhow::Result<Vec<TokenPiece>> {
    let arr = v.get("tokens").unwrap_or(v).as_array().with_context(|| {
        format!(
            "{}: expected {{\"tokens\": [...]}} from llama-server /tokenize",
            path.display()
        )
    })?;
    arr.iter()
        .enumerate()
        .map(|(i, t)| {
            if let Some(id) = t.as_u64() {
                let Some(vocab) = vocab else {
                    bail!(
                        "{}: /tokens/{i}: a bare token id ({id}) without its piece: ask llama-server's /tokenize with \"with_pieces\": true, or give --vocab (a .gguf or tokenizer.json) to name the ids",
                        path.display()
                    );
                };
                let piece = u32::try_from(id)
                    .ok()
                    .and_then(|id| vocab.pieces.get(id as usize))
                    .with_context(|| {
                        format!(
                            "{}: /tokens/{i}: token id {id} is not in the vocabulary {} ({} tokens)",
                            path.display(),
                            vocab.origin,
                            vocab.len()
                        )
                    })?;
                return Ok(TokenPiece {
                    id: id as u32,
                    piece: Piece::Text(piece.clone()),
                });
            }
            serde_json::from_value::<TokenPiece>(t.clone())
                .map_err(|e| anyhow::anyhow!("{}: /tokens/{i}: {e}", path.display()))
        })
        .collect()
}

/// True when `path` is a HAR file: a `.har` extension, or a first line that is a JSON object
/// with a `log` member (a HAR written on one line). Reads at most the first 64 KiB.
fn is_har(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("har"))
        || crate::tui::source::first_line(path, 64 * 1024)
            .and_then(|l| serde_json::from_str::<Value>(&l).ok())
            .is_some_and(|v| v.get("log").is_some())
}

/// Reads a HAR file into a session (imported with secrets redacted; HAR files are held in
/// memory, they are small next to recorded sessions).
fn load_har(path: &Path) -> anyhow::Result<crate::session::read::Session> {
    let bytes = read(path)?;
    let v = parse_json(path, &bytes)?;
    crate::session::har::har_to_session(&path.display().to_string(), &v)
}

/// What the token rules need to render and split each exchange's prompt (`--vocab`).
struct VocabRenderer<'a> {
    vocab: &'a VocabSource,
    /// `--template`, when given (else each exchange's own template from the session's `/props`).
    source: Option<&'a TemplateSource>,
    /// `--engine`, when given.
    engine: Option<crate::template::Engine>,
}

impl VocabRenderer<'_> {
    /// Renders `cx`'s request with the template and tokenizes the prompt with the vocabulary.
    /// `None` (with a note on stderr naming `file`) when there is no request or template, or
    /// the render fails; an unreachable vocabulary server is an error.
    fn render(&self, cx: &ExchangeContext, file: &str) -> anyhow::Result<Option<VocabRender>> {
        let Some(req) = cx.request.as_ref().filter(|r| r.is_object()) else {
            return Ok(None);
        };
        let own;
        let source = match (self.source, cx.template.as_deref()) {
            (Some(s), _) => s,
            (None, Some(t)) => {
                let mut s = TemplateSource::from_jinja("the session's /props chat_template", t);
                s.bos_token = cx.bos_token.clone();
                // a session's /props template is llama-server's: render as llama.cpp does
                s.engine = Some(crate::template::Engine::LLAMA_CPP);
                own = s;
                &own
            }
            (None, None) => {
                eprintln!(
                    "toolscope: note: {file}: --vocab needs a template (--template, or a session with /props): token rules skipped"
                );
                return Ok(None);
            }
        };
        let template = (cx.api != Api::Completion).then(|| source.template.clone());
        let (prompt, input) = if cx.api == Api::Completion {
            let Some(p) = req.get("prompt").and_then(Value::as_str) else {
                return Ok(None);
            };
            (p.to_owned(), crate::template::RenderInput::default())
        } else {
            match super::render::render_request_with(
                source,
                req,
                cx.api == Api::Anthropic,
                None,
                false,
                self.engine,
            ) {
                Ok(r) => r,
                // a template over its memory/time budget is unusable input, not a note
                Err(e)
                    if e.downcast_ref::<crate::template::RenderError>()
                        .is_some_and(|r| r.kind == crate::template::RenderErrorKind::Limit) =>
                {
                    return Err(e.context(format!("{file}: exchange {}", cx.id.unwrap_or(0))));
                }
                Err(e) => {
                    eprintln!(
                        "toolscope: note: {file}: cannot render the request for --vocab: {e:#}"
                    );
                    return Ok(None);
                }
            }
        };
        let t = tokenize_with(
            self.vocab,
            &prompt,
            input.bos_token.as_deref().or(cx.bos_token.as_deref()),
        )?;
        Ok(Some(VocabRender {
            prompt,
            tokens: t.tokens,
            bos_id: t.bos_id,
            bos_text: t.bos_text,
            template,
        }))
    }
}

/// Builds the report for `args` (everything but printing).
pub fn build_report(args: &Args) -> anyhow::Result<CheckReport> {
    let source = args.template.as_deref().map(load_template).transpose()?;
    let vocab = match &args.vocab {
        Some(v) => Some(load_vocab(v)?),
        None => source
            .as_ref()
            .and_then(|s| s.vocab.clone())
            .map(|v| VocabSource::Local(Box::new(v))),
    };
    let renderer = vocab.as_ref().map(|vocab| VocabRenderer {
        vocab,
        source: source.as_ref(),
        engine: args.engine,
    });
    let tpl_text = source.as_ref().map(|s| s.template.clone());
    let tpl_bos = source.as_ref().and_then(|s| s.bos_token.clone());
    let mut report = CheckReport::default();
    let add = |report: &mut CheckReport,
               cx: &mut ExchangeContext,
               fallback: u64,
               file: &str,
               listed: bool|
     -> anyhow::Result<()> {
        if cx.template.is_none() {
            cx.template = tpl_text.clone();
        }
        if let Some(b) = &tpl_bos {
            cx.bos_token = Some(b.clone());
        }
        if let Some(r) = &renderer {
            cx.vocab_render = r.render(cx, file)?;
        }
        if listed {
            report
                .exchanges
                .push(ExchangeSummary::from_context(cx, fallback, file));
        }
        report
            .findings
            .extend(check_exchange(cx).into_iter().map(|f| in_file(f, file)));
        Ok(())
    };

    let overrides = crate::analysis::Overrides {
        template: tpl_text.clone(),
        bos_token: tpl_bos.clone(),
    };
    // One exchange at a time: analysed, summarised, dropped. Memory is bounded by the largest
    // exchange (plus the report), not the file.
    let run = |report: &mut CheckReport,
               ex: crate::session::Exchange,
               ctx: crate::analysis::Context<'_>,
               file: &str|
     -> anyhow::Result<()> {
        if !ex.api().is_generation() {
            return Ok(());
        }
        let a = crate::analysis::analyse_with(
            ex,
            ctx,
            crate::analysis::Depth::Findings,
            &overrides,
            |cx| -> anyhow::Result<()> {
                if let Some(r) = &renderer {
                    cx.vocab_render = r.render(cx, file)?;
                }
                Ok(())
            },
        )?;
        report.exchanges.push(summary_of(&a, file));
        report
            .findings
            .extend(a.findings.into_iter().map(|f| in_file(f, file)));
        Ok(())
    };
    for path in &args.files {
        let file = path.display().to_string();
        if is_har(path) {
            let mut session = load_har(path)?;
            report.findings.extend(
                session
                    .warnings
                    .iter()
                    .map(|w| in_file(load::damaged_line(&file, w), &file)),
            );
            let mut exchanges = std::mem::take(&mut session.exchanges);
            exchanges.sort_by_key(|e| e.id);
            for ex in exchanges {
                let ctx = crate::analysis::Context {
                    header: &session.header,
                    annotations: session.annotations.get(&ex.id).map_or(&[], Vec::as_slice),
                };
                run(&mut report, ex, ctx, &file)?;
            }
            continue;
        }
        // The inspector's indexed reading: one pass for line offsets, then each exchange line
        // read and decoded on its own.
        let src = crate::tui::source::SessionSource::index_file(path, &mut |_, _| {})?;
        report.findings.extend(
            src.warnings
                .iter()
                .map(|w| in_file(load::damaged_line(&file, w), &file)),
        );
        for row in 0..src.len() {
            match src.load(row) {
                Ok(ex) => {
                    let ctx = src.context(ex.id);
                    run(&mut report, ex, ctx, &file)?;
                }
                Err(e) => {
                    let w = crate::analysis::load_error_warning(src.rows[row].line, &e);
                    report
                        .findings
                        .push(in_file(load::damaged_line(&file, &w), &file));
                }
            }
        }
    }

    let request = args
        .request
        .as_deref()
        .map(|p| read(p).and_then(|b| parse_json(p, &b)))
        .transpose()?;
    let response = args
        .response
        .as_deref()
        .map(|p| read(p).and_then(|b| parse_json(p, &b)))
        .transpose()?;
    let sse = args
        .response_sse
        .as_deref()
        .map(|p| read(p).and_then(|b| Ok(crate::input::utf8(b, p)?)))
        .transpose()?;
    if let (Some(p), Some(body)) = (args.response_sse.as_deref(), sse.as_deref()) {
        // A body with no decodable event is unusable input, not a reply that ignored the
        // request: judging tool_choice or finish_reason on it would blame the server.
        let events = crate::stream::sse::decode_bytes(body.as_bytes());
        if !events
            .iter()
            .any(|e| serde_json::from_str::<serde_json::Value>(&e.data).is_ok())
        {
            anyhow::bail!(
                "{}: no SSE event with a JSON `data:` field ({} bytes, {} events): not a chat completion or message stream",
                p.display(),
                body.len(),
                events.len()
            );
        }
    }
    // `--tokens` ids are named by a local vocabulary (`--vocab`, or the `--template` GGUF's),
    // which also gives their BOS id
    let local_vocab = match &vocab {
        Some(VocabSource::Local(v)) => Some(&**v),
        _ => None,
    };
    let tokens_bos = local_vocab.and_then(|v| v.bos_id);
    let tokens = args
        .tokens
        .as_deref()
        .map(|p| {
            read(p)
                .and_then(|b| parse_json(p, &b))
                .and_then(|v| parse_tokens(p, &v, local_vocab))
        })
        .transpose()?;
    let api = match args.api {
        Some(ApiArg::Openai) => Api::Openai,
        Some(ApiArg::Anthropic) => Api::Anthropic,
        Some(ApiArg::Completion) => Api::Completion,
        None => request::guess_api(request.as_ref(), response.as_ref(), sse.as_deref()),
    };
    // a chat request without `messages` is unusable input (exit 2), as in `render`
    if let (Some(p), Some(body), Api::Openai | Api::Anthropic) =
        (args.request.as_deref(), request.as_ref(), api)
    {
        super::render::check_chat_request(&p.display().to_string(), body)?;
    }
    let have_response = response.is_some() || sse.is_some();
    if have_response || (request.is_some() && args.template.is_none()) {
        let mut cx = ExchangeContext::from_pair(api, request.clone(), response.clone());
        cx.id = Some(1);

        if let (Some(r), None) = (&response, &cx.message) {
            let err = r.get("error").is_some();
            if !err {
                bail!(
                    "{}: line 1 column 1: not {} response (expected {})",
                    args.response
                        .as_deref()
                        .map(|p| p.display().to_string())
                        .unwrap_or_default(),
                    match api {
                        Api::Anthropic => "an Anthropic Messages",
                        Api::Completion => "a completion",
                        _ => "an OpenAI chat completions",
                    },
                    if api == Api::Anthropic {
                        "a message object with \"content\""
                    } else {
                        "a chat completion with \"choices\""
                    }
                );
            }
            cx.status = Some(500);
        }
        if let Some(body) = &sse {
            load::set_stream(&mut cx, body);
        }
        cx.server_tokens = tokens.clone();
        cx.bos_id = cx.bos_id.or(tokens_bos);
        let file = display(
            args.response
                .as_deref()
                .or(args.response_sse.as_deref())
                .or(args.request.as_deref()),
        );
        add(&mut report, &mut cx, 1, &file, true)?;
    } else if let Some(req) = &request {
        // Pre-flight: a request and a template, no response.
        let mut cx = ExchangeContext::new(api);
        cx.request = Some(req.clone());
        cx.server_tokens = tokens.clone();
        cx.bos_id = cx.bos_id.or(tokens_bos);
        let file = display(args.request.as_deref());
        add(&mut report, &mut cx, 1, &file, false)?;
        report.findings.extend(
            preflight(tpl_text.as_deref(), req)
                .into_iter()
                .map(|f| in_file(f, &file)),
        );
    } else if let Some(toks) = tokens {
        let mut cx = ExchangeContext::new(api);
        cx.server_tokens = Some(toks);
        cx.bos_id = cx.bos_id.or(tokens_bos);
        add(
            &mut report,
            &mut cx,
            0,
            &display(args.tokens.as_deref()),
            false,
        )?;
    } else if args.files.is_empty() {
        bail!(
            "nothing to check: give session/HAR files, --request/--response, --response-sse or --tokens"
        );
    }
    Ok(report)
}

/// `check`'s listing of an analysed session exchange from input `file`.
fn summary_of(a: &crate::analysis::AnalysedExchange, file: &str) -> ExchangeSummary {
    let ex = &a.exchange;
    ExchangeSummary {
        raw_text: a.raw.as_ref().map(crate::diagnose::report::raw_text_line),
        partial: crate::analysis::partial_note(ex),
        ..ExchangeSummary::of(
            file,
            ex.id,
            ex.api(),
            a.request.as_ref(),
            a.message.as_ref(),
            a.summary.status,
        )
    }
}

/// A path for messages and `file` fields (empty when absent).
fn display(p: Option<&Path>) -> String {
    p.map(|p| p.display().to_string()).unwrap_or_default()
}

/// Names `file` in the finding's evidence (exchange ids repeat across input files).
fn in_file(mut f: Finding, file: &str) -> Finding {
    if !file.is_empty() && f.evidence.file.is_none() {
        f.evidence.file = Some(file.to_owned());
    }
    f
}

/// Pre-flight lint of a request against a template: schema loss and render errors
/// ([`crate::schema::preflight`], rendered as transformers' `apply_chat_template`).
fn preflight(template: Option<&str>, request: &Value) -> Vec<Finding> {
    match template {
        Some(t) => crate::schema::preflight(request, t),
        None => Vec::new(),
    }
}

/// Runs `toolscope check`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let report = build_report(&args)?;
    match args.format {
        Format::Json => {
            // Written as serialised: no second copy of a big report in memory.
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            serde_json::to_writer_pretty(&mut out, &report)?;
            std::io::Write::write_all(&mut out, b"\n")?;
            std::io::Write::flush(&mut out)?;
        }
        // recorded content in the report never reaches the terminal as escape sequences
        Format::Text => print!("{}", crate::text::visible(&report.to_text())),
    }
    Ok(ExitCode::from(report.exit_code()))
}
