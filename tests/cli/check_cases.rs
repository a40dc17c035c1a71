//! The field cases (tests/cases/) through `toolscope check --format json`: each gives the
//! findings its case.json lists and none it excludes.

use crate::support;

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

fn case_path(case: &str, file: &str) -> PathBuf {
    support::cases_dir().join(case).join(file)
}

/// Runs `toolscope check --format json ARGS`; returns (exit code, parsed stdout).
fn check(args: &[&str]) -> (i32, Value) {
    let out = Command::new(support::bin())
        .arg("check")
        .arg("--format")
        .arg("json")
        .args(args)
        .output()
        .expect("run toolscope");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), v)
}

fn rules(v: &Value) -> Vec<String> {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["rule"].as_str().unwrap().to_owned())
        .collect()
}

/// Asserts `expect.findings` ⊆ reported and `expect.not_findings` ∩ reported = ∅.
fn assert_expectations(case: &str, v: &Value) {
    let expect = &support::case_json(case, "case.json")["expect"];
    let got = rules(v);
    for r in expect["findings"].as_array().into_iter().flatten() {
        let r = r.as_str().unwrap();
        assert!(
            got.iter().any(|g| g == r),
            "{case}: expected {r}, got {got:?}"
        );
    }
    for r in expect["not_findings"].as_array().into_iter().flatten() {
        let r = r.as_str().unwrap();
        assert!(
            !got.iter().any(|g| g == r),
            "{case}: must not report {r}, got {got:?}"
        );
    }
}

fn pair(case: &str, response_flag: &str, response_file: &str) -> (i32, Value) {
    let req = case_path(case, "request.json");
    let resp = case_path(case, response_file);
    check(&[
        "--request",
        req.to_str().unwrap(),
        response_flag,
        resp.to_str().unwrap(),
    ])
}

#[test]
fn case05_stop_in_reasoning() {
    let case = "05-stop-in-reasoning";
    let (code, v) = pair(case, "--response", "response.json");
    assert_expectations(case, &v);
    assert_eq!(code, 1);
    let ex = &v["exchanges"][0];
    assert_eq!(
        ex["api"], "anthropic",
        "the pair is guessed as Anthropic from stop_sequences/thinking"
    );
    assert_eq!(ex["content"], "");
    assert_eq!(ex["reasoning"], "Okay, so the question is whether 7 is a ");
    assert_eq!(ex["finish_reason"], "end_turn");
    let f = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == "stop.in_reasoning")
        .unwrap();
    assert_eq!(f["exchange"], 1);
    assert_eq!(f["evidence"]["pointer"], "/content/0/thinking");
    assert!(f["hint"].as_str().is_some_and(|h| !h.is_empty()));
    // exactly these two findings: nothing about tools in a tool-less exchange
    assert_eq!(rules(&v).len(), 2, "{:?}", rules(&v));
}

#[test]
fn case06_named_tool_choice_ignored() {
    let case = "06-named-tool-choice-ignored";
    let (code, v) = pair(case, "--response", "response.json");
    assert_expectations(case, &v);
    assert_eq!(code, 1);
    assert_eq!(rules(&v), ["tool_choice.named_ignored"]);
    let ex = &v["exchanges"][0];
    assert_eq!(ex["api"], "openai");
    assert_eq!(ex["model"], "local");
    assert_eq!(ex["tool_calls"][0]["name"], "get_weather");
    assert_eq!(
        ex["tool_calls"][0]["arguments"],
        serde_json::json!({"city": "Lisbon"})
    );
    assert_eq!(ex["finish_reason"], "tool_calls");
}

#[test]
fn case07_delta_missing_index() {
    let case = "07-delta-missing-index";
    let (code, v) = pair(case, "--response-sse", "response.sse");
    let ex = &v["exchanges"][0];
    assert_eq!(ex["tool_calls"][0]["name"], "read_file");
    assert_eq!(
        ex["tool_calls"][0]["arguments"],
        serde_json::json!({"path": "notes.md"})
    );
    assert_expectations(case, &v);
    assert_eq!(code, 1);
    // each contract fault names its event: the delta without index is event 2, and no delta
    // carries an id (first call delta: event 1)
    let ev = |rule: &str| {
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["rule"] == rule)
            .unwrap()["evidence"]["event"]
            .clone()
    };
    assert_eq!(ev("stream.missing_index"), 2);
    assert!(ev("stream.missing_id").is_u64());
    assert!(
        !rules(&v)
            .iter()
            .any(|r| r == "tool_call.args_invalid_json" || r == "finish.mismatch"),
        "{:?}",
        rules(&v)
    );
}

#[test]
fn case09_duplicate_bos() {
    let case = "09-duplicate-bos";
    let toks = case_path(case, "tokenize.json");
    let (code, v) = check(&["--tokens", toks.to_str().unwrap()]);
    assert_expectations(case, &v);
    assert_eq!(code, 1);
    let f = &v["findings"][0];
    assert_eq!(f["rule"], "bos.duplicate");
    assert!(
        f["message"].as_str().unwrap().contains("positions 0, 1"),
        "{f}"
    );
    assert_eq!(f["evidence"]["token"], 1);
    assert!(f["exchange"].is_null());
    assert_eq!(v["exchanges"], serde_json::json!([]));
}

#[test]
fn case10_call_leaked_with_choice_none() {
    let case = "10-call-leaked-with-choice-none";
    let (code, v) = pair(case, "--response", "response.json");
    assert_expectations(case, &v);
    assert_eq!(code, 1);
    let mut got = rules(&v);
    got.sort();
    assert_eq!(
        got,
        ["tool_call.leaked_as_text", "tool_choice.none_ignored"]
    );
    let leak = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == "tool_call.leaked_as_text")
        .unwrap();
    assert_eq!(leak["evidence"]["pointer"], "/choices/0/message/content");
    assert_eq!(leak["evidence"]["offset"], 0);
    assert_eq!(v["exchanges"][0]["tool_calls"], serde_json::json!([]));
}

/// Case 11: the model wrote the end of a tool result itself (`18C cloudy\n</tool_response>`).
/// With the case's template (the Qwen3 corpus template, whose protocol has `</tool_response>`)
/// and without one (the closer is a tool-result marker by name): `tool_call.hallucinated_result`
/// naming the marker at byte 11 of the content, and no leaked call.
#[test]
fn case11_tool_result_echo() {
    let case = "11-tool-result-echo";
    let check_with = |extra: &[&str]| {
        let req = case_path(case, "request.json");
        let resp = case_path(case, "response.json");
        let mut args = extra.to_vec();
        args.extend([
            "--request",
            req.to_str().unwrap(),
            "--response",
            resp.to_str().unwrap(),
        ]);
        check(&args)
    };
    let judge = |code: i32, v: &Value| {
        assert_expectations(case, v);
        assert_eq!(code, 1);
        let f = v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["rule"] == "tool_call.hallucinated_result")
            .unwrap();
        assert_eq!(f["evidence"]["offset"], 11, "{f}");
        assert_eq!(f["evidence"]["pointer"], "/choices/0/message/content");
        assert!(
            f["message"].as_str().unwrap().contains("</tool_response>"),
            "{f}"
        );
    };
    let (code, v) = check_with(&[]);
    judge(code, &v);
    let Some(corpus) = support::corpus() else {
        return;
    };
    let c = support::case_json(case, "case.json");
    let tpl = corpus.join(
        c["inputs"]["template"]
            .as_str()
            .unwrap()
            .trim_start_matches("corpus:"),
    );
    let (code, v) = check_with(&["--template", tpl.to_str().unwrap()]);
    judge(code, &v);
}

#[test]
fn clean_pair_exits_zero() {
    let dir = tempfile::tempdir().unwrap();
    let req = dir.path().join("req.json");
    let resp = dir.path().join("resp.json");
    std::fs::write(
        &req,
        std::fs::read(case_path("06-named-tool-choice-ignored", "request.json")).unwrap(),
    )
    .unwrap();
    // the same reply, but calling the forced tool: nothing to report
    let body = String::from_utf8(
        std::fs::read(case_path("06-named-tool-choice-ignored", "response.json")).unwrap(),
    )
    .unwrap()
    .replace("get_weather", "get_time");
    std::fs::write(&resp, body).unwrap();
    let (code, v) = check(&[
        "--request",
        req.to_str().unwrap(),
        "--response",
        resp.to_str().unwrap(),
    ]);
    assert_eq!(rules(&v), Vec::<String>::new());
    assert_eq!(code, 0);
}

#[test]
fn unusable_input_exits_two_naming_file_and_position() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{\"model\": \"x\",\n \"messages\": [}").unwrap();
    let out = Command::new(support::bin())
        .args([
            "check",
            "--request",
            bad.to_str().unwrap(),
            "--response",
            bad.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.json:2:") && err.contains("invalid JSON"),
        "{err}"
    );
}

/// Cases 01 and 02: `check --template corpus:… --request R` (pre-flight, no response) reports
/// the schema loss through the schema module.
fn preflight_case(case: &str) -> Value {
    let Some(corpus) = support::corpus() else {
        return Value::Null;
    };
    let c = support::case_json(case, "case.json");
    let tpl = corpus.join(
        c["inputs"]["template"]
            .as_str()
            .unwrap()
            .trim_start_matches("corpus:"),
    );
    let dir = tempfile::tempdir().unwrap();
    let req = dir.path().join("request.json");
    std::fs::write(&req, c["inputs"]["request"].to_string()).unwrap();
    let (code, v) = check(&[
        "--template",
        tpl.to_str().unwrap(),
        "--request",
        req.to_str().unwrap(),
    ]);
    assert_expectations(case, &v);
    assert_eq!(code, 1);
    assert_eq!(v["exchanges"], serde_json::json!([]));
    v
}

#[test]
fn case01_gemma4_anyof_type_lost_preflight() {
    let v = preflight_case("01-gemma4-anyof-type-lost");
    if v.is_null() {
        return;
    }
    let pointers: Vec<String> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["rule"] == "schema.type_lost")
        .filter_map(|f| f["evidence"]["pointer"].as_str().map(str::to_owned))
        .collect();
    assert!(
        pointers.iter().any(|p| p.ends_with("/properties/quantity")),
        "{pointers:?}"
    );
    assert!(
        pointers.iter().any(|p| p.ends_with("/properties/label")),
        "{pointers:?}"
    );
    assert!(
        !pointers.iter().any(|p| p.ends_with("/properties/shelf")),
        "{pointers:?}"
    );
}

#[test]
fn case02_gemma4_type_list_preflight() {
    preflight_case("02-gemma4-type-list");
}

/// Case 08's raw text as the content of a reply: the call is leaked as text, and check names
/// what the parser recovers from it (the stray brace repaired).
#[test]
fn case08_raw_text_in_content_is_a_leaked_call() {
    let c = support::case_json("08-extra-brace-after-call", "case.json");
    let dir = tempfile::tempdir().unwrap();
    let req = dir.path().join("req.json");
    let resp = dir.path().join("resp.json");
    std::fs::write(
        &req,
        serde_json::json!({"model": "m", "messages": [], "tools": c["inputs"]["tools"]})
            .to_string(),
    )
    .unwrap();
    let body = serde_json::json!({"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": c["inputs"]["raw"]}}]});
    std::fs::write(&resp, body.to_string()).unwrap();
    let (code, v) = check(&[
        "--request",
        req.to_str().unwrap(),
        "--response",
        resp.to_str().unwrap(),
    ]);
    assert_eq!(code, 1);
    assert_eq!(rules(&v), ["tool_call.leaked_as_text"]);
    let f = &v["findings"][0];
    assert_eq!(f["evidence"]["tool"], "write_file");
    assert_eq!(f["evidence"]["offset"], "I'll create it now.\n".len());
    let want = &c["expect"]["tool_calls"][0]["arguments"];
    assert!(
        f["message"].as_str().unwrap().contains(&want.to_string()),
        "{f}"
    );
}

/// An empty or undecodable stream body is unusable input (exit 2 naming the file), not a
/// reply that ignored the request (found by review: it used to report named_ignored, exit 1).
#[test]
fn empty_or_undecodable_stream_is_unusable_input() {
    let dir = tempfile::tempdir().unwrap();
    let req = support::cases_dir().join("06-named-tool-choice-ignored/request.json");
    for (name, body) in [
        ("empty.sse", ""),
        ("garbage.sse", "garbage\n\nevent: x\ndata: not json\n\n"),
    ] {
        let p = dir.path().join(name);
        std::fs::write(&p, body).unwrap();
        let out = std::process::Command::new(support::bin())
            .args(["check", "--request"])
            .arg(&req)
            .arg("--response-sse")
            .arg(&p)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {err}");
        assert!(
            err.contains(name) && err.contains("no SSE event with a JSON"),
            "{err}"
        );
    }
}

/// Case 12, a real recording of llama-server b11434 (SmolLM2, Qwen3 template, temperature 0):
/// `max_output_tokens` 12 cut the model's `<tool_call>`, and the Responses stream still ends
/// `response.completed` with `status: "completed"` and an empty `output`. The API is guessed
/// from the `response.*` events; `finish.mismatch` names the terminal event (event 2) and the
/// 12 tokens that reached the client nowhere. Nothing else is reported: llama-server sends no
/// `sequence_number`, so the stream is not judged on it.
#[test]
fn case12_responses_cut_reported_complete() {
    let case = "12-responses-cut-reported-complete";
    let (code, v) = pair(case, "--response-sse", "response.sse");
    assert_expectations(case, &v);
    assert_eq!(code, 1);
    assert_eq!(rules(&v), ["finish.mismatch"]);
    let ex = &v["exchanges"][0];
    assert_eq!(ex["api"], "responses");
    assert_eq!(ex["model"], "smollm2");
    assert_eq!(ex["finish_reason"], "completed");
    assert_eq!(ex["tool_calls"], serde_json::json!([]));
    let f = &v["findings"][0];
    assert_eq!(f["evidence"]["event"], 2);
    assert_eq!(f["evidence"]["excerpt"], "completed");
    let msg = f["message"].as_str().unwrap();
    assert!(
        msg.contains("usage.output_tokens 12 reached max_output_tokens 12")
            && msg.contains("the 12 generated token(s) reached the client nowhere"),
        "{msg}"
    );
    // the same pair with the API named
    let req = case_path(case, "request.json");
    let sse = case_path(case, "response.sse");
    let (code2, v2) = check(&[
        "--api",
        "responses",
        "--request",
        req.to_str().unwrap(),
        "--response-sse",
        sse.to_str().unwrap(),
    ]);
    assert_eq!((code2, rules(&v2)), (1, vec!["finish.mismatch".to_owned()]));
}
