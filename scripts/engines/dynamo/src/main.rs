//! dynamo-parse: runs the Dynamo frontend's own tool-call parser code (the `dynamo-parsers`
//! crate, linked in-process) over raw model texts, for toolscope's engine corpus.
//!
//!     echo '{"parser": "hermes", "tools": [...], "texts": ["..."]}' | dynamo-parse
//!
//! Input (stdin, one JSON object): `parser` (a name in dynamo-parsers' registry,
//! `tool_calling/parsers.rs` `get_tool_parser_map`), `tools` (the request's OpenAI tools
//! array), `texts` (raw model texts, special tokens kept), and optionally
//! `mode`: "frontend" (default) | "jail" | "batch", and `chunking`: "whole" (default, the
//! text arrives as one delta) | "chars" (one delta per character).
//!
//! Output (stdout): a JSON array, one object per text:
//! `{"content", "reasoning", "tool_calls": [{"name", "arguments"}], "error"}`; `arguments` is
//! the argument string exactly as Dynamo returns it; `error` is null unless the parser
//! returned an error (batch mode only: the jail never fails, it releases the text).
//!
//! Modes, all calling the crate's own public functions:
//! - "batch": `tool_calling::try_tool_call_parse_aggregate_finalize(text, Some(parser),
//!   Some(tools))` (tools.rs:44 → parsers.rs:167 `detect_and_parse_tool_call_with_recovery`),
//!   the finalize call the jail and the frontend's aggregator make; content = the returned
//!   normal text.
//! - "jail": the frontend preprocessor's stream step, `tool_calling::jail::
//!   apply_tool_calling_jail(Some(parser), Some(Auto), Some(tools), false, stream)`
//!   (jail/mod.rs:3522) over the text as delta(s) plus a `finish_reason: stop` delta; the
//!   output deltas are folded as the frontend's DeltaAggregator folds them (content
//!   concatenated, tool-call chunks merged by index: name first-wins, arguments appended).
//! - "frontend": "jail", then the aggregator's after-fold step for a choice left with text
//!   and no calls (dynamo lib/llm chat_completions/aggregator.rs, `parse_complete_tool_output`
//!   for a v1 family): `try_tool_call_parse_aggregate_finalize(text, Some(parser), None)`;
//!   calls found → they and the normal text replace the choice's; none → the text stays,
//!   except for `harmony` (with `<|channel|>` in the text) and `kimi_k3`/`kimi-k3`, whose
//!   normal text replaces it. No reasoning parser runs (a `--dyn-tool-call-parser` only
//!   deployment), so `reasoning` is always "".

use std::collections::BTreeMap;
use std::io::Read;

use dynamo_parsers::tool_calling::jail::{Annotated, apply_tool_calling_jail};
use dynamo_parsers::tool_calling::{ToolDefinition, try_tool_call_parse_aggregate_finalize};
use dynamo_protocols::types::{
    ChatChoiceStream, ChatCompletionMessageContent, ChatCompletionStreamResponseDelta,
    ChatCompletionToolChoiceOption, CreateChatCompletionStreamResponse, FinishReason, Role,
};
use futures::StreamExt;
use serde_json::{Value, json};

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Batch,
    Jail,
    Frontend,
}

struct Call {
    name: String,
    arguments: String,
}

struct Out {
    content: String,
    calls: Vec<Call>,
    error: Option<String>,
}

fn tool_definitions(tools: &Value) -> Vec<ToolDefinition> {
    // as the frontend maps a request's tools: function.name, .parameters, .strict
    tools
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| {
            let f = t.get("function").unwrap_or(t);
            Some(ToolDefinition {
                name: f.get("name")?.as_str()?.to_string(),
                parameters: f.get("parameters").cloned(),
                strict: f.get("strict").and_then(Value::as_bool),
            })
        })
        .collect()
}

#[allow(deprecated)]
fn delta(content: Option<String>, finish: bool) -> Annotated<CreateChatCompletionStreamResponse> {
    let choice = ChatChoiceStream {
        index: 0,
        delta: ChatCompletionStreamResponseDelta {
            role: Some(Role::Assistant),
            content: content.map(ChatCompletionMessageContent::Text),
            tool_calls: None,
            function_call: None,
            refusal: None,
            reasoning_content: None,
        },
        finish_reason: finish.then_some(FinishReason::Stop),
        logprobs: None,
    };
    Annotated {
        data: Some(CreateChatCompletionStreamResponse {
            id: "toolscope".to_string(),
            choices: vec![choice],
            created: 0,
            model: "stand-in".to_string(),
            system_fingerprint: None,
            object: "chat.completion.chunk".to_string(),
            usage: None,
            service_tier: None,
        }),
        id: None,
        event: None,
        comment: None,
        error: None,
    }
}

async fn batch(text: &str, parser: &str, tools: &[ToolDefinition]) -> Out {
    let tools = (!tools.is_empty()).then_some(tools);
    match try_tool_call_parse_aggregate_finalize(text, Some(parser), tools).await {
        Ok((calls, normal)) => Out {
            content: normal.unwrap_or_default(),
            calls: calls
                .into_iter()
                .map(|c| Call {
                    name: c.function.name,
                    arguments: c.function.arguments,
                })
                .collect(),
            error: None,
        },
        Err(e) => Out {
            content: String::new(),
            calls: Vec::new(),
            error: Some(format!("{e:#}")),
        },
    }
}

async fn jail(text: &str, parser: &str, tools: &[ToolDefinition], chars: bool) -> Out {
    let mut inputs: Vec<_> = if chars {
        text.chars().map(|c| delta(Some(c.to_string()), false)).collect()
    } else {
        vec![delta(Some(text.to_string()), false)]
    };
    inputs.push(delta(None, true));
    let out: Vec<_> = apply_tool_calling_jail(
        Some(parser.to_string()),
        Some(ChatCompletionToolChoiceOption::Auto),
        (!tools.is_empty()).then(|| tools.to_vec()),
        false,
        futures::stream::iter(inputs),
    )
    .collect()
    .await;
    let mut content = String::new();
    // index -> (name, arguments), as DeltaAggregator's merge_tool_call_chunk
    let mut calls: BTreeMap<u32, (Option<String>, String)> = BTreeMap::new();
    for a in out {
        let Some(resp) = a.data else { continue };
        for choice in resp.choices {
            if let Some(ChatCompletionMessageContent::Text(t)) = &choice.delta.content {
                content.push_str(t);
            }
            for tc in choice.delta.tool_calls.unwrap_or_default() {
                let e = calls.entry(tc.index).or_insert((None, String::new()));
                if let Some(f) = tc.function {
                    if e.0.is_none() {
                        e.0 = f.name;
                    }
                    if let Some(a) = f.arguments {
                        e.1.push_str(&a);
                    }
                }
            }
        }
    }
    Out {
        content,
        calls: calls
            .into_values()
            .filter_map(|(n, arguments)| Some(Call { name: n?, arguments }))
            .collect(),
        error: None,
    }
}

async fn frontend(text: &str, parser: &str, tools: &[ToolDefinition], chars: bool) -> Out {
    let mut o = jail(text, parser, tools, chars).await;
    if !o.calls.is_empty() || o.content.is_empty() {
        return o;
    }
    // aggregator.rs: v1 families re-parse the folded text, without the request's tools
    if let Ok((calls, normal)) =
        try_tool_call_parse_aggregate_finalize(&o.content, Some(parser), None).await
    {
        if !calls.is_empty() {
            o.calls = calls
                .into_iter()
                .map(|c| Call {
                    name: c.function.name,
                    arguments: c.function.arguments,
                })
                .collect();
            o.content = normal.unwrap_or_default();
        } else if (parser == "harmony" && o.content.contains("<|channel|>"))
            || matches!(parser, "kimi_k3" | "kimi-k3")
        {
            o.content = normal.unwrap_or_default();
        }
    }
    o
}

fn main() {
    let mut input = String::new();
    std::io::stdin().read_to_string(&mut input).expect("stdin");
    let req: Value = serde_json::from_str(&input).expect("stdin: one JSON object");
    let parser = req["parser"].as_str().expect("parser: a name").to_string();
    let mode = match req.get("mode").and_then(Value::as_str).unwrap_or("frontend") {
        "batch" => Mode::Batch,
        "jail" => Mode::Jail,
        "frontend" => Mode::Frontend,
        m => panic!("mode {m:?}: batch | jail | frontend"),
    };
    let chars = match req.get("chunking").and_then(Value::as_str).unwrap_or("whole") {
        "whole" => false,
        "chars" => true,
        c => panic!("chunking {c:?}: whole | chars"),
    };
    let tools = tool_definitions(&req["tools"]);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let mut results = Vec::new();
    for t in req["texts"].as_array().expect("texts: an array") {
        let text = t.as_str().expect("texts: strings");
        // a panic in the parser code is reported as that text's error (a server would
        // answer 500), not the end of the run
        let o = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            rt.block_on(async {
                match mode {
                    Mode::Batch => batch(text, &parser, &tools).await,
                    Mode::Jail => jail(text, &parser, &tools, chars).await,
                    Mode::Frontend => frontend(text, &parser, &tools, chars).await,
                }
            })
        }))
        .unwrap_or_else(|p| Out {
            content: String::new(),
            calls: Vec::new(),
            error: Some(format!(
                "panic: {}",
                p.downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_default()
            )),
        });
        results.push(json!({
            "content": o.content,
            "reasoning": "",
            "tool_calls": o.calls.iter().map(|c| json!({"name": c.name, "arguments": c.arguments})).collect::<Vec<_>>(),
            "error": o.error,
        }));
    }
    println!("{}", serde_json::to_string(&results).unwrap());
}
