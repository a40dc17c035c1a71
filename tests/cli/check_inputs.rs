//! `toolscope check` input handling: several session files (exchange ids repeat, `file` tells
//! them apart), bare `/completion` streams, and error events in a stream.

use crate::support;

use std::path::Path;
use std::process::Command;

use serde_json::Value;

fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(support::bin())
        .arg("check")
        .args(args)
        .output()
        .expect("run toolscope");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn json(args: &[&str]) -> (i32, Value) {
    let mut a = vec!["--format", "json"];
    a.extend_from_slice(args);
    let (code, out, err) = run(&a);
    let v = serde_json::from_str(&out)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {out}\nstderr: {err}"));
    (code, v)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn two_session_files_keep_their_own_indices() {
    let dir = tempfile::tempdir().unwrap();
    let src = support::root().join("tests/data/session-smollm2.jsonl");
    let (a, b) = (dir.path().join("a.jsonl"), dir.path().join("b.jsonl"));
    std::fs::copy(&src, &a).unwrap();
    std::fs::copy(&src, &b).unwrap();

    let (_, one) = json(&[s(&a)]);
    let n_ex = one["exchanges"].as_array().unwrap().len();
    let n_f = one["findings"].as_array().unwrap().len();
    assert!(
        n_ex >= 2 && n_f >= 1,
        "the session must have findings: {one:#}"
    );

    let (_, both) = json(&[s(&a), s(&b)]);
    let ex = both["exchanges"].as_array().unwrap();
    assert_eq!(ex.len(), 2 * n_ex);
    // index stays per file; file names the file.
    for (i, e) in ex.iter().enumerate() {
        let (file, other) = if i < n_ex {
            (&a, &ex[i + n_ex])
        } else {
            (&b, &ex[i - n_ex])
        };
        assert_eq!(e["file"], s(file), "{e:#}");
        assert_eq!(e["index"], other["index"]);
    }
    let f = both["findings"].as_array().unwrap();
    assert_eq!(f.len(), 2 * n_f);
    for file in [&a, &b] {
        let mine: Vec<&Value> = f
            .iter()
            .filter(|f| f["evidence"]["file"] == s(file))
            .collect();
        assert_eq!(mine.len(), n_f, "{file:?}: {both:#}");
    }

    // Text output lists each finding once, under its own file's exchange (not also under the
    // other file's exchange with the same index).
    let (_, text_one, _) = run(&[s(&a)]);
    let (_, text_both, _) = run(&[s(&a), s(&b)]);
    let rule = one["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["exchange"] == 1)
        .expect("a finding about exchange 1")["rule"]
        .as_str()
        .unwrap();
    let count = |t: &str| t.matches(&format!(" {rule}: ")).count();
    assert_eq!(count(&text_both), 2 * count(&text_one), "{text_both}");
    // Findings about no exchange (the damaged line) stay per file too.
    let damaged = |t: &str| t.matches(" session.damaged: ").count();
    assert_eq!(damaged(&text_both), 2 * damaged(&text_one), "{text_both}");
}

/// A llama-server `/completion` stream as a bare `--response-sse` (API guessed from its events):
/// reassembled as a raw completion, as `stream::decode_exchange` does for a recorded one.
#[test]
fn completion_stream_as_bare_response() {
    let dir = tempfile::tempdir().unwrap();
    let sse = dir.path().join("completion.sse");
    std::fs::write(
        &sse,
        concat!(
            "data: {\"index\":0,\"content\":\"<tool_call>\\n{\\\"name\\\": \\\"get_time\\\"\",\"tokens\":[1],\"stop\":false,\"id_slot\":-1,\"tokens_predicted\":1}\n\n",
            "data: {\"index\":0,\"content\":\", \\\"arguments\\\": {}}\\n</tool_call>\",\"tokens\":[2],\"stop\":false,\"id_slot\":-1,\"tokens_predicted\":2}\n\n",
            "data: {\"index\":0,\"content\":\"\",\"tokens\":[],\"stop\":true,\"stop_type\":\"eos\",\"stopping_word\":\"\",\"tokens_predicted\":3}\n\n",
        ),
    )
    .unwrap();
    let (code, v) = json(&["--response-sse", s(&sse)]);
    let e = &v["exchanges"][0];
    assert_eq!(e["api"], "completion", "{v:#}");
    assert_eq!(
        e["content"],
        "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>"
    );
    assert_eq!(e["finish_reason"], "eos");
    assert_eq!(e["file"], s(&sse));
    // Raw text is the model's own: call markup there is not a leak, and nothing else is wrong.
    assert_eq!(v["findings"], serde_json::json!([]), "{v:#}");
    assert_eq!(code, 0);
    // --api completion says the same.
    let (_, v2) = json(&["--api", "completion", "--response-sse", s(&sse)]);
    assert_eq!(v2["exchanges"], v["exchanges"]);
}

#[test]
fn error_event_in_a_bare_stream() {
    let dir = tempfile::tempdir().unwrap();
    let sse = dir.path().join("err.sse");
    std::fs::write(
        &sse,
        concat!(
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hel\"}}]}\n\n",
            "data: {\"error\":{\"code\":500,\"message\":\"Context size has been exceeded.\",\"type\":\"exceed_context_size_error\"}}\n\n",
        ),
    )
    .unwrap();
    let (code, v) = json(&["--response-sse", s(&sse)]);
    let f: Vec<&Value> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["rule"] == "stream.error_event")
        .collect();
    assert_eq!(f.len(), 1, "{v:#}");
    assert_eq!(f[0]["severity"], "error");
    assert_eq!(f[0]["evidence"]["event"], 1);
    assert_eq!(code, 1);
}

/// `--tokens` with bare ids (llama-server's `/tokenize` answer without `with_pieces`): the
/// vocabulary names them (two BOS ids are a `bos.duplicate`); without a vocabulary the ids
/// cannot be judged, which is an error naming the file and the token, not a clean report.
#[test]
fn bare_token_ids_are_named_by_the_vocab_or_refused() {
    let dir = tempfile::tempdir().unwrap();
    let vocab = support::root().join("tests/data/diagnose/vocab/tokenizer.json");
    let dup = dir.path().join("dup.json");
    std::fs::write(&dup, r#"{"tokens":[29,29,31,7]}"#).unwrap();
    let one = dir.path().join("one.json");
    std::fs::write(&one, r#"{"tokens":[29,31,7]}"#).unwrap();

    let (code, v) = json(&["--tokens", s(&dup), "--vocab", s(&vocab)]);
    assert_eq!(code, 1, "{v:#}");
    let f = &v["findings"][0];
    assert_eq!(f["rule"], "bos.duplicate", "{v:#}");
    assert_eq!(f["evidence"]["token"], 1);
    assert_eq!(f["evidence"]["excerpt"], "<s>");

    let (code, v) = json(&["--tokens", s(&one), "--vocab", s(&vocab)]);
    assert_eq!(code, 0, "{v:#}");

    let (code, _, err) = run(&["--tokens", s(&dup)]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("dup.json: /tokens/0") && err.contains("with_pieces"),
        "{err}"
    );

    std::fs::write(&dup, r#"{"tokens":[29,4000000]}"#).unwrap();
    let (code, _, err) = run(&["--tokens", s(&dup), "--vocab", s(&vocab)]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("dup.json: /tokens/1: token id 4000000"),
        "{err}"
    );
}

/// A recorded `/completion` (or `/v1/completions`) exchange in a session is checked as the same
/// stream given with `--response-sse` is: listed with its content, its error event reported
/// (it used to be left out of the report altogether).
#[test]
fn completion_exchanges_in_a_session_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("comp.jsonl");
    let header = r#"{"type":"header","format":"toolscope-session/1","created":"2026-12-01T09:00:00Z","tool":"toolscope 0.1.0"}"#;
    let ex = |id: u64, path: &str, chunks: &[&str]| {
        serde_json::json!({
            "type": "exchange", "id": id, "started": "2026-12-01T09:00:01Z",
            "request": {"method": "POST", "path": path,
                        "headers": [["content-type", "application/json"]],
                        "body": {"text": "{\"prompt\":\"hi\",\"stream\":true}"}},
            "response": {"status": 200, "headers": [["content-type", "text/event-stream"]],
                         "chunks": chunks.iter().enumerate()
                             .map(|(i, c)| serde_json::json!({"t_us": 1000 * (i as u64 + 1), "text": c}))
                             .collect::<Vec<_>>()},
            "timings": {"ttfb_us": 1000, "total_us": 5000},
            "outcome": "complete"
        })
        .to_string()
    };
    let ok = ex(
        1,
        "/completion",
        &[
            "data: {\"index\":0,\"content\":\"Hello\",\"stop\":false}\n\n",
            "data: {\"index\":0,\"content\":\"\",\"stop\":true,\"stop_type\":\"eos\"}\n\n",
        ],
    );
    let err = ex(
        2,
        "/v1/completions",
        &[
            "data: {\"choices\":[{\"index\":0,\"text\":\"Hel\",\"finish_reason\":null}]}\n\n",
            "data: {\"error\":{\"code\":500,\"message\":\"Context size has been exceeded.\",\"type\":\"exceed_context_size_error\"}}\n\n",
        ],
    );
    std::fs::write(&path, format!("{header}\n{ok}\n{err}\n")).unwrap();

    let (code, v) = json(&[s(&path)]);
    let ex = v["exchanges"].as_array().unwrap();
    assert_eq!(ex.len(), 2, "{v:#}");
    assert_eq!(ex[0]["api"], "completion");
    assert_eq!(ex[0]["content"], "Hello");
    assert_eq!(ex[0]["finish_reason"], "eos");
    assert_eq!(ex[1]["index"], 2);
    let rules: Vec<(&str, &Value)> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["rule"].as_str().unwrap(), &f["exchange"]))
        .collect();
    assert_eq!(
        rules,
        vec![("stream.error_event", &serde_json::json!(2))],
        "{v:#}"
    );
    assert_eq!(code, 1);
}

/// A finding's message is one line: the leaked markup it quotes shows its newlines as `⏎`
/// (the text report indents evidence under the message; a raw newline broke it).
#[test]
fn leaked_call_message_is_one_line() {
    let case = support::root().join("tests/cases/10-call-leaked-with-choice-none");
    let (_, v) = json(&[
        "--request",
        s(&case.join("request.json")),
        "--response",
        s(&case.join("response.json")),
    ]);
    let leak = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == "tool_call.leaked_as_text")
        .expect("tool_call.leaked_as_text");
    let msg = leak["message"].as_str().unwrap();
    assert!(!msg.contains('\n'), "{msg}");
    assert!(msg.contains("(<tool_call>⏎{"), "{msg}");
}

/// `toolscope check … | head`: the reader goes away after a few bytes. The report (75 kB of
/// JSON over the shipped sessions, more than a 64 kB pipe holds) then ends like any Unix filter
/// (SIGPIPE), not with a panic and a backtrace on stderr.
#[cfg(unix)]
#[test]
fn a_closed_stdout_ends_check_quietly() {
    use std::io::Read;
    use std::process::Stdio;
    let mut files: Vec<String> = std::fs::read_dir("sessions")
        .unwrap()
        .map(|e| e.unwrap().path().display().to_string())
        .filter(|p| p.ends_with(".jsonl"))
        .collect();
    files.sort();
    let mut child = Command::new(support::bin())
        .args(["check", "--format", "json"])
        .args(&files)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run toolscope");
    let mut first = [0u8; 16];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap();
    // stdout is dropped (closed) here.
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert!(!out.status.success(), "{:?}", out.status);
}

/// Bare Responses pairs recorded from llama-server b11434 through the official openai SDK
/// (tests/data/responses/, scripts/capture-responses-sdk.py), checked with the API guessed and
/// named: a clean function call reports nothing; a reply that ignored `tool_choice: "required"`,
/// wrote a `<tool_response>` block with the call inside as text and was cut at
/// `max_output_tokens` 64 while reporting `completed` reports exactly that, plain (pointers
/// into `output`) and streamed (the terminal event, 68).
#[test]
fn responses_pairs_from_llama_server() {
    let d = support::root().join("tests/data/responses");
    let f = |n: &str| d.join(n).to_str().unwrap().to_owned();
    let rules = |v: &Value| -> Vec<String> {
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["rule"].as_str().unwrap().to_owned())
            .collect()
    };
    for resp in ["--response-sse", "--response"] {
        let file = if resp == "--response" {
            f("weather_call.json")
        } else {
            f("weather_call.sse")
        };
        let (code, v) = json(&["--request", &f("weather_call.request.json"), resp, &file]);
        assert_eq!((code, rules(&v)), (0, vec![]), "{v}");
        let ex = &v["exchanges"][0];
        assert_eq!(ex["api"], "responses");
        assert_eq!(ex["finish_reason"], "completed");
        assert_eq!(ex["tool_calls"][0]["name"], "get_weather");
        assert_eq!(
            ex["tool_calls"][0]["arguments"],
            serde_json::json!({"city": "Lisbon"})
        );
    }
    let want = [
        "tool_choice.required_ignored",
        "tool_call.leaked_as_text",
        "tool_call.hallucinated_result",
        "finish.mismatch",
    ];
    let (code, v) = json(&[
        "--api",
        "responses",
        "--request",
        &f("required_ignored.request.json"),
        "--response-sse",
        &f("required_ignored.sse"),
    ]);
    assert_eq!((code, rules(&v)), (1, want.map(str::to_owned).to_vec()));
    assert_eq!(v["findings"][3]["evidence"]["event"], 68);
    let (code, v) = json(&[
        "--request",
        &f("required_ignored.request.json"),
        "--response",
        &f("required_ignored.json"),
    ]);
    assert_eq!((code, rules(&v)), (1, want.map(str::to_owned).to_vec()));
    assert_eq!(v["findings"][3]["evidence"]["pointer"], "/status");
    assert_eq!(v["findings"][1]["evidence"]["pointer"], "/output/0/content");
}

/// `--api ollama` on a bare `/api/chat` pair: one JSON object, or the NDJSON stream given with
/// `--response-sse` (Ollama docs/api.md "Chat request (Streaming with tools)" shape), and the
/// API guessed from either.
#[test]
fn ollama_bare_pairs() {
    let dir = tempfile::tempdir().unwrap();
    let req = dir.path().join("req.json");
    std::fs::write(
        &req,
        r#"{"model":"qwen3","messages":[{"role":"user","content":"Weather in Paris?"}],
            "tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]}"#,
    )
    .unwrap();
    let one = dir.path().join("resp.json");
    std::fs::write(
        &one,
        r#"{"model":"qwen3","created_at":"2026-12-02T00:00:00Z","message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"get_weather","arguments":{"city":"Paris"}}}]},"done":true,"done_reason":"stop"}"#,
    )
    .unwrap();
    let nd = dir.path().join("resp.ndjson");
    std::fs::write(
        &nd,
        concat!(
            r#"{"model":"qwen3","created_at":"2026-12-02T00:00:00Z","message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"get_weather","arguments":{"city":"Paris"}}}]},"done":false}"#,
            "\n",
            r#"{"model":"qwen3","created_at":"2026-12-02T00:00:01Z","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop"}"#,
            "\n"
        ),
    )
    .unwrap();
    for (flag, file) in [("--response", &one), ("--response-sse", &nd)] {
        for named in [true, false] {
            let mut args = vec!["--request", s(&req), flag, s(file)];
            if named {
                args.splice(0..0, ["--api", "ollama"]);
            }
            let (code, v) = json(&args);
            assert_eq!(code, 0, "{flag} {named}: {v}");
            let ex = &v["exchanges"][0];
            assert_eq!(ex["api"], "ollama", "{flag} {named}");
            assert_eq!(ex["tool_calls"][0]["name"], "get_weather");
            assert_eq!(
                ex["tool_calls"][0]["arguments"],
                serde_json::json!({"city": "Paris"})
            );
        }
    }
}

/// A real llama-server Responses stream (weather_call.sse) cut inside an event: each stream
/// contract fault is reported once — the Responses reassembler and the SSE contract check
/// both judged it, so `stream.cut_event` and `stream.no_terminal` came out twice each.
#[test]
fn responses_stream_contract_faults_reported_once() {
    let src = support::root().join("tests/data/responses");
    let body = std::fs::read_to_string(src.join("weather_call.sse")).unwrap();
    let at = body
        .find("\"type\":\"response.completed\"")
        .expect("terminal event");
    let dir = tempfile::tempdir().unwrap();
    let cut = dir.path().join("cut.sse");
    std::fs::write(&cut, &body[..at + 10]).unwrap();
    let req = src.join("weather_call.request.json");
    let (code, v) = json(&[
        "--api",
        "responses",
        "--request",
        s(&req),
        "--response-sse",
        s(&cut),
    ]);
    let rules: Vec<&str> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["rule"].as_str().unwrap())
        .collect();
    assert_eq!(code, 1);
    assert_eq!(
        rules
            .iter()
            .filter(|r| r.starts_with("stream."))
            .copied()
            .collect::<Vec<_>>(),
        ["stream.cut_event", "stream.no_terminal"],
        "{v}"
    );
}

/// A stream given as `--response` (an SSE body, or Ollama NDJSON) is refused with the flag that
/// reads it, not as invalid JSON at 1:1; the same file through `--response-sse` is checked.
#[test]
fn a_stream_given_as_response_names_response_sse() {
    let case = support::cases_dir().join("07-delta-missing-index");
    let req = case.join("request.json");
    let sse = case.join("response.sse");
    let (code, _, err) = run(&["--request", s(&req), "--response", s(&sse)]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("response.sse: a text/event-stream (SSE) body"),
        "{err}"
    );
    assert!(err.contains("--response-sse"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let nd = dir.path().join("chat.ndjson");
    std::fs::write(
        &nd,
        "{\"model\":\"m\",\"message\":{\"role\":\"assistant\",\"content\":\"Hi\"},\"done\":false}\n{\"model\":\"m\",\"message\":{\"role\":\"assistant\",\"content\":\"\"},\"done\":true}\n",
    )
    .unwrap();
    let (code, _, err) = run(&["--request", s(&req), "--response", s(&nd)]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("NDJSON stream; pass it with --response-sse"),
        "{err}"
    );
    let (code, _, err) = run(&["--request", s(&req), "--response-sse", s(&sse)]);
    assert_eq!(code, 1, "{err}");
}
