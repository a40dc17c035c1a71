//! A recorded Responses session through `export --format har` + `import`, `resend` and
//! `diff A --against B` (issue #22). The session (tests/data/responses/session-sdk.jsonl) is
//! real: the official openai SDK 3.51.0 (tests/support/responses_sdk.py, cases `plain` and
//! `stream`) through `toolscope proxy --headless` to llama-server b11434 (SmolLM2, the
//! Qwen3-0.6B corpus template, `LLAMA_SERVER_SLOTS_DEBUG=1`); session-sdk.sdk.json holds what
//! the SDK parsed from those replies, the independent expected values.

use crate::support;

use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::Value;

fn data(name: &str) -> std::path::PathBuf {
    support::root().join("tests/data/responses").join(name)
}

fn run(cmd: &mut Command) -> (i32, Vec<u8>) {
    let out = cmd.output().unwrap();
    let code = out.status.code().unwrap_or(-1);
    assert!(
        code == 0 || code == 1,
        "{cmd:?}: {code} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (code, out.stdout)
}

/// `toolscope check --format json SESSION`: its exchanges' `(api, tool_calls)`.
fn checked_calls(session: &Path) -> Vec<(String, Value)> {
    let (_, out) = run(Command::new(support::bin())
        .args(["check", "--format", "json"])
        .arg(session));
    let v: Value = serde_json::from_slice(&out).unwrap();
    v["exchanges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["api"].as_str().unwrap().to_owned(),
                e["tool_calls"].clone(),
            )
        })
        .collect()
}

/// The SDK's calls per case, as `check` writes them (name, parsed arguments).
fn sdk_calls() -> Vec<(String, Value)> {
    let sdk: Value =
        serde_json::from_str(&std::fs::read_to_string(data("session-sdk.sdk.json")).unwrap())
            .unwrap();
    sdk.as_array()
        .unwrap()
        .iter()
        .map(|case| {
            let calls: Vec<Value> = case["calls"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| {
                    let args: Value =
                        serde_json::from_str(c["arguments"].as_str().unwrap()).unwrap();
                    serde_json::json!({"name": c["name"], "arguments": args})
                })
                .collect();
            ("responses".to_owned(), Value::Array(calls))
        })
        .collect()
}

/// `(api, [{name, arguments}])` with only those keys of each call.
fn names_and_args(v: Vec<(String, Value)>) -> Vec<(String, Value)> {
    v.into_iter()
        .map(|(api, calls)| {
            let calls = calls
                .as_array()
                .unwrap()
                .iter()
                .map(|c| serde_json::json!({"name": c["name"], "arguments": c["arguments"]}))
                .collect();
            (api, Value::Array(calls))
        })
        .collect()
}

/// The session's exchange lines and annotation lines (sorted), without the header.
fn body_lines(path: &Path) -> (Vec<String>, Vec<String>) {
    let text = std::fs::read_to_string(path).unwrap();
    let (mut ex, mut ann) = (Vec::new(), Vec::new());
    for l in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(l).unwrap();
        match v["type"].as_str().unwrap() {
            "exchange" => ex.push(l.to_owned()),
            "annotation" => ann.push(l.to_owned()),
            _ => {}
        }
    }
    ann.sort();
    (ex, ann)
}

/// `check` reads the recorded Responses exchanges (plain and streamed) as the SDK did; the
/// HAR export and its import give back the same exchange and annotation lines, byte for
/// byte, and the same calls.
#[test]
fn har_round_trip_of_a_responses_session() {
    let session = data("session-sdk.jsonl");
    let want = sdk_calls();
    assert_eq!(names_and_args(checked_calls(&session)), want);
    let dir = tempfile::tempdir().unwrap();
    let har = dir.path().join("r.har");
    let back = dir.path().join("r.jsonl");
    run(Command::new(support::bin())
        .arg("export")
        .arg(&session)
        .args(["--format", "har", "-o"])
        .arg(&har));
    let h: Value = serde_json::from_slice(&std::fs::read(&har).unwrap()).unwrap();
    let entries = h["log"]["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 2);
    for e in entries {
        assert!(
            e["request"]["url"]
                .as_str()
                .unwrap()
                .ends_with("/v1/responses")
        );
    }
    run(Command::new(support::bin())
        .arg("import")
        .arg(&har)
        .arg("-o")
        .arg(&back)
        .arg("--force"));
    assert_eq!(body_lines(&back), body_lines(&session));
    assert_eq!(names_and_args(checked_calls(&back)), want);
}

/// Kills a child process started by this test (by its pid) when dropped.
struct Kill(Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `toolscope serve SESSION` on a free loopback port; requests it cannot match are recorded
/// into `unmatched` (never beside the shipped session).
fn serve(session: &Path, unmatched: &Path) -> (Kill, String) {
    let port = toolscope::record::llama::free_port().unwrap();
    let child = Command::new(support::bin())
        .arg("serve")
        .arg(session)
        .args(["--listen", &format!("127.0.0.1:{port}"), "--timing", "fast"])
        .arg("--session")
        .arg(unmatched)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start toolscope serve");
    let child = Kill(child);
    for _ in 0..200 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return (child, format!("http://127.0.0.1:{port}"));
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("toolscope serve did not listen");
}

/// `resend` of both Responses exchanges to `toolscope serve` of the same session: each is
/// re-sent as recorded (body bytes equal), labelled `resend:<id>`, answered and recorded
/// complete, and read to the SDK's calls; `diff A --against B` then pairs them by label and
/// finds the same status, calls and finish (serve records no server render: that differs, exit
/// 1); the session against itself is unchanged (exit 0). A copy of the session where the model said Berlin instead
/// of Lisbon (same length, so chunk offsets hold) is reported (exit 1) as changed calls on the
/// plain pair, `get_weather({"city":"Lisbon"})` → `get_weather({"city":"Berlin"})`, and on the
/// streamed one (whose deltas split the city) as a `.done` that differs from the deltas.
#[test]
fn resend_and_diff_of_a_responses_session() {
    let session = data("session-sdk.jsonl");
    let dir = tempfile::tempdir().unwrap();
    let (_serve, base) = serve(&session, &dir.path().join("unmatched.jsonl"));
    let out = dir.path().join("b.jsonl");
    let (code, _) = run(Command::new(support::bin())
        .arg("resend")
        .arg(&session)
        .args(["--url", &base, "--session"])
        .arg(&out));
    assert_eq!(code, 0, "every answer is a complete 2xx");
    let a = toolscope::session::read_session(&session).unwrap();
    let b = toolscope::session::read_session(&out).unwrap();
    assert!(b.warnings.is_empty(), "{:?}", b.warnings);
    assert_eq!(b.exchanges.len(), 2);
    for (x, y) in a.exchanges.iter().zip(&b.exchanges) {
        assert_eq!(
            y.label.as_deref(),
            Some(format!("resend:{}", x.id).as_str())
        );
        assert_eq!(y.request.path, "/v1/responses");
        assert_eq!(y.request.body.to_bytes(), x.request.body.to_bytes());
        assert_eq!(y.outcome, toolscope::session::Outcome::Complete);
        assert_eq!(y.is_stream(), x.is_stream());
    }
    assert_eq!(names_and_args(checked_calls(&out)), sdk_calls());

    let diff = |other: &Path| {
        run(Command::new(support::bin())
            .arg("diff")
            .arg(&session)
            .arg("--against")
            .arg(other)
            .args(["--format", "json"]))
    };
    // the same session against itself: nothing changed
    let (code, stdout) = diff(&session);
    assert_eq!(code, 0, "{}", String::from_utf8_lossy(&stdout));
    // against the resend: paired by label; the same calls, status and finish; serve is not
    // llama-server, so B has no server render and no slot text (and no token findings)
    let (code, stdout) = diff(&out);
    let v: Value = serde_json::from_slice(&stdout).unwrap();
    assert_eq!(code, 1, "{v:#}");
    let d = v.as_array().unwrap();
    let pairs: Vec<(u64, u64)> = d
        .iter()
        .map(|d| (d["a"].as_u64().unwrap(), d["b"].as_u64().unwrap()))
        .collect();
    assert_eq!(pairs, [(1, b.exchanges[0].id), (2, b.exchanges[1].id)]);
    for p in d {
        for k in ["status", "calls", "finish"] {
            assert!(p[k].is_null(), "{k}: {p:#}");
        }
        let render = p["render"].as_str().unwrap();
        assert!(render.contains("has no server render"), "{render}");
    }

    let berlin = dir.path().join("berlin.jsonl");
    let text = std::fs::read_to_string(&session).unwrap();
    std::fs::write(&berlin, text.replace("Lisbon", "Berlin")).unwrap();
    let (code, stdout) = diff(&berlin);
    let v: Value = serde_json::from_slice(&stdout).unwrap();
    assert_eq!(code, 1, "{v:#}");
    let d = v.as_array().unwrap();
    assert_eq!(d.len(), 2, "{v:#}");
    let want = serde_json::json!({
        "a": ["get_weather({\"city\":\"Lisbon\"})"],
        "b": ["get_weather({\"city\":\"Berlin\"})"],
    });
    assert_eq!(d[0]["calls"], want, "{v:#}");
    // the stream's argument deltas are `L`, `is`, `bon`: the edit reaches only the whole
    // arguments of output_item.done and response.completed, so the call (built from the
    // deltas) is unchanged and B reports the .done that differs from its deltas
    assert!(d[1]["calls"].is_null(), "{v:#}");
    let b_rules = d[1]["findings"]["b"].as_array().unwrap();
    assert!(
        b_rules.contains(&Value::from("tool_call.args_done_mismatch")),
        "{v:#}"
    );
}
