//! The agent's loop across exchanges: a session's exchanges grouped into conversations, each
//! tool call linked to the result that answered it and to the turn that followed, and the
//! prompt reuse between one turn and the next. Pure: per-exchange facts ([`TurnInput`]) in,
//! [`Loop`] out; no network, files, terminal or clock.
//!
//! * A request **continues** an earlier one when its chat-shaped `messages` start with the
//!   earlier request's messages and have more after them (normally the earlier reply, then
//!   the tool results). The longest such earlier request is its parent turn.
//! * A request that continues none **starts a conversation**. When it starts while another
//!   conversation's last reply has a tool call that no later turn has answered yet, it is a
//!   **sub-agent** conversation: it is nested under that call (the call whose argument strings
//!   appear in its messages, else the first pending call).
//! * Each call of a reply is linked to the tool result that answered it in the next turn, by
//!   id (`tool_call_id`; Anthropic `tool_use_id` and Responses `call_id` arrive as
//!   `tool_call_id` after the chat conversion) or, for APIs without ids (Ollama `/api/chat`),
//!   by position among the results. Calls of one reply are siblings (parallel calls).
//!
//! The chat-shaped history of a request is [`chat_messages`]: OpenAI chat and Ollama bodies as
//! they are, Anthropic bodies converted as llama-server b11434 converts them
//! (`tools/server/server-chat.cpp` `server_chat_convert_anthropic_to_oai`, ported in
//! [`crate::template::input::anthropic_to_openai`]).

pub mod reuse;
pub mod rules;

use std::collections::HashMap;

use serde::Serialize;
use serde_json::Value;

use crate::session::Api;
use crate::stream::AssistantMessage;

pub use reuse::{Cause, EngineCounters, PromptTokens, Reuse};

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

/// What the loop needs of one exchange. Built by the caller from an analysed exchange
/// ([`TurnInput::from_analysed`]); kept compact (no bodies).
#[derive(Debug, Clone, Default)]
pub struct TurnInput {
    /// Exchange id.
    pub exchange: u64,
    /// Request start, microseconds since the Unix epoch (from the exchange's `started`).
    pub started_us: Option<i64>,
    /// Microseconds from the request start to the last response byte.
    pub total_us: Option<u64>,
    /// The chat-shaped request history.
    pub messages: Vec<Msg>,
    /// Tool names in request order.
    pub tools: Vec<String>,
    /// Hash of the whole `tools` array (definitions, in order).
    pub tools_key: u64,
    /// The reply, when one was read.
    pub reply: Option<Msg>,
    /// The prompt the engine rendered (server render with tokens when recorded).
    pub prompt: Option<PromptTokens>,
    /// The model's raw generated text, when known (raw-output annotation, `__verbose.content`,
    /// else the reply's content when it made no call).
    pub raw_reply: Option<String>,
    /// The engine's own prompt-cache counters.
    pub engine: EngineCounters,
}

impl TurnInput {
    /// From an analysed exchange: its request (chat-shaped), reply, server render and raw
    /// output. `None` for exchanges that are not chat generations (no message list).
    pub fn from_analysed(a: &crate::analysis::AnalysedExchange) -> Option<TurnInput> {
        let api = a.api?;
        let body = a.request.as_ref()?;
        let msgs = chat_messages(api, body)?;
        let tools_v = body.get("tools");
        let tools = tools_v
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(|t| {
                        t.pointer("/function/name")
                            .or_else(|| t.get("name"))
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_owned()
                    })
                    .collect()
            })
            .unwrap_or_default();
        let mut h = Fnv::new();
        h.str(&tools_v.map(|t| t.to_string()).unwrap_or_default());
        let reply = a.message.as_ref().map(Msg::from_reply);
        let raw_reply = a
            .raw
            .as_ref()
            .and_then(|r| r.models_text())
            .map(str::to_owned)
            .or_else(|| a.message.as_ref().and_then(|m| m.raw_text.clone()))
            .or_else(|| {
                a.message
                    .as_ref()
                    .filter(|m| m.tool_calls.is_empty() && m.reasoning.is_empty())
                    .map(|m| m.content.clone())
            });
        let prompt = a.server_render.as_ref().and_then(|r| {
            r.prompt.as_ref().map(|p| PromptTokens {
                text: p.clone(),
                tokens: r.tokens.as_ref().map(|t| {
                    t.iter()
                        .map(|t| (t.id, t.piece.as_bytes().len() as u32))
                        .collect()
                }),
                source: r.source.to_owned(),
            })
        });
        Some(TurnInput {
            exchange: a.exchange.id,
            started_us: parse_rfc3339_us(&a.exchange.started),
            total_us: a.exchange.timings.total_us,
            messages: msgs.iter().map(Msg::from_chat).collect(),
            tools,
            tools_key: h.finish(),
            reply,
            prompt,
            raw_reply,
            engine: EngineCounters::of_exchange(&a.exchange),
        })
    }
}

/// Microseconds since the Unix epoch of an RFC 3339 time (`None` when it does not parse).
pub fn parse_rfc3339_us(s: &str) -> Option<i64> {
    let t = time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok()?;
    i64::try_from(t.unix_timestamp_nanos() / 1000).ok()
}

/// One call of one reply, with what answered it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CallLink {
    /// Exchange whose reply made the call.
    pub exchange: u64,
    /// Position in that reply's calls (calls of one reply are siblings).
    pub index: usize,
    pub call: Call,
    /// The turn that followed (the next request of the conversation), when there was one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_turn: Option<u64>,
    /// The result that answered it: exchange and 0-based index in that request's messages.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<(u64, usize)>,
    /// Text of the result (shortened to 200 bytes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result_text: Option<String>,
    /// Sub-agent conversations this call started (conversation ids).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub subagents: Vec<usize>,
}

/// One turn: an exchange in its conversation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Turn {
    pub exchange: u64,
    /// The turn this one continues (the previous exchange of the conversation).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<u64>,
    /// Messages in the request.
    pub messages: usize,
    /// Messages new in this turn (after the parent's messages).
    pub new_messages: usize,
    /// False when the assistant message after the parent's history is not the parent's reply
    /// as the model wrote it (the agent rewrote or dropped it).
    pub reply_kept: bool,
    /// Model time: request start to last response byte, microseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_us: Option<u64>,
    /// Tool time: the parent's last response byte to this request's start, microseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_us: Option<i64>,
    /// Indices into [`Loop::calls`] of this turn's reply's calls.
    pub calls: Vec<usize>,
    /// Prompt reuse against the parent's prompt plus reply (when prompts were recorded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reuse: Option<Reuse>,
}

/// A conversation: a root request and the turns that continue it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Conversation {
    /// 0-based id (in order of first exchange).
    pub id: usize,
    /// For a sub-agent: the exchange and call index that started it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_by: Option<(u64, usize)>,
    /// Turns in exchange order (branches, when two requests continue one turn, both listed).
    pub turns: Vec<Turn>,
}

/// A session's loop.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Loop {
    pub conversations: Vec<Conversation>,
    /// Every call of every reply.
    pub calls: Vec<CallLink>,
    /// Tool results whose id no earlier call had: `(exchange, message index, id)`.
    pub unknown_results: Vec<(u64, usize, String)>,
}

impl Loop {
    /// Conversation id and turn position of an exchange.
    pub fn turn_of(&self, exchange: u64) -> Option<(usize, usize)> {
        self.conversations.iter().find_map(|c| {
            c.turns
                .iter()
                .position(|t| t.exchange == exchange)
                .map(|p| (c.id, p))
        })
    }
}

/// Collects exchanges' facts (in any order: a session file holds exchanges in the order they
/// ended) and folds them, in exchange id (request start) order, into a [`Loop`]. Keeps per
/// turn the message keys and its prompt tokens; no bodies.
#[derive(Debug, Default)]
pub struct Builder {
    inputs: Vec<TurnInput>,
}

impl Builder {
    pub fn new() -> Builder {
        Builder::default()
    }

    /// Adds one exchange's facts.
    pub fn push(&mut self, t: TurnInput) {
        self.inputs.push(t);
    }

    /// The loop.
    pub fn finish(mut self) -> Loop {
        self.inputs.sort_by_key(|t| t.exchange);
        let mut f = Fold::default();
        for t in self.inputs {
            f.push(t);
        }
        f.out
    }
}

/// The loop of a whole session: every generation exchange analysed
/// ([`crate::analysis::Depth::Findings`]) and folded. For tests and small sessions; `check`
/// folds the facts of the analyses it runs anyway.
pub fn of_session(s: &crate::session::read::Session) -> Loop {
    let mut b = Builder::new();
    for ex in &s.exchanges {
        if !ex.api().is_generation() {
            continue;
        }
        let anns = s.annotations.get(&ex.id).map(Vec::as_slice).unwrap_or(&[]);
        let ctx = crate::analysis::Context {
            header: &s.header,
            annotations: anns,
        };
        let a = crate::analysis::analyse(ex.clone(), ctx, crate::analysis::Depth::Findings);
        if let Some(t) = TurnInput::from_analysed(&a) {
            b.push(t);
        }
    }
    b.finish()
}

/// The fold behind [`Builder`]: exchanges in id order.
#[derive(Debug, Default)]
struct Fold {
    out: Loop,
    /// Per turn: (conversation, turn position, message count, reply, call link indices,
    /// end time, input).
    turns: Vec<Kept>,
    /// (message count, prefix hash) → index into `turns`.
    by_prefix: HashMap<(usize, u64), usize>,
    /// The same, hashed without the leading system message (for turns that have one).
    by_prefix_nosys: HashMap<(usize, u64), usize>,
    /// Turns whose reply's calls are not answered by a later turn yet.
    pending: Vec<usize>,
}

#[derive(Debug)]
struct Kept {
    conv: usize,
    pos: usize,
    input: TurnInput,
    continued: bool,
}

impl Fold {
    /// Adds one exchange's facts (exchanges come in id order).
    fn push(&mut self, t: TurnInput) {
        let keys: Vec<u64> = t.messages.iter().map(Msg::key).collect();
        let mut prefix = Vec::with_capacity(keys.len() + 1);
        let mut h = Fnv::new();
        prefix.push(h.finish());
        for k in &keys {
            h.u64(*k);
            prefix.push(h.finish());
        }
        // The same history with the system prompt left out: an agent that writes the time (or
        // another per-request field) into its system prompt still continues its conversation.
        let sys = t
            .messages
            .first()
            .is_some_and(|m| m.role == "system" || m.role == "developer");
        let mut nosys = Vec::with_capacity(keys.len() + 1);
        let mut h = Fnv::new();
        nosys.push(h.finish());
        for k in keys.iter().skip(usize::from(sys)) {
            h.u64(*k);
            nosys.push(h.finish());
        }
        // Longest earlier request whose messages this one extends; else, with the system
        // prompt left out, one whose system prompt differs only in part (a timestamp).
        let parent = (1..keys.len())
            .rev()
            .find_map(|n| self.by_prefix.get(&(n, prefix[n])).copied())
            .or_else(|| {
                if !sys {
                    return None;
                }
                (2..keys.len()).rev().find_map(|n| {
                    let p = *self.by_prefix_nosys.get(&(n, nosys[n - 1]))?;
                    let ps = &self.turns[p].input.messages[0].text;
                    similar(ps, &t.messages[0].text).then_some(p)
                })
            });
        let me = self.turns.len();
        let (conv, reply_kept, new_from) = match parent {
            Some(p) => {
                let pk = &self.turns[p];
                let n = pk.input.messages.len();
                let kept = match (&pk.input.reply, t.messages.get(n)) {
                    (Some(r), Some(m)) => r.key() == m.key(),
                    _ => false,
                };
                (pk.conv, kept, n)
            }
            None => {
                let id = self.out.conversations.len();
                let started_by = self.subagent_of(&t);
                if let Some((ex, idx)) = started_by
                    && let Some(li) = self
                        .out
                        .calls
                        .iter()
                        .position(|c| c.exchange == ex && c.index == idx)
                {
                    self.out.calls[li].subagents.push(id);
                }
                self.out.conversations.push(Conversation {
                    id,
                    started_by,
                    turns: Vec::new(),
                });
                (id, false, 0)
            }
        };
        // Results in this request's new messages, linked to the parent's calls.
        let mut known_ids: Vec<&str> = t
            .messages
            .iter()
            .flat_map(|m| m.calls.iter().filter_map(|c| c.id.as_deref()))
            .collect();
        if let Some(p) = parent
            && let Some(r) = &self.turns[p].input.reply
        {
            known_ids.extend(r.calls.iter().filter_map(|c| c.id.as_deref()));
        }
        for (i, m) in t.messages.iter().enumerate().skip(new_from) {
            if !m.is_result() {
                continue;
            }
            if let Some(id) = &m.call_id {
                // an id no assistant message before it (nor the parent's reply) called
                let earlier: Vec<&str> = t.messages[..i]
                    .iter()
                    .flat_map(|m| m.calls.iter().filter_map(|c| c.id.as_deref()))
                    .chain(
                        parent
                            .and_then(|p| self.turns[p].input.reply.as_ref())
                            .into_iter()
                            .flat_map(|r| r.calls.iter().filter_map(|c| c.id.as_deref())),
                    )
                    .collect();
                if !earlier.contains(&id.as_str()) {
                    self.out.unknown_results.push((t.exchange, i, id.clone()));
                }
            }
        }
        if let Some(p) = parent {
            let pk = &mut self.turns[p];
            pk.continued = true;
            self.pending.retain(|&x| x != p);
            let pos = pk.pos;
            let links: Vec<usize> = self.out.conversations[pk.conv].turns[pos].calls.clone();
            let results: Vec<(usize, &Msg)> = t
                .messages
                .iter()
                .enumerate()
                .skip(new_from)
                .filter(|(_, m)| m.is_result())
                .collect();
            let mut used = vec![false; results.len()];
            // by id first
            for &li in &links {
                let link = &mut self.out.calls[li];
                link.next_turn.get_or_insert(t.exchange);
                if link.result.is_some() {
                    continue;
                }
                if let Some(id) = &link.call.id
                    && let Some(k) = results
                        .iter()
                        .position(|(_, m)| m.call_id.as_deref() == Some(id.as_str()))
                {
                    used[k] = true;
                    link.result = Some((t.exchange, results[k].0));
                    link.result_text = Some(short(&results[k].1.text, 200));
                }
            }
            // then by position, for results without an id (Ollama) and calls without one
            for &li in &links {
                let link = &mut self.out.calls[li];
                if link.result.is_some() {
                    continue;
                }
                if let Some(k) = (0..results.len()).find(|&k| {
                    !used[k]
                        && results[k].1.call_id.is_none()
                        && (link.call.id.is_none() || results[k].1.call_id.is_none())
                        && results[k]
                            .1
                            .tool_name
                            .as_deref()
                            .is_none_or(|n| n == link.call.name)
                }) {
                    used[k] = true;
                    link.result = Some((t.exchange, results[k].0));
                    link.result_text = Some(short(&results[k].1.text, 200));
                }
            }
        }
        // This turn's calls.
        let mut call_links = Vec::new();
        if let Some(r) = &t.reply {
            for (i, c) in r.calls.iter().enumerate() {
                call_links.push(self.out.calls.len());
                self.out.calls.push(CallLink {
                    exchange: t.exchange,
                    index: i,
                    call: c.clone(),
                    next_turn: None,
                    result: None,
                    result_text: None,
                    subagents: Vec::new(),
                });
            }
            if !r.calls.is_empty() {
                self.pending.push(me);
            }
        }
        let (parent_ex, tool_us, reuse) = match parent {
            Some(p) => {
                let pin = &self.turns[p].input;
                let end = pin.started_us.zip(pin.total_us).map(|(s, d)| s + d as i64);
                let tool_us = end.zip(t.started_us).map(|(e, s)| s - e);
                (Some(pin.exchange), tool_us, reuse::reuse(pin, &t, new_from))
            }
            None => (None, None, None),
        };
        let c = &mut self.out.conversations[conv];
        let pos = c.turns.len();
        c.turns.push(Turn {
            exchange: t.exchange,
            parent: parent_ex,
            messages: t.messages.len(),
            new_messages: t.messages.len() - new_from,
            reply_kept: parent.is_none() || reply_kept,
            model_us: t.total_us,
            tool_us,
            calls: call_links,
            reuse,
        });
        self.by_prefix.insert((keys.len(), prefix[keys.len()]), me);
        if sys {
            self.by_prefix_nosys
                .insert((keys.len(), nosys[keys.len() - 1]), me);
        }
        // Keep the reply in the map too: a next request = messages + reply + results is found
        // through its own prefix of this length.
        self.turns.push(Kept {
            conv,
            pos,
            input: t,
            continued: false,
        });
    }

    /// The pending call a new conversation answers to, when it is a sub-agent: the latest turn
    /// with calls not yet followed by a next turn; of its calls the one whose argument strings
    /// appear in the new conversation's messages, else the first.
    fn subagent_of(&self, t: &TurnInput) -> Option<(u64, usize)> {
        let &p = self.pending.last()?;
        let pk = &self.turns[p];
        if pk.continued {
            return None;
        }
        let reply = pk.input.reply.as_ref()?;
        // a retry of the same first message is not a sub-agent
        if pk.input.messages.first().map(Msg::key) == t.messages.first().map(Msg::key) {
            return None;
        }
        let text: String = t
            .messages
            .iter()
            .map(|m| m.text.as_str())
            .collect::<Vec<_>>()
            .join("\n");
        let idx = reply
            .calls
            .iter()
            .position(|c| {
                serde_json::from_str::<Value>(&c.arguments)
                    .ok()
                    .as_ref()
                    .and_then(Value::as_object)
                    .is_some_and(|o| {
                        o.values()
                            .filter_map(Value::as_str)
                            .any(|s| s.len() >= 3 && text.contains(s))
                    })
            })
            .unwrap_or(0);
        Some((pk.input.exchange, idx))
    }
}

/// Builds the loop of exchanges given in id order.
pub fn build(turns: impl IntoIterator<Item = TurnInput>) -> Loop {
    let mut b = Builder::new();
    for t in turns {
        b.push(t);
    }
    b.finish()
}

/// True when two system prompts differ only in part: their common prefix and suffix cover at
/// least half of the shorter one (a changed timestamp or request id, not another prompt).
fn similar(a: &str, b: &str) -> bool {
    let p = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    let s = a
        .bytes()
        .rev()
        .zip(b.bytes().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let short = a.len().min(b.len());
    short > 0 && (p + s).min(short) * 2 >= short
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
pub(crate) struct Fnv(u64);

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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn turn(ex: u64, messages: Value, reply: Value) -> TurnInput {
        let msgs = messages
            .as_array()
            .unwrap()
            .iter()
            .map(Msg::from_chat)
            .collect();
        TurnInput {
            exchange: ex,
            started_us: Some(ex as i64 * 1_000_000),
            total_us: Some(400_000),
            messages: msgs,
            reply: Some(Msg::from_chat(&reply)),
            ..Default::default()
        }
    }

    fn call(id: &str, name: &str, args: &str) -> Value {
        json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}})
    }

    /// Turn 1 calls two tools at once (siblings), turn 2 answers both and calls `task`, which
    /// starts a sub-agent (exchanges 3–4) before turn 5 answers it; turn 5's results are
    /// linked, arguments compared in canonical form (key order and spaces differ).
    #[test]
    fn turns_calls_results_and_a_subagent() {
        let u = json!({"role": "user", "content": "weather and time in Lisbon, then summarise"});
        let a1 = json!({"role": "assistant", "content": null, "tool_calls": [
            call("c1", "get_weather", "{\"city\": \"Lisbon\"}"), call("c2", "get_time", "{\"city\":\"Lisbon\"}")]});
        let r1 = json!({"role": "tool", "tool_call_id": "c1", "content": "sunny"});
        let r2 = json!({"role": "tool", "tool_call_id": "c2", "content": "10:00"});
        let a2 = json!({"role": "assistant", "content": "", "tool_calls": [call("c3", "task", "{\"prompt\": \"summarise sunny 10:00\", \"n\": 1}")]});
        let sub_u = json!({"role": "user", "content": "summarise sunny 10:00"});
        let sub_a =
            json!({"role": "assistant", "content": "", "tool_calls": [call("s1", "count", "{}")]});
        let sub_r = json!({"role": "tool", "tool_call_id": "s1", "content": "2"});
        let r3 = json!({"role": "tool", "tool_call_id": "c3", "content": "Sunny at ten."});
        let l = build([
            turn(1, json!([u]), a1.clone()),
            // the agent re-sends the reply with content "" and arguments re-serialized
            turn(
                2,
                json!([u, {"role": "assistant", "content": "", "tool_calls": [
                call("c1", "get_weather", "{\"city\":\"Lisbon\"}"), call("c2", "get_time", "{ \"city\": \"Lisbon\" }")]}, r1, r2]),
                a2.clone(),
            ),
            turn(3, json!([sub_u]), sub_a.clone()),
            turn(
                4,
                json!([sub_u, sub_a, sub_r]),
                json!({"role": "assistant", "content": "Sunny at ten."}),
            ),
            turn(
                5,
                json!([u, a1, r1, r2, a2, r3]),
                json!({"role": "assistant", "content": "Done."}),
            ),
        ]);
        assert_eq!(l.conversations.len(), 2, "{l:#?}");
        let main = &l.conversations[0];
        assert_eq!(
            main.turns
                .iter()
                .map(|t| (t.exchange, t.parent, t.reply_kept))
                .collect::<Vec<_>>(),
            [(1, None, true), (2, Some(1), true), (5, Some(2), true)]
        );
        assert_eq!(main.turns[1].tool_us, Some(1_000_000 - 400_000));
        let sub = &l.conversations[1];
        assert_eq!(sub.started_by, Some((2, 0)));
        assert_eq!(
            sub.turns.iter().map(|t| t.exchange).collect::<Vec<_>>(),
            [3, 4]
        );
        type Link = (u64, usize, Option<(u64, usize)>, Option<u64>);
        let links: Vec<Link> = l
            .calls
            .iter()
            .map(|c| (c.exchange, c.index, c.result, c.next_turn))
            .collect();
        assert_eq!(
            links,
            [
                (1, 0, Some((2, 2)), Some(2)),
                (1, 1, Some((2, 3)), Some(2)),
                (2, 0, Some((5, 5)), Some(5)),
                (3, 0, Some((4, 2)), Some(4)),
            ]
        );
        assert_eq!(l.calls[2].subagents, [1]);
        assert!(rules::findings(&l).is_empty(), "{:#?}", rules::findings(&l));
    }

    /// A call the next turn does not answer, a result for an id no call had, and the same call
    /// three turns in a row.
    #[test]
    fn unanswered_unknown_and_repeated() {
        let u = json!({"role": "user", "content": "read a.txt"});
        let a = |id: &str| json!({"role": "assistant", "content": "", "tool_calls": [call(id, "read", "{\"path\":\"a.txt\"}")]});
        let r = |id: &str| json!({"role": "tool", "tool_call_id": id, "content": "(empty)"});
        let l = build([
            turn(1, json!([u]), a("k1")),
            turn(2, json!([u, a("k1"), r("k1")]), a("k2")),
            turn(3, json!([u, a("k1"), r("k1"), a("k2"), r("k2")]), a("k3")),
            // k3 unanswered; a result for an id nobody called
            turn(
                4,
                json!([u, a("k1"), r("k1"), a("k2"), r("k2"), a("k3"), r("zz")]),
                json!({"role": "assistant", "content": "ok"}),
            ),
        ]);
        let f = rules::findings(&l);
        let got: Vec<(&str, Option<u64>)> = f.iter().map(|f| (f.rule.id(), f.exchange)).collect();
        assert_eq!(
            got,
            [
                ("loop.repeated_call", Some(3)),
                ("loop.call_unanswered", Some(4)),
                ("loop.result_unknown_id", Some(4)),
            ],
            "{f:#?}"
        );
        assert!(
            f[0].message
                .contains("3 turns in a row (exchanges 1, 2, 3)"),
            "{}",
            f[0].message
        );
        assert_eq!(f[2].evidence.pointer.as_deref(), Some("/messages/6"));
    }

    /// A system prompt that carries the time continues its conversation; the reuse names it.
    #[test]
    fn a_timestamped_system_prompt_still_continues() {
        let sys =
            |t: &str| json!({"role": "system", "content": format!("You are an agent. Time: {t}.")});
        let u = json!({"role": "user", "content": "go"});
        let a = json!({"role": "assistant", "content": "", "tool_calls": [call("c1", "f", "{}")]});
        let r = json!({"role": "tool", "tool_call_id": "c1", "content": "ok"});
        let l = build([
            turn(1, json!([sys("10:00:01"), u]), a.clone()),
            turn(
                2,
                json!([sys("10:00:05"), u, a, r]),
                json!({"role": "assistant", "content": "done"}),
            ),
            turn(
                3,
                json!([{"role": "system", "content": "Another agent entirely, with other words."}, u]),
                json!({"role": "assistant", "content": "x"}),
            ),
        ]);
        assert_eq!(l.conversations.len(), 2, "{l:#?}");
        assert_eq!(l.conversations[0].turns[1].parent, Some(1));
        assert_eq!(l.calls[0].result, Some((2, 3)));
    }

    /// Responses `input` items: a `function_call_output` is linked by `call_id`, and one whose
    /// `call_id` no earlier `function_call` had is `loop.result_unknown_id`.
    #[test]
    fn responses_items_link_by_call_id() {
        let body = json!({"model": "m", "input": [
            {"role": "user", "content": "weather?"},
            {"type": "function_call", "call_id": "fc_1", "name": "w", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "fc_1", "output": "sunny"},
            {"type": "function_call_output", "call_id": "fc_9", "output": "stray"}]});
        let msgs = chat_messages(Api::Responses, &body).unwrap();
        let first = json!({"model": "m", "input": [{"role": "user", "content": "weather?"}]});
        let t1 = TurnInput {
            exchange: 1,
            messages: chat_messages(Api::Responses, &first)
                .unwrap()
                .iter()
                .map(Msg::from_chat)
                .collect(),
            reply: Some(Msg::from_chat(
                &json!({"role": "assistant", "content": "", "tool_calls": [call("fc_1", "w", "{}")]}),
            )),
            ..Default::default()
        };
        let t2 = TurnInput {
            exchange: 2,
            messages: msgs.iter().map(Msg::from_chat).collect(),
            ..Default::default()
        };
        let l = build([t1, t2]);
        assert_eq!(l.calls[0].result, Some((2, 2)), "{l:#?}");
        assert_eq!(l.unknown_results, [(2, 3, "fc_9".to_owned())]);
    }

    /// Ollama `/api/chat`: no call ids; results are linked by position and tool name.
    #[test]
    fn results_without_ids_link_by_position() {
        let u = json!({"role": "user", "content": "w"});
        let a = json!({"role": "assistant", "content": "", "tool_calls": [
            {"function": {"name": "a", "arguments": {"x": 1}}}, {"function": {"name": "b", "arguments": {}}}]});
        let l = build([
            turn(1, json!([u]), a.clone()),
            turn(
                2,
                json!([u, a, {"role": "tool", "tool_name": "a", "content": "1"}, {"role": "tool", "tool_name": "b", "content": "2"}]),
                json!({"role": "assistant", "content": "k"}),
            ),
        ]);
        assert_eq!(l.calls[0].result, Some((2, 2)));
        assert_eq!(l.calls[1].result, Some((2, 3)));
        assert_eq!(l.calls[0].call.arguments, "{\"x\":1}");
    }
}
