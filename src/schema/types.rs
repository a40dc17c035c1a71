//! JSON types of values and the JSON types a schema allows (shared by flattening and by the
//! tool-call parser, which types XML parameter values by their schema). Pure.

use serde_json::Value;

/// The JSON Schema type name of a value: `"null"`, `"boolean"`, `"integer"` (a number with no
/// fraction that fits i64/u64), `"number"`, `"string"`, `"array"` or `"object"`.
pub fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The JSON types a schema allows, in the order first met, without repeats: its `type` (a name
/// or a list of names), the types of every `anyOf`/`oneOf`/`allOf` alternative (recursively),
/// and the types of its `enum` values (or of `const`). Unknown type names are skipped. Empty when
/// the schema says nothing about types (any value).
///
/// `{"anyOf":[{"type":"integer"},{"type":"null"}]}` → `["integer", "null"]`;
/// `{"type":["string","number"]}` → `["string", "number"]`; `{"enum":["a",1]}` → `["string",
/// "integer"]`.
pub fn allowed_types(schema: &Value) -> Vec<&'static str> {
    let mut out = Vec::new();
    collect_types(schema, &mut out);
    out
}

fn collect_types(schema: &Value, out: &mut Vec<&'static str>) {
    fn push(out: &mut Vec<&'static str>, t: &str) {
        let t: &'static str = match t {
            "string" => "string",
            "integer" => "integer",
            "number" => "number",
            "boolean" => "boolean",
            "object" => "object",
            "array" => "array",
            "null" => "null",
            _ => return,
        };
        if !out.contains(&t) {
            out.push(t);
        }
    }
    match schema.get("type") {
        Some(Value::String(t)) => push(out, t),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .for_each(|t| push(out, t)),
        _ => {}
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(alts)) = schema.get(key) {
            for a in alts {
                collect_types(a, out);
            }
        }
    }
    match (schema.get("enum"), schema.get("const")) {
        (Some(Value::Array(e)), _) => e.iter().for_each(|v| push(out, json_type(v))),
        (_, Some(c)) => push(out, json_type(c)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_types_of_values() {
        assert_eq!(json_type(&json!(5)), "integer");
        assert_eq!(json_type(&json!(-5)), "integer");
        assert_eq!(json_type(&json!(5.5)), "number");
        assert_eq!(json_type(&json!("5")), "string");
        assert_eq!(json_type(&json!(null)), "null");
        assert_eq!(json_type(&json!([1])), "array");
    }

    #[test]
    fn allowed_types_walk_alternatives() {
        let s = json!({"anyOf": [{"type": "integer"}, {"type": "null"}]});
        assert_eq!(allowed_types(&s), ["integer", "null"]);
        let s = json!({"type": ["string", "number", "string", "weird"]});
        assert_eq!(allowed_types(&s), ["string", "number"]);
        let s = json!({"oneOf": [{"anyOf": [{"type": "boolean"}]}, {"enum": ["a", 1, 2]}]});
        assert_eq!(allowed_types(&s), ["boolean", "string", "integer"]);
        let s = json!({"const": 1.5});
        assert_eq!(allowed_types(&s), ["number"]);
        assert!(allowed_types(&json!({"description": "anything"})).is_empty());
    }
}
