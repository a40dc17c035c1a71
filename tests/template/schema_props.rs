//! Property tests for flattening (issue 4): never panics on arbitrary JSON, is idempotent, and
//! leaves no `anyOf`/`oneOf`/`allOf`/`$ref` in any schema position.

use proptest::prelude::*;
use serde_json::{Map, Value, json};
use toolscope::schema::flatten::{
    FlattenOptions, Strategy as Flat, flatten_tools, has_combinators,
};
use toolscope::schema::loss::loss_report;

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i32>().prop_map(|i| json!(i)),
        prop::sample::select(vec![
            "string",
            "number",
            "integer",
            "boolean",
            "null",
            "object",
            "array",
            "#",
            "#/$defs/A",
            "#/$defs/B",
            "#/definitions/C",
            "#/properties/a",
            "x"
        ])
        .prop_map(|s| Value::String(s.to_string())),
        "[a-z$#/]{0,6}".prop_map(Value::String),
    ]
}

const KEYS: &[&str] = &[
    "type",
    "anyOf",
    "oneOf",
    "allOf",
    "$ref",
    "$defs",
    "definitions",
    "properties",
    "items",
    "required",
    "enum",
    "const",
    "description",
    "nullable",
    "default",
    "not",
    "additionalProperties",
    "prefixItems",
    "A",
    "B",
    "C",
    "a",
    "b",
];

/// Schema-flavoured arbitrary JSON: keys drawn mostly from JSON Schema keywords.
fn schemaish() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(6, 80, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS.to_vec()), inner), 0..5).prop_map(
                |kv| {
                    let mut m = Map::new();
                    for (k, v) in kv {
                        m.insert(k.to_string(), v);
                    }
                    Value::Object(m)
                }
            ),
        ]
    })
}

/// Well-formed schemas built from the constructs flattening rewrites: typed leaves, unions
/// (with null), allOf, objects, arrays, and `$ref`s into `$defs` whose definitions refer to
/// each other (so recursion and cycles occur).
fn wellformed() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        prop::sample::select(vec!["string", "number", "integer", "boolean", "null"])
            .prop_map(|t| json!({"type": t})),
        prop::sample::select(vec![
            "#/$defs/A",
            "#/$defs/B",
            "#",
            "#/$defs/Missing",
            "https://x.test/s.json"
        ])
        .prop_map(|r| json!({"$ref": r})),
        Just(json!({"type": "string", "enum": ["a", "b"]})),
        Just(json!({"type": ["integer", "null"]})),
        Just(json!({})),
    ];
    let tree = leaf.prop_recursive(5, 60, 4, |inner| {
        prop_oneof![
            (prop::sample::select(vec!["anyOf", "oneOf", "allOf"]), prop::collection::vec(inner.clone(), 1..4))
                .prop_map(|(k, v)| json!({k: v, "description": "d"})),
            prop::collection::vec(inner.clone(), 0..4).prop_map(|v| {
                let mut props = Map::new();
                for (i, s) in v.into_iter().enumerate() {
                    props.insert(format!("p{i}"), s);
                }
                json!({"type": "object", "properties": props, "required": ["p0"]})
            }),
            inner.clone().prop_map(|i| json!({"type": "array", "items": i})),
            (inner.clone(), inner).prop_map(|(a, b)| json!({"$ref": "#/$defs/A", "description": "r", "properties": {"x": a, "y": b}})),
        ]
    });
    (tree.clone(), tree.clone(), tree).prop_map(|(root, a, b)| {
        let mut root = match root {
            Value::Object(m) => m,
            other => {
                let mut m = Map::new();
                m.insert("properties".into(), json!({"v": other}));
                m
            }
        };
        root.insert("$defs".into(), json!({"A": a, "B": b}));
        Value::Object(root)
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

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, .. ProptestConfig::default() })]

    #[test]
    fn wellformed_schemas_flatten_completely_and_idempotently(schema in wellformed(), s in strategy()) {
        let opts = FlattenOptions::with_strategy(s);
        let once = flatten_tools(&wrap(schema), &opts).unwrap();
        let params = &once.tools[0]["function"]["parameters"];
        prop_assert!(!has_combinators(params), "combinators left in {}", params);
        prop_assert!(params.get("$defs").is_none());
        let twice = flatten_tools(&once.tools, &opts).unwrap();
        prop_assert_eq!(&once.tools, &twice.tools);
        // A template that dumps the tools as JSON loses nothing, whatever the flattener produced.
        let dump = serde_json::to_string(&once.tools).unwrap();
        let r = loss_report(&once.tools, &dump);
        prop_assert_eq!(r.score(), 0, "a JSON dump lost {:?}", r.lost_facts().map(|(_, _, f)| f.clone()).collect::<Vec<_>>());
    }
}

#[test]
fn checker_sees_combinators() {
    // The property above is only meaningful if has_combinators can fail.
    assert!(has_combinators(
        &json!({"properties": {"a": {"items": {"anyOf": []}}}})
    ));
    assert!(has_combinators(&json!({"$ref": "#"})));
    assert!(!has_combinators(&json!({"enum": [{"anyOf": 1}]})));
}
