//! Where the tools are in a document: an OpenAI `tools` array (or a whole chat-completions
//! request), Anthropic tools (`input_schema`, or a whole Messages request), an MCP `tools/list`
//! result (`{"tools":[{"name","description","inputSchema"}]}`, bare or inside a JSON-RPC
//! response's `result`), or a legacy OpenAI `functions` array.
//!
//! Shapes follow the OpenAI Chat Completions API (`tools[].function.parameters`), the
//! Anthropic Messages API (`tools[].input_schema`) and the MCP specification 2025-06-18
//! (`tools/list` result, `Tool.inputSchema`).

use serde_json::Value;

/// The API family a tool entry is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolDialect {
    /// `{"type":"function","function":{"name","description","parameters"}}`.
    OpenAi,
    /// `{"name","description","input_schema"}`.
    Anthropic,
    /// `{"name","description","inputSchema"}`.
    Mcp,
    /// `{"name","description","parameters"}` (legacy `functions`, some gateways).
    Bare,
}

/// One tool found in a document.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolEntry {
    /// 0-based index in the tool list.
    pub index: usize,
    /// The tool's name (`""` when the entry has none).
    pub name: String,
    /// The tool's description, when it has one.
    pub description: Option<String>,
    /// The dialect of this entry.
    pub dialect: ToolDialect,
    /// JSON Pointer (RFC 6901) of the parameter schema from the document root, e.g.
    /// `/0/function/parameters`, `/tools/2/input_schema`, `/result/tools/0/inputSchema`.
    /// `None` when the entry carries no schema (e.g. an Anthropic server tool).
    pub schema_pointer: Option<String>,
}

/// The tools of a document.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolList {
    /// JSON Pointer of the tool array from the document root (`""` when the document is the array).
    pub list_pointer: String,
    /// The tool entries, in order. Array elements that are not tools are skipped (see `skipped`).
    pub tools: Vec<ToolEntry>,
    /// Array elements that are not tools: `(JSON Pointer, what it is)`, e.g. `("/0", "a number")`.
    /// An element is a tool when it is an object with a `function` object or a `name`.
    pub skipped: Vec<(String, String)>,
}

impl ToolList {
    /// The parameter schema of `tool` inside `doc` (the document `locate_tools` was called on).
    pub fn schema<'a>(&self, doc: &'a Value, tool: &ToolEntry) -> Option<&'a Value> {
        tool.schema_pointer.as_deref().and_then(|p| doc.pointer(p))
    }
}

/// Finds the tool list in `doc`.
///
/// Accepted: a JSON array of tools; an object with a `tools` array (OpenAI or Anthropic
/// request, MCP `tools/list` result); a JSON-RPC response whose `result` has a `tools` array;
/// an object with a legacy `functions` array.
///
/// Errors: a message saying which shapes are accepted, when none matches.
pub fn locate_tools(doc: &Value) -> Result<ToolList, String> {
    let list_pointer = match doc {
        Value::Array(_) => String::new(),
        Value::Object(m) => {
            if m.get("tools").is_some_and(Value::is_array) {
                "/tools".to_string()
            } else if m
                .get("result")
                .and_then(|r| r.get("tools"))
                .is_some_and(Value::is_array)
            {
                "/result/tools".to_string()
            } else if m.get("functions").is_some_and(Value::is_array) {
                "/functions".to_string()
            } else {
                return Err(shape_error(doc));
            }
        }
        _ => return Err(shape_error(doc)),
    };
    let Some(Value::Array(items)) = doc.pointer(&list_pointer) else {
        return Err(shape_error(doc));
    };
    let mut tools = Vec::new();
    let mut skipped = Vec::new();
    for (index, item) in items.iter().enumerate() {
        let base = format!("{list_pointer}/{index}");
        let m = match item {
            Value::Object(m)
                if m.get("function").is_some_and(Value::is_object) || m.contains_key("name") =>
            {
                m
            }
            Value::Object(_) => {
                skipped.push((
                    base,
                    "an object with neither `function` nor `name`".to_string(),
                ));
                continue;
            }
            other => {
                skipped.push((base, crate::json_kind(other).to_string()));
                continue;
            }
        };
        let (dialect, holder, key, holder_ptr) = if let Some(Value::Object(f)) = m.get("function") {
            (
                ToolDialect::OpenAi,
                f,
                "parameters",
                format!("{base}/function"),
            )
        } else if m.contains_key("input_schema") {
            (ToolDialect::Anthropic, m, "input_schema", base.clone())
        } else if m.contains_key("inputSchema") {
            (ToolDialect::Mcp, m, "inputSchema", base.clone())
        } else if m.contains_key("parameters") {
            (ToolDialect::Bare, m, "parameters", base.clone())
        } else {
            // A tool without a schema (Anthropic server tool, MCP tool missing inputSchema).
            let dialect = if m.get("type").and_then(Value::as_str) == Some("function") {
                ToolDialect::OpenAi
            } else {
                ToolDialect::Bare
            };
            (dialect, m, "", base.clone())
        };
        let name = holder
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let description = holder
            .get("description")
            .and_then(Value::as_str)
            .map(str::to_string);
        let schema_pointer =
            (!key.is_empty() && holder.contains_key(key)).then(|| format!("{holder_ptr}/{key}"));
        tools.push(ToolEntry {
            index,
            name,
            description,
            dialect,
            schema_pointer,
        });
    }
    if tools.is_empty()
        && let Some((at, what)) = skipped.first()
    {
        return Err(format!(
            "{at}: not a tool (expected an object with `function` (OpenAI) or `name` \
             (Anthropic, MCP)), got {what}; no element of {} is a tool",
            if list_pointer.is_empty() {
                "the array"
            } else {
                list_pointer.as_str()
            }
        ));
    }
    Ok(ToolList {
        list_pointer,
        tools,
        skipped,
    })
}

fn shape_error(doc: &Value) -> String {
    let got = match doc {
        Value::Object(_) => "an object without a `tools`, `result.tools` or `functions` array",
        other => crate::json_kind(other),
    };
    format!(
        "expected an OpenAI `tools` array, Anthropic tools (`input_schema`), an MCP `tools/list` result \
         (`{{\"tools\":[…]}}`, optionally inside a JSON-RPC `result`) or a request with `tools`; got {got}"
    )
}

/// Escapes one reference token for a JSON Pointer (RFC 6901: `~` → `~0`, `/` → `~1`).
pub fn escape_token(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn finds_each_dialect() {
        let openai = json!([{"type":"function","function":{"name":"a","parameters":{}}}]);
        let l = locate_tools(&openai).unwrap();
        assert_eq!(
            l.tools[0].schema_pointer.as_deref(),
            Some("/0/function/parameters")
        );
        assert_eq!(l.tools[0].dialect, ToolDialect::OpenAi);

        let anthropic =
            json!({"model":"m","tools":[{"name":"b","input_schema":{"type":"object"}}]});
        let l = locate_tools(&anthropic).unwrap();
        assert_eq!(
            l.tools[0].schema_pointer.as_deref(),
            Some("/tools/0/input_schema")
        );
        assert_eq!(l.tools[0].name, "b");

        let mcp =
            json!({"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"c","inputSchema":{}}]}});
        let l = locate_tools(&mcp).unwrap();
        assert_eq!(l.list_pointer, "/result/tools");
        assert_eq!(
            l.tools[0].schema_pointer.as_deref(),
            Some("/result/tools/0/inputSchema")
        );
        assert_eq!(l.tools[0].dialect, ToolDialect::Mcp);

        let server_tool = json!([{"type":"web_search_20250305","name":"web_search"}]);
        assert_eq!(
            locate_tools(&server_tool).unwrap().tools[0].schema_pointer,
            None
        );
    }

    #[test]
    fn rejects_other_shapes() {
        assert!(
            locate_tools(&json!({"messages":[]}))
                .unwrap_err()
                .contains("an object without")
        );
        assert!(locate_tools(&json!(3)).is_err());
    }

    #[test]
    fn escapes_pointer_tokens() {
        assert_eq!(escape_token("a/b~c"), "a~1b~0c");
    }

    #[test]
    fn non_tools_are_named_not_skipped_silently() {
        let e = locate_tools(&json!([1, 2, {"a": 3}])).unwrap_err();
        assert!(e.starts_with("/0: not a tool"), "{e}");
        assert!(e.contains("got a number"), "{e}");
        let e = locate_tools(&json!({"tools": [{"a": 3}]})).unwrap_err();
        assert!(e.starts_with("/tools/0: not a tool"), "{e}");
        let l = locate_tools(&json!([{"name": "a", "input_schema": {}}, "junk"])).unwrap();
        assert_eq!(l.tools.len(), 1);
        assert_eq!(l.skipped, [("/1".to_string(), "a string".to_string())]);
        assert!(
            locate_tools(&json!({"tools": []}))
                .unwrap()
                .tools
                .is_empty()
        );
    }
}
