//! The OpenAI Responses API's reply (`POST /v1/responses`): a non-streamed response object, or
//! its typed SSE stream, read into the one [`AssistantMessage`] / [`Reassembled`] the other
//! APIs give, with stream-contract findings.
//!
//! Shapes follow the official `openai` Python SDK's types (`openai/types/responses/`:
//! `response.py`, `response_stream_event.py` and one file per event) and llama-server b11434's
//! writer (tools/server/server-task.cpp `to_json_oaicompat_resp` :528–596 and
//! `to_json_oaicompat_resp_stream` :598–703, partial events :1166–1300).
//!
//! The response object: `output` items — `message` (`content[]` of `output_text` / `refusal`
//! parts), `reasoning` (`content[]` of `reasoning_text`, `summary[]` of `summary_text`),
//! `function_call` (`call_id`, `name`, `arguments` as a JSON string), `custom_tool_call`
//! (`call_id`, `name`, `input` as free text) and built-in tool calls; `status` (`completed`,
//! `incomplete`, `failed`, …), `incomplete_details.reason` (`max_output_tokens`,
//! `content_filter`), `usage` (`input_tokens`, `output_tokens`, …), `error`.
//!
//! The stream: `response.created`, `response.in_progress`, `response.output_item.added/done`
//! (`output_index`, `item`), `response.content_part.added/done`, `response.output_text.delta`
//! / `.done`, `response.refusal.delta/done`, `response.reasoning_text.delta/done`,
//! `response.reasoning_summary_text.delta/done`, `response.function_call_arguments.delta/done`,
//! `response.custom_tool_call_input.delta/done` (each with `item_id`, `output_index`), then one
//! terminal event `response.completed` / `response.incomplete` / `response.failed` carrying the
//! whole response, or an `error` event; every event has a `sequence_number`. Deltas are
//! reassembled per output item (by `output_index`, else `item_id`), so parallel calls whose
//! deltas interleave each get their own arguments.
//!
//! What llama-server b11434 writes differently (server-task.cpp): no `sequence_number`, no
//! `output_index` and no `content_index` on any event (items are named by `item_id` only); no
//! `function_call_arguments.done` or `reasoning_text.done` (the final text comes in
//! `output_item.done`); `status: "completed"` on every response, whatever ended generation
//! (:581–588 and :689–696).

use std::collections::HashMap;

use serde_json::Value;

use super::message::{AssistantMessage, CallRecord};
use super::reassemble::{Builder, Reassembled, excerpt};
use super::sse::SseEvent;
use crate::finding::Rule;

/// The terminal event types of a Responses stream.
pub const TERMINAL_EVENTS: [&str; 3] = [
    "response.completed",
    "response.incomplete",
    "response.failed",
];

/// Reads a non-streamed Responses body (the `response` object, or the `response` inside a
/// terminal event) into an [`AssistantMessage`]: `content` = the `output_text` parts of
/// `message` items (a `refusal` part's text too), `reasoning` = the `reasoning_text` content of
/// `reasoning` items (else their `summary_text`), `tool_calls` = `function_call` items
/// (`id` = `call_id`, `arguments` verbatim) and `custom_tool_call` items (`arguments` = `input`),
/// `index` = the item's position in `output`; `finish_reason` = `status`;
/// `incomplete_reason` = `incomplete_details.reason`; `usage` and `model` verbatim.
/// Returns `None` when `body` has no `output` array and no `status` (not a response object).
pub fn from_responses_json(body: &Value) -> Option<AssistantMessage> {
    let body = match body.get("response") {
        Some(r) if r.is_object() && body.get("output").is_none() => r,
        _ => body,
    };
    let output = body.get("output").and_then(Value::as_array);
    if output.is_none() && body.get("status").is_none() {
        return None;
    }
    let mut m = AssistantMessage {
        model: str_of(body, "model").map(str::to_owned),
        usage: body.get("usage").filter(|u| !u.is_null()).cloned(),
        finish_reason: str_of(body, "status").map(str::to_owned),
        incomplete_reason: body
            .pointer("/incomplete_details/reason")
            .and_then(Value::as_str)
            .map(str::to_owned),
        ..Default::default()
    };
    for (i, item) in output.into_iter().flatten().enumerate() {
        add_item(&mut m, i, item);
    }
    Some(m)
}

/// The text of an output item's parts of `types` (`content[]` or `summary[]`), concatenated.
fn parts_text(item: &Value, key: &str, types: &[&str]) -> String {
    let mut s = String::new();
    for p in item
        .get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let ty = str_of(p, "type").unwrap_or("");
        if types.contains(&ty) {
            s.push_str(
                str_of(p, "text")
                    .or_else(|| str_of(p, "refusal"))
                    .unwrap_or(""),
            );
        }
    }
    s
}

fn add_item(m: &mut AssistantMessage, i: usize, item: &Value) {
    match str_of(item, "type").unwrap_or("") {
        "message" => m
            .content
            .push_str(&parts_text(item, "content", &["output_text", "refusal"])),
        "reasoning" => {
            let text = parts_text(item, "content", &["reasoning_text"]);
            if text.is_empty() {
                m.reasoning
                    .push_str(&parts_text(item, "summary", &["summary_text"]));
            } else {
                m.reasoning.push_str(&text);
            }
        }
        "function_call" | "custom_tool_call" => m.tool_calls.push(call_of(i, item)),
        _ => {}
    }
}

fn call_of(i: usize, item: &Value) -> CallRecord {
    let custom = str_of(item, "type") == Some("custom_tool_call");
    let args = if custom {
        item.get("input")
    } else {
        item.get("arguments")
    };
    CallRecord {
        index: Some(i as u64),
        id: str_of(item, "call_id").map(str::to_owned),
        name: str_of(item, "name").unwrap_or("").to_owned(),
        arguments: match args {
            Some(Value::String(s)) => s.clone(),
            None | Some(Value::Null) => String::new(),
            Some(v) => v.to_string(),
        },
    }
}

fn str_of<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// What an output item of the stream is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Message,
    Reasoning,
    /// A function or custom tool call: its position in `message.tool_calls`.
    Call {
        call: usize,
        custom: bool,
    },
    Other,
}

/// One output item as the stream built it.
#[derive(Debug, Clone)]
struct Item {
    output_index: Option<u64>,
    id: Option<String>,
    kind: Kind,
    /// Deltas received for the item's arguments / input (calls), text (messages, reasoning).
    deltas: String,
    /// Any delta arrived.
    had_delta: bool,
}

/// Reassembles a Responses SSE stream. Shape: see [`Reassembled`]; `message.finish_reason` is
/// the terminal response's `status`, `message.incomplete_reason` its
/// `incomplete_details.reason`, `finish_event` the terminal event; `call_events` lists per call
/// the events that added to it.
///
/// Findings (pane Stream, `evidence.event` the 0-based event): `stream.sequence_gap` (a
/// `sequence_number` that is not the previous one plus one, or missing on one event when others
/// carry it; a stream that carries none, as llama-server b11434's, is not judged);
/// `tool_call.args_done_mismatch` (a `function_call_arguments.done` / `custom_tool_call_input.done`
/// or `output_item.done` whose arguments differ from the concatenated deltas);
/// `stream.missing_index` (a delta for an item no `output_item.added` opened);
/// `stream.missing_id` (a call item without `call_id`); `stream.no_terminal`,
/// `stream.after_terminal`, `stream.malformed_event` (data not a JSON object with a `type`),
/// `stream.cut_event` (the stream ends inside an event). `error` events become `error_event`
/// problems, judged by diagnose like the other APIs'.
pub fn reassemble_responses(events: &[SseEvent]) -> Reassembled {
    let mut st = ResponsesStream::default();
    st.b.r.events = events.to_vec();
    for ev in events {
        st.b.mark();
        st.event(ev);
    }
    st.end()
}

/// The stream's output items: in stream order, found by `output_index` and by id.
#[derive(Default)]
struct Items {
    list: Vec<Item>,
    by_index: HashMap<u64, usize>,
    by_id: HashMap<String, usize>,
}

/// What [`reassemble_responses`] has read so far.
#[derive(Default)]
struct ResponsesStream {
    b: Builder,
    items: Items,
    /// The terminal event, once read.
    terminal: Option<usize>,
    /// The last `sequence_number` and the event that carried it.
    last_seq: Option<(u64, usize)>,
    /// Any event carried a `sequence_number`.
    seq_seen: bool,
    /// Events (not `error`) without a `sequence_number`.
    seq_missing: Vec<usize>,
}

impl ResponsesStream {
    /// Reads one event: after the terminal one, not JSON, or with no `type`, it is a finding;
    /// else its `sequence_number` is checked and it is dispatched by `type`.
    fn event(&mut self, ev: &SseEvent) {
        let n = ev.index;
        if let Some(t) = self.terminal {
            self.after_terminal(ev, t);
            return;
        }
        let Some((v, ty)) = self.event_json(ev) else {
            return;
        };
        self.sequence(n, &v, &ty);
        let b = &mut self.b;
        if let Some(u) = v.pointer("/response/usage").filter(|u| !u.is_null()) {
            b.r.message.usage = Some(u.clone());
            b.usage = true;
        }
        if b.r.message.model.is_none() {
            b.r.message.model = v
                .pointer("/response/model")
                .and_then(Value::as_str)
                .map(str::to_owned);
        }
        match ty.as_str() {
            "response.output_item.added" | "response.output_item.done" => {
                self.output_item(n, &v, ty.ends_with(".done"))
            }
            "response.content_part.added" | "response.content_part.done" => {
                self.content_part(n, &v, ty.ends_with(".done"))
            }
            "response.output_text.delta"
            | "response.refusal.delta"
            | "response.reasoning_text.delta"
            | "response.reasoning_summary_text.delta"
            | "response.function_call_arguments.delta"
            | "response.custom_tool_call_input.delta" => self.delta(n, &v, &ty),
            "response.output_text.done"
            | "response.refusal.done"
            | "response.reasoning_text.done"
            | "response.reasoning_summary_text.done"
            | "response.function_call_arguments.done"
            | "response.custom_tool_call_input.done" => self.text_done(n, &v, &ty),
            t if TERMINAL_EVENTS.contains(&t) => self.terminal_event(n, &v, t),
            "error" => {
                let err = v.get("error").filter(|e| e.is_object()).unwrap_or(&v);
                self.b.error_event(n, err);
            }
            other => note(
                &mut self.b,
                n,
                other.trim_start_matches("response.").to_owned(),
            ),
        }
    }

    /// Event `ev` arrives after the terminal event `t`: `stream.after_terminal`.
    fn after_terminal(&mut self, ev: &SseEvent, t: usize) {
        let n = ev.index;
        self.b.problem(
            Some(n),
            "after_end",
            format!("event {n} arrives after the terminal event (event {t})"),
        );
        self.b.finding(
            Rule::StreamAfterTerminal,
            n,
            format!("event {n} arrives after the stream's terminal event (event {t})"),
            "A Responses stream ends with its one terminal event (response.completed, response.incomplete or response.failed); clients stop reading there and never see what follows.",
            None,
            Some(&ev.data),
        );
    }

    /// The event's data (a JSON object) and its `type` (else its `event:` field), or `None`
    /// after a `stream.malformed_event` finding. A cut last event is left to [`Self::end`].
    fn event_json(&mut self, ev: &SseEvent) -> Option<(Value, String)> {
        let n = ev.index;
        let b = &mut self.b;
        let v = match serde_json::from_str::<Value>(&ev.data) {
            Ok(v @ Value::Object(_)) => v,
            other => {
                if ev.complete {
                    let why = match other {
                        Ok(v) => format!("data is {}, not an object", crate::json_kind(&v)),
                        Err(e) => format!("data is not JSON: {e}"),
                    };
                    b.problem(Some(n), "bad_json", format!("event {n} {why}"));
                    b.finding(
                        Rule::StreamMalformedEvent,
                        n,
                        format!("event {n}: {why}"),
                        "Every Responses stream event's data is one JSON object with a `type`; a client's parser fails or skips this event.",
                        None,
                        Some(&ev.data),
                    );
                }
                // an incomplete last event is stream.cut_event, judged at the end
                return None;
            }
        };
        match str_of(&v, "type").or(ev.event.as_deref()) {
            Some(t) => {
                let t = t.to_owned();
                Some((v, t))
            }
            None => {
                b.problem(Some(n), "bad_json", format!("event {n} has no `type`"));
                b.finding(
                    Rule::StreamMalformedEvent,
                    n,
                    format!("event {n} has no `type` (neither in its data nor an `event:` field)"),
                    "Every Responses stream event names its type in `type`; clients dispatch on it.",
                    None,
                    Some(&ev.data),
                );
                None
            }
        }
    }

    /// `sequence_number`: one more than the previous event's (`stream.sequence_gap`); an
    /// event of type `ty` other than `error` without one is noted for [`Self::end`].
    fn sequence(&mut self, n: usize, v: &Value, ty: &str) {
        match v.get("sequence_number").and_then(Value::as_u64) {
            Some(s) => {
                self.seq_seen = true;
                if let Some((prev, at)) = self.last_seq
                    && s != prev + 1
                {
                    let msg = if s <= prev {
                        format!(
                            "sequence_number {s} at event {n} comes after {prev} (event {at}): the events are reordered or repeated"
                        )
                    } else {
                        format!(
                            "sequence_number jumps from {prev} (event {at}) to {s} (event {n}): {} event(s) missing",
                            s - prev - 1
                        )
                    };
                    self.b.finding(
                        Rule::StreamSequenceGap,
                        n,
                        msg,
                        "sequence_number counts the events of one response without gaps; a gap means events were lost between server and client (a proxy or the server dropped them), a step back that they were reordered.",
                        None,
                        None,
                    );
                }
                self.last_seq = Some((s, n));
            }
            None => {
                if ty != "error" {
                    self.seq_missing.push(n);
                }
            }
        }
    }

    /// `response.output_item.added` / `.done` (`done`).
    fn output_item(&mut self, n: usize, v: &Value, done: bool) {
        let item = v.get("item").unwrap_or(&Value::Null);
        let k = self.items.locate(&mut self.b, n, v, item, !done);
        let it = &mut self.items.list[k];
        let how = item_event(&mut self.b, it, n, item, done);
        let what = str_of(item, "type").unwrap_or("?");
        let verb = if done { "done" } else { "added" };
        note(
            &mut self.b,
            n,
            format!("item {} {what} {verb}{}", label(it, k), paren(how)),
        );
    }

    /// `response.content_part.added` / `.done` (`done`).
    fn content_part(&mut self, n: usize, v: &Value, done: bool) {
        let k = self.items.locate(&mut self.b, n, v, &Value::Null, false);
        let it = &mut self.items.list[k];
        if it.kind == Kind::Other {
            it.kind = Kind::Message;
        }
        let verb = if done { "done" } else { "added" };
        note(&mut self.b, n, format!("item {} part {verb}", label(it, k)));
        // the text arrives in deltas (or the part's text when none came)
        if done
            && !it.had_delta
            && let Some(t) = v.pointer("/part/text").and_then(Value::as_str)
        {
            add_text(&mut self.b, it, n, t);
        }
    }

    /// A text, reasoning, arguments or input `.delta` event of type `ty`.
    fn delta(&mut self, n: usize, v: &Value, ty: &str) {
        let d = str_of(v, "delta").unwrap_or("");
        let k = self.items.locate(&mut self.b, n, v, &Value::Null, false);
        let it = &mut self.items.list[k];
        if it.kind == Kind::Other {
            it.kind = if ty.contains("reasoning") {
                Kind::Reasoning
            } else if ty.contains("call") {
                // a delta for a call nobody opened: a call without a name
                let rec = CallRecord {
                    index: it.output_index,
                    ..Default::default()
                };
                Kind::Call {
                    call: self.b.new_call(rec, n),
                    custom: ty.contains("custom"),
                }
            } else {
                Kind::Message
            };
        }
        add_text(&mut self.b, it, n, d);
    }

    /// A text, reasoning, arguments or input `.done` event of type `ty`, with the whole text.
    fn text_done(&mut self, n: usize, v: &Value, ty: &str) {
        let k = self.items.locate(&mut self.b, n, v, &Value::Null, false);
        let field = ["arguments", "input", "text", "refusal"]
            .into_iter()
            .find_map(|f| str_of(v, f));
        if let Some(full) = field {
            let it = &mut self.items.list[k];
            let how = done_text(&mut self.b, it, n, full);
            let what = ty.trim_start_matches("response.").trim_end_matches(".done");
            note(
                &mut self.b,
                n,
                format!("item {} {what} done{}", label(it, k), paren(how)),
            );
        }
    }

    /// The terminal event `t` (event `n`): the response's status and incomplete reason, the
    /// items only its `output` lists, its error.
    fn terminal_event(&mut self, n: usize, v: &Value, t: &str) {
        self.terminal = Some(n);
        let b = &mut self.b;
        let resp = v.get("response").unwrap_or(&Value::Null);
        b.r.message.finish_reason = str_of(resp, "status")
            .map(str::to_owned)
            .or_else(|| t.strip_prefix("response.").map(str::to_owned));
        b.r.message.incomplete_reason = resp
            .pointer("/incomplete_details/reason")
            .and_then(Value::as_str)
            .map(str::to_owned);
        b.r.finish_event = Some(n);
        let words = match &b.r.message.incomplete_reason {
            Some(r) => format!("{t} ({r})"),
            None => t.to_owned(),
        };
        note(b, n, words);
        // items the final response lists that no event of the stream carried
        for (i, item) in resp
            .get("output")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let id = str_of(item, "id");
            let known = id.is_some_and(|id| self.items.by_id.contains_key(id))
                || (id.is_none() && self.items.by_index.contains_key(&(i as u64)));
            if !known {
                let at = serde_json::json!({"output_index": i});
                let k = self.items.locate(&mut self.b, n, &at, item, true);
                item_event(&mut self.b, &mut self.items.list[k], n, item, true);
            }
        }
        if t == "response.failed"
            && let Some(err) = resp.get("error").filter(|e| e.is_object())
        {
            self.b.error_event(n, err);
        }
    }

    /// After the last event: missing `sequence_number`s, a cut last event, no terminal event.
    fn end(mut self) -> Reassembled {
        let b = &mut self.b;
        b.mark();
        if self.seq_seen && !self.seq_missing.is_empty() {
            let n = self.seq_missing[0];
            b.finding(
                Rule::StreamSequenceGap,
                n,
                format!(
                    "{} event(s) carry no sequence_number while the others do (first: event {n})",
                    self.seq_missing.len()
                ),
                "Every Responses stream event carries sequence_number; clients that order or de-duplicate by it mishandle these.",
                None,
                None,
            );
        }
        if let Some(last) = b.r.events.last().filter(|e| !e.complete) {
            let (i, off) = (last.index, last.offset);
            let data = last.data.clone();
            b.problem(
                Some(i),
                "truncated",
                format!("the stream ends inside event {i} (byte {off}): no blank line after it"),
            );
            b.finding(
                Rule::StreamCutEvent,
                i,
                format!("the stream ends inside event {i} (byte {off}): the event is cut, no blank line ends it"),
                "The connection closed mid-event (server crash, proxy timeout, client disconnect): the event is lost to the client; look for what closed the stream.",
                None,
                Some(&data),
            );
        }
        if self.terminal.is_none() && !b.r.problems.iter().any(|p| p.kind == "error_event") {
            let at = b.r.events.last().map_or(0, |e| e.index);
            b.problem(
                None,
                "no_end",
                "the stream ends without response.completed, response.incomplete or response.failed"
                    .into(),
            );
            b.finding(
                Rule::StreamNoTerminal,
                at,
                format!(
                    "the stream ends after {} event(s) without response.completed, response.incomplete or response.failed: the client never learns how the response ended",
                    b.r.events.len()
                ),
                "A Responses stream must end with one terminal event carrying the whole response and its status; clients (the openai SDK, Codex) treat a stream without one as failed.",
                None,
                None,
            );
        }
        self.b.finish(crate::session::Api::Responses)
    }
}

/// Records what event `n` meant, for the Stream pane ([`Reassembled::notes`]).
fn note(b: &mut Builder, n: usize, text: String) {
    b.r.notes.push((n, text));
}

/// How the Stream pane names an item: its `output_index`, else its position in the stream.
fn label(it: &Item, k: usize) -> String {
    match it.output_index {
        Some(i) => i.to_string(),
        None => format!("#{k}"),
    }
}

fn paren(s: &str) -> String {
    if s.is_empty() {
        String::new()
    } else {
        format!(" ({s})")
    }
}

impl Items {
    /// The item event `v` (with `item` when it carries one) is about: found by `output_index`,
    /// else by `item_id` / `item.id`; created when unknown (`opening`: by `output_item.added`,
    /// which is how an item should start; else with a `stream.missing_index` finding).
    fn locate(
        &mut self,
        b: &mut Builder,
        n: usize,
        v: &Value,
        item: &Value,
        opening: bool,
    ) -> usize {
        let oi = v.get("output_index").and_then(Value::as_u64);
        let id = str_of(v, "item_id")
            .or_else(|| str_of(item, "id"))
            .filter(|s| !s.is_empty());
        let found = oi
            .and_then(|i| self.by_index.get(&i).copied())
            .or_else(|| id.and_then(|id| self.by_id.get(id).copied()));
        if let Some(k) = found {
            if let Some(id) = id {
                if self.list[k].id.is_none() {
                    self.list[k].id = Some(id.to_owned());
                }
                self.by_id.entry(id.to_owned()).or_insert(k);
            }
            if let Some(i) = oi {
                self.by_index.entry(i).or_insert(k);
            }
            return k;
        }
        if !opening {
            let what = match (oi, id) {
                (Some(i), _) => format!("output_index {i}"),
                (None, Some(id)) => format!("item {id}"),
                (None, None) => "no output_index or item_id".to_owned(),
            };
            b.finding(
                Rule::StreamMissingIndex,
                n,
                format!(
                    "event {n} adds to an output item ({what}) that no response.output_item.added opened; taken as a new item"
                ),
                "Open every output item with response.output_item.added and name it in each later event by output_index and item_id; clients file orphan deltas nowhere.",
                None,
                None,
            );
        }
        let k = self.list.len();
        self.list.push(Item {
            output_index: oi,
            id: id.map(str::to_owned),
            kind: Kind::Other,
            deltas: String::new(),
            had_delta: false,
        });
        if let Some(i) = oi {
            self.by_index.insert(i, k);
        }
        if let Some(id) = id {
            self.by_id.insert(id.to_owned(), k);
        }
        k
    }
}

/// `output_item.added` / `.done` (or an item of the terminal response): sets the item's kind,
/// starts its call, and on `.done` settles its final text.
fn item_event(b: &mut Builder, it: &mut Item, n: usize, item: &Value, done: bool) -> &'static str {
    let ty = str_of(item, "type").unwrap_or("");
    if it.kind == Kind::Other {
        it.kind = match ty {
            "message" => Kind::Message,
            "reasoning" => Kind::Reasoning,
            "function_call" | "custom_tool_call" => {
                let mut rec = call_of(it.output_index.unwrap_or(0) as usize, item);
                rec.index = it
                    .output_index
                    .or(Some(b.r.message.tool_calls.len() as u64));
                rec.arguments.clear();
                let name = rec.name.clone();
                let missing_id = rec.id.is_none();
                let call = b.new_call(rec, n);
                if missing_id {
                    b.finding(
                        Rule::StreamMissingId,
                        n,
                        format!("the {ty} item of call {call} (event {n}) has no `call_id`"),
                        "A function_call item needs its call_id: the client answers with a function_call_output carrying it.",
                        Some(&name),
                        None,
                    );
                }
                Kind::Call {
                    call,
                    custom: ty == "custom_tool_call",
                }
            }
            _ => Kind::Other,
        };
    }
    if let Kind::Call { call, .. } = it.kind {
        b.touch(call, n);
        let c = &mut b.r.message.tool_calls[call];
        if c.name.is_empty()
            && let Some(nm) = str_of(item, "name")
        {
            c.name = nm.to_owned();
        }
        if c.id.is_none() {
            c.id = str_of(item, "call_id").map(str::to_owned);
        }
    }
    if !done {
        return "";
    }
    let full = match it.kind {
        Kind::Message => Some(parts_text(item, "content", &["output_text", "refusal"])),
        Kind::Reasoning => {
            let t = parts_text(item, "content", &["reasoning_text"]);
            Some(if t.is_empty() {
                parts_text(item, "summary", &["summary_text"])
            } else {
                t
            })
        }
        Kind::Call { custom, .. } => {
            let key = if custom { "input" } else { "arguments" };
            item.get(key).map(|a| match a {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
        }
        Kind::Other => None,
    };
    match full {
        Some(full) => done_text(b, it, n, &full),
        None => "",
    }
}

/// A delta: appended to the item's text and to the message.
fn add_text(b: &mut Builder, it: &mut Item, n: usize, d: &str) {
    it.had_delta = true;
    it.deltas.push_str(d);
    match it.kind {
        Kind::Message => b.r.message.content.push_str(d),
        Kind::Reasoning => b.r.message.reasoning.push_str(d),
        Kind::Call { call, .. } => {
            b.touch(call, n);
            if !d.is_empty() {
                b.r.message.tool_calls[call].arguments.push_str(d);
                b.last_args_event[call] = Some(n);
            }
        }
        Kind::Other => {}
    }
}

/// A `.done` event with the item's whole text: adopted when no delta came (llama-server sends
/// a call's arguments only in `output_item.done` when the model wrote them in one piece).
/// Otherwise, for calls, compared with the concatenated deltas (`tool_call.args_done_mismatch`);
/// the deltas stay the call's arguments, as a client that accumulates deltas has them. A
/// message's or reasoning item's text is not compared (its `.done` events cover one part or one
/// summary each).
fn done_text(b: &mut Builder, it: &mut Item, n: usize, full: &str) -> &'static str {
    if let Kind::Call { call, .. } = it.kind {
        b.touch(call, n);
    }
    if !it.had_delta {
        if !full.is_empty() {
            add_text(b, it, n, full);
            return "whole text, no deltas before";
        }
        return "";
    }
    let Kind::Call { call, .. } = it.kind else {
        return "";
    };
    if full == it.deltas {
        return "= deltas";
    }
    let name = b.r.message.tool_calls[call].name.clone();
    b.finding(
        Rule::ToolCallArgsDoneMismatch,
        n,
        format!(
            "the arguments of call {call} in event {n} ({}) differ from its concatenated deltas ({})",
            excerpt(full),
            excerpt(&it.deltas)
        ),
        "A client that builds the call from the deltas and one that reads the .done event run different calls: the server's stream writer is inconsistent; trust neither without checking both.",
        Some(&name),
        Some(full),
    );
    // a later .done (output_item.done after function_call_arguments.done) is compared with
    // what this one said, so one disagreement is reported once
    it.deltas = full.to_owned();
    "≠ deltas"
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::sse::decode_bytes;

    fn sse(events: &[&str]) -> Vec<SseEvent> {
        let mut s = String::new();
        for e in events {
            let v: Value = serde_json::from_str(e).unwrap();
            s.push_str(&format!(
                "event: {}\ndata: {e}\n\n",
                v["type"].as_str().unwrap()
            ));
        }
        decode_bytes(s.as_bytes())
    }

    #[test]
    fn parallel_calls_interleaved_by_output_index() {
        let r = reassemble_responses(&sse(&[
            r#"{"type":"response.created","sequence_number":0,"response":{"id":"r","status":"in_progress"}}"#,
            r#"{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"type":"function_call","id":"fc_a","call_id":"call_a","name":"get_weather","arguments":""}}"#,
            r#"{"type":"response.output_item.added","sequence_number":2,"output_index":1,"item":{"type":"function_call","id":"fc_b","call_id":"call_b","name":"get_time","arguments":""}}"#,
            r#"{"type":"response.function_call_arguments.delta","sequence_number":3,"output_index":1,"item_id":"fc_b","delta":"{\"city\":"}"#,
            r#"{"type":"response.function_call_arguments.delta","sequence_number":4,"output_index":0,"item_id":"fc_a","delta":"{\"city\":\"Lisbon\"}"}"#,
            r#"{"type":"response.function_call_arguments.delta","sequence_number":5,"output_index":1,"item_id":"fc_b","delta":"\"Paris\"}"}"#,
            r#"{"type":"response.function_call_arguments.done","sequence_number":6,"output_index":0,"item_id":"fc_a","arguments":"{\"city\":\"Lisbon\"}"}"#,
            r#"{"type":"response.function_call_arguments.done","sequence_number":7,"output_index":1,"item_id":"fc_b","arguments":"{\"city\":\"Paris\"}"}"#,
            r#"{"type":"response.completed","sequence_number":8,"response":{"id":"r","status":"completed","output":[{"type":"function_call","id":"fc_a"},{"type":"function_call","id":"fc_b"}],"usage":{"output_tokens":20}}}"#,
        ]));
        assert!(r.findings.is_empty(), "{:?}", r.findings);
        let calls = &r.message.tool_calls;
        assert_eq!(calls.len(), 2);
        assert_eq!(
            (calls[0].name.as_str(), calls[0].arguments.as_str()),
            ("get_weather", "{\"city\":\"Lisbon\"}")
        );
        assert_eq!(calls[1].arguments, "{\"city\":\"Paris\"}");
        assert_eq!(calls[1].id.as_deref(), Some("call_b"));
        assert_eq!(r.call_events[1], vec![2, 3, 5, 7]);
        assert_eq!(r.message.finish_reason.as_deref(), Some("completed"));
        assert_eq!(r.finish_event, Some(8));
        // per-event marks: event 3 added to call 1 only
        let d = r.marks[3].delta(&r.marks[4], &r.message);
        assert_eq!(d.calls, vec![(1, false, "", "{\"city\":")]);
    }

    #[test]
    fn done_that_differs_and_sequence_faults() {
        let r = reassemble_responses(&sse(&[
            r#"{"type":"response.output_item.added","sequence_number":0,"output_index":0,"item":{"type":"function_call","id":"fc","call_id":"c","name":"f","arguments":""}}"#,
            r#"{"type":"response.function_call_arguments.delta","sequence_number":2,"output_index":0,"item_id":"fc","delta":"{\"a\":1"}"#,
            r#"{"type":"response.function_call_arguments.done","sequence_number":1,"output_index":0,"item_id":"fc","arguments":"{\"a\":1}"}"#,
        ]));
        let rules: Vec<_> = r.findings.iter().map(|f| f.rule.id()).collect();
        assert_eq!(
            rules,
            [
                "stream.sequence_gap",
                "stream.sequence_gap",
                "tool_call.args_done_mismatch",
                "stream.no_terminal"
            ]
        );
        assert_eq!(r.findings[0].evidence.event, Some(1));
        assert!(r.findings[1].message.contains("reordered"));
        assert_eq!(r.findings[2].evidence.event, Some(2));
    }

    /// The shape llama-server b11434 writes (tools/server/server-task.cpp :1166-1300 and
    /// :598-703): no output_index, no sequence_number, no arguments .done; items named by
    /// item_id; the call's final arguments only in output_item.done.
    #[test]
    fn llama_server_shape_is_read_by_item_id() {
        let r = reassemble_responses(&sse(&[
            r#"{"type":"response.created","response":{"id":"resp_1","object":"response","status":"in_progress"}}"#,
            r#"{"type":"response.in_progress","response":{"id":"resp_1","object":"response","status":"in_progress"}}"#,
            r#"{"type":"response.output_item.added","item":{"content":[],"id":"msg_1","role":"assistant","status":"in_progress","type":"message"}}"#,
            r#"{"type":"response.content_part.added","item_id":"msg_1","part":{"type":"output_text","text":""}}"#,
            r#"{"type":"response.output_text.delta","item_id":"msg_1","delta":"Checking"}"#,
            r#"{"type":"response.output_item.added","item":{"id":"fc_x","arguments":"","call_id":"call_x","name":"get_weather","type":"function_call","status":"in_progress"}}"#,
            r#"{"type":"response.function_call_arguments.delta","delta":"{\"city\":","item_id":"fc_x"}"#,
            r#"{"type":"response.function_call_arguments.delta","delta":" \"Lisbon\"}","item_id":"fc_x"}"#,
            r#"{"type":"response.output_text.done","item_id":"msg_1","text":"Checking"}"#,
            r#"{"type":"response.content_part.done","item_id":"msg_1","part":{"type":"output_text","annotations":[],"logprobs":[],"text":"Checking"}}"#,
            r#"{"type":"response.output_item.done","item":{"type":"message","status":"completed","id":"msg_1","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"Checking"}],"role":"assistant"}}"#,
            r#"{"type":"response.output_item.done","item":{"id":"fc_x","type":"function_call","status":"completed","arguments":"{\"city\": \"Lisbon\"}","call_id":"call_x","name":"get_weather"}}"#,
            r#"{"type":"response.completed","response":{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"m","output":[{"type":"message","id":"msg_1"},{"id":"fc_x","type":"function_call"}],"usage":{"input_tokens":5,"output_tokens":9,"total_tokens":14}}}"#,
        ]));
        assert!(r.findings.is_empty(), "{:?}", r.findings);
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        assert_eq!(r.message.content, "Checking");
        let c = &r.message.tool_calls[0];
        assert_eq!(
            (c.id.as_deref(), c.name.as_str(), c.arguments.as_str()),
            (Some("call_x"), "get_weather", "{\"city\": \"Lisbon\"}")
        );
        assert_eq!(r.args_events, vec![Some(7)]);
        assert_eq!(r.finish_event, Some(12));
        assert_eq!(r.message.usage.as_ref().unwrap()["output_tokens"], 9);
        let notes: Vec<&str> = r
            .notes
            .iter()
            .filter(|(e, _)| *e == 11)
            .map(|(_, n)| n.as_str())
            .collect();
        assert_eq!(notes, ["item #1 function_call done (= deltas)"]);
    }

    #[test]
    fn contract_faults_of_the_stream_itself() {
        let body = concat!(
            "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{}}\n\n",
            "data: [1,2]\n\n",
            "data: {\"sequence_number\":2}\n\n",
            "event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":3,\"response\":{\"status\":\"completed\",\"output\":[]}}\n\n",
            "data: {\"type\":\"response.output_text.delta\",\"sequence_number\":4,\"item_id\":\"m\",\"delta\":\"late\"}\n\n",
        );
        let r = reassemble_responses(&decode_bytes(body.as_bytes()));
        let got: Vec<(&str, Option<usize>)> = r
            .findings
            .iter()
            .map(|f| (f.rule.id(), f.evidence.event))
            .collect();
        assert_eq!(
            got,
            [
                ("stream.malformed_event", Some(1)),
                ("stream.malformed_event", Some(2)),
                ("stream.sequence_gap", Some(3)),
                ("stream.after_terminal", Some(4)),
            ]
        );
        assert_eq!(r.message.content, "");
        // cut inside an event, no terminal
        let cut = "data: {\"type\":\"response.created\",\"response\":{}}\n\ndata: {\"type\":\"response.output_te";
        let r = reassemble_responses(&decode_bytes(cut.as_bytes()));
        let got: Vec<&str> = r.findings.iter().map(|f| f.rule.id()).collect();
        assert_eq!(got, ["stream.cut_event", "stream.no_terminal"]);
    }

    /// A `custom_tool_call` streamed as the OpenAI streaming reference has it (the openai SDK's
    /// `ResponseCustomToolCallInputDeltaEvent` / `...InputDoneEvent`: `delta` / `input`,
    /// `item_id`, `output_index`, `sequence_number`): the call's arguments are the free-text
    /// input, the deltas joined; a `.done` that agrees adds no finding, one that differs gives
    /// `tool_call.args_done_mismatch` at that event, and the deltas stay the call's input.
    #[test]
    fn custom_tool_call_input_deltas_and_done() {
        let events = |done_input: &str| {
            let done = format!(
                r#"{{"type":"response.custom_tool_call_input.done","sequence_number":4,"output_index":0,"item_id":"ctc_1","input":{}}}"#,
                Value::from(done_input)
            );
            let item_done = format!(
                r#"{{"type":"response.output_item.done","sequence_number":5,"output_index":0,"item":{{"type":"custom_tool_call","id":"ctc_1","call_id":"call_p","name":"apply_patch","input":{}}}}}"#,
                Value::from(done_input)
            );
            let evs = [
                r#"{"type":"response.created","sequence_number":0,"response":{"id":"r","status":"in_progress","output":[]}}"#.to_owned(),
                r#"{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"type":"custom_tool_call","id":"ctc_1","call_id":"call_p","name":"apply_patch","input":""}}"#.to_owned(),
                r#"{"type":"response.custom_tool_call_input.delta","sequence_number":2,"output_index":0,"item_id":"ctc_1","delta":"*** Begin Patch\n"}"#.to_owned(),
                r#"{"type":"response.custom_tool_call_input.delta","sequence_number":3,"output_index":0,"item_id":"ctc_1","delta":"*** End Patch"}"#.to_owned(),
                done,
                item_done,
                r#"{"type":"response.completed","sequence_number":6,"response":{"id":"r","status":"completed","output":[{"type":"custom_tool_call","id":"ctc_1"}]}}"#.to_owned(),
            ];
            let refs: Vec<&str> = evs.iter().map(String::as_str).collect();
            reassemble_responses(&sse(&refs))
        };
        let patch = "*** Begin Patch\n*** End Patch";
        let r = events(patch);
        assert!(r.findings.is_empty(), "{:?}", r.findings);
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        let c = &r.message.tool_calls[..];
        assert_eq!(c.len(), 1);
        assert_eq!(
            (
                c[0].id.as_deref(),
                c[0].name.as_str(),
                c[0].arguments.as_str()
            ),
            (Some("call_p"), "apply_patch", patch)
        );
        assert_eq!(c[0].index, Some(0));
        assert_eq!(r.call_events[0], vec![1, 2, 3, 4, 5]);
        assert_eq!(r.args_events, vec![Some(3)]);
        assert_eq!(r.finish_event, Some(6));
        let note4: Vec<&str> = r
            .notes
            .iter()
            .filter(|(e, _)| *e == 4)
            .map(|(_, n)| n.as_str())
            .collect();
        assert_eq!(note4, ["item 0 custom_tool_call_input done (= deltas)"]);
        // event 2 added its delta to call 0's input
        let d = r.marks[2].delta(&r.marks[3], &r.message);
        assert_eq!(d.calls, vec![(0, false, "", "*** Begin Patch\n")]);

        let r = events("*** Begin Patch\n*** Update File: a.py\n*** End Patch");
        let got: Vec<(&str, Option<usize>)> = r
            .findings
            .iter()
            .map(|f| (f.rule.id(), f.evidence.event))
            .collect();
        // reported once, at the custom_tool_call_input.done (output_item.done then agrees
        // with what .done said)
        assert_eq!(got, [("tool_call.args_done_mismatch", Some(4))]);
        assert_eq!(r.message.tool_calls[0].arguments, patch);
    }

    /// `response.reasoning_text.delta` (the openai SDK's `ResponseReasoningTextDeltaEvent`:
    /// `content_index`, `delta`, `item_id`, `output_index`) builds the reply's reasoning, apart
    /// from the message's `output_text`.
    #[test]
    fn reasoning_text_deltas_are_the_reasoning() {
        let r = reassemble_responses(&sse(&[
            r#"{"type":"response.created","sequence_number":0,"response":{"id":"r","status":"in_progress","output":[]}}"#,
            r#"{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"type":"reasoning","id":"rs_1","summary":[],"content":[]}}"#,
            r#"{"type":"response.reasoning_text.delta","sequence_number":2,"output_index":0,"item_id":"rs_1","content_index":0,"delta":"The user "}"#,
            r#"{"type":"response.reasoning_text.delta","sequence_number":3,"output_index":0,"item_id":"rs_1","content_index":0,"delta":"greets me."}"#,
            r#"{"type":"response.reasoning_text.done","sequence_number":4,"output_index":0,"item_id":"rs_1","content_index":0,"text":"The user greets me."}"#,
            r#"{"type":"response.output_item.done","sequence_number":5,"output_index":0,"item":{"type":"reasoning","id":"rs_1","summary":[],"content":[{"type":"reasoning_text","text":"The user greets me."}]}}"#,
            r#"{"type":"response.output_item.added","sequence_number":6,"output_index":1,"item":{"type":"message","id":"msg_1","role":"assistant","content":[]}}"#,
            r#"{"type":"response.output_text.delta","sequence_number":7,"output_index":1,"item_id":"msg_1","content_index":0,"delta":"Hello!"}"#,
            r#"{"type":"response.output_item.done","sequence_number":8,"output_index":1,"item":{"type":"message","id":"msg_1","role":"assistant","content":[{"type":"output_text","text":"Hello!"}]}}"#,
            r#"{"type":"response.completed","sequence_number":9,"response":{"id":"r","status":"completed","output":[{"type":"reasoning","id":"rs_1"},{"type":"message","id":"msg_1"}]}}"#,
        ]));
        assert!(r.findings.is_empty(), "{:?}", r.findings);
        assert_eq!(r.message.reasoning, "The user greets me.");
        assert_eq!(r.message.content, "Hello!");
        assert!(r.message.tool_calls.is_empty());
        // event 2 added to the reasoning only
        let d = r.marks[2].delta(&r.marks[3], &r.message);
        assert_eq!((d.reasoning, d.content), ("The user ", ""));
    }

    /// `response.failed` (the openai SDK's `ResponseFailedEvent`: the whole `response` with
    /// `status: "failed"` and `error: {code, message}`) is the terminal event: the reply's
    /// `finish_reason` is `failed`, the error becomes an `error_event` problem at that event,
    /// and the stream is not judged unterminated.
    #[test]
    fn response_failed_is_terminal_with_its_error() {
        let r = reassemble_responses(&sse(&[
            r#"{"type":"response.created","sequence_number":0,"response":{"id":"r","status":"in_progress","output":[]}}"#,
            r#"{"type":"response.failed","sequence_number":1,"response":{"id":"r","object":"response","status":"failed","error":{"code":"server_error","message":"The model produced invalid content."},"incomplete_details":null,"output":[]}}"#,
        ]));
        assert!(r.findings.is_empty(), "{:?}", r.findings);
        assert_eq!(r.message.finish_reason.as_deref(), Some("failed"));
        assert_eq!(r.finish_event, Some(1));
        let p: Vec<(Option<usize>, &str, &str)> = r
            .problems
            .iter()
            .map(|p| (p.event, p.kind.as_str(), p.message.as_str()))
            .collect();
        assert_eq!(
            p,
            [(
                Some(1),
                "error_event",
                "error event: The model produced invalid content."
            )]
        );
        assert_eq!(
            r.notes.last().map(|(e, n)| (*e, n.as_str())),
            Some((1, "response.failed"))
        );
    }

    /// The `error` event (the openai SDK's `ResponseErrorEvent`: `code`, `message`, `param`,
    /// `sequence_number` at the top level) ends the stream as an `error_event` problem: no
    /// `stream.no_terminal` on top, no `finish_reason`, and the text before it kept.
    #[test]
    fn error_event_ends_the_stream_as_a_problem() {
        let r = reassemble_responses(&sse(&[
            r#"{"type":"response.created","sequence_number":0,"response":{"id":"r","status":"in_progress","output":[]}}"#,
            r#"{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"type":"message","id":"msg_1","role":"assistant","content":[]}}"#,
            r#"{"type":"response.output_text.delta","sequence_number":2,"output_index":0,"item_id":"msg_1","content_index":0,"delta":"Hel"}"#,
            r#"{"type":"error","sequence_number":3,"code":"ERR_SOMETHING","message":"Something went wrong","param":null}"#,
        ]));
        assert!(r.findings.is_empty(), "{:?}", r.findings);
        assert_eq!(r.message.content, "Hel");
        assert_eq!(r.message.finish_reason, None);
        assert_eq!(r.finish_event, None);
        let p: Vec<(Option<usize>, &str, &str)> = r
            .problems
            .iter()
            .map(|p| (p.event, p.kind.as_str(), p.message.as_str()))
            .collect();
        assert_eq!(
            p,
            [(Some(3), "error_event", "error event: Something went wrong")]
        );
        // an error event without sequence_number (llama-server's) breaks no sequence rule
        let r = reassemble_responses(&sse(&[
            r#"{"type":"response.created","sequence_number":0,"response":{"id":"r","status":"in_progress","output":[]}}"#,
            r#"{"type":"error","error":{"code":"500","message":"boom"}}"#,
        ]));
        assert!(r.findings.is_empty(), "{:?}", r.findings);
        assert_eq!(r.problems[0].message, "error event: boom");
    }

    /// llama-server's non-streamed Responses body (server-task.cpp:528-596): reasoning,
    /// message and function_call items; and an OpenAI-style incomplete response.
    #[test]
    fn response_objects() {
        let body: Value = serde_json::from_str(r#"{"completed_at":1,"created_at":1,"id":"resp_1","model":"m","object":"response","output":[
            {"id":"rs_1","summary":[],"type":"reasoning","content":[{"text":"think","type":"reasoning_text"}],"encrypted_content":"","status":"completed"},
            {"content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"Hi"}],"id":"msg_1","role":"assistant","status":"completed","type":"message"},
            {"id":"fc_2","type":"function_call","status":"completed","arguments":"{\"city\":\"Rome\"}","call_id":"call_2","name":"get_time"}],
            "status":"completed","usage":{"input_tokens":3,"output_tokens":4,"total_tokens":7}}"#).unwrap();
        let m = from_responses_json(&body).unwrap();
        assert_eq!((m.reasoning.as_str(), m.content.as_str()), ("think", "Hi"));
        assert_eq!(m.tool_calls[0].index, Some(2));
        assert_eq!(m.tool_calls[0].id.as_deref(), Some("call_2"));
        assert_eq!(m.finish_reason.as_deref(), Some("completed"));
        let inc = serde_json::json!({"object": "response", "status": "incomplete",
            "incomplete_details": {"reason": "max_output_tokens"},
            "output": [{"type": "custom_tool_call", "call_id": "c", "name": "apply_patch", "input": "*** Begin"}]});
        let m = from_responses_json(&inc).unwrap();
        assert_eq!(m.incomplete_reason.as_deref(), Some("max_output_tokens"));
        assert_eq!(m.tool_calls[0].arguments, "*** Begin");
        assert!(from_responses_json(&serde_json::json!({"choices": []})).is_none());
    }

    /// Real llama-server b11434 replies (SmolLM2, Qwen3-0.6B template, temperature 0), plain
    /// and streamed, recorded as the official openai SDK (3.51.0) read them off the socket, with
    /// what the SDK itself parsed (scripts/capture-responses-sdk.py, tests/data/responses/):
    /// the message text, the function calls (call_id, name, arguments) and the status agree,
    /// plain and streamed; the stream's events are the SDK's events, in order; the server's
    /// streams break no stream-contract rule.
    #[test]
    fn agrees_with_the_openai_sdk_on_llama_server_replies() {
        let cases = [
            (
                "hello",
                include_str!("../../tests/data/responses/hello.json"),
                include_str!("../../tests/data/responses/hello.sse"),
                include_str!("../../tests/data/responses/hello.sdk.json"),
            ),
            (
                "weather_call",
                include_str!("../../tests/data/responses/weather_call.json"),
                include_str!("../../tests/data/responses/weather_call.sse"),
                include_str!("../../tests/data/responses/weather_call.sdk.json"),
            ),
            (
                "weather_text",
                include_str!("../../tests/data/responses/weather_text.json"),
                include_str!("../../tests/data/responses/weather_text.sse"),
                include_str!("../../tests/data/responses/weather_text.sdk.json"),
            ),
            (
                "required_ignored",
                include_str!("../../tests/data/responses/required_ignored.json"),
                include_str!("../../tests/data/responses/required_ignored.sse"),
                include_str!("../../tests/data/responses/required_ignored.sdk.json"),
            ),
        ];
        let calls = |m: &AssistantMessage| -> Vec<Value> {
            m.tool_calls
                .iter()
                .map(|c| serde_json::json!({"call_id": c.id, "name": c.name, "arguments": c.arguments}))
                .collect()
        };
        let mut saw_call = false;
        for (name, plain, stream, sdk) in cases {
            let sdk: Value = serde_json::from_str(sdk).unwrap();
            let m = from_responses_json(&serde_json::from_str(plain).unwrap()).unwrap();
            let want = &sdk["plain"];
            assert_eq!(m.content, want["output_text"], "{name}");
            assert_eq!(Value::Array(calls(&m)), want["calls"], "{name}");
            assert_eq!(
                m.finish_reason.as_deref(),
                want["status"].as_str(),
                "{name}"
            );
            assert_eq!(
                m.usage.as_ref().unwrap()["output_tokens"],
                want["usage"]["output_tokens"],
                "{name}"
            );
            saw_call |= !m.tool_calls.is_empty();
            let events = decode_bytes(stream.as_bytes());
            let r = reassemble_responses(&events);
            let want = &sdk["stream"];
            let types: Vec<Value> = events
                .iter()
                .map(|e| serde_json::from_str::<Value>(&e.data).unwrap()["type"].clone())
                .collect();
            assert_eq!(Value::Array(types), want["event_types"], "{name}");
            assert_eq!(r.message.content, want["output_text"], "{name}");
            assert_eq!(Value::Array(calls(&r.message)), want["calls"], "{name}");
            assert_eq!(
                r.message.finish_reason.as_deref(),
                want["status"].as_str(),
                "{name}"
            );
            assert_eq!(r.finish_event, Some(events.len() - 1), "{name}");
            assert!(r.findings.is_empty(), "{name}: {:?}", r.findings);
            assert!(r.problems.is_empty(), "{name}: {:?}", r.problems);
            assert_eq!(r.marks.len(), events.len() + 1, "{name}");
        }
        assert!(saw_call, "one capture has a function call");
    }
}
