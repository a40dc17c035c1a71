//! llama-server's conversion of an Anthropic `/v1/messages` body into an OpenAI chat body.
//!
//! `POST /apply-template` only accepts an OpenAI chat body (llama.cpp
//! tools/server/server-context.cpp `post_apply_template` calls `oaicompat_chat_params_parse`
//! directly), while `/v1/messages` first runs `server_chat_convert_anthropic_to_oai`
//! (tools/server/server-chat.cpp, build 11434). To fetch the prompt the server really rendered
//! for a `/v1/messages` exchange, the recorder converts the body the same way and sends the
//! result to `/apply-template`. The conversion is [`crate::template::input::anthropic_to_openai`]
//! (the one port, including the server's faults: `tool_choice {"type":"tool","name":…}`
//! becomes `"required"`, `{"type":"none"}` is not mapped at all); this module keeps the
//! recorder's entry point.

use serde_json::Value;

/// Converts an Anthropic messages body as llama-server build 11434 does
/// ([`crate::template::input::anthropic_to_openai_checked`]).
///
/// Errors: `messages` is missing (the server answers "'messages' is required").
pub fn anthropic_to_openai(body: &Value) -> Result<Value, String> {
    crate::template::input::anthropic_to_openai_checked(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
            json!("{\"b\":1,\"a\":2}"),
            "input key order, as build 11434's ordered_json dumps it"
        );
        assert_eq!(
            oai["messages"][1],
            json!({"role": "tool", "tool_call_id": "t1", "content": "ok"})
        );
        assert!(anthropic_to_openai(&json!({})).is_err());
    }
}
