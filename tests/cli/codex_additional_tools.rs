//! A real Codex CLI request as a fixture: `codex exec --skip-git-repo-check "List the files."`
//! (npm `@openai/codex@0.169.0`, a `model_providers.toolscope` with `wire_api = "responses"`
//! pointing at `toolscope proxy`, no `-c model=…`, so Codex used its default model
//! `gpt-6.1-sol`) against llama-server b11434 serving SmolLM2-135M, recorded 2026-12-07
//! (tests/data/codex/additional-tools.jsonl). Under that model Codex sends no top-level
//! `tools`: its tools travel in an `additional_tools` input item, and the server refused the
//! request at once with HTTP 400 `Cannot determine type of 'item'`
//! (tools/server/server-chat.cpp:257).
//!
//! Expected values come from the recording itself (the server's own error body, the request's
//! items), not from toolscope's conversion.

use crate::support;

use std::process::Command;

use serde_json::Value;

const FIXTURE: &str = "tests/data/codex/additional-tools.jsonl";

/// The recorded exchange's request body and response body.
fn recorded() -> (Value, Value) {
    let text = std::fs::read_to_string(support::root().join(FIXTURE)).unwrap();
    let ex: Value = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|l| l["type"] == "exchange")
        .unwrap();
    let body =
        |v: &Value| -> Value { serde_json::from_str(v["body"]["text"].as_str().unwrap()).unwrap() };
    (body(&ex["request"]), body(&ex["response"]))
}

#[test]
fn a_codex_request_the_server_refused_gets_a_finding_naming_the_item() {
    let (request, response) = recorded();
    // the recording: no top-level tools, the tools in input[0], refused by the server
    assert!(request.get("tools").is_none());
    assert_eq!(request["input"][0]["type"], "additional_tools");
    let said = response["error"]["message"].as_str().unwrap();
    assert_eq!(said, "Cannot determine type of 'item'");
    let out = Command::new(support::bin())
        .args(["check", "--format", "json", FIXTURE])
        .current_dir(support::root())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let findings: Vec<&Value> = report["findings"].as_array().unwrap().iter().collect();
    let refused: Vec<&&Value> = findings
        .iter()
        .filter(|f| f["rule"] == "input.request_refused")
        .collect();
    assert_eq!(refused.len(), 1, "{findings:#?}");
    let f = refused[0];
    assert_eq!(f["evidence"]["pointer"], "/input/0", "{f:#}");
    let msg = f["message"].as_str().unwrap();
    assert!(msg.contains(said), "{msg}");
    assert!(msg.contains("`additional_tools`"), "{msg}");
    assert!(
        msg.contains("the recorded response is exactly that refusal"),
        "{msg}"
    );
    assert!(f["hint"].as_str().unwrap().contains("-c model="), "{f:#}");
}

#[test]
fn the_tools_pane_lists_the_additional_tools_as_refused() {
    let (request, _) = recorded();
    let listed = request["input"][0]["tools"].as_array().unwrap();
    let entries = toolscope::analysis::tools::responses_entries(Some(&request));
    assert_eq!(entries.len(), listed.len());
    for (e, t) in entries.iter().zip(listed) {
        assert_eq!(e.name, t["name"].as_str().unwrap());
        assert!(e.pointer.starts_with("/input/0/tools/"), "{}", e.pointer);
        let why = e.dropped.as_deref().unwrap_or("");
        assert!(
            why.contains("additional_tools") && why.contains("HTTP 400"),
            "{why}"
        );
    }
}
