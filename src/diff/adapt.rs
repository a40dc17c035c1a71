//! Thin adapters to the stages `diff` builds on (template rendering, schema loss, tool-call
//! syntax detection). Each is one function so it can be switched to the owning module's API
//! when that lands; until then each has a small local implementation documented here. Pure.

use serde_json::{Map, Value, json};

use crate::finding::{Evidence, Finding, Pane, Rule};

/// A request reduced to what a chat template sees: OpenAI-shaped `messages` and `tools`, the
/// generation flag, and extra template variables (`chat_template_kwargs`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TemplateInput {
    pub messages: Vec<Value>,
    /// OpenAI `tools` array (`[{"type":"function","function":{name, description, parameters}}]`).
    pub tools: Option<Value>,
    pub add_generation_prompt: bool,
    pub kwargs: Map<String, Value>,
}

impl TemplateInput {
    /// From an OpenAI chat body. Tool-call `arguments` strings holding a JSON object are parsed
    /// into objects, as llama-server does for templates that iterate arguments
    /// (`workaround::func_args_not_string`, llama.cpp common/chat.cpp, build 11434).
    pub fn from_openai(body: &Value) -> TemplateInput {
        let mut messages: Vec<Value> = body
            .get("messages")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for m in &mut messages {
            if let Some(calls) = m.get_mut("tool_calls").and_then(Value::as_array_mut) {
                for c in calls {
                    if let Some(args) = c.pointer_mut("/function/arguments")
                        && let Some(s) = args.as_str()
                        && let Ok(v @ Value::Object(_)) = serde_json::from_str::<Value>(s)
                    {
                        *args = v;
                    }
                }
            }
        }
        TemplateInput {
            messages,
            tools: body
                .get("tools")
                .filter(|t| t.as_array().is_some_and(|a| !a.is_empty()))
                .cloned(),
            add_generation_prompt: body
                .get("add_generation_prompt")
                .and_then(Value::as_bool)
                .unwrap_or(true),
            kwargs: body
                .get("chat_template_kwargs")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default(),
        }
    }

    /// From an Anthropic messages body: `system` becomes a system message, `tool_use` blocks
    /// assistant `tool_calls`, `tool_result` blocks `tool` messages, `input_schema` becomes
    /// `parameters`, `thinking` blocks `reasoning_content`.
    pub fn from_anthropic(body: &Value) -> TemplateInput {
        let mut messages = Vec::new();
        let text_of = |v: &Value| -> String {
            match v {
                Value::String(s) => s.clone(),
                Value::Array(parts) => parts
                    .iter()
                    .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
                    .filter_map(|p| p.get("text").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join(""),
                _ => String::new(),
            }
        };
        if let Some(sys) = body.get("system") {
            messages.push(json!({"role": "system", "content": text_of(sys)}));
        }
        for m in body
            .get("messages")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let role = m.get("role").and_then(Value::as_str).unwrap_or("user");
            let content = m.get("content").cloned().unwrap_or(Value::Null);
            let Some(blocks) = content.as_array() else {
                messages.push(json!({"role": role, "content": text_of(&content)}));
                continue;
            };
            let mut text = String::new();
            let mut reasoning = String::new();
            let mut calls = Vec::new();
            for b in blocks {
                match b.get("type").and_then(Value::as_str) {
                    Some("text") => text.push_str(b.get("text").and_then(Value::as_str).unwrap_or("")),
                    Some("thinking") => reasoning.push_str(b.get("thinking").and_then(Value::as_str).unwrap_or("")),
                    Some("tool_use") => calls.push(json!({
                        "id": b.get("id").cloned().unwrap_or(Value::Null),
                        "type": "function",
                        "function": {"name": b.get("name").cloned().unwrap_or(Value::Null), "arguments": b.get("input").cloned().unwrap_or(json!({}))}
                    })),
                    Some("tool_result") => messages.push(json!({
                        "role": "tool",
                        "tool_call_id": b.get("tool_use_id").cloned().unwrap_or(Value::Null),
                        "content": text_of(b.get("content").unwrap_or(&Value::Null)),
                    })),
                    _ => {}
                }
            }
            if !text.is_empty() || !calls.is_empty() || !reasoning.is_empty() || role == "assistant"
            {
                let mut msg = json!({"role": role, "content": text});
                if !calls.is_empty() {
                    msg["tool_calls"] = Value::Array(calls);
                }
                if !reasoning.is_empty() {
                    msg["reasoning_content"] = Value::String(reasoning);
                }
                messages.push(msg);
            }
        }
        let tools = body.get("tools").and_then(Value::as_array).filter(|a| !a.is_empty()).map(|a| {
            Value::Array(
                a.iter()
                    .map(|t| {
                        json!({"type": "function", "function": {
                            "name": t.get("name").cloned().unwrap_or(Value::Null),
                            "description": t.get("description").cloned().unwrap_or(Value::String(String::new())),
                            "parameters": t.get("input_schema").cloned().unwrap_or(json!({"type": "object", "properties": {}})),
                        }})
                    })
                    .collect(),
            )
        });
        TemplateInput {
            messages,
            tools,
            add_generation_prompt: true,
            kwargs: Map::new(),
        }
    }
}

/// Renders `template` for `input` as transformers' `apply_chat_template` does (Python
/// jinja2 with `trim_blocks`, `lstrip_blocks`, `loopcontrols`, `tojson` without ASCII escaping,
/// `raise_exception`, `strftime_now`), with `bos_token`/`eos_token` given.
/// `now` is `strftime_now`'s clock as `(year, month, day)` (the date part is all corpus
/// templates use); default 2026-01-02.
///
/// Errors: a message with line information from the template engine.
///
/// Interim local implementation on minijinja; switches to `template::render::render` when
/// the template module lands.
pub fn render(
    template: &str,
    input: &TemplateInput,
    bos: &str,
    eos: &str,
) -> Result<String, String> {
    use minijinja::{Environment, Error, ErrorKind, Value as J};
    let mut env = Environment::new();
    env.set_syntax(
        minijinja::syntax::SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()
            .map_err(|e| e.to_string())?,
    );
    minijinja_contrib::add_to_environment(&mut env);
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.set_fuel(Some(50_000_000));
    env.add_function("raise_exception", |msg: String| -> Result<J, Error> {
        Err(Error::new(ErrorKind::InvalidOperation, msg))
    });
    env.add_function("strftime_now", |fmt: String| -> String {
        fmt.replace("%Y", "2026")
            .replace("%m", "01")
            .replace("%d", "02")
            .replace("%b", "Jan")
            .replace("%B", "January")
    });
    env.add_filter(
        "tojson",
        |v: J, kwargs: minijinja::value::Kwargs| -> Result<J, Error> {
            let indent: Option<usize> = kwargs.get("indent")?;
            let _: Option<bool> = kwargs.get("ensure_ascii")?;
            let _: Option<bool> = kwargs.get("sort_keys")?;
            kwargs.assert_all_used()?;
            let jv = from_j(&v);
            let mut out = String::new();
            py_json(&jv, indent, 0, &mut out);
            Ok(J::from_safe_string(out))
        },
    );
    env.add_template_owned("chat", template.to_owned())
        .map_err(|e| format!("{e:#}"))?;
    let tmpl = env.get_template("chat").map_err(|e| format!("{e:#}"))?;
    let mut ctx = Map::new();
    ctx.insert("messages".into(), Value::Array(input.messages.clone()));
    if let Some(t) = &input.tools {
        ctx.insert("tools".into(), t.clone());
    }
    ctx.insert(
        "add_generation_prompt".into(),
        Value::Bool(input.add_generation_prompt),
    );
    ctx.insert("bos_token".into(), Value::String(bos.to_owned()));
    ctx.insert("eos_token".into(), Value::String(eos.to_owned()));
    for (k, v) in &input.kwargs {
        ctx.insert(k.clone(), v.clone());
    }
    tmpl.render(to_j(&Value::Object(ctx))).map_err(|e| {
        let mut msg = e.to_string();
        if let Some(line) = e.line() {
            msg = format!("line {line}: {msg}");
        }
        msg
    })
}

/// JSON → template value, keeping object key order.
fn to_j(v: &Value) -> minijinja::Value {
    use minijinja::Value as J;
    match v {
        Value::Null => J::from(()),
        Value::Bool(b) => J::from(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => J::from(i),
            (_, Some(u)) => J::from(u),
            _ => J::from(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => J::from(s.as_str()),
        Value::Array(a) => a.iter().map(to_j).collect(),
        Value::Object(o) => J::from_pairs(o.iter().map(|(k, v)| (k.as_str(), to_j(v)))),
    }
}

/// Template value → JSON (for `tojson`).
fn from_j(v: &minijinja::Value) -> Value {
    use minijinja::value::ValueKind as K;
    match v.kind() {
        K::Undefined | K::None => Value::Null,
        K::Bool => Value::Bool(v.is_true()),
        K::Number => match v.as_i64() {
            Some(i) if !v.to_string().contains(['.', 'e', 'E']) => Value::from(i),
            _ => f64::try_from(v.clone())
                .ok()
                .and_then(serde_json::Number::from_f64)
                .map_or(Value::Null, Value::Number),
        },
        K::String => Value::String(v.as_str().unwrap_or_default().to_owned()),
        K::Seq | K::Iterable => Value::Array(
            v.try_iter()
                .map(|it| it.map(|x| from_j(&x)).collect())
                .unwrap_or_default(),
        ),
        K::Map => {
            let mut m = Map::new();
            if let Ok(keys) = v.try_iter() {
                for k in keys {
                    let val = v.get_item(&k).unwrap_or_default();
                    m.insert(
                        k.as_str()
                            .map(str::to_owned)
                            .unwrap_or_else(|| k.to_string()),
                        from_j(&val),
                    );
                }
            }
            Value::Object(m)
        }
        _ => Value::String(v.to_string()),
    }
}

/// Python `json.dumps(v, ensure_ascii=False, indent=indent)`: `", "`/`": "` separators
/// without indent, `","`/`": "` and newlines with.
pub fn py_json(v: &Value, indent: Option<usize>, depth: usize, out: &mut String) {
    let nl = |out: &mut String, d: usize| {
        if let Some(n) = indent {
            out.push('\n');
            out.extend(std::iter::repeat_n(' ', n * d));
        }
    };
    let sep = if indent.is_some() { "," } else { ", " };
    match v {
        Value::Array(a) if !a.is_empty() => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push_str(sep);
                }
                nl(out, depth + 1);
                py_json(x, indent, depth + 1, out);
            }
            nl(out, depth);
            out.push(']');
        }
        Value::Object(o) if !o.is_empty() => {
            out.push('{');
            for (i, (k, x)) in o.iter().enumerate() {
                if i > 0 {
                    out.push_str(sep);
                }
                nl(out, depth + 1);
                out.push_str(&serde_json::to_string(k).unwrap_or_default());
                out.push_str(": ");
                py_json(x, indent, depth + 1, out);
            }
            nl(out, depth);
            out.push('}');
        }
        other => out.push_str(&serde_json::to_string(other).unwrap_or_default()),
    }
}

/// The tool-call syntax a template implies for the parser, by the call markers it writes
/// (names as in /work/shared/notes/tool-call-syntaxes.md): `gemma4`, `qwen3_coder`, `hermes`,
/// `llama3`, `mistral`, `deepseek_v3`, `deepseek_dsml`, `kimi_k2`, `glm`, `harmony`, `minimax`,
/// `functiongemma`, `command_r7b`, `functionary_v3_2`, `functionary_v3_1`, `nemotron`, `lfm2`,
/// `seed_oss`, `pythonic`; `None` when the template writes no tool calls.
///
/// Interim local implementation; switches to `parser::Syntax::detect_from_template` when the
/// parser module lands.
pub fn implied_syntax(template: &str) -> Option<String> {
    let t = template;
    let has = |s: &str| t.contains(s);
    let name = if has("<|tool_call>") {
        "gemma4"
    } else if has("<start_function_call>") {
        "functiongemma"
    } else if has("<seed:tool_call>") {
        "seed_oss"
    } else if has("<minimax:tool_call>") {
        "minimax"
    } else if has("<｜DSML｜") {
        "deepseek_dsml"
    } else if has("tool▁calls▁begin") || has("tool▁call▁begin") {
        "deepseek_v3"
    } else if has("<|tool_calls_section_begin|>") {
        "kimi_k2"
    } else if has("<arg_key>") {
        "glm"
    } else if has("<|tool_call_start|>") {
        "lfm2"
    } else if has("<tool_call>") && (has("<function=") || has("<parameter=")) {
        "qwen3_coder"
    } else if has("<tool_call>") {
        "hermes"
    } else if has("<TOOLCALL>") {
        "nemotron"
    } else if has("[TOOL_CALLS]") {
        "mistral"
    } else if has("<|START_ACTION|>") {
        "command_r7b"
    } else if has("to=functions") || (has("<|channel|>") && has("<|call|>")) {
        "harmony"
    } else if has("<|python_tag|>") || (has("<|start_header_id|>") && has("\"parameters\"")) {
        "llama3"
    } else if has(">>>") && has("all") {
        "functionary_v3_2"
    } else if has("<function=") {
        "functionary_v3_1"
    } else if has("tool_calls") && has("(") && has("[") && has("pythonic") {
        "pythonic"
    } else {
        return None;
    };
    Some(name.to_owned())
}

/// Schema facts of `tools` that never reached `rendered`, as `schema.*` findings with the tool
/// name and the JSON Pointer of the parameter (into the tool's `parameters`).
///
/// Interim local implementation (switches to `schema::loss::schema_loss` when the schema module
/// lands). Per parameter, in the text from the parameter's name to the next sibling's name:
/// `schema.type_lost` when none of its types is printed, when the type prints empty
/// (`type:<|"|><|"|>`, `"type": ""`) or as a Python list repr (`['STRING', 'NULL']`), or when a
/// nullable parameter shows no `null`/`nullable`; `schema.alternative_dropped` when some `anyOf`
/// /`oneOf` alternatives' types print and others do not, or enum values are missing;
/// `schema.ref_unresolved` when a `$ref` is printed verbatim.
pub fn schema_loss(tools: &Value, rendered: &str) -> Vec<Finding> {
    let mut out = Vec::new();
    let lower = rendered.to_lowercase();
    for t in tools.as_array().into_iter().flatten() {
        let f = t.get("function").unwrap_or(t);
        let Some(name) = f.get("name").and_then(Value::as_str) else {
            continue;
        };
        let params = f
            .get("parameters")
            .or_else(|| f.get("input_schema"))
            .cloned()
            .unwrap_or(Value::Null);
        let Some(tool_at) = lower.find(&name.to_lowercase()) else {
            continue;
        };
        walk(name, &params, "", &lower, tool_at, &mut out);
    }
    out
}

fn types_of(s: &Value) -> (Vec<String>, bool, usize) {
    // (non-null types, nullable, number of anyOf/oneOf alternatives)
    let mut types = Vec::new();
    let mut nullable = s.get("nullable").and_then(Value::as_bool).unwrap_or(false);
    let mut alts = 0;
    match s.get("type") {
        Some(Value::String(t)) => types.push(t.clone()),
        Some(Value::Array(a)) => {
            types.extend(a.iter().filter_map(Value::as_str).map(str::to_owned))
        }
        _ => {}
    }
    for key in ["anyOf", "oneOf"] {
        for alt in s.get(key).and_then(Value::as_array).into_iter().flatten() {
            alts += 1;
            if let Some(t) = alt.get("type").and_then(Value::as_str) {
                types.push(t.to_owned());
            }
        }
    }
    if types.iter().any(|t| t == "null") {
        nullable = true;
    }
    types.retain(|t| t != "null");
    (types, nullable, alts)
}

fn walk(tool: &str, schema: &Value, ptr: &str, text: &str, from: usize, out: &mut Vec<Finding>) {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (k, sub) in props {
        let p = format!(
            "{ptr}/properties/{}",
            k.replace('~', "~0").replace('/', "~1")
        );
        let Some((at, value_at)) = find_key(text, from, k) else {
            continue;
        };
        let win = &text[at..value_end(text, value_at)];
        check(tool, sub, &p, win, out);
        if sub.get("properties").is_some() {
            walk(tool, sub, &p, text, value_at, out);
        }
        if let Some(items) = sub.get("items").filter(|i| i.is_object())
            && let Some((ia, iv)) = find_key(win, 0, "items")
        {
            let ip = format!("{p}/items");
            check(tool, items, &ip, &win[ia..value_end(win, iv)], out);
        }
    }
}

/// Finds `key` printed as a key (`key:`, `"key":`, `'key':`) at or after `from`; returns the
/// key's offset and the offset of its value (after the colon and spaces).
fn find_key(text: &str, from: usize, key: &str) -> Option<(usize, usize)> {
    let k = key.to_lowercase();
    let mut i = from;
    while let Some(p) = text.get(i..)?.find(&k) {
        let at = i + p;
        let before = text[..at].chars().next_back();
        let edge = |c: Option<char>| c.is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
        let rest = &text[at + k.len()..];
        let rest2 = rest.strip_prefix(['"', '\'']).unwrap_or(rest);
        let rest3 = rest2.trim_start_matches([' ', '\t']);
        if edge(before)
            && !rest.starts_with(|c: char| c.is_alphanumeric() || c == '_')
            && rest3.starts_with(':')
        {
            let after_colon = &rest3[1..];
            let value = text.len() - after_colon.trim_start().len();
            return Some((at, value));
        }
        i = at + k.len();
    }
    None
}

/// End of the value starting at `at`: the matching close of a `{`/`[`, else the next `,`,
/// newline or closing bracket.
fn value_end(text: &str, at: usize) -> usize {
    let rest = &text[at..];
    if rest.starts_with(['{', '[']) {
        let mut depth = 0usize;
        for (i, c) in rest.char_indices() {
            match c {
                '{' | '[' => depth += 1,
                '}' | ']' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        return at + i + 1;
                    }
                }
                _ => {}
            }
        }
        return text.len();
    }
    at + rest.find([',', '\n', '}', ']']).unwrap_or(rest.len())
}

fn has_word(text: &str, w: &str) -> bool {
    let w = w.to_lowercase();
    text.match_indices(&w).any(|(at, _)| {
        let edge = |c: Option<char>| c.is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
        edge(text[..at].chars().next_back()) && edge(text[at + w.len()..].chars().next())
    })
}

fn finding(rule: Rule, tool: &str, ptr: &str, msg: String) -> Finding {
    let evidence = Evidence {
        pane: Some(Pane::Schema),
        tool: Some(tool.to_owned()),
        pointer: Some(ptr.to_owned()),
        ..Evidence::default()
    };
    let hint = match rule {
        Rule::SchemaRefUnresolved => "resolve $ref inline before sending (toolscope flatten)",
        _ => {
            "rewrite the schema into a shape this template can print (toolscope flatten --template)"
        }
    };
    Finding::new(rule, msg, hint).with_evidence(evidence)
}

fn check(tool: &str, s: &Value, ptr: &str, win: &str, out: &mut Vec<Finding>) {
    if s.get("$ref").is_some() && win.contains("$ref") {
        out.push(finding(
            Rule::SchemaRefUnresolved,
            tool,
            ptr,
            format!("{tool}{ptr}: $ref printed unresolved"),
        ));
        return;
    }
    let (types, nullable, alts) = types_of(s);
    if types.is_empty() {
        return;
    }
    let empty = win.contains("type:<|\"|><|\"|>")
        || win.contains("\"type\": \"\"")
        || win.contains("type: ''");
    let repr = win.contains("['") && types.iter().any(|t| win.contains(&format!("'{t}'")));
    let printed: Vec<&String> = types.iter().filter(|t| has_word(win, t)).collect();
    if empty || repr || printed.is_empty() {
        let how = if empty {
            "the type prints empty"
        } else if repr {
            "the type prints as a Python list repr"
        } else {
            "no type is printed"
        };
        let mut lost = types.join("|");
        if nullable {
            lost.push_str(", nullable");
        }
        out.push(finding(
            Rule::SchemaTypeLost,
            tool,
            ptr,
            format!("{tool}{ptr}: {how}; lost {lost}"),
        ));
        return;
    }
    if alts > 1 && printed.len() < types.len() {
        let missing: Vec<&str> = types
            .iter()
            .filter(|t| !printed.contains(t))
            .map(String::as_str)
            .collect();
        out.push(finding(
            Rule::SchemaAlternativeDropped,
            tool,
            ptr,
            format!("{tool}{ptr}: alternatives dropped: {}", missing.join(", ")),
        ));
    }
    if nullable && !win.contains("null") {
        out.push(finding(
            Rule::SchemaTypeLost,
            tool,
            ptr,
            format!("{tool}{ptr}: nullable lost"),
        ));
    }
    if let Some(e) = s.get("enum").and_then(Value::as_array) {
        let missing: Vec<String> = e
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_owned)
                    .unwrap_or_else(|| v.to_string())
            })
            .filter(|v| !win.contains(&v.to_lowercase()))
            .collect();
        if !missing.is_empty() {
            out.push(finding(
                Rule::SchemaAlternativeDropped,
                tool,
                ptr,
                format!(
                    "{tool}{ptr}: enum values not printed: {}",
                    missing.join(", ")
                ),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn py_json_matches_python() {
        let v = json!({"a": [1, "é<"], "b": {}});
        let mut s = String::new();
        py_json(&v, None, 0, &mut s);
        assert_eq!(s, r#"{"a": [1, "é<"], "b": {}}"#);
        let mut s = String::new();
        py_json(&json!({"a": [1]}), Some(2), 0, &mut s);
        assert_eq!(s, "{\n  \"a\": [\n    1\n  ]\n}");
    }

    #[test]
    fn syntax_by_markers() {
        assert_eq!(
            implied_syntax("{{ '<tool_call>\\n{\"name\": ' }}").as_deref(),
            Some("hermes")
        );
        assert_eq!(
            implied_syntax("<tool_call>\n<function=x>").as_deref(),
            Some("qwen3_coder")
        );
        assert_eq!(
            implied_syntax("{{ '<|tool_call>call:' }}").as_deref(),
            Some("gemma4")
        );
        assert_eq!(implied_syntax("plain chat"), None);
    }
}
