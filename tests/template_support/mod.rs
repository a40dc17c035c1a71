//! Shared scenarios for the template tests (conformance, end-to-end) and the benchmark's idea
//! of a typical request.
#![allow(dead_code)]

use serde_json::{Value, json};

fn weather_tool() -> Value {
    json!({"type": "function", "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "City name, e.g. \"Vienna\""},
            "unit": {"anyOf": [{"type": "string", "enum": ["celsius", "fahrenheit"]}, {"type": "null"}], "default": null},
            "days": {"type": ["integer", "null"], "description": "forecast days"},
            "when": {"type": "string", "nullable": true}
        }, "required": ["city"]}}})
}

fn search_tool() -> Value {
    json!({"type": "function", "function": {
        "name": "search_docs",
        "description": "Search the documentation",
        "parameters": {"type": "object", "properties": {
            "query": {"type": "string"},
            "limit": {"type": "number", "minimum": 1.0, "maximum": 50}
        }, "required": ["query"]}}})
}

/// The three scenarios: name → OpenAI request body.
pub fn scenarios() -> Vec<(&'static str, Value)> {
    vec![
        (
            "plain",
            json!({
                "messages": [
                    {"role": "system", "content": "You are a helpful assistant."},
                    {"role": "user", "content": "Hello! What's 2+2?"},
                    {"role": "assistant", "content": "2 + 2 = 4."},
                    {"role": "user", "content": "Thanks. And in Wien, Grüße? 😀"}
                ],
                "add_generation_prompt": true,
                "bos_token": "<s>",
                "eos_token": "</s>"
            }),
        ),
        (
            "tools",
            json!({
                "messages": [
                    {"role": "system", "content": "You can call tools."},
                    {"role": "user", "content": "What's the weather in Vienna?"},
                    {"role": "assistant", "tool_calls": [{"id": "a1b2c3d4e", "type": "function",
                        "function": {"name": "get_weather", "arguments": {"city": "Vienna", "unit": null, "days": 2}}}]},
                    {"role": "tool", "tool_call_id": "a1b2c3d4e", "name": "get_weather", "content": "{\"temp_c\": 12.5, \"sky\": \"cloudy\"}"}
                ],
                "tools": [weather_tool(), search_tool()],
                "add_generation_prompt": true,
                "bos_token": "<s>",
                "eos_token": "</s>"
            }),
        ),
        (
            "reasoning_multi",
            json!({
                "messages": [
                    {"role": "user", "content": "Compare the weather in Vienna and Graz, then search the docs for 'units'."},
                    {"role": "assistant", "content": "", "reasoning_content": "Two cities: call the tool twice.",
                     "tool_calls": [
                        {"id": "v1e2n3n4a", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Vienna\"}"}},
                        {"id": "g1r2a3z4b", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Graz\", \"days\": 1}"}}
                     ]},
                    {"role": "tool", "tool_call_id": "v1e2n3n4a", "name": "get_weather", "content": "12C"},
                    {"role": "tool", "tool_call_id": "g1r2a3z4b", "name": "get_weather", "content": "9C"},
                    {"role": "assistant", "content": "Vienna is warmer (12C vs 9C).", "reasoning_content": "12 > 9."},
                    {"role": "user", "content": "Now the docs, please."}
                ],
                "tools": [weather_tool(), search_tool()],
                "add_generation_prompt": true,
                "chat_template_kwargs": {"enable_thinking": true},
                "bos_token": "<s>",
                "eos_token": "</s>"
            }),
        ),
    ]
}
