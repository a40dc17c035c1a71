//! The assistant reply of one exchange, however it arrived (non-streamed JSON or a stream).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One tool call as the server delivered it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct CallRecord {
    /// OpenAI `tool_calls[].index` (streams) or position; Anthropic content block index.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<u64>,
    /// `id` (OpenAI `call_…`, Anthropic `toolu_…`), when sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Function / tool name.
    pub name: String,
    /// Arguments as raw text: OpenAI `function.arguments` (concatenated deltas for streams);
    /// Anthropic `input` serialized, or concatenated `input_json_delta.partial_json`.
    pub arguments: String,
}

impl CallRecord {
    /// The arguments parsed as JSON (`Err` when they do not concatenate to JSON).
    pub fn arguments_json(&self) -> Result<Value, serde_json::Error> {
        if self.arguments.trim().is_empty() {
            return Ok(Value::Object(Default::default()));
        }
        serde_json::from_str(&self.arguments)
    }
}

/// The assistant message of one exchange.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AssistantMessage {
    /// Visible text (OpenAI `content`, Anthropic `text` blocks concatenated).
    pub content: String,
    /// Reasoning text (OpenAI-compatible `reasoning_content` / `reasoning`, Anthropic
    /// `thinking` blocks concatenated).
    pub reasoning: String,
    pub tool_calls: Vec<CallRecord>,
    /// OpenAI `finish_reason` (`stop`, `length`, `tool_calls`, …) or Anthropic `stop_reason`
    /// (`end_turn`, `max_tokens`, `stop_sequence`, `tool_use`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    /// Anthropic `stop_sequence`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_sequence: Option<String>,
    /// `usage`, verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Value>,
    /// `model` reported by the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// llama-server `-v` extra: `__verbose.content`, the raw generated text before parsing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_text: Option<String>,
    /// Responses API: `incomplete_details.reason` of a response whose `status` (in
    /// `finish_reason`) is `incomplete` (`max_output_tokens`, `content_filter`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incomplete_reason: Option<String>,
}

/// Reads a non-streamed response body. `api` is `"openai"` (chat completion object, first
/// choice), `"anthropic"` (message object), `"completion"` (`/completion` `content` or
/// `/v1/completions` `choices[0].text`), `"responses"` (a Responses `response` object,
/// [`super::responses::from_responses_json`]) or `"ollama"` (an `/api/chat` object,
/// [`super::ollama::from_ollama_json`]). llama-server's `__verbose.content` (raw text) is
/// kept. Returns `None` when the body has neither shape.
pub fn from_response_json(api: &str, body: &Value) -> Option<AssistantMessage> {
    match api {
        "responses" => return super::responses::from_responses_json(body),
        "ollama" => {
            return super::ollama::from_ollama_json(body, super::ollama::OllamaEndpoint::Chat);
        }
        _ => {}
    }
    let mut m = AssistantMessage {
        model: body.get("model").and_then(Value::as_str).map(str::to_owned),
        usage: body.get("usage").cloned(),
        raw_text: body
            .pointer("/__verbose/content")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned),
        ..Default::default()
    };
    match api {
        "anthropic" => {
            let blocks = body.get("content")?.as_array()?;
            for (i, b) in blocks.iter().enumerate() {
                match b.get("type").and_then(Value::as_str) {
                    Some("text") => m
                        .content
                        .push_str(b.get("text").and_then(Value::as_str).unwrap_or("")),
                    Some("thinking") => m
                        .reasoning
                        .push_str(b.get("thinking").and_then(Value::as_str).unwrap_or("")),
                    Some("tool_use") => m.tool_calls.push(CallRecord {
                        index: Some(i as u64),
                        id: b.get("id").and_then(Value::as_str).map(str::to_owned),
                        name: b
                            .get("name")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_owned(),
                        arguments: b.get("input").map(|v| v.to_string()).unwrap_or_default(),
                    }),
                    _ => {}
                }
            }
            m.finish_reason = body
                .get("stop_reason")
                .and_then(Value::as_str)
                .map(str::to_owned);
            m.stop_sequence = body
                .get("stop_sequence")
                .and_then(Value::as_str)
                .map(str::to_owned);
        }
        "completion" => {
            if let Some(c) = body.get("content").and_then(Value::as_str) {
                m.content = c.to_owned();
                m.finish_reason = body
                    .get("stop_type")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
            } else {
                let ch = body.pointer("/choices/0")?;
                m.content = ch
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned();
                m.finish_reason = ch
                    .get("finish_reason")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
            }
        }
        _ => {
            let ch = body.pointer("/choices/0")?;
            let msg = ch.get("message")?;
            m.content = msg
                .get("content")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            m.reasoning = msg
                .get("reasoning_content")
                .or_else(|| msg.get("reasoning"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            if let Some(calls) = msg.get("tool_calls").and_then(Value::as_array) {
                for (i, c) in calls.iter().enumerate() {
                    let args = c.pointer("/function/arguments");
                    m.tool_calls.push(CallRecord {
                        index: c.get("index").and_then(Value::as_u64).or(Some(i as u64)),
                        id: c.get("id").and_then(Value::as_str).map(str::to_owned),
                        name: c
                            .pointer("/function/name")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_owned(),
                        arguments: match args {
                            Some(Value::String(s)) => s.clone(),
                            Some(v) => v.to_string(),
                            None => String::new(),
                        },
                    });
                }
            }
            m.finish_reason = ch
                .get("finish_reason")
                .and_then(Value::as_str)
                .map(str::to_owned);
        }
    }
    Some(m)
}

/// The parsed value of call arguments, or the raw string when they are not JSON (for reports).
pub fn arguments_value(arguments: &str) -> Value {
    if arguments.trim().is_empty() {
        return Value::Object(Default::default());
    }
    serde_json::from_str(arguments).unwrap_or_else(|_| Value::String(arguments.to_owned()))
}
