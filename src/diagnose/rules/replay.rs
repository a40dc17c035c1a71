//! `parser.chunking_divergence` over a recorded stream: toolscope's streaming parser fed the
//! generated text cut as the stream delivered it (and re-cut per token piece, per character,
//! every 2 and every 8 chunks) must release what a one-shot parse of the whole text releases.
//! The machinery is [`crate::parser::trace`] (its public API only: [`recut`], [`Trace`],
//! [`first_divergence`]); this rule adds what a recorded exchange knows: the SSE event each
//! step came from, the syntax from the template, the request's tools.

use std::sync::Arc;

use crate::diagnose::ExchangeContext;
use crate::finding::{Evidence, Finding, Pane, Rule};
use crate::parser::trace::{Cut, Trace, cut, first_divergence, recut};
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

/// `parser.chunking_divergence` for a streamed exchange ([`chunking_divergence_with`] and the
/// real parser).
pub fn chunking_divergence(cx: &ExchangeContext) -> Vec<Finding> {
    chunking_divergence_with(cx, &real_parser)
}

/// For an exchange with a stream (`cx.stream_chunks`): parses the text per recorded SSE chunk,
/// per token piece (when `cx.stream_pieces` is set), per character, every 2 and every 8 chunks,
/// with `record`, and compares each with a one-shot parse of the whole text by `record`
/// (content, reasoning, calls, repairs and malformed blocks released so far must be a prefix of
/// the one-shot result, and equal at the end: [`first_divergence`]). One finding per cut that
/// diverges, naming the cut and its first differing step; for the recorded cut also the SSE
/// event. Syntax: the template's markers, else the text's; tools: the request's `tools`.
/// Evidence: pane replay, `step`, `offset` (byte offset of the step's chunk in the text),
/// `event` (recorded cut), excerpt of the chunk.
pub fn chunking_divergence_with(cx: &ExchangeContext, record: &Recorder) -> Vec<Finding> {
    if cx.stream_chunks.is_empty() {
        return Vec::new();
    }
    let chunks: Vec<String> = cx.stream_chunks.iter().map(|c| c.text.clone()).collect();
    let text = chunks.concat();
    let syntax = cx
        .template
        .as_deref()
        .and_then(Syntax::detect_from_template)
        .or_else(|| Syntax::detect_from_text(&text));
    let tools = Arc::new(ToolIndex::from_value(
        cx.request
            .as_ref()
            .and_then(|r| r.get("tools"))
            .filter(|t| !t.is_null()),
    ));
    let one = record(std::slice::from_ref(&text), syntax, &tools);
    let mut cuts = vec![Cut::Recorded];
    if let Some(p) = &cx.stream_pieces {
        cuts.push(Cut::Pieces(p.clone()));
    }
    cuts.extend([Cut::PerChar, Cut::EveryN(2), Cut::EveryN(8)]);
    let mut out = Vec::new();
    for c in cuts {
        if matches!(c, Cut::EveryN(n) if n >= chunks.len()) {
            continue; // the same as one chunk: nothing to compare
        }
        let re = recut(&chunks, &c);
        let tr = record(&re, syntax, &tools);
        let Some((step, why)) = first_divergence(&one, &tr) else {
            continue;
        };
        let view = tr.state_at(step);
        let offset = tr.steps().get(step).map(|s| s.input.0);
        let event = match c {
            Cut::Recorded => cx.stream_chunks.get(step).map(|c| c.event),
            _ => None,
        };
        let chunk = if view.chunk.is_empty() && step + 1 == tr.len() {
            "(end of stream)".to_owned()
        } else {
            cut(view.chunk, 60)
        };
        let at_event = event
            .map(|e| format!(", SSE event {e}"))
            .unwrap_or_default();
        out.push(
            Finding::new(
                Rule::ParserChunkingDivergence,
                format!(
                    "parsing the streamed text {} diverges from the one-shot parse at step {step}{at_event} (chunk {chunk:?}): {why}",
                    c.describe()
                ),
                "a streaming parser must hold a possible marker start until it can decide; open this step in the replay pane",
            )
            .with_evidence(Evidence {
                pane: Some(Pane::Replay),
                step: Some(step),
                event,
                offset,
                excerpt: Some(chunk),
                ..Default::default()
            }),
        );
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::diagnose::StreamChunk;
    use crate::session::Api;

    fn streamed(chunks: &[&str]) -> ExchangeContext {
        let mut cx = ExchangeContext::new(Api::Openai);
        cx.stream_chunks = chunks
            .iter()
            .enumerate()
            .map(|(i, t)| StreamChunk {
                event: i + 1,
                text: (*t).to_owned(),
            })
            .collect();
        cx.request = Some(
            serde_json::json!({"tools": [{"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}}}}]}),
        );
        cx
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
