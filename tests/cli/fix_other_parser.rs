//! The `server.parse_error` fix (`other_parser`: the engines view's engine/parser that reads the
//! raw text) on shipped session e, checked against the engines' own parser code, not through
//! toolscope's models of it: tests/data/engine_e.json holds e's raw text and two variants of it
//! as the released vLLM 0.33.0 and SGLang 0.5.23 hermes parsers read them (scripts/engines/
//! run.py; tests/e2e/engines_real.rs re-runs it), and a hand reading of vLLM's parser agrees.
//!
//! Session e: llama-server b11434 answered HTTP 500 ("does not match the expected peg-native
//! format") to a request whose assistant prefill is `<tool_call>\n{"name": "`; the slot's raw
//! text continues it. The parsers read prefill + slot text.
//!
//! vLLM 0.33.0 `hermes` (vllm/tool_parsers/hermes_tool_parser.py `extract_tool_calls`), by
//! hand: regex `<tool_call>(.*?)</tool_call>|<tool_call>(.*)` (DOTALL), then `json.loads` of
//! the group — a block without its end marker is read to the end of the text; a JSON error
//! returns the whole text as content. The `--tool-call-parser` names are
//! tests/data/engine_corpus.json's `families` (scripts/engines/make_corpus.py).

use crate::support;

use std::process::Command;
use std::time::Duration;

use serde_json::Value;

const E: &str = "sessions/e-http500-peg-native.jsonl";

/// The `server.parse_error` finding of `check --format json` on `path`.
fn parse_error_finding(path: &std::path::Path) -> Value {
    let out = Command::new(support::bin())
        .args(["check", "--format", "json"])
        .arg(path)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut found = Vec::new();
    fn walk(v: &Value, out: &mut Vec<Value>) {
        match v {
            Value::Object(m) => {
                if m.get("rule").and_then(Value::as_str) == Some("server.parse_error") {
                    out.push(v.clone());
                }
                m.values().for_each(|x| walk(x, out));
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    walk(&v, &mut found);
    assert_eq!(found.len(), 1, "{v:#}");
    found.remove(0)
}

/// Session e's lines, with the slot's raw text replaced when `slot_text` is given.
fn e_lines(slot_text: Option<&str>) -> Vec<Value> {
    std::fs::read_to_string(support::root().join(E))
        .unwrap()
        .lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            if let Some(t) = slot_text
                && v["kind"] == "raw_text"
            {
                v["text"] = Value::from(t);
            }
            v
        })
        .collect()
}

/// The text the parsers read: the request's assistant prefill, then the slot's raw text.
fn read_text(lines: &[Value]) -> String {
    let ex = lines.iter().find(|v| v["type"] == "exchange").unwrap();
    let req: Value = serde_json::from_str(ex["request"]["body"]["text"].as_str().unwrap()).unwrap();
    let prefill = req["messages"]
        .as_array()
        .unwrap()
        .last()
        .filter(|m| m["role"] == "assistant")
        .and_then(|m| m["content"].as_str())
        .unwrap()
        .to_owned();
    let raw = lines.iter().find(|v| v["kind"] == "raw_text").unwrap();
    prefill + raw["text"].as_str().unwrap()
}

/// vLLM's hermes reading, by hand (module docs): the calls' names, or `None` when the text is
/// returned as content.
fn vllm_hermes_by_hand(text: &str) -> Option<Vec<String>> {
    let start = text.find("<tool_call>")? + "<tool_call>".len();
    let rest = &text[start..];
    let group = match rest.find("</tool_call>") {
        Some(end) => &rest[..end],
        None => rest, // the `<tool_call>(.*)` alternative
    };
    let call: Value = serde_json::from_str(group.trim()).ok()?;
    Some(vec![call["name"].as_str()?.to_owned()])
}

/// The engines' own reading of text `id` of tests/data/engine_e.json: its text, and the
/// engines in the fix's order (vLLM, SGLang) with the names of the calls each returned.
fn oracle(id: &str) -> (String, Vec<(&'static str, Vec<String>)>) {
    let d: Value = serde_json::from_str(
        &std::fs::read_to_string(support::root().join("tests/data/engine_e.json")).unwrap(),
    )
    .unwrap();
    let text = d["corpus"]["texts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == id)
        .unwrap()["text"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = &d["results"][id];
    let names = |e: &str| -> Vec<String> {
        r[e]["calls"]
            .as_array()
            .map(|c| {
                c.iter()
                    .map(|c| c["name"].as_str().unwrap().to_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    (
        text,
        vec![("vLLM", names("vllm")), ("SGLang", names("sglang"))],
    )
}

fn corpus_parser_name(engine: &str) -> String {
    let c: Value = serde_json::from_str(
        &std::fs::read_to_string(support::root().join("tests/data/engine_corpus.json")).unwrap(),
    )
    .unwrap();
    c["families"]["hermes"][engine].as_str().unwrap().to_owned()
}

#[test]
fn shipped_e_has_no_parser_fix_because_no_parser_reads_its_raw_text() {
    let lines = e_lines(None);
    let text = read_text(&lines);
    // by hand: the block is opened, never closed (the text ends `</tool_call` without `>`), and
    // what follows `<tool_call>` is not one JSON value (the cut end marker trails it)
    assert!(
        text.starts_with("<tool_call>\n{\"name\": \"Vienna\""),
        "{text:?}"
    );
    assert!(text.ends_with("}}\n</tool_call"), "{text:?}");
    assert!(!text.contains("</tool_call>"), "{text:?}");
    assert_eq!(vllm_hermes_by_hand(&text), None, "{text:?}");
    // the engines' own code: the same text, and neither reads a call
    let (recorded, engines) = oracle("e/shipped");
    assert_eq!(recorded, text);
    for (engine, calls) in &engines {
        assert!(calls.is_empty(), "{engine}: {calls:?}");
    }
    // so nothing reads a call, and the finding carries no fix (docs/check.md: none when
    // nothing reads a call)
    let f = parse_error_finding(&support::root().join(E));
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("does not match the expected peg-native format"),
        "{f:#}"
    );
    assert!(f.get("fix").is_none_or(Value::is_null), "{f:#}");
}

#[test]
fn parser_fix_names_another_engine_than_the_server_that_failed() {
    // text after a closed block: the model of llama.cpp's parser reads the call, but the
    // recorded server is llama.cpp and answered 500: the fix is the next engine that reads it
    let lines = e_lines(Some(
        "get_weather\", \"arguments\": {\"city\": \"Vienna\"}}\n</tool_call>\nI will check.",
    ));
    let text = read_text(&lines);
    assert_eq!(
        vllm_hermes_by_hand(&text),
        Some(vec!["get_weather".to_owned()]),
        "{text:?}"
    );
    let (recorded, engines) = oracle("e/content_after");
    assert_eq!(recorded, text);
    assert_eq!(engines[0], ("vLLM", vec!["get_weather".to_owned()]));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("e-content-after.jsonl");
    let body: String = lines.iter().map(|v| format!("{v}\n")).collect();
    std::fs::write(&path, body).unwrap();
    let f = parse_error_finding(&path);
    assert_eq!(f["fix"]["engine"], "vLLM", "{f:#}");
    assert_eq!(
        f["fix"]["parser"].as_str().unwrap(),
        corpus_parser_name("vllm"),
        "{f:#}"
    );
}

#[test]
fn parser_fix_names_the_engine_that_reads_the_raw_text() {
    // the same exchange, had the model stopped before writing the end marker
    let lines = e_lines(Some(
        "get_weather\", \"arguments\": {\"city\": \"Vienna\"}}\n",
    ));
    let text = read_text(&lines);
    assert_eq!(
        vllm_hermes_by_hand(&text),
        Some(vec!["get_weather".to_owned()]),
        "{text:?}"
    );
    // the engines' own code: both read the call; vLLM comes first in the fix's order
    let (recorded, engines) = oracle("e/unclosed");
    assert_eq!(recorded, text);
    let first = engines.iter().find(|(_, c)| !c.is_empty()).unwrap().clone();
    assert_eq!(first, ("vLLM", vec!["get_weather".to_owned()]));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("e-unclosed.jsonl");
    let body: String = lines.iter().map(|v| format!("{v}\n")).collect();
    std::fs::write(&path, body).unwrap();
    let f = parse_error_finding(&path);
    let fix = &f["fix"];
    assert_eq!(fix["id"], "other_parser", "{f:#}");
    assert_eq!(fix["apply"], "reparse", "{f:#}");
    // the first engine whose own code reads the call, with the parser name its registry
    // gives the family
    assert_eq!(fix["engine"], first.0, "{f:#}");
    assert_eq!(
        fix["parser"].as_str().unwrap(),
        corpus_parser_name("vllm"),
        "{f:#}"
    );
    assert!(
        fix["change"].as_str().unwrap().contains("get_weather"),
        "{f:#}"
    );

    // try runs it: the reparse reads one valid call, once (nothing is sent for it)
    let (url, _) = support::whatif::start(Duration::ZERO);
    let out = Command::new(support::bin())
        .arg("try")
        .arg(&path)
        .args([
            "--exchange",
            "1",
            "--fix",
            "other_parser",
            "--runs",
            "1",
            "--url",
            &url,
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let block: Vec<&str> = stdout
        .lines()
        .skip_while(|l| *l != "other_parser")
        .take_while(|l| !l.is_empty())
        .collect();
    let (lo, _) = support::whatif::wilson_all_or_none(1, 1);
    assert!(
        block.contains(
            &format!("  valid calls 1/1 (100 %, 95 % CI {:.0}–100 %)", 100.0 * lo).as_str()
        ),
        "{stdout}"
    );
    assert!(block.contains(&"  finish:   parsed ×1"), "{stdout}");
}
