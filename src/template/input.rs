//! What a chat template is rendered with: messages, tools, flags and special tokens, built from
//! an OpenAI chat body or an Anthropic messages body and normalised as llama.cpp does.

use serde_json::{Map, Value, json};

/// The variables a chat template sees, before normalisation into the Jinja context.
///
/// Built from a request by [`RenderInput::from_openai_request`] or
/// [`RenderInput::from_anthropic_request`]; [`RenderInput::context`] gives the context object as
/// transformers' `apply_chat_template` passes it to Jinja (`messages`, `tools`, `documents`,
/// `add_generation_prompt`, `bos_token`, `eos_token`, then every `chat_template_kwargs` entry).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RenderInput {
    /// The `messages` array (OpenAI shape), normalised (see [`normalize_messages`]).
    pub messages: Value,
    /// The `tools` array when the request has one (`None` → the template sees `tools = none`,
    /// as transformers passes `tools=None`).
    pub tools: Option<Value>,
    /// Append the assistant header at the end (`add_generation_prompt`, default true as
    /// llama-server's chat endpoints do).
    pub add_generation_prompt: bool,
    /// BOS token text (`bos_token`); `None` leaves the variable undefined.
    pub bos_token: Option<String>,
    /// EOS token text (`eos_token`); `None` leaves the variable undefined.
    pub eos_token: Option<String>,
    /// Extra template variables (`chat_template_kwargs`, e.g. `{"enable_thinking": false}`),
    /// applied last (they override the variables above, as in transformers).
    pub chat_template_kwargs: Map<String, Value>,
    /// What normalisation changed or could not do (e.g. tool-call arguments that are not JSON),
    /// one sentence each with a JSON Pointer into the request.
    pub notes: Vec<String>,
    /// The OpenAI body as received (after Anthropic conversion), for profiles that re-read the
    /// request themselves (the llama.cpp profile keeps tool-call argument strings verbatim).
    pub request: Option<Value>,
}

impl RenderInput {
    /// From an OpenAI chat-completions body (`messages`, `tools`, and beside them optionally
    /// `add_generation_prompt`, `bos_token`, `eos_token`, `chat_template_kwargs`). Missing or
    /// non-array `messages` yields an empty list (and a note). Never fails.
    pub fn from_openai_request(body: &Value) -> RenderInput {
        let mut notes = Vec::new();
        let mut messages = match body.get("messages") {
            Some(m @ Value::Array(_)) => m.clone(),
            Some(_) => {
                notes.push("/messages is not an array; rendered with no messages".to_owned());
                json!([])
            }
            None => {
                notes.push("request has no /messages; rendered with no messages".to_owned());
                json!([])
            }
        };
        normalize_messages(&mut messages, &mut notes);
        let tools = match body.get("tools") {
            None | Some(Value::Null) => None,
            Some(t) => Some(t.clone()),
        };
        let add_generation_prompt = body
            .get("add_generation_prompt")
            .and_then(Value::as_bool)
            .unwrap_or(true);
        let str_field = |k: &str| body.get(k).and_then(Value::as_str).map(str::to_owned);
        let chat_template_kwargs = body
            .get("chat_template_kwargs")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        RenderInput {
            messages,
            tools,
            add_generation_prompt,
            bos_token: str_field("bos_token"),
            eos_token: str_field("eos_token"),
            chat_template_kwargs,
            notes,
            request: Some(body.clone()),
        }
    }

    /// From an Anthropic `/v1/messages` body, converted to the OpenAI shape as llama-server does
    /// ([`anthropic_to_openai`]), then as [`RenderInput::from_openai_request`].
    pub fn from_anthropic_request(body: &Value) -> RenderInput {
        let mut oai = anthropic_to_openai(body);
        if let (Some(obj), Some(src)) = (oai.as_object_mut(), body.as_object()) {
            for k in ["add_generation_prompt", "bos_token", "eos_token"] {
                if let Some(v) = src.get(k) {
                    obj.insert(k.to_owned(), v.clone());
                }
            }
        }
        RenderInput::from_openai_request(&oai)
    }

    /// Whether the request carries a non-empty `tools` array (selects a `tool_use` template in a
    /// named template list, as transformers does).
    pub fn has_tools(&self) -> bool {
        self.tools
            .as_ref()
            .is_some_and(|t| t.as_array().is_some_and(|a| !a.is_empty()))
    }

    /// Fills `bos_token` / `eos_token` from a template source when the request does not set
    /// them.
    pub fn with_default_tokens(mut self, bos: Option<&str>, eos: Option<&str>) -> RenderInput {
        if self.bos_token.is_none() {
            self.bos_token = bos.map(str::to_owned);
        }
        if self.eos_token.is_none() {
            self.eos_token = eos.map(str::to_owned);
        }
        self
    }

    /// The Jinja context as a JSON object, in transformers' order: `messages`, `tools`
    /// (null when absent), `documents` (null), `add_generation_prompt`, `bos_token`,
    /// `eos_token` (when known), then `chat_template_kwargs` entries (overriding).
    pub fn context(&self) -> Value {
        let mut ctx = Map::new();
        ctx.insert("messages".into(), self.messages.clone());
        ctx.insert("tools".into(), self.tools.clone().unwrap_or(Value::Null));
        ctx.insert("documents".into(), Value::Null);
        ctx.insert(
            "add_generation_prompt".into(),
            Value::Bool(self.add_generation_prompt),
        );
        if let Some(b) = &self.bos_token {
            ctx.insert("bos_token".into(), Value::String(b.clone()));
        }
        if let Some(e) = &self.eos_token {
            ctx.insert("eos_token".into(), Value::String(e.clone()));
        }
        for (k, v) in &self.chat_template_kwargs {
            ctx.insert(k.clone(), v.clone());
        }
        Value::Object(ctx)
    }
}

/// llama.cpp's input normalisation before rendering (common/chat.cpp, build 11434,
/// `requires_non_null_content` and `func_args_not_string`): an assistant message with
/// `tool_calls` and no `content` gets `content: ""`; string `function.arguments` holding JSON
/// are parsed to values. Arguments that are not JSON stay strings and add a note (llama-server
/// rejects such a request: "Failed to parse tool call arguments as JSON").
pub fn normalize_messages(messages: &mut Value, notes: &mut Vec<String>) {
    let Some(list) = messages.as_array_mut() else {
        return;
    };
    for (i, msg) in list.iter_mut().enumerate() {
        let Some(obj) = msg.as_object_mut() else {
            continue;
        };
        if !obj.contains_key("tool_calls") {
            continue;
        }
        if !obj.contains_key("content") || obj.get("content") == Some(&Value::Null) {
            obj.insert("content".into(), Value::String(String::new()));
        }
        let Some(calls) = obj.get_mut("tool_calls").and_then(Value::as_array_mut) else {
            continue;
        };
        for (j, call) in calls.iter_mut().enumerate() {
            let Some(args) = call
                .get_mut("function")
                .and_then(|f| f.get_mut("arguments"))
            else {
                continue;
            };
            if let Value::String(s) = args {
                match serde_json::from_str::<Value>(s) {
                    Ok(v) => *args = v,
                    Err(e) => notes.push(format!(
                        "/messages/{i}/tool_calls/{j}/function/arguments is not JSON ({e}); left as a string (llama-server rejects it)"
                    )),
                }
            }
        }
    }
}

/// Converts an Anthropic `/v1/messages` body to an OpenAI chat body as llama-server does
/// (tools/server/server-chat.cpp `server_chat_convert_anthropic_to_oai`, build 11434):
/// `system` (string or text blocks, concatenated) becomes a leading system message; `text`
/// blocks stay content parts, `thinking` becomes `reasoning_content`, `tool_use` becomes
/// `tool_calls` (arguments = compact JSON of `input` in its key order: build 11434's
/// `common_json` wraps `nlohmann::ordered_json`, common/json.cpp), `tool_result` becomes `role: "tool"`
/// messages (text parts concatenated); `image` becomes `image_url`; `tools[].input_schema`
/// becomes `function.parameters`; `tool_choice` `auto` → `"auto"`, `any`/`tool` →
/// `"required"` (the tool name is dropped, `none` unmapped — llama.cpp's behaviour);
/// `stop_sequences` → `stop`; `max_tokens` default 4096; `temperature`, `top_p`, `top_k`,
/// `stream`, `chat_template_kwargs` pass through; `metadata.user_id` → `__metadata_user_id`.
/// (The `x-anthropic-billing-header` cch rewrite is also applied.) The one port of this
/// conversion: the recorder's `/apply-template` fetch and toolscope's local render both use it,
/// so the Template pane compares renders of the same converted body.
pub fn anthropic_to_openai(body: &Value) -> Value {
    let mut oai = Map::new();
    let mut out_msgs: Vec<Value> = Vec::new();
    match body.get("system") {
        Some(Value::String(s)) => {
            out_msgs.push(json!({"role": "system", "content": billing_header(s)}));
        }
        Some(Value::Array(blocks)) => {
            let mut sys = String::new();
            for b in blocks {
                if b.get("type").and_then(Value::as_str) == Some("text") {
                    sys.push_str(&billing_header(&text_of(b, "text")));
                }
            }
            out_msgs.push(json!({"role": "system", "content": sys}));
        }
        Some(Value::Null) | None => {}
        Some(_) => out_msgs.push(json!({"role": "system", "content": ""})),
    }
    for msg in body
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        convert_message(msg, &mut out_msgs);
    }
    oai.insert("messages".into(), Value::Array(out_msgs));
    if let Some(tools) = body.get("tools").and_then(Value::as_array) {
        let converted: Vec<Value> = tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": text_of(t, "name"),
                    "description": text_of(t, "description"),
                    "parameters": t.get("input_schema").cloned().unwrap_or(json!({}))
                }})
            })
            .collect();
        oai.insert("tools".into(), Value::Array(converted));
    }
    if let Some(tc) = body.get("tool_choice").filter(|v| v.is_object()) {
        match tc.get("type").and_then(Value::as_str) {
            Some("auto") => {
                oai.insert("tool_choice".into(), json!("auto"));
            }
            Some("any") | Some("tool") => {
                oai.insert("tool_choice".into(), json!("required"));
            }
            _ => {}
        }
    }
    if let Some(s) = body.get("stop_sequences") {
        oai.insert("stop".into(), s.clone());
    }
    oai.insert(
        "max_tokens".into(),
        body.get("max_tokens").cloned().unwrap_or(json!(4096)),
    );
    for k in [
        "temperature",
        "top_p",
        "top_k",
        "stream",
        "chat_template_kwargs",
    ] {
        if let Some(v) = body.get(k) {
            oai.insert(k.into(), v.clone());
        }
    }
    if let Some(th) = body.get("thinking")
        && th.get("type").and_then(Value::as_str) == Some("enabled")
    {
        oai.insert(
            "thinking_budget_tokens".into(),
            th.get("budget_tokens").cloned().unwrap_or(json!(10000)),
        );
    }
    if let Some(user) = body
        .pointer("/metadata/user_id")
        .and_then(Value::as_str)
        .filter(|u| !u.is_empty())
    {
        oai.insert("__metadata_user_id".into(), json!(user));
    }
    Value::Object(oai)
}

/// The string at `v[k]`, or empty.
fn text_of(v: &Value, k: &str) -> String {
    v.get(k).and_then(Value::as_str).unwrap_or("").to_owned()
}

/// One Anthropic message as [`anthropic_to_openai`] converts it, pushed onto `out`: its text
/// and image blocks as content parts, `thinking` as `reasoning_content`, `tool_use` as
/// `tool_calls`, then each `tool_result` as a `role: "tool"` message.
fn convert_message(msg: &Value, out: &mut Vec<Value>) {
    let role = text_of(msg, "role");
    let Some(content) = msg.get("content") else {
        if role != "assistant" {
            out.push(msg.clone());
        }
        return;
    };
    let Some(blocks) = content.as_array() else {
        out.push(msg.clone());
        return;
    };
    let mut tool_calls = Vec::new();
    let mut converted = Vec::new();
    let mut results = Vec::new();
    let mut reasoning = String::new();
    for block in blocks {
        match block.get("type").and_then(Value::as_str).unwrap_or("") {
            "text" => converted.push(block.clone()),
            "thinking" => reasoning.push_str(&text_of(block, "thinking")),
            "image" => {
                let src = block.get("source").cloned().unwrap_or(json!({}));
                if let Some(url) = image_url(&src) {
                    converted.push(json!({"type": "image_url", "image_url": {"url": url}}));
                }
            }
            "tool_use" => {
                let input = block.get("input").cloned().unwrap_or(json!({}));
                tool_calls.push(json!({
                    "id": text_of(block, "id"),
                    "type": "function",
                    "function": {"name": text_of(block, "name"), "arguments": input.to_string()}
                }));
            }
            "tool_result" => {
                let id = text_of(block, "tool_use_id");
                let content = tool_result_content(block);
                results.push(json!({"role": "tool", "tool_call_id": id, "content": content}));
            }
            _ => {}
        }
    }
    if !converted.is_empty() || !tool_calls.is_empty() || !reasoning.is_empty() {
        let mut m = Map::new();
        m.insert("role".into(), Value::String(role.clone()));
        if !converted.is_empty() {
            m.insert("content".into(), Value::Array(converted));
        } else {
            m.insert("content".into(), Value::String(String::new()));
        }
        if !tool_calls.is_empty() {
            m.insert("tool_calls".into(), Value::Array(tool_calls));
        }
        if !reasoning.is_empty() {
            m.insert("reasoning_content".into(), Value::String(reasoning));
        }
        out.push(Value::Object(m));
    }
    out.extend(results);
}

/// A `tool_result` block's content as llama-server converts it: a string as is; parts as the
/// concatenated text, or as text and `image_url` parts when one is an image.
fn tool_result_content(block: &Value) -> Value {
    match block.get("content") {
        Some(Value::String(s)) => Value::String(s.clone()),
        Some(Value::Array(parts)) => {
            let mut text = String::new();
            let mut out_parts = Vec::new();
            let mut images = false;
            for p in parts {
                match p.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        let t = text_of(p, "text");
                        text.push_str(&t);
                        out_parts.push(json!({"type": "text", "text": t}));
                    }
                    Some("image") => {
                        images = true;
                        let src = p.get("source").cloned().unwrap_or(json!({}));
                        if let Some(url) = image_url(&src) {
                            out_parts.push(json!({"type": "image_url", "image_url": {"url": url}}));
                        }
                    }
                    _ => {}
                }
            }
            if images {
                Value::Array(out_parts)
            } else {
                Value::String(text)
            }
        }
        _ => Value::String(String::new()),
    }
}

/// [`anthropic_to_openai`] with the server's one input check: a body without `messages` is
/// refused ("'messages' is required", tools/server/server-chat.cpp, build 11434).
///
/// Errors: `'messages' is required`.
pub fn anthropic_to_openai_checked(body: &Value) -> Result<Value, String> {
    if body.get("messages").is_none() {
        return Err("'messages' is required".to_owned());
    }
    Ok(anthropic_to_openai(body))
}

fn image_url(src: &Value) -> Option<String> {
    match src.get("type").and_then(Value::as_str) {
        Some("base64") => {
            let mt = src
                .get("media_type")
                .and_then(Value::as_str)
                .unwrap_or("image/jpeg");
            let data = src.get("data").and_then(Value::as_str).unwrap_or("");
            Some(format!("data:{mt};base64,{data}"))
        }
        Some("url") => Some(
            src.get("url")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
        ),
        _ => None,
    }
}

/// llama.cpp `normalize_anthropic_billing_header`: the 5-character `cch=` stamp of an
/// `x-anthropic-billing-header:` system prompt is replaced by `fffff`.
fn billing_header(s: &str) -> String {
    const PREFIX: &str = "x-anthropic-billing-header:";
    if !s.starts_with(PREFIX) {
        return s.to_owned();
    }
    let Some(rel) = s[PREFIX.len()..].find("cch=") else {
        return s.to_owned();
    };
    let at = PREFIX.len() + rel + 4;
    if at + 5 < s.len()
        && s.as_bytes()[at + 5] == b';'
        && s.is_char_boundary(at)
        && s.is_char_boundary(at + 5)
    {
        format!("{}fffff{}", &s[..at], &s[at + 5..])
    } else {
        s.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_normalisation() {
        let body = json!({"messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "tool_calls": [{"id": "a", "type": "function", "function": {"name": "f", "arguments": "{\"x\": 1}"}}]},
            {"role": "assistant", "content": null, "tool_calls": [{"function": {"name": "g", "arguments": "not json"}}]}
        ], "chat_template_kwargs": {"enable_thinking": false}, "add_generation_prompt": false});
        let inp = RenderInput::from_openai_request(&body);
        assert_eq!(inp.messages[1]["content"], json!(""));
        assert_eq!(
            inp.messages[1]["tool_calls"][0]["function"]["arguments"],
            json!({"x": 1})
        );
        assert_eq!(inp.messages[2]["content"], json!(""));
        assert_eq!(
            inp.messages[2]["tool_calls"][0]["function"]["arguments"],
            json!("not json")
        );
        assert_eq!(inp.notes.len(), 1);
        assert!(!inp.add_generation_prompt);
        assert_eq!(inp.context()["enable_thinking"], json!(false));
        assert_eq!(inp.context()["tools"], Value::Null);
    }

    #[test]
    fn anthropic_conversion_as_llama_server() {
        // Expected shape hand-derived from server_chat_convert_anthropic_to_oai (build 11434).
        let body = json!({
            "system": [{"type": "text", "text": "Be brief."}],
            "messages": [
                {"role": "user", "content": "Weather in Vienna?"},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "need tool"},
                    {"type": "tool_use", "id": "tu1", "name": "get_weather", "input": {"city": "Vienna"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu1", "content": [{"type": "text", "text": "12C"}]}]}
            ],
            "tools": [{"name": "get_weather", "description": "d", "input_schema": {"type": "object"}}],
            "tool_choice": {"type": "tool", "name": "get_weather"},
            "stop_sequences": ["X"]
        });
        let oai = anthropic_to_openai(&body);
        assert_eq!(
            oai["messages"][0],
            json!({"role": "system", "content": "Be brief."})
        );
        assert_eq!(oai["messages"][2]["content"], json!(""));
        assert_eq!(oai["messages"][2]["reasoning_content"], json!("need tool"));
        assert_eq!(
            oai["messages"][2]["tool_calls"][0]["function"]["arguments"],
            json!("{\"city\":\"Vienna\"}")
        );
        assert_eq!(
            oai["messages"][3],
            json!({"role": "tool", "tool_call_id": "tu1", "content": "12C"})
        );
        assert_eq!(oai["messages"].as_array().unwrap().len(), 4);
        assert_eq!(oai["tool_choice"], json!("required"));
        assert_eq!(oai["stop"], json!(["X"]));
        assert_eq!(oai["max_tokens"], json!(4096));
        assert_eq!(
            oai["tools"][0]["function"]["parameters"],
            json!({"type": "object"})
        );
        let inp = RenderInput::from_anthropic_request(&body);
        assert_eq!(
            inp.messages[2]["tool_calls"][0]["function"]["arguments"],
            json!({"city": "Vienna"})
        );
    }

    #[test]
    fn billing_header_stamp() {
        assert_eq!(
            billing_header("x-anthropic-billing-header: a=1; cch=a5145;You are"),
            "x-anthropic-billing-header: a=1; cch=fffff;You are"
        );
        assert_eq!(billing_header("plain"), "plain");
    }
}
