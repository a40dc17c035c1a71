//! Tolerant incremental tool-call parsing of raw model text, with a replayable trace. Pure.
//!
//! * [`Syntax`] — the call syntaxes ([`Syntax::ALL`]: hermes, qwen3-coder, glm4.5, seed-oss,
//!   gemma4, llama3, pythonic, lfm2, mistral, deepseek-v3, deepseek-v3.2, kimi-k2, kimi-k3,
//!   gpt-oss, minimax, command-r7b, … ) and their detection.
//! * [`engines`] — what llama.cpp, vLLM and SGLang's own parsers would return for a text.
//! * [`Parser`] — the incremental parser: `feed(&str) -> Vec<Event>`, `finish()`.
//! * [`parse`] — one-shot: the whole text → [`ParseOutput`].
//! * [`trace`] — the replay trace (state and events per chunk, scrubbing, re-cut chunkings).
//!
//! Marker strings and accepted shapes follow llama.cpp common/chat*.cpp and the test vectors of
//! tests/test-chat.cpp (build 11434); see docs/parser.md for the differences.

mod body;
pub mod engine;
pub mod engines;
pub mod syntax;
pub mod tools;
pub mod trace;
pub mod types;

pub use engine::{Event, Parser, ParserOptions, State, StateKind};
pub use syntax::Syntax;
pub use tools::ToolIndex;
pub use types::{Malformed, ParseOutput, ParsedCall, Repair};

use serde_json::Value;

/// Parses a whole raw text at once. `syntax: None` = auto (every syntax's markers active);
/// `tools`: an OpenAI/Anthropic tools array or a whole request (see [`ToolIndex::from_value`]).
/// `content` and `reasoning` are trimmed of surrounding whitespace. Never fails: what does not
/// parse stays content and is listed in `malformed`.
pub fn parse(text: &str, syntax: Option<Syntax>, tools: Option<&Value>) -> ParseOutput {
    parse_with(text, syntax, tools, ParserOptions::default())
}

/// As [`parse`], with options.
pub fn parse_with(
    text: &str,
    syntax: Option<Syntax>,
    tools: Option<&Value>,
    opts: ParserOptions,
) -> ParseOutput {
    let mut p = Parser::with_options(syntax, tools, opts);
    let mut c = Collector::default();
    // straight into the collector: no event vector, no argument deltas (same output as
    // applying the events of `feed` + `finish`)
    p.feed_sink(text, &mut c);
    p.finish_sink(&mut c);
    c.into_output()
}

impl engine::Sink for Collector {
    fn content(&mut self, s: &str) {
        self.out.content.push_str(s);
    }

    fn reasoning(&mut self, s: &str) {
        self.out.reasoning.push_str(s);
    }

    fn call(&mut self, _index: usize, c: body::RawCall, span: (usize, usize)) {
        self.out.tool_calls.push(c.into_parsed(span));
    }

    fn event(&mut self, e: Event) {
        self.apply_owned(e);
    }
}

/// Accumulates events into a [`ParseOutput`] (content, reasoning, calls, repairs, malformed).
///
/// Counters (`content.len()`, `tool_calls.len()`, …) only grow, except on
/// [`Event::ContentToReasoning`], which moves content to reasoning.
#[derive(Debug, Clone, Default)]
pub struct Collector {
    /// Untrimmed so far.
    pub out: ParseOutput,
}

impl Collector {
    /// Applies one event.
    pub fn apply(&mut self, e: &Event) {
        let o = &mut self.out;
        match e {
            Event::Content(s) => o.content.push_str(s),
            Event::Reasoning(s) => o.reasoning.push_str(s),
            Event::CallStart { .. } | Event::ArgumentsDelta { .. } => {}
            Event::CallEnd { call, .. } => o.tool_calls.push(call.clone()),
            Event::Repair(r) => o.repairs.push(r.clone()),
            Event::Malformed(m) => o.malformed.push(m.clone()),
            Event::ContentToReasoning { bytes } => {
                let n = (*bytes).min(o.content.len());
                let cut = o.content.len() - n;
                if o.content.is_char_boundary(cut) {
                    let moved = o.content.split_off(cut);
                    let mut r = std::mem::take(&mut o.reasoning);
                    r.push_str(&moved);
                    o.reasoning = r;
                }
            }
        }
    }

    /// As [`Collector::apply`], taking the event (its text and call are moved, not copied).
    pub fn apply_owned(&mut self, e: Event) {
        let o = &mut self.out;
        match e {
            Event::Content(s) if o.content.is_empty() => o.content = s,
            Event::Reasoning(s) if o.reasoning.is_empty() => o.reasoning = s,
            Event::CallEnd { call, .. } => o.tool_calls.push(call),
            Event::Repair(r) => o.repairs.push(r),
            Event::Malformed(m) => o.malformed.push(m),
            e => self.apply(&e),
        }
    }

    /// The output with content and reasoning trimmed.
    pub fn output(&self) -> ParseOutput {
        let mut o = self.out.clone();
        o.content = o.content.trim().to_string();
        o.reasoning = o.reasoning.trim().to_string();
        o
    }

    /// Consumes the collector (trimmed output).
    pub fn into_output(mut self) -> ParseOutput {
        trim_in_place(&mut self.out.content);
        trim_in_place(&mut self.out.reasoning);
        self.out
    }
}

/// `*s = s.trim().to_string()` without copying when nothing leads.
fn trim_in_place(s: &mut String) {
    let end = s.trim_end().len();
    s.truncate(end);
    let lead = s.len() - s.trim_start().len();
    s.drain(..lead);
}
