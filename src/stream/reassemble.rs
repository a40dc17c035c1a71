//! Reassembly of decoded SSE events into the final assistant message, with stream-contract
//! findings.
//!
//! OpenAI `chat.completion.chunk` streams: `choices[0].delta` carries `content`,
//! `reasoning_content` (llama.cpp, vLLM, SGLang) or `reasoning` (Ollama, newer vLLM) and
//! `tool_calls[]` deltas `{index, id, type, function: {name, arguments}}`; arguments are
//! concatenated per `index`; `finish_reason`, `usage` (often in a last chunk with empty
//! `choices`) and `data: [DONE]` end it (OpenAI API reference "The chat completion chunk
//! object"; llama.cpp tools/server/server-common.cpp `format_oai_sse`, build 11434, which sends
//! an error as `data: {"error": {code, message, type}}`).
//!
//! Anthropic message streams: `message_start`, `content_block_start` (`text`, `thinking`,
//! `tool_use`), `content_block_delta` (`text_delta`, `input_json_delta`, `thinking_delta`,
//! `signature_delta`), `content_block_stop`, `message_delta` (`stop_reason`, `stop_sequence`,
//! `usage`), `message_stop`, `ping`, `error` (Anthropic "Streaming Messages" documentation;
//! llama.cpp `format_anthropic_sse`, which sends `event: error` with data
//! `{code, message, type}` rather than Anthropic's `{"type":"error","error":{…}}`; both are read).
//!
//! Reassembly is lenient, as a forgiving client would be: a tool-call delta without `index`
//! continues the last call (or starts one when it carries a new `id`), an Anthropic delta for a
//! block never started creates it. Every such fault is still reported as a finding whose
//! `evidence.event` is the 0-based SSE event number.

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use super::message::from_response_json;
use super::message::{AssistantMessage, CallRecord};
use super::sse::{SseEvent, decode_bytes, decode_chunks};
use crate::finding::{Evidence, Finding, Pane, Rule};
use crate::session::{Api, Exchange};

/// The result of decoding one response.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Reassembled {
    /// The final message as a client would have assembled it.
    pub message: AssistantMessage,
    /// Stream-contract findings (`stream.missing_index`, `stream.missing_id`,
    /// `stream.name_repeated`, `server.parse_error` for a parse-failure error event), evidence
    /// in pane `stream`. Argument JSON and the finish reason are judged by diagnose's rules
    /// (`tool_call.args_invalid_json`, `finish.mismatch`), from `message`, `args_events` and
    /// `finish_event`.
    pub findings: Vec<Finding>,
    /// The decoded SSE events (empty for a non-streamed body).
    pub events: Vec<SseEvent>,
    /// Faults that have no rule id: error events that are not parse failures, event data that is
    /// not JSON, a missing `[DONE]` / `message_stop`, events after the end, a truncated last
    /// event.
    pub problems: Vec<StreamProblem>,
    /// For each entry of `message.tool_calls`, the SSE events that contributed to it.
    pub call_events: Vec<Vec<usize>>,
    /// Event number where `finish_reason` / `stop_reason` arrived.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_event: Option<usize>,
    /// For each entry of `message.tool_calls`, the last SSE event that added to its arguments
    /// (where a cut or broken argument string ends), when any did.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args_events: Vec<Option<usize>>,
    /// What the client had assembled after 0, 1, …, n events (`marks[k]` = after `k` events;
    /// `n + 1` entries for `n` events; empty for a non-streamed body). What event `i` added is
    /// the difference of `marks[i]` and `marks[i + 1]` ([`EventMark::delta`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub marks: Vec<EventMark>,
    /// Sampled token pieces the events list, in order, with the event that listed each (OpenAI
    /// `logprobs: true`: `choices[0].logprobs.content[].token`; llama-server `/completion`
    /// with `n_probs`: `completion_probabilities[].token`). Empty when none are listed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pieces: Vec<(usize, String)>,
    /// OpenAI streams: tool-call deltas whose `function.arguments` is JSON other than a string
    /// (an object, a number, …; `null` is absent), the first per call `index` (a delta without
    /// `index` counts by its position in `tool_calls`), in event order. What
    /// `tool_call.args_not_string` reports.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args_not_string: Vec<ArgsNotString>,
    /// What an event meant beyond the text it added, in words, for the Stream pane: `(event,
    /// note)`, e.g. Responses `item 1 function_call added`, `arguments done (= deltas)`,
    /// `status completed`. Empty for the APIs whose marks say it all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<(usize, String)>,
}

/// One OpenAI tool-call delta whose `function.arguments` is not a string
/// ([`Reassembled::args_not_string`]).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ArgsNotString {
    /// The delta's `index` (else its position in the event's `tool_calls`).
    pub index: u64,
    /// 0-based SSE event number.
    pub event: usize,
    /// The call's name: the delta's `function.name`, else the name the call with this `index`
    /// was given in another delta; empty when none.
    pub name: String,
    /// The `function.arguments` value as sent.
    pub value: Value,
}

/// The reassembled reply's size after some events: bytes of `content` and `reasoning`, and per
/// tool call the bytes of its name and arguments (prefix lengths of the final
/// [`AssistantMessage`]'s strings, so a mark costs no copy of the text).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct EventMark {
    /// Bytes of `message.content` assembled.
    pub content: usize,
    /// Bytes of `message.reasoning` assembled.
    pub reasoning: usize,
    /// Per call started so far: (bytes of name, bytes of arguments).
    pub calls: Vec<(usize, usize)>,
    /// The event that led to this mark carried `usage`.
    pub usage: bool,
}

/// What one SSE event added to the reply: the text pieces (slices of the final message) and
/// the calls it started or extended. Built by [`EventMark::delta`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EventDelta<'a> {
    pub reasoning: &'a str,
    pub content: &'a str,
    /// `(call position, started by this event, name added, arguments added)`.
    pub calls: Vec<(usize, bool, &'a str, &'a str)>,
    /// The event carried `usage`.
    pub usage: bool,
}

impl EventMark {
    /// What happened between `self` (before the event) and `after`, as slices of `m` (the
    /// final message the marks were taken from).
    pub fn delta<'a>(&self, after: &EventMark, m: &'a AssistantMessage) -> EventDelta<'a> {
        let slice = |s: &'a str, a: usize, b: usize| s.get(a..b).unwrap_or("");
        let calls = after
            .calls
            .iter()
            .enumerate()
            .filter_map(|(j, &(n1, a1))| {
                let started = j >= self.calls.len();
                let (n0, a0) = self.calls.get(j).copied().unwrap_or((0, 0));
                let c = m.tool_calls.get(j)?;
                let (name, args) = (slice(&c.name, n0, n1), slice(&c.arguments, a0, a1));
                (started || !name.is_empty() || !args.is_empty())
                    .then_some((j, started, name, args))
            })
            .collect();
        EventDelta {
            reasoning: slice(&m.reasoning, self.reasoning, after.reasoning),
            content: slice(&m.content, self.content, after.content),
            calls,
            usage: after.usage,
        }
    }
}

/// A fault in a stream that is not a finding rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamProblem {
    /// 0-based SSE event number, when tied to one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<usize>,
    /// `error_event`, `bad_json`, `bad_shape` (JSON, not the API's event), `no_end`,
    /// `after_end`, `truncated`, `extra_choice`.
    pub kind: String,
    pub message: String,
}

fn ev_evidence(event: usize) -> Evidence {
    Evidence {
        pane: Some(Pane::Stream),
        event: Some(event),
        ..Default::default()
    }
}

/// `s` cut to 120 bytes (at a character boundary) with `…`, for finding excerpts.
pub(crate) fn excerpt(s: &str) -> String {
    const MAX: usize = 120;
    if s.len() <= MAX {
        return s.to_owned();
    }
    let mut end = MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// The wording of a server's own tool-call / output parse failure, one entry per engine
/// message (matched ASCII-case-insensitively): llama.cpp common/chat.cpp, build 11434
/// (`The model produced output that does not match the expected <format> format`,
/// `Failed to parse tool call arguments …`, `Failed to parse input at pos …`), Ollama
/// (`error parsing tool call: raw='…', err=…`). The one list behind `server.parse_error`
/// (rules/server.rs), stream reassembly's error events and `--regenerate`'s trigger.
pub const PARSE_ERROR_PHRASES: &[&str] = &[
    "does not match the expected",
    "failed to parse tool call",
    "failed to parse input at pos",
    "error parsing tool call",
];

/// Byte offset in `text` of the first [`PARSE_ERROR_PHRASES`] phrase, if any.
pub fn parse_error_at(text: &str) -> Option<usize> {
    let lower = text.to_ascii_lowercase(); // same byte offsets
    PARSE_ERROR_PHRASES
        .iter()
        .filter_map(|p| lower.find(p))
        .min()
}

/// True when an error message is a server's tool-call / output parse failure
/// ([`PARSE_ERROR_PHRASES`]).
pub fn is_parse_error_message(msg: &str) -> bool {
    parse_error_at(msg).is_some()
}

/// The state every reassembler shares (this module's and [`super::responses`]).
#[derive(Default)]
pub(super) struct Builder {
    pub(super) r: Reassembled,
    /// last event that appended arguments, per call
    pub(super) last_args_event: Vec<Option<usize>>,
    /// The event being read carried `usage` (goes into the next mark).
    pub(super) usage: bool,
}

impl Builder {
    /// Records what the client has assembled so far (called before each event and once at the
    /// end: see [`Reassembled::marks`]).
    pub(super) fn mark(&mut self) {
        let m = &self.r.message;
        self.r.marks.push(EventMark {
            content: m.content.len(),
            reasoning: m.reasoning.len(),
            calls: m
                .tool_calls
                .iter()
                .map(|c| (c.name.len(), c.arguments.len()))
                .collect(),
            usage: std::mem::take(&mut self.usage),
        });
    }

    /// Keeps the sampled token pieces event `event` lists (`logprobs.content[].token`,
    /// `completion_probabilities[].token`).
    fn pieces(&mut self, event: usize, v: &Value) {
        let list = v
            .pointer("/choices/0/logprobs/content")
            .or_else(|| v.get("completion_probabilities"))
            .and_then(Value::as_array);
        for p in list.into_iter().flatten() {
            if let Some(t) = p.get("token").and_then(Value::as_str) {
                self.r.pieces.push((event, t.to_owned()));
            }
        }
    }

    pub(super) fn finding(
        &mut self,
        rule: Rule,
        event: usize,
        message: String,
        hint: &str,
        tool: Option<&str>,
        ex: Option<&str>,
    ) {
        let mut e = ev_evidence(event);
        e.tool = tool.filter(|t| !t.is_empty()).map(str::to_owned);
        e.excerpt = ex.map(excerpt);
        self.r
            .findings
            .push(Finding::new(rule, message, hint).with_evidence(e));
    }

    /// True, after noting an `after_end` problem, when event `n` comes after the stream ended
    /// at event `done` (`end`: what ended it, `[DONE]` or `message_stop`).
    fn after_end(&mut self, n: usize, done: Option<usize>, end: &str) -> bool {
        let Some(d) = done else { return false };
        self.problem(
            Some(n),
            "after_end",
            format!("event {n} arrives after {end} (event {d})"),
        );
        true
    }

    pub(super) fn problem(&mut self, event: Option<usize>, kind: &str, message: String) {
        self.r.problems.push(StreamProblem {
            event,
            kind: kind.to_owned(),
            message,
        });
    }

    /// The event's data as JSON, or `None` after recording a `bad_json` (complete event) or
    /// `truncated` (cut-off event) problem with an excerpt of the data.
    fn event_json(&mut self, ev: &SseEvent) -> Option<Value> {
        match serde_json::from_str(&ev.data) {
            Ok(v) => Some(v),
            Err(e) => {
                let n = ev.index;
                let kind = if ev.complete { "bad_json" } else { "truncated" };
                self.problem(
                    Some(n),
                    kind,
                    format!("event {n} data is not JSON: {e}: {}", excerpt(&ev.data)),
                );
                None
            }
        }
    }

    /// Records a `bad_shape` problem: event `ev` is JSON, but not what the API sends (`want`).
    fn bad_shape(&mut self, ev: &SseEvent, want: &str) {
        let n = ev.index;
        self.problem(
            Some(n),
            "bad_shape",
            format!("event {n} is JSON but not {want}: {}", excerpt(&ev.data)),
        );
    }

    pub(super) fn new_call(&mut self, rec: CallRecord, event: usize) -> usize {
        self.r.message.tool_calls.push(rec);
        self.r.call_events.push(vec![event]);
        self.last_args_event.push(None);
        self.r.message.tool_calls.len() - 1
    }

    pub(super) fn touch(&mut self, call: usize, event: usize) {
        let evs = &mut self.r.call_events[call];
        if evs.last() != Some(&event) {
            evs.push(event);
        }
    }

    pub(super) fn error_event(&mut self, event: usize, err: &Value) {
        let msg = err
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| err.to_string());
        // a parse failure is `server.parse_error`, any other `stream.error_event`: both
        // judged from this problem by diagnose (input::error_events)
        self.problem(Some(event), "error_event", format!("error event: {msg}"));
    }

    /// Ends the reassembly: records each call's last arguments event.
    pub(super) fn finish(mut self, _api: Api) -> Reassembled {
        self.r.args_events = std::mem::take(&mut self.last_args_event);
        // a delta that named no tool continues a call that was named earlier
        let calls = &self.r.message.tool_calls;
        for a in self
            .r
            .args_not_string
            .iter_mut()
            .filter(|a| a.name.is_empty())
        {
            if let Some(c) = calls.iter().find(|c| c.index == Some(a.index)) {
                a.name = c.name.clone();
            }
        }
        self.r
    }
}

fn str_field<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

fn args_text(v: Option<&Value>) -> Option<String> {
    match v {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => Some(other.to_string()),
    }
}

/// What a chat stream reassembler (OpenAI chunks, Anthropic events) does with one event;
/// [`drive`] does what they share.
trait ChatStream {
    /// What ends the stream, in problems' words (`[DONE]`, `message_stop`).
    const END: &'static str;
    /// The API whose stream this is.
    const API: Api;
    /// Reads event `ev` (not after the end); true when it ends the stream.
    fn event(&mut self, b: &mut Builder, ev: &SseEvent) -> bool;
    /// After the last event, before the last mark.
    fn close(&mut self, _b: &mut Builder) {}
}

/// The loop the chat reassemblers share: a mark before each event, an event after the end
/// noted (`after_end`) and skipped, the others read by `s`; then a last mark and
/// [`end_checks`].
fn drive<S: ChatStream>(owned: Vec<SseEvent>, mut s: S) -> Reassembled {
    let events = owned.as_slice();
    let mut b = Builder::default();
    let mut done: Option<usize> = None;
    for ev in events {
        b.mark();
        let n = ev.index;
        if b.after_end(n, done, S::END) {
            continue;
        }
        if s.event(&mut b, ev) {
            done = Some(n);
        }
    }
    s.close(&mut b);
    b.mark();
    // taken, not copied (`check` on one huge stream holds its events once, issue #27 item 2)
    b.r.events = owned;
    end_checks(&mut b, done, S::END);
    b.finish(S::API)
}

/// Reassembles an OpenAI `chat.completion.chunk` stream (first choice, `index` 0; other choices
/// are noted as problems). Shape: see [`Reassembled`].
pub fn reassemble_openai(events: &[SseEvent]) -> Reassembled {
    reassemble_openai_owned(events.to_vec())
}

/// [`reassemble_openai`] over events it takes: they become [`Reassembled::events`] without a
/// copy (`check` on one huge stream holds its events once, issue #27 item 2).
pub fn reassemble_openai_owned(owned: Vec<SseEvent>) -> Reassembled {
    drive(owned, OpenaiStream::default())
}

/// What [`reassemble_openai`] keeps between events.
#[derive(Default)]
struct OpenaiStream {
    /// The call the last tool-call delta went to (where a delta without `index` continues).
    last_call: Option<usize>,
    /// An `extra_choice` problem was recorded.
    extra_choice_noted: bool,
}

impl ChatStream for OpenaiStream {
    const END: &'static str = "[DONE]";
    const API: Api = Api::Openai;

    fn event(&mut self, b: &mut Builder, ev: &SseEvent) -> bool {
        let n = ev.index;
        if ev.data.trim() == "[DONE]" {
            return true;
        }
        let Some(v) = b.event_json(ev) else {
            return false;
        };
        if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
            b.error_event(n, err);
            return false;
        }
        if ev.event.as_deref() == Some("error") {
            b.error_event(n, &v);
            return false;
        }
        if !v.get("choices").is_some_and(Value::is_array) {
            b.bad_shape(
                ev,
                "a chat.completion.chunk object with a \"choices\" array",
            );
            return false;
        }
        if b.r.message.model.is_none() {
            b.r.message.model = str_field(&v, "model").map(str::to_owned);
        }
        if let Some(u) = v.get("usage").filter(|u| !u.is_null()) {
            b.r.message.usage = Some(u.clone());
            b.usage = true;
        }
        b.pieces(n, &v);
        // llama-server -v (tools/server/server-context.cpp, build 11434) repeats `__verbose` in the
        // final chunk of a stream with `content: ""`: the raw text is only known when non-empty;
        // otherwise readers fall back to the concatenated deltas.
        if let Some(raw) = v
            .pointer("/__verbose/content")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        {
            b.r.message.raw_text = Some(raw.to_owned());
        }
        for ch in v
            .get("choices")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            self.choice(b, n, ch);
        }
        false
    }
}

impl OpenaiStream {
    /// One entry of event `n`'s `choices`: its `delta` (else `message`) and `finish_reason`.
    fn choice(&mut self, b: &mut Builder, n: usize, ch: &Value) {
        if ch.get("index").and_then(Value::as_u64).unwrap_or(0) != 0 {
            if !self.extra_choice_noted {
                self.extra_choice_noted = true;
                b.problem(
                    Some(n),
                    "extra_choice",
                    "the stream carries more than one choice; only choice 0 is reassembled".into(),
                );
            }
            return;
        }
        let delta = ch
            .get("delta")
            .or_else(|| ch.get("message"))
            .unwrap_or(&Value::Null);
        if let Some(s) = str_field(delta, "content") {
            b.r.message.content.push_str(s);
        }
        if let Some(s) =
            str_field(delta, "reasoning_content").or_else(|| str_field(delta, "reasoning"))
        {
            b.r.message.reasoning.push_str(s);
        }
        if let Some(tcs) = delta.get("tool_calls").and_then(Value::as_array) {
            for (position, tc) in tcs.iter().enumerate() {
                self.tool_call_delta(b, n, position, tc);
            }
        }
        if let Some(fr) = str_field(ch, "finish_reason") {
            b.r.message.finish_reason = Some(fr.to_owned());
            b.r.finish_event = Some(n);
        }
    }

    /// One `tool_calls[]` delta (at `position` in event `n`'s list): added to the call its
    /// `index` names (else the last call, or a new one), arguments appended.
    fn tool_call_delta(&mut self, b: &mut Builder, n: usize, position: usize, tc: &Value) {
        let idx = tc.get("index").and_then(Value::as_u64);
        args_not_string(b, n, idx.unwrap_or(position as u64), tc);
        let id = str_field(tc, "id").filter(|s| !s.is_empty());
        let name = tc
            .pointer("/function/name")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let args = args_text(tc.pointer("/function/arguments"));
        let slot = match idx {
            Some(i) => call_by_index(b, n, i, id, name),
            None => self.continuation(b, n, id, name),
        };
        let k = match slot {
            Some(k) => {
                extend_call(b, n, k, id, name);
                k
            }
            None => open_call(b, n, idx, id, name),
        };
        if let Some(a) = args.filter(|a| !a.is_empty()) {
            b.r.message.tool_calls[k].arguments.push_str(&a);
            b.last_args_event[k] = Some(n);
        }
        self.last_call = Some(k);
    }

    /// The call a delta without `index` continues (the last one, unless it carries another
    /// `id`), with its `stream.missing_index` finding; `None`: a new call.
    fn continuation(
        &self,
        b: &mut Builder,
        n: usize,
        id: Option<&str>,
        name: Option<&str>,
    ) -> Option<usize> {
        let cont = match (self.last_call, id) {
            (Some(k), Some(new)) => (b.r.message.tool_calls[k]
                .id
                .as_deref()
                .is_none_or(|old| old == new))
            .then_some(k),
            (Some(k), None) => Some(k),
            (None, _) => None,
        };
        let tool = name
            .map(str::to_owned)
            .or(cont.map(|k| b.r.message.tool_calls[k].name.clone()));
        b.finding(
            Rule::StreamMissingIndex,
            n,
            match cont {
                Some(k) => format!("tool-call delta without `index` in event {n}; taken as a continuation of call {k}"),
                None => format!("tool-call delta without `index` in event {n}; taken as a new call"),
            },
            "Every `tool_calls[]` delta must carry `index` (OpenAI chat.completion.chunk); strict clients drop or misplace it.",
            tool.as_deref(),
            None,
        );
        cont
    }
}

/// Notes the first delta per call `index` whose `function.arguments` is JSON other than a
/// string ([`Reassembled::args_not_string`]).
fn args_not_string(b: &mut Builder, n: usize, index: u64, tc: &Value) {
    if let Some(a) = tc
        .pointer("/function/arguments")
        .filter(|a| !a.is_string() && !a.is_null())
        && !b.r.args_not_string.iter().any(|x| x.index == index)
    {
        b.r.args_not_string.push(ArgsNotString {
            index,
            event: n,
            name: str_field(tc.get("function").unwrap_or(&Value::Null), "name")
                .unwrap_or("")
                .to_owned(),
            value: a.clone(),
        });
    }
}

/// The last call with `index` `i`, unless the delta carries an `id` other than that call's
/// (`stream.missing_index`: the index is reused); `None`: a new call.
fn call_by_index(
    b: &mut Builder,
    n: usize,
    i: u64,
    id: Option<&str>,
    name: Option<&str>,
) -> Option<usize> {
    let calls = &b.r.message.tool_calls;
    let k = calls.iter().rposition(|c| c.index == Some(i))?;
    match (id, calls[k].id.as_deref()) {
        (Some(new), Some(old)) if new != old => {
            let old = old.to_owned();
            b.finding(
                Rule::StreamMissingIndex,
                n,
                format!("index {i} is reused for a new call (id {new}, earlier call id {old}): the index does not identify the call"),
                "Each parallel tool call needs its own `index`; clients merge deltas by index and would concatenate both calls.",
                name,
                None,
            );
            None
        }
        _ => Some(k),
    }
}

/// A delta for call `k` in event `n`: its `id` when the call has none; its `name` when the
/// call has none, else `stream.name_repeated` (sent again, re-sent longer, or continued).
fn extend_call(b: &mut Builder, n: usize, k: usize, id: Option<&str>, name: Option<&str>) {
    b.touch(k, n);
    let call = &mut b.r.message.tool_calls[k];
    if call.id.is_none() {
        call.id = id.map(str::to_owned);
    }
    let Some(nm) = name else { return };
    if call.name.is_empty() {
        call.name = nm.to_owned();
        return;
    }
    let old = call.name.clone();
    let msg = if nm == old {
        format!("the name \"{nm}\" of call {k} is sent again in event {n}")
    } else if nm.starts_with(&old) {
        call.name = nm.to_owned();
        format!("the name of call {k} is re-sent in event {n} as \"{nm}\" (was \"{old}\")")
    } else {
        call.name.push_str(nm);
        format!("the name of call {k} continues in event {n} (\"{old}\" + \"{nm}\")")
    };
    b.finding(
        Rule::StreamNameRepeated,
        n,
        msg,
        "Send `function.name` once, in the first delta of a call; clients that concatenate every string field end up with a doubled name.",
        Some(&old),
        None,
    );
}

/// Starts a call from its first delta (event `n`); `stream.missing_id` when it has no `id`.
fn open_call(
    b: &mut Builder,
    n: usize,
    idx: Option<u64>,
    id: Option<&str>,
    name: Option<&str>,
) -> usize {
    let k = b.new_call(
        CallRecord {
            index: idx,
            id: id.map(str::to_owned),
            name: name.unwrap_or("").to_owned(),
            arguments: String::new(),
        },
        n,
    );
    if id.is_none() {
        b.finding(
            Rule::StreamMissingId,
            n,
            format!("the first delta of tool call {k} (event {n}) has no `id`"),
            "The first delta of each call must carry `id`; clients need it to send the tool result back (tool_call_id).",
            name,
            None,
        );
    }
    k
}

/// The end of a stream: a cut last event (`truncated`), no terminal event (`no_end`). `done`
/// is the terminal event; one that is itself the cut last event was never dispatched (WHATWG
/// HTML §9.2.6: an event without its blank line is discarded), so the stream has none.
fn end_checks(b: &mut Builder, done: Option<usize>, end_name: &str) {
    let cut = b.r.events.last().filter(|e| !e.complete).map(|e| e.index);
    let ended = done.is_some_and(|d| Some(d) != cut);
    if let Some(last) = b.r.events.last().filter(|e| !e.complete) {
        let (i, off) = (last.index, last.offset);
        b.problem(
            Some(i),
            "truncated",
            format!("the stream ends inside event {i} (byte {off}): no blank line after it"),
        );
    }
    if !ended && !b.r.problems.iter().any(|p| p.kind == "error_event") {
        b.problem(
            None,
            "no_end",
            format!("the stream ends without {end_name}"),
        );
    }
}

/// Reassembles an Anthropic Messages stream. Shape: see [`Reassembled`]; `finish_reason` holds
/// `stop_reason`, `stop_sequence` the matched stop sequence, `usage` the `message_start` usage
/// updated by `message_delta` usage.
pub fn reassemble_anthropic(events: &[SseEvent]) -> Reassembled {
    reassemble_anthropic_owned(events.to_vec())
}

/// [`reassemble_anthropic`] over events it takes: they become [`Reassembled::events`] without a
/// copy (`check` on one huge stream holds its events once, issue #27 item 2).
pub fn reassemble_anthropic_owned(owned: Vec<SseEvent>) -> Reassembled {
    drive(owned, AnthropicStream::default())
}

/// What an Anthropic content block holds.
#[derive(Clone, Copy, PartialEq)]
enum BlockKind {
    Text,
    Thinking,
    /// A `tool_use` block: its position in `message.tool_calls`.
    Tool(usize),
    Other,
}

/// What [`reassemble_anthropic`] keeps between events.
#[derive(Default)]
struct AnthropicStream {
    /// (index, kind, the `input` `content_block_start` carried when not empty).
    blocks: Vec<(u64, BlockKind, Option<String>)>,
    /// The block the last `content_block_*` event named.
    last_block: Option<u64>,
}

impl ChatStream for AnthropicStream {
    const END: &'static str = "message_stop";
    const API: Api = Api::Anthropic;

    fn event(&mut self, b: &mut Builder, ev: &SseEvent) -> bool {
        let n = ev.index;
        let Some(v) = b.event_json(ev) else {
            return false;
        };
        // llama.cpp sends `event: error` with data `{code, message, type: "server_error"}`.
        let ty = if ev.event.as_deref() == Some("error") {
            "error"
        } else {
            str_field(&v, "type").or(ev.event.as_deref()).unwrap_or("")
        };
        if ty.is_empty() || !v.is_object() {
            b.bad_shape(
                ev,
                "an object with a \"type\" (message_start, content_block_delta, …)",
            );
            return false;
        }
        match ty {
            "message_start" => {
                let m = v.get("message").unwrap_or(&Value::Null);
                b.r.message.model = str_field(m, "model").map(str::to_owned);
                if let Some(u) = m.get("usage").filter(|u| !u.is_null()) {
                    b.r.message.usage = Some(u.clone());
                    b.usage = true;
                }
            }
            "content_block_start" => self.block_start(b, n, &v),
            "content_block_delta" => self.block_delta(b, n, &v),
            "content_block_stop" => self.block_stop(b, n, &v),
            "message_delta" => message_delta(b, n, &v),
            "message_stop" => return true,
            "ping" => {}
            "error" => {
                let err = v.get("error").filter(|e| e.is_object()).unwrap_or(&v);
                b.error_event(n, err);
            }
            _ => {}
        }
        false
    }

    /// A tool block whose input came whole in content_block_start and never got a stop.
    fn close(&mut self, b: &mut Builder) {
        for (_, kind, input) in &self.blocks {
            if let (BlockKind::Tool(k), Some(input)) = (kind, input)
                && b.r.message.tool_calls[*k].arguments.is_empty()
            {
                b.r.message.tool_calls[*k].arguments = input.clone();
            }
        }
    }
}

impl AnthropicStream {
    /// The block `index` of `content_block_*` event `n` (`what`); without one, `fallback`
    /// with a `stream.missing_index` finding.
    fn block_index(b: &mut Builder, n: usize, v: &Value, what: &str, fallback: u64) -> u64 {
        if let Some(i) = v.get("index").and_then(Value::as_u64) {
            return i;
        }
        b.finding(
            Rule::StreamMissingIndex,
            n,
            format!("{what} without `index` in event {n}; taken as block {fallback}"),
            "Every content_block_* event must carry the block `index`.",
            None,
            None,
        );
        fallback
    }

    /// `content_block_start`: a text or thinking block's first text, a tool_use block's call.
    fn block_start(&mut self, b: &mut Builder, n: usize, v: &Value) {
        let next = self.last_block.map_or(0, |l| l + 1);
        let i = Self::block_index(b, n, v, "content_block_start", next);
        let cb = v.get("content_block").unwrap_or(&Value::Null);
        let kind = match str_field(cb, "type").unwrap_or("") {
            "text" => {
                b.r.message
                    .content
                    .push_str(str_field(cb, "text").unwrap_or(""));
                BlockKind::Text
            }
            "thinking" => {
                b.r.message
                    .reasoning
                    .push_str(str_field(cb, "thinking").unwrap_or(""));
                BlockKind::Thinking
            }
            "tool_use" | "server_tool_use" => {
                let id = str_field(cb, "id").filter(|s| !s.is_empty());
                let name = str_field(cb, "name").unwrap_or("");
                let k = b.new_call(
                    CallRecord {
                        index: Some(i),
                        id: id.map(str::to_owned),
                        name: name.to_owned(),
                        arguments: String::new(),
                    },
                    n,
                );
                if id.is_none() {
                    b.finding(
                        Rule::StreamMissingId,
                        n,
                        format!("tool_use block {i} (event {n}) has no `id`"),
                        "A tool_use block needs its `id`; the client answers with a tool_result carrying tool_use_id.",
                        Some(name),
                        None,
                    );
                }
                BlockKind::Tool(k)
            }
            _ => BlockKind::Other,
        };
        let start_input = cb
            .get("input")
            .filter(|x| x.as_object().is_some_and(|o| !o.is_empty()))
            .map(Value::to_string);
        self.blocks.retain(|(j, _, _)| *j != i);
        self.blocks.push((i, kind, start_input));
        self.last_block = Some(i);
    }

    /// `content_block_delta`: text, thinking or a tool call's `partial_json` appended; a delta
    /// for a block no `content_block_start` opened opens it.
    fn block_delta(&mut self, b: &mut Builder, n: usize, v: &Value) {
        let d = v.get("delta").unwrap_or(&Value::Null);
        let dty = str_field(d, "type").unwrap_or("");
        let last = self.last_block.unwrap_or(0);
        let i = Self::block_index(b, n, v, "content_block_delta", last);
        let kind = match self.blocks.iter().find(|(j, _, _)| *j == i) {
            Some(x) => x.1,
            None => self.orphan_block(b, n, i, dty),
        };
        self.last_block = Some(i);
        match (dty, kind) {
            ("text_delta", _) => {
                b.r.message
                    .content
                    .push_str(str_field(d, "text").unwrap_or(""))
            }
            ("thinking_delta", _) => {
                b.r.message
                    .reasoning
                    .push_str(str_field(d, "thinking").unwrap_or(""))
            }
            ("input_json_delta", BlockKind::Tool(k)) => {
                b.touch(k, n);
                let pj = str_field(d, "partial_json").unwrap_or("");
                if !pj.is_empty() {
                    b.r.message.tool_calls[k].arguments.push_str(pj);
                    b.last_args_event[k] = Some(n);
                }
            }
            _ => {}
        }
    }

    /// Block `i`, which a delta of type `dty` (event `n`) names but no `content_block_start`
    /// opened: `stream.missing_index`, and the block opened with the kind the delta implies.
    fn orphan_block(&mut self, b: &mut Builder, n: usize, i: u64, dty: &str) -> BlockKind {
        b.finding(
            Rule::StreamMissingIndex,
            n,
            format!("content_block_delta for block {i} in event {n}, but no content_block_start opened block {i}"),
            "Send content_block_start before the deltas of a block.",
            None,
            None,
        );
        let k = match dty {
            "text_delta" => BlockKind::Text,
            "thinking_delta" | "signature_delta" => BlockKind::Thinking,
            "input_json_delta" => {
                let k = b.new_call(
                    CallRecord {
                        index: Some(i),
                        ..Default::default()
                    },
                    n,
                );
                BlockKind::Tool(k)
            }
            _ => BlockKind::Other,
        };
        self.blocks.push((i, k, None));
        k
    }

    /// `content_block_stop`: a tool block with no deltas takes the input its start carried.
    fn block_stop(&mut self, b: &mut Builder, n: usize, v: &Value) {
        if let Some(i) = v.get("index").and_then(Value::as_u64)
            && let Some((_, BlockKind::Tool(k), Some(input))) =
                self.blocks.iter().find(|(j, _, _)| *j == i)
        {
            let k = *k;
            b.touch(k, n);
            if b.r.message.tool_calls[k].arguments.is_empty() {
                b.r.message.tool_calls[k].arguments = input.clone();
            }
        }
    }
}

/// `message_delta`: `stop_reason`, `stop_sequence`, and its `usage` merged into the message's.
fn message_delta(b: &mut Builder, n: usize, v: &Value) {
    let d = v.get("delta").unwrap_or(&Value::Null);
    if let Some(sr) = str_field(d, "stop_reason") {
        b.r.message.finish_reason = Some(sr.to_owned());
        b.r.finish_event = Some(n);
    }
    if let Some(ss) = str_field(d, "stop_sequence") {
        b.r.message.stop_sequence = Some(ss.to_owned());
    }
    if let Some(u) = v.get("usage").and_then(Value::as_object) {
        b.usage = true;
        let mut merged =
            b.r.message
                .usage
                .take()
                .and_then(|x| x.as_object().cloned())
                .unwrap_or_default();
        for (k, x) in u {
            merged.insert(k.clone(), x.clone());
        }
        b.r.message.usage = Some(Value::Object(merged));
    }
}

/// Reassembles a raw-completion stream: llama-server `/completion` (`data: {"content", "stop",
/// "stop_type", …}`) or OpenAI `/v1/completions` (`choices[0].text`, `finish_reason`).
pub fn reassemble_completion(events: &[SseEvent]) -> Reassembled {
    reassemble_completion_owned(events.to_vec())
}

/// [`reassemble_completion`] over events it takes: they become [`Reassembled::events`] without a
/// copy (`check` on one huge stream holds its events once, issue #27 item 2).
pub fn reassemble_completion_owned(owned: Vec<SseEvent>) -> Reassembled {
    let events = owned.as_slice();
    let mut b = Builder::default();
    let mut done: Option<usize> = None;
    for ev in events {
        b.mark();
        let n = ev.index;
        if ev.data.trim() == "[DONE]" {
            // `/v1/completions` ends with it; after a `/completion` `"stop": true` it is
            // redundant, not an event after the end
            done = done.or(Some(n));
            continue;
        }
        if b.after_end(n, done, "the final event") {
            continue;
        }
        let v: Value = match serde_json::from_str(&ev.data) {
            Ok(v) => v,
            Err(e) => {
                b.problem(
                    Some(n),
                    if ev.complete { "bad_json" } else { "truncated" },
                    format!("event {n} data is not JSON: {e}"),
                );
                continue;
            }
        };
        if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
            b.error_event(n, err);
            continue;
        }
        if v.get("content").is_none() && !v.get("choices").is_some_and(Value::is_array) {
            b.bad_shape(
                ev,
                "a /completion object with \"content\" or a /v1/completions object with \"choices\"",
            );
            continue;
        }
        if let Some(c) = str_field(&v, "content") {
            b.r.message.content.push_str(c);
            if v.get("stop").and_then(Value::as_bool) == Some(true) {
                done = Some(n);
                b.r.message.finish_reason = str_field(&v, "stop_type").map(str::to_owned);
                b.r.finish_event = Some(n);
                b.r.message.stop_sequence = str_field(&v, "stopping_word")
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned);
            }
        } else if let Some(ch) = v.pointer("/choices/0") {
            b.r.message
                .content
                .push_str(str_field(ch, "text").unwrap_or(""));
            if let Some(fr) = str_field(ch, "finish_reason") {
                b.r.message.finish_reason = Some(fr.to_owned());
                b.r.finish_event = Some(n);
            }
        }
        if b.r.message.model.is_none() {
            b.r.message.model = str_field(&v, "model").map(str::to_owned);
        }
        if let Some(u) = v.get("usage").filter(|u| !u.is_null()) {
            b.r.message.usage = Some(u.clone());
            b.usage = true;
        }
        b.pieces(n, &v);
    }
    b.mark();
    b.r.events = owned;
    end_checks(&mut b, done, "a final event");
    b.finish(Api::Completion)
}

/// The stream-contract findings of a decoded stream's problems (SSE events or Ollama NDJSON
/// lines; `unit` names them in messages):
///
/// * `stream.malformed_event` — an event whose data is not JSON (`bad_json`) or is JSON but
///   not the API's event (`bad_shape`): an SDK raises on it or drops it;
/// * `stream.cut_event` — the last event is cut off (no blank line / newline after it);
/// * `stream.no_terminal` — no terminal event: OpenAI chat and `/v1/completions` `data:
///   [DONE]`, Anthropic `message_stop`, llama-server `/completion` `"stop": true`, Ollama
///   `"done": true` (a stream that ended with an error event is `stream.error_event`'s);
/// * `stream.after_terminal` — events after the terminal one.
///
/// A cut or unterminated stream is the server's fault only when the recording ended it
/// normally or the upstream failed: with `outcome` `client_disconnected` or `shutdown` the
/// client or toolscope ended it, so `stream.cut_event` and `stream.no_terminal` are not
/// reported.
pub fn contract_findings(
    problems: &[StreamProblem],
    outcome: crate::session::Outcome,
    unit: &str,
) -> Vec<Finding> {
    use crate::session::Outcome;
    let cut_by_us = matches!(outcome, Outcome::ClientDisconnected | Outcome::Shutdown);
    let mut out = Vec::new();
    let mut after: Vec<usize> = Vec::new();
    for p in problems {
        let f = match p.kind.as_str() {
            "bad_json" | "bad_shape" => Finding::new(
                Rule::StreamMalformedEvent,
                p.message.clone(),
                "a client SDK raises on this event or skips it: whatever it carried is lost; the server (or a proxy in between) wrote something other than the API's event",
            ),
            "truncated"
                if !cut_by_us && !out.iter().any(|f: &Finding| f.rule == Rule::StreamCutEvent) =>
            {
                Finding::new(
                    Rule::StreamCutEvent,
                    p.message.clone(),
                    "the stream stopped mid-event: the connection was closed while the server was still writing; what the event carried is lost",
                )
            }
            "no_end" if !cut_by_us => Finding::new(
                Rule::StreamNoTerminal,
                p.message.clone(),
                "the server closed the stream without its terminal event: a client cannot tell a finished answer from a cut one (the OpenAI and Anthropic SDKs treat it as complete)",
            ),
            "after_end" => {
                after.extend(p.event);
                continue;
            }
            _ => continue,
        };
        out.push(f.with_evidence(Evidence {
            pane: Some(Pane::Stream),
            event: p.event,
            ..Default::default()
        }));
    }
    if let Some(&first) = after.first() {
        out.push(
            Finding::new(
                Rule::StreamAfterTerminal,
                format!(
                    "{} {unit}(s) arrive after the terminal one, the first {unit} {first}",
                    after.len()
                ),
                "a client stops reading at the terminal event: what came after it is never seen",
            )
            .with_evidence(Evidence {
                pane: Some(Pane::Stream),
                event: Some(first),
                ..Default::default()
            }),
        );
    }
    out
}

/// True when a `Content-Type` value names an SSE stream (`text/event-stream`, any case,
/// parameters allowed). WHATWG HTML "Server-sent events", §9.2.
pub fn is_event_stream(content_type: &str) -> bool {
    content_type
        .trim_start()
        .to_ascii_lowercase()
        .starts_with("text/event-stream")
}

/// True when `ex`'s response is an SSE stream: recorded as chunks, or a body whose
/// `content-type` is `text/event-stream` ([`is_event_stream`]). The one answer to "is this
/// SSE" for [`decode_exchange`], diagnose and the inspector.
pub fn is_sse(ex: &Exchange) -> bool {
    ex.response.as_ref().is_some_and(|r| r.chunks.is_some())
        || ex
            .response_header("content-type")
            .is_some_and(is_event_stream)
}

/// Decodes one recorded exchange's response: SSE (recorded chunks, or a body whose
/// `content-type` is `text/event-stream`) or a JSON body, by the API of the request path
/// (`/v1/chat/completions` → OpenAI, `/v1/messages` → Anthropic, `/completion`,
/// `/v1/completions` → raw completion; Ollama `/api/chat`, `/api/generate` → NDJSON, see
/// [`super::ollama`]). Findings carry the exchange id.
///
/// Returns `None` for other paths, a missing response, or a non-stream body that is not a
/// message (e.g. an HTTP error body `{"error": …}`; status-based rules are diagnose's).
pub fn decode_exchange(ex: &Exchange) -> Option<Reassembled> {
    let api = ex.api();
    if api == Api::Other {
        return None;
    }
    let resp = ex.response.as_ref()?;
    // Ollama's native /api/chat and /api/generate: NDJSON, decoded in `super::ollama`.
    if crate::session::is_ollama_native(&ex.request.path) {
        let mut r = super::ollama::decode_ollama_exchange(ex)?;
        let contract = contract_findings(&r.problems, ex.outcome, "line");
        r.findings.extend(contract);
        for f in &mut r.findings {
            f.exchange = Some(ex.id);
        }
        return Some(r);
    }
    let mut r = if is_sse(ex) || ex.websocket.is_some() {
        let events = match &resp.chunks {
            // Responses over a WebSocket: one JSON event per server message.
            Some(_) if ex.websocket.is_some() => super::sse::websocket_events(ex),
            // chunk by chunk, never concatenated (issue #27 item 2)
            Some(_) => decode_chunks(super::sse::recorded_chunks(ex)),
            None => decode_bytes(&ex.response_bytes()),
        };
        match api {
            Api::Openai => reassemble_openai_owned(events),
            Api::Anthropic => reassemble_anthropic_owned(events),
            Api::Responses => super::responses::reassemble_responses(&events),
            _ => reassemble_completion_owned(events),
        }
    } else {
        let body: Value = resp.body.as_ref()?.json().ok()?;
        let m = from_response_json(api.as_str(), &body)?;
        Reassembled {
            message: m,
            ..Default::default()
        }
    };
    if api == Api::Responses && is_sse(ex) {
        // crate::stream::responses writes the stream-contract findings itself (with their
        // event); judging its problems again would report each fault twice. A stream the
        // client or toolscope ended is not the server's cut.
        if matches!(
            ex.outcome,
            crate::session::Outcome::ClientDisconnected | crate::session::Outcome::Shutdown
        ) {
            r.findings
                .retain(|f| !matches!(f.rule, Rule::StreamCutEvent | Rule::StreamNoTerminal));
        }
    } else {
        let contract = contract_findings(&r.problems, ex.outcome, "event");
        r.findings.extend(contract);
    }
    for f in &mut r.findings {
        f.exchange = Some(ex.id);
    }
    Some(r)
}

/// Issue #27 item 13: the stream contract — malformed events, a missing terminal event, events
/// after it, a cut last event — for SSE (OpenAI, Anthropic, completion) and Ollama NDJSON.
#[cfg(test)]
mod contract_tests {
    use super::*;
    use crate::session::Outcome;
    use crate::stream::ollama::{OllamaEndpoint, decode_lines, reassemble_ollama};
    use crate::stream::sse::decode_bytes;

    fn ids(fs: &[Finding]) -> Vec<&'static str> {
        fs.iter().map(|f| f.rule.id()).collect()
    }

    fn sse(api: &str, body: &str, outcome: Outcome) -> Vec<Finding> {
        let ev = decode_bytes(body.as_bytes());
        let r = match api {
            "openai" => reassemble_openai(&ev),
            "anthropic" => reassemble_anthropic(&ev),
            _ => reassemble_completion(&ev),
        };
        contract_findings(&r.problems, outcome, "event")
    }

    fn ndjson(body: &str, outcome: Outcome) -> Vec<Finding> {
        let ev = decode_lines([(body.as_bytes(), None)]);
        let r = reassemble_ollama(&ev, OllamaEndpoint::Chat);
        contract_findings(&r.problems, outcome, "line")
    }

    const OA: &str = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n";
    const OA_END: &str = "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
    const AN: &str = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"m\"}}\n\nevent: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n";
    const AN_END: &str = "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    const CO: &str = "data: {\"content\":\"a\",\"stop\":false}\n\n";
    const CO_END: &str = "data: {\"content\":\"\",\"stop\":true,\"stop_type\":\"eos\"}\n\n";
    const OL: &str =
        "{\"model\":\"m\",\"message\":{\"role\":\"assistant\",\"content\":\"a\"},\"done\":false}\n";
    const OL_END: &str = "{\"model\":\"m\",\"message\":{\"role\":\"assistant\",\"content\":\"\"},\"done_reason\":\"stop\",\"done\":true}\n";

    #[test]
    fn whole_streams_keep_the_contract() {
        let c = Outcome::Complete;
        assert!(sse("openai", &format!("{OA}{OA_END}"), c).is_empty());
        assert!(sse("anthropic", &format!("{AN}{AN_END}"), c).is_empty());
        assert!(sse("completion", &format!("{CO}{CO_END}"), c).is_empty());
        assert!(ndjson(&format!("{OL}{OL_END}"), c).is_empty());
        // llama-server's usage-only last chunk has an empty choices array
        let usage = "data: {\"choices\":[],\"usage\":{\"total_tokens\":3}}\n\n";
        assert!(sse("openai", &format!("{OA}{usage}data: [DONE]\n\n"), c).is_empty());
    }

    #[test]
    fn malformed_events() {
        let c = Outcome::Complete;
        for (api, body) in [
            ("openai", format!("{OA}data: {{not json}}\n\n{OA_END}")),
            (
                "openai",
                format!("{OA}data: {{\"object\":\"x\"}}\n\n{OA_END}"),
            ),
            ("openai", format!("{OA}data: [1,2]\n\n{OA_END}")),
            (
                "anthropic",
                format!("{AN}data: {{\"delta\":1}}\n\n{AN_END}"),
            ),
            ("anthropic", format!("{AN}data: nope\n\n{AN_END}")),
            ("completion", format!("{CO}data: {{\"x\":1}}\n\n{CO_END}")),
        ] {
            let f = sse(api, &body, c);
            assert_eq!(ids(&f), ["stream.malformed_event"], "{api}: {body}");
            // the first event after the opening ones
            let first = if api == "anthropic" { 2 } else { 1 };
            assert_eq!(f[0].evidence.event, Some(first), "{api}");
        }
        for body in [
            format!("{OL}{{broken\n{OL_END}"),
            format!("{OL}{{\"x\":1}}\n{OL_END}"),
        ] {
            let f = ndjson(&body, c);
            assert_eq!(ids(&f), ["stream.malformed_event"], "{body}");
            assert_eq!(f[0].evidence.event, Some(1));
        }
    }

    #[test]
    fn missing_terminal_event() {
        let c = Outcome::Complete;
        let oa_no_done = format!(
            "{OA}data: {{\"choices\":[{{\"index\":0,\"delta\":{{}},\"finish_reason\":\"stop\"}}]}}\n\n"
        );
        assert_eq!(ids(&sse("openai", &oa_no_done, c)), ["stream.no_terminal"]);
        assert_eq!(ids(&sse("anthropic", AN, c)), ["stream.no_terminal"]);
        assert_eq!(ids(&sse("completion", CO, c)), ["stream.no_terminal"]);
        assert_eq!(ids(&ndjson(OL, c)), ["stream.no_terminal"]);
        // the client (or toolscope's shutdown) ended it: not the server's defect
        for o in [Outcome::ClientDisconnected, Outcome::Shutdown] {
            assert!(sse("openai", &oa_no_done, o).is_empty());
            assert!(ndjson(OL, o).is_empty());
        }
        // the upstream failing is the server's
        assert_eq!(
            ids(&ndjson(OL, Outcome::UpstreamError)),
            ["stream.no_terminal"]
        );
        // a stream ending in an error event is stream.error_event's, not this rule's
        let err = format!("{OA}data: {{\"error\":{{\"message\":\"boom\"}}}}\n\n");
        assert!(sse("openai", &err, c).is_empty());
    }

    #[test]
    fn events_after_the_terminal_one() {
        let c = Outcome::Complete;
        let f = sse("openai", &format!("{OA}{OA_END}{OA}{OA}"), c);
        assert_eq!(ids(&f), ["stream.after_terminal"]);
        assert_eq!(f[0].evidence.event, Some(3));
        assert!(f[0].message.starts_with("2 event(s)"), "{}", f[0].message);
        let f = sse("anthropic", &format!("{AN}{AN_END}{AN}"), c);
        assert_eq!(ids(&f), ["stream.after_terminal"]);
        let f = sse("completion", &format!("{CO}{CO_END}{CO}"), c);
        assert_eq!(ids(&f), ["stream.after_terminal"]);
        let f = ndjson(&format!("{OL}{OL_END}{OL}"), c);
        assert_eq!(ids(&f), ["stream.after_terminal"]);
        assert_eq!(f[0].evidence.event, Some(2));
    }

    #[test]
    fn a_cut_last_event() {
        let c = Outcome::Complete;
        let f = sse("openai", &format!("{OA}data: {{\"choices\":[{{\"ind"), c);
        assert_eq!(ids(&f), ["stream.cut_event", "stream.no_terminal"]);
        assert_eq!(f[0].evidence.event, Some(1));
        // a whole event without its blank line is cut too
        let f = sse("anthropic", &format!("{AN}{}", AN_END.trim_end()), c);
        assert_eq!(ids(&f), ["stream.cut_event", "stream.no_terminal"], "{f:?}");
        let f = ndjson(&format!("{OL}{{\"model\":\"m\",\"mess"), c);
        assert_eq!(ids(&f), ["stream.cut_event", "stream.no_terminal"]);
        assert!(
            sse(
                "openai",
                &format!("{OA}data: {{\"cho"),
                Outcome::ClientDisconnected
            )
            .is_empty()
        );
    }
}
