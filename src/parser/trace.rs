//! Replay trace: the parser's state and emitted events after each input chunk, scrubbable to
//! any step in O(1), with parser snapshots every [`SNAPSHOT_EVERY`] steps to resume a live
//! parser; and re-cut chunkings compared with a one-shot parse (where they diverge, a
//! [`Divergence`]; the `parser.chunking_divergence` finding is built in diagnose/rules/replay.rs).

use std::sync::Arc;

use serde_json::Value;

use super::engine::{Event, Events, Parser, ParserOptions, State};
use super::syntax::Syntax;
use super::tools::ToolIndex;
use super::types::{Malformed, ParsedCall, Repair};

/// Steps between two parser snapshots (resuming a live parser re-feeds at most this many chunks).
pub const SNAPSHOT_EVERY: usize = 256;

/// One step = one input chunk. Ranges are into the trace's buffers; counts are cumulative
/// after the step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// Byte range of the chunk in the whole input.
    pub input: (usize, usize),
    /// Parser state after the chunk (the last step is `finish()`, with an empty chunk).
    pub state: State,
    /// Range of this step's events in [`Trace::events`].
    pub events: (usize, usize),
    /// Bytes of the content stream released so far (before any move to reasoning).
    pub content_len: usize,
    /// Bytes of the reasoning stream released so far.
    pub reasoning_len: usize,
    /// Bytes of the content stream that an orphan `</think>` moved to reasoning so far.
    pub moved: usize,
    pub calls: usize,
    pub repairs: usize,
    pub malformed: usize,
}

/// Everything known at one step, borrowed from the trace (no copying: O(1)).
#[derive(Debug, Clone, Copy)]
pub struct StepView<'a> {
    pub step: usize,
    /// The chunk fed at this step (empty for the final `finish()` step).
    pub chunk: &'a str,
    pub state: State,
    /// Text the parser holds after the step (a partial marker, an open block, held JSON).
    pub held: &'a str,
    /// Events emitted at this step.
    pub events: &'a [Event],
    /// Content released so far (untrimmed).
    pub content: &'a str,
    /// Reasoning released so far (untrimmed) = `reasoning.0` followed by `reasoning.1`.
    pub reasoning: (&'a str, &'a str),
    pub tool_calls: &'a [ParsedCall],
    pub repairs: &'a [Repair],
    pub malformed: &'a [Malformed],
}

/// What a parse released, gathered straight from the parser ([`Trace::record_lean`]): the
/// same accumulation [`Trace::record_index`] makes from its events.
struct Released<'a> {
    content: &'a mut String,
    reasoning: &'a mut String,
    calls: &'a mut Vec<ParsedCall>,
    repairs: &'a mut Vec<Repair>,
    malformed: &'a mut Vec<Malformed>,
    moved: &'a mut usize,
}

impl super::engine::Sink for Released<'_> {
    fn content(&mut self, s: &str) {
        self.content.push_str(s);
    }

    fn reasoning(&mut self, s: &str) {
        self.reasoning.push_str(s);
    }

    fn call(&mut self, _index: usize, c: super::body::RawCall, span: (usize, usize)) {
        self.calls.push(c.into_parsed(span));
    }

    fn event(&mut self, e: Event) {
        match e {
            Event::Repair(r) => self.repairs.push(r),
            Event::Malformed(m) => self.malformed.push(m),
            Event::ContentToReasoning { bytes } => {
                *self.moved = (*self.moved + bytes).min(self.content.len())
            }
            Event::Content(s) => self.content.push_str(&s),
            Event::Reasoning(s) => self.reasoning.push_str(&s),
            Event::CallEnd { call, .. } => self.calls.push(call),
            Event::CallStart { .. } | Event::ArgumentsDelta { .. } => {}
        }
    }
}

/// A recorded parse, chunk by chunk.
#[derive(Debug, Clone)]
pub struct Trace {
    input: String,
    steps: Vec<Step>,
    events: Vec<Event>,
    content: String,
    reasoning: String,
    calls: Vec<ParsedCall>,
    repairs: Vec<Repair>,
    malformed: Vec<Malformed>,
    /// `(step, parser before that step)` every [`SNAPSHOT_EVERY`] steps.
    snapshots: Vec<(usize, Parser)>,
    syntax: Option<Syntax>,
}

impl Trace {
    /// Feeds `chunks` one by one to a new parser (then `finish()`, as one more step with an
    /// empty chunk) and records each step. `tools`: see [`ToolIndex::from_value`].
    pub fn record(chunks: &[String], syntax: Option<Syntax>, tools: Option<&Value>) -> Trace {
        Trace::record_with(chunks, syntax, tools, ParserOptions::default())
    }

    /// As [`Trace::record`], with options.
    pub fn record_with(
        chunks: &[String],
        syntax: Option<Syntax>,
        tools: Option<&Value>,
        opts: ParserOptions,
    ) -> Trace {
        let ix = Arc::new(ToolIndex::from_value(tools));
        Trace::record_index(chunks.iter().map(String::as_str), syntax, ix, opts)
    }

    /// As [`Trace::record_with`], from any iterator of chunks and a shared tool index.
    pub fn record_index<'a>(
        chunks: impl IntoIterator<Item = &'a str>,
        syntax: Option<Syntax>,
        tools: Arc<ToolIndex>,
        opts: ParserOptions,
    ) -> Trace {
        Trace::record_kept(chunks, syntax, tools, opts, true)
    }

    /// As [`Trace::record_index`] without the per-step events: every step's counts, state,
    /// input and what was released so far are the same (so [`first_divergence`] and
    /// [`Trace::state_at`]'s chunk, content, reasoning and calls read the same), but
    /// `state_at(..).events` is empty. For judging a chunking (`check`, the inspector's list
    /// counts), not for showing it: a per-character parse of a long text then allocates no
    /// event per character.
    pub fn record_lean<'a>(
        chunks: impl IntoIterator<Item = &'a str>,
        syntax: Option<Syntax>,
        tools: Arc<ToolIndex>,
        opts: ParserOptions,
    ) -> Trace {
        Trace::record_kept(chunks, syntax, tools, opts, false)
    }

    fn record_kept<'a>(
        chunks: impl IntoIterator<Item = &'a str>,
        syntax: Option<Syntax>,
        tools: Arc<ToolIndex>,
        opts: ParserOptions,
        keep_events: bool,
    ) -> Trace {
        let mut p = Parser::with_index(syntax, tools, opts);
        let mut t = Trace {
            input: String::new(),
            steps: Vec::new(),
            events: Vec::new(),
            content: String::new(),
            reasoning: String::new(),
            calls: Vec::new(),
            repairs: Vec::new(),
            malformed: Vec::new(),
            snapshots: Vec::new(),
            syntax,
        };
        let mut moved = 0usize;
        let mut push = |t: &mut Trace, p: &mut Parser, chunk: Option<&str>| {
            let step = t.steps.len();
            if step.is_multiple_of(SNAPSHOT_EVERY) {
                t.snapshots.push((step, p.clone()));
            }
            let in0 = t.input.len();
            let ev0 = t.events.len();
            if let Some(c) = chunk {
                t.input.push_str(c);
            }
            if keep_events {
                p.feed_or_finish(chunk, &mut Events::after(&mut t.events));
            } else {
                // what the loop below gathers from the events, gathered as they are released
                p.feed_or_finish(
                    chunk,
                    &mut Released {
                        content: &mut t.content,
                        reasoning: &mut t.reasoning,
                        calls: &mut t.calls,
                        repairs: &mut t.repairs,
                        malformed: &mut t.malformed,
                        moved: &mut moved,
                    },
                );
            }
            for e in &t.events[ev0..] {
                match e {
                    Event::Content(s) => t.content.push_str(s),
                    Event::Reasoning(s) => t.reasoning.push_str(s),
                    Event::CallEnd { call, .. } => t.calls.push(call.clone()),
                    Event::Repair(r) => t.repairs.push(r.clone()),
                    Event::Malformed(m) => t.malformed.push(m.clone()),
                    Event::ContentToReasoning { bytes } => {
                        moved = (moved + bytes).min(t.content.len())
                    }
                    Event::CallStart { .. } | Event::ArgumentsDelta { .. } => {}
                }
            }
            t.steps.push(Step {
                input: (in0, t.input.len()),
                state: p.state(),
                events: (ev0, t.events.len()),
                content_len: t.content.len(),
                reasoning_len: t.reasoning.len(),
                moved,
                calls: t.calls.len(),
                repairs: t.repairs.len(),
                malformed: t.malformed.len(),
            });
        };
        for c in chunks {
            push(&mut t, &mut p, Some(c));
        }
        push(&mut t, &mut p, None);
        t
    }

    /// The steps (one per chunk, plus the final `finish()` step).
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// Number of steps.
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    /// Always false (a trace has at least the `finish()` step).
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// The whole input.
    pub fn input(&self) -> &str {
        &self.input
    }

    /// All events, in order.
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// The syntax the trace was recorded with (`None` = auto).
    pub fn syntax(&self) -> Option<Syntax> {
        self.syntax
    }

    /// Everything known after `step` (clamped to the last step), in O(1).
    pub fn state_at(&self, step: usize) -> StepView<'_> {
        let i = step.min(self.steps.len().saturating_sub(1));
        let s = &self.steps[i];
        let held = self
            .input
            .get(s.state.held_start.min(self.input.len())..s.state.held_end.min(self.input.len()))
            .unwrap_or("");
        StepView {
            step: i,
            chunk: &self.input[s.input.0..s.input.1],
            state: s.state,
            held,
            events: &self.events[s.events.0..s.events.1],
            content: &self.content[s.moved..s.content_len],
            reasoning: (&self.content[..s.moved], &self.reasoning[..s.reasoning_len]),
            tool_calls: &self.calls[..s.calls],
            repairs: &self.repairs[..s.repairs],
            malformed: &self.malformed[..s.malformed],
        }
    }

    /// A live parser in the state it had after `step` (before the next chunk): the nearest
    /// snapshot at or before it, re-fed at most [`SNAPSHOT_EVERY`] chunks.
    pub fn parser_at(&self, step: usize) -> Parser {
        let target = (step + 1).min(self.steps.len());
        let k = self
            .snapshots
            .partition_point(|(s, _)| *s <= target)
            .saturating_sub(1);
        let (from, snap) = &self.snapshots[k];
        let mut p = snap.clone();
        let mut sink = Vec::new();
        for st in &self.steps[*from..target] {
            if st.input.0 == st.input.1 && st.state.kind == super::engine::StateKind::Done {
                p.finish_into(&mut sink);
            } else {
                p.feed_into(&self.input[st.input.0..st.input.1], &mut sink);
            }
            sink.clear();
        }
        p
    }

    /// Concise JSON of every step (the `steps` of `toolscope parse --format json`):
    /// `[{"step","chunk","state","syntax"?,"held"?,"events":[…]}]`; `held` is cut to 120 chars.
    ///
    /// Bounded per step, so the trace stays a summary of the input rather than a copy of it
    /// several times over (a 4.1 MB text of 40,000 Hermes calls fed as one chunk wrote a 20 MB
    /// trace; issue #27 item 2): a chunk longer than [`STEP_JSON_CHUNK`] bytes is cut to that
    /// many characters with `…` and the step gets `chunk_bytes` (the chunk's length); a step
    /// with more than [`STEP_JSON_EVENTS`] events lists the first ones and gets `events_total`.
    /// The result (`content`, `tool_calls`, …) is printed whole beside it.
    pub fn steps_json(&self) -> Value {
        let mut out = Vec::with_capacity(self.steps.len());
        for i in 0..self.steps.len() {
            let v = self.state_at(i);
            let mut o = serde_json::Map::new();
            o.insert("step".into(), i.into());
            if v.chunk.len() > STEP_JSON_CHUNK {
                o.insert("chunk".into(), cut(v.chunk, STEP_JSON_CHUNK).into());
                o.insert("chunk_bytes".into(), v.chunk.len().into());
            } else {
                o.insert("chunk".into(), v.chunk.into());
            }
            o.insert(
                "state".into(),
                serde_json::to_value(v.state.kind).unwrap_or(Value::Null),
            );
            if let Some(s) = v.state.syntax {
                o.insert("syntax".into(), s.name().into());
            }
            if !v.held.is_empty() {
                o.insert("held".into(), cut(v.held, 120).into());
            }
            let shown = &v.events[..v.events.len().min(STEP_JSON_EVENTS)];
            o.insert(
                "events".into(),
                serde_json::to_value(shown).unwrap_or(Value::Null),
            );
            if shown.len() < v.events.len() {
                o.insert("events_total".into(), v.events.len().into());
            }
            out.push(Value::Object(o));
        }
        Value::Array(out)
    }
}

/// A step's chunk longer than this many bytes is cut in [`Trace::steps_json`].
pub const STEP_JSON_CHUNK: usize = 1024;

/// A step lists at most this many events in [`Trace::steps_json`].
pub const STEP_JSON_EVENTS: usize = 64;

/// `s` cut to at most `n` chars, with `…` when cut.
pub fn cut(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// A way to re-cut the input into chunks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cut {
    /// One chunk per character.
    PerChar,
    /// The recorded token pieces (their concatenation should be the text; where it is not,
    /// the text is cut at the pieces' cumulative lengths, moved to character boundaries).
    Pieces(Vec<String>),
    /// The chunks as recorded (per SSE chunk).
    Recorded,
    /// Every N recorded chunks joined into one.
    EveryN(usize),
}

impl Cut {
    /// Short name for messages: `per character`, `per token piece`, `per recorded chunk`, `every N chunks`.
    pub fn describe(&self) -> String {
        match self {
            Cut::PerChar => "per character".into(),
            Cut::Pieces(_) => "per token piece".into(),
            Cut::Recorded => "per recorded chunk".into(),
            Cut::EveryN(n) => format!("every {n} chunks"),
        }
    }
}

/// Re-cuts `chunks` as `cut` says.
pub fn recut(chunks: &[String], cut: &Cut) -> Vec<String> {
    match cut {
        Cut::Recorded => chunks.to_vec(),
        Cut::PerChar => chunks.concat().chars().map(String::from).collect(),
        Cut::EveryN(n) => chunks.chunks((*n).max(1)).map(|g| g.concat()).collect(),
        Cut::Pieces(pieces) => {
            let text = chunks.concat();
            if pieces.concat() == text {
                return pieces.clone();
            }
            let mut out = Vec::new();
            let mut at = 0;
            for p in pieces {
                let mut end = (at + p.len()).min(text.len());
                while !text.is_char_boundary(end) {
                    end += 1;
                }
                if end > at {
                    out.push(text[at..end].to_string());
                    at = end;
                }
            }
            if at < text.len() {
                out.push(text[at..].to_string());
            }
            out
        }
    }
}

/// Where a re-cut parse first leaves the one-shot parse ([`chunking_divergence`]). A fact:
/// the `parser.chunking_divergence` finding is built from it by
/// `diagnose::rules::replay::cut_divergence`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Divergence {
    /// 0-based step of the re-cut trace.
    pub step: usize,
    /// Byte offset of that step's chunk in the text.
    pub offset: usize,
    /// The step's chunk.
    pub chunk: String,
    /// What differs (`content released so far is not what the one-shot parse produced`, …).
    pub why: String,
}

/// Compares the parse of `chunks` re-cut as `cut` with a one-shot parse of their concatenation.
/// At every step, what has been released (content, reasoning, calls, repairs, malformed) must be
/// a prefix of the one-shot result, and at the end equal to it. The first step that breaks
/// this is returned.
pub fn chunking_divergence(
    chunks: &[String],
    cut: &Cut,
    syntax: Option<Syntax>,
    tools: Option<&Value>,
    opts: ParserOptions,
) -> Option<Divergence> {
    let ix = Arc::new(ToolIndex::from_value(tools));
    let text = chunks.concat();
    let one = Trace::record_index([text.as_str()], syntax, ix.clone(), opts);
    let re = recut(chunks, cut);
    let tr = Trace::record_index(re.iter().map(String::as_str), syntax, ix, opts);
    let (step, why) = first_divergence(&one, &tr)?;
    Some(Divergence {
        step,
        offset: tr.steps[step].input.0,
        chunk: tr.state_at(step).chunk.to_owned(),
        why,
    })
}

/// The first step of `other` whose output so far is not a prefix of `reference`'s final output
/// (content, reasoning, calls, repairs, malformed, in order), or, at its last step, not equal to
/// it; with what differs. O(total output): each step compares only what it added.
pub fn first_divergence(reference: &Trace, other: &Trace) -> Option<(usize, String)> {
    let r = reference.steps.last()?;
    let zero = Step {
        input: (0, 0),
        state: r.state,
        events: (0, 0),
        content_len: 0,
        reasoning_len: 0,
        moved: 0,
        calls: 0,
        repairs: 0,
        malformed: 0,
    };
    let mut prev = zero;
    let n = other.steps.len();
    for (i, s) in other.steps.iter().enumerate() {
        let fin = i + 1 == n;
        let bytes_ok = |a: &str, b: &str, from: usize, to: usize, lim: usize| {
            to <= lim && a.as_bytes()[from..to] == b.as_bytes()[from..to]
        };
        if !bytes_ok(
            &other.content,
            &reference.content,
            prev.content_len,
            s.content_len,
            r.content_len,
        ) {
            return Some((
                i,
                "content released so far is not what the one-shot parse produced".into(),
            ));
        }
        if !bytes_ok(
            &other.reasoning,
            &reference.reasoning,
            prev.reasoning_len,
            s.reasoning_len,
            r.reasoning_len,
        ) {
            return Some((
                i,
                "reasoning released so far is not what the one-shot parse produced".into(),
            ));
        }
        if s.moved != prev.moved && s.moved != r.moved {
            return Some((
                i,
                "a different amount of content was moved to reasoning".into(),
            ));
        }
        let calls_ok = (prev.calls..s.calls).all(|k| reference.calls.get(k) == other.calls.get(k));
        if !calls_ok {
            return Some((i, "a tool call differs from the one-shot parse".into()));
        }
        if !(prev.repairs..s.repairs).all(|k| reference.repairs.get(k) == other.repairs.get(k)) {
            return Some((i, "a repair differs from the one-shot parse".into()));
        }
        if !(prev.malformed..s.malformed)
            .all(|k| reference.malformed.get(k) == other.malformed.get(k))
        {
            return Some((
                i,
                "a malformed block differs from the one-shot parse".into(),
            ));
        }
        if fin {
            let diff = [
                ("content", s.content_len, r.content_len),
                ("reasoning", s.reasoning_len, r.reasoning_len),
                ("content moved to reasoning", s.moved, r.moved),
                ("tool calls", s.calls, r.calls),
                ("repairs", s.repairs, r.repairs),
                ("malformed", s.malformed, r.malformed),
            ]
            .into_iter()
            .find(|(_, a, b)| a != b);
            if let Some((what, a, b)) = diff {
                return Some((
                    i,
                    format!("{what} at the end differs from the one-shot parse ({a} vs {b})"),
                ));
            }
        }
        prev = *s;
    }
    None
}

/// Runs every applicable re-cut (per character; per token piece when `pieces` is given; per
/// recorded chunk; every 2 and every 8 chunks) and returns each diverging cut with where.
pub fn check_chunkings(
    chunks: &[String],
    pieces: Option<&[String]>,
    syntax: Option<Syntax>,
    tools: Option<&Value>,
    opts: ParserOptions,
) -> Vec<(Cut, Divergence)> {
    let mut cuts = vec![Cut::PerChar];
    if let Some(p) = pieces {
        cuts.push(Cut::Pieces(p.to_vec()));
    }
    cuts.extend([Cut::Recorded, Cut::EveryN(2), Cut::EveryN(8)]);
    cuts.into_iter()
        .filter_map(|c| chunking_divergence(chunks, &c, syntax, tools, opts).map(|d| (c, d)))
        .collect()
}
