//! Flattening and schema-loss throughput. Prints figures; asserts nothing about time.
//!
//! `cargo bench --bench schema` (release) or `cargo bench --bench schema --profile dev`.

use std::hint::black_box;
use std::time::Instant;

use serde_json::{Value, json};
use toolscope::schema::flatten::{FlattenOptions, flatten_tools};
use toolscope::schema::loss::loss_report;

/// `n` tools, each with a union, a nullable, an enum, a nested object, an array of objects and a
/// recursive `$ref`.
fn tools(n: usize) -> Value {
    let one = |i: usize| {
        json!({"type": "function", "function": {"name": format!("tool_{i}"), "description": format!("Tool number {i}"),
            "parameters": {"type": "object",
                "$defs": {"Node": {"type": "object", "properties": {"name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}}},
                "properties": {
                    "id": {"anyOf": [{"type": "string"}, {"type": "integer"}], "description": "identifier"},
                    "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                    "mode": {"type": "string", "enum": ["a", "b", "c"]},
                    "address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}, "required": ["city"]},
                    "items": {"type": "array", "items": {"type": "object", "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}}}},
                    "tree": {"$ref": "#/$defs/Node"}
                },
                "required": ["id"]}}})
    };
    Value::Array((0..n).map(one).collect())
}

fn time<T>(label: &str, reps: usize, bytes: usize, mut f: impl FnMut() -> T) {
    let t = Instant::now();
    for _ in 0..reps {
        black_box(f());
    }
    let per = t.elapsed().as_secs_f64() / reps as f64;
    println!(
        "{label:<44} {:>10.3} ms/iter {:>10.1} MB/s",
        per * 1e3,
        bytes as f64 / per / 1e6
    );
}

fn main() {
    for n in [10usize, 100, 500] {
        let doc = tools(n);
        let bytes = doc.to_string().len();
        time(
            &format!("flatten_tools, {n} tools ({bytes} B)"),
            20,
            bytes,
            || flatten_tools(&doc, &FlattenOptions::default()),
        );
        let prompt = format!(
            "<tools>\n{}\n</tools>",
            doc.as_array()
                .map(|a| a
                    .iter()
                    .map(|t| t.to_string())
                    .collect::<Vec<_>>()
                    .join("\n"))
                .unwrap_or_default()
        );
        time(
            &format!("loss_report (JSON dump), {n} tools ({} B)", prompt.len()),
            5,
            prompt.len(),
            || loss_report(&doc, &prompt),
        );
    }
}
