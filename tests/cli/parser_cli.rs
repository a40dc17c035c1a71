//! `toolscope parse` end to end (the built binary), on the field cases.

use crate::support;

use std::process::Command;

use serde_json::{Value, json};

fn run(args: &[&str]) -> (i32, String, String) {
    let o = Command::new(support::bin())
        .arg("parse")
        .args(args)
        .output()
        .expect("run toolscope");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn chunks_json_output_has_the_contract_shape() {
    let dir = tempfile::tempdir().unwrap();
    let c = support::case_json("04-split-think-close", "case.json");
    let chunks = dir.path().join("chunks.json");
    std::fs::write(&chunks, c["inputs"]["chunks"].to_string()).unwrap();
    let (code, out, err) = run(&[
        "--syntax",
        "hermes",
        "--chunks",
        chunks.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "content",
            "reasoning",
            "tool_calls",
            "malformed",
            "repairs",
            "steps"
        ]
    );
    assert_eq!(
        v["tool_calls"],
        json!([{"name": "get_time", "arguments": {"tz": "UTC"}}])
    );
    assert_eq!(v["reasoning"], "The user wants the time");
    assert_eq!(v["content"], "");
    // 4 chunks + finish
    let steps = v["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 5);
    assert_eq!(steps[1]["chunk"], "<");
    assert_eq!(steps[1]["state"], "in_reasoning");
    assert_eq!(steps[1]["held"], "<");
    assert_eq!(steps[2]["state"], "in_call");
    assert_eq!(steps[2]["syntax"], "hermes");
}

#[test]
fn raw_file_with_template_detection_and_repair_step() {
    let dir = tempfile::tempdir().unwrap();
    let c = support::case_json("08-extra-brace-after-call", "case.json");
    let raw = dir.path().join("raw.txt");
    std::fs::write(&raw, c["inputs"]["raw"].as_str().unwrap()).unwrap();
    let tools = dir.path().join("tools.json");
    std::fs::write(&tools, c["inputs"]["tools"].to_string()).unwrap();
    let (code, out, err) = run(&[
        "--tools",
        tools.to_str().unwrap(),
        raw.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["content"], c["expect"]["content"]);
    assert_eq!(v["tool_calls"], c["expect"]["tool_calls"]);
    assert_eq!(v["repairs"][0]["kind"], "stray_closer");
    let with_repair = v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| {
            s["events"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e.get("repair").is_some())
        })
        .count();
    assert_eq!(with_repair, 1);
    // text format: readable, names the repair
    let (code, out, _) = run(&["--tools", tools.to_str().unwrap(), raw.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(out.contains("write_file("), "{out}");
    assert!(out.contains("repair stray_closer @"), "{out}");
    assert!(out.contains("same result as one-shot"), "{out}");
}

#[test]
fn template_markers_choose_the_syntax() {
    let Some(corpus) = support::corpus() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("raw.txt");
    std::fs::write(
        &raw,
        "<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</function>\n</tool_call>",
    )
    .unwrap();
    let t = corpus.join("Qwen3-Coder.jinja");
    let (code, out, err) = run(&["--template", t.to_str().unwrap(), raw.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("syntax     qwen3-coder (detected"), "{out}");
}

#[test]
fn bad_inputs_exit_2_naming_file_and_position() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "[\"a\",\n  \"b\" 3]").unwrap();
    let (code, _, err) = run(&["--chunks", bad.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(
        err.contains("bad.json:2:") && err.contains("invalid JSON"),
        "{err}"
    );
    let notstr = dir.path().join("n.json");
    std::fs::write(&notstr, "[\"a\", 3]").unwrap();
    let (code, _, err) = run(&["--chunks", notstr.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("n.json") && err.contains("element 1"), "{err}");
    let latin = dir.path().join("l.txt");
    std::fs::write(&latin, b"ok \xff").unwrap();
    let (code, _, err) = run(&[latin.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("l.txt") && err.contains("byte 3"), "{err}");
    let (code, _, err) = run(&["--syntax", "nope", latin.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown syntax"), "{err}");
    let (code, _, err) = run(&[dir.path().join("missing.txt").to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("missing.txt"), "{err}");
}
