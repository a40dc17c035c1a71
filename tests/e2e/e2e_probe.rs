//! End to end: `toolscope probe` against a real llama-server (build 11434) serving SmolLM2-135M
//! with the Qwen3-0.6B corpus template (Hermes-style `<tool_call>`, a `<think>` reasoning
//! block the server's reasoning parser understands).
//!
//! What this build is known to do (tools/server/server-chat.cpp, server-context.cpp):
//! `/v1/messages` `{"type":"tool","name":N}` becomes `"required"` with the name dropped, and
//! `{"type":"none"}` is not mapped at all; stop strings are searched in the reasoning too.
//! So whenever the model calls a tool, the Anthropic named-tool control must be IGNORED, and
//! when the model calls a tool under `auto`, the Anthropic none control must be IGNORED.

use crate::support;

use std::process::Command;

use serde_json::Value;

fn verdict<'a>(results: &'a [Value], api: &str, control: &str) -> &'a Value {
    results
        .iter()
        .find(|r| r["api"] == api && r["control"] == control)
        .unwrap_or_else(|| panic!("no {api} {control} line"))
}

#[test]
#[ignore = "e2e: needs llama-server"]
fn probe_reports_llama_server_control_faults() {
    let Some((model, corpus)) = support::smollm2_and_corpus() else {
        return;
    };
    let server = support::start_llama(
        &model,
        Some(corpus.join("Qwen-Qwen3-0.6B.jinja")),
        true,
        4096,
    );
    let url = server.base_url();
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join("probe.jsonl");

    // The human-readable report (printed for the closing note), then the JSON one is judged
    // from the same session re-read by `check`.
    let out = Command::new(support::bin())
        .args([
            "probe",
            &url,
            "--api",
            "both",
            "--format",
            "json",
            "--timeout",
            "900",
            "--session",
            session.to_str().unwrap(),
        ])
        .output()
        .expect("run toolscope probe");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr)));
    let results = v["results"].as_array().unwrap().clone();
    println!(
        "probe {url} (build {})",
        v["build_info"].as_str().unwrap_or("?")
    );
    for r in &results {
        println!(
            "{:<9} {:<17} {:<20} {}",
            r["api"].as_str().unwrap(),
            r["control"].as_str().unwrap(),
            r["verdict"].as_str().unwrap(),
            r["evidence"].as_str().unwrap()
        );
    }
    assert_eq!(results.len(), 12, "6 controls × 2 APIs");
    let any_fault = results
        .iter()
        .any(|r| r["verdict"] == "IGNORED" || r["verdict"] == "MATCHED_IN_REASONING");
    let all_inconclusive = results
        .iter()
        .filter(|r| r["verdict"] != "INFO")
        .all(|r| r["verdict"] == "INCONCLUSIVE");
    let want_code = if any_fault {
        1
    } else if all_inconclusive {
        2
    } else {
        0
    };
    assert_eq!(out.status.code(), Some(want_code));

    // The faults this build really has.
    let named = verdict(&results, "anthropic", "named_tool");
    if named["verdict"] != "INCONCLUSIVE" {
        assert_eq!(
            named["verdict"], "IGNORED",
            "/v1/messages named tool_choice becomes required: {named}"
        );
    }
    let baseline = verdict(&results, "anthropic", "baseline");
    let none = verdict(&results, "anthropic", "none");
    if baseline["evidence"].as_str().unwrap().contains("called ") {
        assert_eq!(
            none["verdict"], "IGNORED",
            "/v1/messages tool_choice none is unmapped: {none}"
        );
    }
    for api in ["openai", "anthropic"] {
        let r = verdict(&results, api, "stop_in_reasoning");
        assert_ne!(
            r["verdict"], "HONORED",
            "this build searches stop strings in the reasoning: {r}"
        );
    }

    // Every exchange was recorded with its label, and the session checks.
    let s = toolscope::session::read_session(&session).unwrap();
    assert_eq!(s.exchanges.len(), 12);
    assert!(s.warnings.is_empty());
    assert!(
        s.exchanges
            .iter()
            .all(|e| e.label.as_deref().is_some_and(|l| l.starts_with("probe:")))
    );
    assert_eq!(s.exchanges[1].label.as_deref(), Some("probe:named_tool"));
    // The server's own render of every chat exchange was fetched after it, as the proxy does:
    // the Qwen3 template's system prompt with the tools as the server printed them.
    for e in &s.exchanges {
        let (prompt, tokens) = s
            .server_render(e.id)
            .unwrap_or_else(|| panic!("no server render of #{}", e.id));
        let prompt = prompt.unwrap_or_else(|| panic!("no prompt for #{}", e.id));
        let with_tools = e
            .request
            .body
            .json()
            .is_ok_and(|b| b.get("tools").is_some());
        assert_eq!(
            prompt.contains("<tools>") && prompt.contains("get_time"),
            with_tools,
            "#{}",
            e.id
        );
        assert!(tokens.is_some_and(|t| !t.is_empty()), "#{}", e.id);
    }
    let check = Command::new(support::bin())
        .args(["check", "--format", "json", session.to_str().unwrap()])
        .output()
        .unwrap();
    let cv: Value = serde_json::from_slice(&check.stdout).unwrap();
    assert_eq!(cv["exchanges"].as_array().unwrap().len(), 12);
    if any_fault {
        assert_eq!(check.status.code(), Some(1));
    }
    drop(server);
}
