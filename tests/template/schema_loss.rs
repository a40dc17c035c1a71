//! Schema-loss detection against reference renders (Python jinja2 configured as transformers'
//! `apply_chat_template`, scripts/schema-render.py). The prompts in tests/data/schema/ are those
//! renders; the expectations come from the field cases and from reading the prompts by hand.

use serde_json::{Value, json};
use toolscope::finding::{Pane, Rule};
use toolscope::schema::loss::{FactKind, loss_report, schema_loss};

fn data(name: &str) -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/schema")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn case_request(case: &str) -> Value {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/cases")
        .join(case)
        .join("case.json");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
    v["inputs"]["request"].clone()
}

fn case_fragments(case: &str) -> Vec<String> {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/cases")
        .join(case)
        .join("case.json");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
    v["expect"]["rendered_contains"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

fn pointers(findings: &[toolscope::finding::Finding], rule: Rule) -> Vec<String> {
    let mut v: Vec<String> = findings
        .iter()
        .filter(|f| f.rule == rule)
        .filter_map(|f| f.evidence.pointer.clone())
        .collect();
    v.sort();
    v
}

#[test]
fn case01_gemma4_anyof_type_lost() {
    let prompt = data("case01.gemma4.txt");
    for frag in case_fragments("01-gemma4-anyof-type-lost") {
        assert!(prompt.contains(&frag), "reference render lacks {frag}");
    }
    let req = case_request("01-gemma4-anyof-type-lost");
    let f = schema_loss(&req, &prompt);
    assert_eq!(
        pointers(&f, Rule::SchemaTypeLost),
        vec!["/properties/label", "/properties/quantity"],
        "{f:#?}"
    );
    assert_eq!(f.len(), 2, "nothing but the two type losses: {f:#?}");
    for x in &f {
        assert_eq!(x.evidence.pane, Some(Pane::Schema));
        assert_eq!(x.evidence.tool.as_deref(), Some("stock_shelf"));
    }
    let label = f
        .iter()
        .find(|x| x.evidence.pointer.as_deref() == Some("/properties/label"))
        .unwrap();
    assert!(label.message.contains("(nullable)"), "{}", label.message);
    // The evidence offset points at the parameter in the prompt.
    let q = f
        .iter()
        .find(|x| x.evidence.pointer.as_deref() == Some("/properties/quantity"))
        .unwrap();
    let off = q.evidence.offset.unwrap();
    assert!(
        prompt[off..].starts_with("quantity:{"),
        "{}",
        &prompt[off..off + 20]
    );

    // The report knows shelf's type reached the prompt.
    let r = loss_report(&req, &prompt);
    let shelf = r.tools[0]
        .params
        .iter()
        .find(|p| p.pointer == "/properties/shelf")
        .unwrap();
    assert!(
        shelf
            .facts
            .iter()
            .any(|f| f.kind == FactKind::Type && f.reached)
    );
}

#[test]
fn case02_gemma4_type_list_is_a_stringified_list() {
    let prompt = data("case02.gemma4.txt");
    for frag in case_fragments("02-gemma4-type-list") {
        assert!(prompt.contains(&frag), "reference render lacks {frag}");
    }
    let req = case_request("02-gemma4-type-list");
    let f = schema_loss(&req, &prompt);
    assert_eq!(
        pointers(&f, Rule::SchemaTypeLost),
        vec!["/properties/value"],
        "{f:#?}"
    );
    assert_eq!(f.len(), 1, "{f:#?}");
    assert!(
        f[0].message
            .contains("stringified list ['STRING', 'NUMBER']"),
        "{}",
        f[0].message
    );
}

#[test]
fn json_dumping_template_loses_nothing() {
    // Hermes 2 Pro dumps each tool with tojson: every fact is there.
    let req: Value = serde_json::from_str(&data("corpus-request.json")).unwrap();
    let prompt = data("corpus/NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.txt");
    let f = schema_loss(&req, &prompt);
    assert!(f.is_empty(), "{f:#?}");
    let r = loss_report(&req, &prompt);
    assert_eq!(
        r.score(),
        0,
        "{:#?}",
        r.lost_facts().map(|(_, _, f)| f).collect::<Vec<_>>()
    );
}

#[test]
fn typescript_printer_loses_union_types() {
    // Functionary v3.2 prints `order_id: ,` and `note?: ,` for anyOf parameters.
    let req: Value = serde_json::from_str(&data("corpus-request.json")).unwrap();
    let prompt = data("corpus/meetkai-functionary-medium-v3.2.txt");
    assert!(prompt.contains("order_id: ,\n"));
    let f = schema_loss(&req, &prompt);
    let lost: Vec<(String, String)> = f
        .iter()
        .filter(|x| x.rule == Rule::SchemaTypeLost)
        .map(|x| {
            (
                x.evidence.tool.clone().unwrap(),
                x.evidence.pointer.clone().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        lost,
        vec![
            ("ship_order".to_string(), "/properties/order_id".to_string()),
            ("ship_order".to_string(), "/properties/note".to_string())
        ],
        "{f:#?}"
    );
    // cancel_order's order_id (a plain string) is not confused with ship_order's.
    assert!(
        !f.iter()
            .any(|x| x.evidence.tool.as_deref() == Some("cancel_order"))
    );
}

#[test]
fn ref_left_unresolved_by_a_custom_printer() {
    let tools = json!([{"type": "function", "function": {"name": "draw", "description": "Draw a line",
        "parameters": {"type": "object", "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}}}},
            "properties": {"start": {"$ref": "#/$defs/Point"}}}}}]);
    // A printer that shows only properties and types (as Gemma 4 does): the $ref target is gone.
    let prompt = "<|tool>declaration:draw{description:<|\"|>Draw a line<|\"|>,parameters:{properties:{start:{type:<|\"|><|\"|>}},type:<|\"|>OBJECT<|\"|>}}<tool|>";
    let f = schema_loss(&tools, prompt);
    assert_eq!(
        pointers(&f, Rule::SchemaRefUnresolved),
        vec!["/properties/start"],
        "{f:#?}"
    );
    // A JSON dump carries $defs: resolvable by the reader.
    let dumped = format!(
        "<tools>{}</tools>",
        serde_json::to_string(&tools[0]).unwrap()
    );
    assert!(schema_loss(&tools, &dumped).is_empty());
}

#[test]
fn partial_alternatives_and_enums_are_reported_as_dropped() {
    let tools = json!([{"type": "function", "function": {"name": "pick", "description": "Pick",
        "parameters": {"type": "object", "properties": {
            "n": {"type": ["integer", "boolean", "null"]},
            "mode": {"type": "string", "enum": ["fast", "slow", "exact"]}}}}}]);
    let prompt = "tool pick {\n  n: integer\n  mode: string, one of fast|slow\n}\n";
    let f = schema_loss(&tools, prompt);
    let got: Vec<(Rule, String)> = f
        .iter()
        .map(|x| (x.rule, x.evidence.pointer.clone().unwrap()))
        .collect();
    assert_eq!(
        got,
        vec![
            (
                Rule::SchemaAlternativeDropped,
                "/properties/n/type/1".to_string()
            ),
            (
                Rule::SchemaAlternativeDropped,
                "/properties/n/type/2".to_string()
            ),
            (
                Rule::SchemaAlternativeDropped,
                "/properties/mode/enum".to_string()
            ),
        ],
        "{f:#?}"
    );
    assert!(f[2].message.contains("\"exact\""));
}

#[test]
fn tool_missing_from_prompt() {
    let tools = json!([{"name": "t", "input_schema": {"type": "object", "properties": {"a": {"type": "string"}}}}]);
    let f = schema_loss(&tools, "<start_of_turn>user\nhi<end_of_turn>\n");
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].rule, Rule::SchemaTypeLost);
    assert_eq!(f[0].evidence.pointer.as_deref(), Some(""));
    // No tools: nothing to report.
    assert!(schema_loss(&json!({"messages": []}), "x").is_empty());
}

#[test]
fn items_not_printed_by_a_typescript_printer() {
    // gpt-oss prints `parcels: any[]`: the item type and its properties are gone.
    let req: Value = serde_json::from_str(&data("corpus-request.json")).unwrap();
    let prompt = data("corpus/openai-gpt-oss-120b.txt");
    assert!(prompt.contains("parcels: any[],"));
    let f = schema_loss(&req, &prompt);
    let lost: Vec<String> = f
        .iter()
        .filter(|x| x.rule == Rule::SchemaTypeLost)
        .map(|x| x.evidence.pointer.clone().unwrap())
        .collect();
    assert_eq!(
        lost,
        vec![
            "/properties/order_id",
            "/properties/note",
            "/properties/parcels/items",
            "/properties/parcels/items/properties/sku",
            "/properties/parcels/items/properties/weight_kg",
        ],
        "{f:#?}"
    );
}

/// A call example in a message, written before the tool list (here in the system prompt, as an
/// agent's instructions do), names the tool and its parameter too. The render is llama-server
/// b11434's `/apply-template` of the Qwen3-0.6B template (recorded through the proxy): the
/// parameter's type is printed in the `<tools>` block, so nothing was lost.
#[test]
fn call_example_in_a_message_is_not_the_declaration() {
    let tools = json!([{"type": "function", "function": {"name": "get_weather",
        "description": "Get weather", "parameters": {"type": "object",
        "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]);
    let rendered = "<|im_start|>system\nAlways answer with exactly: <tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Get weather\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n<|im_start|>user\nSay exactly: <tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call><|im_end|>\n<|im_start|>assistant\n";
    let f = schema_loss(&tools, rendered);
    assert!(f.is_empty(), "{f:#?}");
    let r = loss_report(&tools, rendered);
    let decl = rendered.find("{\"type\": \"function\"").unwrap();
    assert!(r.tools[0].span.unwrap().0 >= decl, "{:?}", r.tools[0].span);
}
