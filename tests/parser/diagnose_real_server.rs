//! Rules on replies really produced by llama-server build 11434 (SmolLM2-135M with the
//! Qwen3-0.6B corpus template), recorded by hand in tests/data/diagnose/real-server-replies.json.
//! Expected findings are what the replies show on inspection (noted per test).

use serde_json::Value;
use toolscope::analysis::facts::from_pair;
use toolscope::diagnose::{ExchangeContext, check_exchange};
use toolscope::session::Api;

fn data(key: &str) -> (Value, Value) {
    let p = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/diagnose/real-server-replies.json"
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
    (v[key]["request"].clone(), v[key]["response"].clone())
}

fn rules(cx: &ExchangeContext) -> Vec<&'static str> {
    let mut r: Vec<&'static str> = check_exchange(cx).iter().map(|f| f.rule.id()).collect();
    r.sort();
    r
}

/// Prefill `<think>\n`, stop "prime": the server stopped on "prime" (stopping_word) inside the
/// still-open think block and returned `<think>\n\nIs 7 a ` as content with finish "stop".
#[test]
fn openai_stop_matched_inside_open_think_block() {
    let (req, resp) = data("openai_stop_in_reasoning");
    let cx = from_pair(Api::Openai, Some(req), Some(resp));
    assert_eq!(cx.stopping_word.as_deref(), Some("prime"));
    assert_eq!(rules(&cx), ["stop.in_reasoning"]);
    let f = check_exchange(&cx).remove(0);
    assert_eq!(
        f.evidence.pointer.as_deref(),
        Some("/choices/0/message/content")
    );
    assert!(f.message.contains("\"prime\""), "{}", f.message);
}

/// The same on /v1/messages: content text `<think>\n\nIs 7 a `, `stop_reason: end_turn` with
/// `stop_sequence: "prime"`.
#[test]
fn anthropic_stop_matched_inside_open_think_block() {
    let (req, resp) = data("anthropic_stop_in_reasoning");
    let cx = from_pair(Api::Anthropic, Some(req), Some(resp));
    assert_eq!(rules(&cx), ["stop.in_reasoning", "stop.reason_mismatch"]);
}

/// One-round few-shot history: the model answered with a `<tool_response>` block it invented,
/// holding what should have been the call (`{"name": "get_weather", "arguments": …}`), instead
/// of calling get_weather: an invented result, and a call left in content as text.
#[test]
fn openai_invented_tool_response() {
    let (req, resp) = data("openai_invented_tool_response");
    let cx = from_pair(Api::Openai, Some(req), Some(resp));
    assert_eq!(
        rules(&cx),
        ["tool_call.hallucinated_result", "tool_call.leaked_as_text"]
    );
}
