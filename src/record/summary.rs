//! One-line summaries of recorded exchanges (`toolscope proxy --headless`, `send`).
//!
//! Tool-call names are read cheaply from the recorded response: OpenAI
//! `choices[].message.tool_calls[].function.name` or stream deltas
//! `choices[].delta.tool_calls[].function.name`; Anthropic `content[]` / `content_block_start`
//! blocks of type `tool_use`. The full reassembly lives in [`crate::stream`].

use serde_json::Value;

use crate::session::{Exchange, Outcome};

/// Names of the tool calls in an exchange's response, in order (empty when none or unreadable).
pub fn tool_call_names(ex: &Exchange) -> Vec<String> {
    let mut names = Vec::new();
    let Some(resp) = &ex.response else {
        return names;
    };
    if resp.chunks.is_some() {
        let bytes = ex.response_bytes();
        let text = String::from_utf8_lossy(&bytes);
        for line in text.lines() {
            let Some(data) = line.strip_prefix("data:") else {
                continue;
            };
            let Ok(v) = serde_json::from_str::<Value>(data.trim()) else {
                continue;
            };
            collect(&v, &mut names);
        }
    } else if let Some(body) = &resp.body
        && let Ok(v) = body.json()
    {
        collect(&v, &mut names);
    }
    names
}

fn collect(v: &Value, names: &mut Vec<String>) {
    // Responses API: a streamed `response.output_item.done` function_call item, or the
    // non-streamed response's `output` items.
    let mut responses_item = |item: &Value| {
        if item.get("type").and_then(Value::as_str) == Some("function_call")
            && let Some(n) = item.get("name").and_then(Value::as_str)
        {
            names.push(n.to_owned());
        }
    };
    if v.get("type").and_then(Value::as_str) == Some("response.output_item.done")
        && let Some(item) = v.get("item")
    {
        responses_item(item);
    }
    if v.get("object").and_then(Value::as_str) == Some("response")
        && let Some(items) = v.get("output").and_then(Value::as_array)
    {
        items.iter().for_each(&mut responses_item);
    }
    if let Some(choices) = v.get("choices").and_then(Value::as_array) {
        for c in choices {
            for key in ["message", "delta"] {
                if let Some(calls) = c
                    .get(key)
                    .and_then(|m| m.get("tool_calls"))
                    .and_then(Value::as_array)
                {
                    for call in calls {
                        if let Some(n) = call
                            .get("function")
                            .and_then(|f| f.get("name"))
                            .and_then(Value::as_str)
                            && !n.is_empty()
                        {
                            names.push(n.to_owned());
                        }
                    }
                }
            }
        }
    }
    let mut anth = |b: &Value| {
        if b.get("type").and_then(Value::as_str) == Some("tool_use")
            && let Some(n) = b.get("name").and_then(Value::as_str)
        {
            names.push(n.to_owned());
        }
    };
    if let Some(blocks) = v.get("content").and_then(Value::as_array) {
        blocks.iter().for_each(&mut anth);
    }
    if let Some(b) = v.get("content_block") {
        anth(b);
    }
}

/// `#ID METHOD PATH STATUS MODEL tools=[a,b] DURATION [OUTCOME: error]`, e.g.
/// `#3 POST /v1/chat/completions 200 smollm2 tools=[get_weather] 1.234s`.
pub fn one_line(ex: &Exchange) -> String {
    let status = ex
        .response
        .as_ref()
        .map(|r| r.status.to_string())
        .unwrap_or_else(|| "---".into());
    let model = ex.model().unwrap_or_else(|| "-".into());
    let names = tool_call_names(ex);
    let tools = if names.is_empty() {
        String::new()
    } else {
        format!(" tools=[{}]", names.join(","))
    };
    let dur = ex
        .timings
        .total_us
        .map(|us| format!("{:.3}s", us as f64 / 1e6))
        .unwrap_or_else(|| "-".into());
    let mut s = format!(
        "#{} {} {} {} {}{} {}",
        ex.id, ex.request.method, ex.request.path, status, model, tools, dur
    );
    if ex.outcome != Outcome::Complete {
        let o = ex.outcome.as_str();
        s.push_str(&format!(" [{o}"));
        if let Some(e) = &ex.error {
            s.push_str(": ");
            s.push_str(e);
        }
        s.push(']');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::{Body, Chunk, Request, Response};

    #[test]
    fn names_from_openai_stream_and_anthropic_body() {
        let sse = "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"name\":\"get_weather\",\"arguments\":\"\"}}]}}]}\n\n\
                   data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{}\"}}]}}]}\n\ndata: [DONE]\n\n";
        let ex = Exchange {
            id: 2,
            request: Request {
                method: "POST".into(),
                path: "/v1/chat/completions".into(),
                body: Body::from_bytes(b"{\"model\":\"m\"}"),
                ..Default::default()
            },
            response: Some(Response {
                status: 200,
                chunks: Some(vec![Chunk {
                    t_us: 5,
                    data: Body::from_bytes(sse.as_bytes()),
                }]),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(tool_call_names(&ex), vec!["get_weather"]);
        assert!(
            one_line(&ex).starts_with("#2 POST /v1/chat/completions 200 m tools=[get_weather]")
        );
        let anth = Exchange {
            response: Some(Response {
                status: 200,
                body: Some(Body::from_bytes(br#"{"content":[{"type":"text","text":"x"},{"type":"tool_use","name":"a"},{"type":"tool_use","name":"b"}]}"#)),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(tool_call_names(&anth), vec!["a", "b"]);
    }
}
