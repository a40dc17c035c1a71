//! What a request asked for: tools, `tool_choice`, stop strings, token limit — read the same
//! way for the OpenAI chat and Anthropic messages APIs.

use serde_json::Value;

use crate::session::Api;

/// The `tool_choice` a request made, normalised across APIs.
///
/// OpenAI chat: `"auto"`, `"none"`, `"required"`, `{"type":"function","function":{"name":N}}`
/// (also the Responses-style `{"type":"function","name":N}`).
/// Anthropic messages: `{"type":"auto"}`, `{"type":"any"}`, `{"type":"tool","name":N}`,
/// `{"type":"none"}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolChoice {
    /// No `tool_choice`, or `auto`.
    Auto,
    /// No tool may be called.
    None,
    /// Some tool must be called (OpenAI `required`, Anthropic `any`).
    Required,
    /// This tool must be called.
    Named(String),
    /// A value this reader does not know (kept verbatim for messages).
    Other(String),
}

impl ToolChoice {
    /// Reads `tool_choice` from a request body of `api`.
    pub fn from_request(api: Api, request: &Value) -> ToolChoice {
        let Some(tc) = request.get("tool_choice") else {
            return ToolChoice::Auto;
        };
        match tc {
            Value::Null => ToolChoice::Auto,
            Value::String(s) => match s.as_str() {
                "auto" => ToolChoice::Auto,
                "none" => ToolChoice::None,
                "required" | "any" => ToolChoice::Required,
                other => ToolChoice::Other(other.to_owned()),
            },
            Value::Object(o) => {
                let ty = o.get("type").and_then(Value::as_str).unwrap_or("");
                let name = o
                    .get("function")
                    .and_then(|f| f.get("name"))
                    .or_else(|| o.get("name"))
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                match (ty, name) {
                    ("auto", _) => ToolChoice::Auto,
                    ("none", _) => ToolChoice::None,
                    ("any", _) | ("required", _) => ToolChoice::Required,
                    ("function" | "tool", Some(n)) => ToolChoice::Named(n),
                    _ => ToolChoice::Other(tc.to_string()),
                }
            }
            other => {
                let _ = api;
                ToolChoice::Other(other.to_string())
            }
        }
    }

    /// Short description as the user wrote it, for messages (`"none"`, `{"type":"tool","name":"get_time"}`).
    pub fn describe(request: &Value) -> String {
        request
            .get("tool_choice")
            .map(|v| v.to_string())
            .unwrap_or_else(|| "auto".into())
    }
}

/// One tool offered by the request.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDef {
    pub name: String,
    /// JSON Schema of the arguments (OpenAI `function.parameters`, Anthropic `input_schema`).
    pub schema: Option<Value>,
    /// JSON Pointer of the schema in the request body.
    pub pointer: String,
}

/// The tools a request offers (`tools[]`, both APIs; a legacy `functions[]`), found by the one
/// tools locator ([`crate::schema::tools::locate_tools`]). Entries without a name are skipped.
/// Empty when there are none.
pub fn tools(request: &Value) -> Vec<ToolDef> {
    let Ok(list) = crate::schema::tools::locate_tools(request) else {
        return Vec::new();
    };
    list.tools
        .iter()
        .filter(|t| !t.name.is_empty())
        .map(|t| ToolDef {
            name: t.name.clone(),
            schema: list.schema(request, t).cloned(),
            pointer: t
                .schema_pointer
                .clone()
                .unwrap_or_else(|| format!("{}/{}", list.list_pointer, t.index)),
        })
        .collect()
}

/// Stop strings the request asked for, with the JSON Pointer of each: OpenAI `stop` (string or
/// array), Anthropic `stop_sequences`, llama-server `/completion` `stop`.
pub fn stop_strings(request: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for key in ["stop", "stop_sequences"] {
        match request.get(key) {
            Some(Value::String(s)) if !s.is_empty() => out.push((s.clone(), format!("/{key}"))),
            Some(Value::Array(a)) => {
                for (i, v) in a.iter().enumerate() {
                    if let Some(s) = v.as_str().filter(|s| !s.is_empty()) {
                        out.push((s.to_owned(), format!("/{key}/{i}")));
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// The request's output token limit (`max_completion_tokens`, `max_tokens`, `n_predict`, the
/// Responses API's `max_output_tokens`).
pub fn max_tokens(request: &Value) -> Option<u64> {
    [
        "max_completion_tokens",
        "max_tokens",
        "n_predict",
        "max_output_tokens",
    ]
    .iter()
    .find_map(|k| request.get(*k).and_then(Value::as_u64))
}

/// Guesses the API of a bare request/response pair: the OpenAI Responses API when the request
/// has `input` or `instructions` and no `messages`, or `max_output_tokens`, or the response is
/// `"object":"response"` (or has `output` and `status`), or the stream's events are
/// `response.*`; Ollama's `/api/chat` when the response is an object with `message` and a
/// boolean `done` (or the stream is NDJSON lines of them), or the request has Ollama's
/// `options` / `keep_alive`; Anthropic when the request has `stop_sequences`, a top-level
/// `system`, `thinking`, or the response is `"type":"message"` or an Anthropic event stream;
/// a raw completion (`/completion`) for a `prompt` request or a completion stream; OpenAI
/// otherwise.
pub fn guess_api(request: Option<&Value>, response: Option<&Value>, sse: Option<&str>) -> Api {
    let anthropic_req = request.is_some_and(|r| {
        r.get("stop_sequences").is_some()
            || r.get("system").is_some()
            || r.get("thinking").is_some()
            || r.get("tools").and_then(Value::as_array).is_some_and(|t| t.iter().any(|t| t.get("input_schema").is_some()))
            || matches!(r.get("tool_choice"), Some(Value::Object(o)) if matches!(o.get("type").and_then(Value::as_str), Some("tool" | "any")))
    });
    let anthropic_resp =
        response.is_some_and(|r| r.get("type").and_then(Value::as_str) == Some("message"));
    let anthropic_sse =
        sse.is_some_and(|s| s.contains("message_start") || s.contains("content_block_delta"));
    // A raw completion: a `prompt` request without `messages`, or a stream whose first JSON
    // event is llama-server `/completion` (`content` + `stop`) or `/v1/completions`
    // (`choices[0].text`).
    let completion_req =
        request.is_some_and(|r| r.get("prompt").is_some() && r.get("messages").is_none());
    let completion_sse = sse.is_some_and(|s| {
        crate::stream::sse::decode_bytes(s.as_bytes())
            .iter()
            .find_map(|e| serde_json::from_str::<Value>(&e.data).ok())
            .is_some_and(|v| {
                (v.get("content").is_some() && v.get("stop").is_some())
                    || v.pointer("/choices/0/text").is_some()
            })
    });
    let responses_req = request.is_some_and(|r| {
        (r.get("messages").is_none()
            && (r.get("input").is_some() || r.get("instructions").is_some()))
            || r.get("max_output_tokens").is_some()
    });
    let responses_resp = response.is_some_and(|r| {
        r.get("object").and_then(Value::as_str) == Some("response")
            || (r.get("output").is_some_and(Value::is_array) && r.get("status").is_some())
    });
    let responses_sse = sse.is_some_and(|s| {
        crate::stream::sse::decode_bytes(s.as_bytes())
            .iter()
            .find_map(|e| serde_json::from_str::<Value>(&e.data).ok())
            .and_then(|v| v.get("type").and_then(Value::as_str).map(str::to_owned))
            .is_some_and(|t| t.starts_with("response.") || t == "error")
    });
    let ollama_obj = |v: &Value| {
        v.get("message").is_some_and(Value::is_object)
            && v.get("done").is_some_and(Value::is_boolean)
    };
    let ollama_req = request.is_some_and(|r| {
        r.get("messages").is_some()
            && (r.get("options").is_some_and(Value::is_object) || r.get("keep_alive").is_some())
    });
    let ollama_resp = response.is_some_and(ollama_obj);
    let ollama_ndjson = sse.is_some_and(|s| {
        s.lines()
            .find(|l| !l.trim().is_empty())
            .and_then(|l| serde_json::from_str::<Value>(l).ok())
            .is_some_and(|v| ollama_obj(&v))
    });
    if responses_req || responses_resp || responses_sse {
        return Api::Responses;
    }
    if ollama_resp || ollama_ndjson || (ollama_req && response.is_none() && sse.is_none()) {
        return Api::Ollama;
    }
    if anthropic_req || anthropic_resp || anthropic_sse {
        Api::Anthropic
    } else if completion_req || completion_sse {
        Api::Completion
    } else {
        Api::Openai
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tool_choice_forms() {
        let oa = |v: Value| ToolChoice::from_request(Api::Openai, &json!({ "tool_choice": v }));
        assert_eq!(oa(json!("none")), ToolChoice::None);
        assert_eq!(oa(json!("required")), ToolChoice::Required);
        assert_eq!(
            oa(json!({"type":"function","function":{"name":"get_time"}})),
            ToolChoice::Named("get_time".into())
        );
        assert_eq!(
            oa(json!({"type":"tool","name":"get_time"})),
            ToolChoice::Named("get_time".into())
        );
        assert_eq!(oa(json!({"type":"any"})), ToolChoice::Required);
        assert_eq!(oa(json!({"type":"none"})), ToolChoice::None);
        assert_eq!(
            ToolChoice::from_request(Api::Openai, &json!({})),
            ToolChoice::Auto
        );
    }

    #[test]
    fn stops_and_tools() {
        let r = json!({"stop": ["a", ""], "stop_sequences": ["prime"], "tools": [{"name": "t", "input_schema": {"type": "object"}}]});
        assert_eq!(
            stop_strings(&r),
            vec![
                ("a".into(), "/stop/0".into()),
                ("prime".into(), "/stop_sequences/0".into())
            ]
        );
        assert_eq!(tools(&r)[0].pointer, "/tools/0/input_schema");
    }
}
