//! `toolscope check`: headless diagnosis of sessions, HAR files, or a bare request/response
//! pair. Reads the inputs (and a template URL), makes each an exchange, analyses each with
//! [`crate::analysis::analyse_with`] (the one route into the rules), prints.
//!
//! Exit codes: 0 no warning or error, 1 at least one, 2 unusable input (message names the file
//! and the position).
//!
//! The report is written as it is found ([`ReportWriter`]): each exchange's listing and its
//! findings as soon as the exchange is analysed; what must come later in the output (JSON's
//! `findings` array after `exchanges`, the text report's findings tied to no exchange) goes
//! to an unnamed temporary file and is copied out at the end. Memory is bounded by the
//! largest exchange, not by the session or the report.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use serde_json::Value;

use super::Format;
use super::render::{VocabSource, load_template, load_vocab, tokenize_with};
use crate::diagnose::report::{ExchangeSummary, Tally};
use crate::diagnose::{ExchangeContext, VocabRender, input, request};
use crate::finding::Finding;
use crate::session::index::SessionSource;
use crate::session::{Api, Piece, TokenPiece};
use crate::template::TemplateSource;
use crate::template::source::TemplateFormat;

/// API of a bare request/response pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ApiArg {
    /// OpenAI chat completions (`/v1/chat/completions`).
    Openai,
    /// Anthropic messages (`/v1/messages`).
    Anthropic,
    /// Raw completion (llama-server `/completion`, OpenAI `/v1/completions`).
    Completion,
    /// OpenAI Responses (`/v1/responses`): `input` items in, `output` items or typed
    /// `response.*` SSE events out.
    Responses,
    /// Ollama's native chat (`/api/chat`): one JSON object, or an NDJSON stream given with
    /// `--response-sse`.
    Ollama,
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
    pub engine: Option<crate::template::Profile>,
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
        || crate::session::index::first_line(path, 64 * 1024)
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
    engine: Option<crate::template::Profile>,
}

impl VocabRenderer<'_> {
    /// Renders `cx`'s request with the template (`--template`, else `session`: the session's
    /// `/props` as a template source, [`TemplateSource::from_props`], the source the analysis's
    /// local render uses) and tokenizes the prompt with the vocabulary. `None` (with a note on
    /// stderr naming `file`) when there is no request or template, or the render fails; an
    /// unreachable vocabulary server is an error.
    fn render(
        &self,
        cx: &ExchangeContext,
        session: Option<&TemplateSource>,
        file: &str,
    ) -> anyhow::Result<Option<VocabRender>> {
        let Some(req) = cx.request.as_ref().filter(|r| r.is_object()) else {
            return Ok(None);
        };
        let source = match (self.source, session) {
            (Some(s), _) | (None, Some(s)) => s,
            (None, None) => {
                crate::errln!(
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
                    if e.downcast_ref::<crate::template::source::TemplateError>()
                        .and_then(|t| t.render_error())
                        .is_some_and(|r| r.kind == crate::template::RenderErrorKind::Limit) =>
                {
                    return Err(e.context(format!("{file}: exchange {}", cx.id.unwrap_or(0))));
                }
                Err(e) => {
                    crate::errln!(
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

/// Checks everything `args` names and writes the report to `w` as it goes (format
/// `args.format`). Returns the counts (exit code, summary).
///
/// Every input takes one route: a session or HAR file is read as a session, the bare input
/// (`--request`, `--response`, `--response-sse`, `--tokens`) is made a one-exchange session
/// ([`bare_input`]); each exchange is analysed by [`crate::analysis::analyse_with`] and listed.
///
/// Errors: unusable input (named file and position), or writing to `w` failed.
pub fn check_into<W: std::io::Write>(args: &Args, w: W) -> anyhow::Result<Tally> {
    let mut source = args.template.as_deref().map(load_template).transpose()?;
    let vocab = match &args.vocab {
        Some(v) => {
            let v = load_vocab(v)?;
            // the model's BOS/EOS texts and flags reach the template, as llama-server passes them
            if let Some(s) = source.as_mut().filter(|s| s.format != TemplateFormat::Go) {
                super::render::apply_vocab(s, &v, args.engine)?;
            }
            Some(v)
        }
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
    // `--tokens` ids are named by a local vocabulary (`--vocab`, or the `--template` GGUF's),
    // which also gives their BOS id
    let local_vocab = match &vocab {
        Some(VocabSource::Local(v)) => Some(&**v),
        _ => None,
    };
    let overrides = crate::analysis::Overrides {
        template: source.as_ref().map(|s| s.template.clone()),
        bos_token: source.as_ref().and_then(|s| s.bos_token.clone()),
        bos_id: None,
    };
    let bare_overrides = crate::analysis::Overrides {
        bos_id: local_vocab.and_then(|v| v.bos_id),
        ..overrides.clone()
    };
    // Every input is opened and validated before the report starts: unusable input (exit 2)
    // leaves no half-written report. Session files are only indexed here (line offsets).
    let mut inputs = args
        .files
        .iter()
        .map(|path| open_file(path))
        .collect::<anyhow::Result<Vec<_>>>()?;
    match bare_input(args, local_vocab)? {
        Some(bare) => inputs.push(bare),
        None if args.files.is_empty() => bail!(
            "nothing to check: give session/HAR files, --request/--response, --response-sse or --tokens"
        ),
        None => {}
    }
    // Exchanges are analysed on every core (at most [`CHECK_WORKERS`]). With `--vocab` the
    // renderer's notes go to stderr as they happen, so one worker keeps their order.
    let workers = if renderer.is_some() {
        1
    } else {
        std::thread::available_parallelism().map_or(1, |n| n.get().min(CHECK_WORKERS))
    };
    let mut report = ReportWriter::new(w, args.format)?;
    for input in &inputs {
        let how = Route {
            renderer: renderer.as_ref(),
            overrides: if input.bare.is_some() {
                &bare_overrides
            } else {
                &overrides
            },
            session_template: session_template(&input.src, renderer.is_some()),
        };
        check_input(&mut report, input, &how, workers)?;
    }
    report.finish()
}

/// One input of `check`: a session or HAR file, or the bare input as a one-exchange session.
struct Input {
    /// The file named by the listing and the findings.
    file: String,
    src: SessionSource,
    /// `None` for a recorded input; how the bare input is reported.
    bare: Option<Bare>,
}

/// How the bare input is reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bare {
    /// A response (`--response`, `--response-sse`), or a request with no template: one listed
    /// exchange. Its HTTP status is not recorded: 200 is assumed and not printed, an error
    /// body is listed as HTTP 500; it has no raw-output line.
    Listed,
    /// A pre-flight request (`--request` with `--template`, no response) or a `--tokens`
    /// list: its findings belong to no listed exchange.
    Unlisted,
}

/// What every exchange of one input is analysed with.
struct Route<'a> {
    /// `--vocab`'s renderer, when given.
    renderer: Option<&'a VocabRenderer<'a>>,
    overrides: &'a crate::analysis::Overrides,
    /// The input's `/props` template, for `--vocab` without `--template`.
    session_template: Option<TemplateSource>,
}

/// Opens a session or HAR file: a HAR file is imported whole (small next to recorded
/// sessions); a session file is the inspector's indexed reading: each exchange line read and
/// decoded on its own, its annotations read back by the offsets the index kept.
fn open_file(path: &Path) -> anyhow::Result<Input> {
    let src = if is_har(path) {
        SessionSource::from_session(load_har(path)?)
    } else {
        SessionSource::index_file(path, &mut |_, _| {})?
    };
    Ok(Input {
        file: path.display().to_string(),
        src,
        bare: None,
    })
}

/// The session's `/props` template as a template source, when `--vocab` needs one (errors
/// name it: `the session's /props chat_template:LINE:COL`).
fn session_template(src: &SessionSource, wanted: bool) -> Option<TemplateSource> {
    let props = src.header.props.as_ref().filter(|_| wanted)?;
    let mut t = TemplateSource::from_props(props).ok()?;
    t.origin = format!("the session's {} chat_template", t.origin);
    Some(t)
}

/// Checks every exchange of one input, a batch of [`CHECK_BATCH`] rows at a time on `workers`
/// threads, written in row order (the report is the same bytes on any number of threads).
/// Memory is bounded by the exchanges in flight and one batch of listings.
fn check_input<W: std::io::Write>(
    report: &mut ReportWriter<W>,
    input: &Input,
    how: &Route<'_>,
    workers: usize,
) -> anyhow::Result<()> {
    let (file, src) = (&input.file, &input.src);
    for w in &src.warnings {
        report.finding(in_file(input::damaged_line(file, w), file))?;
    }
    // One row: its damaged-line findings, then its listing (or the error that stops the
    // report, after what comes before it is written).
    let one = |row: usize, caches: &crate::analysis::Caches| -> RowOut {
        match src.load(row) {
            Ok(ex) => {
                let (anns, damaged) = src.read_annotations(ex.id);
                let damaged = damaged
                    .iter()
                    .map(|w| in_file(input::damaged_line(file, w), file))
                    .collect();
                let ctx = crate::analysis::index::context(src, &anns);
                (damaged, analyse_row(ex, ctx, how, caches, input))
            }
            Err(e) => {
                let w = crate::analysis::load_error_warning(src.rows[row].line, &e);
                (vec![in_file(input::damaged_line(file, &w), file)], Ok(None))
            }
        }
    };
    // the caller's thread keeps its caches for the whole input; each batch's threads their own
    let caches = crate::analysis::Caches::default();
    // the session's loop: each exchange's compact facts, folded in row (id) order
    let mut conversation = crate::conversation::Builder::new();
    let mut start = 0;
    while start < src.len() {
        let end = (start + CHECK_BATCH).min(src.len());
        for (damaged, row) in rows_in_order(start..end, workers, &one, &caches) {
            for f in damaged {
                report.finding(f)?;
            }
            match row? {
                Some(Row {
                    listing: Some(listing),
                    findings,
                    turn,
                }) => {
                    report.exchange(&listing, findings)?;
                    if let Some(t) = turn {
                        conversation.push(t);
                    }
                }
                Some(Row {
                    listing: None,
                    findings,
                    ..
                }) => {
                    for f in findings {
                        report.finding(f)?;
                    }
                }
                None => {}
            }
        }
        start = end;
    }
    for f in crate::conversation::rules::findings(&conversation.finish()) {
        report.finding(in_file(f, file))?;
    }
    Ok(())
}

/// `one(row, caches)` for every row of `rows`, on `workers` threads (rows dealt round-robin;
/// each thread with caches of its own, one thread with `caches`), in row order. A worker's
/// panic is resumed on the caller.
fn rows_in_order<T: Send>(
    rows: std::ops::Range<usize>,
    workers: usize,
    one: &(impl Fn(usize, &crate::analysis::Caches) -> T + Sync),
    caches: &crate::analysis::Caches,
) -> Vec<T> {
    if workers <= 1 {
        return rows.map(|row| one(row, caches)).collect();
    }
    let mut out: Vec<(usize, T)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|k| {
                let rows = rows.clone();
                s.spawn(move || {
                    let caches = crate::analysis::Caches::default();
                    (rows.start + k..rows.end)
                        .step_by(workers)
                        .map(|row| (row, one(row, &caches)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| match h.join() {
                Ok(v) => v,
                Err(panic) => std::panic::resume_unwind(panic),
            })
            .collect()
    });
    out.sort_by_key(|(row, _)| *row);
    out.into_iter().map(|(_, t)| t).collect()
}

/// One exchange analysed (`None`: not a generation exchange): its listing and findings as
/// `check` reports them.
fn analyse_row(
    ex: crate::session::Exchange,
    ctx: crate::analysis::Context<'_>,
    how: &Route<'_>,
    caches: &crate::analysis::Caches,
    input: &Input,
) -> anyhow::Result<Option<Row>> {
    if !ex.api().is_generation() {
        return Ok(None);
    }
    let file = &input.file;
    let a = crate::analysis::analyse_with(
        ex,
        ctx,
        crate::analysis::Depth::Findings,
        how.overrides,
        caches,
        |cx| match how.renderer {
            Some(r) => r.render(cx, how.session_template.as_ref(), file),
            None => Ok(None),
        },
    )?;
    let mut listing = summary_of(&a, file);
    let turn = crate::conversation::TurnInput::from_analysed(&a);
    let mut findings: Vec<Finding> = a.findings.into_iter().map(|f| in_file(f, file)).collect();
    let listing = match input.bare {
        None => Some(listing),
        Some(Bare::Listed) => {
            listing.status = listing.status.filter(|s| *s >= 400);
            listing.raw_text = None;
            Some(listing)
        }
        Some(Bare::Unlisted) => {
            for f in &mut findings {
                f.exchange = None;
            }
            None
        }
    };
    Ok(Some(Row {
        listing,
        findings,
        turn,
    }))
}

/// One analysed exchange as `check` reports it.
struct Row {
    /// Its listing; `None` for the unlisted bare input (its findings are then loose).
    listing: Option<ExchangeSummary>,
    findings: Vec<Finding>,
    /// Its facts for the loop rules ([`crate::conversation`]).
    turn: Option<crate::conversation::TurnInput>,
}

/// `--response F` as JSON. A body that is a stream (SSE lines `data:` / `event:`, or
/// NDJSON: several JSON values one a line) is refused with the flag that reads it
/// (`--response-sse`), not as invalid JSON at line 1 column 1.
fn parse_response_json(p: &Path, b: &[u8]) -> anyhow::Result<serde_json::Value> {
    let start = String::from_utf8_lossy(&b[..b.len().min(512)]);
    let first = start.trim_start();
    if ["data:", "event:", "id:", "retry:", ":"]
        .iter()
        .any(|k| first.starts_with(k))
    {
        anyhow::bail!(
            "{}: a text/event-stream (SSE) body, not JSON: pass it with --response-sse",
            p.display()
        );
    }
    parse_json(p, b).map_err(|e| {
        let lines = String::from_utf8_lossy(b)
            .lines()
            .filter(|l| !l.trim().is_empty())
            .take(2)
            .filter(|l| serde_json::from_str::<serde_json::Value>(l).is_ok())
            .count();
        if lines == 2 {
            anyhow::anyhow!(
                "{e} (one JSON value a line: an NDJSON stream; pass it with --response-sse)"
            )
        } else {
            e
        }
    })
}

/// The bare input (`--request`, `--response`, `--response-sse`, `--tokens`), read and
/// validated, as a one-exchange session ([`crate::analysis::facts::bare_exchange`], `--tokens`
/// as its server-render annotation); `None` when none is given.
///
/// Errors: unreadable files (named, with line and column), a response that is not one of the
/// API's, a stream with no JSON event, a chat request without `messages`, bare token ids with
/// no vocabulary to name them.
fn bare_input(
    args: &Args,
    local_vocab: Option<&crate::tokens::Vocab>,
) -> anyhow::Result<Option<Input>> {
    use crate::analysis::facts::{BareBody, BareResponse, bare_exchange, tokens_annotation};
    let json_file = |p: &Path| read(p).and_then(|b| parse_json(p, &b));
    let request = args.request.as_deref().map(json_file).transpose()?;
    let response = args
        .response
        .as_deref()
        .map(|p| read(p).and_then(|b| parse_response_json(p, &b)))
        .transpose()?;
    let sse = args
        .response_sse
        .as_deref()
        .map(|p| read(p).and_then(|b| Ok(crate::input::utf8(b, p)?)))
        .transpose()?;
    if let (Some(p), Some(body)) = (args.response_sse.as_deref(), sse.as_deref()) {
        check_sse(p, body)?;
    }
    let tokens = args
        .tokens
        .as_deref()
        .map(|p| json_file(p).and_then(|v| parse_tokens(p, &v, local_vocab)))
        .transpose()?;
    let api = match args.api {
        Some(ApiArg::Openai) => Api::Openai,
        Some(ApiArg::Anthropic) => Api::Anthropic,
        Some(ApiArg::Completion) => Api::Completion,
        Some(ApiArg::Responses) => Api::Responses,
        Some(ApiArg::Ollama) => Api::Ollama,
        None => request::guess_api(request.as_ref(), response.as_ref(), sse.as_deref()),
    };
    // a chat request without `messages` is unusable input (exit 2), as in `render`
    if let (Some(p), Some(body), Api::Openai | Api::Anthropic) =
        (args.request.as_deref(), request.as_ref(), api)
    {
        super::render::check_chat_request(&p.display().to_string(), body)?;
    }
    let status = match &response {
        Some(r) => json_status(args.response.as_deref(), api, r)?,
        None => 200,
    };
    let body = match (&response, &sse) {
        (Some(r), _) => Some(BareBody::Json(r)),
        (None, Some(s)) => Some(BareBody::Sse(s)),
        (None, None) => None,
    };
    let (bare, file) = if body.is_some() || (request.is_some() && args.template.is_none()) {
        let named = args.response.as_deref().or(args.response_sse.as_deref());
        (Bare::Listed, named.or(args.request.as_deref()))
    } else if request.is_some() {
        (Bare::Unlisted, args.request.as_deref())
    } else if tokens.is_some() {
        (Bare::Unlisted, args.tokens.as_deref())
    } else {
        return Ok(None);
    };
    let exchange = bare_exchange(
        api,
        request.as_ref(),
        body.map(|body| BareResponse { status, body }),
    );
    let annotations = tokens
        .map(|t| (exchange.id, vec![tokens_annotation(t)]))
        .into_iter()
        .collect();
    let file = display(file);
    let session = crate::session::read::Session {
        path: file.clone(),
        header: Default::default(),
        exchanges: vec![exchange],
        annotations,
        warnings: Vec::new(),
    };
    Ok(Some(Input {
        file,
        src: SessionSource::from_session(session),
        bare: Some(bare),
    }))
}

/// A stream body with no decodable event is unusable input, not a reply that ignored the
/// request: judging tool_choice or finish_reason on it would blame the server.
fn check_sse(path: &Path, body: &str) -> anyhow::Result<()> {
    let events = crate::stream::sse::decode_bytes(body.as_bytes());
    // an Ollama stream is NDJSON: one JSON object per line
    let ndjson = body
        .lines()
        .any(|l| serde_json::from_str::<serde_json::Value>(l).is_ok_and(|v| v.is_object()));
    if !events
        .iter()
        .any(|e| serde_json::from_str::<serde_json::Value>(&e.data).is_ok())
        && !ndjson
    {
        bail!(
            "{}: no SSE event with a JSON `data:` field ({} bytes, {} events): not a chat completion or message stream",
            path.display(),
            body.len(),
            events.len()
        );
    }
    Ok(())
}

/// The status a bare JSON response is checked under: 200 for a reply of `api`, 500 for an
/// error body (`{"error": …}`). Errors: a body that is neither, naming `path`.
fn json_status(path: Option<&Path>, api: Api, body: &Value) -> anyhow::Result<u16> {
    if crate::stream::message::from_response_json(api.as_str(), body).is_some() {
        return Ok(200);
    }
    if body.get("error").is_some() {
        return Ok(500);
    }
    bail!(
        "{}: line 1 column 1: not {} response (expected {})",
        display(path),
        match api {
            Api::Anthropic => "an Anthropic Messages",
            Api::Completion => "a completion",
            Api::Responses => "an OpenAI Responses",
            Api::Ollama => "an Ollama /api/chat",
            _ => "an OpenAI chat completions",
        },
        match api {
            Api::Anthropic => "a message object with \"content\"",
            Api::Responses => "a response object with \"output\"",
            Api::Ollama => "an object with \"message\"",
            _ => "a chat completion with \"choices\"",
        }
    )
}

/// Most threads `check` analyses session exchanges on.
const CHECK_WORKERS: usize = 4;
/// Session rows analysed between two writes of the report (bounds the listings held).
const CHECK_BATCH: usize = 64;

/// One session row's outcome: damaged-line findings, then its analysis (`None`: not a
/// generation exchange, or a row that could not be read) or the error that stops the report.
type RowOut = (Vec<Finding>, anyhow::Result<Option<Row>>);

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

/// Runs `toolscope check`: the report to stdout as it is found.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let out = std::io::BufWriter::new(std::io::stdout().lock());
    let tally = check_into(&args, out)?;
    Ok(ExitCode::from(tally.exit_code()))
}

/// `check`'s report, written as it is found. JSON: the same bytes `serde_json::to_writer_pretty`
/// gives for `{"exchanges": [...], "findings": [...]}` (each entry pretty-printed on its own
/// and indented two levels), then a newline. Text: each exchange's block
/// ([`crate::diagnose::report::text_block`]) with its findings, then the findings tied to no
/// exchange, then the summary line; recorded content passes [`crate::text::visible`] (never
/// an escape sequence on the terminal).
///
/// What comes after the exchanges in the output (JSON's findings, text's loose findings) is
/// held in an unnamed temporary file ([`spill_file`]), not in memory.
pub struct ReportWriter<W: std::io::Write> {
    out: W,
    format: Format,
    tally: Tally,
    /// Entries written after the exchanges, and how many.
    spill: Option<std::io::BufWriter<std::fs::File>>,
    spilled: usize,
    /// Text: the file named by the last block's heading.
    last_file: Option<String>,
}

impl<W: std::io::Write> ReportWriter<W> {
    /// Starts a report on `out` (JSON: writes the opening `{` and `"exchanges": [`).
    pub fn new(mut out: W, format: Format) -> std::io::Result<Self> {
        if format == Format::Json {
            out.write_all(b"{\n  \"exchanges\": [")?;
        }
        Ok(ReportWriter {
            out,
            format,
            tally: Tally::default(),
            spill: None,
            spilled: 0,
            last_file: None,
        })
    }

    /// Writes one listed exchange and its own findings.
    pub fn exchange(
        &mut self,
        e: &ExchangeSummary,
        findings: impl IntoIterator<Item = Finding>,
    ) -> anyhow::Result<()> {
        let first = self.tally.exchanges == 0;
        self.tally.exchanges += 1;
        match self.format {
            Format::Json => {
                self.out.write_all(if first { b"\n" } else { b",\n" })?;
                write_indented(&mut self.out, &serde_json::to_string_pretty(e)?)?;
                for f in findings {
                    self.finding(f)?;
                }
            }
            Format::Text => {
                let (mine, loose): (Vec<Finding>, Vec<Finding>) = findings
                    .into_iter()
                    .partition(|f| f.exchange == Some(e.index));
                for f in &mine {
                    self.tally.count(f);
                }
                let block = crate::diagnose::report::text_block(e, &mine, &mut self.last_file);
                self.out
                    .write_all(crate::text::visible(&block).as_bytes())?;
                for f in loose {
                    self.finding(f)?;
                }
            }
        }
        Ok(())
    }

    /// Writes a finding that belongs to no listed exchange (JSON: every finding goes here,
    /// in order, after the exchanges).
    pub fn finding(&mut self, f: Finding) -> anyhow::Result<()> {
        self.tally.count(&f);
        let spill = match &mut self.spill {
            Some(s) => s,
            None => self.spill.insert(std::io::BufWriter::new(spill_file()?)),
        };
        let first = self.spilled == 0;
        self.spilled += 1;
        match self.format {
            Format::Json => {
                spill.write_all(if first { b"\n" } else { b",\n" })?;
                write_indented(spill, &serde_json::to_string_pretty(&f)?)?;
            }
            Format::Text => {
                let text = crate::diagnose::report::text_finding(&f);
                spill.write_all(crate::text::visible(&text).as_bytes())?;
            }
        }
        Ok(())
    }

    /// Writes what was held back and the closing lines; returns the counts.
    pub fn finish(mut self) -> anyhow::Result<Tally> {
        let held = match self.spill.take() {
            Some(s) => {
                let mut f = s.into_inner().map_err(|e| e.into_error())?;
                std::io::Seek::seek(&mut f, std::io::SeekFrom::Start(0))?;
                Some(f)
            }
            None => None,
        };
        match self.format {
            Format::Json => {
                self.out.write_all(if self.tally.exchanges > 0 {
                    b"\n  ],\n  \"findings\": ["
                } else {
                    b"],\n  \"findings\": ["
                })?;
                if let Some(mut f) = held {
                    std::io::copy(&mut f, &mut self.out)?;
                    self.out.write_all(b"\n  ]\n}\n")?;
                } else {
                    self.out.write_all(b"]\n}\n")?;
                }
            }
            Format::Text => {
                if let Some(mut f) = held {
                    self.out
                        .write_all(crate::diagnose::report::TEXT_LOOSE_HEADING.as_bytes())?;
                    std::io::copy(&mut f, &mut self.out)?;
                    self.out.write_all(b"\n")?;
                }
                self.out.write_all(self.tally.summary_line().as_bytes())?;
            }
        }
        self.out.flush()?;
        Ok(self.tally)
    }
}

/// Writes `pretty` (a pretty-printed JSON value) indented by two levels (4 spaces), as it
/// stands inside `{"key": [ … ]}` in serde_json's pretty output. JSON strings never hold a raw
/// newline (it is escaped), so every newline is a line break of the layout.
fn write_indented(out: &mut impl std::io::Write, pretty: &str) -> std::io::Result<()> {
    let pretty = crate::text::json_visible(pretty);
    out.write_all(b"    ")?;
    for (i, line) in pretty.split('\n').enumerate() {
        if i > 0 {
            out.write_all(b"\n    ")?;
        }
        out.write_all(line.as_bytes())?;
    }
    Ok(())
}

/// An unnamed temporary file (created in the temporary directory and unlinked at once on
/// Unix; removed when closed elsewhere is not guaranteed, so it is removed right away where
/// the platform allows).
fn spill_file() -> anyhow::Result<std::fs::File> {
    let dir = std::env::temp_dir();
    for n in 0..100u32 {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let path = dir.join(format!(
            "toolscope-check-{}-{nanos}-{n}.tmp",
            std::process::id()
        ));
        match std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(f) => {
                let _ = std::fs::remove_file(&path);
                return Ok(f);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(anyhow::anyhow!(
                    "{}: cannot create a temporary file for the report: {e}",
                    dir.display()
                ));
            }
        }
    }
    bail!(
        "{}: cannot create a temporary file for the report",
        dir.display()
    )
}
