//! One analysed exchange: everything toolscope knows about one request/response pair, computed
//! once, read by the inspector's list row and panes and by `toolscope check`. Pure: an
//! [`Exchange`] and its session's header and annotations in, an [`AnalysedExchange`] out.
//!
//! The life cycle, as types (each arrow is one function, each value made once):
//!
//! ```text
//!  Exchange ─────────────┐  a session line, a HAR entry, or check's bare input
//!  + Context             │  (facts::bare_exchange; --tokens as a server-render annotation)
//!  (header, annotations) │
//!        │ stream::decode_exchange
//!        ▼
//!  Reassembled            SSE / NDJSON events, the reassembled message, stream-contract findings
//!        │ facts::assemble  (+ raw output, server render, /props or --template, Ollama render,
//!        ▼                    the caller's vocab render)
//!  ExchangeContext        the rules' input; written by facts.rs only
//!        │ diagnose::check_exchange_traced  (judges; writes nothing back)
//!        ▼
//!  Vec<Finding> + parser traces
//!        │ analyse_with  (+ at Depth::Panes: stream rows, Replay view, tools, schema, renders)
//!        ▼
//!  AnalysedExchange       read by the inspector's panes, `check`'s listing, `export`, `resend`
//! ```
//!
//! Who writes each fact of the rules' input is tabled in [`facts`]: the one decoder
//! ([`crate::stream::decode_exchange`]), the one raw-output lookup
//! ([`crate::stream::raw::raw_output_of`], seam 1 with issue #12), the one server-render
//! lookup ([`server_render`], which the Template pane reads too), the session's `/props` or
//! `check`'s [`Overrides`], and the caller's hook (`check --vocab`). The parser traces the
//! rules judged per chunking are kept for the Replay pane, so a finding's step is the pane's
//! step. At [`Depth::Panes`] only: the tools and schema rows, the local render and its diff.

pub mod facts;
pub mod index;
pub mod replay;
pub mod stream;
pub mod template;
pub mod tools;
pub mod whatif;

use serde_json::Value;

use crate::diagnose::ExchangeContext;
use crate::finding::{Finding, Rule};
use crate::session::{Annotation, Api, Body, Exchange, Header, TokenPiece};
use crate::stream::AssistantMessage;

pub use replay::{ReplayStep, ReplayView, ServerView};
pub use stream::StreamEvent;
pub use template::TemplateView;
pub use tools::{SchemaRow, ToolEntry};

/// Session-level facts an exchange's analysis needs: the session header (`/props`: chat
/// template, BOS token) and the annotations recorded for this exchange (server renders; raw
/// output once issue #12 records it).
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    pub header: &'a Header,
    /// This exchange's annotations, in file order.
    pub annotations: &'a [Annotation],
}

/// How much to compute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Depth {
    /// The findings and the list row (what `check` and the list's counts need): no tools or
    /// schema rows, no local render, no Stream pane rows, no Replay view (its parser traces
    /// are judged by the rules, then dropped).
    Findings,
    /// Everything the panes show.
    Panes,
}

/// Overrides `toolscope check` sets on every exchange (`--template`): the template text and
/// BOS token the rules judge with, instead of the session's `/props` ones; for its bare input,
/// the BOS id of the local vocabulary (`--vocab`, the `--template` GGUF's) that names
/// `--tokens` ids.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// Chat template source text.
    pub template: Option<String>,
    /// BOS token text.
    pub bos_token: Option<String>,
    /// BOS token id.
    pub bos_id: Option<u32>,
}

/// The memo caches a caller keeps across the exchanges it analyses on one thread (every exchange
/// of a session reads the same few templates): Ollama templates parsed and chat templates'
/// marker inventories. Not `Sync`: hold one per worker (`check` keeps one per thread).
#[derive(Debug, Default)]
pub struct Caches {
    /// Ollama Go templates, parsed.
    pub ollama: crate::template::ollama::ParsedTemplates,
    /// Chat templates' marker inventories (`content.protocol_marker`,
    /// `tool_call.hallucinated_result`).
    pub markers: crate::tokens::markers::Inventories,
}

/// llama-server's own render of an exchange's request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerRender {
    /// The prompt text, when known.
    pub prompt: Option<String>,
    /// Its tokenization with pieces (`/tokenize` `with_pieces`), when fetched.
    pub tokens: Option<Vec<TokenPiece>>,
    /// Where it came from: `server /apply-template` or `server __verbose.prompt`.
    pub source: &'static str,
}

/// The server's render of `ex`: the latest `server_render` annotation (`/apply-template` and
/// `/tokenize`, fetched by the recorder), else the `__verbose.prompt` of a non-streamed
/// llama-server `-v` reply (llama.cpp tools/server/server-context.cpp, build 11434). The one
/// lookup: rules (`schema.*`, token rules) and the Template pane read the same prompt.
pub fn server_render(ex: &Exchange, annotations: &[Annotation]) -> Option<ServerRender> {
    let ann = Annotation::latest_server_render(annotations);
    if let Some((Some(prompt), tokens)) = ann {
        return Some(ServerRender {
            prompt: Some(prompt.to_owned()),
            tokens: tokens.map(<[_]>::to_vec),
            source: "server /apply-template",
        });
    }
    let verbose = ex
        .response
        .as_ref()
        .filter(|r| r.chunks.is_none())
        .and_then(|r| r.body.as_ref())
        .and_then(|b| b.json().ok())
        .and_then(|b| match b.pointer("/__verbose/prompt") {
            Some(Value::String(p)) => Some(p.clone()),
            _ => None,
        });
    match (verbose, ann) {
        (Some(p), ann) => Some(ServerRender {
            prompt: Some(p),
            tokens: ann.and_then(|(_, t)| t.map(<[_]>::to_vec)),
            source: "server __verbose.prompt",
        }),
        (None, Some((None, Some(t)))) => Some(ServerRender {
            prompt: None,
            tokens: Some(t.to_vec()),
            source: "server /tokenize",
        }),
        _ => None,
    }
}

pub use crate::stream::raw::RawOutput;

/// `OUTCOME: ERROR` for a partial exchange (`client_disconnected: client closed the
/// connection`), `None` for a complete one. A partial exchange is its own signal (the list's
/// `!`, the Stream pane's first line, `check`'s `partial` field), not a finding: the line is
/// whole, the response was cut.
pub fn partial_note(ex: &Exchange) -> Option<String> {
    ex.is_partial().then(|| {
        let outcome = serde_json::to_value(ex.outcome)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        format!(
            "{outcome}: {}",
            ex.error.as_deref().unwrap_or("no reason recorded")
        )
    })
}

/// One row of the exchanges list.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    /// Exchange id (1-based).
    pub id: u64,
    pub method: String,
    pub path: String,
    /// The exchange's label (`probe:named_tool`, `send`), shown after the path.
    pub label: Option<String>,
    pub model: Option<String>,
    /// HTTP status; `None` when the upstream failed before a status line.
    pub status: Option<u16>,
    /// Tool calls in the reply.
    pub tool_calls: usize,
    /// Rule ids of the exchange's findings (for the count column and `f rule:`).
    pub rules: Vec<Rule>,
    /// Total duration in milliseconds.
    pub duration_ms: Option<f64>,
    pub stream: bool,
    /// Not [`crate::session::Outcome::Complete`]: the client disconnected or the upstream
    /// failed mid-response (its own signal, shown as `!`; not a finding).
    pub partial: bool,
    /// Why the line could not be decoded (the row is then shown as damaged).
    pub error: Option<String>,
    /// True once the exchange has been analysed: `tool_calls` and `rules` are then final. A
    /// [`quick_summary`] row (shown while the background analysis runs) has them empty.
    pub analyzed: bool,
}

/// The list row from the request and response heads only (no stream decode, no findings):
/// what the list shows at once while the background analysis runs. The model comes from the
/// request or a non-stream response body (a stream's model is filled in later).
pub fn quick_summary(ex: &Exchange) -> Summary {
    #[derive(serde::Deserialize)]
    struct Model {
        model: Option<String>,
    }
    let model_in = |b: &crate::session::Body| {
        serde_json::from_str::<Model>(&b.to_text())
            .ok()
            .and_then(|m| m.model)
    };
    Summary {
        id: ex.id,
        method: ex.request.method.clone(),
        path: ex.request.path.clone(),
        label: ex.label.clone(),
        model: model_in(&ex.request.body).or_else(|| {
            ex.response
                .as_ref()
                .and_then(|r| r.body.as_ref())
                .and_then(model_in)
        }),
        status: ex.response.as_ref().map(|r| r.status),
        duration_ms: ex.timings.total_us.map(|us| us as f64 / 1000.0),
        stream: ex.is_stream(),
        partial: ex.is_partial(),
        ..Default::default()
    }
}

/// The [`crate::session::ReadWarning`] for exchange line `line` that could not be decoded
/// (`error` as the indexed reader gives it: `line N column C: …`), for
/// [`crate::diagnose::input::damaged_line`].
pub fn load_error_warning(line: usize, error: &str) -> crate::session::ReadWarning {
    let rest = error
        .strip_prefix(&format!("line {line}"))
        .unwrap_or(error)
        .trim_start();
    let (column, message) = match rest
        .strip_prefix("column ")
        .and_then(|r| r.split_once(": "))
    {
        Some((c, m)) if c.parse::<usize>().is_ok() => (c.parse().ok(), m.to_owned()),
        _ => (None, rest.trim_start_matches(": ").to_owned()),
    };
    crate::session::ReadWarning {
        line,
        column,
        message,
    }
}

/// Row for an exchange line that could not be decoded (`error`: `line N column C: …`). Its
/// finding is [`crate::diagnose::input::damaged_line`]'s `session.damaged`.
pub fn damaged_summary(id: Option<u64>, error: String) -> Summary {
    Summary {
        id: id.unwrap_or(0),
        method: "?".into(),
        path: "(damaged line)".into(),
        error: Some(error),
        rules: vec![Rule::SessionDamaged],
        analyzed: true,
        ..Default::default()
    }
}

/// Everything toolscope knows about one exchange (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct AnalysedExchange {
    /// The list row (final: `analyzed` is true).
    pub summary: Summary,
    pub exchange: Exchange,
    pub api: Option<Api>,
    /// The request body as JSON.
    pub request: Option<Value>,
    /// The reply, reassembled (stream or JSON body).
    pub message: Option<AssistantMessage>,
    /// The model's raw output, or why it is missing.
    pub raw: Option<RawOutput>,
    /// The server's render of the request, when recorded.
    pub server_render: Option<ServerRender>,
    /// The generation prompt llama.cpp parses in front of the raw text's generated part, when
    /// known ([`template::llama_prompt`]): what the Replay pane's engines view gives llama.cpp.
    pub llama_prompt: Option<crate::parser::engines::LlamaPrompt>,
    /// Every finding of the exchange, in diagnose's pipeline order.
    pub findings: Vec<Finding>,
    /// SSE events with what each added (empty for a non-streamed body).
    pub events: Vec<StreamEvent>,
    /// Stream faults that are not rules (missing `[DONE]`, events after the end, …).
    pub problems: Vec<crate::stream::reassemble::StreamProblem>,
    /// The Replay pane's model (parser traces kept at [`Depth::Panes`] only).
    pub replay: ReplayView,
    /// [`Depth::Panes`] only: the request's tools.
    pub tools: Vec<ToolEntry>,
    /// [`Depth::Panes`] only: every tool parameter, flattened, with what never reached the prompt.
    pub schema: Vec<SchemaRow>,
    /// [`Depth::Panes`] only: server and local renders.
    pub template: TemplateView,
}

/// Analyses one exchange ([`analyse_with`] without overrides or context hook, with caches of
/// its own: a caller that analyses many exchanges on one thread passes one [`Caches`] to
/// [`analyse_with`] instead).
pub fn analyse(ex: Exchange, ctx: Context<'_>, depth: Depth) -> AnalysedExchange {
    analyse_with(
        ex,
        ctx,
        depth,
        &Overrides::default(),
        &Caches::default(),
        |_| Ok(None),
    )
    .unwrap_or_else(|_: std::convert::Infallible| unreachable!())
}

/// Analyses one exchange. `hook` sees the rules' context once the session facts are set and
/// returns its `vocab_render` fact (`check --vocab` renders and tokenizes there; that IO stays
/// in the CLI). Errors: the hook's.
pub fn analyse_with<E>(
    ex: Exchange,
    ctx: Context<'_>,
    depth: Depth,
    overrides: &Overrides,
    caches: &Caches,
    hook: impl FnOnce(&ExchangeContext) -> Result<Option<crate::diagnose::VocabRender>, E>,
) -> Result<AnalysedExchange, E> {
    let api = ex.api();
    let facts::Assembled {
        mut cx,
        mut decoded,
        raw,
        server_render: render,
        ollama,
    } = facts::assemble(&ex, ctx, overrides, caches, hook)?;
    let chat = api.is_generation();
    let (mut findings, traces) = if chat {
        // Findings only: the traces are judged, then dropped, so none keeps its events.
        let record: &crate::diagnose::rules::replay::Recorder = match depth {
            Depth::Panes => &crate::diagnose::rules::replay::real_parser,
            Depth::Findings => &crate::diagnose::rules::replay::lean_parser,
        };
        crate::diagnose::check_exchange_traced(&cx, record)
    } else {
        (Vec::new(), None)
    };
    // The session's own template over the render budget (issue #27): a finding, never an
    // abort and never silence
    if let Some((origin, Err(e))) = &ollama
        && e.contains(crate::budget::MARK)
    {
        findings.push(
            crate::finding::Finding::new(
                crate::finding::Rule::TemplateRenderError,
                format!("the Ollama template ({origin}) stopped rendering this request: {e}"),
                "the template in the session's /api/show annotation needs more than the render budget (4,000,000 fuel, 256 MB): it cannot be what the server rendered; check where the session came from",
            )
            .in_exchange(Some(ex.id))
            .with_evidence(crate::finding::Evidence {
                pane: Some(crate::finding::Pane::Template),
                ..Default::default()
            }),
        );
    }
    // A body read as JSON above is readable, unless it is not UTF-8 (read lossily there).
    if chat && (cx.request.is_none() || matches!(ex.request.body, Body::Base64 { .. })) {
        findings.extend(crate::diagnose::input::unreadable_request(&ex));
    }
    let (events, replay) = match (depth, decoded.as_mut()) {
        (Depth::Panes, Some(d)) => {
            let events = stream::rows(&ex, d);
            let replay = ReplayView::new(traces, Some(d), cx.message.as_ref(), events.len());
            (events, replay)
        }
        (Depth::Panes, None) => (
            Vec::new(),
            ReplayView::new(traces, None, cx.message.as_ref(), 0),
        ),
        (Depth::Findings, _) => Default::default(),
    };
    let problems = decoded
        .as_mut()
        .map(|d| std::mem::take(&mut d.problems))
        .unwrap_or_default();
    let message = cx.message.take();
    let request = cx.request.take();
    let llama_prompt = cx.llama_prompt.take();
    let mut quick = quick_summary(&ex);
    let mut a = AnalysedExchange {
        summary: Summary {
            // the request's model, else the response body's ([`quick_summary`], as
            // `Exchange::model`), else the reassembled reply's
            model: quick
                .model
                .take()
                .or_else(|| message.as_ref().and_then(|m| m.model.clone())),
            tool_calls: message.as_ref().map_or(0, |m| m.tool_calls.len()),
            rules: findings.iter().map(|f| f.rule).collect(),
            analyzed: true,
            ..quick
        },
        api: Some(api),
        raw: chat.then_some(raw),
        server_render: render,
        llama_prompt,
        findings,
        events,
        problems,
        replay,
        message,
        ..Default::default()
    };
    if depth == Depth::Panes {
        if api == Api::Responses {
            // the Tools pane lists every tool sent (dropped ones marked); the Schema pane the
            // function tools the model saw, from the chat request llama-server converts it to
            a.tools = tools::responses_entries(request.as_ref());
            let chat = request
                .as_ref()
                .and_then(|r| crate::template::responses::responses_to_chat(r).ok())
                .map(|c| c.body);
            a.schema = tools::schema_rows(chat.as_ref(), &a.findings);
        } else {
            a.tools = tools::entries(request.as_ref());
            a.schema = tools::schema_rows(request.as_ref(), &a.findings);
        }
        a.template =
            template::template_view(&ex, request.as_ref(), ctx.header, a.server_render.as_ref());
        if let Some((origin, out)) = ollama {
            a.template.local_source = Some(origin);
            a.template.local = Some(out);
        }
    }
    a.request = request;
    a.exchange = ex;
    Ok(a)
}

#[cfg(test)]
mod responses_tests {
    use super::*;
    use crate::session::{Body, Chunk, Request, Response};

    /// One recorded `/v1/responses` exchange (the streamed weather call llama-server b11434
    /// answered through the openai SDK, tests/data/responses/weather_call.sse), with Codex-like
    /// `custom` and `web_search` tools added to the request: every pane reads it.
    #[test]
    fn a_responses_exchange_in_every_pane() {
        let mut req: Value = serde_json::from_str(include_str!(
            "../../tests/data/responses/weather_call.request.json"
        ))
        .unwrap();
        req["tools"]
            .as_array_mut()
            .unwrap()
            .extend([
                serde_json::json!({"type": "custom", "name": "apply_patch", "description": "Apply a patch"}),
                serde_json::json!({"type": "web_search"}),
            ]);
        let sse = include_str!("../../tests/data/responses/weather_call.sse");
        let ex = Exchange {
            id: 1,
            started: "2026-12-02T01:44:00.000000Z".into(),
            request: Request {
                method: "POST".into(),
                path: "/v1/responses".into(),
                body: Body::from_bytes(req.to_string().as_bytes()),
                ..Default::default()
            },
            response: Some(Response {
                status: 200,
                headers: vec![("content-type".into(), "text/event-stream".into())],
                body: None,
                chunks: Some(vec![Chunk {
                    t_us: 10,
                    data: Body::from_bytes(sse.as_bytes()),
                }]),
            }),
            ..Default::default()
        };
        let header = Header::default();
        let a = analyse(
            ex,
            Context {
                header: &header,
                annotations: &[],
            },
            Depth::Panes,
        );
        assert_eq!(a.api, Some(Api::Responses));
        // Tools: all four, the two the server drops marked
        let names: Vec<&str> = a.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            names,
            ["get_weather", "get_time", "apply_patch", "(web_search)"]
        );
        assert!(a.tools[0].dropped.is_none());
        assert!(
            a.tools[2]
                .dropped
                .as_deref()
                .is_some_and(|d| d.contains("'custom' skipped"))
        );
        // Schema: the converted request's function tools only
        let schema_tools: std::collections::BTreeSet<&str> =
            a.schema.iter().map(|r| r.tool.as_str()).collect();
        assert_eq!(
            schema_tools.into_iter().collect::<Vec<_>>(),
            ["get_time", "get_weather"]
        );
        // Findings: the two dropped tools, nothing else
        let rules: Vec<&str> = a.findings.iter().map(|f| f.rule.id()).collect();
        assert_eq!(rules, ["input.tool_dropped", "input.tool_dropped"]);
        assert_eq!(a.summary.tool_calls, 1);
        // Stream: what each event adds
        let m: Vec<&str> = a.events.iter().map(|e| e.meaning.as_str()).collect();
        assert_eq!(m[0], "created");
        assert_eq!(
            m[2],
            "call[0] start get_weather · item #0 function_call added"
        );
        assert!(
            m.iter().any(|x| x.starts_with("call[0] arguments += ")),
            "{m:?}"
        );
        assert!(
            m.contains(&"item #0 function_call done (= deltas)"),
            "{m:?}"
        );
        assert_eq!(
            *m.last().unwrap(),
            "usage · response.completed · finish completed"
        );
    }
}
