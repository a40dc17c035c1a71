//! The Tools and Schema panes' rows: the request's tools as located by the one tools locator
//! ([`crate::schema::tools::locate_tools`]), their parameters flattened
//! ([`crate::schema::flatten::flatten_tools`]) and marked where a `schema.*` finding says a
//! fact never reached the prompt. Pure.

use serde_json::Value;

use crate::finding::Finding;

/// One tool of the request.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolEntry {
    pub name: String,
    pub description: String,
    /// Parameter count (top-level properties).
    pub params: usize,
    /// The tool as sent, pretty-printed JSON.
    pub json: String,
    /// JSON Pointer of the tool in the request body (`/tools/0`).
    pub pointer: String,
    /// Why the engine never showed this tool to the model, when it dropped it (a Responses
    /// tool that is not a `function`: [`crate::template::responses::Dropped::describe`]).
    pub dropped: Option<String>,
}

/// One parameter row of the Schema pane.
#[derive(Debug, Clone, PartialEq)]
pub struct SchemaRow {
    pub tool: String,
    /// JSON Pointer within the tool's parameters, e.g. `/properties/quantity`.
    pub pointer: String,
    /// The original schema fragment, compact.
    pub original: String,
    /// The flattened fragment, when flattening changed it.
    pub flattened: Option<String>,
    /// What flattening changed and lost.
    pub change: Option<String>,
    /// True when a `schema.*` finding says a fact of this parameter never reached the prompt.
    pub lost_in_prompt: bool,
}

/// The request's tools (`tools[]` of an OpenAI or Anthropic request). Empty without tools.
pub fn entries(request: Option<&Value>) -> Vec<ToolEntry> {
    let Some(req) = request.filter(|r| r.get("tools").is_some()) else {
        return Vec::new();
    };
    let Ok(list) = crate::schema::tools::locate_tools(req) else {
        return Vec::new();
    };
    list.tools
        .iter()
        .map(|t| {
            let pointer = format!("{}/{}", list.list_pointer, t.index);
            let params = list.schema(req, t);
            ToolEntry {
                name: if t.name.is_empty() {
                    "(unnamed)".into()
                } else {
                    t.name.clone()
                },
                description: t.description.clone().unwrap_or_default(),
                params: params
                    .and_then(|p| p.get("properties"))
                    .and_then(Value::as_object)
                    .map_or(0, |o| o.len()),
                json: req
                    .pointer(&pointer)
                    .and_then(|v| serde_json::to_string_pretty(v).ok())
                    .unwrap_or_default(),
                pointer,
                dropped: None,
            }
        })
        .collect()
}

/// The tools of a Responses request (`tools[]`, every type: `function`, `custom`,
/// `namespace`, `web_search`, …), each marked when llama-server's conversion drops it
/// ([`crate::template::responses::responses_to_chat`]). A tool without a `name` is shown by its
/// type (`(web_search)`). Then the tools of `additional_tools` input items (Codex CLI's way of
/// sending them under some models; `/input/N/tools/M`), each marked as refused: llama-server's
/// conversion does not know that item and answers HTTP 400 (tools/server/server-chat.cpp:257,
/// b11434). Empty without tools.
pub fn responses_entries(request: Option<&Value>) -> Vec<ToolEntry> {
    let Some(req) = request else {
        return Vec::new();
    };
    let converted = crate::template::responses::responses_to_chat(req);
    let dropped = converted
        .as_ref()
        .map(|c| c.dropped.clone())
        .unwrap_or_default();
    let mut lists: Vec<(String, &Vec<Value>)> = Vec::new();
    if let Some(list) = req.get("tools").and_then(Value::as_array) {
        lists.push(("/tools".to_owned(), list));
    }
    for (i, item) in req
        .get("input")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        if item.get("type").and_then(Value::as_str) == Some("additional_tools")
            && let Some(list) = item.get("tools").and_then(Value::as_array)
        {
            lists.push((format!("/input/{i}/tools"), list));
        }
    }
    let refused = |pointer: &str| {
        (pointer.starts_with("/input/") && converted.is_err()).then(|| {
            "in an `additional_tools` input item, which llama-server's /v1/responses conversion does not read: the request is refused (HTTP 400 \"Cannot determine type of 'item'\")".to_owned()
        })
    };
    lists
        .into_iter()
        .flat_map(|(at, list)| {
            list.iter()
                .enumerate()
                .map(move |(i, t)| (format!("{at}/{i}"), t))
        })
        .map(|(pointer, t)| {
            let str_of = |k: &str| t.get(k).and_then(Value::as_str);
            let ty = str_of("type").unwrap_or("");
            ToolEntry {
                name: str_of("name")
                    .map(str::to_owned)
                    .unwrap_or_else(|| format!("({})", if ty.is_empty() { "unnamed" } else { ty })),
                description: match (ty, str_of("description")) {
                    ("function", d) => d.unwrap_or("").to_owned(),
                    (ty, Some(d)) => format!("[{ty}] {d}"),
                    (ty, None) => format!("[{ty}]"),
                },
                params: t
                    .pointer("/parameters/properties")
                    .and_then(Value::as_object)
                    .map_or(0, |o| o.len()),
                json: serde_json::to_string_pretty(t).unwrap_or_default(),
                dropped: dropped
                    .iter()
                    .find(|d| d.pointer == pointer)
                    .map(crate::template::responses::Dropped::describe)
                    .or_else(|| refused(&pointer)),
                pointer,
            }
        })
        .collect()
}

/// Every parameter of every tool (depth first, `properties` only), with its flattened form and
/// changes, and `lost_in_prompt` from `findings` (`schema.*` rules, matched by tool and pointer).
pub fn schema_rows(request: Option<&Value>, findings: &[Finding]) -> Vec<SchemaRow> {
    let Some(req) = request.filter(|r| r.get("tools").is_some()) else {
        return Vec::new();
    };
    let Ok(list) = crate::schema::tools::locate_tools(req) else {
        return Vec::new();
    };
    let tools = req.pointer(&list.list_pointer).unwrap_or(&Value::Null);
    let flat = crate::schema::flatten::flatten_tools(
        tools,
        &crate::schema::flatten::FlattenOptions::default(),
    )
    .ok();
    let mut rows = Vec::new();
    for t in &list.tools {
        let (Some(schema), Some(base)) = (list.schema(req, t), t.schema_pointer.as_deref()) else {
            continue;
        };
        // The schema's pointer within the tool array (what flatten_tools' paths are relative to).
        let base = base.strip_prefix(&list.list_pointer).unwrap_or(base);
        let name = if t.name.is_empty() {
            "(unnamed)"
        } else {
            &t.name
        };
        let first = rows.len();
        walk(name, "", schema, &mut rows);
        for r in &mut rows[first..] {
            let path = format!("{base}{}", r.pointer);
            if let Some(flat) = &flat {
                r.flattened = flat
                    .tools
                    .pointer(&path)
                    .map(Value::to_string)
                    .filter(|f| *f != r.original);
                let ch: Vec<String> = flat
                    .changes
                    .iter()
                    .filter(|c| c.path == path)
                    .map(|c| match &c.lost {
                        Some(l) => format!("{} (lost: {l})", c.change),
                        None => c.change.clone(),
                    })
                    .collect();
                if !ch.is_empty() {
                    r.change = Some(ch.join("; "));
                }
            }
            r.lost_in_prompt = findings.iter().any(|f| {
                f.rule.id().starts_with("schema.")
                    && f.evidence.tool.as_deref().is_none_or(|t| t == r.tool)
                    && f.evidence.pointer.as_deref().is_some_and(|p| {
                        p == r.pointer || p.ends_with(&format!("parameters{}", r.pointer))
                    })
            });
        }
    }
    rows
}

fn walk(tool: &str, pointer: &str, schema: &Value, rows: &mut Vec<SchemaRow>) {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (k, v) in props {
        let p = format!(
            "{pointer}/properties/{}",
            k.replace('~', "~0").replace('/', "~1")
        );
        rows.push(SchemaRow {
            tool: tool.to_owned(),
            pointer: p.clone(),
            original: v.to_string(),
            flattened: None,
            change: None,
            lost_in_prompt: false,
        });
        walk(tool, &p, v, rows);
    }
}
