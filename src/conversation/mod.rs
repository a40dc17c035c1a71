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

pub(crate) use crate::diagnose::history::Fnv;
pub use crate::diagnose::history::{Call, Msg, canonical_json, chat_messages, content_text, short};
pub use reuse::{Cause, EngineCounters, PromptTokens, Reuse};

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

/// A request history's message keys, hashed prefix by prefix (with and without a leading
/// system message).
struct HistoryKeys {
    n: usize,
    /// `prefix[k]`: hash of the first `k` message keys.
    prefix: Vec<u64>,
    /// The same without the leading system message (when there is one).
    nosys: Vec<u64>,
    sys: bool,
}

impl HistoryKeys {
    fn of(messages: &[Msg]) -> HistoryKeys {
        let keys: Vec<u64> = messages.iter().map(Msg::key).collect();
        let mut prefix = Vec::with_capacity(keys.len() + 1);
        let mut h = Fnv::new();
        prefix.push(h.finish());
        for k in &keys {
            h.u64(*k);
            prefix.push(h.finish());
        }
        // The same history with the system prompt left out: an agent that writes the time (or
        // another per-request field) into its system prompt still continues its conversation.
        let sys = messages
            .first()
            .is_some_and(|m| m.role == "system" || m.role == "developer");
        let mut nosys = Vec::with_capacity(keys.len() + 1);
        let mut h = Fnv::new();
        nosys.push(h.finish());
        for k in keys.iter().skip(usize::from(sys)) {
            h.u64(*k);
            nosys.push(h.finish());
        }
        HistoryKeys {
            n: keys.len(),
            prefix,
            nosys,
            sys,
        }
    }
}

/// Which earlier request a request continues: the index behind the grouping into
/// conversations, usable on its own (the proxy asks it when a request arrives, before the
/// exchange ends, to pick the request's trace). Entries are numbered in insertion order.
///
/// A request continues the entry whose messages are the longest proper prefix of its own;
/// failing that, when it starts with a system prompt, one whose history equals it with the
/// system prompt left out and whose system prompt differs only in part (a timestamp).
#[derive(Debug, Default, Clone)]
pub struct Continuations {
    /// (message count, prefix hash) → entry.
    by_prefix: HashMap<(usize, u64), usize>,
    /// The same, hashed without the leading system message (for entries that have one).
    by_prefix_nosys: HashMap<(usize, u64), usize>,
    /// Per entry, its system prompt (entries with the same prompt in a row share it).
    systems: Vec<Option<std::sync::Arc<str>>>,
}

impl Continuations {
    /// An empty index.
    pub fn new() -> Continuations {
        Continuations::default()
    }

    /// Entries inserted so far.
    pub fn len(&self) -> usize {
        self.systems.len()
    }

    /// Whether nothing was inserted.
    pub fn is_empty(&self) -> bool {
        self.systems.is_empty()
    }

    /// The entry a request with `messages` continues, if any.
    pub fn parent(&self, messages: &[Msg]) -> Option<usize> {
        self.parent_of(&HistoryKeys::of(messages), messages)
    }

    /// Adds a request's history; returns its entry number.
    pub fn insert(&mut self, messages: &[Msg]) -> usize {
        self.insert_keys(&HistoryKeys::of(messages), messages)
    }

    fn parent_of(&self, keys: &HistoryKeys, messages: &[Msg]) -> Option<usize> {
        // Longest earlier request whose messages this one extends; else, with the system
        // prompt left out, one whose system prompt differs only in part (a timestamp).
        (1..keys.n)
            .rev()
            .find_map(|n| self.by_prefix.get(&(n, keys.prefix[n])).copied())
            .or_else(|| {
                if !keys.sys {
                    return None;
                }
                (2..keys.n).rev().find_map(|n| {
                    let p = *self.by_prefix_nosys.get(&(n, keys.nosys[n - 1]))?;
                    let ps = self.systems[p].as_deref().unwrap_or("");
                    similar(ps, &messages[0].text).then_some(p)
                })
            })
    }

    fn insert_keys(&mut self, keys: &HistoryKeys, messages: &[Msg]) -> usize {
        let me = self.systems.len();
        self.by_prefix.insert((keys.n, keys.prefix[keys.n]), me);
        let system = if keys.sys {
            self.by_prefix_nosys
                .insert((keys.n, keys.nosys[keys.n - 1]), me);
            let text = messages[0].text.as_str();
            match self.systems.iter().rev().flatten().next() {
                Some(last) if &**last == text => Some(last.clone()),
                _ => Some(std::sync::Arc::from(text)),
            }
        } else {
            None
        };
        self.systems.push(system);
        me
    }
}

/// Where [`LiveFold::push`] put one exchange.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// Its conversation (an id of [`Loop::conversations`]).
    pub conversation: usize,
    /// The turn it continues (the previous exchange of its conversation).
    pub parent: Option<u64>,
    /// For the first turn of a sub-agent conversation: the exchange and call index that
    /// started it.
    pub started_by: Option<(u64, usize)>,
    /// Indices into [`Loop::calls`] of the earlier calls whose results this exchange's request
    /// carried (linked by this push).
    pub answered: Vec<usize>,
}

/// The conversation grouping fed one finished exchange at a time (`proxy --otlp` folds each
/// exchange as it ends). Pure. Each [`LiveFold::push`] says where the exchange went; the loop
/// so far is [`LiveFold::state`]. Fed in exchange id order it is [`build`] step by step;
/// exchanges of one conversation end in order (a turn's request carries the previous reply),
/// so folding them as they end gives the batch grouping as long as no two conversations start
/// at once.
#[derive(Debug, Default)]
pub struct LiveFold {
    fold: Fold,
}

impl LiveFold {
    /// An empty fold.
    pub fn new() -> LiveFold {
        LiveFold::default()
    }

    /// Folds one finished exchange's facts; where it went.
    pub fn push(&mut self, t: TurnInput) -> Placement {
        let ex = t.exchange;
        self.fold.push(t);
        let out = &self.fold.out;
        let (conversation, pos) = out
            .conversations
            .iter()
            .rev()
            .find_map(|c| {
                c.turns
                    .iter()
                    .rposition(|t| t.exchange == ex)
                    .map(|p| (c.id, p))
            })
            .expect("the turn just folded");
        let conv = &out.conversations[conversation];
        let answered = out
            .calls
            .iter()
            .enumerate()
            .filter(|(_, c)| c.result.is_some_and(|(e, _)| e == ex))
            .map(|(i, _)| i)
            .collect();
        Placement {
            conversation,
            parent: conv.turns[pos].parent,
            started_by: if pos == 0 { conv.started_by } else { None },
            answered,
        }
    }

    /// The loop of everything folded so far.
    pub fn state(&self) -> &Loop {
        &self.fold.out
    }

    /// The loop, once every exchange is folded.
    pub fn into_loop(self) -> Loop {
        self.fold.out
    }
}

/// The fold behind [`Builder`]: exchanges in id order.
#[derive(Debug, Default)]
struct Fold {
    out: Loop,
    /// Per turn: (conversation, turn position, message count, reply, call link indices,
    /// end time, input).
    turns: Vec<Kept>,
    /// Which earlier turn a request continues (entry `i` = `turns[i]`).
    index: Continuations,
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
        let keys = HistoryKeys::of(&t.messages);
        let parent = self.index.parent_of(&keys, &t.messages);
        let me = self.turns.len();
        let (conv, reply_kept, new_from) = self.place(&t, parent);
        self.note_unknown_results(&t, parent, new_from);
        if let Some(p) = parent {
            self.link_results(p, &t, new_from);
        }
        let call_links = self.add_calls(&t, me);
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
        let entry = self.index.insert_keys(&keys, &t.messages);
        debug_assert_eq!(entry, me);
        // Keep the reply in the map too: a next request = messages + reply + results is found
        // through its own prefix of this length.
        self.turns.push(Kept {
            conv,
            pos,
            input: t,
            continued: false,
        });
    }

    /// Where `t` goes: its parent's conversation (with whether the parent's reply is kept in
    /// `t`'s messages, and where `t`'s new messages start) or a new conversation, linked to the
    /// call that started it when it is a sub-agent.
    fn place(&mut self, t: &TurnInput, parent: Option<usize>) -> (usize, bool, usize) {
        match parent {
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
                let started_by = self.subagent_of(t);
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
        }
    }

    /// Results in `t`'s new messages (from `new_from`) under an id no assistant message before
    /// them, nor the parent's reply, called: `unknown_results`.
    fn note_unknown_results(&mut self, t: &TurnInput, parent: Option<usize>, new_from: usize) {
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
    }

    /// Links the calls of turn `p` (the parent) to the results in `t`'s new messages: by id
    /// first, then by position for results or calls without one (Ollama).
    fn link_results(&mut self, p: usize, t: &TurnInput, new_from: usize) {
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

    /// Adds the calls of `t`'s reply as links (turn `me` pending until a later turn answers
    /// them); their indices in `out.calls`.
    fn add_calls(&mut self, t: &TurnInput, me: usize) -> Vec<usize> {
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
        call_links
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::Api;
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

    /// The real loop recording (llama-server b11434, SmolLM2, tests/data/loop), folded one
    /// finished exchange at a time in file order (the order they ended), gives the batch loop;
    /// each placement names the conversation and parent the batch loop has for it, and the
    /// calls it answered are those whose result is in its request.
    #[test]
    fn live_fold_of_a_real_recording_equals_the_batch_loop() {
        let bytes = include_bytes!("../../tests/data/loop/loop-smollm2.jsonl");
        let s = crate::session::read::read_session_bytes("loop-smollm2.jsonl", bytes).unwrap();
        let inputs: Vec<TurnInput> = s
            .exchanges
            .iter()
            .filter(|ex| ex.api().is_generation())
            .filter_map(|ex| {
                let anns = s.annotations.get(&ex.id).map(Vec::as_slice).unwrap_or(&[]);
                let ctx = crate::analysis::Context {
                    header: &s.header,
                    annotations: anns,
                };
                let a = crate::analysis::analyse(ex.clone(), ctx, crate::analysis::Depth::Findings);
                TurnInput::from_analysed(&a)
            })
            .collect();
        assert_eq!(inputs.len(), 5);
        let batch = build(inputs.clone());
        assert_eq!(batch, of_session(&s));
        // the recording is a real loop: one conversation whose calls are all answered
        assert!(batch.calls.len() >= 4, "{batch:#?}");
        let mut live = LiveFold::new();
        let mut answered = Vec::new();
        // read off the recording: exchanges 1, 2, 4, 5 extend each other's messages (29, 32,
        // 34, 36 of them); 3 is the sub-agent (its own system prompt, 2 messages) started by
        // exchange 2's only call (`task`), whose result exchange 4 carries
        let expected = [
            (0, None, None),
            (0, Some(1), None),
            (1, None, Some((2, 0))),
            (0, Some(2), None),
            (0, Some(4), None),
        ];
        for (t, want) in inputs.into_iter().zip(expected) {
            let ex = t.exchange;
            let p = live.push(t);
            assert_eq!(
                (p.conversation, p.parent, p.started_by),
                want,
                "exchange {ex}"
            );
            let (conv, pos) = batch.turn_of(ex).unwrap();
            assert_eq!(p.conversation, conv, "exchange {ex}");
            assert_eq!(
                p.parent, batch.conversations[conv].turns[pos].parent,
                "exchange {ex}"
            );
            for &i in &p.answered {
                assert_eq!(batch.calls[i].result.map(|r| r.0), Some(ex));
            }
            answered.extend(p.answered);
        }
        answered.sort_unstable();
        let with_result: Vec<usize> = (0..batch.calls.len())
            .filter(|&i| batch.calls[i].result.is_some())
            .collect();
        assert_eq!(answered, with_result);
        assert_eq!(live.into_loop(), batch);
    }

    /// Sub-agent placement: the first turn of the nested conversation names the call that
    /// started it, the turn that answers the task call names it as answered.
    #[test]
    fn live_fold_places_a_subagent() {
        let u = json!({"role": "user", "content": "plan a trip"});
        let a1 = json!({"role": "assistant", "content": "", "tool_calls": [call("c1", "task", "{\"prompt\": \"list museums in Rome\"}")]});
        let sub_u = json!({"role": "user", "content": "list museums in Rome"});
        let r1 = json!({"role": "tool", "tool_call_id": "c1", "content": "Vatican"});
        let mut f = LiveFold::new();
        let p1 = f.push(turn(1, json!([u]), a1.clone()));
        let p2 = f.push(turn(
            2,
            json!([sub_u]),
            json!({"role": "assistant", "content": "Vatican"}),
        ));
        let p3 = f.push(turn(
            3,
            json!([u, a1, r1]),
            json!({"role": "assistant", "content": "ok"}),
        ));
        assert_eq!((p1.conversation, p1.parent, p1.started_by), (0, None, None));
        assert_eq!(
            (p2.conversation, p2.parent, p2.started_by),
            (1, None, Some((1, 0)))
        );
        assert_eq!(
            (p3.conversation, p3.parent, p3.started_by),
            (0, Some(1), None)
        );
        assert_eq!(p3.answered, [0]);
        assert!(p1.answered.is_empty() && p2.answered.is_empty());
    }

    /// The index on its own: the longest earlier history a request extends, and a system
    /// prompt that differs only by its timestamp.
    #[test]
    fn continuations_find_the_longest_prefix() {
        let m =
            |v: Value| -> Vec<Msg> { v.as_array().unwrap().iter().map(Msg::from_chat).collect() };
        let sys = |t: &str| json!({"role": "system", "content": format!("You are an agent; it is {t} now.")});
        let u = json!({"role": "user", "content": "go"});
        let a = json!({"role": "assistant", "content": "step"});
        let mut c = Continuations::new();
        assert_eq!(c.insert(&m(json!([sys("10:00"), u]))), 0);
        assert_eq!(c.insert(&m(json!([sys("10:00"), u, a, u]))), 1);
        assert_eq!(c.parent(&m(json!([sys("10:00"), u, a, u, a, u]))), Some(1));
        assert_eq!(c.parent(&m(json!([sys("10:00"), u, a]))), Some(0));
        assert_eq!(c.parent(&m(json!([sys("10:07"), u, a, u, a]))), Some(1));
        assert_eq!(c.parent(&m(json!([u, a]))), None);
        assert_eq!(c.len(), 2);
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
