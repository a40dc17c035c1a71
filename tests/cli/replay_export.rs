//! `toolscope export`: HAR round trip byte for byte through `toolscope import` on every shipped
//! session (and on a HAR mitmproxy wrote), and the OTLP/JSON shape.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_toolscope"))
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn sessions() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root().join("sessions"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    v.sort();
    v.push(root().join("tests/data/replay/ollama-docs.jsonl"));
    v
}

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// (header, exchange lines in order, annotation lines sorted) of a session file.
fn lines(path: &Path) -> (String, Vec<String>, Vec<String>) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut header = String::new();
    let (mut ex, mut ann) = (Vec::new(), Vec::new());
    for l in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(l).unwrap();
        match v["type"].as_str().unwrap() {
            "header" => header = l.to_owned(),
            "exchange" => ex.push(l.to_owned()),
            _ => ann.push(l.to_owned()),
        }
    }
    ann.sort();
    (header, ex, ann)
}

fn round_trip(session: &Path, dir: &Path) -> (PathBuf, PathBuf) {
    let har = dir.join("x.har");
    let back = dir.join("x.jsonl");
    run(bin()
        .args(["export"])
        .arg(session)
        .args(["--format", "har", "-o"])
        .arg(&har));
    run(bin()
        .arg("import")
        .arg(&har)
        .arg("-o")
        .arg(&back)
        .arg("--force"));
    (har, back)
}

#[test]
fn har_round_trip_is_byte_for_byte_on_every_shipped_session() {
    let dir = tempfile::tempdir().unwrap();
    for s in sessions() {
        let (har, back) = round_trip(&s, dir.path());
        let (h0, e0, a0) = lines(&s);
        let (h1, e1, a1) = lines(&back);
        assert_eq!(h1, h0, "{}: header", s.display());
        assert_eq!(e1.len(), e0.len(), "{}", s.display());
        for (x, y) in e0.iter().zip(&e1) {
            assert_eq!(y, x, "{}: exchange line", s.display());
        }
        assert_eq!(a1, a0, "{}: annotations", s.display());
        // the HAR itself: whole bodies, per-chunk and per-event times, secrets still redacted
        let h: Value = serde_json::from_slice(&std::fs::read(&har).unwrap()).unwrap();
        assert_eq!(h["log"]["version"], "1.2");
        let text = std::fs::read_to_string(&har).unwrap();
        assert!(
            !text.to_ascii_lowercase().contains("bearer sk-"),
            "{}",
            s.display()
        );
        for (e, line) in h["log"]["entries"].as_array().unwrap().iter().zip(&e0) {
            let ex: toolscope::session::Exchange = serde_json::from_str::<Value>(line)
                .map(|mut v| {
                    v.as_object_mut().unwrap().remove("type");
                    serde_json::from_value(v).unwrap()
                })
                .unwrap();
            let content = &e["response"]["content"];
            if let Some(chunks) = ex.response.as_ref().and_then(|r| r.chunks.as_ref()) {
                let marks = content["_chunks"].as_array().unwrap();
                assert_eq!(marks.len(), chunks.len());
                assert_eq!(marks.last().unwrap()["t_us"], chunks.last().unwrap().t_us);
                assert!(!content["_events"].as_array().unwrap().is_empty());
                assert_eq!(
                    content["text"].as_str().unwrap().as_bytes(),
                    ex.response_bytes().as_slice()
                );
            }
        }
    }
}

#[test]
fn har_round_trip_of_a_mitmproxy_har() {
    let fixture = root().join("tests/data/replay/mitmproxy-llama-server.har");
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("first.jsonl");
    run(bin().arg("import").arg(&fixture).arg("-o").arg(&first));
    let (_, back) = round_trip(&first, dir.path());
    assert_eq!(lines(&back), lines(&first));
    // and the import read mitmproxy's streamed body as SSE events
    let (_, ex, _) = lines(&first);
    let v: Value = serde_json::from_str(&ex[0]).unwrap();
    assert!(v["response"]["chunks"].as_array().unwrap().len() > 2, "{v}");
}

#[test]
fn otel_export_has_one_span_per_exchange_with_genai_attributes() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.json");
    let s = root().join("sessions/a-two-tools-stream.jsonl");
    run(bin()
        .arg("export")
        .arg(&s)
        .args(["--format", "otel", "-o"])
        .arg(&out));
    let v: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let spans = v["resourceSpans"][0]["scopeSpans"][0]["spans"]
        .as_array()
        .unwrap();
    assert_eq!(spans.len(), 1);
    let span = &spans[0];
    let attr = |k: &str| {
        span["attributes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["key"] == k)
            .map(|a| a["value"].clone())
            .unwrap_or_else(|| panic!("no {k} in {span}"))
    };
    assert_eq!(attr("gen_ai.operation.name")["stringValue"], "chat");
    assert_eq!(span["kind"], 3);
    assert_eq!(span["traceId"].as_str().unwrap().len(), 32);
    // the recorded reply (sessions/README.md): get_weather({"city":"Lisbon"}), finish_reason tool_calls
    let out_msgs: Value = serde_json::from_str(
        attr("gen_ai.output.messages")["stringValue"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    let calls: Vec<&Value> = out_msgs[0]["parts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["type"] == "tool_call")
        .collect();
    assert_eq!(calls.len(), 1, "{out_msgs}");
    assert_eq!(calls[0]["name"], "get_weather");
    assert_eq!(calls[0]["arguments"], serde_json::json!({"city": "Lisbon"}));
    assert_eq!(
        attr("gen_ai.response.finish_reasons")["arrayValue"]["values"][0]["stringValue"],
        "tool_calls"
    );
    let tools: Value = serde_json::from_str(
        attr("gen_ai.tool.definitions")["stringValue"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(tools.as_array().unwrap().len(), 2);
    for k in [
        "gen_ai.request.model",
        "gen_ai.input.messages",
        "gen_ai.usage.input_tokens",
        "gen_ai.usage.output_tokens",
    ] {
        attr(k);
    }
}

#[test]
fn otel_findings_become_span_events() {
    // the Ollama docs session: exchange 4 ends done_reason stop with its call left in content
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.json");
    let s = root().join("tests/data/replay/ollama-docs.jsonl");
    run(bin()
        .arg("export")
        .arg(&s)
        .args(["--format", "otel", "-o"])
        .arg(&out));
    let v: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let spans = v["resourceSpans"][0]["scopeSpans"][0]["spans"]
        .as_array()
        .unwrap();
    assert_eq!(spans.len(), 5);
    let leaked = spans
        .iter()
        .find(|s| {
            s["attributes"]
                .as_array()
                .unwrap()
                .iter()
                .any(|a| a["key"] == "toolscope.exchange.id" && a["value"]["intValue"] == "4")
        })
        .unwrap();
    let rules: Vec<&str> = leaked["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| {
            e["attributes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|a| a["key"] == "toolscope.rule")
        })
        .map(|a| a["value"]["stringValue"].as_str().unwrap())
        .collect();
    assert!(rules.contains(&"tool_call.leaked_as_text"), "{rules:?}");
}
