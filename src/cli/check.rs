//! `toolscope check`: headless diagnosis of sessions, HAR files, or a bare request/response
//! pair. Glue only: loads files (and a template URL), builds
//! [`crate::diagnose::ExchangeContext`]s, runs [`crate::diagnose::check_exchange`], prints.
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
use crate::diagnose::{ExchangeContext, VocabRender, check_exchange, load, request};
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
    engine: Option<crate::template::Engine>,
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
                    if e.downcast_ref::<crate::template::RenderError>()
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
    let tpl_text = source.as_ref().map(|s| s.template.clone());
    let tpl_bos = source.as_ref().and_then(|s| s.bos_token.clone());
    let add = |report: &mut ReportWriter<W>,
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
            cx.vocab_render = r.render(cx, None, file)?;
        }
        let findings = check_exchange(cx).into_iter().map(|f| in_file(f, file));
        if listed {
            report.exchange(&ExchangeSummary::from_context(cx, fallback, file), findings)?;
        } else {
            for f in findings {
                report.finding(f)?;
            }
        }
        Ok(())
    };

    let overrides = crate::analysis::Overrides {
        template: tpl_text.clone(),
        bos_token: tpl_bos.clone(),
    };
    // One exchange at a time per worker: analysed, listed, dropped. Memory is bounded by the
    // largest exchanges in flight and one batch of listings, not the file or the report.
    let run = |ex: crate::session::Exchange,
               ctx: crate::analysis::Context<'_>,
               session: Option<&TemplateSource>,
               file: &str|
     -> anyhow::Result<Option<(ExchangeSummary, Vec<Finding>)>> {
        if !ex.api().is_generation() {
            return Ok(None);
        }
        let a = crate::analysis::analyse_with(
            ex,
            ctx,
            crate::analysis::Depth::Findings,
            &overrides,
            |cx| -> anyhow::Result<()> {
                if let Some(r) = &renderer {
                    cx.vocab_render = r.render(cx, session, file)?;
                }
                Ok(())
            },
        )?;
        let summary = summary_of(&a, file);
        let findings = a.findings.into_iter().map(|f| in_file(f, file)).collect();
        Ok(Some((summary, findings)))
    };
    // Exchanges are analysed on every core (at most [`CHECK_WORKERS`]), a batch of
    // [`CHECK_BATCH`] rows at a time, and written in row order: the report is the same bytes.
    // With `--vocab` the renderer's notes go to stderr as they happen, so one worker keeps
    // their order.
    let workers = if renderer.is_some() {
        1
    } else {
        std::thread::available_parallelism().map_or(1, |n| n.get().min(CHECK_WORKERS))
    };
    // Every input is opened and validated before the report starts: unusable input (exit 2)
    // leaves no half-written report. Session files are only indexed here (line offsets).
    let opened = args
        .files
        .iter()
        .map(|path| -> anyhow::Result<(&Path, SessionSource)> {
            // a HAR file is imported whole (small next to recorded sessions); a session file
            // is the inspector's indexed reading: each exchange line read and decoded on its
            // own, its annotations read back by the offsets the index kept
            Ok(if is_har(path) {
                (path, SessionSource::from_session(load_har(path)?))
            } else {
                (path, SessionSource::index_file(path, &mut |_, _| {})?)
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;

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
        // an Ollama stream is NDJSON: one JSON object per line
        let ndjson = body
            .lines()
            .any(|l| serde_json::from_str::<serde_json::Value>(l).is_ok_and(|v| v.is_object()));
        if !events
            .iter()
            .any(|e| serde_json::from_str::<serde_json::Value>(&e.data).is_ok())
            && !ndjson
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
    let have_response = response.is_some() || sse.is_some();
    let bare = if have_response || (request.is_some() && args.template.is_none()) {
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
        Bare::Pair(cx, file)
    } else if let Some(req) = &request {
        // Pre-flight: a request and a template, no response.
        let mut cx = ExchangeContext::new(api);
        cx.request = Some(req.clone());
        cx.server_tokens = tokens.clone();
        cx.bos_id = cx.bos_id.or(tokens_bos);
        Bare::Preflight(cx, display(args.request.as_deref()), req.clone())
    } else if let Some(toks) = tokens {
        let mut cx = ExchangeContext::new(api);
        cx.server_tokens = Some(toks);
        cx.bos_id = cx.bos_id.or(tokens_bos);
        Bare::Tokens(cx, display(args.tokens.as_deref()))
    } else if args.files.is_empty() {
        bail!(
            "nothing to check: give session/HAR files, --request/--response, --response-sse or --tokens"
        );
    } else {
        Bare::None
    };

    let mut report = ReportWriter::new(w, args.format)?;
    for (path, src) in opened {
        let file = path.display().to_string();
        // the session's `/props` template, for `--vocab` without `--template`
        let session_template = src
            .header
            .props
            .as_ref()
            .filter(|_| renderer.is_some())
            .and_then(|p| TemplateSource::from_props(p).ok())
            .map(|mut t| {
                // errors name the template: `the session's /props chat_template:LINE:COL`
                t.origin = format!("the session's {} chat_template", t.origin);
                t
            });
        for w in &src.warnings {
            report.finding(in_file(load::damaged_line(&file, w), &file))?;
        }
        // One row: its damaged-line findings, then its listing (or the error that stops the
        // report, after what comes before it is written).
        let one = |row: usize| -> RowOut {
            match src.load(row) {
                Ok(ex) => {
                    let (anns, damaged) = src.read_annotations(ex.id);
                    let damaged = damaged
                        .iter()
                        .map(|w| in_file(load::damaged_line(&file, w), &file))
                        .collect();
                    let ctx = crate::analysis::index::context(&src, &anns);
                    (damaged, run(ex, ctx, session_template.as_ref(), &file))
                }
                Err(e) => {
                    let w = crate::analysis::load_error_warning(src.rows[row].line, &e);
                    (
                        vec![in_file(load::damaged_line(&file, &w), &file)],
                        Ok(None),
                    )
                }
            }
        };
        let mut start = 0;
        while start < src.len() {
            let end = (start + CHECK_BATCH).min(src.len());
            let outs: Vec<RowOut> = if workers > 1 {
                let mut rows: Vec<(usize, RowOut)> = std::thread::scope(|s| {
                    let handles: Vec<_> = (0..workers)
                        .map(|k| {
                            let one = &one;
                            s.spawn(move || {
                                (start + k..end)
                                    .step_by(workers)
                                    .map(|row| (row, one(row)))
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
                rows.sort_by_key(|(row, _)| *row);
                rows.into_iter().map(|(_, out)| out).collect()
            } else {
                (start..end).map(&one).collect()
            };
            for (damaged, listed) in outs {
                for f in damaged {
                    report.finding(f)?;
                }
                if let Some((summary, findings)) = listed? {
                    report.exchange(&summary, findings)?;
                }
            }
            start = end;
        }
    }

    match bare {
        Bare::Pair(mut cx, file) => add(&mut report, &mut cx, 1, &file, true)?,
        Bare::Preflight(mut cx, file, req) => {
            add(&mut report, &mut cx, 1, &file, false)?;
            for f in preflight(tpl_text.as_deref(), &req) {
                report.finding(in_file(f, &file))?;
            }
        }
        Bare::Tokens(mut cx, file) => add(&mut report, &mut cx, 0, &file, false)?,
        Bare::None => {}
    }
    report.finish()
}

/// The bare pair, pre-flight request or token list, validated before the report starts.
enum Bare {
    /// `--request`/`--response`/`--response-sse`: one listed exchange (file named).
    Pair(ExchangeContext, String),
    /// `--request` with `--template` and no response: token rules and the pre-flight lint.
    Preflight(ExchangeContext, String, Value),
    /// `--tokens` alone.
    Tokens(ExchangeContext, String),
    /// Session/HAR files only.
    None,
}

/// Most threads `check` analyses session exchanges on.
const CHECK_WORKERS: usize = 4;
/// Session rows analysed between two writes of the report (bounds the listings held).
const CHECK_BATCH: usize = 64;

/// One session row's outcome: damaged-line findings, then its listing (`None`: not a
/// generation exchange, or a row that could not be read) or the error that stops the report.
type RowOut = (
    Vec<Finding>,
    anyhow::Result<Option<(ExchangeSummary, Vec<Finding>)>>,
);

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
