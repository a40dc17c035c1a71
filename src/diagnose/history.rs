//! A request's chat-shaped history, reduced to what the rules compare: messages ([`Msg`]) and
//! their tool calls ([`Call`]) after the engine's API conversion (Anthropic and Responses bodies
//! as llama-server converts them). Pure. Read by the input rules
//! ([`crate::diagnose::rules::input`]) and by the loop across exchanges
//! ([`crate::conversation`], which re-exports these names).

use serde::Serialize;
use serde_json::Value;

use crate::session::Api;
use crate::stream::AssistantMessage;

/// One tool call in a chat-shaped message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Call {
    /// `id` (`call_…`, `toolu_…`, a Responses `call_id`), when the API has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Function name.
    pub name: String,
    /// Arguments as canonical JSON (object keys sorted, no spaces) when they parse, else the
    /// text as sent.
    pub arguments: String,
}

/// One chat-shaped message, reduced to what the loop compares.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Msg {
    /// `system`, `developer`, `user`, `assistant`, `tool`.
    pub role: String,
    /// Text content (string content, or the text parts joined).
    pub text: String,
    /// Reasoning sent back with an assistant message (`reasoning_content`, Anthropic
    /// `thinking` blocks after conversion).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reasoning: String,
    /// Tool calls of an assistant message.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<Call>,
    /// For a tool result: the id of the call it answers (`tool_call_id`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// For a tool result without an id: the tool's name (Ollama `tool_name`, OpenAI `name`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
}

impl Msg {
    /// True for a tool result message.
    pub fn is_result(&self) -> bool {
        self.role == "tool" || self.role == "function"
    }

    /// The comparison key: role, text, calls (name and arguments) and the answered id. Call
    /// ids and reasoning are left out (agents re-send history without reasoning, and some
    /// rewrite ids), so a reply and the same message sent back compare equal.
    pub fn key(&self) -> u64 {
        let mut h = Fnv::new();
        h.str(&self.role);
        h.str(self.text.trim());
        for c in &self.calls {
            h.str(&c.name);
            h.str(&c.arguments);
        }
        h.str(self.call_id.as_deref().unwrap_or(""));
        h.finish()
    }

    /// The message from one chat-shaped JSON message (OpenAI / converted Anthropic / Ollama).
    pub fn from_chat(m: &Value) -> Msg {
        let role = m
            .get("role")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let calls = m
            .get("tool_calls")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(|c| Call {
                        id: c.get("id").and_then(Value::as_str).map(str::to_owned),
                        name: c
                            .pointer("/function/name")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_owned(),
                        arguments: canonical_args(c.pointer("/function/arguments")),
                    })
                    .collect()
            })
            .unwrap_or_default();
        Msg {
            text: content_text(m.get("content")),
            reasoning: m
                .get("reasoning_content")
                .or_else(|| m.get("thinking"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            calls,
            call_id: m
                .get("tool_call_id")
                .and_then(Value::as_str)
                .map(str::to_owned),
            tool_name: m
                .get("tool_name")
                .or_else(|| m.get("name"))
                .and_then(Value::as_str)
                .filter(|_| role == "tool" || role == "function")
                .map(str::to_owned),
            role,
        }
    }

    /// The assistant reply of an exchange as a message.
    pub fn from_reply(m: &AssistantMessage) -> Msg {
        Msg {
            role: "assistant".into(),
            text: m.content.clone(),
            reasoning: m.reasoning.clone(),
            calls: m
                .tool_calls
                .iter()
                .map(|c| Call {
                    id: c.id.clone(),
                    name: c.name.clone(),
                    arguments: match serde_json::from_str::<Value>(&c.arguments) {
                        Ok(v) => canonical_json(&v),
                        Err(_) => c.arguments.clone(),
                    },
                })
                .collect(),
            call_id: None,
            tool_name: None,
        }
    }
}

/// Text of a message `content`: a string, or the `text` of its parts joined (OpenAI
/// `{"type":"text","text"}`, Anthropic text blocks, Responses `input_text`/`output_text`).
pub fn content_text(c: Option<&Value>) -> String {
    match c {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| match p {
                Value::String(s) => Some(s.as_str()),
                _ => p.get("text").and_then(Value::as_str),
            })
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

/// Call arguments as canonical JSON: a string holding JSON is parsed first; an object is
/// taken as is (Ollama). Text that is not JSON stays as sent.
fn canonical_args(a: Option<&Value>) -> String {
    match a {
        None | Some(Value::Null) => "{}".into(),
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(v) => canonical_json(&v),
            Err(_) => s.clone(),
        },
        Some(v) => canonical_json(v),
    }
}

/// JSON with object keys sorted and no whitespace (two argument texts that differ only in key
/// order or spacing compare equal).
pub fn canonical_json(v: &Value) -> String {
    fn go(v: &Value, out: &mut String) {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                out.push('{');
                for (i, k) in keys.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String((*k).clone()).to_string());
                    out.push(':');
                    go(&m[k.as_str()], out);
                }
                out.push('}');
            }
            Value::Array(a) => {
                out.push('[');
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    go(x, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut s = String::new();
    go(v, &mut s);
    s
}

/// The chat-shaped `messages` of a request body, as the engine's chat template receives them:
/// OpenAI chat and Ollama `/api/chat` bodies as they are; Anthropic bodies through
/// llama-server's conversion ([`crate::template::input::anthropic_to_openai`]: `system` first,
/// `tool_use` → `tool_calls`, `tool_result` → `role: "tool"` with `tool_call_id`); a Responses
/// body (`input` items) through llama-server's conversion
/// ([`crate::template::responses::responses_to_chat`]: `function_call` → `tool_calls` with
/// `id` = `call_id`, `function_call_output` → `role: "tool"` with `tool_call_id` = `call_id`,
/// so a `function_call_output` whose `call_id` matches no earlier call is
/// `loop.result_unknown_id` like any other result). `None` when the body has no message list
/// (or the conversion refuses it).
pub fn chat_messages(api: Api, body: &Value) -> Option<Vec<Value>> {
    let converted;
    let body = match api {
        Api::Anthropic => {
            converted = crate::template::input::anthropic_to_openai(body);
            &converted
        }
        Api::Responses => {
            converted = crate::template::responses::responses_to_chat(body)
                .ok()?
                .body;
            &converted
        }
        _ => body,
    };
    body.get("messages").and_then(Value::as_array).cloned()
}

/// `s` cut to at most `n` bytes at a character boundary, with `…` when cut.
pub fn short(s: &str, n: usize) -> String {
    if s.len() <= n {
        return s.to_owned();
    }
    let mut e = n;
    while !s.is_char_boundary(e) {
        e -= 1;
    }
    format!("{}…", &s[..e])
}

/// FNV-1a, 64 bit: stable keys for messages (no randomness, same across runs).
#[derive(Debug, Clone, Copy)]
pub struct Fnv(u64);

impl Fnv {
    pub(crate) fn new() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
    pub(crate) fn bytes(&mut self, b: &[u8]) {
        for &x in b {
            self.0 ^= u64::from(x);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
    pub(crate) fn str(&mut self, s: &str) {
        self.bytes(s.as_bytes());
        self.bytes(&[0xff]);
    }
    pub(crate) fn u64(&mut self, v: u64) {
        self.bytes(&v.to_le_bytes());
    }
    pub(crate) fn finish(self) -> u64 {
        self.0
    }
}
