//! What the model wrote for one exchange, and where that text came from. Pure.
//!
//! The server's answer (content, reasoning, tool calls) is its parser's reading of the text the
//! model generated. Everything that replays or judges that parse (Replay, chunking divergence,
//! leaked markup, drift repairs, server vs toolscope) needs the generated text itself, which
//! servers do not send by default. [`raw_output`] is the one place that says whether it is
//! known for an exchange and from which source, in this order:
//!
//! 1. **`__verbose.content`** in the response (llama-server `-v`, or `"verbose": true` in the
//!    request; tools/server/server-schema.cpp, build 11434). Empty in streamed responses
//!    ("in stream mode, content and tokens are already in last partial chunk",
//!    tools/server/server-context.cpp), so it only counts when non-empty.
//! 2. **Slots debug**: a [`Annotation::RawText`] with source [`RawTextSource::SlotsDebug`],
//!    recorded after the exchange from llama-server `GET /slots` when the server runs with
//!    `LLAMA_SERVER_SLOTS_DEBUG=1` (the slot keeps `debug_generated_text`, streamed requests
//!    too; the slot is matched by its `prompt`).
//! 3. **Token pieces**: the sampled tokens the response lists when the client asked for them
//!    (OpenAI `logprobs: true` → `choices[0].logprobs.content[].token`; llama-server
//!    `/completion` `n_probs` → `completion_probabilities[].token`), concatenated.
//! 4. **The exchange is a raw completion** (`/completion`, `/v1/completions`, Ollama
//!    `/api/generate`): nothing parsed it, so its text is the model's.
//! 5. **Regenerated**: a [`Annotation::RawText`] with source [`RawTextSource::Regenerated`] —
//!    the rendered prompt re-run through the engine's raw completion endpoint. Labelled the
//!    model's output only when toolscope's parse of it reproduced what the server sent
//!    ([`Verdict::Verified`]); otherwise it is "regenerated, diverged at byte N".
//!
//! Otherwise the result is [`RawOutput::Missing`] with the reason and what the user must change.
//! The text is never synthesised from the parsed answer (content, call arguments or argument
//! deltas): that would replay the server's parse as if the model had written it.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::session::{Annotation, Api, Exchange, RawTextSource};

/// Where a raw text came from (see the module docs for the order they are tried in).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RawSource {
    /// llama-server `__verbose.content` of a non-streamed response.
    Verbose,
    /// llama-server `GET /slots` `generated` (`LLAMA_SERVER_SLOTS_DEBUG=1`) of slot `slot`.
    SlotsDebug {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        slot: Option<u64>,
    },
    /// The sampled token pieces the response listed (`logprobs` / `n_probs`), concatenated.
    TokenPieces,
    /// The exchange is a raw completion; its generated text is the model's output as is.
    Completion,
    /// Re-run through the engine's raw completion endpoint by exchange `by` (when recorded as
    /// one), judged by `verdict`.
    Regenerated {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<u64>,
        verdict: Verdict,
    },
}

/// Whether a regenerated text is what the model wrote for the original exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    /// toolscope's parse of it, under the server's format, gives the server's answer (same
    /// content, same calls).
    Verified,
    /// It first disagrees with the server's answer at byte `at` of the regenerated text.
    Diverged { at: usize },
    /// Not compared (the original answer is unknown, e.g. an HTTP 500 parse failure).
    Unchecked,
}

impl RawSource {
    /// One-line label, as panes and `check` print it: `slots debug (slot 0)`,
    /// `__verbose.content`, `token pieces (logprobs)`, `raw completion`, `regenerated, verified`,
    /// `regenerated, diverged at byte 42`, `regenerated, unchecked`.
    pub fn label(&self) -> String {
        match self {
            RawSource::Verbose => "__verbose.content".into(),
            RawSource::SlotsDebug { slot: Some(s) } => format!("slots debug (slot {s})"),
            RawSource::SlotsDebug { slot: None } => "slots debug".into(),
            RawSource::TokenPieces => "token pieces (logprobs)".into(),
            RawSource::Completion => "raw completion".into(),
            RawSource::Regenerated { verdict, .. } => match verdict {
                Verdict::Verified => "regenerated, verified".into(),
                Verdict::Diverged { at } => format!("regenerated, diverged at byte {at}"),
                Verdict::Unchecked => "regenerated, unchecked".into(),
            },
        }
    }

    /// True when the text is the model's own output for this exchange: every source except a
    /// regeneration that was not verified.
    pub fn is_models_output(&self) -> bool {
        !matches!(
            self,
            RawSource::Regenerated {
                verdict: Verdict::Diverged { .. } | Verdict::Unchecked,
                ..
            }
        )
    }
}

/// What the model wrote for an exchange, or why that is not known.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum RawOutput {
    /// The raw text is known.
    Text {
        /// The text the server's parser read: `prefill` followed by the generated text.
        text: String,
        /// Where the generated text came from.
        source: RawSource,
        /// The sampled token pieces, in order, when they are known and spell the generated
        /// part of `text` exactly (`text[prefill.len()..]`); `None` otherwise.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pieces: Option<Vec<String>>,
        /// The request's assistant prefill (the last message, role `assistant`), which the
        /// server continues: its parser reads it before the generated text. Empty when none.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        prefill: String,
    },
    /// No raw text for this exchange.
    Missing {
        /// Why (e.g. "streamed response: `__verbose.content` is empty in stream mode").
        why: String,
        /// What the user must change to get it (the env var, `-v`, `--regenerate`).
        how: String,
    },
}

impl RawOutput {
    /// The text, when known (whatever its source).
    pub fn text(&self) -> Option<&str> {
        match self {
            RawOutput::Text { text, .. } => Some(text),
            RawOutput::Missing { .. } => None,
        }
    }

    /// The text when it is the model's own output ([`RawSource::is_models_output`]): what rules
    /// that judge the model's text may use.
    pub fn models_text(&self) -> Option<&str> {
        match self {
            RawOutput::Text { text, source, .. } if source.is_models_output() => Some(text),
            _ => None,
        }
    }

    /// One line on this raw output: its source (`raw output: __verbose.content`,
    /// `raw output: slots debug (slot 0)`), or why it is missing and how to get it. What the
    /// Replay pane and `check` say about the raw text.
    pub fn describe(&self) -> String {
        match self {
            RawOutput::Text { source, .. } if source.is_models_output() => {
                format!("raw output: {}", source.label())
            }
            RawOutput::Text { source, .. } => format!(
                "the raw text ({}) is not known to be the model's output, so it is not replayed",
                source.label()
            ),
            RawOutput::Missing { why, how } => {
                format!("the model's raw output is missing: {why}; {how}")
            }
        }
    }

    /// The source, when the text is known.
    pub fn source(&self) -> Option<&RawSource> {
        match self {
            RawOutput::Text { source, .. } => Some(source),
            RawOutput::Missing { .. } => None,
        }
    }
}

/// The assistant prefill of a chat body (OpenAI or Anthropic): the text of its last message
/// when that message has role `assistant` (string content, or the concatenated `text`
/// parts/blocks). llama-server continues such a message (tools/server/server-common.cpp,
/// `prefill_assistant`, build 11434), so its parser reads this prefill before the generated
/// text.
pub fn assistant_prefill(chat: &Value) -> Option<String> {
    let last = chat.get("messages")?.as_array()?.last()?;
    if last.get("role").and_then(Value::as_str) != Some("assistant") {
        return None;
    }
    match last.get("content")? {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => Some(
            parts
                .iter()
                .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect(),
        ),
        _ => None,
    }
}

/// The generation prompt the session recorded for `raw`'s text: the `/slots`
/// `params.generation_prompt` of the latest slots-debug annotation with text (the one
/// [`raw_output`] reads the text from), when `raw` is that text. What llama-server's parser
/// read in front of the generated text, the assistant prefill included.
pub fn recorded_generation_prompt(raw: &RawOutput, annotations: &[Annotation]) -> Option<String> {
    if !matches!(raw.source(), Some(RawSource::SlotsDebug { .. })) {
        return None;
    }
    annotations.iter().rev().find_map(|a| match a {
        Annotation::RawText {
            source: RawTextSource::SlotsDebug,
            text: Some(_),
            generation_prompt,
            ..
        } => Some(generation_prompt.clone().filter(|p| !p.is_empty())),
        _ => None,
    })?
}

/// What the response itself says about the generated text: `__verbose.content` (non-empty),
/// the sampled token pieces, and for raw completions the generated text.
#[derive(Default)]
struct InBody {
    verbose: Option<String>,
    /// Token piece bytes (llama-server sends `bytes` for every piece; `token` is lossy for a
    /// piece that is not valid UTF-8 alone).
    pieces: Vec<Vec<u8>>,
    completion: String,
    /// True when some event/body listed `logprobs` / `completion_probabilities`.
    has_pieces: bool,
}

impl InBody {
    fn read(&mut self, v: &Value) {
        if let Some(c) = v
            .pointer("/__verbose/content")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        {
            self.verbose = Some(c.to_owned());
        }
        // OpenAI chat: choices[0].logprobs.content[]; /v1/completions: choices[0].logprobs
        // .tokens[] (no bytes); llama-server /completion: completion_probabilities[].
        let list = v
            .pointer("/choices/0/logprobs/content")
            .or_else(|| v.get("completion_probabilities"))
            .and_then(Value::as_array);
        if let Some(list) = list {
            self.has_pieces = true;
            for p in list {
                let bytes = p.get("bytes").and_then(Value::as_array).and_then(|b| {
                    b.iter()
                        .map(|x| x.as_u64().and_then(|x| u8::try_from(x).ok()))
                        .collect::<Option<Vec<u8>>>()
                });
                match (bytes, p.get("token").and_then(Value::as_str)) {
                    (Some(b), _) => self.pieces.push(b),
                    (None, Some(t)) => self.pieces.push(t.as_bytes().to_vec()),
                    (None, None) => {}
                }
            }
        } else if let Some(toks) = v
            .pointer("/choices/0/logprobs/tokens")
            .and_then(Value::as_array)
        {
            self.has_pieces = true;
            self.pieces.extend(
                toks.iter()
                    .filter_map(Value::as_str)
                    .map(|t| t.as_bytes().to_vec()),
            );
        }
        if let Some(c) = v.get("content").and_then(Value::as_str) {
            self.completion.push_str(c);
        } else if let Some(t) = v.pointer("/choices/0/text").and_then(Value::as_str) {
            self.completion.push_str(t);
        } else if let Some(r) = v.get("response").and_then(Value::as_str) {
            // Ollama /api/generate
            self.completion.push_str(r);
        }
    }

    /// The pieces as text, when they are valid UTF-8 concatenated: (pieces, text).
    fn pieces_text(&self) -> Option<(Vec<String>, String)> {
        if !self.has_pieces || self.pieces.is_empty() {
            return None;
        }
        let all: Vec<u8> = self.pieces.concat();
        let text = String::from_utf8(all).ok()?;
        let pieces = self
            .pieces
            .iter()
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .collect();
        Some((pieces, text))
    }
}

fn read_body(ex: &Exchange) -> InBody {
    let mut b = InBody::default();
    let Some(resp) = &ex.response else { return b };
    let is_sse = resp.chunks.is_some()
        || ex
            .response_header("content-type")
            .is_some_and(|c| c.contains("text/event-stream"));
    if is_sse {
        // event by event, chunk by chunk: one huge stream is never held whole here (issue #27
        // item 2)
        crate::stream::sse::each_event(crate::stream::sse::recorded_chunks(ex), |ev| {
            if let Ok(v) = serde_json::from_str::<Value>(&ev.data) {
                b.read(&v);
            }
        });
    } else if let Some(body) = resp.body.as_ref() {
        let text = body.to_text();
        if let Ok(v) = serde_json::from_str::<Value>(&text) {
            b.read(&v);
        } else if ex.api() == Api::Completion {
            // Ollama /api/generate streams NDJSON without SSE framing.
            for line in text.lines() {
                if let Ok(v) = serde_json::from_str::<Value>(line) {
                    b.read(&v);
                }
            }
        }
    }
    b
}

/// The model's raw output for exchange `ex`, given the annotations recorded for it (any order;
/// later ones win within a source). See the module docs for the sources and their order.
///
/// `Missing` says why and how: a streamed llama-server response without slots debug ("start
/// llama-server with `LLAMA_SERVER_SLOTS_DEBUG=1`"), a non-streamed one without `-v`, a slot
/// whose prompt no longer matched (the slot was reused by a later request before it was read),
/// an engine that exposes no raw text (use `toolscope regenerate` / `proxy --regenerate`).
pub fn raw_output(ex: &Exchange, annotations: &[Annotation]) -> RawOutput {
    raw_output_of(ex, ex.request_json().as_ref(), annotations)
}

/// [`raw_output`] with the request body already parsed (`chat`: `ex`'s request as JSON, or
/// `None` when it is not JSON), so a caller that holds it does not parse it again.
pub fn raw_output_of(ex: &Exchange, chat: Option<&Value>, annotations: &[Annotation]) -> RawOutput {
    let prefill = match ex.api() {
        Api::Openai | Api::Anthropic => chat.and_then(assistant_prefill),
        // a Responses request ending with an assistant message item prefills as the chat
        // request llama-server converts it to does
        Api::Responses => chat
            .and_then(|c| crate::template::responses::responses_to_chat(c).ok())
            .and_then(|c| assistant_prefill(&c.body)),
        _ => None,
    }
    .unwrap_or_default();
    let body = read_body(ex);
    let text_of = |generated: &str| format!("{prefill}{generated}");
    let pieces_for = |generated: &str| {
        body.pieces_text()
            .filter(|(_, t)| t == generated)
            .map(|(p, _)| p)
    };

    if let Some(v) = &body.verbose {
        return RawOutput::Text {
            text: text_of(v),
            source: RawSource::Verbose,
            pieces: pieces_for(v),
            prefill,
        };
    }
    let raw_texts = annotations.iter().rev().filter_map(|a| match a {
        Annotation::RawText {
            source,
            text,
            slot,
            by,
            verified,
            diverged_at,
            error,
            ..
        } => Some((source, text, slot, by, verified, diverged_at, error)),
        _ => None,
    });
    let mut slot_error = None;
    let mut regenerated = None;
    for (source, text, slot, by, verified, diverged_at, error) in raw_texts {
        match (source, text) {
            (RawTextSource::SlotsDebug, Some(t)) => {
                return RawOutput::Text {
                    text: text_of(t),
                    source: RawSource::SlotsDebug { slot: *slot },
                    pieces: pieces_for(t),
                    prefill,
                };
            }
            (RawTextSource::SlotsDebug, None) => {
                slot_error.get_or_insert_with(|| error.clone().unwrap_or_default());
            }
            (RawTextSource::Regenerated, Some(t)) => {
                let verdict = match (verified, diverged_at) {
                    (Some(true), _) => Verdict::Verified,
                    (_, Some(at)) => Verdict::Diverged { at: *at },
                    _ => Verdict::Unchecked,
                };
                // A verified regeneration wins over a later unverified one.
                let better = match &regenerated {
                    None => true,
                    Some((v, _, _)) => *v != Verdict::Verified && verdict == Verdict::Verified,
                };
                if better {
                    regenerated = Some((verdict, *by, t.clone()));
                }
            }
            (RawTextSource::Regenerated, None) => {}
        }
    }
    if let Some((pieces, t)) = body.pieces_text()
        && ex.api() != Api::Completion
    {
        return RawOutput::Text {
            text: text_of(&t),
            source: RawSource::TokenPieces,
            pieces: Some(pieces),
            prefill,
        };
    }
    if ex.api() == Api::Completion && ex.response.as_ref().is_some_and(|r| r.status < 400) {
        let generated = body.completion.clone();
        return RawOutput::Text {
            pieces: pieces_for(&generated),
            text: generated,
            source: RawSource::Completion,
            prefill: String::new(),
        };
    }
    if let Some((verdict, by, t)) = regenerated {
        return RawOutput::Text {
            text: text_of(&t),
            source: RawSource::Regenerated { by, verdict },
            pieces: None,
            prefill,
        };
    }
    missing(ex, slot_error)
}

/// Why there is no raw text, and how to get it.
fn missing(ex: &Exchange, slot_error: Option<String>) -> RawOutput {
    let regen = "or re-run it with `toolscope regenerate SESSION --exchange ID --url URL` \
                 (or record with `toolscope proxy --regenerate`)";
    if !ex.api().is_generation() {
        return RawOutput::Missing {
            why: format!("{} is not a generation request", ex.request.path),
            how: "nothing to capture".into(),
        };
    }
    let Some(resp) = &ex.response else {
        return RawOutput::Missing {
            why: "the exchange has no response".into(),
            how: "re-send the request".into(),
        };
    };
    if let Some(e) = slot_error.filter(|e| !e.is_empty()) {
        return RawOutput::Missing {
            why: format!("llama-server /slots had no text for this exchange: {e}"),
            how: format!(
                "start llama-server with LLAMA_SERVER_SLOTS_DEBUG=1 and keep one request per slot in flight (e.g. `--parallel 1`), {regen}"
            ),
        };
    }
    if resp.status >= 400 {
        return RawOutput::Missing {
            why: format!(
                "HTTP {}: the server sent no generated text (its parser may have rejected it)",
                resp.status
            ),
            how: format!(
                "start llama-server with LLAMA_SERVER_SLOTS_DEBUG=1 (toolscope reads GET /slots after each exchange), {regen}"
            ),
        };
    }
    if ex.is_stream() {
        RawOutput::Missing {
            why: "streamed response: servers send only their parse of the text (llama-server's `__verbose.content` is empty in stream mode)".into(),
            how: format!(
                "start llama-server with LLAMA_SERVER_SLOTS_DEBUG=1 (toolscope reads GET /slots after each exchange), {regen}"
            ),
        }
    } else {
        RawOutput::Missing {
            why:
                "the response carries only the server's parse of the text (no `__verbose.content`)"
                    .into(),
            how: format!(
                "start llama-server with LLAMA_SERVER_SLOTS_DEBUG=1, or with `-v` (or send `\"verbose\": true`), {regen}"
            ),
        }
    }
}

/// The generated text of the llama-server slot that served an exchange, from `GET /slots`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotText {
    /// Slot id (`id`).
    pub slot: u64,
    /// `generated`: the slot's last generated text (`debug_generated_text` once the task
    /// ended; tools/server/server-context.cpp, build 11434).
    pub generated: String,
    /// `params.generation_prompt`: what the server's parser reads before `generated`.
    pub generation_prompt: Option<String>,
}

/// Whether a slot's `prompt` (the task's prompt tokens detokenized with specials,
/// tools/server/server-context.cpp `to_json`) is `prompt` (the `/apply-template` render):
/// equal, or equal after the BOS text the tokenizer added in front.
fn same_prompt(slot_prompt: &str, prompt: &str, bos: Option<&str>) -> bool {
    slot_prompt == prompt
        || bos
            .filter(|b| !b.is_empty())
            .and_then(|b| slot_prompt.strip_prefix(b))
            .is_some_and(|rest| rest == prompt)
}

/// Picks the slot of `GET /slots` (`slots`: the array answer of llama-server build 11434) whose
/// `prompt` is `prompt`, this exchange's rendered prompt; `bos` is the server's BOS text
/// (`/props` `bos_token`), which the slot's prompt may carry in front.
///
/// Errors (the reason, to record): the answer is not a list; no slot lists a `prompt` (the
/// server runs without `LLAMA_SERVER_SLOTS_DEBUG=1`); the matching slot is still busy (a later
/// request with the same prompt, or this one not yet stopped after a client disconnect: its
/// `generated` is partial or another request's); no slot's prompt matches (the slot was
/// reused by a later request before `/slots` was read). Never returns another exchange's text.
pub fn pick_slot(slots: &Value, prompt: &str, bos: Option<&str>) -> Result<SlotText, String> {
    let Some(list) = slots.as_array() else {
        return Err("GET /slots did not answer a list of slots".into());
    };
    if !list.iter().any(|s| s.get("prompt").is_some()) {
        return Err(
            "llama-server runs without LLAMA_SERVER_SLOTS_DEBUG=1: GET /slots lists no prompt or generated text"
                .into(),
        );
    }
    let matching: Vec<&Value> = list
        .iter()
        .filter(|s| {
            s.get("prompt")
                .and_then(Value::as_str)
                .is_some_and(|p| same_prompt(p, prompt, bos))
        })
        .collect();
    let Some(slot) = matching
        .iter()
        .find(|s| s.get("is_processing").and_then(Value::as_bool) != Some(true))
    else {
        return Err(match matching.first() {
            Some(s) => format!(
                "slot {} was still busy with a request with this prompt when GET /slots was read (a later request with the same prompt, or this one not yet stopped after the client disconnected); its text is not known to be this exchange's",
                s.get("id").and_then(Value::as_u64).unwrap_or(0)
            ),
            None => "no slot's prompt is this exchange's rendered prompt: the slot was reused by a later request before GET /slots was read".into(),
        });
    };
    Ok(SlotText {
        slot: slot.get("id").and_then(Value::as_u64).unwrap_or(0),
        generated: slot
            .get("generated")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
        generation_prompt: slot
            .pointer("/params/generation_prompt")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned),
    })
}

/// Judges a regenerated text against the answer the server sent (`server`, its parse of what
/// the model wrote then): toolscope parses `prefill` + `generated` under `syntax` (the server's
/// call format, from its chat template) with the request's `tools`, and the text is
/// [`Verdict::Verified`] when that parse gives the same content, reasoning and calls (names and
/// argument values, in order; whitespace around content ignored). A server that did not split
/// reasoning out (its content still holds it) is compared with the parse's reasoning and
/// content together.
///
/// Otherwise [`Verdict::Diverged`] with `at` = the byte offset in `generated` of the first
/// disagreement: where the content (or reasoning) first differs, or the span start of the first
/// call that differs, or the end of the text when the server's answer has more.
pub fn verify_regenerated(
    server: &crate::stream::AssistantMessage,
    prefill: &str,
    generated: &str,
    syntax: Option<crate::parser::Syntax>,
    tools: Option<&Value>,
) -> Verdict {
    let raw = format!("{prefill}{generated}");
    let parsed = crate::parser::parse(&raw, syntax, tools);
    let rel = |at: usize| at.saturating_sub(prefill.len()).min(generated.len());
    let mut first: Option<usize> = None;
    let mut note = |at: usize| {
        first = Some(first.map_or(at, |f: usize| f.min(at)));
    };
    // Text parts: content, and reasoning when the server split it out.
    let (server_text, parsed_text) = if server.reasoning.trim().is_empty()
        && !parsed.reasoning.trim().is_empty()
        && server.content.contains(parsed.reasoning.trim())
    {
        (
            server.content.trim().to_owned(),
            raw_without_calls(&raw, &parsed).trim().to_owned(),
        )
    } else {
        if server.reasoning.trim() != parsed.reasoning.trim() {
            note(text_divergence(&raw, &parsed.reasoning, &server.reasoning));
        }
        (
            server.content.trim().to_owned(),
            parsed.content.trim().to_owned(),
        )
    };
    if server_text != parsed_text {
        note(text_divergence(&raw, &parsed_text, &server_text));
    }
    // Calls, in order.
    let sc = &server.tool_calls;
    let pc = &parsed.tool_calls;
    for i in 0..sc.len().max(pc.len()) {
        match (sc.get(i), pc.get(i)) {
            (Some(s), Some(p)) => {
                let same =
                    s.name == p.name && s.arguments_json().ok().as_ref() == Some(&p.arguments);
                if !same {
                    note(p.span.map_or(raw.len(), |(a, _)| a));
                    break;
                }
            }
            (None, Some(p)) => {
                note(p.span.map_or(raw.len(), |(a, _)| a));
                break;
            }
            (Some(_), None) => {
                note(pc.last().and_then(|p| p.span).map_or(raw.len(), |(_, b)| b));
                break;
            }
            (None, None) => break,
        }
    }
    match first {
        None => Verdict::Verified,
        Some(at) => Verdict::Diverged { at: rel(at) },
    }
}

/// `raw` with the spans of the parsed calls cut out.
fn raw_without_calls(raw: &str, parsed: &crate::parser::ParseOutput) -> String {
    let mut out = String::new();
    let mut at = 0;
    for (a, b) in parsed.tool_calls.iter().filter_map(|c| c.span) {
        if a >= at && b <= raw.len() {
            out.push_str(raw.get(at..a).unwrap_or(""));
            at = b;
        }
    }
    out.push_str(raw.get(at..).unwrap_or(""));
    out
}

/// Byte offset in `raw` where `parsed` (a text toolscope's parse took from `raw`) first
/// differs from `server`: the common prefix of the two (leading whitespace ignored), placed
/// where `parsed` starts in `raw`.
fn text_divergence(raw: &str, parsed: &str, server: &str) -> usize {
    let p = parsed.trim_start();
    let s = server.trim_start();
    let common = p
        .char_indices()
        .zip(s.chars())
        .find(|((_, a), b)| a != b)
        .map_or(p.len().min(s.len()), |((i, _), _)| i);
    let start = if p.is_empty() {
        raw.len()
    } else {
        raw.find(p).unwrap_or(0)
    };
    (start + common).min(raw.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::{Body, Chunk, Request, Response};
    use serde_json::json;

    fn chat_ex(req: Value, body: Option<&str>, chunks: Option<&[&str]>) -> Exchange {
        Exchange {
            id: 1,
            request: Request {
                method: "POST".into(),
                path: "/v1/chat/completions".into(),
                body: Body::from_bytes(req.to_string().as_bytes()),
                ..Default::default()
            },
            response: Some(Response {
                status: 200,
                headers: vec![(
                    "content-type".into(),
                    if chunks.is_some() {
                        "text/event-stream".into()
                    } else {
                        "application/json".into()
                    },
                )],
                body: body.map(|b| Body::from_bytes(b.as_bytes())),
                chunks: chunks.map(|c| {
                    c.iter()
                        .map(|s| Chunk {
                            t_us: 0,
                            data: Body::from_bytes(s.as_bytes()),
                        })
                        .collect()
                }),
            }),
            ..Default::default()
        }
    }

    const CALL: &str = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lisbon\"}}\n</tool_call>";

    /// A streamed call as llama-server b11434 sends it without -v: the argument deltas only.
    fn streamed_call() -> Exchange {
        chat_ex(
            json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "w?"}]}),
            None,
            Some(&[
                "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"index\":0,\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\\\"\"}}]}}]}\n\n",
                "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"city\\\": \\\"Lisbon\\\"}\"}}]}}]}\n\n",
                "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
                "data: [DONE]\n\n",
            ]),
        )
    }

    fn slots(text: Option<&str>, error: Option<&str>) -> Annotation {
        Annotation::RawText {
            exchange: 1,
            source: RawTextSource::SlotsDebug,
            text: text.map(str::to_owned),
            slot: Some(0),
            generation_prompt: None,
            by: None,
            verified: None,
            diverged_at: None,
            prompt_from: None,
            error: error.map(str::to_owned),
        }
    }

    #[test]
    fn streamed_call_without_capture_is_missing_never_the_argument_deltas() {
        let out = raw_output(&streamed_call(), &[]);
        let RawOutput::Missing { why, how } = &out else {
            panic!("{out:?}")
        };
        assert!(why.contains("stream"), "{why}");
        assert!(how.contains("LLAMA_SERVER_SLOTS_DEBUG=1"), "{how}");
        assert!(how.contains("--regenerate"), "{how}");
    }

    #[test]
    fn slots_debug_text_is_the_raw_output() {
        let out = raw_output(&streamed_call(), &[slots(Some(CALL), None)]);
        assert_eq!(out.text(), Some(CALL));
        assert_eq!(out.source(), Some(&RawSource::SlotsDebug { slot: Some(0) }));
        assert_eq!(out.source().unwrap().label(), "slots debug (slot 0)");
        // A slot that no longer matched: said so, with what to change.
        let out = raw_output(
            &streamed_call(),
            &[slots(
                None,
                Some("no slot's prompt matched this exchange's"),
            )],
        );
        let RawOutput::Missing { why, .. } = &out else {
            panic!("{out:?}")
        };
        assert!(why.contains("no slot's prompt matched"), "{why}");
    }

    #[test]
    fn verbose_content_wins_and_empty_verbose_content_does_not_count() {
        let body = json!({"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null, "tool_calls": []}}], "__verbose": {"content": CALL}});
        let ex = chat_ex(json!({"messages": []}), Some(&body.to_string()), None);
        let out = raw_output(&ex, &[slots(Some("other"), None)]);
        assert_eq!(out.text(), Some(CALL));
        assert_eq!(out.source(), Some(&RawSource::Verbose));
        let body = json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}}], "__verbose": {"content": ""}});
        let ex = chat_ex(json!({"messages": []}), Some(&body.to_string()), None);
        let out = raw_output(&ex, &[]);
        // Not synthesised from the content either.
        assert!(matches!(out, RawOutput::Missing { .. }), "{out:?}");
    }

    #[test]
    fn prefill_is_prepended_and_token_pieces_spell_the_text() {
        let req = json!({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "<think>\n"}], "logprobs": true});
        let body = json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": "Hm"},
            "logprobs": {"content": [{"token": "H", "bytes": [72]}, {"token": "m", "bytes": [109]}]}}]});
        let ex = chat_ex(req, Some(&body.to_string()), None);
        let out = raw_output(&ex, &[]);
        assert_eq!(
            out,
            RawOutput::Text {
                text: "<think>\nHm".into(),
                source: RawSource::TokenPieces,
                pieces: Some(vec!["H".into(), "m".into()]),
                prefill: "<think>\n".into(),
            }
        );
    }

    #[test]
    fn regenerated_is_the_models_output_only_when_verified() {
        let regen = |verified: Option<bool>, at: Option<usize>| Annotation::RawText {
            exchange: 1,
            source: RawTextSource::Regenerated,
            text: Some(CALL.into()),
            slot: None,
            generation_prompt: None,
            by: Some(2),
            verified,
            diverged_at: at,
            prompt_from: None,
            error: None,
        };
        let out = raw_output(&streamed_call(), &[regen(None, Some(12))]);
        assert_eq!(
            out.source().unwrap().label(),
            "regenerated, diverged at byte 12"
        );
        assert_eq!(out.models_text(), None);
        assert_eq!(out.text(), Some(CALL));
        let out = raw_output(
            &streamed_call(),
            &[regen(Some(true), None), regen(None, Some(3))],
        );
        assert_eq!(out.source().unwrap().label(), "regenerated, verified");
        assert_eq!(out.models_text(), Some(CALL));
    }

    #[test]
    fn raw_completion_stream_is_its_own_raw_text() {
        let mut ex = chat_ex(
            json!({"prompt": "P", "stream": true}),
            None,
            Some(&[
                "data: {\"content\":\"<tool\",\"stop\":false}\n\n",
                "data: {\"content\":\"_call>\",\"stop\":false}\n\n",
                "data: {\"content\":\"\",\"stop\":true,\"stop_type\":\"eos\"}\n\n",
            ]),
        );
        ex.request.path = "/completion".into();
        let out = raw_output(&ex, &[]);
        assert_eq!(out.text(), Some("<tool_call>"));
        assert_eq!(out.source(), Some(&RawSource::Completion));
    }

    #[test]
    fn slot_is_picked_by_prompt_never_another_exchanges() {
        let slots = json!([
            {"id": 0, "is_processing": false, "prompt": "<|im_start|>user\nA<|im_end|>\n<|im_start|>assistant\n", "generated": "text for A", "params": {"generation_prompt": "<|im_start|>assistant\n"}},
            {"id": 1, "is_processing": false, "prompt": "<s>B", "generated": "text for B", "params": {}},
            {"id": 2, "is_processing": false}
        ]);
        let a = pick_slot(
            &slots,
            "<|im_start|>user\nA<|im_end|>\n<|im_start|>assistant\n",
            None,
        )
        .unwrap();
        assert_eq!(
            a,
            SlotText {
                slot: 0,
                generated: "text for A".into(),
                generation_prompt: Some("<|im_start|>assistant\n".into())
            }
        );
        // BOS the tokenizer added in front of the render.
        assert_eq!(
            pick_slot(&slots, "B", Some("<s>")).unwrap().generated,
            "text for B"
        );
        assert!(pick_slot(&slots, "B", None).is_err());
        // The slot was reused: no text, and why.
        let e = pick_slot(&slots, "C", None).unwrap_err();
        assert!(e.contains("reused"), "{e}");
        // Busy with a later request that has the same prompt.
        let busy = json!([{"id": 3, "is_processing": true, "prompt": "C", "generated": "partial"}]);
        let e = pick_slot(&busy, "C", None).unwrap_err();
        assert!(e.contains("slot 3"), "{e}");
        // The slot may also still be finishing this very request: after a client disconnect
        // the proxy cancels upstream, and llama-server stops the task only later (seen live:
        // b11434, the openai SDK closing a stream after 5 chunks, no later request).
        assert!(e.contains("client disconnected"), "{e}");
        // Without the env var the slots list no prompt.
        let off = json!([{"id": 0, "is_processing": false, "n_ctx": 4096}]);
        assert!(
            pick_slot(&off, "C", None)
                .unwrap_err()
                .contains("LLAMA_SERVER_SLOTS_DEBUG=1")
        );
    }

    #[test]
    fn regenerated_text_verified_only_when_its_parse_is_the_servers_answer() {
        use crate::parser::Syntax;
        use crate::stream::{AssistantMessage, CallRecord};
        let server = AssistantMessage {
            tool_calls: vec![CallRecord {
                name: "get_weather".into(),
                arguments: "{\"city\":\"Lisbon\"}".into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let hermes = Some(Syntax::Hermes);
        assert_eq!(
            verify_regenerated(&server, "", CALL, hermes, None),
            Verdict::Verified
        );
        // Another city: the call (from its first byte) differs.
        let other = CALL.replace("Lisbon", "Porto");
        assert_eq!(
            verify_regenerated(&server, "", &other, hermes, None),
            Verdict::Diverged { at: 0 }
        );
        // Text before the call that the server did not send: content differs at byte 0.
        let chatty = format!("Sure!\n{CALL}");
        assert_eq!(
            verify_regenerated(&server, "", &chatty, hermes, None),
            Verdict::Diverged { at: 0 }
        );
        // Plain text answers: the first differing byte.
        let said = AssistantMessage {
            content: "It is sunny in Lisbon.".into(),
            ..Default::default()
        };
        assert_eq!(
            verify_regenerated(&said, "", "It is rainy in Lisbon.", hermes, None),
            Verdict::Diverged { at: 6 }
        );
        assert_eq!(
            verify_regenerated(&said, "", "It is sunny in Lisbon.", hermes, None),
            Verdict::Verified
        );
        // The server's answer has a call the text does not.
        assert_eq!(
            verify_regenerated(&server, "", "No call.", hermes, None),
            Verdict::Diverged { at: 0 }
        );
    }
}
