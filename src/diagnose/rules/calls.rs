//! Tool-call rules: markup left in content, arguments, tool names, invented results.

use serde_json::Value;

use crate::diagnose::request::tools;
use crate::diagnose::{ExchangeContext, markup};
use crate::finding::{Evidence, Finding, Pane, Rule};

/// `tool_call.leaked_as_text`: call markup in the visible content that the server did not turn
/// into `tool_calls` (vllm#51701; llama-server with `tool_choice: none` or a template without
/// tool support). One finding per markup block. Evidence: content pointer and byte offset.
pub fn leaked_as_text(cx: &ExchangeContext) -> Vec<Finding> {
    let Some(m) = &cx.message else {
        return Vec::new();
    };
    markup::find_leaks(&m.content, cx.request_or_null())
        .into_iter()
        .map(|mk| {
            let what = match (&mk.name, &mk.arguments) {
                (Some(n), Some(a)) => format!(" {n}({a})"),
                (Some(n), None) => format!(" calling {n:?}"),
                _ => String::new(),
            };
            let delivered = if m.tool_calls.is_empty() { "the reply has no tool_calls".to_owned() } else { format!("only {} call(s) were delivered as tool_calls", m.tool_calls.len()) };
            let mut ev = cx.content_evidence(Some(mk.offset), Some(markup::excerpt(&m.content, mk.offset, 80)));
            ev.tool = mk.name.clone();
            Finding::new(
                Rule::ToolCallLeakedAsText,
                format!("content holds a {} tool call{what} at byte {} ({})", mk.syntax, mk.offset, crate::diagnose::report::one_line(mk.marker.trim(), 40)),
                format!("{delivered}: the server's parser did not recognise this syntax — use a template whose call syntax the server parses, or parse content client-side (toolscope parse)"),
            )
            .with_evidence(ev)
        })
        .collect()
}

/// `tool_call.args_not_string`: on an OpenAI-compatible `/v1/chat/completions` endpoint, a
/// tool call whose `function.arguments` is a JSON object (or any non-string) instead of the
/// JSON text the contract specifies (OpenAI API reference: `arguments` "string"; the `openai`
/// Python SDK types `Function.arguments` as `str`, so `json.loads` on it fails). TGI's Messages
/// API does this. Not a fault on Ollama's native `/api/chat`, where arguments are objects by
/// design (that exchange is [`crate::session::Api::Ollama`], not checked here). One finding per
/// call. Evidence: the arguments' pointer (non-streamed) or the SSE event (streamed).
pub fn args_not_string(cx: &ExchangeContext) -> Vec<Finding> {
    if cx.api != crate::session::Api::Openai {
        return Vec::new();
    }
    let finding = |i: usize, name: &str, v: &Value, evidence: Evidence| {
        Finding::new(
            Rule::ToolCallArgsNotString,
            format!(
                "function.arguments of tool call {i} ({}) is {}, not a string of JSON as the OpenAI chat completions contract says",
                if name.is_empty() { "unnamed" } else { name },
                crate::json_kind(v)
            ),
            "clients built on the OpenAI SDK json.loads(arguments) and fail on an object: serialise the arguments to a JSON string server-side (or use the engine's native API, e.g. Ollama /api/chat, whose clients expect objects)",
        )
        .with_evidence(Evidence {
            tool: Some(name.to_owned()).filter(|n| !n.is_empty()),
            excerpt: Some(crate::diagnose::report::one_line(&v.to_string(), 80)),
            ..evidence
        })
    };
    let not_string = |v: Option<&Value>| v.filter(|a| !a.is_string() && !a.is_null()).cloned();
    let mut out = Vec::new();
    if !cx.streamed {
        let calls = cx
            .response_json
            .as_ref()
            .and_then(|b| b.pointer("/choices/0/message/tool_calls"))
            .and_then(Value::as_array);
        for (i, c) in calls.into_iter().flatten().enumerate() {
            if let Some(v) = not_string(c.pointer("/function/arguments")) {
                let name = c
                    .pointer("/function/name")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let ev = Evidence {
                    pane: Some(Pane::Stream),
                    pointer: Some(format!(
                        "/choices/0/message/tool_calls/{i}/function/arguments"
                    )),
                    ..Default::default()
                };
                out.push(finding(i, name, &v, ev));
            }
        }
        return out;
    }
    for a in &cx.args_not_string {
        let e = Evidence {
            pane: Some(Pane::Stream),
            event: Some(a.event),
            ..Default::default()
        };
        out.push(finding(a.index as usize, &a.name, &a.value, e));
    }
    out
}

/// Byte offset of serde_json's 1-based (line, column) in `text`.
fn byte_offset(text: &str, line: usize, column: usize) -> usize {
    let mut off = 0;
    for (i, l) in text.split_inclusive('\n').enumerate() {
        if i + 1 == line {
            return (off + column.saturating_sub(1)).min(text.len());
        }
        off += l.len();
    }
    text.len()
}

/// Names of the Responses API `custom` tools the request offers (`{"type":"custom","name":…}`):
/// their calls carry free text, not JSON arguments.
fn custom_tools(cx: &ExchangeContext) -> Vec<&str> {
    if cx.api != crate::session::Api::Responses {
        return Vec::new();
    }
    cx.request_or_null()
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|t| t.get("type").and_then(Value::as_str) == Some("custom"))
        .filter_map(|t| t.get("name").and_then(Value::as_str))
        .collect()
}

/// `tool_call.args_invalid_json` (arguments that do not parse as JSON, e.g. a truncated or
/// mis-concatenated stream) and `tool_call.args_schema_mismatch` (parsed arguments that fail the
/// tool's JSON Schema, validated with the `jsonschema` crate). Evidence: the call's arguments
/// pointer; the byte offset of the JSON error, or the failing instance path.
/// Calls to a Responses `custom` tool (free-text input) are not judged.
pub fn args(cx: &ExchangeContext) -> Vec<Finding> {
    let Some(m) = &cx.message else {
        return Vec::new();
    };
    let defs = tools(cx.request_or_null());
    let custom = custom_tools(cx);
    let mut out = Vec::new();
    for (i, c) in m.tool_calls.iter().enumerate() {
        // a Responses `custom` tool takes free text (its `input`), not JSON
        if custom.contains(&c.name.as_str()) {
            continue;
        }
        match c.arguments_json() {
            Err(e) => {
                let off = byte_offset(&c.arguments, e.line(), e.column());
                let mut ev = cx.call_evidence(i, true);
                ev.offset = Some(off);
                ev.excerpt = Some(markup::excerpt(&c.arguments, off.saturating_sub(20), 60));
                let why = if e.is_eof() {
                    "they end early (truncated?)".to_owned()
                } else {
                    format!("{e}")
                };
                out.push(
                    Finding::new(
                        Rule::ToolCallArgsInvalidJson,
                        format!("arguments of call {i} ({:?}) are not valid JSON at byte {off}: {why}", c.name),
                        "look at the raw stream: arguments deltas must concatenate to one JSON object; raise max_tokens if the call was cut",
                    )
                    .with_evidence(ev),
                );
            }
            Ok(args) => {
                let Some(schema) = defs
                    .iter()
                    .find(|d| d.name == c.name)
                    .and_then(|d| d.schema.as_ref())
                else {
                    continue;
                };
                let validator = match jsonschema::validator_for(schema) {
                    Ok(v) => v,
                    Err(_) => continue, // an invalid schema is the schema rules' business
                };
                let errors: Vec<(String, String)> = validator
                    .iter_errors(&args)
                    .map(|e| (e.instance_path().to_string(), e.to_string()))
                    .collect();
                if errors.is_empty() {
                    continue;
                }
                let mut ev = cx.call_evidence(i, true);
                ev.excerpt = Some(markup::excerpt(&c.arguments, 0, 80));
                let list: Vec<String> = errors
                    .iter()
                    .take(3)
                    .map(|(p, msg)| {
                        if p.is_empty() {
                            msg.clone()
                        } else {
                            format!("{p}: {msg}")
                        }
                    })
                    .collect();
                let more = if errors.len() > 3 {
                    format!(" (+{} more)", errors.len() - 3)
                } else {
                    String::new()
                };
                out.push(
                    Finding::new(
                        Rule::ToolCallArgsSchemaMismatch,
                        format!("arguments of call {i} ({:?}) do not match its parameters schema: {}{more}", c.name, list.join("; ")),
                        "check what the template showed the model of this schema (toolscope render / flatten); enable the server's grammar-constrained tool calls",
                    )
                    .with_evidence(Evidence { step: None, ..ev }),
                );
            }
        }
    }
    out
}

/// `tool_call.unknown_tool`: a call names a tool the request did not offer — a call the server
/// returned, or a call written in the content that the server left as text
/// ([`markup::find_leaks`], also `tool_call.leaked_as_text`), e.g. named by the tool's
/// description. Evidence: the call's name pointer, or the content offset of the leaked call.
pub fn unknown_tool(cx: &ExchangeContext) -> Vec<Finding> {
    let Some(m) = &cx.message else {
        return Vec::new();
    };
    let names: Vec<String> = tools(cx.request_or_null())
        .into_iter()
        .map(|t| t.name)
        .collect();
    let offered = if names.is_empty() {
        "no tools were offered".to_owned()
    } else {
        format!("offered: {}", names.join(", "))
    };
    let hint = "the model invented or misspelt a tool name: constrain calls with a grammar, or map the name client-side";
    let mut out: Vec<Finding> = m
        .tool_calls
        .iter()
        .enumerate()
        .filter(|(_, c)| !names.contains(&c.name))
        .map(|(i, c)| {
            Finding::new(
                Rule::ToolCallUnknownTool,
                format!(
                    "call {i} names {:?}, which the request did not offer ({offered})",
                    c.name
                ),
                hint,
            )
            .with_evidence(cx.call_evidence(i, false))
        })
        .collect();
    for mk in markup::find_leaks(&m.content, cx.request_or_null()) {
        let Some(name) = mk.name.as_ref().filter(|n| !names.iter().any(|x| x == *n)) else {
            continue;
        };
        let mut ev = cx.content_evidence(
            Some(mk.offset),
            Some(markup::excerpt(&m.content, mk.offset, 80)),
        );
        ev.tool = Some(name.clone());
        out.push(
            Finding::new(
                Rule::ToolCallUnknownTool,
                format!("the {} call written in the content at byte {} names {name:?}, which the request did not offer ({offered})", mk.syntax, mk.offset),
                hint,
            )
            .with_evidence(ev),
        );
    }
    out
}

/// `tool_call.hallucinated_result`: the model wrote a tool-result marker (opener or closer:
/// `<tool_response>`, `</tool_response>`, … — the chat template's own, or the well-known ones of
/// [`markup::find_result_markup`]; see [`super::protocol::first_result_marker`]) itself instead
/// of stopping for the real result. Looks at content, then reasoning, then the raw text.
/// Evidence: byte offset of the marker; the message names it.
pub fn hallucinated_result(cx: &ExchangeContext) -> Vec<Finding> {
    let Some(m) = &cx.message else {
        return Vec::new();
    };
    let places: [(&str, Option<&str>); 3] = [
        ("content", Some(&m.content)),
        ("reasoning", Some(&m.reasoning)),
        ("raw text", cx.raw_text.as_deref()),
    ];
    for (place, text) in places {
        let Some(text) = text else { continue };
        if let Some((at, marker)) =
            super::protocol::first_result_marker(text, cx.template_markers.as_deref())
        {
            let ex = Some(markup::excerpt(text, at, 80));
            let ev = match place {
                "content" => cx.content_evidence(Some(at), ex),
                "reasoning" => cx.reasoning_evidence(Some(at), ex),
                _ => Evidence {
                    pane: Some(Pane::Replay),
                    offset: Some(at),
                    excerpt: ex,
                    ..Default::default()
                },
            };
            return vec![Finding::new(
                Rule::ToolCallHallucinatedResult,
                format!("the model wrote a tool result itself ({marker} in the {place} at byte {at}) instead of waiting for the real one"),
                "add the result marker to the stop strings, or make sure the template ends the turn after a call (tiny models often need a few-shot example)",
            )
            .with_evidence(ev)];
        }
    }
    Vec::new()
}

#[cfg(test)]
mod args_not_string_tests {
    use super::*;
    use crate::diagnose::rules::testutil::*;
    use serde_json::json;

    /// TGI Messages API shape (huggingface/text-generation-inference#2136-style reply): the
    /// arguments arrive as an object, finish_reason "stop", description null.
    #[test]
    fn object_arguments_on_openai_endpoint() {
        let resp = json!({"object": "chat.completion", "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": null, "tool_calls": [{"id": "0", "type": "function", "function": {"name": "get_time", "description": null, "arguments": {"city": "Paris"}}}]}}]});
        let f = args_not_string(&openai(json!({"tools": two_tools()}), resp));
        assert_eq!(ids(&f), ["tool_call.args_not_string"]);
        assert_eq!(
            f[0].evidence.pointer.as_deref(),
            Some("/choices/0/message/tool_calls/0/function/arguments")
        );
        assert!(f[0].message.contains("is an object"), "{}", f[0].message);
        // the same call with string arguments is the contract
        let ok = oa_resp(None, &[("get_time", "{\"city\":\"Paris\"}")], "tool_calls");
        assert!(args_not_string(&openai(json!({}), ok)).is_empty());
    }

    #[test]
    fn object_arguments_in_a_stream() {
        // Through the one decoder, as a recorded stream is read: call 0's arguments are an
        // object twice (reported once, at its first event), call 1's a number in a delta
        // without `index` (counted by its position), call 2's a string (the contract).
        let mut cx = openai(json!({}), json!({}));
        crate::analysis::facts::set_stream(
            &mut cx,
            concat!(
                "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c\",\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"arguments\":{\"city\":\"Paris\"}}}]}}]}\n\n",
                "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":{\"more\":1}}}]}}]}\n\n",
                "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":2,\"id\":\"e\",\"function\":{\"name\":\"get_date\",\"arguments\":\"{}\"}},{\"id\":\"d\",\"function\":{\"name\":\"get_date\",\"arguments\":7}}]}}]}\n\n",
                "data: [DONE]\n\n"
            ),
        );
        let f = args_not_string(&cx);
        let got: Vec<_> = f
            .iter()
            .map(|f| {
                (
                    f.evidence.event,
                    f.evidence.tool.as_deref(),
                    f.message.contains("is an object"),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (Some(0), Some("get_time"), true),
                (Some(2), Some("get_date"), false)
            ]
        );
        assert!(
            f[1].message.contains("tool call 1 (get_date) is a number"),
            "{}",
            f[1].message
        );
        // the name came in an earlier delta than the object: the call is still named
        let mut cx = openai(json!({}), json!({}));
        crate::analysis::facts::set_stream(
            &mut cx,
            concat!(
                "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c\",\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"arguments\":\"\"}}]}}]}\n\n",
                "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":{\"city\":\"Paris\"}}}]}}]}\n\n",
                "data: [DONE]\n\n"
            ),
        );
        let f = args_not_string(&cx);
        assert_eq!(f.len(), 1);
        assert_eq!(
            (f[0].evidence.event, f[0].evidence.tool.as_deref()),
            (Some(1), Some("get_time"))
        );
        assert!(
            f[0].message.contains("tool call 0 (get_time)"),
            "{}",
            f[0].message
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::rules::testutil::*;
    use serde_json::json;

    #[test]
    fn leaked_hermes_block_case10() {
        let req = json!({"tools": two_tools(), "tool_choice": "none"});
        let cx = openai(
            req,
            oa_resp(
                Some(
                    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lisbon\"}}\n</tool_call>",
                ),
                &[],
                "stop",
            ),
        );
        let f = leaked_as_text(&cx);
        assert_eq!(ids(&f), ["tool_call.leaked_as_text"]);
        assert_eq!(f[0].evidence.offset, Some(0));
        assert_eq!(f[0].evidence.tool.as_deref(), Some("get_weather"));
        assert!(
            leaked_as_text(&openai(
                json!({}),
                oa_resp(Some("Sunny, 20 °C."), &[], "stop")
            ))
            .is_empty()
        );
    }

    #[test]
    fn invalid_json_arguments() {
        let cx = openai(
            json!({"tools": two_tools()}),
            oa_resp(None, &[("get_time", "{\"city\": \"Lis")], "tool_calls"),
        );
        let f = args(&cx);
        assert_eq!(ids(&f), ["tool_call.args_invalid_json"]);
        assert_eq!(
            f[0].evidence.pointer.as_deref(),
            Some("/choices/0/message/tool_calls/0/function/arguments")
        );
        let cx = openai(
            json!({"tools": two_tools()}),
            oa_resp(
                None,
                &[("get_time", "{\"city\": \"Lisbon\"}}")],
                "tool_calls",
            ),
        );
        let f = args(&cx);
        assert_eq!(ids(&f), ["tool_call.args_invalid_json"]);
        assert_eq!(f[0].evidence.offset, Some(18));
    }

    #[test]
    fn schema_mismatch_arguments() {
        let cx = openai(
            json!({"tools": two_tools()}),
            oa_resp(
                None,
                &[("get_time", "{\"city\": 5}"), ("get_weather", "{}")],
                "tool_calls",
            ),
        );
        let f = args(&cx);
        assert_eq!(
            ids(&f),
            [
                "tool_call.args_schema_mismatch",
                "tool_call.args_schema_mismatch"
            ]
        );
        assert!(f[0].message.contains("/city"), "{}", f[0].message);
        assert!(f[1].message.contains("city"), "{}", f[1].message);
        let ok = openai(
            json!({"tools": two_tools()}),
            oa_resp(
                None,
                &[("get_time", "{\"city\": \"Lisbon\"}")],
                "tool_calls",
            ),
        );
        assert!(args(&ok).is_empty());
    }

    /// The Responses API (issue 22): `function_call` output items after a `message` item, one
    /// with arguments that are not JSON (a `}` too many at byte 18 — `{"city": "Lisbon"}` is 18
    /// bytes), one whose arguments break its tool's schema (`city` must be a string). The tools
    /// are Responses-shaped (`{"type":"function","name",…,"parameters"}`, `strict` as
    /// llama-server adds it). Non-streamed, the evidence points into `output` at the item
    /// (`/output/1/arguments`, `/output/2/arguments`); streamed, at the SSE event that last added
    /// to the call's arguments.
    #[test]
    fn responses_function_call_arguments() {
        let schema = json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]});
        let req = json!({"model": "m", "input": "Weather and time in Lisbon?", "tools": [
            {"type": "function", "name": "get_weather", "parameters": schema, "strict": true},
            {"type": "function", "name": "get_time", "parameters": schema, "strict": true}]});
        let bad = "{\"city\": \"Lisbon\"}}";
        let resp = json!({"object": "response", "status": "completed", "output": [
            {"type": "message", "id": "msg_1", "role": "assistant", "content": [{"type": "output_text", "text": "Checking."}]},
            {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather", "arguments": bad},
            {"type": "function_call", "id": "fc_2", "call_id": "call_2", "name": "get_time", "arguments": "{\"city\": 5}"}]});
        let cx = crate::analysis::facts::from_pair(
            crate::session::Api::Responses,
            Some(req.clone()),
            Some(resp),
        );
        let f = args(&cx);
        assert_eq!(
            ids(&f),
            [
                "tool_call.args_invalid_json",
                "tool_call.args_schema_mismatch"
            ]
        );
        type Ev<'a> = (
            Option<&'a str>,
            Option<&'a str>,
            Option<usize>,
            Option<usize>,
        );
        fn ev(f: &[Finding], i: usize) -> Ev<'_> {
            let e = &f[i].evidence;
            (e.pointer.as_deref(), e.tool.as_deref(), e.offset, e.event)
        }
        assert_eq!(
            ev(&f, 0),
            (
                Some("/output/1/arguments"),
                Some("get_weather"),
                Some(18),
                None
            )
        );
        assert_eq!(
            ev(&f, 1),
            (Some("/output/2/arguments"), Some("get_time"), None, None)
        );
        assert!(f[1].message.contains("/city"), "{}", f[1].message);
        // the whole pipeline reports each once
        let all = crate::diagnose::check_exchange(&cx);
        for rule in [
            Rule::ToolCallArgsInvalidJson,
            Rule::ToolCallArgsSchemaMismatch,
        ] {
            assert_eq!(all.iter().filter(|x| x.rule == rule).count(), 1, "{all:?}");
        }

        // the same items streamed
        let body: String = [
            json!({"type": "response.created", "sequence_number": 0, "response": {"id": "r", "status": "in_progress", "output": []}}),
            json!({"type": "response.output_item.added", "sequence_number": 1, "output_index": 0, "item": {"type": "message", "id": "msg_1", "role": "assistant", "content": []}}),
            json!({"type": "response.output_text.delta", "sequence_number": 2, "output_index": 0, "item_id": "msg_1", "content_index": 0, "delta": "Checking."}),
            json!({"type": "response.output_item.added", "sequence_number": 3, "output_index": 1, "item": {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather", "arguments": ""}}),
            json!({"type": "response.function_call_arguments.delta", "sequence_number": 4, "output_index": 1, "item_id": "fc_1", "delta": "{\"city\": \"Lisbon\"}"}),
            json!({"type": "response.function_call_arguments.delta", "sequence_number": 5, "output_index": 1, "item_id": "fc_1", "delta": "}"}),
            json!({"type": "response.function_call_arguments.done", "sequence_number": 6, "output_index": 1, "item_id": "fc_1", "arguments": bad}),
            json!({"type": "response.output_item.added", "sequence_number": 7, "output_index": 2, "item": {"type": "function_call", "id": "fc_2", "call_id": "call_2", "name": "get_time", "arguments": ""}}),
            json!({"type": "response.function_call_arguments.delta", "sequence_number": 8, "output_index": 2, "item_id": "fc_2", "delta": "{\"city\": 5}"}),
            json!({"type": "response.function_call_arguments.done", "sequence_number": 9, "output_index": 2, "item_id": "fc_2", "arguments": "{\"city\": 5}"}),
            json!({"type": "response.completed", "sequence_number": 10, "response": {"id": "r", "status": "completed", "output": [{"type": "message", "id": "msg_1"}, {"type": "function_call", "id": "fc_1"}, {"type": "function_call", "id": "fc_2"}]}}),
        ]
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
        .collect();
        let mut cx = ExchangeContext {
            request: Some(req),
            ..ExchangeContext::new(crate::session::Api::Responses)
        };
        crate::analysis::facts::set_stream(&mut cx, &body);
        let f = args(&cx);
        assert_eq!(
            ids(&f),
            [
                "tool_call.args_invalid_json",
                "tool_call.args_schema_mismatch"
            ]
        );
        assert_eq!(
            ev(&f, 0),
            (None, Some("get_weather"), Some(18), Some(5)),
            "{:?}",
            f[0]
        );
        assert_eq!(ev(&f, 1), (None, Some("get_time"), None, Some(8)));
    }

    #[test]
    fn unknown_tool_named() {
        let cx = openai(
            json!({"tools": two_tools()}),
            oa_resp(None, &[("get_stock", "{}")], "tool_calls"),
        );
        let f = unknown_tool(&cx);
        assert_eq!(ids(&f), ["tool_call.unknown_tool"]);
        assert!(f[0].message.contains("get_weather, get_time"));
        assert!(
            unknown_tool(&openai(
                json!({"tools": two_tools()}),
                oa_resp(None, &[("get_time", "{}")], "tool_calls")
            ))
            .is_empty()
        );
    }

    #[test]
    fn hallucinated_tool_response() {
        let cx = openai(
            json!({"tools": two_tools()}),
            oa_resp(
                Some("Let me check.\n<tool_response>\n{\"temp\": 20}\n</tool_response>"),
                &[],
                "stop",
            ),
        );
        let f = hallucinated_result(&cx);
        assert_eq!(ids(&f), ["tool_call.hallucinated_result"]);
        assert_eq!(f[0].evidence.offset, Some(14));
        assert!(
            hallucinated_result(&openai(
                json!({}),
                oa_resp(Some("<tool_call>x</tool_call>"), &[], "stop")
            ))
            .is_empty()
        );
    }
}
