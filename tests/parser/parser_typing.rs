//! XML parameter values typed by the tool schema (qwen3-coder and anthropic-xml share one reader),
//! and the `degenerated_to_string` repair when a value does not fit the schema type.
//! Expected values hand-checked against the schema rules in docs/parser.md.

use crate::support;

use std::process::Command;

use serde_json::{Value, json};
use toolscope::parser::{Syntax, parse};

fn tools() -> Value {
    json!([{"type": "function", "function": {"name": "set_limit", "parameters": {"type": "object", "properties": {
        "limit": {"type": "integer"},
        "ratio": {"anyOf": [{"type": "number"}, {"type": "null"}]},
        "unit": {"type": "string"},
        "code": {"type": ["string", "integer"]}
    }}}}])
}

/// A qwen3-coder call of `set_limit` with these parameters, values written as given.
fn qwen(params: &[(&str, &str)]) -> String {
    let mut t = String::from("<tool_call>\n<function=set_limit>\n");
    for (k, v) in params {
        t.push_str(&format!("<parameter={k}>\n{v}\n</parameter>\n"));
    }
    t + "</function>\n</tool_call>"
}

const QWEN_BAD: &str = "<tool_call>\n<function=set_limit>\n<parameter=limit>\nfive\n</parameter>\n<parameter=unit>\nkg\n</parameter>\n</function>\n</tool_call>";

#[test]
fn qwen3_coder_non_integer_for_integer_is_a_repair() {
    let o = parse(QWEN_BAD, Some(Syntax::Qwen3Coder), Some(&tools()));
    assert_eq!(o.tool_calls.len(), 1, "{o:?}");
    // the value stays the string the model wrote (as Qwen's own parser does) …
    assert_eq!(
        o.tool_calls[0].arguments,
        json!({"limit": "five", "unit": "kg"})
    );
    // … and that is made visible
    assert_eq!(o.repairs.len(), 1, "{:?}", o.repairs);
    let r = &o.repairs[0];
    assert_eq!(r.kind, "degenerated_to_string");
    assert!(
        r.message.contains("\"limit\"")
            && r.message.contains("\"five\"")
            && r.message.contains("integer"),
        "{}",
        r.message
    );
    // offset of the value: right after `<parameter=limit>` (the newline before `five`)
    let at = QWEN_BAD.find("<parameter=limit>").unwrap() + "<parameter=limit>".len();
    assert_eq!(r.offset, at);
    assert_eq!(&QWEN_BAD[r.offset..r.offset + 5], "\nfive");
}

#[test]
fn values_that_fit_the_schema_give_no_repair() {
    let text = qwen(&[
        ("limit", "5"),
        ("ratio", "0.5"),
        ("unit", "5"),
        ("code", "A7"),
    ]);
    let o = parse(&text, Some(Syntax::Qwen3Coder), Some(&tools()));
    assert_eq!(
        o.tool_calls[0].arguments,
        json!({"limit": 5, "ratio": 0.5, "unit": "5", "code": "A7"})
    );
    assert!(o.repairs.is_empty(), "{:?}", o.repairs);
}

#[test]
fn a_whole_number_written_with_a_fraction_fits_an_integer() {
    // JSON Schema 2020-12 validation §6.1.1: 5.0 and -0 are integers.
    for (raw, want) in [
        ("5.0", json!(5.0)),
        ("-0", json!(-0.0)),
        ("1e2", json!(100.0)),
    ] {
        let text = qwen(&[("limit", raw)]);
        let o = parse(&text, Some(Syntax::Qwen3Coder), Some(&tools()));
        assert_eq!(o.tool_calls[0].arguments["limit"], want, "{raw}");
        assert!(o.repairs.is_empty(), "{raw}: {:?}", o.repairs);
    }
}

#[test]
fn a_fraction_for_an_integer_and_text_for_a_number_are_repairs() {
    let text = qwen(&[("limit", "2.5"), ("ratio", "half")]);
    let o = parse(&text, Some(Syntax::Qwen3Coder), Some(&tools()));
    assert_eq!(
        o.tool_calls[0].arguments,
        json!({"limit": "2.5", "ratio": "half"})
    );
    let kinds: Vec<&str> = o.repairs.iter().map(|r| r.kind.as_str()).collect();
    assert_eq!(kinds, ["degenerated_to_string", "degenerated_to_string"]);
    assert!(o.repairs[1].message.contains("number or null"));
}

#[test]
fn anthropic_xml_uses_the_same_typing() {
    let text = "<invoke name=\"set_limit\">\n<parameter name=\"limit\">five</parameter>\n<parameter name=\"ratio\">0.25</parameter>\n<parameter name=\"unit\" string=\"false\">7</parameter>\n</invoke>";
    let o = parse(text, Some(Syntax::AnthropicXml), Some(&tools()));
    assert_eq!(
        o.tool_calls[0].arguments,
        json!({"limit": "five", "ratio": 0.25, "unit": 7})
    );
    let kinds: Vec<&str> = o.repairs.iter().map(|r| r.kind.as_str()).collect();
    assert_eq!(kinds, ["degenerated_to_string"]);
    let at = text.find("five").unwrap();
    assert_eq!(o.repairs[0].offset, at);
}

#[test]
fn cli_parse_reports_the_repair() {
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("raw.txt");
    let tools_file = dir.path().join("tools.json");
    std::fs::write(&raw, QWEN_BAD).unwrap();
    std::fs::write(&tools_file, tools().to_string()).unwrap();
    let o = Command::new(support::bin())
        .args(["parse", "--syntax", "qwen3-coder", "--tools"])
        .arg(&tools_file)
        .arg(&raw)
        .args(["--format", "json"])
        .output()
        .expect("run toolscope");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v["tool_calls"],
        json!([{"name": "set_limit", "arguments": {"limit": "five", "unit": "kg"}}])
    );
    assert_eq!(v["repairs"][0]["kind"], "degenerated_to_string");
}
