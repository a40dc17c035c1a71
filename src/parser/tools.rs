//! The tool list as the parser needs it: names, parameter schemas, whether a call is required.

use std::collections::HashMap;

use serde_json::Value;

/// Tool names → parameter schemas, and whether the request required a call.
///
/// Built from (a) an OpenAI `tools` array (`[{"type":"function","function":{"name","parameters"}}]`),
/// (b) an Anthropic `tools` array (`[{"name","input_schema"}]`), (c) bare `[{"name","parameters"}]`,
/// or (d) a whole request object with `tools` and `tool_choice` (`"required"`, `"any"`, a named
/// choice, or Anthropic `{"type":"any"|"tool"}` set [`ToolIndex::required`]).
#[derive(Debug, Clone, Default)]
pub struct ToolIndex {
    params: HashMap<String, Value>,
    /// True when `tool_choice` demanded a call (required / any / named).
    pub required: bool,
}

impl ToolIndex {
    /// Builds the index from any of the shapes above; unknown shapes give an empty index.
    pub fn from_value(v: Option<&Value>) -> ToolIndex {
        let mut ix = ToolIndex::default();
        let Some(v) = v else { return ix };
        let list = match v {
            Value::Array(a) => Some(a),
            Value::Object(o) => {
                ix.required = match o.get("tool_choice") {
                    Some(Value::String(s)) => s == "required" || s == "any",
                    Some(Value::Object(c)) => {
                        matches!(
                            c.get("type").and_then(Value::as_str),
                            Some("function" | "any" | "tool")
                        )
                    }
                    _ => false,
                };
                o.get("tools").and_then(Value::as_array)
            }
            _ => None,
        };
        for t in list.into_iter().flatten() {
            let f = t.get("function").unwrap_or(t);
            if let Some(name) = f.get("name").and_then(Value::as_str) {
                let schema = f
                    .get("parameters")
                    .or_else(|| f.get("input_schema"))
                    .cloned()
                    .unwrap_or(Value::Null);
                ix.params.insert(name.to_string(), schema);
            }
        }
        ix
    }

    /// True when a tool of this name was declared.
    pub fn knows(&self, name: &str) -> bool {
        self.params.contains_key(name)
    }

    /// The declared tool names (in no particular order).
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.params.keys().map(String::as_str)
    }

    /// True when no tool was declared.
    pub fn is_empty(&self) -> bool {
        self.params.is_empty()
    }

    /// The schema of parameter `param` of tool `tool` (`properties[param]`), if declared.
    pub fn param(&self, tool: &str, param: &str) -> Option<&Value> {
        self.params.get(tool)?.get("properties")?.get(param)
    }
}
