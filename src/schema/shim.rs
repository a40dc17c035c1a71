//! A minimal chat-template renderer for schema analysis, used until (and unless) the faithful
//! renderer in `crate::template::render` is wired in. Pure.
//!
//! Configured as transformers' `apply_chat_template` (transformers
//! src/transformers/utils/chat_template_utils.py): `trim_blocks`, `lstrip_blocks`, Python
//! string/dict methods (minijinja-contrib pycompat), `tojson` as Python's `json.dumps`
//! (`", "`/`": "` separators, no HTML escaping, optional `indent`), `raise_exception`, and
//! `strftime_now` pinned to 2026-01-01 (analysis is clock-free). Rendering is bounded by fuel.

use std::sync::Arc;

use minijinja::value::{Enumerator, Kwargs, Object, ObjectRepr, Value as JValue, ValueKind};
use minijinja::{Environment, Error, ErrorKind, syntax::SyntaxConfig};
use serde_json::Value;

/// Renders `template` for an OpenAI-style request (`messages`, `tools`, `add_generation_prompt`
/// default true, `bos_token`, `eos_token`, `chat_template_kwargs`).
///
/// Errors: the template's syntax error or runtime error as text with its line
/// (`"line 12: undefined value"`).
pub fn render_request(template: &str, request: &Value) -> Result<String, String> {
    let mut env = Environment::new();
    if let Ok(cfg) = SyntaxConfig::builder().trim_blocks(true).lstrip_blocks(true).build() {
        env.set_syntax(cfg);
    }
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.set_fuel(Some(50_000_000));
    env.set_recursion_limit(200);
    env.add_filter("tojson", tojson);
    env.add_function("raise_exception", |msg: String| -> Result<JValue, Error> { Err(Error::new(ErrorKind::InvalidOperation, msg)) });
    env.add_function("strftime_now", |fmt: String| -> String {
        fmt.replace("%Y", "2026").replace("%m", "01").replace("%d", "01").replace("%B", "January").replace("%b", "Jan").replace("%H", "12").replace("%M", "00")
    });
    let tmpl = env.template_from_str(template).map_err(describe)?;
    let mut ctx = serde_json::Map::new();
    ctx.insert("messages".into(), request.get("messages").cloned().unwrap_or(Value::Array(Vec::new())));
    if let Some(t) = request.get("tools") {
        ctx.insert("tools".into(), t.clone());
    }
    ctx.insert("add_generation_prompt".into(), request.get("add_generation_prompt").cloned().unwrap_or(Value::Bool(true)));
    ctx.insert("bos_token".into(), request.get("bos_token").cloned().unwrap_or(Value::String(String::new())));
    ctx.insert("eos_token".into(), request.get("eos_token").cloned().unwrap_or(Value::String(String::new())));
    if let Some(Value::Object(kw)) = request.get("chat_template_kwargs") {
        for (k, v) in kw {
            ctx.insert(k.clone(), v.clone());
        }
    }
    tmpl.render(to_jinja(&Value::Object(ctx))).map_err(describe)
}

/// A JSON object as a minijinja map that keeps key order (Python dicts do).
#[derive(Debug)]
struct JsonMap(Vec<(String, JValue)>);

impl Object for JsonMap {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Map
    }
    fn get_value(self: &Arc<Self>, key: &JValue) -> Option<JValue> {
        let k = key.as_str()?;
        self.0.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
    }
    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Values(self.0.iter().map(|(k, _)| JValue::from(k.as_str())).collect())
    }
}

fn to_jinja(v: &Value) -> JValue {
    match v {
        Value::Null => JValue::from(()),
        Value::Bool(b) => JValue::from(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => JValue::from(i),
            (_, Some(u)) => JValue::from(u),
            _ => JValue::from(n.as_f64().unwrap_or(0.0)),
        },
        Value::String(s) => JValue::from(s.as_str()),
        Value::Array(a) => JValue::from(a.iter().map(to_jinja).collect::<Vec<_>>()),
        Value::Object(m) => JValue::from_object(JsonMap(m.iter().map(|(k, v)| (k.clone(), to_jinja(v))).collect())),
    }
}

fn from_jinja(v: &JValue, depth: usize) -> Value {
    if depth > 200 {
        return Value::Null;
    }
    match v.kind() {
        ValueKind::Undefined | ValueKind::None => Value::Null,
        ValueKind::Bool => Value::Bool(v.is_true()),
        ValueKind::Number => match v.as_i64() {
            Some(i) if v.to_string().parse::<i64>().is_ok() => Value::from(i),
            _ => v.to_string().parse::<f64>().ok().and_then(serde_json::Number::from_f64).map(Value::Number).unwrap_or(Value::Null),
        },
        ValueKind::String => Value::String(v.as_str().unwrap_or_default().to_string()),
        ValueKind::Map => {
            let mut m = serde_json::Map::new();
            if let Ok(keys) = v.try_iter() {
                for k in keys {
                    let val = v.get_item(&k).unwrap_or_default();
                    let key = k.as_str().map(str::to_string).unwrap_or_else(|| k.to_string());
                    m.insert(key, from_jinja(&val, depth + 1));
                }
            }
            Value::Object(m)
        }
        ValueKind::Seq | ValueKind::Iterable => Value::Array(v.try_iter().map(|it| it.map(|x| from_jinja(&x, depth + 1)).collect()).unwrap_or_default()),
        _ => Value::String(v.to_string()),
    }
}

fn describe(e: Error) -> String {
    match e.line() {
        Some(l) => format!("line {l}: {}", e.detail().unwrap_or(&e.kind().to_string())),
        None => e.to_string(),
    }
}

fn tojson(v: JValue, kwargs: Kwargs) -> Result<JValue, Error> {
    let indent: Option<usize> = kwargs.get("indent").ok().flatten();
    let _ = kwargs.get::<Option<JValue>>("ensure_ascii");
    let _ = kwargs.get::<Option<JValue>>("separators");
    let _ = kwargs.get::<Option<JValue>>("sort_keys");
    let json = from_jinja(&v, 0);
    let mut out = String::new();
    py_dumps(&json, indent, 0, &mut out);
    Ok(JValue::from_safe_string(out))
}

/// Python `json.dumps(v, ensure_ascii=False, indent=indent)`.
pub(crate) fn py_dumps(v: &Value, indent: Option<usize>, level: usize, out: &mut String) {
    let nl = |out: &mut String, level: usize| {
        if let Some(n) = indent {
            out.push('\n');
            out.push_str(&" ".repeat(n * level));
        }
    };
    let item_sep = if indent.is_some() { "," } else { ", " };
    match v {
        Value::Array(a) if !a.is_empty() => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push_str(item_sep);
                }
                nl(out, level + 1);
                py_dumps(x, indent, level + 1, out);
            }
            nl(out, level);
            out.push(']');
        }
        Value::Object(m) if !m.is_empty() => {
            out.push('{');
            for (i, (k, x)) in m.iter().enumerate() {
                if i > 0 {
                    out.push_str(item_sep);
                }
                nl(out, level + 1);
                out.push_str(&serde_json::to_string(k).unwrap_or_default());
                out.push_str(": ");
                py_dumps(x, indent, level + 1, out);
            }
            nl(out, level);
            out.push('}');
        }
        other => out.push_str(&serde_json::to_string(other).unwrap_or_default()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn dumps_like_python() {
        let mut s = String::new();
        py_dumps(&json!({"a": [1, "<b>"], "c": {}}), None, 0, &mut s);
        assert_eq!(s, r#"{"a": [1, "<b>"], "c": {}}"#);
        let mut s = String::new();
        py_dumps(&json!({"a": [1]}), Some(2), 0, &mut s);
        assert_eq!(s, "{\n  \"a\": [\n    1\n  ]\n}");
    }

    #[test]
    fn renders_tools_with_tojson() {
        let t = "{% for t in tools %}{{ t | tojson }}{% endfor %}{{ messages[0]['content'].strip() }}";
        let out = render_request(t, &json!({"messages": [{"role": "user", "content": " hi "}], "tools": [{"x": "<y>"}]})).unwrap();
        assert_eq!(out, r#"{"x": "<y>"}hi"#);
        let e = render_request("{{ raise_exception('no') }}", &json!({})).unwrap_err();
        assert!(e.contains("no"), "{e}");
    }
}
