//! `finish_reason` / `stop_reason` consistency with the calls delivered.

use serde_json::Value;

use crate::diagnose::ExchangeContext;
use crate::diagnose::request::{self, ToolChoice};
use crate::finding::{Finding, Rule};
use crate::session::Api;

/// `finish.mismatch` (vllm#53255, vllm#53269, ollama#17274): the finish reason disagrees with
/// the calls — `tool_calls`/`tool_use` without any call; calls delivered with
/// `stop`/`end_turn` (except OpenAI's documented `stop` when `tool_choice` named a function);
/// or a reply cut by the token limit (usage reaches `max_tokens`, or arguments end mid-JSON)
/// reported as `tool_calls`/`tool_use`. Evidence: the finish reason's pointer or SSE event.
pub fn mismatch(cx: &ExchangeContext) -> Vec<Finding> {
    let Some(m) = &cx.message else {
        return Vec::new();
    };
    let Some(finish) = m.finish_reason.as_deref() else {
        return Vec::new();
    };
    let n = m.tool_calls.len();
    let says_calls = matches!(finish, "tool_calls" | "tool_use" | "function_call");
    let says_stop = matches!(finish, "stop" | "end_turn" | "eos");
    let named = matches!(
        ToolChoice::from_request(cx.api, cx.request_or_null()),
        ToolChoice::Named(_)
    );
    // Ollama's native API says `done_reason: "stop"` for a reply of tool calls (docs/api.md
    // "Chat request (Streaming with tools)"): only an empty reply is a contract fault there.
    if cx.api == Api::Ollama {
        return ollama_empty(cx, m, finish);
    }
    // The Responses API has no finish reason: `status` says whether the response is whole.
    if cx.api == Api::Responses {
        return responses_cut(cx, m, finish);
    }
    let msg = if says_calls && n == 0 {
        format!("finish reason is {finish:?} but the reply has no tool calls")
    } else if says_stop && n > 0 && !(cx.api == Api::Openai && named && finish == "stop") {
        let want = if cx.api == Api::Anthropic {
            "tool_use"
        } else {
            "tool_calls"
        };
        format!(
            "the reply has {n} tool call(s) but finish reason is {finish:?} (expected {want:?}); clients that branch on it never run the call"
        )
    } else if says_calls && truncated(cx, m) {
        format!(
            "the reply was cut by the token limit but finish reason is {finish:?} (expected \"length\"/\"max_tokens\"); the call is incomplete"
        )
    } else {
        return Vec::new();
    };
    let mut ev = cx.finish_evidence();
    ev.excerpt = Some(finish.to_owned());
    vec![Finding::new(Rule::FinishMismatch, msg, "trust the tool_calls array over finish_reason, and report the server bug; raise max_tokens when replies are cut").with_evidence(ev)]
}

/// Ollama native `/api/chat`: `done_reason: "stop"` with no content and no tool calls — the
/// client gets an empty assistant turn (Ollama's tool parser holds back text that starts like a
/// call and drops it when the call never completes). Evidence: the done line.
fn ollama_empty(
    cx: &ExchangeContext,
    m: &crate::stream::AssistantMessage,
    finish: &str,
) -> Vec<Finding> {
    if finish != "stop" || !m.tool_calls.is_empty() || !m.content.trim().is_empty() {
        return Vec::new();
    }
    let thought = if m.reasoning.is_empty() {
        String::new()
    } else {
        format!(" (after {} bytes of thinking)", m.reasoning.len())
    };
    let mut ev = cx.finish_evidence();
    ev.pointer = (!cx.streamed).then(|| "/done_reason".to_owned());
    ev.excerpt = Some(finish.to_owned());
    vec![Finding::new(
        Rule::FinishMismatch,
        format!("done_reason is \"stop\" but the reply has no content and no tool calls{thought}"),
        "regenerate with \"raw\": true on /api/generate to see what the model wrote; a call the server's parser started and dropped leaves nothing behind",
    )
    .with_evidence(ev)]
}

/// Responses API: `status: "completed"` on a response the output token limit cut — usage
/// reached `max_output_tokens`, or a call's arguments end mid-JSON. The API's contract is
/// `status: "incomplete"` with `incomplete_details.reason: "max_output_tokens"` (openai SDK
/// `types/responses/response.py`); llama-server b11434 writes `"completed"` on every response
/// (tools/server/server-task.cpp:581-588 non-streamed, :689-696 the `response.completed`
/// event). Evidence: `/status` or the terminal event.
fn responses_cut(
    cx: &ExchangeContext,
    m: &crate::stream::AssistantMessage,
    status: &str,
) -> Vec<Finding> {
    if status != "completed" || !truncated(cx, m) {
        return Vec::new();
    }
    let used = output_tokens(m);
    let limit = request::max_tokens(cx.request_or_null());
    let mut why = match (used, limit) {
        (Some(u), Some(l)) if u >= l => {
            format!("usage.output_tokens {u} reached max_output_tokens {l}")
        }
        _ => "a call's arguments end mid-JSON".to_owned(),
    };
    if let Some(c) = m
        .tool_calls
        .iter()
        .find(|c| matches!(c.arguments_json(), Err(e) if e.is_eof()))
    {
        why.push_str(&format!("; the arguments of {} end mid-JSON", c.name));
    }
    let empty = m.content.is_empty() && m.reasoning.is_empty() && m.tool_calls.is_empty();
    let lost = match (empty, used) {
        (true, Some(u)) => {
            format!("; its output is empty: the {u} generated token(s) reached the client nowhere")
        }
        (true, None) => "; its output is empty".to_owned(),
        _ => String::new(),
    };
    let mut ev = cx.finish_evidence();
    ev.excerpt = Some(status.to_owned());
    vec![Finding::new(
        Rule::FinishMismatch,
        format!(
            "the response was cut by the output token limit ({why}) but reports status \"completed\" (expected \"incomplete\" with incomplete_details.reason \"max_output_tokens\"){lost}"
        ),
        "llama-server (b11434, tools/server/server-task.cpp:689-696) reports every Responses reply as completed: compare usage.output_tokens with max_output_tokens in the client, and raise max_output_tokens so the call fits",
    )
    .with_evidence(ev)]
}

fn output_tokens(m: &crate::stream::AssistantMessage) -> Option<u64> {
    m.usage
        .as_ref()
        .and_then(|u| {
            u.get("completion_tokens")
                .or_else(|| u.get("output_tokens"))
        })
        .and_then(Value::as_u64)
}

pub(crate) fn truncated(cx: &ExchangeContext, m: &crate::stream::AssistantMessage) -> bool {
    let cut_args = m
        .tool_calls
        .iter()
        .any(|c| matches!(c.arguments_json(), Err(e) if e.is_eof()));
    let used = output_tokens(m);
    let limit = request::max_tokens(cx.request_or_null());
    cut_args || matches!((used, limit), (Some(u), Some(l)) if u >= l)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::rules::testutil::*;
    use serde_json::json;

    #[test]
    fn tool_calls_without_calls() {
        let f = mismatch(&openai(json!({}), oa_resp(Some("hi"), &[], "tool_calls")));
        assert_eq!(ids(&f), ["finish.mismatch"]);
        assert_eq!(
            f[0].evidence.pointer.as_deref(),
            Some("/choices/0/finish_reason")
        );
    }

    #[test]
    fn calls_with_stop() {
        let f = mismatch(&openai(
            json!({"tools": two_tools()}),
            oa_resp(None, &[("get_time", "{}")], "stop"),
        ));
        assert_eq!(ids(&f), ["finish.mismatch"]);
        let named = json!({"tools": two_tools(), "tool_choice": {"type": "function", "function": {"name": "get_time"}}});
        assert!(mismatch(&openai(named, oa_resp(None, &[("get_time", "{}")], "stop"))).is_empty());
        let a = anthropic(
            json!({}),
            json!({"type": "message", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}], "stop_reason": "end_turn"}),
        );
        assert_eq!(ids(&mismatch(&a)), ["finish.mismatch"]);
    }

    #[test]
    fn ollama_stop_with_calls_is_the_contract_and_empty_is_not() {
        let ctx = |body: serde_json::Value| ExchangeContext {
            request: Some(json!({"tools": two_tools()})),
            message: crate::stream::ollama::from_ollama_json(
                &body,
                crate::stream::ollama::OllamaEndpoint::Chat,
            ),
            ..ExchangeContext::new(Api::Ollama)
        };
        // docs/api.md "Chat request (No streaming, with tools)": calls with done_reason stop.
        let calls = json!({"message": {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "get_time", "arguments": {"city": "Paris"}}}]}, "done": true, "done_reason": "stop"});
        assert!(mismatch(&ctx(calls)).is_empty());
        let empty = json!({"message": {"role": "assistant", "content": ""}, "done": true, "done_reason": "stop"});
        let f = mismatch(&ctx(empty));
        assert_eq!(ids(&f), ["finish.mismatch"]);
        assert_eq!(f[0].evidence.pointer.as_deref(), Some("/done_reason"));
    }

    #[test]
    fn truncation_reported_as_tool_calls() {
        let f = mismatch(&openai(
            json!({}),
            oa_resp(None, &[("get_time", "{\"city\": \"Li")], "tool_calls"),
        ));
        assert_eq!(ids(&f), ["finish.mismatch"]);
        let mut r = oa_resp(None, &[("get_time", "{}")], "tool_calls");
        r["usage"] = json!({"completion_tokens": 16});
        assert_eq!(
            ids(&mismatch(&openai(json!({"max_tokens": 16}), r.clone()))),
            ["finish.mismatch"]
        );
        assert!(mismatch(&openai(json!({"max_tokens": 17}), r)).is_empty());
    }
}
