//! `parser.chunking_divergence` over an exchange's replay text (the raw output when recorded,
//! else the streamed or returned content: [`ExchangeContext::replay_text`]): toolscope's
//! streaming parser fed the text cut as the stream delivered it (and re-cut per token piece,
//! per character, every 2 and every 8 chunks) must release what a one-shot parse of the whole
//! text releases. The traces are computed once ([`traces_with`]) and kept for the inspector's
//! Replay pane, so a finding's step is the pane's step in the same chunking.
//! The machinery is [`crate::parser::trace`] (its public API only: [`recut`], [`Trace`],
//! [`first_divergence`]); this rule adds what a recorded exchange knows: the SSE event each
//! step came from, the syntax from the template, the request's tools.

use std::sync::Arc;

use crate::diagnose::ExchangeContext;
use crate::finding::{Chunking, Evidence, Finding, Pane, Rule};
use crate::parser::trace::{Cut, Trace, cut as cut_text, first_divergence, recut};
use crate::parser::{ParserOptions, Syntax, ToolIndex};

/// Records a parse of `chunks` (one step per chunk, then `finish()`). The rule's seam: the real
/// one is [`real_parser`]; tests inject a faulty parser to see the rule report it.
pub type Recorder = dyn Fn(&[String], Option<Syntax>, &Arc<ToolIndex>) -> Trace;

/// toolscope's streaming parser ([`Trace::record_index`], default options).
pub fn real_parser(chunks: &[String], syntax: Option<Syntax>, tools: &Arc<ToolIndex>) -> Trace {
    Trace::record_index(
        chunks.iter().map(String::as_str),
        syntax,
        tools.clone(),
        ParserOptions::default(),
    )
}

/// [`real_parser`] without the per-step events ([`Trace::record_lean`]): the same findings,
/// for callers that drop the traces after judging them (`check`, the inspector's list counts).
pub fn lean_parser(chunks: &[String], syntax: Option<Syntax>, tools: &Arc<ToolIndex>) -> Trace {
    Trace::record_lean(
        chunks.iter().map(String::as_str),
        syntax,
        tools.clone(),
        ParserOptions::default(),
    )
}

/// `parser.chunking_divergence` for an exchange ([`chunking_divergence_with`] and the real
/// parser).
pub fn chunking_divergence(cx: &ExchangeContext) -> Vec<Finding> {
    chunking_divergence_with(cx, &real_parser)
}

/// Texts longer than this many characters keep no per-character trace in [`ReplayTraces`]
/// (the rule still judges it; the Replay pane then says the text is too long to step per
/// character). Bounds the memory an inspector keeps per analysed exchange.
pub const MAX_KEPT_PER_CHAR: usize = 64 * 1024;

/// One chunking of the replayed text: its chunk end offsets (bytes into the text) and
/// toolscope's parser trace over those chunks (one step per chunk, then `finish()`).
#[derive(Debug, Clone)]
pub struct ReplayCut {
    /// End offset of each chunk, ascending; the last is the text's length.
    pub bounds: Vec<usize>,
    /// `None` when the trace was not kept (per character over [`MAX_KEPT_PER_CHAR`]).
    pub trace: Option<Arc<Trace>>,
}

/// toolscope's parser over the exchange's replay text ([`ExchangeContext::replay_text`]) in
/// every chunking of [`Chunking::ALL`]: what `parser.chunking_divergence` judges and the Replay
/// pane steps through, computed once.
#[derive(Debug, Clone, Default)]
pub struct ReplayTraces {
    /// The text, its source and its recorded chunks.
    pub replay: super::super::ReplayText,
    /// Syntax the parser used: the template's markers, else the text's.
    pub syntax: Option<Syntax>,
    /// Per chunking, in [`Chunking::ALL`] order; `None` where it does not apply (no token
    /// pieces listed).
    pub cuts: Vec<Option<ReplayCut>>,
}

impl ReplayTraces {
    /// The cut of chunking `c`, when it applies.
    pub fn cut(&self, c: Chunking) -> Option<&ReplayCut> {
        self.cuts.get(c.index()).and_then(Option::as_ref)
    }
}

/// The request's tools as the parser's index.
fn tool_index(cx: &ExchangeContext) -> Arc<ToolIndex> {
    Arc::new(ToolIndex::from_value(
        cx.request
            .as_ref()
            .and_then(|r| r.get("tools"))
            .filter(|t| !t.is_null()),
    ))
}

/// End offsets of `chunks` laid end to end.
fn bounds_of(chunks: &[String]) -> Vec<usize> {
    let mut at = 0;
    chunks
        .iter()
        .map(|c| {
            at += c.len();
            at
        })
        .collect()
}

/// Parses the exchange's replay text ([`ExchangeContext::replay_text`]) with `record` in every
/// chunking of [`Chunking::ALL`]. `None` when there is no text to replay. Syntax: the
/// template's markers, else the text's; tools: the request's `tools`.
pub fn traces_with(cx: &ExchangeContext, record: &Recorder) -> Option<ReplayTraces> {
    let replay = cx.replay_text();
    if replay.text.is_empty() {
        return None;
    }
    let syntax = cx
        .template
        .as_deref()
        .and_then(Syntax::detect_from_template)
        .or_else(|| Syntax::detect_from_text(&replay.text));
    let tools = tool_index(cx);
    let chunks = replay.chunks();
    let whole = Arc::new(record(std::slice::from_ref(&replay.text), syntax, &tools));
    let same_as_whole = |re: &[String]| re.len() <= 1;
    let cuts = Chunking::ALL
        .iter()
        .map(|&c| {
            let cut = match c {
                Chunking::Whole => {
                    return Some(ReplayCut {
                        bounds: vec![replay.text.len()],
                        trace: Some(whole.clone()),
                    });
                }
                Chunking::Recorded => Cut::Recorded,
                Chunking::PerPiece => Cut::Pieces(replay.pieces.clone()?),
                Chunking::PerChar => Cut::PerChar,
                Chunking::Every2 => Cut::EveryN(2),
                Chunking::Every8 => Cut::EveryN(8),
            };
            let re = recut(&chunks, &cut);
            let bounds = bounds_of(&re);
            let trace = if same_as_whole(&re) {
                Some(whole.clone())
            } else if c == Chunking::PerChar && re.len() > MAX_KEPT_PER_CHAR {
                None
            } else {
                Some(Arc::new(record(&re, syntax, &tools)))
            };
            Some(ReplayCut { bounds, trace })
        })
        .collect();
    Some(ReplayTraces {
        replay,
        syntax,
        cuts,
    })
}

/// `parser.chunking_divergence` over computed traces: each chunking whose parse diverges from
/// the one-shot parse ([`first_divergence`]: content, reasoning, calls, repairs and malformed
/// blocks released so far must be a prefix of the one-shot result, and equal at the end) gives
/// one finding naming the chunking and its first differing step; for the recorded chunking also
/// the SSE event. A chunking that is one chunk (or the same chunks as the recorded one) is
/// skipped. A per-character trace that was not kept is recomputed here with `record`.
/// Evidence: pane replay, `chunking`, `step`, `offset` (byte offset of the step's chunk in the
/// text), `event` (recorded chunking), excerpt of the chunk.
pub fn divergences(cx: &ExchangeContext, traces: &ReplayTraces, record: &Recorder) -> Vec<Finding> {
    let Some(whole) = traces.cut(Chunking::Whole).and_then(|c| c.trace.clone()) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for &c in &Chunking::ALL {
        let Some(cut) = traces.cut(c) else { continue };
        if c == Chunking::Whole || cut.bounds.len() <= 1 {
            continue;
        }
        let tr = match &cut.trace {
            Some(t) => t.clone(),
            None => {
                let chunks = recut(&traces.replay.chunks(), &Cut::PerChar);
                Arc::new(record(&chunks, traces.syntax, &tool_index(cx)))
            }
        };
        let Some((step, why)) = first_divergence(&whole, &tr) else {
            continue;
        };
        let view = tr.state_at(step);
        let offset = tr.steps().get(step).map(|s| s.input.0);
        let event = match c {
            Chunking::Recorded => traces.replay.recorded.get(step).and_then(|r| r.1),
            _ => None,
        };
        let chunk = if view.chunk.is_empty() && step + 1 == tr.len() {
            "(end of stream)".to_owned()
        } else {
            cut_text(view.chunk, 60)
        };
        out.push(finding(
            traces.replay.what,
            describe(c),
            step,
            event,
            offset,
            chunk,
            &why,
            Some(c),
        ));
    }
    out
}

/// The one `parser.chunking_divergence` finding: parsing `what` (`the model's raw output`,
/// `text`, …) cut `how` diverges at `step` (of the SSE `event`, for the recorded chunking),
/// whose chunk (`excerpt`) starts at byte `offset`: `why`. Evidence: pane replay, `chunking`,
/// `step`, `event`, `offset`, excerpt.
#[allow(clippy::too_many_arguments)]
fn finding(
    what: &str,
    how: &str,
    step: usize,
    event: Option<usize>,
    offset: Option<usize>,
    excerpt: String,
    why: &str,
    chunking: Option<Chunking>,
) -> Finding {
    let at_event = event
        .map(|e| format!(", SSE event {e}"))
        .unwrap_or_default();
    Finding::new(
        Rule::ParserChunkingDivergence,
        format!(
            "parsing the {what} {how} diverges from the one-shot parse at step {step}{at_event} (chunk {excerpt:?}): {why}"
        ),
        "a streaming parser must hold a possible marker start until it can decide; open this step in the replay pane",
    )
    .with_evidence(Evidence {
        pane: Some(Pane::Replay),
        chunking,
        step: Some(step),
        event,
        offset,
        excerpt: Some(excerpt),
        ..Default::default()
    })
}

/// `parser.chunking_divergence` for a text re-cut as `cut` (`toolscope parse`'s re-cut
/// checks, [`crate::parser::trace::check_chunkings`]): where `d` says the re-cut parse leaves
/// the one-shot parse.
pub fn cut_divergence(
    cut: &crate::parser::trace::Cut,
    d: &crate::parser::trace::Divergence,
) -> Finding {
    finding(
        "text",
        &cut.describe(),
        d.step,
        None,
        Some(d.offset),
        cut_text(&d.chunk, 60),
        &d.why,
        None,
    )
}

/// The rule's words for a chunking (as [`crate::parser::trace::Cut::describe`]).
fn describe(c: Chunking) -> &'static str {
    match c {
        Chunking::Recorded => "per recorded chunk",
        Chunking::PerPiece => "per token piece",
        Chunking::PerChar => "per character",
        Chunking::Every2 => "every 2 chunks",
        Chunking::Every8 => "every 8 chunks",
        Chunking::Whole => "as one chunk",
    }
}

/// [`chunking_divergence`] with the streaming parser given by `record` (see [`divergences`]).
pub fn chunking_divergence_with(cx: &ExchangeContext, record: &Recorder) -> Vec<Finding> {
    match traces_with(cx, record) {
        Some(t) => divergences(cx, &t, record),
        None => Vec::new(),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::diagnose::StreamChunk;
    use crate::session::Api;

    fn streamed(chunks: &[&str]) -> ExchangeContext {
        ExchangeContext {
            stream_chunks: chunks
                .iter()
                .enumerate()
                .map(|(i, t)| StreamChunk {
                    event: i + 1,
                    text: (*t).to_owned(),
                })
                .collect(),
            request: Some(
                serde_json::json!({"tools": [{"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}}}}]}),
            ),
            ..ExchangeContext::new(Api::Openai)
        }
    }

    /// The Hermes marker split across three SSE chunks, as a model on a vocabulary without a
    /// `<tool_call>` token streams it.
    const SPLIT: &[&str] = &[
        "Let me check. <to",
        "ol_c",
        "all>{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}}</tool_call>",
    ];

    /// A naive streaming parser: releases whatever a chunk ends with at once instead of holding
    /// a possible marker start, so a marker split across chunks is never seen whole (here: the
    /// trailing `<…` of a chunk is lost as if printed as content and never re-joined).
    pub(crate) fn naive_parser(
        chunks: &[String],
        syntax: Option<Syntax>,
        tools: &Arc<ToolIndex>,
    ) -> Trace {
        let cut: Vec<String> = chunks
            .iter()
            .enumerate()
            .map(|(i, c)| match c.rfind('<') {
                Some(at) if i + 1 < chunks.len() && !c[at..].contains('>') => c[..at].to_owned(),
                _ => c.clone(),
            })
            .collect();
        real_parser(&cut, syntax, tools)
    }

    /// `toolscope parse`'s re-cut check: the parser reports where (a typed fact), this rule
    /// words the finding — hand-checked message and evidence.
    #[test]
    fn cut_divergence_words_the_parsers_fact() {
        let d = crate::parser::trace::Divergence {
            step: 3,
            offset: 7,
            chunk: "<to".into(),
            why: "a tool call differs from the one-shot parse".into(),
        };
        let f = cut_divergence(&Cut::EveryN(2), &d);
        assert_eq!(f.rule, Rule::ParserChunkingDivergence);
        assert_eq!(
            f.message,
            "parsing the text every 2 chunks diverges from the one-shot parse at step 3 (chunk \"<to\"): a tool call differs from the one-shot parse"
        );
        assert_eq!(
            (f.evidence.pane, f.evidence.step, f.evidence.offset),
            (Some(Pane::Replay), Some(3), Some(7))
        );
        assert_eq!(f.evidence.excerpt.as_deref(), Some("<to"));
    }

    #[test]
    fn split_marker_parses_the_same_in_every_cut() {
        // toolscope's parser holds `<to` until it can decide: no divergence in any cut.
        let cx = streamed(SPLIT);
        assert!(
            chunking_divergence(&cx).is_empty(),
            "{:?}",
            chunking_divergence(&cx)
        );
        // …and it does find the call (so "no divergence" is not "nothing parsed").
        let one = real_parser(
            &[SPLIT.concat()],
            None,
            &Arc::new(ToolIndex::from_value(None)),
        );
        assert_eq!(one.state_at(1).tool_calls.len(), 1);
    }

    #[test]
    fn a_parser_that_drops_a_split_marker_is_reported_at_its_step() {
        let cx = streamed(SPLIT);
        let f = chunking_divergence_with(&cx, &naive_parser);
        // The recorded cut diverges at step 1 (SSE event 2): the naive parser released `<to`'s
        // chunk without it, so "ol_c" comes out as content the one-shot parse never has.
        let rec = f
            .iter()
            .find(|f| f.message.contains("per recorded chunk"))
            .expect("recorded cut");
        assert_eq!(rec.rule, Rule::ParserChunkingDivergence);
        assert_eq!(
            (rec.evidence.step, rec.evidence.event),
            (Some(1), Some(2)),
            "{rec:?}"
        );
        // byte offset of step 1's chunk in what the naive parser was fed: "Let me check. "
        assert_eq!(rec.evidence.offset, Some("Let me check. ".len()));
        assert!(
            rec.message.contains("SSE event 2") && rec.message.contains("\"ol_c\""),
            "{}",
            rec.message
        );
        // Per character, the lone `<` is dropped and the `t` after it (step 15) is released as
        // content; per-char steps have no SSE event.
        let pc = f
            .iter()
            .find(|f| f.message.contains("per character"))
            .expect("per-char cut");
        assert_eq!(
            (pc.evidence.step, pc.evidence.event),
            (Some(15), None),
            "{pc:?}"
        );
        // Every 2 chunks: `<tool_c` is the dropped tail of the first joined chunk.
        assert!(
            f.iter().any(|f| f.message.contains("every 2 chunks")),
            "{f:?}"
        );
        // One chunk holds it all: no finding for "every 8 chunks" (skipped: ≥ chunk count).
        assert!(!f.iter().any(|f| f.message.contains("every 8")));
    }

    #[test]
    fn no_stream_no_finding() {
        let cx = ExchangeContext::new(Api::Openai);
        assert!(chunking_divergence_with(&cx, &naive_parser).is_empty());
    }
}
