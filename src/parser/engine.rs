//! The incremental parser: feed raw model text in chunks of any size, get events.
//!
//! Streaming rule: plain text is released as soon as it cannot be the start of a marker; a call
//! block is held until it closes and then parsed whole; a reply starting with `{` is held to the
//! end. Every decision depends only on the text, never on where chunks were cut, so any chunking
//! gives the same events concatenated (the property tests check this).

use serde::Serialize;
use serde_json::Value;

use super::body::{self, Note, RawCall};
use super::syntax::{
    End, HARMONY_CALL_ENDS, HARMONY_REASONING_ENDS, MARKERS, Marker, MarkerKind, NON_CONSUMED,
    Syntax,
};
use super::tools::ToolIndex;
use super::types::{Malformed, ParsedCall, Repair};

/// One thing the parser emitted.
///
/// JSON shape (`steps[].events[]` of `toolscope parse --format json`): `{"content":"…"}`,
/// `{"reasoning":"…"}`, `{"call_start":{"index","name","syntax","offset"}}`,
/// `{"arguments_delta":{"index","delta"}}`, `{"call_end":{…ParsedCall}}`, `{"repair":{…}}`,
/// `{"malformed":{…}}`, `{"content_to_reasoning":{"bytes"}}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Event {
    /// Content text released.
    Content(String),
    /// Reasoning text released.
    Reasoning(String),
    /// A call begins (emitted when its block has closed and parsed).
    CallStart {
        index: usize,
        name: String,
        syntax: Syntax,
        offset: usize,
    },
    /// Argument text of call `index` (the whole arguments JSON, serialized, in one delta).
    ArgumentsDelta { index: usize, delta: String },
    /// Call `index` is complete.
    CallEnd { index: usize, call: ParsedCall },
    /// A drift was accepted.
    Repair(Repair),
    /// A block did not parse; its text was released as content.
    Malformed(Malformed),
    /// An orphan `</think>` showed that the prompt opened the thinking block: all `bytes` of
    /// content released so far were reasoning (llama.cpp's "thinking forced open").
    ContentToReasoning { bytes: usize },
}

/// Where the parser's output goes: the event vector of [`Parser::feed_into`] (the trace's
/// material), or straight into a [`super::Collector`] for a one-shot parse (no events built).
pub(crate) trait Sink {
    /// Content text released (consecutive pieces may be merged).
    fn content(&mut self, s: &str);
    /// Reasoning text released (consecutive pieces may be merged).
    fn reasoning(&mut self, s: &str);
    /// Call `index` parsed; `span`: byte range of its markup in the raw text.
    fn call(&mut self, index: usize, c: RawCall, span: (usize, usize));
    /// Any other event (repair, malformed, content moved to reasoning).
    fn event(&mut self, e: Event);
}

/// The events of one `feed`/`finish`, appended to the caller's vector; events before `floor`
/// belong to earlier calls and are never merged into.
pub(crate) struct Events<'a> {
    out: &'a mut Vec<Event>,
    floor: usize,
}

impl Events<'_> {
    /// A sink appending to `out` after its current events.
    pub(crate) fn after(out: &mut Vec<Event>) -> Events<'_> {
        Events {
            floor: out.len(),
            out,
        }
    }

    /// Appends text to the last event of this call when it is text of the same stream.
    fn text(&mut self, s: &str, reasoning: bool) {
        if self.out.len() > self.floor {
            match self.out.last_mut() {
                Some(Event::Content(prev)) if !reasoning => return prev.push_str(s),
                Some(Event::Reasoning(prev)) if reasoning => return prev.push_str(s),
                _ => {}
            }
        }
        let s = s.to_string();
        self.out.push(if reasoning {
            Event::Reasoning(s)
        } else {
            Event::Content(s)
        });
    }
}

impl Sink for Events<'_> {
    fn content(&mut self, s: &str) {
        self.text(s, false);
    }

    fn reasoning(&mut self, s: &str) {
        self.text(s, true);
    }

    fn call(&mut self, index: usize, c: RawCall, span: (usize, usize)) {
        self.out.push(Event::CallStart {
            index,
            name: c.name.clone(),
            syntax: c.syntax,
            offset: span.0,
        });
        self.out.push(Event::ArgumentsDelta {
            index,
            delta: c.arguments.to_string(),
        });
        self.out.push(Event::CallEnd {
            index,
            call: c.into_parsed(span),
        });
    }

    fn event(&mut self, e: Event) {
        self.out.push(e);
    }
}

/// Options beyond syntax and tools.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ParserOptions {
    /// The prompt ended inside an open thinking block (`<think>` in the generation prompt):
    /// the text starts as reasoning until `</think>`.
    pub reasoning_open: bool,
    /// The reply continues the content of a prefilled assistant message (llama.cpp
    /// `continue_final_message`): it starts as plain text, never as a bare JSON call, a
    /// pythonic list or a functionary v3.2 element.
    pub continuation: bool,
}

/// What the parser is doing between chunks (the trace's "state" column).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StateKind {
    /// Plain text; nothing held (or only leading whitespace).
    Plain,
    /// Holding a possible marker start (the held text is its prefix).
    PartialMarker,
    /// Inside a call block of `syntax`, holding its text until it closes.
    InCall,
    /// Holding a reply that starts with `{` (bare JSON) until the end.
    HoldingJson,
    /// Inside reasoning (held text, if any, may be the start of its end marker).
    InReasoning,
    /// Right after a block, holding whitespace to see whether one stray `}`/`]` follows.
    AfterCall,
    /// Holding a harmony message header until `<|message|>`.
    InHeader,
    /// `finish()` was called.
    Done,
}

/// The parser's state: kind, syntax of the block (if any), and the held text as the absolute
/// byte range `[held_start, held_end)` of the input fed so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct State {
    pub kind: StateKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub syntax: Option<Syntax>,
    pub held_start: usize,
    pub held_end: usize,
}

impl StateKind {
    /// The stable snake_case name (`plain`, `partial_marker`, `in_call`, `holding_json`,
    /// `in_reasoning`, `after_call`, `in_header`, `done`), the same as its JSON form.
    pub fn name(self) -> &'static str {
        match self {
            StateKind::Plain => "plain",
            StateKind::PartialMarker => "partial_marker",
            StateKind::InCall => "in_call",
            StateKind::HoldingJson => "holding_json",
            StateKind::InReasoning => "in_reasoning",
            StateKind::AfterCall => "after_call",
            StateKind::InHeader => "in_header",
            StateKind::Done => "done",
        }
    }
}

/// The one display form of a state kind: its [`StateKind::name`] (`holding_json`).
impl std::fmt::Display for StateKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The one display form of a state, used by the CLI, the TUI Replay pane and docs/parser.md:
/// the kind, then the syntax of the block when there is one (`in_call hermes`, `holding_json`).
/// The held range is not part of it (the caller shows the held text itself).
impl std::fmt::Display for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.syntax {
            Some(sx) => write!(f, "{} {sx}", self.kind),
            None => write!(f, "{}", self.kind),
        }
    }
}

/// Cuts `s` to at most `n` characters, marking a cut with `…`.
fn cut_chars(s: &str, n: usize) -> std::borrow::Cow<'_, str> {
    match s.char_indices().nth(n) {
        None => std::borrow::Cow::Borrowed(s),
        Some((i, _)) => std::borrow::Cow::Owned(format!("{}…", &s[..i])),
    }
}

/// The one display form of an event, one line, used by the CLI, the TUI Replay pane and
/// docs/parser.md. Text is quoted (Rust escapes, so control characters and escape sequences
/// in model output cannot reach the terminal) and cut to 60 characters:
///
/// `content "Hello"`, `reasoning "Let me think"`, `call_start get_weather [0] hermes @12`,
/// `arguments_delta [0] {"city":"Paris"}`, `call_end get_weather [0]`,
/// `repair stray_closer @40: dropped one stray …`, `malformed hermes @0: invalid JSON …`,
/// `content_to_reasoning 25 bytes`.
impl std::fmt::Display for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Event::Content(t) => write!(f, "content {:?}", cut_chars(t, 60)),
            Event::Reasoning(t) => write!(f, "reasoning {:?}", cut_chars(t, 60)),
            Event::CallStart {
                index,
                name,
                syntax,
                offset,
            } => write!(f, "call_start {name} [{index}] {syntax} @{offset}"),
            Event::ArgumentsDelta { index, delta } => {
                // JSON text: shown as is, only control characters escaped
                write!(f, "arguments_delta [{index}] ")?;
                for c in cut_chars(delta, 60).chars() {
                    if c.is_control() {
                        write!(f, "{}", c.escape_debug())?;
                    } else {
                        write!(f, "{c}")?;
                    }
                }
                Ok(())
            }
            Event::CallEnd { index, call } => write!(f, "call_end {} [{index}]", call.name),
            Event::Repair(r) => write!(f, "repair {} @{}: {}", r.kind, r.offset, r.message),
            Event::Malformed(m) => {
                write!(f, "malformed {} @{}: {}", m.syntax, m.offset, m.message)
            }
            Event::ContentToReasoning { bytes } => {
                write!(f, "content_to_reasoning {bytes} bytes")
            }
        }
    }
}

#[derive(Debug, Clone)]
enum Mode {
    /// Nothing but whitespace released yet, no call, no content: bare JSON still possible.
    Start,
    Text,
    /// `calls`: a call block starting inside ends the reasoning unless a reasoning end follows
    /// (llama.cpp: "a tool call ends the prefilled thinking block, with or without a closing
    /// </think>", test-chat.cpp, build 11434).
    Reasoning {
        ends: &'static [&'static str],
        calls: bool,
    },
    /// A call block opened inside reasoning: held from `start` (buffer offset) until a reasoning
    /// end (then it was reasoning) or the end of the text (then the call ended the reasoning).
    /// `scan`: where to resume the end search.
    ReasoningCall {
        ends: &'static [&'static str],
        start: usize,
        scan: usize,
    },
    /// `body`: offset in buf where the body starts; `scan`: where to resume the end search.
    Block {
        marker: &'static Marker,
        start: usize,
        body: usize,
        scan: usize,
        name: Option<String>,
        /// Mistral: where the end search stands.
        mistral: body::MistralEnd,
    },
    /// `scan`: where to resume the `<|message|>` search.
    Header {
        start: usize,
        body: usize,
        scan: usize,
    },
    HoldJson,
    /// Holding a reply that starts like a pythonic call list `[name(` until the end.
    HoldPythonic,
    AfterBlock,
}

/// The tolerant incremental tool-call parser.
///
/// `Parser::new(Some(Syntax::Hermes), Some(&tools))`, then `.feed(chunk)` for each chunk
/// (returns the events it produced), then `.finish()`. `syntax: None` = auto: every syntax's
/// markers are active. Memory: holds only the unreleased text (a partial marker, an open block,
/// or a bare-JSON reply). Never panics on any input.
#[derive(Debug, Clone)]
pub struct Parser {
    syntax: Option<Syntax>,
    /// The active markers (shared, built once per syntax).
    set: &'static MarkerSet,
    tools: std::sync::Arc<ToolIndex>,
    buf: String,
    /// Absolute offset of `buf[0]`.
    base: usize,
    mode: Mode,
    /// Non-whitespace content released (bare JSON no longer possible).
    started: bool,
    /// Bytes of content released so far.
    content_len: usize,
    calls: usize,
    saw_reasoning: bool,
    bare_json_failed: bool,
    done: bool,
}

/// One active marker in a [`MarkerSet`] bucket: its first (up to) 8 bytes as a little-endian
/// word and the mask of those bytes, so most candidates are rejected with one comparison.
#[derive(Debug, Clone, Copy)]
struct Cand {
    m: &'static Marker,
    head: u64,
    mask: u64,
    block: bool,
    /// Anchored on its second byte (see [`MarkerSet::lead`]): the marker starts one byte
    /// before the candidate.
    back: bool,
}

/// The first (up to) 8 bytes of `b`, little-endian, zero-padded.
#[inline]
fn word8(b: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    let n = b.len().min(8);
    w[..n].copy_from_slice(&b[..n]);
    u64::from_le_bytes(w)
}

/// The markers active for one syntax choice, indexed by their first two bytes.
#[derive(Debug)]
struct MarkerSet {
    /// `slot[b0]`: index of first byte `b0` in `needles`, or `u8::MAX` when no marker starts
    /// with it.
    slot: [u8; 256],
    /// `by_two[slot * 256 + b1]`: the markers starting with bytes `b0 b1`, longest first (the
    /// first full match is the longest one).
    by_two: Vec<Vec<Cand>>,
    /// Per slot: some call-block marker starts with that byte.
    block_first: Vec<bool>,
    /// The distinct first bytes (memchr needles), searched three at a time.
    needles: Vec<u8>,
    /// `lead[b]`: bit 1: some marker starting with byte `b` is anchored on its second byte
    /// instead (`b` starts no other marker and its second byte is already a needle, so `b`
    /// costs no memchr pass of its own: MiniMax M3's `]<]minimax[>[` is found at its `<`);
    /// bit 2: one of those is a call-block start. A text ending in such a byte holds it.
    lead: [u8; 256],
    /// A GPT-OSS marker is active (a reply may start with a harmony recipient).
    harmony: bool,
}

impl MarkerSet {
    fn build(syntax: Option<Syntax>) -> MarkerSet {
        let mut markers: Vec<&'static Marker> = Vec::new();
        for m in MARKERS {
            let active = match (m.syntax, syntax) {
                (None, _) => true,
                (Some(_), None) => m.auto,
                (Some(ms), Some(s)) => ms == s,
            };
            // one marker per text
            if active && !markers.iter().any(|x| x.text == m.text) {
                markers.push(m);
            }
        }
        // A first byte that would be a needle of its own is anchored on the second byte
        // instead when every marker starting with it has 3+ bytes and a second byte that
        // starts some other marker (one memchr pass fewer per candidate).
        let mut firsts = [false; 256];
        for m in &markers {
            firsts[m.text.as_bytes()[0] as usize] = true;
        }
        let mut lead = [0u8; 256];
        for m in &markers {
            let t = m.text.as_bytes();
            lead[t[0] as usize] |= 1;
            if t.len() < 3 || t[1] == t[0] || !firsts[t[1] as usize] {
                lead[t[0] as usize] |= 4; // not anchorable
            }
        }
        for m in &markers {
            // the second byte must stay a needle (not itself anchored elsewhere)
            let t = m.text.as_bytes();
            if lead[t[1] as usize] & 5 == 1 {
                lead[t[0] as usize] |= 4;
            }
        }
        for l in &mut lead {
            *l = if *l == 1 { 1 } else { 0 };
        }
        let mut slot = [u8::MAX; 256];
        let mut needles = Vec::new();
        for m in &markers {
            let b0 = m.text.as_bytes()[0];
            if lead[b0 as usize] == 0 && slot[b0 as usize] == u8::MAX {
                slot[b0 as usize] = needles.len() as u8;
                needles.push(b0);
            }
        }
        let mut by_two = vec![Vec::new(); needles.len() * 256];
        let mut block_first = vec![false; needles.len()];
        for m in &markers {
            let t = m.text.as_bytes();
            // every marker has at least two bytes
            debug_assert!(t.len() >= 2, "{:?}", m.text);
            let back = lead[t[0] as usize] != 0;
            let (k0, k1) = if back { (t[1], t[2]) } else { (t[0], t[1]) };
            let s = slot[k0 as usize] as usize;
            let n = t.len().min(8);
            let block = matches!(m.kind, MarkerKind::Block { .. });
            if back {
                lead[t[0] as usize] |= u8::from(block) << 1;
            }
            // a back-anchored block start may begin one byte before any candidate of `k0`
            block_first[s] |= block;
            by_two[s * 256 + k1 as usize].push(Cand {
                m,
                head: word8(t),
                mask: if n == 8 {
                    u64::MAX
                } else {
                    (1u64 << (8 * n)) - 1
                },
                block,
                back,
            });
        }
        for v in &mut by_two {
            // longest first; equal lengths keep MARKERS order
            v.sort_by_key(|c| std::cmp::Reverse(c.m.text.len()));
        }
        let harmony = markers
            .iter()
            .any(|m| matches!(m.syntax, Some(Syntax::GptOss | Syntax::MuseGlimmer)));
        MarkerSet {
            slot,
            by_two,
            block_first,
            needles,
            lead,
            harmony,
        }
    }

    /// The set for `syntax` (`None` = auto), built on first use.
    fn get(syntax: Option<Syntax>) -> &'static MarkerSet {
        const N: usize = Syntax::ALL.len() + 1;
        static SETS: [std::sync::OnceLock<MarkerSet>; N] =
            [const { std::sync::OnceLock::new() }; N];
        let i = match syntax {
            None => 0,
            Some(s) => 1 + Syntax::ALL.iter().position(|x| *x == s).unwrap_or(0),
        };
        SETS[i].get_or_init(|| MarkerSet::build(syntax))
    }

    /// Position of the next byte in `b` that may start a marker.
    #[inline]
    fn next_candidate(&self, b: &[u8]) -> Option<usize> {
        let n = &self.needles;
        match n.len() {
            0 => None,
            1 => memchr::memchr(n[0], b),
            2 => memchr::memchr2(n[0], n[1], b),
            3 => memchr::memchr3(n[0], n[1], n[2], b),
            _ => {
                // three at a time, each group only before the best hit so far (a fourth first
                // byte costs one more memchr over the text before the next candidate)
                let mut best: Option<usize> = None;
                for g in n.chunks(3) {
                    let h = &b[..best.unwrap_or(b.len())];
                    let p = match g.len() {
                        1 => memchr::memchr(g[0], h),
                        2 => memchr::memchr2(g[0], g[1], h),
                        _ => memchr::memchr3(g[0], g[1], g[2], h),
                    };
                    if p.is_some() {
                        best = p;
                    }
                }
                best
            }
        }
    }
}

const HARMONY_CALL: Marker = Marker {
    text: "",
    syntax: Some(Syntax::GptOss),
    kind: MarkerKind::Block {
        end: End::Markers(HARMONY_CALL_ENDS, true),
    },
    auto: true,
};
const HARMONY_HDR_ENDS: &[&str] = &["<|message|>"];
/// Muse Glimmer message ends.
const MUSE_ENDS: &[&str] = &["<|eom|>", "<|eot|>", "<|start|>"];
/// A Muse Glimmer call message (name from the header).
const MUSE_CALL: Marker = Marker {
    text: "",
    syntax: Some(Syntax::MuseGlimmer),
    kind: MarkerKind::Block {
        end: End::Markers(MUSE_ENDS, true),
    },
    auto: false,
};
/// Functionary v3.2: the reply's first element (the prompt ended with `>>>`).
const FUNCTIONARY_START: Marker = Marker {
    text: "",
    syntax: Some(Syntax::FunctionaryV32),
    kind: MarkerKind::Block {
        end: End::Markers(&[">>>"], true),
    },
    auto: false,
};

impl Parser {
    /// A parser for `syntax` (`None` = auto) with the request's tools (see
    /// [`ToolIndex::from_value`] for the accepted shapes).
    pub fn new(syntax: Option<Syntax>, tools: Option<&Value>) -> Parser {
        Parser::with_options(syntax, tools, ParserOptions::default())
    }

    /// As [`Parser::new`], with options.
    pub fn with_options(
        syntax: Option<Syntax>,
        tools: Option<&Value>,
        opts: ParserOptions,
    ) -> Parser {
        Parser::with_index(
            syntax,
            std::sync::Arc::new(ToolIndex::from_value(tools)),
            opts,
        )
    }

    /// As [`Parser::with_options`], sharing an already built tool index.
    pub fn with_index(
        syntax: Option<Syntax>,
        tools: std::sync::Arc<ToolIndex>,
        opts: ParserOptions,
    ) -> Parser {
        let set = MarkerSet::get(syntax);
        Parser {
            syntax,
            set,
            tools,
            buf: String::new(),
            base: 0,
            mode: if opts.continuation && !opts.reasoning_open {
                Mode::Text
            } else if opts.reasoning_open {
                Mode::Reasoning {
                    ends: Syntax::open_reasoning_ends(syntax),
                    calls: true,
                }
            } else {
                Mode::Start
            },
            started: opts.continuation,
            content_len: 0,
            calls: 0,
            saw_reasoning: opts.reasoning_open,
            bare_json_failed: false,
            done: false,
        }
    }

    /// The syntax given at construction (`None` = auto).
    pub fn syntax(&self) -> Option<Syntax> {
        self.syntax
    }

    /// Feeds one chunk; returns the events it caused (possibly none while text is held).
    pub fn feed(&mut self, chunk: &str) -> Vec<Event> {
        let mut out = Vec::new();
        self.feed_into(chunk, &mut out);
        out
    }

    /// As [`Parser::feed`], appending to `out` (no allocation when nothing is emitted).
    pub fn feed_into(&mut self, chunk: &str, out: &mut Vec<Event>) {
        let floor = out.len();
        self.feed_sink(chunk, &mut Events { out, floor });
    }

    /// As [`Parser::feed_into`], writing to any [`Sink`].
    pub(crate) fn feed_sink(&mut self, chunk: &str, out: &mut impl Sink) {
        if self.done {
            return;
        }
        if self.buf.is_empty() {
            // nothing held: parse the chunk in place, keep only what stays held
            let pos = self.run(chunk, false, out);
            self.buf.push_str(&chunk[pos..]);
            self.commit(pos);
        } else {
            self.buf.push_str(chunk);
            let mut buf = std::mem::take(&mut self.buf);
            let pos = self.run(&buf, false, out);
            buf.drain(..pos);
            self.buf = buf;
            self.commit(pos);
        }
    }

    /// Ends the input: releases held text, closes an unclosed block (parsed if possible,
    /// repair `missing_end_marker`; else malformed), decides a held bare-JSON reply.
    pub fn finish(&mut self) -> Vec<Event> {
        let mut out = Vec::new();
        self.finish_into(&mut out);
        out
    }

    /// As [`Parser::finish`], appending to `out`.
    pub fn finish_into(&mut self, out: &mut Vec<Event>) {
        let floor = out.len();
        self.finish_sink(&mut Events { out, floor });
    }

    /// [`Parser::feed_sink`] of `chunk`, or [`Parser::finish_sink`] for `None`.
    pub(crate) fn feed_or_finish(&mut self, chunk: Option<&str>, out: &mut impl Sink) {
        match chunk {
            Some(c) => self.feed_sink(c, out),
            None => self.finish_sink(out),
        }
    }

    /// As [`Parser::finish_into`], writing to any [`Sink`].
    pub(crate) fn finish_sink(&mut self, out: &mut impl Sink) {
        if self.done {
            return;
        }
        let mut buf = std::mem::take(&mut self.buf);
        let pos = self.run(&buf, true, out);
        buf.drain(..pos);
        self.buf = buf;
        self.commit(pos);
        self.done = true;
    }

    /// The current state (for the replay trace).
    pub fn state(&self) -> State {
        let held_start = self.base;
        let held_end = self.base + self.buf.len();
        let (kind, syntax) = match &self.mode {
            _ if self.done => (StateKind::Done, None),
            Mode::Start | Mode::Text if self.buf.is_empty() || self.buf.trim().is_empty() => {
                (StateKind::Plain, None)
            }
            Mode::Start | Mode::Text => (StateKind::PartialMarker, None),
            Mode::Reasoning { .. } | Mode::ReasoningCall { .. } => (StateKind::InReasoning, None),
            Mode::Block { marker, .. } => (StateKind::InCall, marker.syntax),
            Mode::Header { .. } => (StateKind::InHeader, Some(Syntax::GptOss)),
            Mode::HoldJson | Mode::HoldPythonic => (StateKind::HoldingJson, None),
            Mode::AfterBlock => (StateKind::AfterCall, None),
        };
        State {
            kind,
            syntax,
            held_start,
            held_end,
        }
    }

    fn emit_content(&mut self, s: &str, out: &mut impl Sink) {
        if s.is_empty() {
            return;
        }
        if !self.started && !s.trim().is_empty() {
            self.started = true;
        }
        self.content_len += s.len();
        out.content(s);
    }

    fn emit_reasoning(&self, s: &str, out: &mut impl Sink) {
        if !s.is_empty() {
            out.reasoning(s);
        }
    }

    /// Mode to return to after an element ends.
    fn text_mode(&self) -> Mode {
        if !self.started && self.calls == 0 && !self.bare_json_failed {
            Mode::Start
        } else {
            Mode::Text
        }
    }

    /// Finds the earliest marker in `s` (relative), among active markers. Returns
    /// `Ok((pos, marker))` for a full match, `Err(Some(pos))` when `s[pos..]` is a proper prefix of
    /// a marker (only possible at the end), `Err(None)` when none.
    fn find_marker(&self, s: &str, eof: bool) -> Result<(usize, &'static Marker), Option<usize>> {
        self.find_marker_in(s, eof, false)
    }

    /// As [`Parser::find_marker`]; `blocks_only`: only call-block starts count.
    fn find_marker_in(
        &self,
        s: &str,
        eof: bool,
        blocks_only: bool,
    ) -> Result<(usize, &'static Marker), Option<usize>> {
        let b = s.as_bytes();
        let set = self.set;
        // where a hold at `at` really starts: one byte earlier when that byte may begin a
        // marker anchored on its second byte
        let lead_at = |at: usize| {
            let m = if blocks_only { 2 } else { 1 };
            if at > 0 && set.lead[b[at - 1] as usize] & m != 0 {
                at - 1
            } else {
                at
            }
        };
        let mut i = 0;
        while i < b.len() {
            let Some(p) = set.next_candidate(&b[i..]) else {
                break;
            };
            let at = i + p;
            let rest = &b[at..];
            let slot = set.slot[rest[0] as usize] as usize;
            let Some(&b1) = rest.get(1) else {
                // one byte left: the start of any marker with that first byte
                if !eof && (!blocks_only || set.block_first[slot]) {
                    return Err(Some(lead_at(at)));
                }
                return Err(None);
            };
            let bucket = &set.by_two[slot * 256 + b1 as usize];
            if bucket.is_empty() {
                i = at + 1;
                continue;
            }
            let w = word8(rest);
            let mut best: Option<(usize, &'static Marker)> = None;
            let mut partial: Option<usize> = None;
            for c in bucket {
                if blocks_only && !c.block {
                    continue;
                }
                let mt = c.m.text.as_bytes();
                // the marker's start: `at`, or one byte before for a back-anchored one
                let (from, w) = if !c.back {
                    (at, w)
                } else if at > 0 && b[at - 1] == mt[0] {
                    (at - 1, word8(&b[at - 1..]))
                } else {
                    continue;
                };
                let rest = &b[from..];
                if rest.len() >= mt.len() {
                    if w & c.mask == c.head && (mt.len() <= 8 || rest[8..mt.len()] == mt[8..]) {
                        // longest first: the first full match is the longest
                        best = Some((from, c.m));
                        break;
                    }
                } else if mt.starts_with(rest) {
                    partial = Some(partial.map_or(from, |p| p.min(from)));
                }
            }
            // a longer marker may still complete (e.g. `<tool_call>` vs a longer one): prefer waiting
            if let Some(p) = partial
                && !(eof && best.is_some())
            {
                return Err(Some(p));
            }
            if let Some(found) = best {
                return Ok(found);
            }
            i = at + 1;
        }
        // a last byte that may begin a back-anchored marker: held
        let m = if blocks_only { 2 } else { 1 };
        match b.last() {
            Some(&l) if !eof && set.lead[l as usize] & m != 0 => Err(Some(b.len() - 1)),
            _ => Err(None),
        }
    }

    /// Runs the state machine over `src` (the held text, or a chunk when nothing was held);
    /// returns how many bytes of it were consumed (released or parsed).
    fn run(&mut self, src: &str, eof: bool, out: &mut impl Sink) -> usize {
        let mut pos = 0usize;
        while self.step(src, &mut pos, eof, out) {}
        pos
    }

    /// After `run` consumed `pos` bytes: advance the base offset and shift buffer-relative
    /// offsets in the mode.
    fn commit(&mut self, pos: usize) {
        if pos > 0 {
            self.base += pos;
            match &mut self.mode {
                Mode::Block {
                    start, body, scan, ..
                } => {
                    *start -= pos;
                    *body -= pos;
                    *scan -= pos;
                }
                Mode::Header { start, body, scan } => {
                    *start -= pos;
                    *body -= pos;
                    *scan -= pos;
                }
                Mode::ReasoningCall { start, scan, .. } => {
                    *start -= pos;
                    *scan -= pos;
                }
                _ => {}
            }
        }
    }

    /// One step of the state machine from `pos`; false when it needs more input (or is done).
    fn step(&mut self, src: &str, pos: &mut usize, eof: bool, out: &mut impl Sink) -> bool {
        let len = src.len();
        match self.mode.clone() {
            Mode::Start => self.step_start(src, pos, eof, out),
            Mode::Text => self.step_text(src, pos, eof, out),
            Mode::Reasoning { ends, calls } => self.step_reasoning(src, pos, eof, out, ends, calls),
            Mode::ReasoningCall { ends, start, scan } => {
                self.step_reasoning_call(src, pos, eof, out, ends, start, scan)
            }
            Mode::Header { start, body, scan } => {
                self.step_header(src, pos, eof, out, start, body, scan)
            }
            Mode::HoldJson => {
                if !eof {
                    return false;
                }
                self.decide_bare_json(src, pos, out);
                true
            }
            Mode::HoldPythonic => self.step_hold_pythonic(src, pos, eof, out),
            Mode::AfterBlock => self.step_after_block(src, pos, eof, out),
            Mode::Block {
                marker,
                start,
                body,
                scan,
                name,
                mut mistral,
            } => {
                let s = &src[body..];
                let found: Option<(usize, usize)> = match marker.kind {
                    MarkerKind::Block {
                        end: End::Markers(ends, _),
                    } => {
                        let from = scan - body;
                        match find_any(&s[from..], ends) {
                            Ok((at, end)) => {
                                let consumed = if NON_CONSUMED.contains(&end) {
                                    0
                                } else {
                                    end.len()
                                };
                                Some((from + at, from + at + consumed))
                            }
                            Err(hold) => {
                                let new_scan = body + from + hold.unwrap_or(s.len() - from);
                                self.mode = Mode::Block {
                                    marker,
                                    start,
                                    body,
                                    scan: new_scan,
                                    name: name.clone(),
                                    mistral,
                                };
                                None
                            }
                        }
                    }
                    MarkerKind::Block {
                        end: End::MistralJson,
                    } => {
                        let e = mistral.advance(s);
                        if e.is_none() {
                            self.mode = Mode::Block {
                                marker,
                                start,
                                body,
                                scan,
                                name: name.clone(),
                                mistral,
                            };
                        }
                        e.map(|e| (e, e))
                    }
                    _ => None,
                };
                match found {
                    Some((end_at, after)) => {
                        let abs = self.base + start;
                        self.close_block(
                            marker,
                            &src[body..body + end_at],
                            &src[start..body + after],
                            abs,
                            self.base + body,
                            name.as_deref(),
                            false,
                            out,
                        );
                        *pos = body + after;
                        true
                    }
                    None if eof => {
                        let body_text = &src[body..];
                        let whole = &src[start..];
                        let abs = self.base + start;
                        let eof_ok = matches!(
                            marker.kind,
                            MarkerKind::Block {
                                end: End::Markers(_, true)
                            }
                        );
                        self.close_block(
                            marker,
                            body_text,
                            whole,
                            abs,
                            self.base + body,
                            name.as_deref(),
                            !eof_ok,
                            out,
                        );
                        *pos = len;
                        true
                    }
                    None => {
                        *pos = start;
                        false
                    }
                }
            }
        }
    }

    /// [`Parser::step`] in `Mode::Reasoning`: Reasoning up to one of `ends`; with `calls`, a call block opening first ends it (held as [`Mode::ReasoningCall`]).
    fn step_reasoning(
        &mut self,
        src: &str,
        pos: &mut usize,
        eof: bool,
        out: &mut impl Sink,
        ends: &'static [&'static str],
        calls: bool,
    ) -> bool {
        let s = &src[*pos..];
        let end = find_any(s, ends);
        // a call block opening before the reasoning end (or before the end of the text)
        if calls {
            let lim = match end {
                Ok((at, _)) => at,
                Err(_) => s.len(),
            };
            match self.find_marker_in(&s[..lim], eof, true) {
                Ok((at, _)) => {
                    self.emit_reasoning(&s[..at], out);
                    *pos += at;
                    self.mode = Mode::ReasoningCall {
                        ends,
                        start: *pos,
                        scan: *pos,
                    };
                    return true;
                }
                Err(Some(at)) if !eof && let Err(hold) = end => {
                    // maybe the start of a call marker (or of the reasoning end): hold it
                    let at = hold.map_or(at, |h| h.min(at));
                    self.emit_reasoning(&s[..at], out);
                    *pos += at;
                    return false;
                }
                Err(_) => {}
            }
        }
        match end {
            Ok((at, end)) => {
                self.emit_reasoning(&s[..at], out);
                *pos += at;
                if !NON_CONSUMED.contains(&end) {
                    *pos += end.len();
                }
                self.mode = self.text_mode();
                true
            }
            Err(hold) => {
                let cut = if eof {
                    s.len()
                } else {
                    hold.unwrap_or(s.len())
                };
                self.emit_reasoning(&s[..cut], out);
                *pos += cut;
                false
            }
        }
    }

    /// [`Parser::step`] in `Mode::ReasoningCall`: A call block inside reasoning, held until a reasoning end (it was reasoning) or the end of the text (the call ended the reasoning).
    #[allow(clippy::too_many_arguments)] // the mode's fields, as `step` destructures them
    fn step_reasoning_call(
        &mut self,
        src: &str,
        pos: &mut usize,
        eof: bool,
        out: &mut impl Sink,
        ends: &'static [&'static str],
        start: usize,
        scan: usize,
    ) -> bool {
        match find_any(&src[scan..], ends) {
            Ok((at, end)) => {
                // a reasoning end follows: the call was part of the reasoning
                let e = scan + at;
                self.emit_reasoning(&src[start..e], out);
                *pos = e;
                if !NON_CONSUMED.contains(&end) {
                    *pos += end.len();
                }
                self.mode = self.text_mode();
                true
            }
            Err(_) if eof => {
                // no reasoning end: the call ended the reasoning
                *pos = start;
                self.mode = self.text_mode();
                true
            }
            Err(hold) => {
                let n = src.len() - scan;
                self.mode = Mode::ReasoningCall {
                    ends,
                    start,
                    scan: scan + hold.unwrap_or(n),
                };
                *pos = start;
                false
            }
        }
    }

    /// [`Parser::step`] in `Mode::Header`: A harmony role header up to `<|message|>`: its recipient and channel pick the next mode (a call, reasoning or content; Muse Glimmer's own recipients).
    #[allow(clippy::too_many_arguments)] // the mode's fields, as `step` destructures them
    fn step_header(
        &mut self,
        src: &str,
        pos: &mut usize,
        eof: bool,
        out: &mut impl Sink,
        start: usize,
        body: usize,
        scan: usize,
    ) -> bool {
        let len = src.len();
        let s = &src[body..];
        let from = scan - body;
        match find_any(&s[from..], HARMONY_HDR_ENDS) {
            Ok((at, end)) => {
                let at = from + at;
                let h = body::harmony_header(&s[..at]);
                *pos = body + at + end.len();
                if self.syntax == Some(Syntax::MuseGlimmer) {
                    // Muse Glimmer: ` to=self` reasoning, ` to=user` (or none) content,
                    // any other recipient a call (llama.cpp common/parsers/muse-glimmer.cpp)
                    match h.recipient.as_deref() {
                        Some("self") => {
                            self.saw_reasoning = true;
                            self.mode = Mode::Reasoning {
                                ends: MUSE_ENDS,
                                calls: false,
                            };
                        }
                        None | Some("user") => self.mode = self.text_mode(),
                        Some(r) => {
                            self.mode = Mode::Block {
                                marker: &MUSE_CALL,
                                start,
                                body: *pos,
                                scan: *pos,
                                name: Some(r.to_string()),
                                mistral: body::MistralEnd::default(),
                            };
                        }
                    }
                    return true;
                }
                if let Some(name) = h.recipient {
                    // `functions.N` is a call of tool N; any other recipient is a built-in
                    // tool (python, browser.*, container.*), marked with a leading `!`
                    let name = match name.strip_prefix("functions.") {
                        Some(n) => n.to_string(),
                        None => format!("!{name}"),
                    };
                    self.mode = Mode::Block {
                        marker: &HARMONY_CALL,
                        start,
                        body: *pos,
                        scan: *pos,
                        name: Some(name),
                        mistral: body::MistralEnd::default(),
                    };
                } else if h.channel.as_deref() == Some("analysis") {
                    self.saw_reasoning = true;
                    self.mode = Mode::Reasoning {
                        ends: HARMONY_REASONING_ENDS,
                        calls: false,
                    };
                } else {
                    self.mode = self.text_mode();
                }
                true
            }
            Err(_) if eof => {
                // unterminated header: keep as text
                self.emit_content(&src[start..], out);
                *pos = len;
                self.mode = Mode::Text;
                false
            }
            Err(hold) => {
                self.mode = Mode::Header {
                    start,
                    body,
                    scan: scan + hold.unwrap_or(s.len() - from),
                };
                *pos = start;
                false
            }
        }
    }

    /// [`Parser::step`] in `Mode::Start`: Nothing released yet: bare JSON, a functionary v3.2 first element, a pythonic call list or a harmony recipient may start the reply; else text.
    fn step_start(&mut self, src: &str, pos: &mut usize, eof: bool, out: &mut impl Sink) -> bool {
        let len = src.len();
        let s = &src[*pos..];
        let t = s.trim_start();
        if t.is_empty() {
            if eof {
                self.emit_content(s, out);
                *pos = len;
            }
            return false;
        }
        let lead = s.len() - t.len();
        if t.starts_with('{') {
            self.mode = Mode::HoldJson;
            return true;
        }
        // functionary v3.2: the prompt ends with `>>>`, so the reply is the first element
        if self.syntax == Some(Syntax::FunctionaryV32) && self.calls == 0 {
            self.mode = Mode::Block {
                marker: &FUNCTIONARY_START,
                start: *pos + lead,
                body: *pos + lead,
                scan: *pos + lead,
                name: None,
                mistral: body::MistralEnd::default(),
            };
            *pos += lead;
            return true;
        }
        // pythonic call list `[name(…), …]` (Llama 3.2 / 4, Olmo): held to the end
        if t.starts_with('[')
            && matches!(self.syntax, None | Some(Syntax::Pythonic | Syntax::Llama3))
        {
            match body::pythonic_prefix(t) {
                Some(true) => {
                    self.mode = Mode::HoldPythonic;
                    return true;
                }
                None if !eof => return false,
                _ => {}
            }
        }
        // harmony: a reply starting with the recipient of the role header (` to=functions.N…`)
        if self.set.harmony {
            const TO: &str = "to=";
            if t.len() < TO.len() && TO.starts_with(t) && !eof {
                return false;
            }
            if t.starts_with(TO) {
                self.emit_content_ws(&s[..lead]);
                self.mode = Mode::Header {
                    start: *pos + lead,
                    body: *pos + lead,
                    scan: *pos + lead,
                };
                return true;
            }
        }
        self.mode = Mode::Text;
        true
    }

    /// [`Parser::step`] in `Mode::Text`: Content up to the next marker (a partial one at the end is held).
    fn step_text(&mut self, src: &str, pos: &mut usize, eof: bool, out: &mut impl Sink) -> bool {
        let len = src.len();
        let s = &src[*pos..];
        if s.is_empty() {
            return false;
        }
        match self.find_marker(s, eof) {
            Ok((at, m)) => {
                self.emit_content(&s[..at], out);
                *pos += at;
                self.enter_marker(m, pos, out);
                true
            }
            Err(Some(at)) => {
                if eof {
                    self.emit_content(s, out);
                    *pos = len;
                } else {
                    self.emit_content(&s[..at], out);
                    *pos += at;
                }
                false
            }
            Err(None) => {
                self.emit_content(s, out);
                *pos = len;
                false
            }
        }
    }

    /// [`Parser::step`] in `Mode::HoldPythonic`: A reply that starts like a pythonic call list, read whole at the end of the text.
    fn step_hold_pythonic(
        &mut self,
        src: &str,
        pos: &mut usize,
        eof: bool,
        out: &mut impl Sink,
    ) -> bool {
        let len = src.len();
        if !eof {
            return false;
        }
        let s = &src[*pos..];
        let lead = s.len() - s.trim_start().len();
        let abs = self.base + *pos + lead;
        match body::pythonic_list(s.trim(), Syntax::Pythonic) {
            Ok(calls) if !calls.is_empty() => {
                let span = (abs, abs + s.trim().len());
                for c in calls {
                    self.emit_call(c, span, out);
                }
                *pos = len;
                self.mode = Mode::Text;
            }
            _ => {
                // not a call list: ordinary text
                self.bare_json_failed = true;
                self.mode = Mode::Text;
            }
        }
        true
    }

    /// [`Parser::step`] in `Mode::AfterBlock`: Right after a call block: one stray `}` or `]` is dropped (a repair).
    fn step_after_block(
        &mut self,
        src: &str,
        pos: &mut usize,
        eof: bool,
        out: &mut impl Sink,
    ) -> bool {
        let s = &src[*pos..];
        let t = s.trim_start();
        if t.is_empty() {
            if eof {
                self.mode = self.text_mode();
                return true;
            }
            return false;
        }
        let lead = s.len() - t.len();
        if t.starts_with('}') || t.starts_with(']') {
            let c = &t[..1];
            out.event(Event::Repair(Repair {
                kind: "stray_closer".into(),
                message: format!("dropped one stray `{c}` after the call block"),
                offset: self.base + *pos + lead,
            }));
            *pos += lead + 1;
        }
        self.mode = self.text_mode();
        true
    }

    fn emit_content_ws(&mut self, _ws: &str) {
        // leading whitespace before a harmony header is dropped (not content)
    }

    fn enter_marker(&mut self, m: &'static Marker, pos: &mut usize, out: &mut impl Sink) {
        let after = *pos + m.text.len();
        match m.kind {
            MarkerKind::Block { .. } => {
                self.mode = Mode::Block {
                    marker: m,
                    start: *pos,
                    body: after,
                    scan: after,
                    name: None,
                    mistral: body::MistralEnd::default(),
                };
            }
            MarkerKind::Reasoning { ends } => {
                self.saw_reasoning = true;
                self.mode = Mode::Reasoning { ends, calls: true };
            }
            MarkerKind::OrphanThinkClose => {
                if !self.saw_reasoning && self.calls == 0 {
                    self.saw_reasoning = true;
                    if self.content_len > 0 {
                        out.event(Event::ContentToReasoning {
                            bytes: self.content_len,
                        });
                    }
                    self.content_len = 0;
                    self.started = false;
                    self.mode = self.text_mode();
                } else {
                    // a second `</think>`: plain text
                    self.emit_content(m.text, out);
                    self.mode = Mode::Text;
                }
            }
            MarkerKind::Drop => {
                self.mode = if matches!(self.mode, Mode::Start) {
                    Mode::Start
                } else {
                    Mode::Text
                };
                if !matches!(self.mode, Mode::Start) {
                    self.mode = self.text_mode();
                }
            }
            MarkerKind::HarmonyHeader => {
                self.mode = Mode::Header {
                    start: *pos,
                    body: after,
                    scan: after,
                };
            }
        }
        *pos = after;
    }

    #[allow(clippy::too_many_arguments)]
    fn close_block(
        &mut self,
        marker: &'static Marker,
        body_text: &str,
        whole: &str,
        abs: usize,
        body_abs: usize,
        name: Option<&str>,
        unclosed: bool,
        out: &mut impl Sink,
    ) {
        if let Some(builtin) = name.and_then(|n| n.strip_prefix('!')) {
            // llama.cpp drops unsolicited built-in tool messages (test-chat.cpp, gpt-oss); we
            // drop them from content too, but list them
            out.event(Event::Malformed(Malformed {
                syntax: Syntax::GptOss.name().to_string(),
                message: format!("message to the built-in tool `{builtin}` (not a declared function); left out of content"),
                offset: abs,
                text: whole.to_string(),
            }));
            self.mode = Mode::AfterBlock;
            return;
        }
        // functionary v3.2: `all\n` + text is a message to the user (content)
        if marker.syntax == Some(Syntax::FunctionaryV32)
            && let Some(text) = body_text.trim_start().strip_prefix("all\n")
        {
            self.emit_content(text, out);
            self.mode = Mode::Text;
            return;
        }
        let res = self.parse_body(marker, body_text, name);
        match res {
            Ok((calls, notes)) if !calls.is_empty() => {
                for n in notes {
                    out.event(Event::Repair(Repair {
                        kind: n.kind.into(),
                        message: n.message,
                        offset: body_abs + n.offset,
                    }));
                }
                if unclosed {
                    out.event(Event::Repair(Repair {
                        kind: "missing_end_marker".into(),
                        message: "the text ended inside a call block; parsed it as if closed"
                            .into(),
                        offset: abs + whole.len(),
                    }));
                }
                let span = (abs, abs + whole.len());
                for c in calls {
                    self.emit_call(c, span, out);
                }
                self.mode = Mode::AfterBlock;
            }
            Ok(_) | Err(_) => {
                let message = match res {
                    Err(m) => m,
                    _ => "no call in the block".into(),
                };
                let message = if unclosed {
                    format!("{message} (block not closed before the end of the text)")
                } else {
                    message
                };
                out.event(Event::Malformed(Malformed {
                    syntax: marker
                        .syntax
                        .map(Syntax::name)
                        .unwrap_or("unknown")
                        .to_string(),
                    message,
                    offset: abs,
                    text: whole.to_string(),
                }));
                self.emit_content(whole, out);
                self.mode = Mode::Text;
            }
        }
    }

    fn emit_call(&mut self, c: RawCall, span: (usize, usize), out: &mut impl Sink) {
        let index = self.calls;
        self.calls += 1;
        out.call(index, c, span);
    }

    fn parse_body(&self, marker: &'static Marker, b: &str, name: Option<&str>) -> body::BodyResult {
        let tools = &*self.tools;
        match (marker.syntax, marker.text) {
            (_, "<tool_call>") => body::hermes(b, tools),
            (_, "<function=") => body::qwen_function(b, tools),
            (_, "<seed:tool_call>") => body::seed(b, tools),
            (_, "<|tool_call>") => body::gemma4(b),
            (_, "<start_function_call>") => body::function_gemma(b),
            (_, "<|python_tag|>") => body::python_tag(b, self.syntax),
            (_, "<|tool_call_start|>") => body::lfm2(b),
            (_, "<|python_start|>") => {
                body::pythonic_list(b, Syntax::Pythonic).map(|c| (c, vec![]))
            }
            (_, "[TOOL_CALLS]") => body::mistral(b),
            (_, "<｜tool▁calls▁begin｜>") => body::deepseek(b, false),
            (_, "<｜tool▁call▁begin｜>") => body::deepseek(b, true),
            (_, "<｜DSML｜function_calls>" | "<｜DSML｜tool_calls>") => body::dsml(b, tools),
            (_, "<|tool_calls_section_begin|>") => body::kimi(b, false),
            (_, "<|tool_call_begin|>") => body::kimi(b, true),
            (_, "<|open|>tools<|sep|>") => body::kimi_k3(b, tools),
            (_, "<invoke") => body::invoke(b, tools),
            (_, "]<]minimax[>[<tool_call>") => body::minimax_m3(b, tools),
            (_, "<|START_ACTION|>") => body::json_block(b, Syntax::CommandR7b),
            (_, "<|tools_prefix|>") => body::apertus(b),
            (_, "<|tool_call|>") => body::json_block(b, Syntax::Granite),
            (_, "<|message_sep|>") => body::gigachat(b, true),
            (_, "<|function_call|>") => body::gigachat(b, false),
            (_, "<TOOLCALL>") => body::json_block(b, Syntax::NemotronV2),
            (_, ">>>" | "") if marker.syntax == Some(Syntax::FunctionaryV32) => {
                body::functionary_v32(b)
            }
            (_, "<function_call>") => body::json_block(b, Syntax::FunctionCall),
            (_, "```tool_call") => body::json_block(b, Syntax::ToolCallFence),
            (Some(Syntax::GptOss), "") => body::harmony_call(b, name.unwrap_or("")),
            (Some(Syntax::MuseGlimmer), "") => body::muse(b, name.unwrap_or(""), tools),
            (_, "functools") => body::json_block(b, Syntax::FirefunctionV2),
            (_, "Action:") => body::command_r_plus(b),
            (_, "<tool_calls>") => body::tool_calls_tag(b),
            (_, "<|tool_call:begin|>") => body::solar(b),
            (_, "<tool_calls:opensource>") => body::hy3(b, tools),
            (_, "<function name=") => body::minicpm5(b, tools),
            _ => Err("unknown block".into()),
        }
    }

    /// At the end of a reply that started with `{`: a call when it is call-shaped JSON and
    /// (the syntax is llama3, the name is a declared tool, or tool_choice required a call);
    /// otherwise the text is parsed as ordinary text.
    fn decide_bare_json(&mut self, src: &str, pos: &mut usize, out: &mut impl Sink) {
        let s = &src[*pos..];
        let mut notes: Vec<Note> = Vec::new();
        let abs = self.base + *pos;
        // Llama 3.x writes parallel calls as `{…}; {…}` (vLLM llama_tool_parser.py)
        if let Ok((vals, lead, end)) = body::json_seq(s) {
            let looks_call = vals.iter().all(|v| {
                v.get("name").and_then(Value::as_str).is_some()
                    || v.get("function")
                        .and_then(|f| f.get("name"))
                        .and_then(Value::as_str)
                        .is_some()
            });
            let native = self.syntax == Some(Syntax::Llama3);
            let sx = if native {
                Syntax::Llama3
            } else {
                self.syntax.unwrap_or(Syntax::Llama3)
            };
            let calls: Result<Vec<RawCall>, String> = vals
                .into_iter()
                .map(|v| body::json_calls(v, sx, lead, &mut notes))
                .collect::<Result<Vec<_>, _>>()
                .map(|v| v.into_iter().flatten().collect());
            if looks_call
                && let Ok(calls) = calls
                && (native
                    || self.tools.required
                    || calls.iter().all(|c| self.tools.knows(&c.name)))
            {
                let rest = &s[end..];
                let t = rest.trim_start();
                let mut consumed = end;
                if t.starts_with('}') || t.starts_with(']') {
                    let off = end + (rest.len() - t.len());
                    notes.push(Note {
                        kind: "stray_closer",
                        message: format!("dropped one stray `{}` after the JSON", &t[..1]),
                        offset: off,
                    });
                    consumed = off + 1;
                }
                if !native || self.syntax.is_none() {
                    let why = if self.tools.required {
                        "tool_choice required a call"
                    } else {
                        "the name is a declared tool"
                    };
                    out.event(Event::Repair(Repair {
                        kind: "bare_json".into(),
                        message: format!("read a bare JSON object as a tool call ({why})"),
                        offset: abs + lead,
                    }));
                }
                for n in notes {
                    out.event(Event::Repair(Repair {
                        kind: n.kind.into(),
                        message: n.message,
                        offset: abs + n.offset,
                    }));
                }
                let span = (abs + lead, abs + consumed);
                for c in calls {
                    let c = RawCall {
                        syntax: if native { Syntax::Llama3 } else { c.syntax },
                        ..c
                    };
                    self.emit_call(c, span, out);
                }
                *pos += consumed;
                self.mode = Mode::Text;
                return;
            }
        }
        // not a call: read as ordinary text (markers inside still count)
        self.bare_json_failed = true;
        self.mode = Mode::Text;
    }
}

/// Earliest occurrence of any of `ends` in `s` (at one position, the first in `ends` order):
/// `Ok((pos, end))`, or `Err(Some(p))` when `s[p..]` is a proper prefix of one of them (hold
/// from `p`), `Err(None)` when neither. One pass over `s`: memchr on the ends' first bytes, then
/// a comparison at each hit.
fn find_any(s: &str, ends: &[&'static str]) -> Result<(usize, &'static str), Option<usize>> {
    let b = s.as_bytes();
    // the ends' distinct first bytes (at most 3 searched with memchr; more: a byte loop)
    let mut firsts = [0u8; 3];
    let mut n = 0;
    let mut many = false;
    for e in ends {
        let f = e.as_bytes()[0];
        if !firsts[..n].contains(&f) {
            if n == firsts.len() {
                many = true;
            } else {
                firsts[n] = f;
                n += 1;
            }
        }
    }
    let next = |from: usize| -> Option<usize> {
        let h = &b[from..];
        let p = if many {
            h.iter()
                .position(|c| ends.iter().any(|e| e.as_bytes()[0] == *c))
        } else {
            match n {
                1 => memchr::memchr(firsts[0], h),
                2 => memchr::memchr2(firsts[0], firsts[1], h),
                _ => memchr::memchr3(firsts[0], firsts[1], firsts[2], h),
            }
        };
        p.map(|p| from + p)
    };
    let mut hold: Option<usize> = None;
    let mut i = 0;
    while i < b.len() {
        let Some(at) = next(i) else { break };
        let rest = &b[at..];
        for &e in ends {
            let eb = e.as_bytes();
            if rest.starts_with(eb) {
                return Ok((at, e));
            }
            if hold.is_none() && rest.len() < eb.len() && eb.starts_with(rest) {
                hold = Some(at);
            }
        }
        i = at + 1;
    }
    Err(hold)
}
