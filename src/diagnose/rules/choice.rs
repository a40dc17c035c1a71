//! `tool_choice` rules: did the reply respect what the request forced or forbade?
//!
//! Known causes on llama-server build 11434 (tools/server/server-chat.cpp): on `/v1/messages`
//! `{"type":"tool","name":N}` becomes `"required"` (the name is dropped) and `{"type":"none"}`
//! has no mapping at all; on `/v1/chat/completions` the named object form is rejected with
//! `Wrong type supplied for parameter 'tool_choice'` and the default (`auto`) is used.

use crate::diagnose::request::ToolChoice;
use crate::diagnose::{ExchangeContext, markup};
use crate::finding::{Finding, Rule};
use crate::session::Api;

fn server_hint(cx: &ExchangeContext, what: &str) -> String {
    match (cx.api, what) {
        (Api::Anthropic, "named") => "llama-server maps Anthropic {\"type\":\"tool\"} to \"required\" and drops the name: offer only the forced tool, or use /v1/chat/completions with a server that honours named tool_choice".into(),
        (Api::Anthropic, "none") => "llama-server has no mapping for Anthropic {\"type\":\"none\"}: omit `tools` from the request instead of sending tool_choice none".into(),
        (_, "named") => "the server ignored the named tool_choice (llama-server logs \"Wrong type supplied for parameter 'tool_choice'\"): offer only the forced tool, or validate the call client-side".into(),
        (_, "none") => "the server did not enforce tool_choice none: omit `tools` from the request when no call is wanted".into(),
        _ => "the server did not constrain the reply to a tool call: check the template supports tools (/props chat_template_caps) and that the grammar forbids leading text".into(),
    }
}

/// Markup of a call written into the visible content (see [`markup::find_leaks`]).
fn content_markup(cx: &ExchangeContext) -> Option<markup::CallMarkup> {
    let m = cx.message.as_ref()?;
    markup::find_leaks(&m.content, cx.request_or_null())
        .into_iter()
        .next()
}

/// `tool_choice.named_ignored`: the request forced tool N (OpenAI
/// `{"type":"function","function":{"name":N}}`, Anthropic `{"type":"tool","name":N}`) and the
/// reply called another tool. A reply with no call at all is `tool_choice.required_ignored`
/// (forcing a tool by name forces a call; with no call there is nothing to say about the name —
/// the same reading as `probe`, whose `named_tool` control is then INCONCLUSIVE).
/// Evidence: the first call of another tool.
pub fn named_ignored(cx: &ExchangeContext) -> Vec<Finding> {
    let Some(m) = &cx.message else {
        return Vec::new();
    };
    let ToolChoice::Named(want) = ToolChoice::from_request(cx.api, cx.request_or_null()) else {
        return Vec::new();
    };
    let Some(i) = m.tool_calls.iter().position(|c| c.name != want) else {
        return Vec::new();
    };
    let got = &m.tool_calls[i].name;
    vec![
        Finding::new(
            Rule::ToolChoiceNamedIgnored,
            format!("tool_choice forced {want:?} but the model called {got:?}"),
            server_hint(cx, "named"),
        )
        .with_evidence(cx.call_evidence(i, false)),
    ]
}

/// `tool_choice.none_ignored`: `tool_choice` was none (OpenAI `"none"`, Anthropic
/// `{"type":"none"}`) and the reply made a call, or wrote call markup into its content.
pub fn none_ignored(cx: &ExchangeContext) -> Vec<Finding> {
    let Some(m) = &cx.message else {
        return Vec::new();
    };
    if ToolChoice::from_request(cx.api, cx.request_or_null()) != ToolChoice::None {
        return Vec::new();
    }
    let hint = server_hint(cx, "none");
    if let Some(c) = m.tool_calls.first() {
        return vec![
            Finding::new(
                Rule::ToolChoiceNoneIgnored,
                format!("tool_choice was none but the model called {:?}", c.name),
                hint,
            )
            .with_evidence(cx.call_evidence(0, false)),
        ];
    }
    if let Some(mk) = content_markup(cx) {
        let what = mk
            .name
            .as_deref()
            .map(|n| format!(" calling {n:?}"))
            .unwrap_or_default();
        return vec![Finding::new(
            Rule::ToolChoiceNoneIgnored,
            format!("tool_choice was none but the model wrote a {} call{what} into its content at byte {}", mk.syntax, mk.offset),
            hint,
        )
        .with_evidence(cx.content_evidence(Some(mk.offset), Some(markup::excerpt(&m.content, mk.offset, 80))))];
    }
    Vec::new()
}

/// `tool_choice.required_ignored`: a call was required (OpenAI `"required"`, Anthropic
/// `{"type":"any"}`, or a tool forced by name) and the reply has none. Evidence: the content
/// (and, for a named tool, the tool).
pub fn required_ignored(cx: &ExchangeContext) -> Vec<Finding> {
    let Some(m) = &cx.message else {
        return Vec::new();
    };
    if !m.tool_calls.is_empty() {
        return Vec::new();
    }
    let (what, named) = match ToolChoice::from_request(cx.api, cx.request_or_null()) {
        ToolChoice::Required => ("tool_choice required a tool call".to_owned(), None),
        ToolChoice::Named(n) => (
            format!("tool_choice forced {n:?} (so a call was required)"),
            Some(n),
        ),
        _ => return Vec::new(),
    };
    let finish = m.finish_reason.as_deref().unwrap_or("unknown");
    let extra = match content_markup(cx) {
        Some(mk) => format!(
            "; a {} call was written into the content instead",
            mk.syntax
        ),
        None if matches!(finish, "length" | "max_tokens") => {
            "; the reply ran to the token limit without one".to_owned()
        }
        None => String::new(),
    };
    vec![
        Finding::new(
            Rule::ToolChoiceRequiredIgnored,
            format!("{what} but the reply has none (finish {finish}){extra}"),
            server_hint(cx, if named.is_some() { "named" } else { "required" }),
        )
        .with_evidence({
            let mut ev = cx.content_evidence(None, Some(markup::excerpt(&m.content, 0, 80)));
            ev.tool = named;
            ev
        }),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::rules::testutil::*;
    use serde_json::json;

    #[test]
    fn named_ignored_case06() {
        let req = json!({"tools": two_tools(), "tool_choice": {"type": "function", "function": {"name": "get_time"}}});
        let cx = openai(
            req.clone(),
            oa_resp(
                None,
                &[("get_weather", "{\"city\": \"Lisbon\"}")],
                "tool_calls",
            ),
        );
        let f = named_ignored(&cx);
        assert_eq!(ids(&f), ["tool_choice.named_ignored"]);
        assert_eq!(
            f[0].evidence.pointer.as_deref(),
            Some("/choices/0/message/tool_calls/0/function/name")
        );
        let ok = openai(
            req,
            oa_resp(None, &[("get_time", "{\"city\": \"Lisbon\"}")], "stop"),
        );
        assert!(named_ignored(&ok).is_empty());
    }

    #[test]
    fn named_ignored_anthropic_and_no_call() {
        let req =
            json!({"tools": two_tools(), "tool_choice": {"type": "tool", "name": "get_time"}});
        let cx = anthropic(
            req.clone(),
            json!({"type": "message", "content": [{"type": "tool_use", "id": "t", "name": "get_weather", "input": {"city": "X"}}], "stop_reason": "tool_use"}),
        );
        assert_eq!(ids(&named_ignored(&cx)), ["tool_choice.named_ignored"]);
        let cx = anthropic(
            req,
            json!({"type": "message", "content": [{"type": "text", "text": "It is sunny"}], "stop_reason": "end_turn"}),
        );
        // No call at all: not a wrong name (nothing says which tool the model would have
        // picked) but a forced call that did not happen.
        assert!(named_ignored(&cx).is_empty());
        let f = required_ignored(&cx);
        assert_eq!(ids(&f), ["tool_choice.required_ignored"]);
        assert!(
            f[0].message.contains("forced \"get_time\""),
            "{}",
            f[0].message
        );
        assert_eq!(f[0].evidence.tool.as_deref(), Some("get_time"));
        assert!(f[0].hint.contains("drops the name"), "{}", f[0].hint);
        assert_eq!(
            ids(&crate::diagnose::check_exchange(&cx)),
            ["tool_choice.required_ignored"]
        );
    }

    #[test]
    fn none_ignored_call_or_markup() {
        let req = json!({"tools": two_tools(), "tool_choice": "none"});
        let cx = openai(
            req.clone(),
            oa_resp(None, &[("get_weather", "{}")], "tool_calls"),
        );
        assert_eq!(ids(&none_ignored(&cx)), ["tool_choice.none_ignored"]);
        let cx = openai(
            req.clone(),
            oa_resp(
                Some("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>"),
                &[],
                "stop",
            ),
        );
        assert_eq!(ids(&none_ignored(&cx)), ["tool_choice.none_ignored"]);
        let cx = openai(req, oa_resp(Some("It is sunny."), &[], "stop"));
        assert!(none_ignored(&cx).is_empty());
        let areq = json!({"tools": [], "tool_choice": {"type": "none"}});
        let cx = anthropic(
            areq,
            json!({"type": "message", "content": [{"type": "tool_use", "id": "t", "name": "get_time", "input": {}}], "stop_reason": "tool_use"}),
        );
        assert_eq!(ids(&none_ignored(&cx)), ["tool_choice.none_ignored"]);
    }

    #[test]
    fn required_ignored_forms() {
        let cx = openai(
            json!({"tools": two_tools(), "tool_choice": "required"}),
            oa_resp(Some("I think"), &[], "length"),
        );
        let f = required_ignored(&cx);
        assert_eq!(ids(&f), ["tool_choice.required_ignored"]);
        assert!(f[0].message.contains("token limit"));
        let cx = anthropic(
            json!({"tools": two_tools(), "tool_choice": {"type": "any"}}),
            json!({"type": "message", "content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn"}),
        );
        assert_eq!(
            ids(&required_ignored(&cx)),
            ["tool_choice.required_ignored"]
        );
        let cx = openai(
            json!({"tools": two_tools(), "tool_choice": "required"}),
            oa_resp(None, &[("get_time", "{}")], "tool_calls"),
        );
        assert!(required_ignored(&cx).is_empty());
    }
}
