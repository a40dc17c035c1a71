//! Template capabilities as llama.cpp detects them (`common/jinja/caps.cpp: caps_get`, build
//! 11434): the template is rendered on fixed probe conversations and llama.cpp records which
//! input values the template *used* (read through an attribute or index). toolscope reproduces
//! the "used" bookkeeping with tracking objects: every attribute read on a probe value is logged
//! by its path (`messages.1.tool_calls`), and the capability rules of `caps_get` are applied to
//! that log.
//!
//! The bookkeeping belongs to one probe render (a `Probe`): the render's context carries it
//! ([`PROBE_VAR`]) to the operator functions that pause it ([`untracked`]); no state outlives
//! the render or is shared between threads.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use minijinja::value::{Enumerator, Object, ObjectRepr};
use minijinja::{State, Value as JValue};
use serde_json::{Value, json};

use crate::template::render::JinjaTemplate;

/// What `caps_get` reports (field names as in `jinja::caps`; defaults as there).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    pub supports_tools: bool,
    pub supports_tool_calls: bool,
    pub supports_system_role: bool,
    pub supports_parallel_tool_calls: bool,
    pub supports_preserve_reasoning: bool,
    pub supports_string_content: bool,
    pub supports_typed_content: bool,
    pub supports_object_arguments: bool,
}

impl Default for Caps {
    fn default() -> Self {
        Caps {
            supports_tools: true,
            supports_tool_calls: true,
            supports_system_role: true,
            supports_parallel_tool_calls: true,
            supports_preserve_reasoning: false,
            supports_string_content: true,
            supports_typed_content: false,
            supports_object_arguments: false,
        }
    }
}

/// The "used" bookkeeping of one probe render: the paths read, and how many operator
/// evaluations the render is inside, during which nothing is marked (llama.cpp marks a binary
/// operator's operands nothing, [`untracked`]).
#[derive(Debug, Default)]
struct Probe {
    used: Mutex<BTreeSet<String>>,
    paused: AtomicU32,
}

impl Probe {
    fn mark(&self, path: String) {
        if self.paused.load(Ordering::Relaxed) == 0
            && let Ok(mut l) = self.used.lock()
        {
            l.insert(path);
        }
    }
}

type Log = Arc<Probe>;

/// The context variable a probe render carries its `Probe` in (an opaque object), for
/// [`untracked`]; a template does not name it.
pub const PROBE_VAR: &str = "__llama_caps_probe";

/// The [`Probe`] as a context value.
#[derive(Debug)]
struct ProbeRef(Log);

impl Object for ProbeRef {}

/// Runs `f` with the "used" bookkeeping of the render `state` belongs to paused (when it is a
/// probe render, [`PROBE_VAR`]): what llama.cpp reads without marking it used (a binary
/// operator's operands — `binary_expression::execute_impl` marks nothing — printed by `+` /
/// `~` or searched by `in`, src/template/llama/ops.rs).
pub fn untracked<R>(state: &State, f: impl FnOnce() -> R) -> R {
    let probe = state.lookup(PROBE_VAR);
    let Some(ProbeRef(p)) = probe
        .as_ref()
        .and_then(|v| v.downcast_object_ref::<ProbeRef>())
    else {
        return f();
    };
    p.paused.fetch_add(1, Ordering::Relaxed);
    let r = f();
    p.paused.fetch_sub(1, Ordering::Relaxed);
    r
}

/// A JSON object or array whose element reads are logged by path.
#[derive(Debug)]
struct Tracked {
    path: String,
    log: Log,
    map: Vec<(String, JValue)>,
    seq: Option<Vec<JValue>>,
}

impl Object for Tracked {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        if self.seq.is_some() {
            ObjectRepr::Seq
        } else {
            ObjectRepr::Map
        }
    }

    fn get_value(self: &Arc<Self>, key: &JValue) -> Option<JValue> {
        let (name, found) = match &self.seq {
            Some(items) => {
                let i = key.as_i64()?;
                let i = if i < 0 { items.len() as i64 + i } else { i };
                (i.to_string(), items.get(usize::try_from(i).ok()?).cloned())
            }
            None => {
                let k = key.as_str()?;
                (
                    k.to_owned(),
                    self.map
                        .iter()
                        .find(|(n, _)| n == k)
                        .map(|(_, v)| v.clone()),
                )
            }
        };
        if found.is_some() {
            self.log.mark(format!("{}.{name}", self.path));
        }
        found
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        match &self.seq {
            Some(items) => Enumerator::Seq(items.len()),
            None => Enumerator::Values(
                self.map
                    .iter()
                    .map(|(k, _)| JValue::from(k.as_str()))
                    .collect(),
            ),
        }
    }
}

fn tracked(v: &Value, path: &str, log: &Log) -> JValue {
    match v {
        Value::Object(o) => JValue::from_object(Tracked {
            path: path.to_owned(),
            log: log.clone(),
            map: o
                .iter()
                .map(|(k, v)| (k.clone(), tracked(v, &format!("{path}.{k}"), log)))
                .collect(),
            seq: None,
        }),
        Value::Array(a) => JValue::from_object(Tracked {
            path: path.to_owned(),
            log: log.clone(),
            map: Vec::new(),
            seq: Some(
                a.iter()
                    .enumerate()
                    .map(|(i, v)| tracked(v, &format!("{path}.{i}"), log))
                    .collect(),
            ),
        }),
        other => crate::template::pyfmt::json_to_value(other),
    }
}

/// Renders `tmpl` on one probe; returns (rendered or error, paths used).
fn probe(
    tmpl: &JinjaTemplate,
    ctx: Value,
    extra: &[(&str, Value)],
) -> (Option<String>, BTreeSet<String>) {
    let log: Log = Arc::default();
    let mut vars: Vec<(String, JValue)> = Vec::new();
    if let Value::Object(o) = &ctx {
        for (k, v) in o {
            vars.push((k.clone(), tracked(v, k, &log)));
        }
    }
    for (k, v) in extra {
        vars.push(((*k).to_owned(), crate::template::pyfmt::json_to_value(v)));
    }
    vars.push((
        PROBE_VAR.to_owned(),
        JValue::from_object(ProbeRef(log.clone())),
    ));
    let out = tmpl.render_values(vars).ok();
    let used = log.used.lock().map(|l| l.clone()).unwrap_or_default();
    (out, used)
}

fn tool_probe_tools() -> Value {
    json!([{"name": "tool", "type": "function", "function": {"name": "tool1", "description": "Tool description",
        "parameters": {"type": "object", "properties": {"arg": {"type": "string", "description": "Arg description"}}, "required": ["arg"]}}}])
}

fn tool_probe_messages(args: Value, parallel: bool) -> Value {
    let call = |id: &str| json!({"id": id, "type": "function", "function": {"name": "tool1", "arguments": args.clone()}});
    let calls = if parallel {
        json!([call("call00001"), call("call00002")])
    } else {
        json!([call("call00001")])
    };
    json!([
        {"role": "user", "content": "User message"},
        {"role": "assistant", "content": "", "tool_calls": calls},
        {"role": "tool", "content": "Tool response", "tool_call_id": "call00001"},
        {"role": "assistant", "content": "The tool response was 'tool response'"},
        {"role": "user", "content": "User message"}
    ])
}

fn base_ctx(messages: Value, tools: Value) -> Value {
    json!({"messages": messages, "tools": tools, "bos_token": "", "eos_token": "", "add_generation_prompt": true})
}

/// `caps_get` over a template compiled under the llama.cpp profile.
pub fn detect(tmpl: &JinjaTemplate) -> Caps {
    let mut caps = Caps::default();
    let src = tmpl.source();
    // typed content: llama.cpp records `selectattr` / integer-index use of a string content;
    // a string cannot carry that bookkeeping here, so the template text decides: it iterates
    // content parts (`content[0]`, `selectattr('type'…)`, `item['type'] == 'text'`).
    let typed_markers = [
        "content[0]",
        "content | selectattr",
        "content|selectattr",
        "['type'] == 'text'",
        "[\"type\"] == \"text\"",
        ".type == 'text'",
        ".type == \"text\"",
    ];
    let (out, _) = probe(
        tmpl,
        base_ctx(
            json!([{"role": "user", "content": "STRING_MARKER"}]),
            json!([]),
        ),
        &[],
    );
    if typed_markers.iter().any(|m| src.contains(m)) {
        caps.supports_typed_content = true;
        if out.as_deref().is_some_and(|o| !o.contains("STRING_MARKER")) {
            caps.supports_string_content = false;
        }
    }
    if out.is_none() {
        caps.supports_string_content = false;
    }

    // system role: the system message's content must be used
    let (_, used) = probe(
        tmpl,
        base_ctx(
            json!([{"role": "system", "content": "System message"}, {"role": "user", "content": "User message"}]),
            json!([]),
        ),
        &[],
    );
    if !used.contains("messages.0.content") {
        caps.supports_system_role = false;
    }

    // tools with object arguments
    let (out, used) = probe(
        tmpl,
        base_ctx(
            tool_probe_messages(json!({"arg": "value"}), false),
            tool_probe_tools(),
        ),
        &[],
    );
    let mut tool_calls_checked = false;
    if out.is_some() {
        if !used.contains("tools.0.function.name") {
            caps.supports_tools = false;
        }
        if !used.contains("messages.1.tool_calls") {
            caps.supports_tool_calls = false;
            tool_calls_checked = true;
        } else if used.contains("messages.1.tool_calls.0.function.arguments.arg") {
            caps.supports_object_arguments = true;
        }
    }
    if !caps.supports_object_arguments && !tool_calls_checked {
        let (out, used) = probe(
            tmpl,
            base_ctx(
                tool_probe_messages(json!("{\"arg\": \"value\"}"), false),
                tool_probe_tools(),
            ),
            &[],
        );
        match out {
            None => {
                caps.supports_tool_calls = false;
                caps.supports_tools = false;
            }
            Some(_) => {
                if !used.contains("tools.0.function.name") {
                    caps.supports_tools = false;
                }
                if !used.contains("messages.1.tool_calls") {
                    caps.supports_tool_calls = false;
                }
            }
        }
    }
    // parallel calls
    let args = if caps.supports_object_arguments {
        json!({"arg": "value"})
    } else {
        json!("{\"arg\": \"value\"}")
    };
    let (out, used) = probe(
        tmpl,
        base_ctx(tool_probe_messages(args, true), tool_probe_tools()),
        &[],
    );
    if out.is_none() || !used.contains("messages.1.tool_calls.1.function") {
        caps.supports_parallel_tool_calls = false;
    }
    // preserve reasoning: the placeholder of an earlier assistant turn reaches the output
    let placeholder = "<REASONING_CONTENT_PLACEHOLDER>";
    let (out, _) = probe(
        tmpl,
        base_ctx(
            json!([
                {"role": "user", "content": "User message"},
                {"role": "assistant", "content": "Assistant message", "reasoning_content": placeholder},
                {"role": "user", "content": "User message"},
                {"role": "assistant", "content": "Assistant message", "reasoning_content": "Reasoning content"},
                {"role": "user", "content": "User message"}
            ]),
            json!([]),
        ),
        &[
            ("enable_thinking", json!(true)),
            ("preserve_thinking", json!(true)),
            ("clear_thinking", json!(false)),
            ("truncate_history_thinking", json!(false)),
            ("drop_thinking", json!(false)),
        ],
    );
    if out.is_some_and(|o| o.contains(placeholder)) {
        caps.supports_preserve_reasoning = true;
    }
    caps
}

#[cfg(test)]
mod tests {
    use crate::template::{CompiledTemplate, Profile, RenderOptions};

    fn caps_of(src: &str) -> super::Caps {
        let opts = RenderOptions {
            profile: Some(Profile::LLAMA_CPP),
            ..Default::default()
        };
        assert!(CompiledTemplate::compile(src, &opts).is_ok());
        crate::template::llama::compile(src, &opts, 11434)
            .unwrap()
            .caps()
    }

    /// An operator's operands are not marked used, as in llama.cpp: a message printed only by
    /// `~` leaves its `content` unread, so the system role counts as unsupported — in the
    /// template's body and inside a macro alike (the pause is the probe render's own, reached
    /// through its context); a direct read marks it.
    #[test]
    fn operator_operands_are_not_marked_used() {
        let direct = caps_of("{% for m in messages %}{{ m.content }}{% endfor %}");
        assert!(direct.supports_system_role);
        let by_op = caps_of("{% for m in messages %}{{ m ~ '' }}{% endfor %}");
        assert!(!by_op.supports_system_role);
        let in_macro = caps_of(
            "{% macro p(x) %}{{ x ~ '' }}{% endmacro %}{% for m in messages %}{{ p(m) }}{% endfor %}",
        );
        assert!(!in_macro.supports_system_role);
        // the pause ends with the operator: a read after it is marked again
        let after = caps_of("{% for m in messages %}{{ m ~ '' }}{{ m.content }}{% endfor %}");
        assert!(after.supports_system_role);
    }
}
