//! `toolscope check` on session files: exchanges listed, streamed and failed exchanges
//! diagnosed, damaged lines reported while the rest is checked.

use crate::support;

use std::io::Write;
use std::process::Command;

use serde_json::{Value, json};
use toolscope::session::write::new_header;
use toolscope::session::{Body, Chunk, Exchange, Line, Request, Response, SessionWriter};

fn exchange(
    id: u64,
    path: &str,
    req: Value,
    status: u16,
    body: Option<&str>,
    chunks: Option<Vec<&str>>,
) -> Exchange {
    Exchange {
        id,
        started: "2026-11-29T18:00:00.000000Z".into(),
        request: Request {
            method: "POST".into(),
            path: path.into(),
            headers: vec![],
            body: Body::Text {
                text: req.to_string(),
            },
        },
        response: Some(Response {
            status,
            headers: vec![],
            body: body.map(|b| Body::Text { text: b.into() }),
            chunks: chunks.map(|c| {
                c.into_iter()
                    .enumerate()
                    .map(|(i, t)| Chunk {
                        t_us: i as u64 * 1000,
                        data: Body::Text { text: t.into() },
                    })
                    .collect()
            }),
        }),
        ..Default::default()
    }
}

fn run(args: &[&str]) -> (i32, Value, String) {
    let out = Command::new(support::bin())
        .arg("check")
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let v = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    (out.status.code().unwrap_or(-1), v, stdout)
}

#[test]
fn session_with_stream_parse_error_and_damaged_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let mut w = SessionWriter::open(&path, &new_header("2026-11-29T18:00:00Z".into())).unwrap();
    let tools = json!([{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}]);
    // 1: a stream whose finish_reason says tool_calls but whose call arguments were cut.
    let sse = vec![
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"read_file\",\"arguments\":\"\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"path\\\": \\\"no\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n",
    ];
    w.append(&Line::Exchange(Box::new(exchange(
        1,
        "/v1/chat/completions",
        json!({"model": "m", "stream": true, "tools": tools}),
        200,
        None,
        Some(sse),
    ))))
    .unwrap();
    // 2: llama-server's own parser gave up.
    let err = json!({"error": {"code": 500, "message": "The model produced output that does not match the expected peg-native format", "type": "server_error"}});
    w.append(&Line::Exchange(Box::new(exchange(
        2,
        "/v1/chat/completions",
        json!({"model": "m", "tools": tools}),
        500,
        Some(&err.to_string()),
        None,
    ))))
    .unwrap();
    drop(w);
    // a damaged line in the middle, then a clean exchange 3
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    f.write_all(b"{\"type\":\"exchange\",\"id\":9,\"star\n")
        .unwrap();
    let ok = json!({"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Done."}}]});
    let line = serde_json::to_string(&Line::Exchange(Box::new(exchange(
        3,
        "/v1/chat/completions",
        json!({"model": "m"}),
        200,
        Some(&ok.to_string()),
        None,
    ))))
    .unwrap();
    writeln!(f, "{line}").unwrap();
    drop(f);

    let (code, v, out) = run(&["--format", "json", path.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    let ex = v["exchanges"].as_array().unwrap();
    assert_eq!(
        ex.iter()
            .map(|e| e["index"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        [1, 2, 3]
    );
    assert_eq!(
        ex[0]["tool_calls"][0]["arguments"], "{\"path\": \"no",
        "non-JSON arguments are kept as the raw string"
    );
    let by = |rule: &str| {
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["rule"] == rule)
            .cloned()
            .collect::<Vec<_>>()
    };
    let invalid = by("tool_call.args_invalid_json");
    assert_eq!(invalid.len(), 1);
    assert_eq!(invalid[0]["exchange"], 1);
    let fm = by("finish.mismatch");
    assert_eq!(fm.len(), 1);
    assert_eq!(
        fm[0]["evidence"]["event"], 2,
        "the event that carried finish_reason"
    );
    let pe = by("server.parse_error");
    assert_eq!(pe.len(), 1);
    assert_eq!(pe[0]["exchange"], 2);
    assert_eq!(pe[0]["evidence"]["pointer"], "/error/message");
    let dmg = by("session.damaged");
    assert_eq!(dmg.len(), 1);
    assert!(
        dmg[0]["message"].as_str().unwrap().contains("line 4"),
        "{}",
        dmg[0]
    );
    assert!(
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["exchange"] != 3),
        "exchange 3 is clean"
    );

    // text output groups by exchange
    let (code, _, text) = run(&[path.to_str().unwrap()]);
    assert_eq!(code, 1);
    let i1 = text.find("#1 openai").unwrap();
    let i2 = text.find("#2 openai").unwrap();
    let i3 = text.find("#3 openai").unwrap();
    let pe_at = text.find("server.parse_error").unwrap();
    assert!(i1 < i2 && i2 < pe_at && pe_at < i3, "{text}");
    assert!(text[i3..].contains("ok: no findings"), "{text}");
}

#[test]
fn not_a_session_is_unusable() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.jsonl");
    std::fs::write(&path, "hello\n").unwrap();
    let out = Command::new(support::bin())
        .args(["check", path.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("x.jsonl") && err.contains("line 1"), "{err}");
}

#[test]
fn har_file_is_checked() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.har");
    let req = support::case_json("10-call-leaked-with-choice-none", "request.json");
    let resp = support::case_json("10-call-leaked-with-choice-none", "response.json");
    let har = json!({"log": {"version": "1.2", "creator": {"name": "t", "version": "1"}, "entries": [{
        "startedDateTime": "2026-11-29T18:00:00.000Z", "time": 10,
        "request": {"method": "POST", "url": "http://127.0.0.1:8080/v1/chat/completions", "httpVersion": "HTTP/1.1", "headers": [{"name": "Content-Type", "value": "application/json"}],
                    "queryString": [], "cookies": [], "headersSize": -1, "bodySize": -1, "postData": {"mimeType": "application/json", "text": req.to_string()}},
        "response": {"status": 200, "statusText": "OK", "httpVersion": "HTTP/1.1", "headers": [{"name": "Content-Type", "value": "application/json"}], "cookies": [],
                     "content": {"size": -1, "mimeType": "application/json", "text": resp.to_string()}, "redirectURL": "", "headersSize": -1, "bodySize": -1},
        "cache": {}, "timings": {"send": 0, "wait": 10, "receive": 0}}]}});
    std::fs::write(&path, har.to_string()).unwrap();
    let (code, v, out) = run(&["--format", "json", path.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    let mut rules: Vec<&str> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["rule"].as_str().unwrap())
        .collect();
    rules.sort();
    assert_eq!(
        rules,
        ["tool_call.leaked_as_text", "tool_choice.none_ignored"]
    );
}

/// The shipped Gemma 4 recording (sessions/c-gemma4-template-anyof.jsonl): the server's own
/// render prints the `anyOf` parameter `target` as `type:<|"|><|"|>` and the type list of `until`
/// as the Python repr `['STRING', 'NULL']` (read off the recorded /apply-template prompt), so
/// `check` on the session alone — no --template — reports both as schema.type_lost, as the
/// inspector does.
#[test]
fn shipped_gemma4_session_reports_the_lost_types_from_the_server_render() {
    let (code, v, out) = run(&["--format", "json", "sessions/c-gemma4-template-anyof.jsonl"]);
    assert_eq!(code, 1, "{out}");
    let mut lost: Vec<(String, String)> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["rule"] == "schema.type_lost")
        .map(|f| {
            (
                f["evidence"]["tool"].as_str().unwrap().to_owned(),
                f["evidence"]["pointer"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    lost.sort();
    assert_eq!(
        lost,
        [
            ("set_thermostat".to_owned(), "/properties/target".to_owned()),
            ("set_thermostat".to_owned(), "/properties/until".to_owned())
        ]
    );
}

/// `check --format json` and `check` (text) on every shipped session in one run: (JSON
/// report, its bytes, the text report).
fn check_shipped_sessions() -> (Value, String, String) {
    let files = shipped_sessions();
    let args: Vec<&str> = files.iter().map(String::as_str).collect();
    let (_, v, json) = run(&[&["--format", "json"][..], &args].concat());
    let (_, _, text) = run(&args);
    (v, json, text)
}

/// Every shipped session (sorted by name).
fn shipped_sessions() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir("sessions")
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .map(|p| p.display().to_string())
        .collect();
    v.sort();
    v
}

/// `check --format json` writes its report as it finds it (entry by entry, the findings held
/// in a temporary file until the exchanges are written); the bytes must still be exactly
/// serde_json's pretty form of the whole report, newline-terminated — on every shipped session
/// at once, and with no exchange listed (a bare `--tokens`: `"exchanges": []`).
#[test]
fn streamed_json_report_is_the_pretty_printed_report() {
    let (v, out, _) = check_shipped_sessions();
    assert!(v["exchanges"].as_array().unwrap().len() > 10, "{out}");
    assert!(v["findings"].as_array().unwrap().len() > 10, "{out}");
    assert_eq!(out, serde_json::to_string_pretty(&v).unwrap() + "\n");

    let (_, v, out) = run(&[
        "--format",
        "json",
        "--tokens",
        "tests/cases/09-duplicate-bos/tokenize.json",
    ]);
    assert_eq!(v["exchanges"], serde_json::json!([]), "{out}");
    assert!(!v["findings"].as_array().unwrap().is_empty(), "{out}");
    assert_eq!(out, serde_json::to_string_pretty(&v).unwrap() + "\n");
}

/// The streamed text report on every shipped session at once against its JSON twin: each
/// exchange's block (`#index api …`) holds exactly its own findings (`rule: message`), in
/// order; findings tied to no exchange come after the heading `(not tied to an exchange)`; the
/// last line counts exchanges and findings by severity.
#[test]
fn streamed_text_report_groups_the_json_findings_by_exchange() {
    let (v, _, text) = check_shipped_sessions();
    let exchanges = v["exchanges"].as_array().unwrap();
    let findings = v["findings"].as_array().unwrap();
    let mut at = 0;
    for (k, e) in exchanges.iter().enumerate() {
        let head = format!("#{} {} ", e["index"], e["api"].as_str().unwrap());
        let start = at + text[at..].find(&head).unwrap_or_else(|| panic!("{head}"));
        let end = if k + 1 < exchanges.len() {
            let next = &exchanges[k + 1];
            let h = format!("#{} {} ", next["index"], next["api"].as_str().unwrap());
            start + 1 + text[start + 1..].find(&h).unwrap()
        } else {
            text.len()
        };
        let block = &text[start..end];
        let mut from = 0;
        for f in findings
            .iter()
            .filter(|f| f["exchange"] == e["index"] && f["evidence"]["file"] == e["file"])
        {
            let line = format!(
                "{}: {}",
                f["rule"].as_str().unwrap(),
                f["message"].as_str().unwrap()
            );
            let line = toolscope::text::visible(&line).into_owned();
            let i = block[from..]
                .find(&line)
                .unwrap_or_else(|| panic!("{line:?} not in order in {block}"));
            from += i + line.len();
        }
        if !findings
            .iter()
            .any(|f| f["exchange"] == e["index"] && f["evidence"]["file"] == e["file"])
        {
            assert!(block.contains("ok: no findings"), "{block}");
        }
        at = start + 1;
    }
    let count = |sev: &str| findings.iter().filter(|f| f["severity"] == sev).count();
    let last = text.lines().last().unwrap();
    assert_eq!(
        last,
        format!(
            "{} exchange(s), {} error(s), {} warning(s), {} info",
            exchanges.len(),
            count("error"),
            count("warning"),
            count("info")
        )
    );
    let loose = findings.iter().any(|f| f["exchange"].is_null());
    assert_eq!(text.contains("(not tied to an exchange)"), loose, "{text}");
}

/// An annotation whose exchange is not in the file (a proxy stopped before writing it, a hand
/// edit) is reported as session damage naming its line, in text and JSON output, instead of
/// being dropped silently.
#[test]
fn annotation_for_a_missing_exchange_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("sessions/e-http500-peg-native.jsonl");
    let mut text = std::fs::read_to_string(&src).unwrap();
    let lines = text.lines().count();
    text.push_str(
        &json!({"type": "annotation", "kind": "raw_text", "exchange": 999, "text": "x", "source": "slots_debug"})
            .to_string(),
    );
    text.push('\n');
    std::fs::write(&path, text).unwrap();
    let (_, v, out) = run(&["--format", "json", path.to_str().unwrap()]);
    let dmg: Vec<_> = v["findings"]
        .as_array()
        .unwrap_or_else(|| panic!("{out}"))
        .iter()
        .filter(|f| f["rule"] == "session.damaged")
        .collect();
    assert_eq!(dmg.len(), 1, "{out}");
    let m = dmg[0]["message"].as_str().unwrap();
    assert!(m.contains(&format!("line {}", lines + 1)), "{m}");
    assert!(m.contains("exchange 999"), "{m}");
    // the library reader says the same
    let s = toolscope::session::read_session(&path).unwrap();
    assert!(
        s.warnings
            .iter()
            .any(|w| w.line == lines + 1 && w.message.contains("exchange 999")),
        "{:?}",
        s.warnings
    );
}

/// Issue #24: the fix each shipped session's finding carries, as the engine's source says it
/// must be (tools/server/server-context.cpp searches stop strings in the reasoning; build
/// 11434 reads no named tool_choice; the Gemma 4 template prints `type` lists as a Python repr,
/// which `first-type-with-note` avoids — loss 10 → 0, as `toolscope flatten --template` ranks it).
#[test]
fn shipped_findings_carry_their_fix() {
    let fix_of = |file: &str, rule: &str| -> Value {
        let (_, report, _) = run(&[
            "--format",
            "json",
            &support::root()
                .join("sessions")
                .join(file)
                .display()
                .to_string(),
        ]);
        report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["rule"] == rule)
            .unwrap_or_else(|| panic!("{file}: no {rule}: {report:#}"))["fix"]
            .clone()
    };
    let g = fix_of("g-stop-in-reasoning.jsonl", "stop.in_reasoning");
    assert_eq!(
        (&g["id"], &g["stop"], &g["apply"]),
        (
            &json!("stop_client_side"),
            &json!(["The"]),
            &json!("resend")
        ),
        "{g:#}"
    );
    let b = fix_of(
        "b-anthropic-named-tool-choice.jsonl",
        "tool_choice.named_ignored",
    );
    assert_eq!(
        (&b["id"], &b["tool"]),
        (&json!("force_named_tool"), &json!("get_time")),
        "{b:#}"
    );
    let c = fix_of("c-gemma4-template-anyof.jsonl", "schema.type_lost");
    assert_eq!(
        (
            &c["id"],
            &c["strategy"],
            &c["loss_as_sent"],
            &c["loss_flattened"]
        ),
        (
            &json!("flatten_schemas"),
            &json!("first-type-with-note"),
            &json!(10),
            &json!(0)
        ),
        "{c:#}"
    );
    // a finding without a fix has no `fix` key (reports otherwise unchanged)
    let (_, report, _) = run(&[
        "--format",
        "json",
        &support::root()
            .join("sessions/d-stop-string.jsonl")
            .display()
            .to_string(),
    ]);
    assert!(
        report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["rule"] == "stop.reason_mismatch" || f.get("fix").is_none()),
        "{report:#}"
    );
}

/// The named-tool fix prefills the call opener only where the request can take a final
/// assistant message: shipped b (a Qwen3, Hermes-format template) gets `<tool_call>\n`; the
/// same exchange whose request already ends with an assistant message (a prefill the engine
/// continues) gets none, and its text says why, so `try` runs what `check` offers.
#[test]
fn the_named_tool_fix_prefills_only_a_request_that_can_take_it() {
    let src = support::root().join("sessions/b-anthropic-named-tool-choice.jsonl");
    let fix = |path: &std::path::Path| -> Value {
        let (_, report, _) = run(&["--format", "json", &path.display().to_string()]);
        report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["rule"] == "tool_choice.named_ignored")
            .unwrap_or_else(|| panic!("no tool_choice.named_ignored: {report:#}"))["fix"]
            .clone()
    };
    let b = fix(&src);
    assert_eq!(b["prefill"], json!("<tool_call>\n"), "{b:#}");
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("b-prefilled.jsonl");
    let lines: Vec<String> = std::fs::read_to_string(&src)
        .unwrap()
        .lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            if v["type"] == "exchange" {
                let mut req: Value =
                    serde_json::from_str(v["request"]["body"]["text"].as_str().unwrap()).unwrap();
                req["messages"]
                    .as_array_mut()
                    .unwrap()
                    .push(json!({"role": "assistant", "content": "Sure, "}));
                v["request"]["body"]["text"] = json!(req.to_string());
            }
            v.to_string()
        })
        .collect();
    std::fs::write(&copy, lines.join("\n") + "\n").unwrap();
    let p = fix(&copy);
    assert_eq!(p["id"], json!("force_named_tool"), "{p:#}");
    assert!(p.get("prefill").is_none_or(Value::is_null), "{p:#}");
    assert!(
        p.to_string()
            .contains("already ends with an assistant message"),
        "{p:#}"
    );
}
