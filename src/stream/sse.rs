//! Server-sent events decoding, correct for any chunk boundary.
//!
//! Follows the WHATWG HTML Living Standard, §9.2.6 "Interpreting an event stream":
//! lines end in CRLF, LF or CR; a line starting with `:` is a comment; `field: value` strips one
//! space after the colon; `data` lines are joined with LF; `event`, `id` (ignored when it
//! contains U+0000) and `retry` (ASCII digits only) are kept; an empty line dispatches the event
//! when its data buffer is not empty; one leading UTF-8 BOM is stripped; invalid UTF-8 decodes to
//! U+FFFD.
//!
//! Two deliberate departures, both for an inspector rather than a browser:
//! * a truncated stream's last, unterminated event is reported by [`SseDecoder::finish`] with
//!   `complete: false` instead of being discarded (the spec discards it);
//! * [`SseEvent::id`] is the `id:` field given *in this event's block*, not the persistent
//!   "last event ID" (that one is [`SseDecoder::last_event_id`]).
//!
//! Why not the `eventsource-stream` crate (0.2.3): it is an async `Stream` adaptor that yields
//! only `{event, data, id, retry}`, with no byte offsets, chunk index or receive time; it drops
//! a truncated final event and a final line ended by a lone CR at end of stream; and a chunk with
//! invalid (not merely split) UTF-8 is buffered forever. The decoder here works on bytes, splits
//! lines on the ASCII bytes CR/LF (which never occur inside a multi-byte UTF-8 sequence, so a
//! character split across chunks is simply reassembled in the line buffer), and is synchronous
//! and pure.

use serde::{Deserialize, Serialize};

/// One dispatched server-sent event.
///
/// Byte offsets count from the first byte of the response body (a BOM included).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SseEvent {
    /// 0-based event number in the stream (the number findings cite as `evidence.event`).
    pub index: usize,
    /// `event:` field; `None` when absent or empty (a browser would report type `message`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<String>,
    /// `data:` lines joined with `\n` (no trailing newline).
    pub data: String,
    /// `id:` field given in this event's block, if any (values containing U+0000 are ignored,
    /// as the spec says).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// `retry:` given in this event's block, in milliseconds (ASCII digits only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<u64>,
    /// 0-based index of the chunk in which the event was completed (the chunk holding the end of
    /// the blank line that dispatched it; for a truncated event, the last chunk).
    pub chunk: usize,
    /// Byte offset of the event's first line (field or comment) in the body.
    pub offset: usize,
    /// Byte offset just past the event's last line terminator, i.e. where the dispatching blank
    /// line starts (for a truncated event: the end of the body). `body[offset..end]` is the
    /// event's text.
    pub end: usize,
    /// Receive time of the completing chunk, microseconds from the request start, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_us: Option<u64>,
    /// `false` for the final event of a truncated stream (no blank line after it).
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub complete: bool,
}

fn yes() -> bool {
    true
}
fn is_true(b: &bool) -> bool {
    *b
}

/// A place in the byte stream where a line was not valid UTF-8 (decoded with U+FFFD).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SseProblem {
    /// Byte offset of the first invalid byte in the body.
    pub offset: usize,
    /// What was wrong, in words.
    pub message: String,
}

/// Incremental SSE decoder: feed byte chunks as they arrive, collect events.
///
/// ```
/// use toolscope::stream::sse::SseDecoder;
/// let mut d = SseDecoder::new();
/// let mut ev = d.feed(b"data: a\r", Some(10));
/// ev.extend(d.feed(b"\n\r\n", Some(20)));
/// assert_eq!(ev[0].data, "a");
/// assert_eq!((ev[0].chunk, ev[0].t_us), (1, Some(20)));
/// ```
#[derive(Debug, Default, Clone)]
pub struct SseDecoder {
    /// Bytes of the current, unterminated line.
    line: Vec<u8>,
    /// Absolute offset of the current line's first byte.
    line_start: usize,
    /// Total bytes fed.
    pos: usize,
    /// Previous chunk ended in CR: an LF starting the next chunk belongs to that CRLF.
    skip_lf: bool,
    /// Up to 3 leading bytes held back until we know whether they are a BOM.
    bom_state: BomState,
    chunk: usize,
    chunks_seen: usize,
    t_us: Option<u64>,
    // event block being built
    data: String,
    has_data: bool,
    event: Option<String>,
    id: Option<String>,
    block_retry: Option<u64>,
    block_start: Option<usize>,
    // stream state
    next_index: usize,
    last_event_id: String,
    reconnection_ms: Option<u64>,
    problems: Vec<SseProblem>,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum BomState {
    /// Nothing seen yet; bytes of a possible BOM prefix matched so far.
    #[default]
    Start,
    Matched(u8),
    Done,
}

const BOM: [u8; 3] = [0xEF, 0xBB, 0xBF];

impl SseDecoder {
    /// A decoder at the start of a stream.
    pub fn new() -> SseDecoder {
        SseDecoder::default()
    }

    /// Feeds the next chunk (any size, any boundary) received at `t_us` microseconds from the
    /// request start, returning the events it completed, in order.
    pub fn feed(&mut self, bytes: &[u8], t_us: Option<u64>) -> Vec<SseEvent> {
        let mut out = Vec::new();
        self.feed_into(bytes, t_us, &mut out);
        out
    }

    /// Like [`SseDecoder::feed`], appending to `out`.
    pub fn feed_into(&mut self, mut bytes: &[u8], t_us: Option<u64>, out: &mut Vec<SseEvent>) {
        self.chunk = self.chunks_seen;
        self.chunks_seen += 1;
        self.t_us = t_us;
        // Strip one leading BOM, which itself may be split across chunks.
        while self.bom_state != BomState::Done && !bytes.is_empty() {
            let matched = match self.bom_state {
                BomState::Start => 0,
                BomState::Matched(n) => n,
                BomState::Done => unreachable!(),
            };
            if bytes[0] == BOM[matched as usize] {
                bytes = &bytes[1..];
                self.pos += 1;
                if matched + 1 == 3 {
                    self.bom_state = BomState::Done;
                    self.line_start = self.pos;
                } else {
                    self.bom_state = BomState::Matched(matched + 1);
                }
            } else {
                // Not a BOM: the held bytes are ordinary line content.
                self.bom_state = BomState::Done;
                self.line.extend_from_slice(&BOM[..matched as usize]);
                self.line_start = 0;
            }
        }
        let mut i = 0;
        while i < bytes.len() {
            if self.skip_lf {
                self.skip_lf = false;
                if bytes[i] == b'\n' {
                    i += 1;
                    self.pos += 1;
                    self.line_start = self.pos;
                    continue;
                }
            }
            let rest = &bytes[i..];
            match rest.iter().position(|&b| b == b'\n' || b == b'\r') {
                None => {
                    self.line.extend_from_slice(rest);
                    self.pos += rest.len();
                    break;
                }
                Some(k) => {
                    let term = rest[k];
                    let line_start = self.line_start;
                    if self.line.is_empty() {
                        self.process_line(&rest[..k], line_start, out);
                    } else {
                        let mut line = std::mem::take(&mut self.line);
                        line.extend_from_slice(&rest[..k]);
                        self.process_line(&line, line_start, out);
                        line.clear();
                        self.line = line;
                    }
                    self.pos += k + 1;
                    i += k + 1;
                    if term == b'\r' {
                        if i < bytes.len() {
                            if bytes[i] == b'\n' {
                                i += 1;
                                self.pos += 1;
                            }
                        } else {
                            self.skip_lf = true;
                        }
                    }
                    self.line_start = self.pos;
                }
            }
        }
    }

    /// Ends the stream. Returns the pending event when the stream stopped inside one (a last
    /// line without terminator, or field lines without the blank line): `complete: false`.
    /// Returns `None` when the stream ended cleanly.
    pub fn finish(&mut self) -> Option<SseEvent> {
        if self.bom_state == BomState::Start || matches!(self.bom_state, BomState::Matched(_)) {
            if let BomState::Matched(n) = self.bom_state {
                self.line.extend_from_slice(&BOM[..n as usize]);
                self.line_start = 0;
            }
            self.bom_state = BomState::Done;
        }
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            let mut sink = Vec::new();
            let start = self.line_start;
            self.process_line(&line, start, &mut sink);
            debug_assert!(sink.is_empty());
        }
        self.block_start?;
        let ev = self.take_event(self.pos, false);
        self.reset_block();
        ev
    }

    /// The spec's "last event ID" after everything fed so far (persists across events).
    pub fn last_event_id(&self) -> &str {
        &self.last_event_id
    }

    /// The reconnection time set by the last valid `retry:` field, in milliseconds.
    pub fn retry(&self) -> Option<u64> {
        self.reconnection_ms
    }

    /// Bytes fed so far.
    pub fn bytes_seen(&self) -> usize {
        self.pos
    }

    /// Lines that were not valid UTF-8 (decoded lossily), with their offsets.
    pub fn problems(&self) -> &[SseProblem] {
        &self.problems
    }

    fn reset_block(&mut self) {
        self.data.clear();
        self.has_data = false;
        self.event = None;
        self.id = None;
        self.block_retry = None;
        self.block_start = None;
    }

    fn take_event(&mut self, end: usize, complete: bool) -> Option<SseEvent> {
        if !self.has_data {
            return None;
        }
        let mut data = std::mem::take(&mut self.data);
        if data.ends_with('\n') {
            data.pop();
        }
        // the buffer grew by doubling: an event of a huge stream keeps only its text (issue
        // #27 item 2: ~2× the event's bytes otherwise)
        data.shrink_to_fit();
        let ev = SseEvent {
            index: self.next_index,
            event: self.event.take().filter(|e| !e.is_empty()),
            data,
            id: self.id.take(),
            retry: self.block_retry.take(),
            chunk: self.chunk,
            offset: self.block_start.unwrap_or(end),
            end,
            t_us: self.t_us,
            complete,
        };
        self.next_index += 1;
        Some(ev)
    }

    fn process_line(&mut self, raw: &[u8], start: usize, out: &mut Vec<SseEvent>) {
        if raw.is_empty() {
            // Dispatch.
            if let Some(ev) = self.take_event(start, true) {
                out.push(ev);
            }
            self.reset_block();
            return;
        }
        if self.block_start.is_none() {
            self.block_start = Some(start);
        }
        if raw[0] == b':' {
            return; // comment
        }
        let line = match std::str::from_utf8(raw) {
            Ok(s) => std::borrow::Cow::Borrowed(s),
            Err(e) => {
                self.problems.push(SseProblem {
                    offset: start + e.valid_up_to(),
                    message: format!(
                        "invalid UTF-8 at byte {} (decoded as U+FFFD)",
                        start + e.valid_up_to()
                    ),
                });
                String::from_utf8_lossy(raw)
            }
        };
        let (field, value) = match line.find(':') {
            Some(c) => {
                let v = &line[c + 1..];
                (&line[..c], v.strip_prefix(' ').unwrap_or(v))
            }
            None => (&line[..], ""),
        };
        match field {
            "data" => {
                self.data.push_str(value);
                self.data.push('\n');
                self.has_data = true;
            }
            "event" => self.event = Some(value.to_owned()),
            "id" if !value.contains('\0') => {
                self.id = Some(value.to_owned());
                self.last_event_id = value.to_owned();
            }
            "retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                if let Ok(ms) = value.parse::<u64>() {
                    self.block_retry = Some(ms);
                    self.reconnection_ms = Some(ms);
                }
            }
            _ => {}
        }
    }
}

/// Decodes a whole recorded stream: `chunks` are `(bytes, t_us)` in receive order. The last
/// event is included with `complete: false` when the stream was truncated.
pub fn decode_chunks<B, I>(chunks: I) -> Vec<SseEvent>
where
    B: AsRef<[u8]>,
    I: IntoIterator<Item = (B, Option<u64>)>,
{
    let mut out = Vec::new();
    each_event(chunks, |e| out.push(e));
    out
}

/// [`decode_chunks`] without collecting: each event goes to `f` as soon as its chunk completes
/// it (the unterminated last one after the last chunk), so a reader that keeps only what it
/// extracts holds one chunk's events at a time, not the whole stream's (issue #27 item 2).
/// Each chunk's bytes are read as they come (`&[u8]`, `Vec<u8>`, `Cow<[u8]>`).
pub fn each_event<B, I>(chunks: I, mut f: impl FnMut(SseEvent))
where
    B: AsRef<[u8]>,
    I: IntoIterator<Item = (B, Option<u64>)>,
{
    let mut d = SseDecoder::new();
    let mut out = Vec::new();
    for (bytes, t) in chunks {
        d.feed_into(bytes.as_ref(), t, &mut out);
        out.drain(..).for_each(&mut f);
    }
    if let Some(e) = d.finish() {
        f(e);
    }
}

/// One recorded chunk: its bytes (borrowed, or decoded from base64) and its receive time in µs
/// (`None` for a body not recorded as chunks).
pub type RecordedChunk<'a> = (std::borrow::Cow<'a, [u8]>, Option<u64>);

/// The recorded chunks of `ex`'s response as `(bytes, receive µs)`, each borrowed (a text
/// chunk) or decoded on its own (base64); the body as one chunk without a time when it was not
/// recorded as chunks; nothing without a response. Nothing is concatenated.
pub fn recorded_chunks(
    ex: &crate::session::Exchange,
) -> Box<dyn Iterator<Item = RecordedChunk<'_>> + '_> {
    match ex.response.as_ref() {
        Some(r) => match (&r.chunks, &r.body) {
            (Some(chunks), _) => Box::new(chunks.iter().map(|c| (c.data.bytes(), Some(c.t_us)))),
            (None, Some(b)) => Box::new(std::iter::once((b.bytes(), None))),
            (None, None) => Box::new(std::iter::empty()),
        },
        None => Box::new(std::iter::empty()),
    }
}

/// Decodes a whole body given as one buffer (chunk 0, no receive times).
pub fn decode_bytes(body: &[u8]) -> Vec<SseEvent> {
    decode_chunks([(body, None)])
}

/// The server messages of an exchange recorded over a WebSocket (the Responses API's
/// WebSocket mode: one JSON event per message, `response.chunks` one per message) as the
/// events a streamed POST would have carried: `event` is the message's `type`, `data` the
/// message, one event per chunk with its offsets and receive time. Empty for other exchanges.
pub fn websocket_events(ex: &crate::session::Exchange) -> Vec<SseEvent> {
    if ex.websocket.is_none() {
        return Vec::new();
    }
    let Some(chunks) = ex.response.as_ref().and_then(|r| r.chunks.as_ref()) else {
        return Vec::new();
    };
    #[derive(serde::Deserialize)]
    struct Type {
        #[serde(rename = "type")]
        ty: Option<String>,
    }
    let mut offset = 0usize;
    chunks
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let data = c.data.to_text().into_owned();
            let len = c.data.len();
            let ev = SseEvent {
                index: i,
                event: serde_json::from_str::<Type>(&data).ok().and_then(|t| t.ty),
                data,
                id: None,
                retry: None,
                chunk: i,
                offset,
                end: offset + len,
                t_us: Some(c.t_us),
                complete: true,
            };
            offset += len;
            ev
        })
        .collect()
}

/// The Responses API's terminal stream events (OpenAI API reference, "Streaming events";
/// llama-server b11434 ends every stream with `response.completed`, tools/server/server-task.cpp
/// `to_json_oaicompat_resp_stream`): after one of them no event follows.
pub const RESPONSES_TERMINAL_EVENTS: [&str; 3] = [
    "response.completed",
    "response.incomplete",
    "response.failed",
];

/// True when a streamed response body ends with its API's terminal event, complete: OpenAI
/// (chat and `/v1/completions`) `data: [DONE]`, Anthropic `message_stop`, the Responses API's
/// `response.completed` / `response.incomplete` / `response.failed`
/// ([`RESPONSES_TERMINAL_EVENTS`], by `event:` name or by the data's `type`), llama-server
/// `/completion` `"stop": true`; for a newline-delimited JSON body (Ollama `/api/chat`,
/// `/api/generate`) a last line with `"done": true`. A client that closes after reading it
/// (the official `openai` Python SDK does, after `[DONE]`; Codex after `response.completed`)
/// got the whole response.
pub fn ends_with_terminal_event(body: &[u8]) -> bool {
    let events = decode_bytes(body);
    if let Some(last) = events.iter().rev().find(|e| !e.data.trim().is_empty()) {
        if !last.complete {
            return false;
        }
        let data = last.data.trim();
        let terminal_name = |n: &str| n == "message_stop" || RESPONSES_TERMINAL_EVENTS.contains(&n);
        if data == "[DONE]" || last.event.as_deref().is_some_and(terminal_name) {
            return true;
        }
        let Ok(v) = serde_json::from_str::<serde_json::Value>(data) else {
            return false;
        };
        return v
            .get("type")
            .and_then(|t| t.as_str())
            .is_some_and(terminal_name)
            || v.get("stop").and_then(|s| s.as_bool()) == Some(true);
    }
    // NDJSON: the last line, terminated.
    let Some(text) = std::str::from_utf8(body).ok().filter(|t| t.ends_with('\n')) else {
        return false;
    };
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .and_then(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .is_some_and(|v| v.get("done").and_then(|d| d.as_bool()) == Some(true))
}

/// How many bytes of each SSE event's start [`EventHeads`] keeps.
const HEAD: usize = 256;

/// The first bytes of the last complete SSE event of a body fed chunk by chunk, in bounded
/// memory (at most 2 × 256 bytes): enough to read its `event:` name when the event itself is
/// too long to keep (a Responses `response.completed` repeats the whole output, so it can
/// exceed any tail a recorder keeps). Events end at a blank line (`\n\n`, `\r\n\r\n`;
/// WHATWG HTML "Server-sent events", event stream interpretation).
#[derive(Debug, Clone, Default)]
pub struct EventHeads {
    /// The start of the event being received.
    cur: Vec<u8>,
    /// The start of the last event ended by a blank line.
    last: Vec<u8>,
    /// The previous byte fed was a line feed (possibly followed by `\r`s).
    after_lf: bool,
    /// Bytes of the current event seen (not only kept).
    cur_len: u64,
}

impl EventHeads {
    /// Feeds the next chunk of the body.
    pub fn feed(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            // The next line feed, and whether it ends an event (an empty line before it).
            let Some(i) = memchr::memchr(b'\n', data) else {
                self.take(data);
                if data.iter().any(|&b| b != b'\r') {
                    self.after_lf = false;
                }
                return;
            };
            let line = &data[..i];
            let blank = line.iter().all(|&b| b == b'\r');
            if blank && self.after_lf && self.cur_len > 0 {
                self.last = std::mem::take(&mut self.cur);
                self.cur_len = 0;
                self.after_lf = false;
            } else if blank && self.cur_len == 0 {
                // blank lines between events
            } else {
                self.take(&data[..=i]);
                self.after_lf = true;
            }
            data = &data[i + 1..];
        }
    }

    fn take(&mut self, bytes: &[u8]) {
        let room = HEAD.saturating_sub(self.cur.len());
        self.cur.extend_from_slice(&bytes[..bytes.len().min(room)]);
        self.cur_len += bytes.len() as u64;
    }

    /// True when the body fed so far ends right after an event (nothing after its blank line)
    /// whose `event:` field names a Responses terminal event ([`RESPONSES_TERMINAL_EVENTS`]).
    pub fn ends_with_responses_terminal(&self) -> bool {
        if self.cur_len != 0 {
            return false;
        }
        let head = String::from_utf8_lossy(&self.last);
        head.lines().any(|l| {
            l.trim_end_matches('\r')
                .strip_prefix("event:")
                .map(|n| n.strip_prefix(' ').unwrap_or(n))
                .is_some_and(|n| RESPONSES_TERMINAL_EVENTS.contains(&n))
        })
    }
}

#[cfg(test)]
mod terminal_tests {
    use super::ends_with_terminal_event as done;

    #[test]
    fn terminal_events_of_each_api() {
        assert!(done(b"data: {\"choices\":[]}\n\ndata: [DONE]\n\n"));
        // Cut before the event was dispatched: the client cannot have read it.
        assert!(!done(b"data: {\"choices\":[]}\n\ndata: [DONE]"));
        assert!(!done(b"data: {\"choices\":[]}\n\n"));
        assert!(done(
            b"event: message_delta\ndata: {\"type\":\"message_delta\"}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
        ));
        assert!(!done(
            b"event: message_delta\ndata: {\"type\":\"message_delta\"}\n\n"
        ));
        assert!(done(b"data: {\"content\":\"\",\"stop\":true}\n\n"));
        assert!(!done(b"data: {\"content\":\"a\",\"stop\":false}\n\n"));
        assert!(done(
            b"{\"response\":\"a\",\"done\":false}\n{\"response\":\"\",\"done\":true}\n"
        ));
        assert!(!done(b"{\"response\":\"a\",\"done\":false}\n"));
        assert!(!done(b""));
        // Responses: by event name, or by the data's type when there is no `event:` line.
        assert!(done(
            b"event: response.output_text.done\ndata: {\"type\":\"response.output_text.done\"}\n\nevent: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"status\":\"completed\"}}\n\n"
        ));
        assert!(done(
            b"data: {\"type\":\"response.incomplete\",\"response\":{}}\n\n"
        ));
        assert!(done(b"event: response.failed\ndata: {}\n\n"));
        assert!(!done(
            b"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"a\"}\n\n"
        ));
        // The terminal event's line not ended: the client cannot have dispatched it.
        assert!(!done(
            b"event: response.completed\ndata: {\"type\":\"response.completed\"}\n"
        ));
    }

    #[test]
    fn event_heads_name_a_terminal_event_longer_than_any_tail() {
        use super::EventHeads;
        let big = "x".repeat(300_000);
        let body = format!(
            "event: response.output_text.delta\r\ndata: {{}}\r\n\r\nevent: response.completed\r\ndata: {{\"response\":{{\"output_text\":\"{big}\"}}}}\r\n\r\n"
        );
        // Every split of the body into two chunks (around the boundaries) reads the same.
        let b = body.as_bytes();
        for cut in (0..80).chain(b.len() - 8..b.len()) {
            let mut h = EventHeads::default();
            h.feed(&b[..cut]);
            h.feed(&b[cut..]);
            assert!(h.ends_with_responses_terminal(), "cut at {cut}");
        }
        // One byte at a time around the end.
        let mut h = EventHeads::default();
        h.feed(&b[..b.len() - 4]);
        for x in &b[b.len() - 4..] {
            h.feed(std::slice::from_ref(x));
        }
        assert!(h.ends_with_responses_terminal());
        // Cut inside the terminal event: not ended.
        let mut h = EventHeads::default();
        h.feed(&b[..b.len() - 2]);
        assert!(!h.ends_with_responses_terminal());
        // Another event after it, or a non-terminal last event.
        let mut h = EventHeads::default();
        h.feed(b"event: response.completed\ndata: {}\n\nevent: response.output_text.delta\ndata: {}\n\n");
        assert!(!h.ends_with_responses_terminal());
        let mut h = EventHeads::default();
        h.feed(b"event: response.completed\ndata: {}\n\n\n\n");
        assert!(
            h.ends_with_responses_terminal(),
            "blank lines after the event"
        );
        // The name must be the whole field value.
        let mut h = EventHeads::default();
        h.feed(b"event: response.completed.not\ndata: {}\n\n");
        assert!(!h.ends_with_responses_terminal());
    }
}
