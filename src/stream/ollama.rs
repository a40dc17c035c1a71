//! Ollama's native API: NDJSON line decoding and reassembly of `/api/chat` and `/api/generate`
//! replies. Pure.
//!
//! Ollama streams `application/x-ndjson`: one JSON object per line, each ended by `\n`
//! (ollama server/routes.go `streamResponse`; docs/api.md "Streaming responses"). A chat line is
//! `{"model", "created_at", "message": {"role", "content", "thinking", "tool_calls"}, "done"}`,
//! a generate line `{"model", "created_at", "response", "thinking", "tool_calls", "done"}`; the
//! last line has `"done": true`, `done_reason` (`stop`, `length`, `load`, `unload`) and the
//! counters `prompt_eval_count`, `eval_count`, `total_duration`, … (nanoseconds). A failure
//! mid-stream is a line `{"error": "…"}`. Tool calls arrive whole, one line each:
//! `{"id"?, "function": {"index", "name", "arguments": {…}}}` — `arguments` is a JSON
//! *object* (api/types.go `ToolCallFunction`), and `done_reason` stays `stop` when the reply is
//! tool calls (docs/api.md "Chat request (Streaming with tools)").
//!
//! Lines are handed on as [`SseEvent`]s (`data` = the line without its terminator, `event`
//! `None`) so everything downstream of [`super::decode_exchange`] sees one event type whatever
//! the wire format; offsets, chunk index and receive time mean what they mean for SSE.

use serde_json::{Map, Value};

use super::message::{AssistantMessage, CallRecord};
use super::reassemble::{Reassembled, StreamProblem, excerpt};
use super::sse::SseEvent;

/// Incremental NDJSON splitter: feed byte chunks as they arrive, collect one [`SseEvent`] per
/// non-blank line. Lines end in `\n` (a `\r` before it is dropped); a chunk boundary anywhere,
/// inside a multi-byte character included, is handled (bytes are buffered until the newline).
/// Invalid UTF-8 decodes to U+FFFD.
#[derive(Debug, Default, Clone)]
pub struct NdjsonDecoder {
    line: Vec<u8>,
    line_start: usize,
    pos: usize,
    chunk: usize,
    chunks_seen: usize,
    t_us: Option<u64>,
    next_index: usize,
}

impl NdjsonDecoder {
    /// A decoder at the start of a body.
    pub fn new() -> NdjsonDecoder {
        NdjsonDecoder::default()
    }

    /// Feeds one chunk received `t_us` microseconds after the request start; returns the lines
    /// completed by it.
    pub fn feed(&mut self, bytes: &[u8], t_us: Option<u64>) -> Vec<SseEvent> {
        self.chunk = self.chunks_seen;
        self.chunks_seen += 1;
        self.t_us = t_us;
        let mut out = Vec::new();
        let mut rest = bytes;
        while let Some(nl) = memchr::memchr(b'\n', rest) {
            self.line.extend_from_slice(&rest[..nl]);
            self.pos += nl + 1;
            if let Some(ev) = self.dispatch(true) {
                out.push(ev);
            }
            self.line_start = self.pos;
            rest = &rest[nl + 1..];
        }
        self.line.extend_from_slice(rest);
        self.pos += rest.len();
        out
    }

    /// Ends the body: an unterminated last line is returned with `complete: false`.
    pub fn finish(&mut self) -> Option<SseEvent> {
        self.dispatch(false)
    }

    fn dispatch(&mut self, complete: bool) -> Option<SseEvent> {
        let mut line = std::mem::take(&mut self.line);
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            return None;
        }
        let index = self.next_index;
        self.next_index += 1;
        Some(SseEvent {
            index,
            event: None,
            data: String::from_utf8_lossy(&line).into_owned(),
            id: None,
            retry: None,
            chunk: self.chunk,
            offset: self.line_start,
            end: self.pos,
            t_us: self.t_us,
            complete,
        })
    }
}

/// Splits recorded chunks `(bytes, receive µs)` into line events (see [`NdjsonDecoder`]).
/// Each chunk's bytes are read as they come (`&[u8]`, `Vec<u8>`, `Cow<[u8]>`), so the
/// chunks need not be copied into one buffer first.
pub fn decode_lines<B: AsRef<[u8]>>(
    chunks: impl IntoIterator<Item = (B, Option<u64>)>,
) -> Vec<SseEvent> {
    let mut d = NdjsonDecoder::new();
    let mut out = Vec::new();
    for (b, t) in chunks {
        out.extend(d.feed(b.as_ref(), t));
    }
    out.extend(d.finish());
    out
}

/// Which native endpoint a reply came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OllamaEndpoint {
    /// `/api/chat`: text in `message.content`, `message.thinking`, `message.tool_calls`.
    Chat,
    /// `/api/generate`: text in `response`, `thinking`, `tool_calls` at the top level.
    Generate,
}

impl OllamaEndpoint {
    /// From a request path (`…/api/generate` → Generate, anything else → Chat).
    pub fn from_path(path: &str) -> OllamaEndpoint {
        let p = path.split('?').next().unwrap_or(path).trim_end_matches('/');
        if p.ends_with("/api/generate") {
            OllamaEndpoint::Generate
        } else {
            OllamaEndpoint::Chat
        }
    }
}

/// One tool call of an Ollama object: arguments serialized as JSON text (an object stays an
/// object's text; a string — what an OpenAI-style server would send — is kept verbatim).
fn call_record(tc: &Value, position: usize) -> CallRecord {
    let f = tc.get("function").unwrap_or(&Value::Null);
    CallRecord {
        index: f
            .get("index")
            .and_then(Value::as_u64)
            .or(Some(position as u64)),
        id: tc
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned),
        name: f
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
        arguments: match f.get("arguments") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(v) => v.to_string(),
        },
    }
}

/// Ollama's final counters as a `usage` object: `prompt_eval_count`, `eval_count` and the
/// durations (ns) that are present, verbatim. `None` when the line has none.
fn usage_of(v: &Value) -> Option<Value> {
    const KEYS: &[&str] = &[
        "prompt_eval_count",
        "eval_count",
        "total_duration",
        "load_duration",
        "prompt_eval_duration",
        "eval_duration",
    ];
    let m: Map<String, Value> = KEYS
        .iter()
        .filter_map(|k| v.get(*k).map(|x| ((*k).to_owned(), x.clone())))
        .collect();
    (!m.is_empty()).then_some(Value::Object(m))
}

/// Adds one Ollama object (a stream line or the whole non-streamed body) to `m`; returns the
/// number of tool calls it carried. `calls` counts calls seen so far (their positions).
fn absorb(m: &mut AssistantMessage, v: &Value, ep: OllamaEndpoint) -> usize {
    if m.model.is_none() {
        m.model = v.get("model").and_then(Value::as_str).map(str::to_owned);
    }
    let (holder, text_key) = match ep {
        OllamaEndpoint::Chat => (v.get("message").unwrap_or(&Value::Null), "content"),
        OllamaEndpoint::Generate => (v, "response"),
    };
    if let Some(s) = holder.get(text_key).and_then(Value::as_str) {
        m.content.push_str(s);
    }
    if let Some(s) = holder.get("thinking").and_then(Value::as_str) {
        m.reasoning.push_str(s);
    }
    let mut n = 0;
    if let Some(tcs) = holder.get("tool_calls").and_then(Value::as_array) {
        for tc in tcs {
            let pos = m.tool_calls.len();
            m.tool_calls.push(call_record(tc, pos));
            n += 1;
        }
    }
    if v.get("done").and_then(Value::as_bool) == Some(true) {
        m.finish_reason = v
            .get("done_reason")
            .and_then(Value::as_str)
            .map(str::to_owned);
        m.usage = usage_of(v);
    }
    n
}

/// Reads a non-streamed Ollama body (`"stream": false`): `None` when it is not an Ollama reply
/// object (no `message` for chat, no `response` for generate).
pub fn from_ollama_json(body: &Value, ep: OllamaEndpoint) -> Option<AssistantMessage> {
    let shape_ok = match ep {
        OllamaEndpoint::Chat => body.get("message").is_some_and(Value::is_object),
        OllamaEndpoint::Generate => body.get("response").is_some(),
    };
    if !shape_ok {
        return None;
    }
    let mut m = AssistantMessage::default();
    absorb(&mut m, body, ep);
    Some(m)
}

/// Reassembles an Ollama NDJSON stream (line events from [`decode_lines`]). Shape: see
/// [`Reassembled`]; `finish_reason` is the last line's `done_reason`, `usage` its counters,
/// `call_events[i]` the one line that carried call `i`. Problems: `error_event` (a line
/// `{"error": "…"}`, which diagnose reports as `server.parse_error` when it is the tool-call
/// parser's failure, else `stream.error_event`), `bad_json`,
/// `truncated` (an unterminated last line), `after_end`, `no_end` (no `"done": true`).
pub fn reassemble_ollama(events: &[SseEvent], ep: OllamaEndpoint) -> Reassembled {
    reassemble_ollama_owned(events.to_vec(), ep)
}

/// [`reassemble_ollama`] over line events it takes: they become [`Reassembled::events`]
/// without a copy (`check` on one huge stream holds its events once, issue #27 item 2).
pub fn reassemble_ollama_owned(owned: Vec<SseEvent>, ep: OllamaEndpoint) -> Reassembled {
    let events = owned.as_slice();
    let mut r = Reassembled::default();
    let mut done: Option<usize> = None;
    let problem = |r: &mut Reassembled, event: Option<usize>, kind: &str, message: String| {
        r.problems.push(StreamProblem {
            event,
            kind: kind.to_owned(),
            message,
        })
    };
    for ev in events {
        let n = ev.index;
        if let Some(d) = done {
            problem(
                &mut r,
                Some(n),
                "after_end",
                format!("line {n} arrives after the \"done\": true line (line {d})"),
            );
            continue;
        }
        let v: Value = match serde_json::from_str(&ev.data) {
            Ok(v) => v,
            Err(e) => {
                let kind = if ev.complete { "bad_json" } else { "truncated" };
                problem(
                    &mut r,
                    Some(n),
                    kind,
                    format!("line {n} is not JSON: {e}: {}", excerpt(&ev.data)),
                );
                continue;
            }
        };
        if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
            let msg = err
                .as_str()
                .map(str::to_owned)
                .or_else(|| {
                    err.get("message")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                })
                .unwrap_or_else(|| err.to_string());
            // A parse failure is `server.parse_error`, built from this problem by its one
            // owner (diagnose::rules::server::parse_error_event, via diagnose::input::error_events).
            problem(&mut r, Some(n), "error_event", format!("error line: {msg}"));
            continue;
        }
        if !v.is_object()
            || (v.get("message").is_none()
                && v.get("response").is_none()
                && v.get("done").is_none())
        {
            problem(
                &mut r,
                Some(n),
                "bad_shape",
                format!(
                    "line {n} is JSON but not an Ollama chunk (\"message\", \"response\" or \"done\"): {}",
                    excerpt(&ev.data)
                ),
            );
            continue;
        }
        let before = r.message.tool_calls.len();
        let added = absorb(&mut r.message, &v, ep);
        for _ in 0..added {
            r.call_events.push(vec![n]);
        }
        debug_assert_eq!(r.message.tool_calls.len(), before + added);
        if v.get("done").and_then(Value::as_bool) == Some(true) {
            done = Some(n);
            r.finish_event = Some(n);
        }
    }
    r.events = owned;
    if let Some(last) = r.events.last().filter(|e| !e.complete)
        && !r.problems.iter().any(|p| p.event == Some(last.index))
    {
        let (i, off) = (last.index, last.offset);
        r.problems.push(StreamProblem {
            event: Some(i),
            kind: "truncated".into(),
            message: format!("the stream ends inside line {i} (byte {off}): no newline after it"),
        });
    }
    if done.is_none() && !r.problems.iter().any(|p| p.kind == "error_event") {
        r.problems.push(StreamProblem {
            event: None,
            kind: "no_end".into(),
            message: "the stream ends without a line with \"done\": true".into(),
        });
    }
    r
}

/// Decodes one recorded Ollama-native exchange: recorded chunks (or an `application/x-ndjson`
/// body) as NDJSON lines, else a non-streamed JSON object. `None` without a response, or for a
/// body that is neither (an HTTP error `{"error": …}` is diagnose's).
pub fn decode_ollama_exchange(ex: &crate::session::Exchange) -> Option<Reassembled> {
    let resp = ex.response.as_ref()?;
    let ep = OllamaEndpoint::from_path(&ex.request.path);
    let ndjson = ex
        .response_header("content-type")
        .is_some_and(|c| c.contains("ndjson"));
    if let Some(chunks) = &resp.chunks {
        // each chunk's bytes borrowed (a text chunk) or decoded one at a time (base64)
        let events = decode_lines(chunks.iter().map(|c| (c.data.bytes(), Some(c.t_us))));
        return Some(reassemble_ollama_owned(events, ep));
    }
    let bytes = ex.response_bytes();
    if ndjson {
        return Some(reassemble_ollama_owned(
            decode_lines([(bytes.as_slice(), None)]),
            ep,
        ));
    }
    let body: Value = serde_json::from_slice(&bytes).ok()?;
    let message = from_ollama_json(&body, ep)?;
    Some(Reassembled {
        message,
        ..Default::default()
    })
}

/// The events of a recorded stream as (byte offset in the body, receive µs of the read that
/// completed them): NDJSON lines for Ollama's native endpoints and `application/x-ndjson`,
/// SSE events otherwise. `None` when the response was not recorded as chunks.
pub fn event_marks(ex: &crate::session::Exchange) -> Option<Vec<(usize, Option<u64>)>> {
    let chunks = ex.response.as_ref()?.chunks.as_ref()?;
    let pieces: Vec<(Vec<u8>, u64)> = chunks.iter().map(|c| (c.data.to_bytes(), c.t_us)).collect();
    let feed = pieces.iter().map(|(b, t)| (b.as_slice(), Some(*t)));
    let ndjson = crate::session::is_ollama_native(&ex.request.path)
        || ex
            .response_header("content-type")
            .is_some_and(|c| c.contains("ndjson"));
    let events = if ndjson {
        decode_lines(feed)
    } else {
        super::sse::decode_chunks(feed)
    };
    Some(events.iter().map(|e| (e.offset, e.t_us)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The two lines of docs/api.md "Chat request (Streaming with tools)" (ollama/ollama at
    /// fb30760), minified, cut into chunks at every byte.
    const TOOLS_STREAM: &str = concat!(
        r#"{"model":"llama3.2","created_at":"2025-07-07T20:22:19.184789Z","message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"get_weather","arguments":{"city":"Tokyo"}}}]},"done":false}"#,
        "\n",
        r#"{"model":"llama3.2","created_at":"2025-07-07T20:22:19.19314Z","message":{"role":"assistant","content":""},"done_reason":"stop","done":true,"total_duration":182242375,"load_duration":41295167,"prompt_eval_count":169,"prompt_eval_duration":24573166,"eval_count":15,"eval_duration":115959084}"#,
        "\n"
    );

    #[test]
    fn docs_tool_stream_every_cut() {
        let bytes = TOOLS_STREAM.as_bytes();
        for cut in 0..=bytes.len() {
            let evs = decode_lines([(&bytes[..cut], Some(1)), (&bytes[cut..], Some(2))]);
            assert_eq!(evs.len(), 2, "cut {cut}");
            let r = reassemble_ollama(&evs, OllamaEndpoint::Chat);
            assert!(r.problems.is_empty(), "cut {cut}: {:?}", r.problems);
            let m = &r.message;
            assert_eq!(m.tool_calls.len(), 1);
            assert_eq!(m.tool_calls[0].name, "get_weather");
            assert_eq!(m.tool_calls[0].arguments, r#"{"city":"Tokyo"}"#);
            assert_eq!(m.finish_reason.as_deref(), Some("stop"));
            assert_eq!(m.model.as_deref(), Some("llama3.2"));
            assert_eq!(m.usage.as_ref().unwrap()["eval_count"], 15);
            assert_eq!(r.finish_event, Some(1));
            assert_eq!(r.call_events, vec![vec![0]]);
            assert_eq!(
                &bytes[evs[1].offset..evs[1].end - 1],
                evs[1].data.as_bytes()
            );
        }
    }

    #[test]
    fn thinking_generate_error_and_truncation() {
        let gen_lines = "{\"model\":\"m\",\"response\":\"\",\"thinking\":\"hm\",\"done\":false}\n{\"model\":\"m\",\"response\":\"Hi\",\"done\":false}\n{\"model\":\"m\",\"response\":\"\",\"done\":true,\"done_reason\":\"length\"}\n";
        let r = reassemble_ollama(
            &decode_lines([(gen_lines.as_bytes(), None)]),
            OllamaEndpoint::Generate,
        );
        assert_eq!(
            (
                r.message.content.as_str(),
                r.message.reasoning.as_str(),
                r.message.finish_reason.as_deref()
            ),
            ("Hi", "hm", Some("length"))
        );
        let cut = "{\"message\":{\"content\":\"a\"},\"done\":false}\n{\"message\":{\"con";
        let r = reassemble_ollama(
            &decode_lines([(cut.as_bytes(), None)]),
            OllamaEndpoint::Chat,
        );
        let kinds: Vec<&str> = r.problems.iter().map(|p| p.kind.as_str()).collect();
        assert_eq!(kinds, ["truncated", "no_end"]);
        let err = "{\"error\":\"error parsing tool call: raw='{\\\"name\\\"', err=unexpected end of JSON input\"}\n";
        let r = reassemble_ollama(
            &decode_lines([(err.as_bytes(), None)]),
            OllamaEndpoint::Chat,
        );
        assert_eq!(r.problems[0].kind, "error_event");
        assert!(r.problems.iter().all(|p| p.kind != "no_end"));
    }
}
