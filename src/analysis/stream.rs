//! The Stream pane's rows: each SSE event with its place on the wire and what it meant to the
//! reply (`content "Lis"`, `call[0] arguments += "{\"ci"`, `finish tool_calls`, `usage`),
//! read from the one decoder's per-event marks ([`crate::stream::Reassembled::marks`]). Pure.

use crate::session::Exchange;
use crate::stream::Reassembled;

/// One SSE event of a recorded stream.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StreamEvent {
    /// 0-based event number.
    pub index: usize,
    /// `event:` field.
    pub event: Option<String>,
    /// `data:` lines joined with `\n`.
    pub data: String,
    /// Size of the event block on the wire, bytes (up to the next event).
    pub size: usize,
    /// Index of the chunk in which the event completed.
    pub chunk: usize,
    /// Receive time of that chunk, microseconds from the request start.
    pub t_us: Option<u64>,
    /// What the event added to the reply, in words (see the module docs); the raw `data` is a
    /// key away in the pane.
    pub meaning: String,
}

/// Longest text excerpt in a meaning, in characters.
const EXCERPT: usize = 48;

fn quoted(s: &str) -> String {
    let cut = crate::parser::trace::cut(s, EXCERPT);
    format!("{cut:?}")
}

/// The pane rows of a decoded stream (moves the events out of `d`).
pub fn rows(ex: &Exchange, d: &mut Reassembled) -> Vec<StreamEvent> {
    let events = std::mem::take(&mut d.events);
    let total = ex.response_bytes().len();
    let mut out = Vec::with_capacity(events.len());
    for (i, e) in events.iter().enumerate() {
        let meaning = meaning(i, &e.data, e.event.as_deref(), d);
        out.push(StreamEvent {
            index: e.index,
            event: e.event.clone(),
            size: events
                .get(i + 1)
                .map_or(total, |n| n.offset)
                .saturating_sub(e.offset),
            chunk: e.chunk,
            t_us: e.t_us,
            meaning,
            data: String::new(),
        });
    }
    for (row, e) in out.iter_mut().zip(events) {
        row.data = e.data;
    }
    out
}

/// What event `i` added: reasoning, content, calls started or extended, the finish reason,
/// usage, `[DONE]`, an error; else its event type (`message_start`, `ping`, …).
pub fn meaning(i: usize, data: &str, event: Option<&str>, d: &Reassembled) -> String {
    let mut parts: Vec<String> = Vec::new();
    if data.trim() == "[DONE]" {
        parts.push("[DONE]".into());
    }
    for p in d.problems.iter().filter(|p| p.event == Some(i)) {
        parts.push(match p.kind.as_str() {
            "error_event" => format!(
                "error {}",
                quoted(p.message.trim_start_matches("error event: "))
            ),
            "bad_json" => "data is not JSON".into(),
            "truncated" => "truncated event".into(),
            "after_end" => "after the end of the stream".into(),
            "extra_choice" => "another choice (not reassembled)".into(),
            k => k.to_owned(),
        });
    }
    if let (Some(a), Some(b)) = (d.marks.get(i), d.marks.get(i + 1)) {
        let delta = a.delta(b, &d.message);
        if !delta.reasoning.is_empty() {
            parts.push(format!("reasoning {}", quoted(delta.reasoning)));
        }
        if !delta.content.is_empty() {
            parts.push(format!("content {}", quoted(delta.content)));
        }
        for (j, started, name, args) in delta.calls {
            if started {
                parts.push(format!("call[{j}] start {name}").trim_end().to_owned());
            } else if !name.is_empty() {
                parts.push(format!("call[{j}] name += {}", quoted(name)));
            }
            if !args.is_empty() {
                parts.push(format!("call[{j}] arguments += {}", quoted(args)));
            }
        }
        if delta.usage {
            parts.push("usage".into());
        }
    }
    parts.extend(
        d.notes
            .iter()
            .filter(|(e, _)| *e == i)
            .map(|(_, n)| n.clone()),
    );
    if d.finish_event == Some(i) {
        parts.push(format!(
            "finish {}",
            d.message.finish_reason.as_deref().unwrap_or("?")
        ));
    }
    if parts.is_empty() {
        let ty = event
            .filter(|e| !e.is_empty() && *e != "message")
            .map(str::to_owned)
            .or_else(|| {
                data.contains("\"role\"")
                    .then(|| "role assistant (no text)".to_owned())
            });
        parts.push(ty.unwrap_or_else(|| "no change".into()));
    }
    parts.join(" · ")
}
