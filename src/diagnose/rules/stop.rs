//! Stop-string rules.

use crate::diagnose::ExchangeContext;
use crate::diagnose::request;
use crate::finding::{Finding, Rule};
use crate::session::Api;

/// Openers of a reasoning block a template or prefill may leave unclosed in visible content.
const THINK_OPEN: &[(&str, &str)] = &[
    ("<think>", "</think>"),
    ("<thinking>", "</thinking>"),
    ("<|channel|>analysis<|message|>", "<|end|>"),
    ("<seed:think>", "</seed:think>"),
];

/// `stop.in_reasoning`: a requested stop string matched inside the reasoning, so the reply ends
/// before any answer (vllm#38499, sglang PR #33151; llama-server searches stop strings in the
/// whole generated text, reasoning included: tools/server/server-context.cpp, build 11434).
///
/// Fires when the request has stop strings, the reply has reasoning (a `reasoning_content` /
/// `thinking` block; or, when the server did not split reasoning, an unclosed `<think>` in
/// the content, the raw text or the assistant prefill it continued) but no answer text and no
/// tool call, was not cut by the token limit, and either the server named the stop string
/// (`stop_sequence`, `__verbose.stopping_word`), or the reasoning breaks off mid-sentence, or
/// it is empty (the reply ends right after the opener).
/// Evidence: the reasoning's pointer (or the content's) and the byte offset where it ends.
pub fn in_reasoning(cx: &ExchangeContext) -> Vec<Finding> {
    let Some(m) = &cx.message else {
        return Vec::new();
    };
    let stops = request::stop_strings(cx.request_or_null());
    if stops.is_empty() || !m.tool_calls.is_empty() {
        return Vec::new();
    }
    // An opener left unclosed: in the content (the server did not split reasoning), else in the
    // raw text or the assistant prefill the server continued (then the whole content is
    // inside the reasoning).
    let unclosed = |t: &str| {
        let t = t.trim_start();
        THINK_OPEN
            .iter()
            .find(|(o, close)| t.starts_with(o) && !t.contains(close))
            .map(|(o, _)| *o)
    };
    let prefill = crate::stream::raw::assistant_prefill(cx.request_or_null());
    let (reasoning, answer, in_content) = if !m.reasoning.trim().is_empty() {
        (m.reasoning.as_str(), m.content.as_str(), false)
    } else if let Some(o) = unclosed(&m.content) {
        (&m.content.trim_start()[o.len()..], "", true)
    } else if [cx.raw_text.as_deref(), prefill.as_deref()]
        .into_iter()
        .flatten()
        .any(|t| unclosed(t).is_some())
        && !THINK_OPEN.iter().any(|(_, c)| m.content.contains(c))
    {
        (m.content.as_str(), "", true)
    } else {
        return Vec::new();
    };
    if !answer.trim().is_empty() {
        return Vec::new();
    }
    // Nothing but the opener: a model does not end its turn right after opening its
    // reasoning; the stop string matched there.
    let empty = reasoning.trim().is_empty();
    let finish = m.finish_reason.as_deref().unwrap_or("");
    if matches!(finish, "length" | "max_tokens") {
        return Vec::new();
    }
    let named = [m.stop_sequence.as_deref(), cx.stopping_word.as_deref()]
        .into_iter()
        .flatten()
        .find(|s| stops.iter().any(|(st, _)| st == s));
    let tail = reasoning.trim_end();
    let mid_sentence = !tail.ends_with(['.', '!', '?', '…', ':', ')', '"', '\'', '>', '`', '*']);
    let stop = match named {
        Some(s) => s.to_owned(),
        None if mid_sentence || empty => stops
            .iter()
            .map(|(s, _)| format!("{s:?}"))
            .collect::<Vec<_>>()
            .join(" or "),
        None => return Vec::new(),
    };
    let stop_shown = if named.is_some() {
        format!("{stop:?}")
    } else {
        stop.clone()
    };
    let offset = if in_content {
        m.content.len()
    } else {
        reasoning.len()
    };
    let tail_start = tail
        .char_indices()
        .rev()
        .nth(39)
        .map(|(i, _)| i)
        .unwrap_or(0);
    let excerpt = format!("…{}⟨{}⟩", &tail[tail_start..], named.unwrap_or("stop"));
    let where_ = if in_content {
        "the unclosed reasoning block in content"
    } else {
        "the reasoning"
    };
    let mut ev = if in_content {
        cx.content_evidence(Some(offset), Some(excerpt))
    } else {
        cx.reasoning_evidence(Some(offset), Some(excerpt))
    };
    if ev.event.is_none() {
        ev.event = cx.finish_event;
    }
    vec![Finding::new(
        Rule::StopInReasoning,
        format!(
            "{where_} ends at byte {offset} where the stop string {stop_shown} would begin, and no answer follows (finish {})",
            if finish.is_empty() { "unknown" } else { finish }
        ),
        "the server searches stop strings in the reasoning too: choose a stop string the model will not think, or send stop strings only when reasoning is off",
    )
    .with_evidence(ev)]
}

/// `stop.reason_mismatch`: an Anthropic response names a `stop_sequence` while its
/// `stop_reason` is not `stop_sequence` (llama-server build 11434 sends `end_turn` with the
/// matched word: tools/server/server-task.cpp), or says `stop_sequence` without naming one.
/// Evidence: `/stop_reason` or the stream event that carried it.
pub fn reason_mismatch(cx: &ExchangeContext) -> Vec<Finding> {
    let Some(m) = &cx.message else {
        return Vec::new();
    };
    if cx.api != Api::Anthropic {
        return Vec::new();
    }
    let reason = m.finish_reason.as_deref().unwrap_or("null");
    let seq = m.stop_sequence.as_deref().filter(|s| !s.is_empty());
    let msg = match (seq, reason) {
        (Some(s), r) if r != "stop_sequence" => {
            format!("stop_sequence is {s:?} but stop_reason is {r:?} (expected \"stop_sequence\")")
        }
        (None, "stop_sequence") => {
            "stop_reason is \"stop_sequence\" but stop_sequence is null".to_owned()
        }
        _ => return Vec::new(),
    };
    let mut ev = cx.finish_evidence();
    ev.excerpt = Some(format!(
        "stop_reason={reason} stop_sequence={}",
        seq.unwrap_or("null")
    ));
    vec![Finding::new(Rule::StopReasonMismatch, msg, "clients that branch on stop_reason miss the stop: check stop_sequence as well, or upgrade the server")
        .with_evidence(ev)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::rules::testutil::*;
    use serde_json::json;

    fn case05() -> ExchangeContext {
        anthropic(
            json!({"max_tokens": 1024, "stop_sequences": ["prime"], "messages": [{"role": "user", "content": "Is 7 a prime number?"}]}),
            json!({"type": "message", "content": [{"type": "thinking", "thinking": "Okay, so the question is whether 7 is a ", "signature": ""}], "stop_reason": "end_turn", "stop_sequence": "prime"}),
        )
    }

    #[test]
    fn stop_in_reasoning_case05() {
        let f = in_reasoning(&case05());
        assert_eq!(ids(&f), ["stop.in_reasoning"]);
        assert_eq!(
            f[0].evidence.pointer.as_deref(),
            Some("/content/0/thinking")
        );
        assert_eq!(
            f[0].evidence.offset,
            Some("Okay, so the question is whether 7 is a ".len())
        );
        assert!(f[0].message.contains("\"prime\""));
    }

    #[test]
    fn stop_in_reasoning_openai_unclosed_think_in_content() {
        let cx = openai(
            json!({"stop": ["prime"]}),
            oa_resp(Some("<think>\nIs 7 a"), &[], "stop"),
        );
        assert_eq!(ids(&in_reasoning(&cx)), ["stop.in_reasoning"]);
    }

    /// sessions/g-stop-in-reasoning.jsonl as a user records it (no `-v`): assistant prefill
    /// `<think>\n`, `stop: ["The"]`, the server answers content `<think>\n\n` (its parser
    /// read prefill + the generated `\n`; `The` was cut), finish `stop`, no stopping word.
    #[test]
    fn stop_in_reasoning_right_after_the_prefilled_opener() {
        let req = json!({"stop": ["The"], "messages": [{"role": "user", "content": "What is the capital of France?"}, {"role": "assistant", "content": "<think>\n"}]});
        let cx = openai(req.clone(), oa_resp(Some("<think>\n\n"), &[], "stop"));
        let f = in_reasoning(&cx);
        assert_eq!(ids(&f), ["stop.in_reasoning"]);
        assert_eq!(f[0].evidence.offset, Some("<think>\n\n".len()));
        assert!(f[0].message.contains("\"The\""), "{}", f[0].message);
        // The server did not echo the prefill: the opener is in the prefill only.
        let cx = openai(req.clone(), oa_resp(Some("\n"), &[], "stop"));
        assert_eq!(ids(&in_reasoning(&cx)), ["stop.in_reasoning"]);
        // ... or in the raw text only.
        let cx = openai(json!({"stop": ["The"]}), oa_resp(Some("\n"), &[], "stop"));
        assert!(in_reasoning(&cx).is_empty());
        let cx = ExchangeContext {
            raw_text: Some("<think>\n\n".into()),
            ..cx
        };
        assert_eq!(ids(&in_reasoning(&cx)), ["stop.in_reasoning"]);
        // Closed reasoning and an answer: nothing.
        let cx = openai(req, oa_resp(Some("<think>\n</think>\nParis."), &[], "stop"));
        assert!(in_reasoning(&cx).is_empty());
        // No stop strings requested: nothing.
        let cx = openai(json!({}), oa_resp(Some("<think>\n\n"), &[], "stop"));
        assert!(in_reasoning(&cx).is_empty());
    }

    #[test]
    fn no_stop_in_reasoning_when_answer_follows_or_no_stop() {
        let mut cx = case05();
        cx.message.as_mut().unwrap().content = "yes".into();
        assert!(in_reasoning(&cx).is_empty());
        let cx = anthropic(
            json!({"max_tokens": 10}),
            json!({"type": "message", "content": [{"type": "thinking", "thinking": "7 is a "}], "stop_reason": "end_turn"}),
        );
        assert!(in_reasoning(&cx).is_empty());
        let cx = anthropic(
            json!({"stop_sequences": ["x"]}),
            json!({"type": "message", "content": [{"type": "thinking", "thinking": "7 is a "}], "stop_reason": "max_tokens"}),
        );
        assert!(in_reasoning(&cx).is_empty());
    }

    #[test]
    fn reason_mismatch_case05() {
        let f = reason_mismatch(&case05());
        assert_eq!(ids(&f), ["stop.reason_mismatch"]);
        assert_eq!(f[0].evidence.pointer.as_deref(), Some("/stop_reason"));
    }

    #[test]
    fn reason_consistent() {
        let cx = anthropic(
            json!({}),
            json!({"type": "message", "content": [{"type": "text", "text": "a"}], "stop_reason": "stop_sequence", "stop_sequence": "prime"}),
        );
        assert!(reason_mismatch(&cx).is_empty());
        let cx = anthropic(
            json!({}),
            json!({"type": "message", "content": [{"type": "text", "text": "a"}], "stop_reason": "end_turn", "stop_sequence": null}),
        );
        assert!(reason_mismatch(&cx).is_empty());
    }
}
