//! Rules of the OpenAI Responses API's request side: what llama-server's conversion of the
//! request to a chat request ([`crate::template::responses::responses_to_chat`], a port of
//! tools/server/server-chat.cpp `server_chat_convert_responses_to_chatcmpl`, build 11434)
//! leaves out, so the model never sees it.

use crate::diagnose::ExchangeContext;
use crate::finding::{Evidence, Finding, Pane, Rule};
use crate::session::Api;
use crate::session::ServerKind;
use crate::template::responses::{ConvertErrorKind, DroppedKind, responses_to_chat};

/// The Responses request llama-server's conversion reads, when these rules apply: a Responses
/// exchange whose engine is llama-server or unknown (a bare pair), with a JSON request.
fn converted_by_llama_server(cx: &ExchangeContext) -> Option<&serde_json::Value> {
    let other_engine = cx
        .engine
        .as_ref()
        .is_some_and(|e| !matches!(e, ServerKind::LlamaServer) && !e.is_unknown());
    (cx.api == Api::Responses && !other_engine)
        .then_some(())
        .and(cx.request.as_ref())
}

/// `input.tool_dropped`: one finding per tool (or request part) of a Responses request that
/// llama-server's conversion drops without an error — a tool whose `type` is not `function`
/// (`custom` such as Codex's `apply_patch`, `namespace` for MCP, `web_search`, …), reasoning
/// text past `content[0]` or overwritten by a later reasoning item, and `text.format`.
/// Evidence: pane Tools (for a tool, with its name) or Findings, the JSON Pointer into the
/// request. Applies when the engine is llama-server or unknown (a bare pair); not when the
/// request is one the server refuses (the conversion's error is the answer then).
pub fn tool_dropped(cx: &ExchangeContext) -> Vec<Finding> {
    let Some(req) = converted_by_llama_server(cx) else {
        return Vec::new();
    };
    let Ok(conv) = responses_to_chat(req) else {
        return Vec::new();
    };
    conv.dropped
        .iter()
        .map(|d| {
            let (pane, tool, hint) = match &d.what {
                DroppedKind::Tool { tool_type, name } => (
                    Pane::Tools,
                    name.clone(),
                    match tool_type.as_str() {
                        "custom" => "llama-server converts only function tools: declare the tool as {\"type\":\"function\"} with a JSON Schema (for Codex's apply_patch, a function tool taking the patch text as a string), or serve the agent from an engine that supports custom tools",
                        "namespace" | "mcp" => "llama-server converts only function tools: flatten the namespace's or MCP server's tools into top-level function tools",
                        _ => "llama-server converts only function tools: remove the built-in tool from the request (its calls can never come), or implement it as a function tool",
                    },
                ),
                DroppedKind::ReasoningParts { .. } | DroppedKind::ReasoningOverwritten { .. } => (
                    Pane::Findings,
                    None,
                    "send one reasoning item per assistant turn with its whole text in content[0]",
                ),
                DroppedKind::TextFormat { .. } => (
                    Pane::Findings,
                    None,
                    "llama-server reads structured output only from the chat API's response_format: send the request to /v1/chat/completions with response_format, or validate the output in the client",
                ),
            };
            Finding::new(Rule::InputToolDropped, d.describe(), hint).with_evidence(Evidence {
                pane: Some(pane),
                tool,
                pointer: Some(d.pointer.clone()),
                ..Default::default()
            })
        })
        .collect()
}

/// `input.request_refused`: a Responses request llama-server's conversion refuses
/// ([`responses_to_chat`]'s error, one of the `throw std::invalid_argument` of
/// tools/server/server-chat.cpp, build 11434): the server answers HTTP 400
/// `invalid_request_error` before a prompt is rendered, so no model ever runs. The message
/// names the offending part (JSON Pointer), the server's own words and the source line, and
/// says whether the recorded response is that refusal. Codex CLI under a model it has metadata
/// for sends its tools as an `additional_tools` input item, which the conversion does not know
/// (`Cannot determine type of 'item'`, :257). Applies when the engine is llama-server or unknown
/// (a bare pair). Evidence: pane Findings (pane Tools for an `additional_tools` item), the
/// pointer.
pub fn request_refused(cx: &ExchangeContext) -> Vec<Finding> {
    let Some(req) = converted_by_llama_server(cx) else {
        return Vec::new();
    };
    let Err(e) = responses_to_chat(req) else {
        return Vec::new();
    };
    let said = e.kind.server_message();
    let answered = cx.status == Some(400)
        && cx
            .response_json
            .as_ref()
            .and_then(|r| r.pointer("/error/message"))
            .and_then(serde_json::Value::as_str)
            == Some(said);
    let item_type = req
        .pointer(&e.pointer)
        .and_then(|v| v.get("type"))
        .and_then(serde_json::Value::as_str)
        .unwrap_or("");
    let what = match (e.kind, item_type) {
        (ConvertErrorKind::UnknownItem, "") => "an input item without a `type`".to_owned(),
        (ConvertErrorKind::UnknownItem, t) => format!("an input item of type `{t}`"),
        _ => format!(
            "`{}`",
            if e.pointer.is_empty() {
                "/"
            } else {
                &e.pointer
            }
        ),
    };
    let message = format!(
        "llama-server refuses this Responses request: converting it to a chat request stops at {} ({}): \"{said}\" (tools/server/server-chat.cpp:{}, b11434), HTTP 400 before any prompt is rendered{}",
        if e.pointer.is_empty() {
            "the body"
        } else {
            &e.pointer
        },
        what,
        e.kind.source_line(),
        if answered {
            "; the recorded response is exactly that refusal"
        } else {
            ""
        }
    );
    let hint = match (e.kind, item_type) {
        (ConvertErrorKind::UnknownItem, "additional_tools") => {
            "the tools are in an `additional_tools` input item, which llama-server does not read: Codex CLI sends them so under a model it has metadata for; give Codex the server's model name (`-c model=…`; `toolscope run codex` sets it), so it sends top-level `tools`, or serve it from an engine that reads `additional_tools`"
        }
        (ConvertErrorKind::UnknownItem, _) => {
            "llama-server reads five input item shapes (a message with a role, `function_call`, `function_call_output`, `reasoning` with `summary`): send the item as one of them, or leave it out"
        }
        (ConvertErrorKind::PreviousResponseId, _) => {
            "llama-server keeps no responses: send the whole conversation in `input` (and `store: false`) instead of `previous_response_id`"
        }
        (
            ConvertErrorKind::ReasoningContentNotArray
            | ConvertErrorKind::ReasoningContentEmpty
            | ConvertErrorKind::ReasoningTextNotString,
            _,
        ) => {
            "llama-server reads a reasoning item only with its text in `content[0].text`: send the reasoning that way, or leave reasoning items out of `input`"
        }
        _ => {
            "change the part of the request at the pointer to the shape the server's message asks for"
        }
    };
    let pane = if item_type == "additional_tools" {
        Pane::Tools
    } else {
        Pane::Findings
    };
    vec![
        Finding::new(Rule::InputRequestRefused, message, hint).with_evidence(Evidence {
            pane: Some(pane),
            pointer: Some(e.pointer.clone()),
            ..Default::default()
        }),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The nine tools Codex CLI 0.169.0 sent (issue 22): seven function tools, the `namespace`
    /// `multi_agent_v1` and `web_search`; llama-server's log named the last two as skipped.
    #[test]
    fn codex_tools_two_dropped() {
        let mut tools: Vec<_> = (0..7)
            .map(|i| json!({"type": "function", "name": format!("f{i}"), "parameters": {"type": "object"}}))
            .collect();
        tools.push(json!({"type": "namespace", "name": "multi_agent_v1", "tools": []}));
        tools.push(json!({"type": "web_search"}));
        let cx = ExchangeContext {
            request: Some(json!({"input": "List the files", "tools": tools})),
            ..ExchangeContext::new(Api::Responses)
        };
        let f = tool_dropped(&cx);
        assert_eq!(f.len(), 2, "{f:?}");
        assert_eq!(f[0].evidence.pointer.as_deref(), Some("/tools/7"));
        assert_eq!(f[0].evidence.tool.as_deref(), Some("multi_agent_v1"));
        assert!(
            f[0].message.contains("'namespace' skipped"),
            "{}",
            f[0].message
        );
        assert_eq!(f[1].evidence.pointer.as_deref(), Some("/tools/8"));
        // another engine converts differently: not judged by llama-server's code
        let cx = ExchangeContext {
            engine: Some(ServerKind::Vllm),
            ..cx
        };
        assert!(tool_dropped(&cx).is_empty());
    }
}
