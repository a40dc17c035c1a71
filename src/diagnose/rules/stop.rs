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
/// `thinking` block, or an unclosed `<think>` in content) but no answer text and no tool call,
/// was not cut by the token limit, and either the server named the stop string
/// (`stop_sequence`, `__verbose.stopping_word`) or the reasoning breaks off mid-sentence.
/// Evidence: the reasoning's pointer and the byte offset where it ends.
pub fn in_reasoning(cx: &ExchangeContext) -> Vec<Finding> {
    let Some(m) = &cx.message else {
        return Vec::new();
    };
    let stops = request::stop_strings(cx.request_or_null());
    if stops.is_empty() || !m.tool_calls.is_empty() {
        return Vec::new();
    }
    let (reasoning, answer, in_content) = if !m.reasoning.trim().is_empty() {
        (m.reasoning.as_str(), m.content.as_str(), false)
    } else {
        let c = m.content.trim_start();
        match THINK_OPEN
            .iter()
            .find(|(o, close)| c.starts_with(o) && !c.contains(close))
        {
            Some((o, _)) => (&c[o.len()..], "", true),
            None => return Vec::new(),
        }
    };
    if reasoning.trim().is_empty() || !answer.trim().is_empty() {
        return Vec::new();
    }
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
        None if mid_sentence => stops
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
    let offset = reasoning.len();
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
