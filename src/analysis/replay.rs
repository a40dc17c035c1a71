//! The Replay pane's model: the replay text (raw output, else the streamed or returned
//! content) fed to toolscope's parser step by step in each chunking, from the traces
//! `parser.chunking_divergence` judged ([`crate::diagnose::rules::replay::ReplayTraces`]); and
//! the server's reply at the same point, from the decoder's per-event marks. Pure.

use crate::diagnose::rules::replay::ReplayTraces;
use crate::finding::Chunking;
use crate::stream::message::{AssistantMessage, CallRecord};
use crate::stream::{EventMark, Reassembled};

/// The reply as the server had delivered it after some number of events (Replay's right side).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ServerView {
    pub content: String,
    pub reasoning: String,
    pub calls: Vec<CallRecord>,
    pub finish_reason: Option<String>,
}

/// One replay step: a chunk fed to the parser and what it made of it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ReplayStep {
    /// The chunk fed at this step (`(finish)` for the final `finish()` step).
    pub chunk: String,
    /// Byte offset in the replay text after this chunk.
    pub end: usize,
    /// Parser state after the chunk ([`parser_display`]).
    pub state: String,
    /// Text the parser holds back (a possible marker prefix, an open block).
    pub buffer: String,
    /// Events emitted at this step, one line each.
    pub events: Vec<String>,
    /// SSE events the server had sent when it had produced the same text.
    pub server_events: usize,
}

/// The Replay pane's model.
#[derive(Debug, Clone, Default)]
pub struct ReplayView {
    /// Replay text and parser traces per chunking (`None`: no text to replay, or analysed at
    /// [`super::Depth::Findings`]).
    pub traces: Option<ReplayTraces>,
    /// Number of SSE events (0 for a non-streamed reply).
    pub events: usize,
    /// The reply after 0..=`events` events ([`Reassembled::marks`]).
    pub marks: Vec<EventMark>,
    /// The whole reply.
    pub message: AssistantMessage,
    /// Event that carried the finish reason.
    pub finish_event: Option<usize>,
}

/// The one place parser states and events are formatted for the pane: the parser's own
/// `Display` form (`call_start get_weather [0] hermes @3`, `in_call hermes`), as the CLI and
/// docs/parser.md print them.
pub fn parser_display<T: std::fmt::Display>(x: &T) -> String {
    x.to_string()
}

fn short(s: &str, n: usize) -> String {
    crate::parser::trace::cut(s, n)
}

impl ReplayView {
    /// The model over `traces`, taking the marks out of `decoded`.
    pub fn new(
        traces: Option<ReplayTraces>,
        decoded: Option<&Reassembled>,
        message: Option<&AssistantMessage>,
        events: usize,
    ) -> ReplayView {
        ReplayView {
            traces,
            events,
            marks: decoded.map(|d| d.marks.clone()).unwrap_or_default(),
            message: message.cloned().unwrap_or_default(),
            finish_event: decoded.and_then(|d| d.finish_event),
        }
    }

    /// The replay text ("" when none).
    pub fn text(&self) -> &str {
        self.traces.as_ref().map_or("", |t| t.replay.text.as_str())
    }

    /// Where the text came from (and what is missing).
    pub fn source(&self) -> &str {
        self.traces
            .as_ref()
            .map_or("", |t| t.replay.source.as_str())
    }

    /// The syntax the parser used, by name.
    pub fn syntax(&self) -> Option<&'static str> {
        self.traces.as_ref()?.syntax.map(|s| s.name())
    }

    /// True when chunking `c` applies (its chunks are known).
    pub fn has(&self, c: Chunking) -> bool {
        self.traces.as_ref().and_then(|t| t.cut(c)).is_some()
    }

    /// Steps in chunking `c` (chunks, then the `finish()` step).
    pub fn len(&self, c: Chunking) -> usize {
        let Some(cut) = self.traces.as_ref().and_then(|t| t.cut(c)) else {
            return 0;
        };
        let t = cut.trace.as_ref().map_or(0, |t| t.len());
        cut.bounds.len().max(t)
    }

    /// End offset of step `i` in chunking `c`.
    pub fn end(&self, c: Chunking, i: usize) -> Option<usize> {
        let cut = self.traces.as_ref()?.cut(c)?;
        cut.bounds
            .get(i)
            .copied()
            .or_else(|| (i < self.len(c)).then_some(self.text().len()))
    }

    /// The first step of chunking `c` whose end reaches `end`.
    pub fn find(&self, c: Chunking, end: usize) -> usize {
        let b = self
            .traces
            .as_ref()
            .and_then(|t| t.cut(c))
            .map(|c| c.bounds.as_slice())
            .unwrap_or(&[]);
        b.partition_point(|&e| e < end)
            .min(b.len().saturating_sub(1))
    }

    /// SSE events the server had sent when its reply reached `end` bytes of the replay text
    /// (the recorded chunk that ends at or after `end`); every event when unknown.
    pub fn server_events_at(&self, end: usize) -> usize {
        self.traces
            .as_ref()
            .and_then(|t| t.replay.recorded.iter().find(|(e, _)| *e >= end))
            .and_then(|(_, ev)| *ev)
            .map_or(self.events, |ev| ev + 1)
    }

    /// Step `i` of chunking `c`: its chunk, the parser's state after it, and the server events
    /// sent by the time the server had produced the same text.
    pub fn step(&self, c: Chunking, i: usize) -> Option<ReplayStep> {
        if i >= self.len(c) {
            return None;
        }
        let t = self.traces.as_ref()?;
        let cut = t.cut(c)?;
        let text = t.replay.text.as_str();
        let b = &cut.bounds;
        let end = b.get(i).copied().unwrap_or(text.len());
        let start = if i == 0 {
            0
        } else {
            b.get(i - 1).copied().unwrap_or(text.len())
        };
        let chunk = text.get(start..end).unwrap_or("").to_owned();
        let ev = self.server_events_at(end);
        let Some(trace) = &cut.trace else {
            return Some(ReplayStep {
                events: vec![format!("text {chunk:?}")],
                state: "(not kept: the text is too long to step per character)".into(),
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
            .map(|e| short(&parser_display(e), 160))
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
        let state = parser_display(&v.state);
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

    /// The server's reply after `n` events (the whole reply for a non-streamed one).
    pub fn server_view(&self, n: usize) -> ServerView {
        let m = &self.message;
        let Some(mark) = self.marks.get(n.min(self.marks.len().saturating_sub(1))) else {
            return ServerView {
                content: m.content.clone(),
                reasoning: m.reasoning.clone(),
                calls: m.tool_calls.clone(),
                finish_reason: m.finish_reason.clone(),
            };
        };
        ServerView {
            content: m.content.get(..mark.content).unwrap_or("").to_owned(),
            reasoning: m.reasoning.get(..mark.reasoning).unwrap_or("").to_owned(),
            calls: mark
                .calls
                .iter()
                .zip(&m.tool_calls)
                .map(|(&(nl, al), c)| CallRecord {
                    name: c.name.get(..nl).unwrap_or("").to_owned(),
                    arguments: c.arguments.get(..al).unwrap_or("").to_owned(),
                    ..c.clone()
                })
                .collect(),
            finish_reason: self
                .finish_event
                .filter(|&e| e < n)
                .and(m.finish_reason.clone()),
        }
    }
}
