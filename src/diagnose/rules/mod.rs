//! The rules of [`super::check_exchange`], grouped by what they look at. Each function takes an
//! [`super::ExchangeContext`] and returns its findings (empty when the rule does not apply or
//! lacks data).

pub mod calls;
pub mod choice;
pub mod finish;
pub mod input;
pub mod protocol;
pub mod replay;
pub mod responses;
pub mod schema;
pub mod server;
pub mod stop;
pub mod tokens;

#[cfg(test)]
pub(crate) mod testutil {
    use serde_json::Value;

    use crate::diagnose::ExchangeContext;
    use crate::session::Api;

    /// OpenAI pair.
    pub fn openai(req: Value, resp: Value) -> ExchangeContext {
        crate::analysis::facts::from_pair(Api::Openai, Some(req), Some(resp))
    }

    /// Anthropic pair.
    pub fn anthropic(req: Value, resp: Value) -> ExchangeContext {
        crate::analysis::facts::from_pair(Api::Anthropic, Some(req), Some(resp))
    }

    /// An OpenAI chat completion with `content`, `calls` (name, arguments) and `finish`.
    pub fn oa_resp(content: Option<&str>, calls: &[(&str, &str)], finish: &str) -> Value {
        let calls: Vec<Value> = calls
            .iter()
            .enumerate()
            .map(|(i, (n, a))| serde_json::json!({"id": format!("call_{i}"), "type": "function", "function": {"name": n, "arguments": a}}))
            .collect();
        let mut msg = serde_json::json!({"role": "assistant", "content": content});
        if !calls.is_empty() {
            msg["tool_calls"] = Value::Array(calls);
        }
        serde_json::json!({"object": "chat.completion", "choices": [{"index": 0, "finish_reason": finish, "message": msg}]})
    }

    /// Two tools, get_weather and get_time, each taking `{"city": string}` (required).
    pub fn two_tools() -> Value {
        serde_json::json!([
            {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
            {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
        ])
    }

    /// Rule ids of findings.
    pub fn ids(f: &[crate::Finding]) -> Vec<&'static str> {
        f.iter().map(|f| f.rule.id()).collect()
    }
}
