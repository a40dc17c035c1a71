//! A real Claude Code request as a fixture (issue #25): `claude -p "List the files in this
//! directory."` (npm `@anthropic-ai/claude-code@2.1.328`, `ANTHROPIC_BASE_URL` at
//! `toolscope proxy`) against llama-server b11434 serving Gemma 3 270M (`--jinja -c 32768 -np 1`,
//! `LLAMA_SERVER_SLOTS_DEBUG=1`), recorded 2026-12-07. One `/v1/messages?beta=true` request:
//! 12 tools, 3 system blocks, `thinking: adaptive`, and `messages` = a user turn of two text
//! blocks (a `<system-reminder>` block and the prompt) plus a `system` turn. The GGUF carries no
//! tool-calling template: the server rendered it with the ChatML template its `/props` reports,
//! which prints no tools. The client was stopped after 300 s, so the response is partial.
//!
//! What the agent's traffic must give: one finding per tool the render dropped (not one per
//! parameter, though Claude Code's prose names most tools), no marker finding for tags that
//! arrive inside the agent's own text, no message reported dropped that the server printed.

use crate::support;

use std::collections::BTreeSet;
use std::process::Command;

use serde_json::Value;

const FIXTURE: &str = "tests/data/claude-code/claude-code-2.1.328-gemma3.jsonl";

/// The fixture's lines: (request body of exchange 2, server render prompt, props chat template).
fn fixture() -> (Value, String, String) {
    let text = std::fs::read_to_string(support::root().join(FIXTURE)).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ex = lines
        .iter()
        .find(|l| l["type"] == "exchange" && l["id"] == 2)
        .unwrap();
    let body: Value =
        serde_json::from_str(ex["request"]["body"]["text"].as_str().unwrap()).unwrap();
    let render = lines.iter().find(|l| l["kind"] == "server_render").unwrap();
    let props = lines.iter().find(|l| l["kind"] == "engine").unwrap();
    (
        body,
        render["prompt"].as_str().unwrap().to_owned(),
        props["props"]["chat_template"].as_str().unwrap().to_owned(),
    )
}

fn check_json() -> Value {
    let out = Command::new(support::bin())
        .current_dir(support::root())
        .args(["check", "--format", "json", FIXTURE])
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "check --format json: {e}: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn findings<'a>(report: &'a Value, rule: &str) -> Vec<&'a Value> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["rule"] == rule)
        .collect()
}

#[test]
fn the_fixture_is_what_claude_code_sent_and_what_the_server_rendered() {
    let (body, prompt, template) = fixture();
    let tools: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools.len(), 12, "{tools:?}");
    assert_eq!(body["system"].as_array().unwrap().len(), 3);
    let roles: Vec<&str> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "system"]);
    assert_eq!(body["thinking"]["type"], "adaptive");
    // The server's template is ChatML and prints no tools: no schema in the render at all,
    // while Claude Code's own prose names most of its tools.
    assert!(
        template.starts_with("{%- for message in messages -%}"),
        "{template}"
    );
    assert!(!template.contains("tools"), "{template}");
    assert!(!prompt.contains("\"properties\"") && !prompt.contains("input_schema"));
    assert!(prompt.contains("Bash") && prompt.contains("Read") && prompt.contains("Agent"));
    let turns: Vec<&str> = prompt
        .match_indices("<|im_start|>")
        .map(|(i, _)| prompt[i + 12..].split('\n').next().unwrap())
        .collect();
    assert_eq!(turns, ["system", "user", "system", "assistant"]);
    // Both user text blocks and the in-messages system turn are printed; the agent's own text
    // carries tags that are not the template's (the `<system-reminder>` block).
    for block in body["messages"][0]["content"].as_array().unwrap() {
        assert!(prompt.contains(block["text"].as_str().unwrap().trim()));
    }
    let system_turn = body["messages"][1]["content"][0]["text"].as_str().unwrap();
    assert!(prompt.contains(system_turn.trim()));
    assert!(prompt.contains("<system-reminder>") && !template.contains("<system-reminder>"));
}

#[test]
fn one_finding_per_dropped_tool_and_none_per_parameter() {
    let (body, _, _) = fixture();
    let report = check_json();
    let declared: BTreeSet<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    let dropped: Vec<&str> = findings(&report, "input.tool_dropped")
        .iter()
        .map(|f| f["evidence"]["tool"].as_str().unwrap())
        .collect();
    assert_eq!(dropped.len(), 12, "{dropped:?}");
    assert_eq!(dropped.iter().copied().collect::<BTreeSet<_>>(), declared);
    let per_param = findings(&report, "schema.type_lost");
    assert!(per_param.is_empty(), "{per_param:#?}");
}

#[test]
fn no_marker_finding_for_tags_in_the_agents_text_and_no_message_reported_dropped() {
    let (_, _, template) = fixture();
    let report = check_json();
    // Marker findings are about the template's own markers only: each excerpt is text of the
    // server's chat template (here ChatML's `<|im_start|>`/`<|im_end|>`, which Gemma 3's
    // vocabulary does not hold as tokens).
    let markers = findings(&report, "token.pseudo_special");
    assert!(!markers.is_empty(), "{report:#}");
    for f in &markers {
        let text = f["evidence"]["excerpt"].as_str().unwrap();
        assert!(template.contains(text), "not a template marker: {f:#}");
    }
    let dropped = findings(&report, "input.message_dropped");
    assert!(dropped.is_empty(), "{dropped:#?}");
}

/// The client was stopped mid-stream (the fixture's exchange is partial): the text report says
/// so on the exchange's block, as the recorded outcome and error do, not only the JSON.
#[test]
fn the_text_report_says_the_exchange_is_partial() {
    let text = std::fs::read_to_string(support::root().join(FIXTURE)).unwrap();
    let ex: Value = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|l| l["type"] == "exchange" && l["id"] == 2)
        .unwrap();
    let outcome = ex["outcome"].as_str().unwrap();
    assert_ne!(outcome, "complete");
    let out = Command::new(support::bin())
        .args(["check", FIXTURE])
        .current_dir(support::root())
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    let line = report
        .lines()
        .find(|l| l.starts_with("  partial:"))
        .unwrap_or_else(|| panic!("{report}"));
    assert!(line.contains(outcome), "{line}");
}
