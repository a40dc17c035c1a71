//! Hand-checked flattening examples (issue 4 item 1). Every expected value below was written by
//! hand from the rewrite rules in docs/schema.md, not produced by the code under test.

use serde_json::{Value, json};
use toolscope::schema::flatten::{
    Change, FlattenOptions, Strategy, flatten_schema, flatten_tools, has_combinators,
};

fn flat(schema: Value, strategy: Strategy) -> (Value, Vec<Change>) {
    flatten_schema(&schema, &FlattenOptions::with_strategy(strategy), "")
}

fn param(p: Value) -> Value {
    json!({"type": "object", "properties": {"p": p}})
}

fn out_param(v: &Value) -> &Value {
    &v["properties"]["p"]
}

#[test]
fn anyof_string_number_each_strategy() {
    let p = json!({"anyOf": [{"type": "string"}, {"type": "number"}], "description": "how many"});
    let (v, ch) = flat(param(p.clone()), Strategy::TypeList);
    assert_eq!(
        out_param(&v),
        &json!({"description": "how many", "type": ["string", "number"]})
    );
    assert_eq!(ch.len(), 1);
    assert_eq!(ch[0].path, "/properties/p");
    assert_eq!(ch[0].change, "anyOf [string, number] → type list");
    assert_eq!(ch[0].lost, None);

    let (v, ch) = flat(param(p.clone()), Strategy::FirstType);
    assert_eq!(
        out_param(&v),
        &json!({"description": "how many", "type": "string"})
    );
    assert!(
        ch.iter()
            .any(|c| c.lost.as_deref() == Some("the alternative type number")),
        "{ch:?}"
    );

    let (v, _) = flat(param(p.clone()), Strategy::FirstTypeWithNote);
    assert_eq!(
        out_param(&v),
        &json!({"description": "how many (string or number)", "type": "string"})
    );

    let p2 = json!({"anyOf": [{"type": "number"}, {"type": "boolean"}]});
    let (v, ch) = flat(param(p2), Strategy::StringWithNote);
    assert_eq!(
        out_param(&v),
        &json!({"description": "(number or boolean)", "type": "string"})
    );
    assert!(
        ch.iter().any(|c| c
            .lost
            .as_deref()
            .is_some_and(|l| l.contains("number, boolean as schema types"))),
        "{ch:?}"
    );
}

#[test]
fn anyof_with_null_becomes_nullable() {
    let p =
        json!({"anyOf": [{"type": "string"}, {"type": "null"}], "default": null, "title": "Label"});
    for s in Strategy::ALL {
        let (v, ch) = flat(param(p.clone()), *s);
        assert_eq!(
            out_param(&v),
            &json!({"default": null, "title": "Label", "type": "string", "nullable": true}),
            "{s}"
        );
        assert_eq!(ch.len(), 1, "{s}: {ch:?}");
        assert_eq!(ch[0].change, "anyOf [string, null] → string with nullable");
        assert_eq!(ch[0].lost, None);
    }
    // A type list with null, and a null-only union.
    let (v, _) = flat(
        param(json!({"type": ["integer", "null"]})),
        Strategy::TypeList,
    );
    assert_eq!(out_param(&v), &json!({"type": "integer", "nullable": true}));
    let (v, _) = flat(
        param(json!({"anyOf": [{"type": "null"}]})),
        Strategy::TypeList,
    );
    assert_eq!(out_param(&v), &json!({"type": "null"}));
    // Three alternatives with null: type list plus nullable.
    let (v, _) = flat(
        param(json!({"anyOf": [{"type": "string"}, {"type": "null"}, {"type": "boolean"}]})),
        Strategy::TypeList,
    );
    assert_eq!(
        out_param(&v),
        &json!({"type": ["string", "boolean"], "nullable": true})
    );
}

#[test]
fn oneof_of_two_objects_is_merged_and_exclusivity_reported() {
    let p = json!({"description": "where to read from", "oneOf": [
        {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        {"type": "object", "properties": {"url": {"type": "string", "format": "uri"}}, "required": ["url"]}
    ]});
    let (v, ch) = flat(param(p.clone()), Strategy::TypeList);
    assert_eq!(
        out_param(&v),
        &json!({"description": "where to read from", "type": "object",
                "properties": {"path": {"type": "string"}, "url": {"type": "string", "format": "uri"}}})
    );
    assert_eq!(ch.len(), 1);
    assert_eq!(ch[0].change, "oneOf of 2 objects merged into one object");
    let lost = ch[0].lost.as_deref().unwrap_or("");
    assert!(
        lost.starts_with("mutual exclusivity (exactly one of {path} | {url}"),
        "{lost}"
    );

    // With a note strategy the exclusivity is written into the description.
    let (v, _) = flat(param(p), Strategy::FirstTypeWithNote);
    assert_eq!(
        out_param(&v)["description"],
        json!("where to read from (exactly one of: {path} | {url})")
    );

    // Shared required properties survive (intersection).
    let p = json!({"anyOf": [
        {"type": "object", "properties": {"id": {"type": "string"}, "a": {"type": "integer"}}, "required": ["id", "a"]},
        {"type": "object", "properties": {"id": {"type": "string"}, "b": {"type": "integer"}}, "required": ["id"]}
    ]});
    let (v, _) = flat(param(p), Strategy::TypeList);
    assert_eq!(
        out_param(&v),
        &json!({"type": "object", "properties": {"id": {"type": "string"}, "a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["id"]})
    );
}

#[test]
fn ref_into_defs_used_twice() {
    let s = json!({
        "type": "object",
        "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}}, "required": ["x", "y"]}},
        "properties": {
            "from": {"$ref": "#/$defs/Point"},
            "to": {"$ref": "#/$defs/Point", "description": "end point"}
        },
        "required": ["from", "to"]
    });
    let point = json!({"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}}, "required": ["x", "y"]});
    let mut to = point.clone();
    to["description"] = json!("end point");
    let (v, ch) = flat(s, Strategy::TypeList);
    assert_eq!(
        v,
        json!({"type": "object", "properties": {"from": point, "to": to}, "required": ["from", "to"]})
    );
    let paths: Vec<(&str, &str)> = ch
        .iter()
        .map(|c| (c.path.as_str(), c.change.as_str()))
        .collect();
    assert_eq!(
        paths,
        vec![
            ("/$defs", "removed `$defs` (references inlined where used)"),
            ("/properties/from", "inlined `$ref` #/$defs/Point"),
            ("/properties/to", "inlined `$ref` #/$defs/Point"),
        ]
    );
    // `definitions` (draft-07) too.
    let s = json!({"definitions": {"U": {"type": "string", "enum": ["c", "f"]}}, "properties": {"unit": {"$ref": "#/definitions/U"}}});
    let (v, _) = flat(s, Strategy::TypeList);
    assert_eq!(
        v,
        json!({"properties": {"unit": {"type": "string", "enum": ["c", "f"]}}})
    );
}

#[test]
fn recursive_ref_is_cut_at_the_stated_depth() {
    let s = json!({
        "type": "object",
        "properties": {"root": {"$ref": "#/$defs/Node"}},
        "$defs": {"Node": {"type": "object", "description": "a tree node", "properties": {
            "name": {"type": "string"},
            "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}
        }}}
    });
    let (v, ch) = flat(s.clone(), Strategy::TypeList);
    let cut = json!({"type": "object", "description": "a tree node (same structure as the enclosing Node)"});
    let level2 = json!({"type": "object", "description": "a tree node", "properties": {
        "name": {"type": "string"}, "children": {"type": "array", "items": cut}}});
    let level1 = json!({"type": "object", "description": "a tree node", "properties": {
        "name": {"type": "string"}, "children": {"type": "array", "items": level2}}});
    assert_eq!(v, json!({"type": "object", "properties": {"root": level1}}));
    let c = ch
        .iter()
        .find(|c| c.change.starts_with("recursive"))
        .expect("a cut is reported");
    assert_eq!(
        c.path,
        "/properties/root/properties/children/items/properties/children/items"
    );
    assert_eq!(c.change, "recursive `$ref` #/$defs/Node cut at depth 2");
    assert!(
        c.lost
            .as_deref()
            .unwrap_or("")
            .contains("the structure of #/$defs/Node below this depth")
    );

    // Depth 1: the first repetition is cut.
    let opts = FlattenOptions {
        recursion_depth: 1,
        ..FlattenOptions::default()
    };
    let (v, _) = flatten_schema(&s, &opts, "");
    assert_eq!(
        v["properties"]["root"]["properties"]["children"]["items"],
        cut
    );

    // Self-reference to the root.
    let s =
        json!({"type": "object", "properties": {"next": {"$ref": "#"}, "v": {"type": "integer"}}});
    let (v, _) = flat(s, Strategy::TypeList);
    assert!(!has_combinators(&v));
    assert_eq!(
        v["properties"]["next"]["properties"]["next"]["properties"]["next"]["type"],
        json!("object")
    );
    assert!(
        v["properties"]["next"]["properties"]["next"]["properties"]["next"]
            .get("properties")
            .is_none()
    );
}

#[test]
fn arrays_of_anyof_items() {
    let p = json!({"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "integer"}]}, "description": "ids"});
    let (v, ch) = flat(param(p.clone()), Strategy::TypeList);
    assert_eq!(
        out_param(&v),
        &json!({"type": "array", "items": {"type": ["string", "integer"]}, "description": "ids"})
    );
    assert_eq!(ch[0].path, "/properties/p/items");
    let (v, _) = flat(param(p), Strategy::FirstTypeWithNote);
    assert_eq!(
        out_param(&v)["items"],
        json!({"type": "string", "description": "(string or integer)"})
    );

    // Items that are a union of objects and null.
    let p = json!({"type": "array", "items": {"anyOf": [
        {"type": "object", "properties": {"k": {"type": "string"}}}, {"type": "null"}]}});
    let (v, _) = flat(param(p), Strategy::TypeList);
    assert_eq!(
        out_param(&v)["items"],
        json!({"type": "object", "properties": {"k": {"type": "string"}}, "nullable": true})
    );
}

#[test]
fn all_of_is_merged() {
    let p = json!({"description": "both parts", "allOf": [
        {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
        {"properties": {"b": {"type": "integer", "enum": [1, 2, 3]}}, "required": ["b"]},
        {"properties": {"b": {"enum": [2, 3, 4]}}}
    ]});
    let (v, ch) = flat(param(p), Strategy::TypeList);
    assert_eq!(
        out_param(&v),
        &json!({"description": "both parts", "type": "object",
                "properties": {"a": {"type": "string"}, "b": {"type": "integer", "enum": [2, 3]}},
                "required": ["a", "b"]})
    );
    assert_eq!(
        ch.last().map(|c| c.change.as_str()),
        Some("merged allOf of 3 schemas")
    );
    // Conflicting types are reported.
    let (_, ch) = flat(
        param(json!({"allOf": [{"type": "string"}, {"type": "integer"}]})),
        Strategy::TypeList,
    );
    assert!(
        ch.iter().any(|c| c
            .lost
            .as_deref()
            .is_some_and(|l| l.contains("conflicts with"))),
        "{ch:?}"
    );
}

#[test]
fn preserved_keywords_survive_every_rewrite() {
    let p = json!({"anyOf": [{"type": "string", "enum": ["a", "b"]}, {"type": "null"}], "default": "a", "description": "d",
        "examples": ["a"], "x-extra": {"anyOf": "data, not schema"}});
    let (v, _) = flat(param(p), Strategy::FirstType);
    assert_eq!(
        out_param(&v),
        &json!({"type": "string", "enum": ["a", "b"], "nullable": true, "default": "a", "description": "d",
                "examples": ["a"], "x-extra": {"anyOf": "data, not schema"}})
    );
}

fn load(name: &str) -> Value {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/schema")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap()
}

#[test]
fn mcp_filesystem_tool_list() {
    let input = load("mcp-filesystem.tools-list.json");
    let expected = load("mcp-filesystem.flat.json");
    let f = flatten_tools(&input, &FlattenOptions::default()).unwrap();
    assert_eq!(f.tools, expected);
    let summary: Vec<(String, String, Option<String>)> = f
        .changes
        .iter()
        .map(|c| (c.path.clone(), c.change.clone(), c.tool.clone()))
        .collect();
    let s = |p: &str, c: &str, t: &str| (p.to_string(), c.to_string(), Some(t.to_string()));
    assert_eq!(
        summary,
        vec![
            s(
                "/result/tools/0/inputSchema/properties/head",
                "anyOf [integer, null] → integer with nullable",
                "read_text_file"
            ),
            s(
                "/result/tools/0/inputSchema/properties/tail",
                "anyOf [integer, null] → integer with nullable",
                "read_text_file"
            ),
            s(
                "/result/tools/1/inputSchema/$defs",
                "removed `$defs` (references inlined where used)",
                "edit_file"
            ),
            s(
                "/result/tools/1/inputSchema/properties/edits/items",
                "inlined `$ref` #/$defs/EditOperation",
                "edit_file"
            ),
            s(
                "/result/tools/4/inputSchema/properties/mode",
                "anyOf [string, integer] → type list",
                "set_permissions"
            ),
        ]
    );
    assert_eq!(f.lossy_changes(), 0);
}

#[test]
fn openai_and_anthropic_shapes_are_kept() {
    let openai = json!({"model": "m", "tools": [{"type": "function", "function": {"name": "f", "parameters":
        {"type": "object", "properties": {"x": {"type": ["string", "null"]}}}}}]});
    let f = flatten_tools(&openai, &FlattenOptions::default()).unwrap();
    assert_eq!(f.tools["model"], json!("m"));
    assert_eq!(
        f.tools["tools"][0]["function"]["parameters"]["properties"]["x"],
        json!({"type": "string", "nullable": true})
    );
    assert_eq!(
        f.changes[0].path,
        "/tools/0/function/parameters/properties/x"
    );

    let anthropic = json!([{"name": "g", "input_schema": {"properties": {"y": {"oneOf": [{"type": "integer"}, {"type": "null"}]}}}}]);
    let f = flatten_tools(&anthropic, &FlattenOptions::default()).unwrap();
    assert_eq!(
        f.tools[0]["input_schema"]["properties"]["y"],
        json!({"type": "integer", "nullable": true})
    );
    assert_eq!(f.changes[0].path, "/0/input_schema/properties/y");

    assert!(flatten_tools(&json!({"no": "tools"}), &FlattenOptions::default()).is_err());
}

#[test]
fn unresolvable_ref_is_removed_and_reported() {
    let s = json!({"properties": {"a": {"$ref": "https://example.com/schemas/a.json", "description": "A"}}});
    let (v, ch) = flat(s, Strategy::TypeList);
    assert_eq!(v, json!({"properties": {"a": {"description": "A"}}}));
    assert_eq!(
        ch[0].change,
        "removed unresolvable `$ref` https://example.com/schemas/a.json"
    );
    assert!(ch[0].lost.is_some());
}

#[test]
fn flattening_is_idempotent_on_the_examples() {
    let input = load("mcp-filesystem.tools-list.json");
    for s in Strategy::ALL {
        let o = FlattenOptions::with_strategy(*s);
        let once = flatten_tools(&input, &o).unwrap();
        let twice = flatten_tools(&once.tools, &o).unwrap();
        assert_eq!(once.tools, twice.tools, "{s}");
        assert!(twice.changes.is_empty(), "{s}: {:?}", twice.changes);
    }
}

#[test]
fn empty_anyof_is_a_lossy_removal_empty_allof_is_not() {
    // JSON Schema 2020-12 §10.2.1: an empty anyOf matches nothing; removing it allows anything.
    let (v, ch) = flat(
        param(json!({"anyOf": [], "description": "d"})),
        Strategy::TypeList,
    );
    assert_eq!(out_param(&v), &json!({"description": "d"}));
    assert_eq!(ch.len(), 1);
    assert_eq!(ch[0].change, "removed an empty `anyOf`");
    assert_eq!(
        ch[0].lost.as_deref(),
        Some("anyOf [] (no value was valid; now any value is)")
    );
    // An empty allOf constrains nothing: removing it loses nothing.
    let (_, ch) = flat(param(json!({"allOf": []})), Strategy::TypeList);
    assert_eq!(ch[0].lost, None);
}
