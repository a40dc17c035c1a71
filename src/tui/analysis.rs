//! The analysis view-model: everything the panes show about one exchange, computed off the UI
//! task from the session data and the analysis modules. Panes only read these structs, so
//! wiring a new analysis in changes this file, not the views.

use serde_json::Value;

use crate::finding::{Evidence, Finding, Pane, Rule};
use crate::session::{Api, Exchange, Header, TokenPiece};
use crate::stream::message::{AssistantMessage, CallRecord, from_response_json};

/// One row of the exchanges list. Cheap to compute (one exchange decode), kept for every row.
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
    /// Not [`crate::session::Outcome::Complete`].
    pub partial: bool,
    /// Why the line could not be decoded (the row is then shown as damaged).
    pub error: Option<String>,
    /// True once the exchange has been analysed ([`summarize_in`]): `tool_calls` and `rules`
    /// are then final. A [`quick_summary`] row (shown while the background analysis runs)
    /// has them empty.
    pub analyzed: bool,
}

/// One SSE event of a recorded stream (same shape as `stream::sse::SseEvent`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StreamEvent {
    /// 0-based event number.
    pub index: usize,
    /// `event:` field.
    pub event: Option<String>,
    /// `data:` lines joined with `\n`.
    pub data: String,
    /// Size of the event block on the wire, bytes.
    pub size: usize,
    /// Index of the chunk in which the event completed.
    pub chunk: usize,
    /// Receive time of that chunk, microseconds from the request start.
    pub t_us: Option<u64>,
}

/// The reply as the server had delivered it after some number of events (Replay's right side).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ServerView {
    pub content: String,
    pub reasoning: String,
    pub calls: Vec<CallRecord>,
    pub finish_reason: Option<String>,
}

/// How the raw text is cut into chunks for the replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chunking {
    /// As the server streamed it (one chunk per SSE delta).
    Recorded,
    /// One chunk per sampled token piece, when the stream lists them (OpenAI `logprobs`:
    /// `choices[0].logprobs.content[].token`; llama-server `/completion` with `n_probs`:
    /// `completion_probabilities[].token`) and they spell the raw text exactly.
    PerPiece,
    /// One chunk per character.
    PerChar,
    /// The whole text at once.
    Whole,
}

impl Chunking {
    /// All chunkings in selector order.
    pub const ALL: [Chunking; 4] = [
        Chunking::Recorded,
        Chunking::PerPiece,
        Chunking::PerChar,
        Chunking::Whole,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Chunking::Recorded => "recorded chunks",
            Chunking::PerPiece => "per token piece",
            Chunking::PerChar => "per character",
            Chunking::Whole => "whole text",
        }
    }
}

/// One replay step: a chunk fed to the parser and what it made of it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ReplayStep {
    /// The chunk fed at this step.
    pub chunk: String,
    /// Byte offset in the raw text after this chunk.
    pub end: usize,
    /// Parser state name after the chunk.
    pub state: String,
    /// Text the parser holds back (a possible marker prefix).
    pub buffer: String,
    /// Events emitted at this step, one line each.
    pub events: Vec<String>,
    /// SSE events the server had sent when it had produced the same text (for the server view).
    pub server_events: usize,
}

/// The Replay pane's model.
#[derive(Debug, Clone, Default)]
pub struct ReplayView {
    /// toolscope's parser trace per chunking (`parser::trace::Trace`); `None` when the text is
    /// too long to trace per character (> 64 KiB).
    pub traces: Vec<Option<std::sync::Arc<crate::parser::trace::Trace>>>,
    /// Syntax the parser used (detected from the server's template, else from the text).
    pub syntax: Option<String>,
    /// The raw generated text.
    pub raw: String,
    /// Where `raw` came from (`__verbose.content`, `stream deltas`, `message`).
    pub raw_source: String,
    /// Chunk end offsets (bytes into `raw`) per chunking, in [`Chunking::ALL`] order. Steps are
    /// materialized on demand ([`ReplayView::step`]) so per-character replays of long texts
    /// stay small.
    pub bounds: Vec<Vec<usize>>,
    /// Recorded chunks: (end offset in `raw`, SSE events consumed by then).
    pub recorded_events: Vec<(usize, usize)>,
    /// Number of SSE events.
    pub events: usize,
    /// The server's whole reply (after every event).
    pub server_final: ServerView,
    /// Lengths of the server's reply after `n` events, `n` = 0..=events (see
    /// [`ServerMark::view`]); lengths, not copies, so long streams stay small.
    pub server_marks: Vec<ServerMark>,
}

impl ReplayView {
    /// Steps in chunking `c` (index into [`Chunking::ALL`]).
    pub fn len(&self, c: usize) -> usize {
        let t = self
            .traces
            .get(c)
            .and_then(|t| t.as_ref())
            .map_or(0, |t| t.len());
        self.bounds.get(c).map_or(0, Vec::len).max(t)
    }

    /// End offset of step `i` in chunking `c`.
    pub fn end(&self, c: usize, i: usize) -> Option<usize> {
        self.bounds.get(c)?.get(i).copied()
    }

    /// The first step of chunking `c` whose end reaches `end`.
    pub fn find(&self, c: usize, end: usize) -> usize {
        let b = self.bounds.get(c).map(Vec::as_slice).unwrap_or(&[]);
        b.partition_point(|&e| e < end)
            .min(b.len().saturating_sub(1))
    }

    /// Step `i` of chunking `c`: its chunk, the parser's state after it, and the server events
    /// sent by the time the server had produced the same text.
    pub fn step(&self, c: usize, i: usize) -> Option<ReplayStep> {
        if i >= self.len(c) {
            return None;
        }
        let b = self.bounds.get(c)?;
        let end = b.get(i).copied().unwrap_or(self.raw.len());
        let start = if i == 0 {
            0
        } else {
            b.get(i - 1).copied().unwrap_or(self.raw.len())
        };
        let chunk = self.raw.get(start..end).unwrap_or("").to_owned();
        let ev = self
            .recorded_events
            .iter()
            .find(|(e, _)| *e >= end)
            .map_or(self.events, |(_, n)| *n);
        let Some(trace) = self.traces.get(c).and_then(|t| t.as_ref()) else {
            return Some(ReplayStep {
                events: vec![format!("text {chunk:?}")],
                state: "(not traced: text too long)".into(),
                buffer: String::new(),
                server_events: ev,
                end,
                chunk,
            });
        };
        let v = trace.state_at(i);
        let mut events: Vec<String> = v
            .events
            .iter()
            .map(|e| short(&format!("{e:?}"), 160))
            .collect();
        for call in v.tool_calls {
            events.push(format!(
                "→ call {}({})",
                call.name,
                short(&call.arguments.to_string(), 120)
            ));
        }
        for m in v.malformed {
            events.push(format!("✗ malformed {}: {}", m.syntax, m.message));
        }
        let state = match v.state.syntax {
            Some(sx) => format!("{:?} ({})", v.state.kind, sx.name()),
            None => format!("{:?}", v.state.kind),
        };
        Some(ReplayStep {
            events,
            state,
            buffer: v.held.to_owned(),
            server_events: ev,
            end,
            chunk: if v.chunk.is_empty() && i >= b.len() {
                "(finish)".into()
            } else {
                chunk
            },
        })
    }
}

fn short(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_owned()
    } else {
        s.chars().take(n).collect::<String>() + "…"
    }
}

/// The server's reply after some events, as prefix lengths of the final [`ServerView`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ServerMark {
    /// Bytes of `content` and `reasoning` delivered.
    pub content: usize,
    pub reasoning: usize,
    /// Per call delivered so far: bytes of `name` and `arguments`.
    pub calls: Vec<(usize, usize)>,
    pub finish_reason: Option<String>,
}

impl ServerMark {
    /// The reply as it stood at this mark.
    pub fn view(&self, full: &ServerView) -> ServerView {
        ServerView {
            content: full.content.get(..self.content).unwrap_or("").to_owned(),
            reasoning: full
                .reasoning
                .get(..self.reasoning)
                .unwrap_or("")
                .to_owned(),
            calls: self
                .calls
                .iter()
                .zip(&full.calls)
                .map(|(&(n, a), c)| CallRecord {
                    name: c.name.get(..n).unwrap_or("").to_owned(),
                    arguments: c.arguments.get(..a).unwrap_or("").to_owned(),
                    ..c.clone()
                })
                .collect(),
            finish_reason: self.finish_reason.clone(),
        }
    }
}

/// One tool of the request.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolEntry {
    pub name: String,
    pub description: String,
    /// Parameter count (top-level properties).
    pub params: usize,
    /// The tool as sent, pretty-printed JSON.
    pub json: String,
    /// JSON Pointer of the tool in the request body (`/tools/0`).
    pub pointer: String,
}

/// One parameter row of the Schema pane.
#[derive(Debug, Clone, PartialEq)]
pub struct SchemaRow {
    pub tool: String,
    /// JSON Pointer within the tool's parameters, e.g. `/properties/quantity`.
    pub pointer: String,
    /// The original schema fragment, compact.
    pub original: String,
    /// The flattened fragment, when flattening is available.
    pub flattened: Option<String>,
    /// What flattening changed and lost.
    pub change: Option<String>,
    /// True when a fact of this parameter never reached the prompt.
    pub lost_in_prompt: bool,
}

/// The Template pane's model.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TemplateView {
    /// toolscope's own render of the request ([`crate::diff::adapt::render`]: the session's
    /// `/props` `chat_template`, the request's messages and tools, `now` = the exchange's start
    /// time), or why it failed (`None`: the header has no `/props` template).
    pub local: Option<Result<String, String>>,
    /// Where the local render's template came from (`/props chat_template, MODEL FILE`).
    pub local_source: Option<String>,
    /// Local render (left, A) against the server's (right, B), line by line with token
    /// changes inside ([`crate::diff::side_by_side`]); `None` unless both renders exist.
    pub diff: Option<Vec<crate::diff::Row>>,
    /// llama-server's render (`/apply-template` annotation or `__verbose.prompt`).
    pub server: Option<String>,
    /// Where `server` came from.
    pub server_source: Option<String>,
    /// The server's tokenization of its render.
    pub tokens: Option<Vec<TokenPiece>>,
    /// Marker strings that are single special tokens (highlighted).
    pub specials: Vec<String>,
    /// Marker-looking strings (`<tool_call>`) that the vocabulary splits into several pieces.
    pub pseudo_specials: Vec<String>,
    /// BOS token text (props `bos_token`).
    pub bos_token: Option<String>,
    /// Number of BOS tokens at the start of the tokenization (2+ is a doubled BOS).
    pub bos_count: Option<usize>,
}

/// Everything the panes show about one exchange.
#[derive(Debug, Clone, Default)]
pub struct ExchangeAnalysis {
    pub row: usize,
    pub summary: Summary,
    pub exchange: Exchange,
    pub api: Option<Api>,
    /// The request body as JSON.
    pub request: Option<Value>,
    pub tools: Vec<ToolEntry>,
    pub schema: Vec<SchemaRow>,
    pub template: TemplateView,
    pub events: Vec<StreamEvent>,
    /// The reply, reassembled.
    pub message: Option<AssistantMessage>,
    pub replay: ReplayView,
    pub findings: Vec<Finding>,
}

/// Session-level context an analysis needs.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    pub header: &'a Header,
    /// llama-server's render of this exchange, if annotated.
    pub server_render: Option<(Option<&'a str>, Option<&'a [TokenPiece]>)>,
}

/// The list row of an exchange. Errors from decoding are shown in the row, not raised.
pub fn summarize(ex: &Exchange) -> Summary {
    summarize_in(ex, None)
}

/// The list row from the request and response heads only (no stream decode, no findings):
/// what the list shows at once while [`summarize_in`] runs in the background. The model comes
/// from the request or a non-stream response body (a stream's model is filled in later).
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

/// [`summarize`] with the session context, so the findings column counts diagnose's findings.
pub fn summarize_in(ex: &Exchange, ctx: Option<Context<'_>>) -> Summary {
    let message = reply(ex);
    let mut findings = exchange_findings(ex, message.as_ref().map(|(m, _)| m));
    if let Some(ctx) = ctx {
        findings.extend(diagnose(ex, ctx));
    }
    Summary {
        id: ex.id,
        method: ex.request.method.clone(),
        path: ex.request.path.clone(),
        label: ex.label.clone(),
        model: ex
            .model()
            .or_else(|| message.as_ref().and_then(|(m, _)| m.model.clone())),
        status: ex.response.as_ref().map(|r| r.status),
        tool_calls: message.as_ref().map_or(0, |(m, _)| m.tool_calls.len()),
        rules: findings.iter().map(|f| f.rule).collect(),
        duration_ms: ex.timings.total_us.map(|us| us as f64 / 1000.0),
        stream: ex.is_stream(),
        partial: ex.is_partial(),
        error: None,
        analyzed: true,
    }
}

/// Row for an exchange line that could not be decoded.
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

/// Full analysis of one exchange (runs off the UI task).
pub fn analyze(row: usize, ex: Exchange, ctx: Context<'_>) -> ExchangeAnalysis {
    let request = ex.request_json();
    let api = Some(ex.api());
    let decoded = crate::stream::decode_exchange(&ex);
    let events = match &decoded {
        Some(d) if !d.events.is_empty() => events_from(&ex, &d.events),
        _ if ex.is_stream() => decode_events(&ex),
        _ => Vec::new(),
    };
    let message = reply(&ex);
    let server = server_views(api, &events);
    let server = &server;
    let tools = tool_entries(request.as_ref());
    let mut schema = schema_rows(request.as_ref());
    let template = template_view(&ex, request.as_ref(), ctx);
    let mut replay = replay_view(&ex, &events, server, message.as_ref().map(|(m, _)| m));
    trace_replay(&mut replay, ctx.header, request.as_ref());
    let mut findings = exchange_findings(&ex, message.as_ref().map(|(m, _)| m));
    findings.extend(diagnose(&ex, ctx));
    // Schema: flattening and facts lost between the tools and the server's prompt.
    if let Some(tools) = request.as_ref().and_then(|r| r.get("tools")) {
        let loss = template
            .server
            .as_deref()
            .map(|p| crate::schema::loss::schema_loss(tools, p))
            .unwrap_or_default();
        // The findings themselves come from diagnose (rules::schema::loss), like `check`'s.
        apply_schema(&mut schema, tools, &loss);
    }
    let mut summary = summarize(&ex);
    summary.rules = findings.iter().map(|f| f.rule).collect();
    ExchangeAnalysis {
        row,
        summary,
        api,
        request,
        tools,
        schema,
        template,
        events,
        message: message.map(|(m, _)| m),
        replay,
        findings,
        exchange: ex,
    }
}

/// Runs toolscope's parser over the raw text for each chunking (`parser::trace::Trace`).
fn trace_replay(r: &mut ReplayView, header: &Header, request: Option<&Value>) {
    use crate::parser::Syntax;
    let template = header
        .props
        .as_ref()
        .and_then(|p| p.get("chat_template"))
        .and_then(Value::as_str);
    let syntax = template
        .and_then(Syntax::detect_from_template)
        .or_else(|| Syntax::detect_from_text(&r.raw));
    r.syntax = syntax.map(|s| s.name().to_owned());
    let tools = request.and_then(|q| q.get("tools"));
    r.traces = r
        .bounds
        .iter()
        .map(|b| {
            if b.len() > 64 * 1024 {
                return None;
            }
            let mut start = 0;
            let chunks: Vec<String> = b
                .iter()
                .map(|&e| {
                    let c = r.raw.get(start..e).unwrap_or("").to_owned();
                    start = e;
                    c
                })
                .collect();
            Some(std::sync::Arc::new(crate::parser::trace::Trace::record(
                &chunks, syntax, tools,
            )))
        })
        .collect();
}

/// Maps the stream module's SSE events to the Stream pane's rows (size = bytes up to the next
/// event).
fn events_from(ex: &Exchange, evs: &[crate::stream::SseEvent]) -> Vec<StreamEvent> {
    let total = ex.response_bytes().len();
    evs.iter()
        .enumerate()
        .map(|(i, e)| StreamEvent {
            index: e.index,
            event: e.event.clone(),
            data: e.data.clone(),
            size: evs
                .get(i + 1)
                .map_or(total, |n| n.offset)
                .saturating_sub(e.offset),
            chunk: e.chunk,
            t_us: e.t_us,
        })
        .collect()
}

/// diagnose's findings for a chat exchange (with the server render and `/props` template).
fn diagnose(ex: &Exchange, ctx: Context<'_>) -> Vec<Finding> {
    if !matches!(ex.api(), Api::Openai | Api::Anthropic) {
        return Vec::new();
    }
    let mut cx = crate::diagnose::load::exchange_context(ex);
    if let Some((prompt, tokens)) = ctx.server_render {
        cx.server_prompt = prompt.map(str::to_owned);
        cx.server_tokens = tokens.map(<[_]>::to_vec);
    }
    if let Some(p) = ctx.header.props.as_ref() {
        cx.template = p
            .get("chat_template")
            .and_then(Value::as_str)
            .map(str::to_owned);
        cx.bos_token = p
            .get("bos_token")
            .and_then(Value::as_str)
            .map(str::to_owned);
    }
    crate::diagnose::check_exchange(&cx)
}

/// Fills the Schema rows from `schema::flatten` (flattened fragment, change, what was lost)
/// and marks parameters a `schema.*` finding says never reached the prompt.
fn apply_schema(rows: &mut [SchemaRow], tools: &Value, loss: &[Finding]) {
    let Ok(flat) = crate::schema::flatten::flatten_tools(
        tools,
        &crate::schema::flatten::FlattenOptions::default(),
    ) else {
        return;
    };
    let names: Vec<String> = tools
        .as_array()
        .map(|a| {
            a.iter()
                .map(|t| {
                    t.get("function")
                        .unwrap_or(t)
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or("(unnamed)")
                        .to_owned()
                })
                .collect()
        })
        .unwrap_or_default();
    for r in rows.iter_mut() {
        let Some(ti) = names.iter().position(|n| *n == r.tool) else {
            continue;
        };
        let base = if tools
            .pointer(&format!("/{ti}/function/parameters"))
            .is_some()
        {
            format!("/{ti}/function/parameters")
        } else {
            format!("/{ti}/input_schema")
        };
        let path = format!("{base}{}", r.pointer);
        r.flattened = flat
            .tools
            .pointer(&path)
            .map(|v| v.to_string())
            .filter(|f| *f != r.original);
        let ch: Vec<String> = flat
            .changes
            .iter()
            .filter(|c| c.path == path)
            .map(|c| match &c.lost {
                Some(l) => format!("{} (lost: {l})", c.change),
                None => c.change.clone(),
            })
            .collect();
        if !ch.is_empty() {
            r.change = Some(ch.join("; "));
        }
        r.lost_in_prompt = loss.iter().any(|f| {
            f.evidence.tool.as_deref().is_none_or(|t| t == r.tool)
                && f.evidence.pointer.as_deref().is_some_and(|p| {
                    p == r.pointer || p.ends_with(&format!("parameters{}", r.pointer))
                })
        });
    }
}

/// Findings the session itself records (partial exchanges).
fn exchange_findings(ex: &Exchange, _message: Option<&AssistantMessage>) -> Vec<Finding> {
    let mut out = Vec::new();
    if ex.is_partial() {
        out.push(
            Finding::new(
                Rule::SessionDamaged,
                format!("exchange {} is partial ({}): {}", ex.id, ex.outcome, ex.error.as_deref().unwrap_or("no reason recorded")),
                "the recording holds what arrived before the failure; re-run the request to get a whole exchange",
            )
            .in_exchange(Some(ex.id))
            .with_evidence(Evidence { pane: Some(Pane::Stream), ..Default::default() }),
        );
    }
    out
}

/// The reassembled reply and the API name it was read as.
fn reply(ex: &Exchange) -> Option<(AssistantMessage, &'static str)> {
    let api = match ex.api() {
        Api::Anthropic => "anthropic",
        Api::Completion => "completion",
        _ => "openai",
    };
    if ex.is_stream() {
        let events = decode_events(ex);
        let (last, _) = server_views(Some(ex.api()), &events);
        let last = &last;
        let mut m = AssistantMessage {
            content: last.content.clone(),
            reasoning: last.reasoning.clone(),
            tool_calls: last.calls.clone(),
            finish_reason: last.finish_reason.clone(),
            ..Default::default()
        };
        for e in events.iter().rev() {
            // Parse only events that can still tell something (most carry neither field
            // once the model is known): a long stream is not parsed a second time.
            let wanted = (m.model.is_none() && e.data.contains("\"model\""))
                || (m.raw_text.is_none() && e.data.contains("__verbose"));
            if !wanted {
                continue;
            }
            if let Ok(v) = serde_json::from_str::<Value>(&e.data) {
                if m.model.is_none() {
                    m.model = v
                        .get("model")
                        .or_else(|| v.pointer("/message/model"))
                        .and_then(Value::as_str)
                        .map(str::to_owned);
                }
                if m.raw_text.is_none() {
                    m.raw_text = v
                        .pointer("/__verbose/content")
                        .and_then(Value::as_str)
                        .map(str::to_owned);
                }
            }
        }
        return Some((m, api));
    }
    let body = ex.response.as_ref()?.body.as_ref()?.json().ok()?;
    from_response_json(api, &body).map(|m| (m, api))
}

/// Splits a recorded stream into SSE events (WHATWG `text/event-stream` framing: events end at
/// a blank line; `\r\n`, `\r` and `\n` line ends; `:` comments ignored). Each event carries the
/// chunk in which it completed and that chunk's receive time.
pub fn decode_events(ex: &Exchange) -> Vec<StreamEvent> {
    let Some(chunks) = ex.response.as_ref().and_then(|r| r.chunks.as_ref()) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut pending: Vec<u8> = Vec::new();
    let mut block_size = 0usize;
    let mut event: Option<String> = None;
    let mut data: Option<String> = None;
    for (ci, c) in chunks.iter().enumerate() {
        pending.extend_from_slice(&c.data.to_bytes());
        // Consume complete lines.
        while let Some(nl) = pending.iter().position(|&b| b == b'\n' || b == b'\r') {
            let mut end = nl + 1;
            if pending[nl] == b'\r' {
                if nl + 1 == pending.len() {
                    break; // wait: could be \r\n split across chunks
                }
                if pending[nl + 1] == b'\n' {
                    end += 1;
                }
            }
            let line = String::from_utf8_lossy(&pending[..nl]).into_owned();
            pending.drain(..end);
            block_size += end;
            if line.is_empty() {
                if data.is_some() || event.is_some() {
                    out.push(StreamEvent {
                        index: out.len(),
                        event: event.take(),
                        data: data.take().unwrap_or_default(),
                        size: block_size,
                        chunk: ci,
                        t_us: Some(c.t_us),
                    });
                }
                block_size = 0;
                continue;
            }
            if line.starts_with(':') {
                continue;
            }
            let (field, value) = match line.find(':') {
                Some(p) => (
                    &line[..p],
                    line[p + 1..].strip_prefix(' ').unwrap_or(&line[p + 1..]),
                ),
                None => (line.as_str(), ""),
            };
            match field {
                "event" => event = Some(value.to_owned()),
                "data" => match &mut data {
                    Some(d) => {
                        d.push('\n');
                        d.push_str(value);
                    }
                    None => data = Some(value.to_owned()),
                },
                _ => {}
            }
        }
    }
    if data.is_some() || event.is_some() || !pending.is_empty() {
        // An unterminated final event (truncated stream): keep it.
        let rest = String::from_utf8_lossy(&pending).into_owned();
        let mut d = data.unwrap_or_default();
        if let Some(r) = rest.strip_prefix("data:") {
            d.push_str(r.strip_prefix(' ').unwrap_or(r));
        }
        out.push(StreamEvent {
            index: out.len(),
            event,
            data: d,
            size: block_size + pending.len(),
            chunk: chunks.len().saturating_sub(1),
            t_us: chunks.last().map(|c| c.t_us),
        });
    }
    out
}

/// The server's reply after 0, 1, …, n events (OpenAI `chat.completion.chunk` deltas,
/// Anthropic `content_block_*` / `message_delta` events, or raw completion text: `/completion`
/// `content`, `/v1/completions` `choices[0].text`).
pub fn server_views(api: Option<Api>, events: &[StreamEvent]) -> (ServerView, Vec<ServerMark>) {
    let mut cur = ServerView::default();
    let mark = |v: &ServerView| ServerMark {
        content: v.content.len(),
        reasoning: v.reasoning.len(),
        calls: v
            .calls
            .iter()
            .map(|c| (c.name.len(), c.arguments.len()))
            .collect(),
        finish_reason: v.finish_reason.clone(),
    };
    let mut out = vec![mark(&cur)];
    // Anthropic: content block index -> call slot.
    let mut blocks: std::collections::BTreeMap<u64, usize> = Default::default();
    for e in events {
        if let Ok(v) = serde_json::from_str::<Value>(&e.data) {
            if api == Some(Api::Anthropic) {
                match v.get("type").and_then(Value::as_str) {
                    Some("content_block_start") => {
                        let idx = v.get("index").and_then(Value::as_u64).unwrap_or(0);
                        if let Some(b) = v
                            .get("content_block")
                            .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"))
                        {
                            blocks.insert(idx, cur.calls.len());
                            cur.calls.push(CallRecord {
                                index: Some(idx),
                                id: b.get("id").and_then(Value::as_str).map(str::to_owned),
                                name: b
                                    .get("name")
                                    .and_then(Value::as_str)
                                    .unwrap_or("")
                                    .to_owned(),
                                arguments: String::new(),
                            });
                        }
                    }
                    Some("content_block_delta") => {
                        let idx = v.get("index").and_then(Value::as_u64).unwrap_or(0);
                        let d = v.get("delta").cloned().unwrap_or_default();
                        let s = |k: &str| d.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
                        match d.get("type").and_then(Value::as_str) {
                            Some("text_delta") => cur.content.push_str(&s("text")),
                            Some("thinking_delta") => cur.reasoning.push_str(&s("thinking")),
                            Some("input_json_delta") => {
                                if let Some(&slot) = blocks.get(&idx) {
                                    cur.calls[slot].arguments.push_str(&s("partial_json"));
                                }
                            }
                            _ => {}
                        }
                    }
                    Some("message_delta") => {
                        if let Some(r) = v.pointer("/delta/stop_reason").and_then(Value::as_str) {
                            cur.finish_reason = Some(r.to_owned());
                        }
                    }
                    _ => {}
                }
            } else if api == Some(Api::Completion) {
                // llama-server `/completion` (`content`, `stop`, `stop_type`) or OpenAI
                // `/v1/completions` (`choices[0].text`, `finish_reason`)
                if let Some(t) = v
                    .get("content")
                    .or_else(|| v.pointer("/choices/0/text"))
                    .and_then(Value::as_str)
                {
                    cur.content.push_str(t);
                }
                let finish = if v.get("stop").and_then(Value::as_bool) == Some(true) {
                    v.get("stop_type").and_then(Value::as_str)
                } else {
                    v.pointer("/choices/0/finish_reason")
                        .and_then(Value::as_str)
                };
                if let Some(r) = finish {
                    cur.finish_reason = Some(r.to_owned());
                }
            } else if let Some(ch) = v.pointer("/choices/0") {
                let d = ch.get("delta").cloned().unwrap_or_default();
                if let Some(t) = d.get("content").and_then(Value::as_str) {
                    cur.content.push_str(t);
                }
                if let Some(t) = d
                    .get("reasoning_content")
                    .or_else(|| d.get("reasoning"))
                    .and_then(Value::as_str)
                {
                    cur.reasoning.push_str(t);
                }
                if let Some(calls) = d.get("tool_calls").and_then(Value::as_array) {
                    for c in calls {
                        let index = c.get("index").and_then(Value::as_u64);
                        let slot = match index
                            .and_then(|i| cur.calls.iter().position(|x| x.index == Some(i)))
                        {
                            Some(s)
                                if c.get("id").is_none()
                                    || cur.calls[s].id.is_none()
                                    || cur.calls[s].id.as_deref()
                                        == c.get("id").and_then(Value::as_str) =>
                            {
                                s
                            }
                            _ if index.is_none()
                                && c.get("id").is_none()
                                && !cur.calls.is_empty() =>
                            {
                                cur.calls.len() - 1
                            }
                            _ => {
                                cur.calls.push(CallRecord {
                                    index,
                                    ..Default::default()
                                });
                                cur.calls.len() - 1
                            }
                        };
                        let call = &mut cur.calls[slot];
                        if let Some(id) = c.get("id").and_then(Value::as_str) {
                            call.id = Some(id.to_owned());
                        }
                        if let Some(n) = c.pointer("/function/name").and_then(Value::as_str) {
                            call.name.push_str(n);
                        }
                        if let Some(a) = c.pointer("/function/arguments").and_then(Value::as_str) {
                            call.arguments.push_str(a);
                        }
                    }
                }
                if let Some(r) = ch.get("finish_reason").and_then(Value::as_str) {
                    cur.finish_reason = Some(r.to_owned());
                }
            }
        }
        out.push(mark(&cur));
    }
    (cur, out)
}

fn tool_entries(request: Option<&Value>) -> Vec<ToolEntry> {
    let Some(tools) = request
        .and_then(|r| r.get("tools"))
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    tools
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let f = t.get("function").unwrap_or(t);
            let params = f.get("parameters").or_else(|| f.get("input_schema"));
            ToolEntry {
                name: f
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("(unnamed)")
                    .to_owned(),
                description: f
                    .get("description")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
                params: params
                    .and_then(|p| p.get("properties"))
                    .and_then(Value::as_object)
                    .map_or(0, |o| o.len()),
                json: serde_json::to_string_pretty(t).unwrap_or_default(),
                pointer: format!("/tools/{i}"),
            }
        })
        .collect()
}

fn schema_rows(request: Option<&Value>) -> Vec<SchemaRow> {
    let Some(tools) = request
        .and_then(|r| r.get("tools"))
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    let mut rows = Vec::new();
    for t in tools {
        let f = t.get("function").unwrap_or(t);
        let name = f.get("name").and_then(Value::as_str).unwrap_or("(unnamed)");
        if let Some(p) = f.get("parameters").or_else(|| f.get("input_schema")) {
            walk_schema(name, "", p, &mut rows);
        }
    }
    rows
}

fn walk_schema(tool: &str, pointer: &str, schema: &Value, rows: &mut Vec<SchemaRow>) {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (k, v) in props {
        let p = format!(
            "{pointer}/properties/{}",
            k.replace('~', "~0").replace('/', "~1")
        );
        rows.push(SchemaRow {
            tool: tool.to_owned(),
            pointer: p.clone(),
            original: v.to_string(),
            flattened: None,
            change: None,
            lost_in_prompt: false,
        });
        walk_schema(tool, &p, v, rows);
    }
}

/// toolscope's render of `request` with the session's `/props` template, as
/// `toolscope render --template /props` does (OpenAI body, or Anthropic converted as
/// llama-server build 11434 converts it, tools/server/server-chat.cpp). `strftime_now` reads
/// the exchange's recorded start time, so a render is reproducible and matches the server's
/// date. Returns (origin, render or error); `None` without a `/props` `chat_template`.
fn local_render(
    ex: &Exchange,
    request: Option<&Value>,
    header: &Header,
) -> Option<(String, Result<String, String>)> {
    use crate::template::{RenderInput, RenderOptions, TemplateSource};
    let source = TemplateSource::from_props(header.props.as_ref()?).ok()?;
    let Some(body) = request else {
        return Some((source.origin, Err("the request body is not JSON".into())));
    };
    let input = match ex.api() {
        Api::Anthropic => RenderInput::from_anthropic_request(body),
        _ => RenderInput::from_openai_request(body),
    };
    let now =
        time::OffsetDateTime::parse(&ex.started, &time::format_description::well_known::Rfc3339)
            .ok();
    let opts = RenderOptions {
        now,
        ..Default::default()
    };
    let out = crate::diff::adapt::render(&source, &input, &opts);
    let model = header
        .props
        .as_ref()
        .and_then(|p| p.get("model_path"))
        .and_then(Value::as_str)
        .map(|p| p.rsplit(['/', '\\']).next().unwrap_or(p).to_owned());
    let origin = match model {
        Some(m) => format!("/props chat_template, {m}"),
        None => "/props chat_template".to_owned(),
    };
    Some((origin, out))
}

fn template_view(ex: &Exchange, request: Option<&Value>, ctx: Context<'_>) -> TemplateView {
    let props = ctx.header.props.as_ref();
    let bos_token = props
        .and_then(|p| p.get("bos_token"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let mut v = TemplateView {
        bos_token: bos_token.clone(),
        ..Default::default()
    };
    if let Some((prompt, tokens)) = ctx.server_render {
        if let Some(p) = prompt {
            v.server = Some(p.to_owned());
            v.server_source = Some("server /apply-template".into());
        }
        v.tokens = tokens.map(<[TokenPiece]>::to_vec);
    }
    if v.server.is_none() {
        let verbose = ex
            .response
            .as_ref()
            .and_then(|r| r.body.as_ref())
            .and_then(|b| b.json().ok())
            .and_then(|b| b.pointer("/__verbose/prompt").cloned());
        if let Some(Value::String(p)) = verbose {
            v.server = Some(p);
            v.server_source = Some("server __verbose.prompt".into());
        }
    }
    if let Some(tokens) = &v.tokens {
        let text = |t: &TokenPiece| String::from_utf8_lossy(t.piece.as_bytes()).into_owned();
        // Single-token markers.
        let mut specials: Vec<String> = tokens.iter().map(text).filter(|p| is_marker(p)).collect();
        specials.sort();
        specials.dedup();
        // Markers written as several ordinary pieces: the same rule as `token.pseudo_special`
        // (crate::tokens::pseudo_special), over the server's prompt and its pieces.
        let pseudo: Vec<String> = v
            .server
            .as_deref()
            .map(|prompt| {
                let toks = crate::tokens::tokens_from_pieces(prompt, tokens);
                crate::tokens::pseudo_special(prompt, &toks)
                    .into_iter()
                    .filter_map(|f| f.evidence.excerpt)
                    .collect()
            })
            .unwrap_or_default();
        v.specials = specials;
        v.pseudo_specials = pseudo;
        if let Some(bos) = &bos_token {
            v.bos_count = Some(tokens.iter().take_while(|t| text(t) == *bos).count());
        }
    } else if let (Some(p), Some(bos)) = (&v.server, &bos_token) {
        let mut n = 0;
        let mut rest = p.as_str();
        while let Some(r) = rest.strip_prefix(bos.as_str()) {
            n += 1;
            rest = r;
        }
        v.bos_count = Some(n);
    }
    if matches!(ex.api(), Api::Openai | Api::Anthropic)
        && let Some((origin, out)) = local_render(ex, request, ctx.header)
    {
        v.local_source = Some(origin);
        v.local = Some(out);
    }
    if let (Some(Ok(local)), Some(server)) = (&v.local, &v.server) {
        v.diff = Some(crate::diff::side_by_side(
            local,
            server,
            crate::diff::ViewOptions::default(),
        ));
    }
    v
}

/// `<…>` or `<|…|>` with no whitespace inside, 3..=40 bytes.
fn is_marker(s: &str) -> bool {
    s.len() >= 3
        && s.len() <= 40
        && s.starts_with('<')
        && s.ends_with('>')
        && !s[1..s.len() - 1].contains(['<', '>', ' ', '\n'])
}

/// Chunk ends (bytes into `raw`) at every sampled token piece the stream lists (see
/// [`Chunking::PerPiece`]); empty when it lists none or they do not spell `raw` exactly (e.g.
/// the pieces of the visible deltas against a `__verbose.content` raw text with markup).
fn piece_bounds(events: &[StreamEvent], raw: &str) -> Vec<usize> {
    let mut ends = Vec::new();
    let mut at = 0usize;
    for e in events {
        let Ok(v) = serde_json::from_str::<Value>(&e.data) else {
            continue;
        };
        let list = v
            .pointer("/choices/0/logprobs/content")
            .or_else(|| v.get("completion_probabilities"))
            .and_then(Value::as_array);
        for p in list.into_iter().flatten() {
            let Some(tok) = p.get("token").and_then(Value::as_str) else {
                continue;
            };
            if tok.is_empty() {
                continue;
            }
            if !raw[at..].starts_with(tok) {
                return Vec::new();
            }
            at += tok.len();
            ends.push(at);
        }
    }
    if at == raw.len() { ends } else { Vec::new() }
}

fn replay_view(
    ex: &Exchange,
    events: &[StreamEvent],
    server: &(ServerView, Vec<ServerMark>),
    message: Option<&AssistantMessage>,
) -> ReplayView {
    let (full, marks) = server;
    // Recorded chunks: the text each event added (reasoning, content, call arguments), in order.
    let mut recorded: Vec<(String, usize)> = Vec::new();
    for (i, w) in marks.windows(2).enumerate() {
        let (a, b) = (&w[0], &w[1]);
        let mut piece = String::new();
        piece.push_str(full.reasoning.get(a.reasoning..b.reasoning).unwrap_or(""));
        piece.push_str(full.content.get(a.content..b.content).unwrap_or(""));
        for (j, c) in b.calls.iter().enumerate() {
            let before = a.calls.get(j).map_or(0, |x| x.1);
            piece.push_str(full.calls[j].arguments.get(before..c.1).unwrap_or(""));
        }
        if !piece.is_empty() {
            recorded.push((piece, i + 1));
        }
    }
    let verbose = message.and_then(|m| m.raw_text.clone());
    let (raw, raw_source) = match (verbose, ex.is_stream()) {
        (Some(r), _) => (r, "__verbose.content"),
        (None, true) => (
            recorded.iter().map(|(p, _)| p.as_str()).collect(),
            "stream deltas",
        ),
        (None, false) => {
            let m = message.cloned().unwrap_or_default();
            (format!("{}{}", m.reasoning, m.content), "message")
        }
    };
    let mut acc = 0;
    let recorded_events: Vec<(usize, usize)> = recorded
        .iter()
        .map(|(p, ev)| {
            acc += p.len();
            (acc, *ev)
        })
        .collect();
    let recorded_bounds: Vec<usize> = if raw_source == "stream deltas" {
        recorded_events.iter().map(|(e, _)| *e).collect()
    } else if raw.is_empty() {
        Vec::new()
    } else {
        vec![raw.len()]
    };
    let per_piece = piece_bounds(events, &raw);
    let per_char: Vec<usize> = raw.char_indices().map(|(i, c)| i + c.len_utf8()).collect();
    let whole = if raw.is_empty() {
        Vec::new()
    } else {
        vec![raw.len()]
    };
    ReplayView {
        traces: Vec::new(),
        syntax: None,
        bounds: vec![recorded_bounds, per_piece, per_char, whole],
        recorded_events,
        events: events.len(),
        raw,
        raw_source: raw_source.into(),
        server_final: full.clone(),
        server_marks: marks.clone(),
    }
}

/// Findings about the session file itself (damaged lines).
pub fn session_findings(warnings: &[crate::session::ReadWarning]) -> Vec<Finding> {
    warnings
        .iter()
        .map(|w| {
            Finding::new(
                Rule::SessionDamaged,
                format!("line {}: {}", w.line, w.message),
                "the other lines are intact; re-record the lost exchange if you need it",
            )
            .with_evidence(Evidence {
                excerpt: Some(w.to_string()),
                ..Default::default()
            })
        })
        .collect()
}

/// A small least-recently-used map from row to a decoded exchange's analysis, bounded by an
/// entry count and by a total weight (the bytes of the rows' session lines), so that selecting
/// rows one after another keeps memory near a few exchanges. The most recent entry is always
/// kept, however heavy.
#[derive(Debug, Clone)]
pub struct Lru<V> {
    /// `(row, weight, value)`, least recently used first.
    entries: std::collections::VecDeque<(usize, u64, V)>,
    max_entries: usize,
    max_weight: u64,
}

impl<V> Lru<V> {
    /// An empty cache holding at most `max_entries` values and `max_weight` total weight.
    pub fn new(max_entries: usize, max_weight: u64) -> Lru<V> {
        Lru {
            entries: Default::default(),
            max_entries: max_entries.max(1),
            max_weight,
        }
    }

    /// The value for `row`, marked most recently used.
    pub fn get(&mut self, row: &usize) -> Option<&V> {
        let i = self.entries.iter().position(|e| e.0 == *row)?;
        let e = self.entries.remove(i)?;
        self.entries.push_back(e);
        self.entries.back().map(|e| &e.2)
    }

    /// Inserts (or replaces) `row`'s value, then evicts the least recently used entries until
    /// both bounds hold.
    pub fn insert(&mut self, row: usize, value: V, weight: u64) {
        self.remove(&row);
        self.entries.push_back((row, weight, value));
        while self.entries.len() > 1
            && (self.entries.len() > self.max_entries || self.weight() > self.max_weight)
        {
            self.entries.pop_front();
        }
    }

    /// Drops `row`'s value (a live exchange changed).
    pub fn remove(&mut self, row: &usize) -> Option<V> {
        let i = self.entries.iter().position(|e| e.0 == *row)?;
        self.entries.remove(i).map(|e| e.2)
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Total weight of the entries.
    pub fn weight(&self) -> u64 {
        self.entries.iter().map(|e| e.1).sum()
    }
}

#[cfg(test)]
mod tests {
    fn lp_ev(data: serde_json::Value) -> StreamEvent {
        StreamEvent {
            data: data.to_string(),
            ..Default::default()
        }
    }

    #[test]
    fn piece_bounds_follow_logprobs_tokens_that_spell_the_text() {
        // Hand-made OpenAI chunks with `logprobs` (two tokens in the first event, one in the second).
        let evs = [
            lp_ev(
                serde_json::json!({"choices": [{"delta": {"content": "<tool"}, "logprobs": {"content": [{"token": "<"}, {"token": "tool"}]}}]}),
            ),
            lp_ev(
                serde_json::json!({"choices": [{"delta": {"content": "_call>"}, "logprobs": {"content": [{"token": "_call>"}]}}]}),
            ),
        ];
        assert_eq!(piece_bounds(&evs, "<tool_call>"), [1, 5, 11]);
        // Pieces that do not spell the raw text (markup only in __verbose.content): none.
        assert!(piece_bounds(&evs, "<tool_call>\n{}").is_empty());
        assert!(piece_bounds(&[], "x").is_empty());
    }

    use super::*;

    fn ev(index: usize, data: &str) -> StreamEvent {
        StreamEvent {
            index,
            event: None,
            data: data.to_owned(),
            size: data.len(),
            chunk: index,
            t_us: None,
        }
    }

    /// Raw completion streams (the Replay pane's "stream deltas" and its server side): llama-server
    /// `/completion` `content` + `stop_type`, OpenAI `/v1/completions` `choices[0].text`.
    #[test]
    fn server_views_read_completion_streams() {
        let events = [
            ev(0, r#"{"index":0,"content":"Hel","stop":false}"#),
            ev(1, r#"{"index":0,"content":"lo","stop":false}"#),
            ev(
                2,
                r#"{"index":0,"content":"","stop":true,"stop_type":"eos"}"#,
            ),
        ];
        let (last, marks) = server_views(Some(Api::Completion), &events);
        assert_eq!(last.content, "Hello");
        assert_eq!(last.finish_reason.as_deref(), Some("eos"));
        let contents: Vec<usize> = marks.iter().map(|m| m.content).collect();
        assert_eq!(contents, vec![0, 3, 5, 5]);

        let events = [
            ev(
                0,
                r#"{"choices":[{"index":0,"text":"Hi","finish_reason":null}]}"#,
            ),
            ev(
                1,
                r#"{"choices":[{"index":0,"text":" there","finish_reason":"length"}]}"#,
            ),
        ];
        let (last, _) = server_views(Some(Api::Completion), &events);
        assert_eq!(last.content, "Hi there");
        assert_eq!(last.finish_reason.as_deref(), Some("length"));
    }

    #[test]
    fn lru_evicts_least_recently_used_by_count_and_weight() {
        let mut c = Lru::new(3, 100);
        c.insert(1, "a", 10);
        c.insert(2, "b", 10);
        c.insert(3, "c", 10);
        assert_eq!(c.get(&1), Some(&"a")); // 1 is now the most recent
        c.insert(4, "d", 10); // count bound: evicts 2, the least recent
        assert_eq!(c.get(&2), None);
        assert_eq!((c.len(), c.weight()), (3, 30));
        c.insert(5, "e", 85); // count evicts 3; weight 10+10+85 > 100 then evicts 1
        assert_eq!(c.get(&3), None);
        assert_eq!(c.get(&1), None);
        assert_eq!((c.len(), c.weight()), (2, 95));
        assert_eq!(c.get(&4), Some(&"d"));
        c.insert(6, "f", 500); // heavier than the bound alone: kept, the rest evicted
        assert_eq!(c.len(), 1);
        assert_eq!(c.get(&6), Some(&"f"));
        c.insert(6, "g", 1); // replacing keeps one entry per row
        assert_eq!((c.len(), c.weight(), c.remove(&6)), (1, 1, Some("g")));
        assert!(c.is_empty());
    }
}
