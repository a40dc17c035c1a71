//! The llama.cpp render profile: a chat request rendered as llama-server renders it
//! (`POST /apply-template`, `/v1/chat/completions`), read from its source at build 11434.
//!
//! The pipeline, in llama.cpp's order:
//! 1. request parsing (`tools/server/server-common.cpp: oaicompat_chat_params_parse`):
//!    `add_generation_prompt` (default true), `chat_template_kwargs` (merged over the server's
//!    default `preserve_reasoning: true`), `enable_thinking` (the server default, overridden by
//!    the kwarg), `reasoning_effort`; a trailing assistant message is a prefill.
//! 2. messages and tools re-serialised from llama.cpp's own structures
//!    (`common/chat.cpp: common_chat_msgs_parse_oaicompat`, `common_chat_msg::to_json_oaicompat`,
//!    `common_chat_tools_to_json_oaicompat`): a message is `role`, `content` (`""` when
//!    absent), `reasoning_content`, `name`, `tool_call_id` (each only when non-empty),
//!    `tool_calls` as `{type, function: {name, arguments: STRING}, id}`; a tool is
//!    `{type, function: {name, description (default ""), parameters}}`, nothing else.
//! 3. workarounds keyed on the template's capabilities ([`caps`], `common_chat_templates_apply_jinja`):
//!    developer → system role (unless the template speaks `<|channel|>`), a system message
//!    merged into the next one when the template ignores system content, tool-call arguments
//!    parsed to objects when the template reads them as objects (error "Failed to parse tool
//!    call arguments as JSON" otherwise), content parts joined with `\n` for string-only
//!    templates.
//! 4. the context (`common_chat_template_direct_apply_impl`): `messages`, `bos_token`,
//!    `eos_token`, `enable_thinking`, `tools` (absent — undefined, not none — without tools),
//!    `datetime` (`%b %d %Y`), `date_string` (`%d %b %Y`), every kwarg, `preserve_thinking` /
//!    `clear_thinking` / `truncate_history_thinking` / `drop_thinking`, and
//!    `add_generation_prompt` only when true.
//! 5. rendering with llama.cpp's Jinja engine ([`jinja`]), then a leading `bos_token` removed
//!    when the vocabulary adds BOS itself (and a trailing `eos_token` when it adds EOS).
//! 6. refusals: an error while rendering in the automatic-parser path is reported as llama-server
//!    does: `Unable to generate parser for this template. Automatic parser generation failed: …`
//!    ([`REFUSAL_PREFIX`]).

pub mod caps;
pub mod jinja;
pub mod ops;
pub mod rewrite;

use serde_json::{Map, Value, json};

use super::input::RenderInput;
pub use super::profile::VocabFlags;
use super::render::{JinjaTemplate, RenderError, RenderErrorKind, RenderOptions};

/// The message prefix of llama-server's refusal (HTTP 400 / 500) when rendering fails in the
/// automatic parser generator (`common/chat.cpp`, build 11434).
pub const REFUSAL_PREFIX: &str =
    "Unable to generate parser for this template. Automatic parser generation failed: ";

/// A template compiled under the llama.cpp profile ([`compile`]): the core Jinja template
/// with llama.cpp's engine configured, and what llama-server reads from the template once
/// (its capabilities, whether it thinks by default), computed on first use and kept.
pub struct LlamaTemplate {
    jinja: JinjaTemplate,
    /// `strftime_now` and the `datetime` / `date_string` variables.
    now: time::OffsetDateTime,
    /// Whether the engine's vocabulary adds BOS / EOS itself.
    vocab: VocabFlags,
    caps: std::sync::OnceLock<caps::Caps>,
    thinking: std::sync::OnceLock<bool>,
}

impl std::fmt::Debug for LlamaTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlamaTemplate")
            .field("name", &self.jinja.name())
            .finish_non_exhaustive()
    }
}

impl LlamaTemplate {
    /// The core template underneath.
    pub fn jinja(&self) -> &JinjaTemplate {
        &self.jinja
    }

    /// The template name used in messages.
    pub fn name(&self) -> &str {
        self.jinja.name()
    }

    /// The patched source compiled ([`patch_source`]).
    pub fn source(&self) -> &str {
        self.jinja.source()
    }

    /// Renders an explicit context as given (no request handling).
    pub fn render_plain(&self, ctx: &Value) -> Result<String, RenderError> {
        self.jinja.render_context(ctx)
    }

    /// llama.cpp's capability probes on this template ([`caps::detect`]), computed once.
    pub fn caps(&self) -> caps::Caps {
        *self.caps.get_or_init(|| caps::detect(&self.jinja))
    }

    /// Whether llama-server enables thinking by default for this template
    /// ([`supports_thinking`]), computed once.
    pub fn supports_thinking(&self) -> bool {
        *self.thinking.get_or_init(|| supports_thinking(self))
    }
}

/// Compiles `source` as llama-server loads a template at `build`: [`patch_source`], a binary
/// operator llama.cpp's Jinja lacks refused with its own message, the operators rewritten as
/// calls ([`rewrite`]; errors reported at the template's own offsets through the rewrite's
/// offset map), and llama.cpp's Jinja engine configured ([`jinja::configure`]).
/// Errors: [`RenderErrorKind::Syntax`] with line and column.
pub fn compile(
    source: &str,
    opts: &RenderOptions,
    build: u32,
) -> Result<LlamaTemplate, RenderError> {
    let patched = patch_source(source);
    if let Some((at, ch)) = rewrite::unsupported_operator(&patched) {
        let (line, column) = super::render::line_col(&patched, at);
        return Err(RenderError {
            kind: RenderErrorKind::Syntax,
            // llama.cpp's own wording (common_chat_templates_init), then why
            message: format!(
                "Unexpected token: {ch} of type 22 (llama.cpp's Jinja has no `{ch}{ch}` operator: llama-server refuses this template)"
            ),
            name: opts
                .name
                .clone()
                .unwrap_or_else(|| super::render::DEFAULT_NAME.to_owned()),
            line: Some(line),
            column: Some(column),
        });
    }
    let ops = rewrite::rewrite(&patched);
    let compiled = ops.as_ref().map_or(patched.as_str(), |r| r.text.as_str());
    let now = opts.now.unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    let jinja = JinjaTemplate::compile_with(
        &patched,
        compiled,
        ops.clone()
            .map(|r| Box::new(move |at| r.source_offset(at)) as super::render::SourceMap),
        opts,
        |env| jinja::configure(env, &BuildRules::for_build(build), now),
    )?;
    Ok(LlamaTemplate {
        jinja,
        now,
        vocab: opts.vocab,
        caps: std::sync::OnceLock::new(),
        thinking: std::sync::OnceLock::new(),
    })
}

/// What differs between llama.cpp builds, as far as rendering goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuildRules {
    /// llama.cpp release number.
    pub build: u32,
}

impl BuildRules {
    /// The rules of `build` (builds toolscope has not read follow the nearest known one).
    pub fn for_build(build: u32) -> BuildRules {
        BuildRules { build }
    }

    /// Whether this build has llama.cpp's LLM-jp Harmony format (`common/parsers/llm-jp-harmony.cpp`,
    /// dispatched for `chat_format=llm-jp-harmony-v1` at common/chat.cpp:1103 in build 11434;
    /// absent in build 11312). Builds in between follow the nearer of the two.
    pub fn has_llm_jp_harmony(&self) -> bool {
        use super::profile::{LLAMA_CPP_DEFAULT_BUILD, LLAMA_CPP_OLD_BUILD};
        u64::from(self.build) * 2
            >= u64::from(LLAMA_CPP_OLD_BUILD) + u64::from(LLAMA_CPP_DEFAULT_BUILD)
    }
}

/// The llama.cpp format a build reads a template's *replies* with, where that choice differs
/// between the builds toolscope knows (`common/chat.cpp: common_chat_try_specialized_template`):
/// an LLM-jp 4.1 template (`chat_format=llm-jp-harmony-v1`, which also contains `<|channel|>`)
/// is parsed by `"LLM-jp Harmony v1"` in build 11434 — spaces after special tokens allowed,
/// `common/parsers/llm-jp-harmony.cpp` — and by `"GPT-OSS"` in build 11312 (exact markers,
/// `common/parsers/gpt-oss.cpp`), which answers the LLM-jp dialect with HTTP 500 "The model
/// produced output that does not match the expected peg-native format"; any other
/// `<|channel|>` template is `"GPT-OSS"` in both. `None`: a template whose reply format does
/// not depend on the build (as far as toolscope has read).
pub fn reply_format(src: &str, rules: &BuildRules) -> Option<&'static str> {
    if src.contains("chat_format=llm-jp-harmony-v1") {
        return Some(if rules.has_llm_jp_harmony() {
            "LLM-jp Harmony v1"
        } else {
            "GPT-OSS"
        });
    }
    src.contains("<|channel|>").then_some("GPT-OSS")
}

/// Patches llama.cpp applies to a template's source when loading it
/// (`common_chat_templates_init`): GPT-OSS's "analysis in content" exception and Mistral's
/// empty-assistant exception are disabled.
pub fn patch_source(src: &str) -> String {
    let mut s = src.to_owned();
    if s.contains("<|channel|>") && s.contains("in message.content or") {
        s = s.replace(
            "{%- if \"<|channel|>analysis<|message|>\" in message.content or \"<|channel|>final<|message|>\" in message.content %}",
            "{%- if false %}",
        );
    }
    if s.contains("[TOOL_CALLS]") && s.contains("if (message['content'] is none or") {
        s = s.replace(
            "{%- if (message['content'] is none or message['content'] == '' or message['content']|length == 0) and (message['tool_calls'] is not defined or message['tool_calls'] is none or message['tool_calls']|length == 0) %}",
            "{%- if false %}",
        );
    }
    s
}

/// Whether llama.cpp renders this template through a hand-written format
/// (`common_chat_try_specialized_template`) rather than the automatic parser generator; errors
/// there are not wrapped in [`REFUSAL_PREFIX`].
pub fn specialized(src: &str) -> bool {
    let has = |s: &str| src.contains(s);
    (has("[SYSTEM_PROMPT]") && has("[TOOL_CALLS]") && has("[ARGS]") && !has("[CALL_ID]"))
        || has("chat_format=llm-jp-harmony-v1")
        || has("<|channel|>")
        || (has("<atem:function_calls>") && has("<|eom|>"))
        || (has(">>>all") && has(">>>${recipient}"))
        || (has("<|tool_calls_section_begin|>") && has("<|tool_call_begin|>"))
        || (has("<|open|>") && has("<|close|>") && has("<|end_of_msg|>"))
        || (has("<role>ASSISTANT</role>") && has("<arg_key>"))
        || (has("<|START_TEXT|>") && has("<|START_ACTION|>"))
        || has("<|tool_list_start|>")
        || (has("List of tools: [") && !has("<|tool_list_start|>"))
        || (has("<|role_sep|>") && has("<|message_sep|>") && !has("<|function_call|>"))
        || (has("]<]minimax[>[") && has("<tool_call>") && has("<invoke name="))
        || (has("dsml_token") && has("DSML") && (has("function_calls") || has("tool_calls")))
        || has("'<|tool_call>call:'")
        || (has("Tool usage guidelines:") && has("<function name=\"") && has("<param name=\""))
        || (has("<tool_call>")
            && has("<function=")
            && has("<parameter=")
            && !has("'<tool_call><function=' ~ tool_call.name ~ '>'"))
}

fn eval_err(tmpl: &LlamaTemplate, message: String) -> RenderError {
    RenderError {
        kind: RenderErrorKind::Eval,
        message,
        name: tmpl.name().to_owned(),
        line: None,
        column: None,
    }
}

/// `common_chat_msgs_parse_oaicompat` + `to_json_oaicompat`: the messages as llama.cpp hands
/// them to the template. Errors: llama-server's messages for malformed messages.
fn rebuild_messages(raw: &Value) -> Result<Vec<Value>, String> {
    let list = raw
        .as_array()
        .ok_or_else(|| "Expected 'messages' to be an array".to_owned())?;
    let mut out = Vec::new();
    for m in list {
        let obj = m.as_object().ok_or_else(|| {
            format!("Failed to parse messages: Expected 'message' to be an object, got {m}")
        })?;
        let role = obj
            .get("role")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("Failed to parse messages: Missing 'role' in message: {m}"))?;
        if role != "assistant" && !obj.contains_key("content") {
            return Err("All non-assistant messages must contain 'content'".into());
        }
        if role == "assistant" && !obj.contains_key("content") && !obj.contains_key("tool_calls") {
            return Err("Assistant message must contain either 'content' or 'tool_calls'!".into());
        }
        let mut j = Map::new();
        j.insert("role".into(), json!(role));
        let content = match obj.get("content") {
            Some(Value::String(s)) if !s.is_empty() => json!(s),
            Some(Value::Array(parts)) if !parts.is_empty() => {
                let mut ps = Vec::new();
                for p in parts {
                    let t = p.get("type").and_then(Value::as_str).ok_or_else(|| {
                        format!("Failed to parse messages: Missing content part type: {p}")
                    })?;
                    if t != "text" && t != "media_marker" {
                        return Err(format!(
                            "Failed to parse messages: Unsupported content part type: \"{t}\""
                        ));
                    }
                    ps.push(
                        json!({"type": t, "text": p.get("text").cloned().unwrap_or(json!(""))}),
                    );
                }
                Value::Array(ps)
            }
            None | Some(Value::Null) | Some(Value::String(_)) | Some(Value::Array(_)) => json!(""),
            Some(other) => {
                return Err(format!(
                    "Failed to parse messages: Invalid 'content' type: expected string or array, got {other} (ref: https://github.com/ggml-org/llama.cpp/issues/8367)"
                ));
            }
        };
        j.insert("content".into(), content);
        for (from, to) in [
            ("reasoning_content", "reasoning_content"),
            ("name", "name"),
            ("tool_call_id", "tool_call_id"),
        ] {
            if let Some(Value::String(s)) = obj.get(from)
                && !s.is_empty()
            {
                j.insert(to.into(), json!(s));
            }
        }
        if let Some(calls) = obj.get("tool_calls").and_then(Value::as_array)
            && !calls.is_empty()
        {
            let mut tcs = Vec::new();
            for tc in calls {
                let f = tc.get("function").ok_or_else(|| {
                    format!("Failed to parse messages: Missing tool call function: {tc}")
                })?;
                let name = f.get("name").and_then(Value::as_str).ok_or_else(|| {
                    format!("Failed to parse messages: Missing tool call name: {tc}")
                })?;
                let args = match f.get("arguments") {
                    Some(Value::String(s)) => s.clone(),
                    Some(v) => v.to_string(),
                    None => "null".into(),
                };
                let mut c = Map::new();
                c.insert("type".into(), json!("function"));
                c.insert("function".into(), json!({"name": name, "arguments": args}));
                if let Some(Value::String(id)) = tc.get("id")
                    && !id.is_empty()
                {
                    c.insert("id".into(), json!(id));
                }
                tcs.push(Value::Object(c));
            }
            j.insert("tool_calls".into(), Value::Array(tcs));
        }
        out.push(Value::Object(j));
    }
    Ok(out)
}

/// `workaround::convert_tool_responses_gemma4`: `assistant(tool_calls) → tool+ →
/// assistant(content)` becomes one assistant message `{role, tool_calls, tool_responses:
/// [{name, response}], content, reasoning_content}`; a tool result that is JSON text is parsed.
fn gemma4_tool_responses(messages: Vec<Value>) -> Vec<Value> {
    let has_calls = |m: &Value| {
        m.get("tool_calls")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty())
    };
    let role = |m: &Value| {
        m.get("role")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i < messages.len() {
        let m = &messages[i];
        if role(m) != "assistant" || !has_calls(m) {
            out.push(m.clone());
            i += 1;
            continue;
        }
        let reasoning = m
            .get("reasoning_content")
            .filter(|r| r.is_string())
            .cloned();
        let calls: Vec<Value> = m["tool_calls"].as_array().cloned().unwrap_or_default();
        let mut responses = Vec::new();
        i += 1;
        while i < messages.len() && role(&messages[i]) == "tool" {
            let t = &messages[i];
            let response = match t.get("content") {
                Some(Value::String(c)) => {
                    serde_json::from_str::<Value>(c).unwrap_or_else(|_| json!(c))
                }
                Some(v) => v.clone(),
                None => Value::Null,
            };
            let mut name = calls
                .get(responses.len())
                .and_then(|c| c.pointer("/function/name"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            if name.is_empty() {
                name = t
                    .get("tool_call_id")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned();
            }
            responses.push(json!({"name": name, "response": response}));
            i += 1;
        }
        let mut content = None;
        if i < messages.len() && role(&messages[i]) == "assistant" && !has_calls(&messages[i]) {
            let c = messages[i].get("content");
            let non_empty = match c {
                Some(Value::String(s)) => !s.is_empty(),
                Some(Value::Array(a)) => !a.is_empty(),
                _ => false,
            };
            if non_empty {
                content = c.cloned();
                i += 1;
            }
        }
        let mut msg = Map::new();
        msg.insert("role".into(), json!("assistant"));
        msg.insert("tool_calls".into(), Value::Array(calls));
        if !responses.is_empty() {
            msg.insert("tool_responses".into(), Value::Array(responses));
        }
        if let Some(c) = content {
            msg.insert("content".into(), c);
        }
        if let Some(r) = reasoning {
            msg.insert("reasoning_content".into(), r);
        }
        out.push(Value::Object(msg));
    }
    out
}

/// `messages_inp_normalizer::concat_content_parts`.
fn concat_parts(parts: &[Value]) -> String {
    let mut text = String::new();
    let mut last_media = false;
    for p in parts {
        let t = p.get("type").and_then(Value::as_str).unwrap_or("");
        let add_nl = match t {
            "text" => {
                let nl = !last_media && !text.is_empty();
                last_media = false;
                nl
            }
            "media_marker" => {
                last_media = true;
                false
            }
            _ => continue,
        };
        if add_nl {
            text.push('\n');
        }
        text.push_str(p.get("text").and_then(Value::as_str).unwrap_or(""));
    }
    text
}

/// `common_chat_tools_parse_oaicompat` + `common_chat_tools_to_json_oaicompat`.
fn rebuild_tools(tools: &Value) -> Result<Option<Value>, String> {
    let Some(list) = tools.as_array() else {
        return match tools {
            Value::Null => Ok(None),
            other => Err(format!(
                "Failed to parse tools: Expected 'tools' to be an array, got {other}"
            )),
        };
    };
    if list.is_empty() {
        return Ok(None);
    }
    let mut out = Vec::new();
    for t in list {
        if t.get("type").and_then(Value::as_str) != Some("function") {
            return Err(format!("Failed to parse tools: Unsupported tool type: {t}"));
        }
        let f = t
            .get("function")
            .ok_or_else(|| format!("Failed to parse tools: Missing tool function: {t}"))?;
        let name = f
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("Failed to parse tools: missing name: {t}"))?;
        out.push(json!({"type": "function", "function": {
            "name": name,
            "description": f.get("description").and_then(Value::as_str).unwrap_or(""),
            "parameters": f.get("parameters").cloned().unwrap_or(json!({})),
        }}));
    }
    Ok(Some(Value::Array(out)))
}

/// Whether llama-server turns `enable_thinking` on by default for this template
/// (`common_chat_templates_support_enable_thinking`: the automatic parser found a reasoning
/// block, `analyze_reasoning` in `common/chat-diff-analyzer.cpp`). toolscope runs the same
/// probes with the same texts and applies simplified versions of their tests:
/// * reasoning presence: an assistant turn's `reasoning_content` reaches the output next to a
///   marker (`<…>` / `[…]`);
/// * `enable_thinking` false → true on a one-user-message prompt: the only change is text
///   appended at the end (either way), or a pair of markers appended;
/// * reasoning scope: `reasoning_content` shows only beside tool calls;
/// * the analyzer's template workarounds (old Qwen `content.split('</think>')`, Granite 3.3).
///
/// Hand-written llama.cpp formats (GPT-OSS `<|channel|>`, LFM2, Ministral 3, DeepSeek V3.2)
/// always support it.
pub fn supports_thinking(tmpl: &LlamaTemplate) -> bool {
    let src = tmpl.source();
    if src.contains("<|channel|>")
        || src.contains("<|tool_list_start|>")
        || (src.contains("[SYSTEM_PROMPT]")
            && src.contains("[TOOL_CALLS]")
            && src.contains("[ARGS]")
            && !src.contains("[CALL_ID]"))
        || (src.contains("dsml_token") && src.contains("DSML"))
    {
        return true;
    }
    if (src.contains("content.split('</think>')")
        && !src.contains("reasoning_content")
        && !src.contains("<SPECIAL_12>"))
        || src.contains("Write your thoughts between <think></think> and write your response between <response></response>")
    {
        return true;
    }
    const USER: &str = "U_USER_MSG Hello END_U";
    const ASSISTANT: &str = "A_ASST_MSG I can help END_A";
    const THINKING: &str = "REASON_PART I am thinking END_R";
    let apply = |messages: Value, tools: Option<Value>, agp: bool, et: bool| -> Option<String> {
        let mut m =
            json!({"messages": messages, "bos_token": "", "eos_token": "", "enable_thinking": et});
        if let Some(t) = tools {
            m["tools"] = t;
        }
        if agp {
            m["add_generation_prompt"] = json!(true);
        }
        tmpl.render_plain(&m).ok()
    };
    let is_marker_start = |s: &str| {
        let s = s.trim_start();
        (s.starts_with('<') && s.contains('>')) || (s.starts_with('[') && s.contains(']'))
    };
    let user = json!({"role": "user", "content": USER});
    // reasoning presence
    if let Some(b) = apply(
        json!([user.clone(), {"role": "assistant", "content": ASSISTANT, "reasoning_content": THINKING}]),
        None,
        false,
        true,
    ) && let Some(at) = b.find(THINKING)
        && is_marker_start(&b[at + THINKING.len()..])
    {
        return true;
    }
    // enable_thinking flip
    if let (Some(a), Some(b)) = (
        apply(json!([user.clone()]), None, true, false),
        apply(json!([user.clone()]), None, true, true),
    ) && a != b
    {
        let p = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
        let max_s = a.len().min(b.len()) - p;
        let sfx = a
            .bytes()
            .rev()
            .zip(b.bytes().rev())
            .take(max_s)
            .take_while(|(x, y)| x == y)
            .count();
        let (left, right) = (&a[p..a.len() - sfx], &b[p..b.len() - sfx]);
        let (lt, rt) = (left.trim(), right.trim());
        if lt.is_empty() && !rt.is_empty() && b.ends_with(rt) {
            return true;
        }
        if rt.is_empty() && !lt.is_empty() && a.ends_with(lt) {
            return true;
        }
        if !lt.is_empty() && !rt.is_empty() {
            // tail anchoring: one output's last 64 bytes appear in the other, followed by a
            // pair of markers (e.g. SmolLM3's `<think>\n\n</think>` when thinking is off)
            for (base, extended) in [(&b, &a), (&a, &b)] {
                let mut from = base.len().saturating_sub(64);
                while !base.is_char_boundary(from) {
                    from += 1;
                }
                let anchor = &base[from..];
                if let Some(pos) = extended.rfind(anchor)
                    && pos + anchor.len() < extended.len()
                {
                    let extra = extended[pos + anchor.len()..].trim();
                    if two_markers(extra) {
                        return true;
                    }
                }
            }
        }
    }
    // reasoning only beside tool calls
    let tools = json!([{"type": "function", "function": {"name": "foofoo", "description": "Test function",
        "parameters": {"type": "object", "properties": {"first": {"type": "string"}, "second": {"type": "string"}}, "required": ["first"]}}}]);
    let with_calls = json!([user.clone(), {"role": "assistant", "content": null, "reasoning_content": THINKING,
        "tool_calls": [{"id": "call00001", "type": "function", "function": {"name": "foofoo", "arguments": {"first": "VVVV", "second": "XXXX"}}}]}]);
    let plain =
        json!([user, {"role": "assistant", "content": ASSISTANT, "reasoning_content": THINKING}]);
    if let (Some(a), Some(b)) = (
        apply(plain, Some(tools.clone()), false, true),
        apply(with_calls, Some(tools), false, true),
    ) && !a.contains(THINKING)
        && b.contains(THINKING)
    {
        return true;
    }
    false
}

/// The reasoning block's opening and closing tags as `analyze_reasoning::compare_reasoning_presence`
/// reads them (chat-diff-analyzer.cpp): an assistant turn's `reasoning_content` rendered between
/// a marker (plus the whitespace after it) and whitespace + a marker + whitespace, e.g. Qwen3's
/// `("<think>\n", "\n</think>\n\n")`. `None` when the template shows no such block.
pub fn reasoning_tags(tmpl: &LlamaTemplate) -> Option<(String, String)> {
    const THINKING: &str = "REASON_PART I am thinking END_R";
    let ctx = json!({"messages": [
        {"role": "user", "content": "U_USER_MSG Hello END_U"},
        {"role": "assistant", "content": "A_ASST_MSG I can help END_A", "reasoning_content": THINKING}],
        "bos_token": "", "eos_token": "", "enable_thinking": true});
    let out = tmpl.render_plain(&ctx).ok()?;
    let at = out.find(THINKING)?;
    let before = &out[..at];
    let head = before.trim_end();
    let open = head.rfind(['<', '['])?;
    let marker = &head[open..];
    if !(marker.ends_with('>') || marker.ends_with(']')) {
        return None;
    }
    let start = before[open..].to_owned();
    let after = &out[at + THINKING.len()..];
    let lead = after.len() - after.trim_start().len();
    let rest = &after[lead..];
    let close = match rest.as_bytes().first()? {
        b'<' => '>',
        b'[' => ']',
        _ => return None,
    };
    let end_at = lead + rest.find(close)? + 1;
    let tail = &after[end_at..];
    let trail = tail.len() - tail.trim_start().len();
    Some((start, after[..end_at + trail].to_owned()))
}

/// `extra` is exactly two markers (`<…>` / `[…]`) with only whitespace around them
/// (`segmentize_markers` + `prune_whitespace_segments` yielding two MARKER segments).
fn two_markers(extra: &str) -> bool {
    let mut n = 0;
    let mut rest = extra.trim();
    while !rest.is_empty() {
        let close = match rest.as_bytes()[0] {
            b'<' => '>',
            b'[' => ']',
            _ => return false,
        };
        let Some(end) = rest.find(close) else {
            return false;
        };
        n += 1;
        rest = rest[end + 1..].trim_start();
    }
    n == 2
}

fn format_date(now: &time::OffsetDateTime, fmt: &str) -> String {
    crate::template::pyfmt::strftime(now, fmt)
}

/// Renders `input` with a template compiled under the llama.cpp profile, as llama-server would
/// (see the module docs). `input.request` (the OpenAI body as received) supplies the messages
/// and tools verbatim when set; else `input.messages` / `input.tools`.
///
/// Errors: llama-server's own request errors (malformed messages/tools, "Failed to parse tool
/// call arguments as JSON"), and render errors — wrapped in [`REFUSAL_PREFIX`] unless the
/// template has a hand-written llama.cpp format.
pub fn render(tmpl: &LlamaTemplate, input: &RenderInput) -> Result<String, RenderError> {
    let (ctx, continue_msg) = prepare(tmpl, input)?;
    let src = tmpl.source();
    let wrap = |e: RenderError| refusal(src, e);
    let mut prompt = tmpl
        .render_plain(&Value::Object(ctx.clone()))
        .map_err(wrap)?;
    if let Some(msg) = continue_msg {
        prompt.push_str(&continued(tmpl, ctx, &prompt, &msg)?);
    }
    Ok(without_vocab_tokens(tmpl, input, prompt))
}

/// The generation prompt llama-server's parser reads in front of the reply for `input`
/// (`common_chat_params::generation_prompt`, parsed as `generation_prompt + reply`,
/// common/chat.cpp:1465, build 11434): the render with `add_generation_prompt` minus the render
/// without it (`common_chat_template_generation_prompt_impl`, chat.cpp:974-994); for a request
/// ending with an assistant prefill, continued as llama-server continues it
/// (chat.cpp:1258-1276, chat-auto-parser-generator.cpp:45-60): that prompt up to the template's
/// reasoning start, the reasoning start, the prefilled reasoning, the reasoning end, then the
/// prefilled content (Qwen3 with the prefill `<think>\n`:
/// `<|im_start|>assistant\n<think>\n\n</think>\n\n<think>\n`). Returns (the render of the
/// closed messages, without the generation prompt; the generation prompt).
///
/// Errors: as [`render`].
pub fn generation_prompt(
    tmpl: &LlamaTemplate,
    input: &RenderInput,
) -> Result<(String, String), RenderError> {
    let (mut ctx, continue_msg) = prepare(tmpl, input)?;
    let src = tmpl.source();
    ctx.remove("add_generation_prompt");
    let closed = tmpl
        .render_plain(&Value::Object(ctx.clone()))
        .map_err(|e| refusal(src, e))?;
    let gen_prompt = match continue_msg {
        Some(msg) => continued(tmpl, ctx, &closed, &msg)?,
        None => {
            ctx.insert("add_generation_prompt".into(), json!(true));
            let with = tmpl
                .render_plain(&Value::Object(ctx))
                .map_err(|e| refusal(src, e))?;
            let common = common_prefix(&closed, &with);
            with[common..].to_owned()
        }
    };
    Ok((without_vocab_tokens(tmpl, input, closed), gen_prompt))
}

/// The length of the common prefix of `a` and `b`, at a char boundary.
fn common_prefix(a: &str, b: &str) -> usize {
    let n = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    (0..=n).rev().find(|&i| b.is_char_boundary(i)).unwrap_or(0)
}

/// The render context for `input` (request parsing, messages rebuilt and normalised, the
/// workarounds; `add_generation_prompt` set when it applies) and the assistant prefill the
/// server continues, when the request ends with one.
fn prepare(
    tmpl: &LlamaTemplate,
    input: &RenderInput,
) -> Result<(Map<String, Value>, Option<Value>), RenderError> {
    let now = tmpl.now;
    let src = tmpl.source();
    let req = input.request.as_ref();
    let raw_messages = req
        .and_then(|r| r.get("messages"))
        .cloned()
        .unwrap_or_else(|| input.messages.clone());
    let raw_tools = match req {
        Some(r) => r.get("tools").cloned().unwrap_or(Value::Null),
        None => input.tools.clone().unwrap_or(Value::Null),
    };
    let mut messages = rebuild_messages(&raw_messages).map_err(|m| eval_err(tmpl, m))?;
    let tools = rebuild_tools(&raw_tools).map_err(|m| eval_err(tmpl, m))?;

    // prefill (server-common.cpp, `prefill_assistant` on by default): a trailing assistant
    // message is continued, not closed; it leaves the rendered messages
    // (common_chat_templates_apply_jinja) before any workaround sees them
    let body = req.cloned().unwrap_or(Value::Null);
    let mut add_generation_prompt = input.add_generation_prompt;
    let mut continue_msg: Option<Value> = None;
    if messages
        .last()
        .and_then(|m| m.get("role"))
        .and_then(Value::as_str)
        == Some("assistant")
        && body.get("continue_final_message").is_none()
    {
        add_generation_prompt = false;
        continue_msg = messages.pop();
    }
    normalise_messages(tmpl, &mut messages)?;
    let messages = family_workarounds(src, messages);
    let mut ctx = template_context(tmpl, input, &body, messages, tools.as_ref(), now)?;
    if add_generation_prompt {
        ctx.insert("add_generation_prompt".into(), json!(true));
    }
    Ok((ctx, continue_msg))
}

/// `prompt` without a leading `bos_token` when the vocabulary adds BOS itself, and a trailing
/// `eos_token` when it adds EOS (common_chat_template_direct_apply_impl).
fn without_vocab_tokens(tmpl: &LlamaTemplate, input: &RenderInput, mut prompt: String) -> String {
    let vocab = tmpl.vocab;
    let bos = input.bos_token.as_deref().unwrap_or("");
    if vocab.add_bos && prompt.starts_with(bos) {
        prompt.drain(..bos.len());
    }
    let eos = input.eos_token.as_deref().unwrap_or("");
    if vocab.add_eos && prompt.ends_with(eos) {
        prompt.truncate(prompt.len() - eos.len());
    }
    prompt
}

/// A render error as llama-server reports it: wrapped in [`REFUSAL_PREFIX`] unless the template
/// has a hand-written llama.cpp format or the error is toolscope's own budget stop.
fn refusal(src: &str, e: RenderError) -> RenderError {
    // toolscope's own budget stop (budget.rs: fuel, bytes, output) is not a llama-server
    // refusal; a template that recurses without end is refused by llama-server too
    // ("Unable to generate parser …", seen on the Hermes / Command R+ tool_use templates,
    // tests/e2e/template_engine_e2e.rs), so that one is wrapped like any other render error.
    let own_budget =
        e.kind == RenderErrorKind::Limit && !e.message.contains("recursion limit exceeded");
    if specialized(src) || own_budget {
        e
    } else {
        RenderError {
            message: format!("{REFUSAL_PREFIX}{}", e.message),
            ..e
        }
    }
}

/// llama-server's message normalisation by the template's capabilities
/// (common/chat.cpp, server-common.cpp): string-only / typed-only content, `developer` →
/// `system` (except Harmony), a system message folded into the next for templates without a
/// system role, tool-call arguments parsed for templates that take objects.
///
/// Errors: arguments that are not JSON (llama-server's "Failed to parse tool call arguments
/// as JSON").
fn normalise_messages(tmpl: &LlamaTemplate, messages: &mut Vec<Value>) -> Result<(), RenderError> {
    let caps = tmpl.caps();
    let src = tmpl.source();
    // content normalisation for string-only / typed-only templates
    let only_string = caps.supports_string_content && !caps.supports_typed_content;
    let only_typed = !caps.supports_string_content && caps.supports_typed_content;
    for m in messages.iter_mut() {
        let Some(c) = m.get_mut("content") else {
            continue;
        };
        if only_typed && let Some(s) = c.as_str() {
            *c = json!([{"type": "text", "text": s}]);
        } else if only_string && let Some(parts) = c.as_array() {
            *c = json!(concat_parts(parts));
        }
    }
    if !src.contains("<|channel|>") {
        for m in messages.iter_mut() {
            if m.get("role").and_then(Value::as_str) == Some("developer") {
                m["role"] = json!("system");
            }
        }
    }
    if !caps.supports_system_role
        && messages
            .first()
            .and_then(|m| m.get("role"))
            .and_then(Value::as_str)
            == Some("system")
    {
        if messages.len() > 1 {
            let sys = messages[0]
                .get("content")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            let next = messages[1]
                .get("content")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            messages[1]["content"] = json!(format!("{sys}\n{next}"));
        }
        messages.remove(0);
    }
    if caps.supports_object_arguments {
        for m in messages.iter_mut() {
            let Some(calls) = m.get_mut("tool_calls").and_then(Value::as_array_mut) else {
                continue;
            };
            for c in calls {
                if let Some(a) = c.pointer_mut("/function/arguments")
                    && let Some(s) = a.as_str()
                {
                    match serde_json::from_str::<Value>(s) {
                        Ok(v) => *a = v,
                        Err(e) => {
                            return Err(eval_err(
                                tmpl,
                                format!("Failed to parse tool call arguments as JSON: {e}"),
                            ));
                        }
                    }
                }
            }
        }
    }

    Ok(())
}

/// The per-family message rewrites of llama.cpp's hand-written formats (common/parsers/*.cpp,
/// build 11434), chosen by the template's markers.
fn family_workarounds(src: &str, mut messages: Vec<Value>) -> Vec<Value> {
    // Gemma 4 templates older than the "OpenAI Chat Completions" one: tool results folded into
    // the calling assistant turn (common/parsers/gemma4.cpp convert_tool_responses_gemma4)
    if src.contains("'<|tool_call>call:'") && !src.contains("{#- OpenAI Chat Completions:") {
        messages = gemma4_tool_responses(messages);
    }

    // GPT-OSS (and, from build 11434, LLM-jp Harmony) copy `reasoning_content` to `thinking`
    // and drop `content` beside tool calls (common/parsers/gpt-oss.cpp, llm-jp-harmony.cpp)
    if src.contains("<|channel|>") {
        for m in messages.iter_mut() {
            let Some(o) = m.as_object_mut() else {
                continue;
            };
            if let Some(r) = o
                .get("reasoning_content")
                .filter(|r| r.is_string())
                .cloned()
            {
                o.insert("thinking".into(), r);
                if o.get("tool_calls")
                    .and_then(Value::as_array)
                    .is_some_and(|a| !a.is_empty())
                {
                    o.remove("content");
                }
            }
        }
    }

    // LFM2 copies `reasoning_content` to `thinking` (common/parsers/lfm2.cpp)
    if src.contains("<|tool_list_start|>") || src.contains("List of tools: [") {
        for m in messages.iter_mut() {
            if let Some(o) = m.as_object_mut()
                && let Some(r) = o
                    .get("reasoning_content")
                    .filter(|r| r.is_string())
                    .cloned()
            {
                o.insert("thinking".into(), r);
            }
        }
    }
    // Ministral 3: system and assistant contents become blocks, reasoning a `thinking` block
    // (common/parsers/ministral3.cpp)
    if src.contains("[SYSTEM_PROMPT]")
        && src.contains("[TOOL_CALLS]")
        && src.contains("[ARGS]")
        && !src.contains("[CALL_ID]")
    {
        for m in messages.iter_mut() {
            let role = m.get("role").and_then(Value::as_str).unwrap_or("");
            if role != "system" && role != "assistant" {
                continue;
            }
            let Some(o) = m.as_object_mut() else {
                continue;
            };
            let mut blocks = Vec::new();
            if let Some(Value::String(r)) = o.get("reasoning_content") {
                blocks.push(json!({"type": "thinking", "thinking": r}));
            }
            match o.get("content") {
                Some(Value::String(c)) => blocks.push(json!({"type": "text", "text": c})),
                Some(Value::Array(a)) => blocks.extend(a.iter().cloned()),
                _ => {}
            }
            o.insert("content".into(), Value::Array(blocks));
            o.remove("reasoning_content");
        }
    }

    messages
}

/// The template's context as llama-server builds it: messages, tools, BOS/EOS texts, the
/// request flags (`chat_template_kwargs`, `reasoning_effort`, `enable_thinking`; server-common.cpp)
/// and the dates. `add_generation_prompt` is left to the caller.
///
/// Errors: an `enable_thinking` that is a string (llama-server refuses it).
fn template_context(
    tmpl: &LlamaTemplate,
    input: &RenderInput,
    body: &Value,
    messages: Vec<Value>,
    tools: Option<&Value>,
    now: time::OffsetDateTime,
) -> Result<Map<String, Value>, RenderError> {
    // request flags (server-common.cpp)
    let mut kwargs: std::collections::BTreeMap<String, Value> = Default::default();
    kwargs.insert("preserve_reasoning".into(), json!(true));
    for (k, v) in &input.chat_template_kwargs {
        kwargs.insert(k.clone(), v.clone());
    }
    let mut enable_thinking = tmpl.supports_thinking();
    match kwargs.get("enable_thinking") {
        Some(Value::Bool(b)) => enable_thinking = *b,
        Some(Value::String(_)) => {
            return Err(eval_err(
                tmpl,
                "invalid type for \"enable_thinking\" (expected boolean, got string)".into(),
            ));
        }
        _ => {}
    }
    if let Some(effort) = body.get("reasoning_effort").and_then(Value::as_str) {
        if effort == "none" {
            enable_thinking = false;
            kwargs.remove("reasoning_effort");
        } else if !effort.is_empty() {
            kwargs.insert("reasoning_effort".into(), json!(effort));
        }
    }

    let mut ctx = Map::new();
    let preserve = kwargs.get("preserve_reasoning").and_then(Value::as_bool);
    if let Some(p) = preserve {
        ctx.insert("preserve_thinking".into(), json!(p));
        ctx.insert("clear_thinking".into(), json!(!p));
        ctx.insert("truncate_history_thinking".into(), json!(!p));
        ctx.insert("drop_thinking".into(), json!(!p));
    }
    if let Some(e) = kwargs.get("reasoning_effort").and_then(Value::as_str)
        && !e.is_empty()
    {
        ctx.insert("reasoning_strength".into(), json!(e));
    }
    ctx.insert("messages".into(), Value::Array(messages));
    ctx.insert(
        "bos_token".into(),
        json!(input.bos_token.clone().unwrap_or_default()),
    );
    ctx.insert(
        "eos_token".into(),
        json!(input.eos_token.clone().unwrap_or_default()),
    );
    ctx.insert("enable_thinking".into(), json!(enable_thinking));
    if let Some(t) = tools {
        ctx.insert("tools".into(), t.clone());
    }
    ctx.insert("datetime".into(), json!(format_date(&now, "%b %d %Y")));
    ctx.insert("date_string".into(), json!(format_date(&now, "%d %b %Y")));
    for (k, v) in &kwargs {
        ctx.insert(k.clone(), v.clone());
    }
    Ok(ctx)
}

/// What follows the render of the closed messages (`prompt`) when the last message, `msg`, is
/// an assistant prefill: the generation prompt (the difference between the render with and
/// without `add_generation_prompt`), then the prefilled reasoning and content
/// (common_chat_templates_apply_jinja, chat-auto-parser-generator.cpp).
fn continued(
    tmpl: &LlamaTemplate,
    ctx: Map<String, Value>,
    prompt: &str,
    msg: &Value,
) -> Result<String, RenderError> {
    let src = tmpl.source();
    // The generation prompt (difference between the render with and without
    // add_generation_prompt), then the prefilled content (common_chat_templates_apply_jinja,
    // chat-auto-parser-generator.cpp).
    let mut with_gen = ctx;
    with_gen.insert("add_generation_prompt".into(), json!(true));
    let with_gen_prompt = tmpl
        .render_plain(&Value::Object(with_gen))
        .map_err(|e| refusal(src, e))?;
    let common = common_prefix(prompt, &with_gen_prompt);
    let mut gen_prompt = with_gen_prompt[common..].to_owned();
    let content = match msg.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(p)) => concat_parts(p),
        _ => String::new(),
    };
    let reasoning = msg
        .get("reasoning_content")
        .and_then(Value::as_str)
        .unwrap_or("");
    // continue_final_message AUTO: reasoning when the message has reasoning and no content
    let continue_content = reasoning.is_empty() || !content.is_empty();
    if !specialized(src)
        && let Some((start, end)) = reasoning_tags(tmpl)
    {
        if let Some(at) = gen_prompt.find(&start) {
            gen_prompt.truncate(at);
        }
        gen_prompt.push_str(&start);
        gen_prompt.push_str(reasoning);
        if continue_content {
            gen_prompt.push_str(&end);
        }
    }
    if continue_content {
        gen_prompt.push_str(&content);
    }
    Ok(gen_prompt)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reply_format_per_build() {
        // read by hand: build 11434 common/chat.cpp:1103 matches "chat_format=llm-jp-harmony-v1"
        // before the GPT-OSS "<|channel|>" test (line 1109); build 11312 has only the latter
        // (its line 1103) and no common/parsers/llm-jp-harmony.cpp
        let llm_jp =
            "{#- chat_format=llm-jp-harmony-v1 #}<|start|>assistant<|channel|>final<|message|>";
        assert_eq!(
            reply_format(llm_jp, &BuildRules::for_build(11434)),
            Some("LLM-jp Harmony v1")
        );
        assert_eq!(
            reply_format(llm_jp, &BuildRules::for_build(11312)),
            Some("GPT-OSS")
        );
        let gpt_oss = "<|start|>assistant<|channel|>final<|message|>";
        assert_eq!(
            reply_format(gpt_oss, &BuildRules::for_build(11312)),
            reply_format(gpt_oss, &BuildRules::for_build(11434))
        );
        assert_eq!(
            reply_format("<|im_start|>", &BuildRules::for_build(11434)),
            None
        );
    }
}
