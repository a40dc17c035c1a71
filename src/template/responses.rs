//! llama-server's conversion of an OpenAI Responses request (`POST /v1/responses`) into the
//! chat-completions body it then serves: a port of `server_chat_convert_responses_to_chatcmpl`
//! (tools/server/server-chat.cpp:6–310, build 11434), line for line, including its 400 errors
//! and what it silently drops.
//!
//! llama-server answers `/v1/responses` and `/responses` (tools/server/server.cpp:276–277) by
//! converting the body here, then handing the result to the chat path
//! (`oaicompat_chat_params_parse`, tools/server/server-context.cpp:5343–5359). `/apply-template`
//! takes only a chat body, so the recorder POSTs [`Converted::body`] to it to fetch the prompt the
//! server really rendered; the local render and the Schema pane read the same body, so every
//! pane compares renders of one converted request.
//!
//! Differences from the JSON the server builds: none intended. Object keys keep the order the
//! server gives them (build 11434's `common_json` wraps `nlohmann::ordered_json`,
//! common/json.h:22–24; toolscope's `serde_json` has `preserve_order`).

use serde_json::{Map, Value, json};

/// The chat body llama-server builds from a Responses body, and what it left out on the way.
#[derive(Debug, Clone, PartialEq)]
pub struct Converted {
    /// The chat-completions body: the Responses body's own keys in their order minus `input`,
    /// `instructions`, `max_output_tokens`, `reasoning` (and `tools` when none survives), then
    /// `messages`, `tools`, `max_tokens`, `reasoning_effort` as the server appends them.
    pub body: Value,
    /// What the model never sees although the request carried it, in request order.
    pub dropped: Vec<Dropped>,
}

/// One part of a Responses request that llama-server's conversion drops without an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dropped {
    /// JSON Pointer into the Responses request (`/tools/2`, `/input/5/content/1`, `/text/format`).
    pub pointer: String,
    /// What was dropped.
    pub what: DroppedKind,
}

/// What kind of request part was dropped, with the source of the server's behaviour.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DroppedKind {
    /// A tool whose `type` is not `function` (`custom` such as Codex's freeform `apply_patch`,
    /// `namespace` for MCP servers, `web_search`, `file_search`, `mcp`, …): "Non-function
    /// Responses tools have no Chat Completions equivalent" — skipped with only a server log
    /// line `unsupported Responses tool type '<type>' skipped` (server-chat.cpp:274–279).
    /// `tool_type` is the tool's `type` (`""` when it has none); `name` its `name`, if any.
    Tool {
        tool_type: String,
        name: Option<String>,
    },
    /// A reasoning input item's text beyond `content[0]`: only `content[0].text` becomes
    /// `reasoning_content` (server-chat.cpp:245–254). `parts` is how many were left out.
    ReasoningParts { parts: usize },
    /// A reasoning input item whose text replaced the `reasoning_content` an earlier reasoning
    /// item had put on the same assistant message (server-chat.cpp:246–248 assigns, it does
    /// not append): the earlier text at `overwritten` (a pointer) is lost.
    ReasoningOverwritten { overwritten: String },
    /// `text.format` (structured output: `json_schema` / `json_object`): passed through as
    /// `text`, which the chat path never reads — it reads `response_format`, `json_schema` and
    /// `grammar` only (tools/server/server-common.cpp:1293–1312), so the output is not
    /// constrained.
    TextFormat { format_type: String },
}

impl Dropped {
    /// One sentence saying what was dropped and why, with the server's source.
    pub fn describe(&self) -> String {
        match &self.what {
            DroppedKind::Tool { tool_type, name } => {
                let name = name
                    .as_deref()
                    .map(|n| format!(" `{n}`"))
                    .unwrap_or_default();
                let ty = if tool_type.is_empty() {
                    "without a `type`".to_owned()
                } else {
                    format!("of type `{tool_type}`")
                };
                format!(
                    "tool{name} at {} {ty} is dropped: llama-server converts only `function` tools to chat tools and skips the rest with a log line \"unsupported Responses tool type '{tool_type}' skipped\" (tools/server/server-chat.cpp:274-279, b11434); the model never sees it",
                    self.pointer
                )
            }
            DroppedKind::ReasoningParts { parts } => format!(
                "{parts} reasoning content part(s) after {}/content/0 are dropped: llama-server keeps only content[0].text as reasoning_content (tools/server/server-chat.cpp:245-254, b11434)",
                self.pointer
            ),
            DroppedKind::ReasoningOverwritten { overwritten } => format!(
                "the reasoning item at {} replaces the reasoning_content of the item at {overwritten} on the same assistant message (tools/server/server-chat.cpp:246-248, b11434 assigns, it does not append): the earlier reasoning is lost",
                self.pointer
            ),
            DroppedKind::TextFormat { format_type } => format!(
                "{} (`{format_type}`) is ignored: llama-server passes `text` through to the chat path, which reads only `response_format`, `json_schema` and `grammar` (tools/server/server-common.cpp:1293-1312, b11434); the output is not constrained",
                self.pointer
            ),
        }
    }
}

/// Why llama-server refuses a Responses body (HTTP 400, `invalid_request_error`; its
/// `ex_wrapper` turns `std::invalid_argument` into 400, tools/server/server.cpp:55–63).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{pointer}: {}", kind.server_message())]
pub struct ConvertError {
    /// JSON Pointer into the Responses request of the offending value (`""` for the body).
    pub pointer: String,
    pub kind: ConvertErrorKind,
}

/// The server's refusals, each with the line of server-chat.cpp (build 11434) that throws it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConvertErrorKind {
    /// Line 8: the body has no `input`.
    InputRequired,
    /// Line 11: `previous_response_id` is a non-empty string (the server keeps no responses).
    PreviousResponseId,
    /// Line 73: an `input_text` part without `text`.
    InputTextRequiresText,
    /// Lines 84 and 217: an `input_image` part (or tool output) without `image_url`.
    ImageUrlRequired,
    /// Line 93: an `input_file` part.
    InputFileUnsupported,
    /// Line 95: a user/system/developer content part of another type.
    InputPartType,
    /// Line 130: an `output_text` part whose `text` is not a string.
    OutputTextRequiresText,
    /// Line 138: a `refusal` part whose `refusal` is not a string.
    RefusalRequiresRefusal,
    /// Line 145: an assistant content part of another type.
    OutputPartType,
    /// Line 207: a `function_call_output` array element without `type`.
    ToolOutputMissingType,
    /// Line 211: a `function_call_output` array element that is neither `input_text` nor
    /// `input_image` (e.g. `output_text`, llama.cpp#23465).
    ToolOutputType,
    /// Line 237: a `reasoning` item whose `content` is not an array (Codex's reasoning items
    /// carry `summary` and `encrypted_content`, and no `content`).
    ReasoningContentNotArray,
    /// Line 240: a `reasoning` item with an empty `content`.
    ReasoningContentEmpty,
    /// Line 243: a `reasoning` item whose `content[0].text` is not a string.
    ReasoningTextNotString,
    /// Line 257: an input item none of the five shapes matches — among them
    /// `{"role":"assistant","content":"…"}` without `"type":"message"`, `custom_tool_call`,
    /// `custom_tool_call_output`, `item_reference`, built-in tool calls.
    UnknownItem,
    /// Line 261: `input` is neither a string nor an array.
    InputNotStringOrArray,
    /// Line 268: `tools` is not an array.
    ToolsNotArray,
}

impl ConvertErrorKind {
    /// The server's error message, verbatim.
    pub fn server_message(self) -> &'static str {
        use ConvertErrorKind::*;
        match self {
            InputRequired => "'input' is required",
            PreviousResponseId => "llama.cpp does not support 'previous_response_id'.",
            InputTextRequiresText => "'Input text' requires 'text'",
            ImageUrlRequired => "'image_url' is required",
            InputFileUnsupported => "'input_file' is not supported by llamacpp at this moment",
            InputPartType => "'type' must be one of 'input_text', 'input_image', or 'input_file'",
            OutputTextRequiresText => "'Output text' requires 'text'",
            RefusalRequiresRefusal => "'Refusal' requires 'refusal'",
            OutputPartType => "'type' must be one of 'output_text' or 'refusal'",
            ToolOutputMissingType => "Output of tool call missing 'type' field",
            ToolOutputType => "Output of tool call should be 'Input text' or 'Input image'",
            ReasoningContentNotArray => "item['content'] is not an array",
            ReasoningContentEmpty => "item['content'] is empty",
            ReasoningTextNotString => "item['content']['text'] is not a string",
            UnknownItem => "Cannot determine type of 'item'",
            InputNotStringOrArray => "'input' must be a string or array of objects",
            ToolsNotArray => "'tools' must be an array of objects",
        }
    }

    /// The line of tools/server/server-chat.cpp (build 11434) that throws this error.
    pub fn source_line(self) -> u32 {
        use ConvertErrorKind::*;
        match self {
            InputRequired => 8,
            PreviousResponseId => 11,
            InputTextRequiresText => 73,
            ImageUrlRequired => 84,
            InputFileUnsupported => 93,
            InputPartType => 95,
            OutputTextRequiresText => 130,
            RefusalRequiresRefusal => 138,
            OutputPartType => 145,
            ToolOutputMissingType => 207,
            ToolOutputType => 211,
            ReasoningContentNotArray => 237,
            ReasoningContentEmpty => 240,
            ReasoningTextNotString => 243,
            UnknownItem => 257,
            InputNotStringOrArray => 261,
            ToolsNotArray => 268,
        }
    }
}

fn err(pointer: impl Into<String>, kind: ConvertErrorKind) -> Result<Converted, ConvertError> {
    Err(ConvertError {
        pointer: pointer.into(),
        kind,
    })
}

/// `json_value(body, key, std::string())` (tools/server/server-common.h:43–55): the string at
/// `key`, or `""` when it is absent, null or not a string (the server logs "Wrong type supplied
/// for parameter" and uses the default).
fn json_value_str<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

fn is_str(v: &Value, key: &str) -> bool {
    v.get(key).is_some_and(Value::is_string)
}

fn is_array(v: &Value, key: &str) -> bool {
    v.get(key).is_some_and(Value::is_array)
}

/// Converts a Responses request body to the chat-completions body llama-server b11434 builds
/// from it (`server_chat_convert_responses_to_chatcmpl`, tools/server/server-chat.cpp:6–310):
///
/// * `instructions` (present, even null) → a leading `{"role":"system","content":…}` (a
///   non-string value becomes `""`, lines 19–25);
/// * `input` string → one user message (27–32); `input` items (33–259), in order:
///   a `content` string is first wrapped as `[{"text":…,"type":"input_text"}]` (46–56);
///   a user/system/developer message (with or without `"type":"message"`) keeps its other keys,
///   loses `type` and `status`, `input_text` → `text` parts, `input_image` → `image_url` parts
///   (58–107); an assistant `"type":"message"` item's `output_text`/`input_text`/`refusal`
///   parts become chat parts, merged into the previous message when that one is an assistant
///   message (108–165); a `function_call` item becomes a `tool_calls` entry
///   `{"function":{"arguments","name"},"id":call_id,"type":"function"}`, merged the same way
///   (166–193); a `function_call_output` becomes a `role: "tool"` message (its array output's
///   `input_text` → `text`, `input_image` → `image_url`, 194–230); a `reasoning` item's
///   `content[0].text` becomes `reasoning_content` (231–254);
/// * `tools`: each `function` tool becomes `{"type":"function","function":{…, "strict": true
///   unless set}}`; every other tool is dropped (263–292; the `tools` key disappears when none is
///   left);
/// * `max_output_tokens` → `max_tokens` (294–298); `reasoning.effort` → `reasoning_effort`,
///   the rest of `reasoning` (e.g. `summary`) dropped (300–307);
/// * every other key (`tool_choice`, `parallel_tool_calls`, `temperature`, `stream`, `text`,
///   `store`, `include`, …) passes through unchanged. The chat path then reads `tool_choice`
///   as a string only: an object such as `{"type":"function","name":…}` counts as `"auto"`
///   (server-common.cpp:1275 and server-common.h:43–55).
///
/// Errors: a [`ConvertError`] naming the server's 400 message and the offending value.
/// Never panics on any JSON value.
pub fn responses_to_chat(body: &Value) -> Result<Converted, ConvertError> {
    let Some(input_value) = body.get("input") else {
        return err("/input", ConvertErrorKind::InputRequired);
    };
    if !json_value_str(body, "previous_response_id").is_empty() {
        return err(
            "/previous_response_id",
            ConvertErrorKind::PreviousResponseId,
        );
    }
    let mut chat: Map<String, Value> = body.as_object().cloned().unwrap_or_default();
    chat.shift_remove("input");
    let mut dropped = Vec::new();
    // (message, pointer of the reasoning item that set its reasoning_content)
    let mut messages: Vec<Value> = Vec::new();
    let mut reasoning_from: Vec<Option<String>> = Vec::new();

    if body.get("instructions").is_some() {
        messages.push(json!({"role": "system", "content": json_value_str(body, "instructions")}));
        reasoning_from.push(None);
        chat.shift_remove("instructions");
    }

    match input_value {
        Value::String(_) => {
            messages.push(json!({"role": "user", "content": input_value}));
            reasoning_from.push(None);
        }
        Value::Array(items) => {
            for (i, original) in items.iter().enumerate() {
                let at = format!("/input/{i}");
                convert_item(
                    original,
                    &at,
                    &mut messages,
                    &mut reasoning_from,
                    &mut dropped,
                )?;
            }
        }
        _ => return err("/input", ConvertErrorKind::InputNotStringOrArray),
    }
    chat.insert("messages".into(), Value::Array(messages));

    if let Some(tools) = body.get("tools") {
        let Some(tools) = tools.as_array() else {
            return err("/tools", ConvertErrorKind::ToolsNotArray);
        };
        let mut out = Vec::new();
        for (i, tool) in tools.iter().enumerate() {
            let ty = json_value_str(tool, "type");
            if ty != "function" {
                dropped.push(Dropped {
                    pointer: format!("/tools/{i}"),
                    what: DroppedKind::Tool {
                        tool_type: ty.to_owned(),
                        name: tool.get("name").and_then(Value::as_str).map(str::to_owned),
                    },
                });
                continue;
            }
            let mut f = tool.as_object().cloned().unwrap_or_default();
            f.shift_remove("type");
            if !f.contains_key("strict") {
                f.insert("strict".into(), Value::Bool(true));
            }
            out.push(json!({"type": "function", "function": Value::Object(f)}));
        }
        chat.shift_remove("tools");
        if !out.is_empty() {
            chat.insert("tools".into(), Value::Array(out));
        }
    }

    if let Some(max) = body.get("max_output_tokens") {
        chat.shift_remove("max_output_tokens");
        chat.insert("max_tokens".into(), max.clone());
    }

    if let Some(reasoning) = body.get("reasoning") {
        if let Some(effort) = reasoning.get("effort") {
            chat.insert("reasoning_effort".into(), effort.clone());
        }
        chat.shift_remove("reasoning");
    }

    if let Some(format) = body.pointer("/text/format") {
        let format_type = json_value_str(format, "type");
        // `{"type":"text"}` asks for plain text: nothing is lost.
        if format_type != "text" {
            dropped.push(Dropped {
                pointer: "/text/format".into(),
                what: DroppedKind::TextFormat {
                    format_type: format_type.to_owned(),
                },
            });
        }
    }

    Ok(Converted {
        body: Value::Object(chat),
        dropped,
    })
}

/// One input item (server-chat.cpp:43–258).
fn convert_item(
    original: &Value,
    at: &str,
    messages: &mut Vec<Value>,
    reasoning_from: &mut Vec<Option<String>>,
    dropped: &mut Vec<Dropped>,
) -> Result<(), ConvertError> {
    // line 44: merge into the previous message when that one is an assistant message
    let merge_prev = messages
        .last()
        .is_some_and(|m| m.get("role").and_then(Value::as_str) == Some("assistant"));
    let mut item = original.clone();
    if is_str(&item, "content") {
        // lines 46–56: a string content becomes one input_text part
        let text = item["content"].take();
        item["content"] = json!([{"text": text, "type": "input_text"}]);
    }
    let role = item.get("role").and_then(Value::as_str);
    let ty = item.get("type").and_then(Value::as_str);

    if is_array(&item, "content") && matches!(role, Some("user" | "system" | "developer")) {
        // lines 58–107: input message
        let parts = input_parts(&item, at)?;
        let obj = item.as_object_mut().expect("has content, so an object");
        obj.shift_remove("type");
        obj.shift_remove("status");
        obj.insert("content".into(), Value::Array(parts));
        messages.push(item);
        reasoning_from.push(None);
    } else if role == Some("assistant") && ty == Some("message") {
        // lines 108–165: output message
        let parts = output_parts(&item, at)?;
        if merge_prev {
            let prev = messages.last_mut().expect("merge_prev");
            if !is_array(prev, "content") {
                prev["content"] = json!([]);
            }
            if let Some(c) = prev["content"].as_array_mut() {
                c.extend(parts);
            }
        } else {
            let obj = item.as_object_mut().expect("has a role, so an object");
            obj.shift_remove("status");
            obj.shift_remove("type");
            obj.insert("content".into(), Value::Array(parts));
            messages.push(item);
            reasoning_from.push(None);
        }
    } else if is_str(&item, "arguments")
        && is_str(&item, "call_id")
        && is_str(&item, "name")
        && ty == Some("function_call")
    {
        // lines 166–193: function tool call
        function_call(&item, merge_prev, messages, reasoning_from);
    } else if is_str(&item, "call_id")
        && (is_str(&item, "output") || is_array(&item, "output"))
        && ty == Some("function_call_output")
    {
        // lines 194–230: function tool call output
        messages.push(tool_message(&item, at)?);
        reasoning_from.push(None);
    } else if is_array(&item, "summary") && ty == Some("reasoning") {
        // lines 231–254: reasoning
        reasoning(&item, at, merge_prev, messages, reasoning_from, dropped)?;
    } else {
        return fail(at.to_owned(), ConvertErrorKind::UnknownItem);
    }
    Ok(())
}

/// A conversion error at `pointer`.
fn fail<T>(pointer: String, kind: ConvertErrorKind) -> Result<T, ConvertError> {
    Err(ConvertError { pointer, kind })
}

/// An input message's parts as chat parts (lines 58–107): `input_text` → `text`,
/// `input_image` → `image_url`; a file or another part type is an error.
fn input_parts(item: &Value, at: &str) -> Result<Vec<Value>, ConvertError> {
    let mut parts = Vec::new();
    for (j, part) in item["content"].as_array().into_iter().flatten().enumerate() {
        let p = format!("{at}/content/{j}");
        match json_value_str(part, "type") {
            "input_text" => {
                let Some(text) = part.get("text") else {
                    return fail(p, ConvertErrorKind::InputTextRequiresText);
                };
                parts.push(json!({"text": text, "type": "text"}));
            }
            "input_image" => {
                let Some(url) = part.get("image_url") else {
                    return fail(p, ConvertErrorKind::ImageUrlRequired);
                };
                parts.push(json!({"image_url": {"url": url}, "type": "image_url"}));
            }
            "input_file" => return fail(p, ConvertErrorKind::InputFileUnsupported),
            _ => return fail(format!("{p}/type"), ConvertErrorKind::InputPartType),
        }
    }
    Ok(parts)
}

/// An output message's parts as chat parts (lines 108–165): `output_text`/`input_text` →
/// `text`, `refusal` kept; another part type is an error.
fn output_parts(item: &Value, at: &str) -> Result<Vec<Value>, ConvertError> {
    let mut parts = Vec::new();
    if let Some(content) = item.get("content").and_then(Value::as_array) {
        for (j, part) in content.iter().enumerate() {
            let p = format!("{at}/content/{j}");
            match json_value_str(part, "type") {
                "output_text" | "input_text" => {
                    if !is_str(part, "text") {
                        return fail(p, ConvertErrorKind::OutputTextRequiresText);
                    }
                    parts.push(json!({"text": part["text"], "type": "text"}));
                }
                "refusal" => {
                    if !is_str(part, "refusal") {
                        return fail(p, ConvertErrorKind::RefusalRequiresRefusal);
                    }
                    parts.push(json!({"refusal": part["refusal"], "type": "refusal"}));
                }
                _ => return fail(format!("{p}/type"), ConvertErrorKind::OutputPartType),
            }
        }
    }
    Ok(parts)
}

/// A `function_call` item (lines 166–193): a tool call added to the previous assistant
/// message, or a new assistant message with it.
fn function_call(
    item: &Value,
    merge_prev: bool,
    messages: &mut Vec<Value>,
    reasoning_from: &mut Vec<Option<String>>,
) {
    let call = json!({
        "function": {"arguments": item["arguments"], "name": item["name"]},
        "id": item["call_id"],
        "type": "function",
    });
    if merge_prev {
        let prev = messages.last_mut().expect("merge_prev");
        if !is_array(prev, "tool_calls") {
            prev["tool_calls"] = json!([]);
        }
        if let Some(c) = prev["tool_calls"].as_array_mut() {
            c.push(call);
        }
    } else {
        messages.push(json!({"role": "assistant", "tool_calls": [call]}));
        reasoning_from.push(None);
    }
}

/// A `function_call_output` item as a `tool` message (lines 194–230): a string output as is,
/// an array's `input_text` / `input_image` parts as chat parts.
fn tool_message(item: &Value, at: &str) -> Result<Value, ConvertError> {
    if item["output"].is_string() {
        return Ok(json!({
            "content": item["output"],
            "role": "tool",
            "tool_call_id": item["call_id"],
        }));
    }
    let mut outputs = item["output"].clone();
    for (j, o) in outputs
        .as_array_mut()
        .expect("checked")
        .iter_mut()
        .enumerate()
    {
        let p = format!("{at}/output/{j}");
        let Some(t) = o.get("type") else {
            return fail(p, ConvertErrorKind::ToolOutputMissingType);
        };
        let t = t.as_str().unwrap_or_default();
        match t {
            "input_text" => o["type"] = json!("text"),
            "input_image" => {
                let Some(url) = o.get("image_url").cloned() else {
                    return fail(p, ConvertErrorKind::ImageUrlRequired);
                };
                o["type"] = json!("image_url");
                o["image_url"] = json!({"url": url});
            }
            _ => return fail(format!("{p}/type"), ConvertErrorKind::ToolOutputType),
        }
    }
    Ok(json!({
        "content": outputs,
        "role": "tool",
        "tool_call_id": item["call_id"],
    }))
}

/// A `reasoning` item (lines 231–254): its first content part's text as the previous
/// assistant message's `reasoning_content` (an earlier one overwritten is reported), or a new
/// assistant message; parts after the first are dropped (reported).
fn reasoning(
    item: &Value,
    at: &str,
    merge_prev: bool,
    messages: &mut Vec<Value>,
    reasoning_from: &mut Vec<Option<String>>,
    dropped: &mut Vec<Dropped>,
) -> Result<(), ConvertError> {
    let Some(content) = item.get("content").and_then(Value::as_array) else {
        return fail(
            format!("{at}/content"),
            ConvertErrorKind::ReasoningContentNotArray,
        );
    };
    let Some(first) = content.first() else {
        return fail(
            format!("{at}/content"),
            ConvertErrorKind::ReasoningContentEmpty,
        );
    };
    if !is_str(first, "text") {
        return fail(
            format!("{at}/content/0"),
            ConvertErrorKind::ReasoningTextNotString,
        );
    }
    if content.len() > 1 {
        dropped.push(Dropped {
            pointer: at.to_owned(),
            what: DroppedKind::ReasoningParts {
                parts: content.len() - 1,
            },
        });
    }
    let text = first["text"].clone();
    if merge_prev {
        let prev = messages.last_mut().expect("merge_prev");
        let from = reasoning_from.last_mut().expect("one per message");
        if prev.get("reasoning_content").is_some()
            && let Some(earlier) = from.clone()
        {
            dropped.push(Dropped {
                pointer: at.to_owned(),
                what: DroppedKind::ReasoningOverwritten {
                    overwritten: earlier,
                },
            });
        }
        prev["reasoning_content"] = text;
        *from = Some(at.to_owned());
    } else {
        messages.push(json!({"role": "assistant", "content": [], "reasoning_content": text}));
        reasoning_from.push(Some(at.to_owned()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(body: Value) -> ConvertErrorKind {
        responses_to_chat(&body).unwrap_err().kind
    }

    #[test]
    fn instructions_and_string_input() {
        let c = responses_to_chat(
            &json!({"model": "m", "instructions": "be brief", "input": "hi", "stream": true}),
        )
        .unwrap();
        assert_eq!(
            c.body,
            json!({"model": "m", "stream": true, "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "hi"}]})
        );
        // key order as the server builds it: the body's own keys, then messages
        let keys: Vec<_> = c.body.as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys, ["model", "stream", "messages"]);
    }

    #[test]
    fn null_instructions_still_give_an_empty_system_message() {
        let c = responses_to_chat(&json!({"instructions": null, "input": "hi"})).unwrap();
        assert_eq!(
            c.body["messages"][0],
            json!({"role": "system", "content": ""})
        );
    }

    #[test]
    fn errors_name_the_server_message_and_the_item() {
        let e = responses_to_chat(&json!({"input": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "short form"}]}))
        .unwrap_err();
        assert_eq!(e.kind, ConvertErrorKind::UnknownItem);
        assert_eq!(e.pointer, "/input/1");
        assert_eq!(e.to_string(), "/input/1: Cannot determine type of 'item'");
        assert_eq!(kind(json!({"model": "m"})), ConvertErrorKind::InputRequired);
        assert_eq!(
            kind(json!({"input": "x", "previous_response_id": "resp_1"})),
            ConvertErrorKind::PreviousResponseId
        );
        // a non-string previous_response_id falls back to "" (json_value), no error
        assert!(responses_to_chat(&json!({"input": "x", "previous_response_id": 3})).is_ok());
        assert_eq!(
            kind(json!({"input": 3})),
            ConvertErrorKind::InputNotStringOrArray
        );
        assert_eq!(
            kind(json!({"input": "x", "tools": {}})),
            ConvertErrorKind::ToolsNotArray
        );
        assert_eq!(
            kind(
                json!({"input": [{"type": "custom_tool_call", "call_id": "c", "name": "apply_patch", "input": "*** Begin Patch"}]})
            ),
            ConvertErrorKind::UnknownItem
        );
        assert_eq!(
            kind(
                json!({"input": [{"type": "function_call_output", "call_id": "c", "output": [{"type": "output_text", "text": "x"}]}]})
            ),
            ConvertErrorKind::ToolOutputType
        );
        assert_eq!(
            kind(
                json!({"input": [{"type": "reasoning", "summary": [], "encrypted_content": "…"}]})
            ),
            ConvertErrorKind::ReasoningContentNotArray
        );
        assert_eq!(
            kind(
                json!({"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]})
            ),
            ConvertErrorKind::InputFileUnsupported
        );
        assert_eq!(
            kind(json!({"input": ["just a string"]})),
            ConvertErrorKind::UnknownItem
        );
    }

    #[test]
    fn non_function_tools_are_dropped_and_functions_get_strict() {
        let c = responses_to_chat(&json!({"input": "x", "tools": [
            {"type": "function", "name": "f", "parameters": {"type": "object"}},
            {"type": "custom", "name": "apply_patch", "format": {"type": "grammar"}},
            {"type": "function", "name": "g", "strict": false},
            {"type": "web_search"}]}))
        .unwrap();
        assert_eq!(
            c.body["tools"],
            json!([
                {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}, "strict": true}},
                {"type": "function", "function": {"name": "g", "strict": false}}])
        );
        assert_eq!(c.dropped.len(), 2);
        assert_eq!(c.dropped[0].pointer, "/tools/1");
        assert_eq!(
            c.dropped[0].what,
            DroppedKind::Tool {
                tool_type: "custom".into(),
                name: Some("apply_patch".into())
            }
        );
        assert!(c.dropped[1].describe().contains("'web_search' skipped"));
        // all tools dropped: no `tools` key at all
        let c =
            responses_to_chat(&json!({"input": "x", "tools": [{"type": "web_search"}]})).unwrap();
        assert!(c.body.get("tools").is_none());
    }

    /// Every case of tests/data/responses/conversion.json, captured from llama-server b11434
    /// itself (scripts/capture-responses-conversion.py: the `converted request:` line its `-v`
    /// log prints for each POST /v1/responses, and its 400 message): the port gives the same
    /// body, byte for byte (key order included), the same error message, and drops the tools
    /// the server's log says it skipped.
    #[test]
    fn matches_llama_server_b11434() {
        let cases: Vec<Value> =
            serde_json::from_str(include_str!("../../tests/data/responses/conversion.json"))
                .unwrap();
        assert!(cases.len() >= 20);
        for c in &cases {
            let name = c["name"].as_str().unwrap();
            let got = responses_to_chat(&c["request"]);
            match (&c["converted"], &c["error"], got) {
                (Value::String(want), _, Ok(conv)) => {
                    assert_eq!(&serde_json::to_string(&conv.body).unwrap(), want, "{name}");
                    let skipped: Vec<&str> = c["skipped_tool_types"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|t| t.as_str().unwrap())
                        .collect();
                    let dropped: Vec<&str> = conv
                        .dropped
                        .iter()
                        .filter_map(|d| match &d.what {
                            DroppedKind::Tool { tool_type, .. } => Some(tool_type.as_str()),
                            _ => None,
                        })
                        .collect();
                    assert_eq!(dropped, skipped, "{name}");
                }
                (Value::Null, Value::String(msg), Err(e)) => {
                    assert_eq!(e.kind.server_message(), msg, "{name}")
                }
                (want, msg, got) => panic!("{name}: server {want} / {msg}, port {got:?}"),
            }
        }
    }
}
