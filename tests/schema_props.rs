//! Property tests for flattening (issue 4): never panics on arbitrary JSON, is idempotent, and
//! leaves no `anyOf`/`oneOf`/`allOf`/`$ref` in any schema position.

use proptest::prelude::*;
use serde_json::{Map, Value, json};
use toolscope::schema::flatten::{FlattenOptions, Strategy as Flat, flatten_tools, has_combinators};
use toolscope::schema::loss::loss_report;

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i32>().prop_map(|i| json!(i)),
        prop::sample::select(vec!["string", "number", "integer", "boolean", "null", "object", "array", "#", "#/$defs/A", "#/$defs/B", "#/definitions/C", "#/properties/a", "x"])
            .prop_map(|s| Value::String(s.to_string())),
        "[a-z$#/]{0,6}".prop_map(Value::String),
    ]
}

const KEYS: &[&str] = &[
    "type", "anyOf", "oneOf", "allOf", "$ref", "$defs", "definitions", "properties", "items", "required", "enum", "const",
    "description", "nullable", "default", "not", "additionalProperties", "prefixItems", "A", "B", "C", "a", "b",
];

/// Schema-flavoured arbitrary JSON: keys drawn mostly from JSON Schema keywords.
fn schemaish() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(6, 80, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS.to_vec()), inner), 0..5).prop_map(|kv| {
                let mut m = Map::new();
                for (k, v) in kv {
                    m.insert(k.to_string(), v);
                }
                Value::Object(m)
            }),
        ]
    })
}

fn strategy() -> impl Strategy<Value = Flat> {
    prop::sample::select(Flat::ALL.to_vec())
}

fn wrap(schema: Value) -> Value {
    json!([{"type": "function", "function": {"name": "t", "description": "d", "parameters": schema}}])
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, .. ProptestConfig::default() })]

    #[test]
    fn never_panics_on_arbitrary_json(doc in schemaish(), s in strategy()) {
        let _ = flatten_tools(&doc, &FlattenOptions::with_strategy(s));
        let _ = flatten_tools(&json!({"tools": doc.clone()}), &FlattenOptions::with_strategy(s));
        let _ = loss_report(&wrap(doc.clone()), &doc.to_string());
    }

    #[test]
    fn output_has_no_combinators_and_is_idempotent(schema in schemaish(), s in strategy()) {
        let opts = FlattenOptions::with_strategy(s);
        let once = flatten_tools(&wrap(schema), &opts).unwrap();
        let params = &once.tools[0]["function"]["parameters"];
        prop_assert!(!has_combinators(params), "combinators left in {}", params);
        let twice = flatten_tools(&once.tools, &opts).unwrap();
        prop_assert_eq!(&once.tools, &twice.tools);
    }
}

#[test]
fn checker_sees_combinators() {
    // The property above is only meaningful if has_combinators can fail.
    assert!(has_combinators(&json!({"properties": {"a": {"items": {"anyOf": []}}}})));
    assert!(has_combinators(&json!({"$ref": "#"})));
    assert!(!has_combinators(&json!({"enum": [{"anyOf": 1}]})));
}
