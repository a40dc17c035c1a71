//! llama-server's conversion of an Anthropic `/v1/messages` body into an OpenAI chat body.
//!
//! `POST /apply-template` only accepts an OpenAI chat body (llama.cpp
//! tools/server/server-context.cpp `post_apply_template` calls `oaicompat_chat_params_parse`
//! directly), while `/v1/messages` first runs `server_chat_convert_anthropic_to_oai`
//! (tools/server/server-chat.cpp, build 11434). To fetch the prompt the server really rendered
//! for a `/v1/messages` exchange, the recorder converts the body the same way and sends the
//! result to `/apply-template`. This is a faithful port of that function, including its
//! faults: `tool_choice {"type":"tool","name":…}` becomes `"required"` (the name is dropped)
//! and `{"type":"none"}` is not mapped at all.

use serde_json::{Map, Value, json};

/// Converts an Anthropic messages body as llama-server build 11434 does.
///
/// Errors: `messages` is missing (the server answers "'messages' is required").
pub fn anthropic_to_openai(body: &Value) -> Result<Value, String> {
    let str_of = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    let mut oai = Map::new();
    let mut messages: Vec<Value> = Vec::new();

    if let Some(system) = body.get("system").filter(|s| !s.is_null()) {
        let mut text = String::new();
        if let Some(s) = system.as_str() {
            text = s.to_owned();
            normalize_billing_header(&mut text);
        } else if let Some(blocks) = system.as_array() {
            for b in blocks {
                if str_of(b, "type") == "text" {
                    let mut t = str_of(b, "text");
                    normalize_billing_header(&mut t);
                    text.push_str(&t);
                }
            }
        }
        messages.push(json!({"role": "system", "content": text}));
    }

    let msgs = body
        .get("messages")
        .ok_or_else(|| "'messages' is required".to_owned())?;
    if let Some(msgs) = msgs.as_array() {
        for msg in msgs {
            let role = str_of(msg, "role");
            let Some(content) = msg.get("content") else {
                if role != "assistant" {
                    messages.push(msg.clone());
                }
                continue;
            };
            let Some(blocks) = content.as_array() else {
                messages.push(msg.clone());
                continue;
            };
            let mut tool_calls = Vec::new();
            let mut converted = Vec::new();
            let mut tool_results = Vec::new();
            let mut reasoning = String::new();
            for block in blocks {
                match str_of(block, "type").as_str() {
                    "text" => converted.push(block.clone()),
                    "thinking" => reasoning.push_str(&str_of(block, "thinking")),
                    "image" => {
                        let source = block.get("source").cloned().unwrap_or_else(|| json!({}));
                        match str_of(&source, "type").as_str() {
                            "base64" => {
                                let media = source.get("media_type").and_then(Value::as_str).unwrap_or("image/jpeg");
                                let url = format!("data:{media};base64,{}", str_of(&source, "data"));
                                converted.push(json!({"type": "image_url", "image_url": {"url": url}}));
                            }
                            "url" => converted.push(json!({"type": "image_url", "image_url": {"url": str_of(&source, "url")}})),
                            _ => {}
                        }
                    }
                    "tool_use" => {
                        let input = block.get("input").cloned().unwrap_or_else(|| json!({}));
                        tool_calls.push(json!({
                            "id": str_of(block, "id"),
                            "type": "function",
                            "function": {"name": str_of(block, "name"), "arguments": dump_like_nlohmann(&input)}
                        }));
                    }
                    "tool_result" => {
                        let id = str_of(block, "tool_use_id");
                        match block.get("content") {
                            Some(Value::String(s)) => tool_results
                                .push(json!({"role": "tool", "tool_call_id": id, "content": s})),
                            Some(Value::Array(parts)) => {
                                let mut text = String::new();
                                let mut out_parts = Vec::new();
                                let mut has_images = false;
                                for c in parts {
                                    match str_of(c, "type").as_str() {
                                        "text" => {
                                            let t = str_of(c, "text");
                                            text.push_str(&t);
                                            out_parts.push(json!({"type": "text", "text": t}));
                                        }
                                        "image" => {
                                            has_images = true;
                                            let source = c
                                                .get("source")
                                                .cloned()
                                                .unwrap_or_else(|| json!({}));
                                            match str_of(&source, "type").as_str() {
                                                "base64" => {
                                                    let media = source.get("media_type").and_then(Value::as_str).unwrap_or("image/jpeg");
                                                    let url = format!("data:{media};base64,{}", str_of(&source, "data"));
                                                    out_parts.push(json!({"type": "image_url", "image_url": {"url": url}}));
                                                }
                                                "url" => out_parts.push(json!({"type": "image_url", "image_url": {"url": str_of(&source, "url")}})),
                                                _ => {}
                                            }
                                        }
                                        _ => {}
                                    }
                                }
                                let content = if has_images {
                                    Value::Array(out_parts)
                                } else {
                                    Value::String(text)
                                };
                                tool_results.push(
                                    json!({"role": "tool", "tool_call_id": id, "content": content}),
                                );
                            }
                            _ => tool_results
                                .push(json!({"role": "tool", "tool_call_id": id, "content": ""})),
                        }
                    }
                    _ => {}
                }
            }
            let has_calls = !tool_calls.is_empty();
            if !converted.is_empty() || has_calls || !reasoning.is_empty() {
                let mut m = Map::new();
                m.insert("role".into(), Value::String(role));
                if !converted.is_empty() {
                    m.insert("content".into(), Value::Array(converted));
                } else {
                    m.insert("content".into(), Value::String(String::new()));
                }
                if has_calls {
                    m.insert("tool_calls".into(), Value::Array(tool_calls));
                }
                if !reasoning.is_empty() {
                    m.insert("reasoning_content".into(), Value::String(reasoning));
                }
                messages.push(Value::Object(m));
            }
            messages.extend(tool_results);
        }
    }
    oai.insert("messages".into(), Value::Array(messages));

    if let Some(tools) = body.get("tools").and_then(Value::as_array) {
        let oai_tools: Vec<Value> = tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": str_of(t, "name"),
                    "description": str_of(t, "description"),
                    "parameters": t.get("input_schema").cloned().unwrap_or_else(|| json!({})),
                }})
            })
            .collect();
        oai.insert("tools".into(), Value::Array(oai_tools));
    }

    if let Some(tc) = body.get("tool_choice").filter(|t| t.is_object()) {
        match str_of(tc, "type").as_str() {
            "auto" => {
                oai.insert("tool_choice".into(), json!("auto"));
            }
            "any" | "tool" => {
                oai.insert("tool_choice".into(), json!("required"));
            }
            _ => {}
        }
    }
    if let Some(stop) = body.get("stop_sequences") {
        oai.insert("stop".into(), stop.clone());
    }
    oai.insert(
        "max_tokens".into(),
        body.get("max_tokens").cloned().unwrap_or(json!(4096)),
    );
    for key in [
        "temperature",
        "top_p",
        "top_k",
        "stream",
        "chat_template_kwargs",
    ] {
        if let Some(v) = body.get(key) {
            oai.insert(key.into(), v.clone());
        }
    }
    if let Some(thinking) = body.get("thinking")
        && str_of(thinking, "type") == "enabled"
    {
        let budget = thinking
            .get("budget_tokens")
            .cloned()
            .unwrap_or(json!(10000));
        oai.insert("thinking_budget_tokens".into(), budget);
    }
    if let Some(user) = body
        .get("metadata")
        .and_then(|m| m.get("user_id"))
        .and_then(Value::as_str)
        && !user.is_empty()
    {
        oai.insert("__metadata_user_id".into(), json!(user));
    }
    Ok(Value::Object(oai))
}

/// nlohmann's `dump()` writes compact JSON like serde_json (keys in the input order here,
/// since serde_json's `preserve_order` is on; nlohmann sorts object keys).
fn dump_like_nlohmann(v: &Value) -> String {
    fn sorted(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                Value::Object(
                    keys.into_iter()
                        .map(|k| (k.clone(), sorted(&m[k])))
                        .collect(),
                )
            }
            Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    serde_json::to_string(&sorted(v)).unwrap_or_default()
}

/// Replaces the 5-character `cch=` stamp of an `x-anthropic-billing-header:` system prompt
/// with `fffff`, as llama-server does to keep its prefix cache usable.
fn normalize_billing_header(text: &mut String) {
    const PREFIX: &str = "x-anthropic-billing-header:";
    if !text.starts_with(PREFIX) {
        return;
    }
    let Some(rel) = text[PREFIX.len()..].find("cch=") else {
        return;
    };
    let start = PREFIX.len() + rel + 4;
    let bytes = text.as_bytes();
    if start + 5 < bytes.len()
        && bytes[start + 5] == b';'
        && text.is_char_boundary(start)
        && text.is_char_boundary(start + 5)
    {
        text.replace_range(start..start + 5, "fffff");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_tool_choice_becomes_required_and_none_is_dropped() {
        let body = json!({"model": "m", "max_tokens": 64, "system": "be brief",
            "messages": [{"role": "user", "content": "hi"}],
            "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}],
            "tool_choice": {"type": "tool", "name": "get_weather"}, "stop_sequences": ["X"], "stream": true});
        let oai = anthropic_to_openai(&body).unwrap();
        assert_eq!(oai["tool_choice"], json!("required"));
        assert_eq!(oai["stop"], json!(["X"]));
        assert_eq!(
            oai["messages"][0],
            json!({"role": "system", "content": "be brief"})
        );
        assert_eq!(oai["tools"][0]["function"]["description"], json!(""));
        assert_eq!(oai["stream"], json!(true));
        let mut none = body.clone();
        none["tool_choice"] = json!({"type": "none"});
        assert!(
            anthropic_to_openai(&none)
                .unwrap()
                .get("tool_choice")
                .is_none()
        );
    }

    #[test]
    fn tool_use_and_result_blocks() {
        let body = json!({"messages": [
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {"b": 1, "a": 2}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "ok"}]}]}
        ]});
        let oai = anthropic_to_openai(&body).unwrap();
        assert_eq!(oai["max_tokens"], json!(4096));
        assert_eq!(oai["messages"][0]["content"], json!(""));
        assert_eq!(
            oai["messages"][0]["tool_calls"][0]["function"]["arguments"],
            json!("{\"a\":2,\"b\":1}")
        );
        assert_eq!(
            oai["messages"][1],
            json!({"role": "tool", "tool_call_id": "t1", "content": "ok"})
        );
        assert!(anthropic_to_openai(&json!({})).is_err());
    }

    #[test]
    fn billing_header_stamp() {
        let mut s = "x-anthropic-billing-header: cc_version=2; cch=a5145;You are".to_owned();
        normalize_billing_header(&mut s);
        assert_eq!(
            s,
            "x-anthropic-billing-header: cc_version=2; cch=fffff;You are"
        );
    }
}
