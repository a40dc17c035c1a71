//! Template-aware flattening (issue 4 item 3), the pre-flight lint (item 4) and the
//! `toolscope flatten` CLI, against real corpus templates.

use crate::support;

use std::process::Command;

use serde_json::{Value, json};
use toolscope::finding::Rule;
use toolscope::schema::flatten::Strategy;
use toolscope::schema::rank::{as_request, rank_strategies, render_template};
use toolscope::schema::{FlattenOptions, preflight};

fn template(name: &str) -> Option<String> {
    let dir = support::corpus()?;
    Some(std::fs::read_to_string(dir.join(name)).unwrap())
}

fn data(name: &str) -> String {
    std::fs::read_to_string(support::root().join("tests/data/schema").join(name)).unwrap()
}

fn case_request(case: &str) -> Value {
    support::case_json(case, "case.json")["inputs"]["request"].clone()
}

#[test]
fn template_render_matches_the_python_reference_on_case01() {
    let Some(t) = template("google-gemma-4-31B-it.jinja") else {
        return;
    };
    let out = render_template(&t, &case_request("01-gemma4-anyof-type-lost"), None, None).unwrap();
    assert_eq!(out, data("case01.gemma4.txt"));
    // Python jinja2 (as transformers renders) upper-cases the list's Python repr; the faithful
    // renderer must do the same, and the loss detector must see through it.
    let out = render_template(&t, &case_request("02-gemma4-type-list"), None, None).unwrap();
    assert!(
        out.contains("type:<|\"|>['STRING', 'NUMBER']<|\"|>"),
        "{out}"
    );
    assert!(schema_loss_has_type_lost(&out));
}

fn schema_loss_has_type_lost(prompt: &str) -> bool {
    toolscope::schema::schema_loss(&case_request("02-gemma4-type-list"), prompt)
        .iter()
        .any(|f| {
            f.rule == Rule::SchemaTypeLost
                && f.evidence.pointer.as_deref() == Some("/properties/value")
        })
}

/// The ranking with the faithful renderer (as `toolscope flatten --template` runs it).
#[test]
fn gemma4_ranking_with_the_template_renderer() {
    let Some(t) = template("google-gemma-4-31B-it.jinja") else {
        return;
    };
    let req = case_request("01-gemma4-anyof-type-lost");
    let (ranking, _) = rank_strategies(&req, &FlattenOptions::default(), |d| {
        render_template(&t, &as_request(d), None, None)
    })
    .unwrap();
    assert_eq!(
        ranking.best(),
        Some(Strategy::FirstTypeWithNote),
        "{ranking:#?}"
    );
    let tl = ranking
        .ranked
        .iter()
        .find(|r| r.strategy == Some(Strategy::TypeList))
        .unwrap();
    assert!(tl.score.is_none_or(|s| s > 0), "{ranking:#?}");
}

#[test]
fn gemma4_type_list_loses_against_a_printable_rewrite() {
    let Some(t) = template("google-gemma-4-31B-it.jinja") else {
        return;
    };
    let req = case_request("01-gemma4-anyof-type-lost");
    let (ranking, best) = rank_strategies(&req, &FlattenOptions::default(), |d| {
        render_template(&t, &as_request(d), None, None)
    })
    .unwrap();
    let order: Vec<(Option<Strategy>, Option<u32>)> = ranking
        .ranked
        .iter()
        .map(|r| (r.strategy, r.score))
        .collect();
    assert_eq!(
        order,
        vec![
            (Some(Strategy::FirstTypeWithNote), Some(0)),
            (Some(Strategy::StringWithNote), Some(0)),
            (Some(Strategy::FirstType), Some(2)),
            (Some(Strategy::TypeList), Some(4)),
        ],
        "{ranking:#?}"
    );
    // As given: quantity's type (4), label's type (4) and nullable (2) are lost.
    assert_eq!(ranking.baseline.score, Some(10));
    assert_eq!(ranking.best(), Some(Strategy::FirstTypeWithNote));
    // After flattening, label renders with nullable:true and type STRING (case 01's note).
    let prompt = render_template(&t, &as_request(&best.tools), None, None).unwrap();
    assert!(
        prompt.contains("label:{nullable:true,type:<|\"|>STRING<|\"|>}"),
        "{prompt}"
    );
    assert!(
        prompt.contains(
            "quantity:{description:<|\"|>how many (string or number)<|\"|>,type:<|\"|>STRING<|\"|>}"
        ),
        "{prompt}"
    );

    // Case 02: the type list itself is what Gemma 4 cannot print.
    let req = case_request("02-gemma4-type-list");
    let (ranking, _) = rank_strategies(&req, &FlattenOptions::default(), |d| {
        render_template(&t, &as_request(d), None, None)
    })
    .unwrap();
    assert_eq!(ranking.best(), Some(Strategy::FirstTypeWithNote));
    let tl = ranking
        .ranked
        .iter()
        .find(|r| r.strategy == Some(Strategy::TypeList))
        .unwrap();
    assert_eq!(tl.score, Some(4));
    assert_eq!(ranking.baseline.score, Some(4));
}

#[test]
fn json_dumping_template_keeps_the_type_list() {
    let Some(t) = template("NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja") else {
        return;
    };
    let req = case_request("01-gemma4-anyof-type-lost");
    let (ranking, best) = rank_strategies(&req, &FlattenOptions::default(), |d| {
        render_template(&t, &as_request(d), None, None)
    })
    .unwrap();
    assert_eq!(ranking.best(), Some(Strategy::TypeList), "{ranking:#?}");
    assert_eq!(ranking.ranked[0].score, Some(0));
    assert_eq!(ranking.baseline.score, Some(0));
    assert_eq!(
        best.tools["tools"][0]["function"]["parameters"]["properties"]["quantity"]["type"],
        json!(["string", "number"])
    );
}

#[test]
fn preflight_reports_case01_and_names_the_fix() {
    let Some(t) = template("google-gemma-4-31B-it.jinja") else {
        return;
    };
    let f = preflight(&case_request("01-gemma4-anyof-type-lost"), &t);
    let mut ptrs: Vec<&str> = f
        .iter()
        .map(|x| x.evidence.pointer.as_deref().unwrap_or(""))
        .collect();
    ptrs.sort();
    assert_eq!(ptrs, vec!["/properties/label", "/properties/quantity"]);
    assert!(f.iter().all(|x| x.rule == Rule::SchemaTypeLost));
    assert!(
        f[0].hint.contains("--strategy first-type-with-note"),
        "{}",
        f[0].hint
    );
    // A template that fails to render yields one render-error finding.
    let f = preflight(
        &case_request("01-gemma4-anyof-type-lost"),
        "{{ raise_exception('no tools here') }}",
    );
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].rule, Rule::TemplateRenderError);
    // No tools: nothing to lint.
    assert!(
        preflight(
            &json!({"messages": [{"role": "user", "content": "hi"}]}),
            &t
        )
        .is_empty()
    );
}

#[test]
fn cli_flatten_json_and_errors() {
    let mcp = support::root().join("tests/data/schema/mcp-filesystem.tools-list.json");
    let out = Command::new(support::bin())
        .args(["flatten", "--format", "json"])
        .arg(&mcp)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let expected: Value = serde_json::from_str(&data("mcp-filesystem.flat.json")).unwrap();
    assert_eq!(v["tools"], expected);
    assert_eq!(
        v["changes"][0]["path"],
        json!("/result/tools/0/inputSchema/properties/head")
    );
    assert_eq!(v["changes"][0]["lost"], Value::Null);

    // Malformed JSON: exit 2, the message names the file and line:column.
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "[\n  {\"name\": \"x\",\n  }\n]").unwrap();
    let out = Command::new(support::bin())
        .arg("flatten")
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("{}:3:3", bad.display())), "{err}");

    // Not a tool list: exit 2.
    let other = dir.path().join("other.json");
    std::fs::write(&other, "{\"messages\": []}").unwrap();
    let out = Command::new(support::bin())
        .arg("flatten")
        .arg(&other)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("other.json"));

    // Unknown strategy: a usage error naming the choices.
    let out = Command::new(support::bin())
        .args(["flatten", "--strategy", "nope"])
        .arg(&mcp)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("first-type-with-note"));
}

#[test]
fn cli_flatten_with_template_ranks() {
    let Some(dir) = support::corpus() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let tools = tmp.path().join("tools.json");
    std::fs::write(
        &tools,
        serde_json::to_string(&case_request("01-gemma4-anyof-type-lost")["tools"]).unwrap(),
    )
    .unwrap();
    let out = Command::new(support::bin())
        .args(["flatten", "--format", "json", "--template"])
        .arg(dir.join("google-gemma-4-31B-it.jinja"))
        .arg(&tools)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["strategy"], json!("first-type-with-note"));
    assert_eq!(v["ranking"]["ranked"][3]["strategy"], json!("type-list"));
    assert_eq!(
        v["tools"][0]["function"]["parameters"]["properties"]["label"],
        json!({"type": "string", "nullable": true})
    );
    // Text format: a readable report with the ranking.
    let out = Command::new(support::bin())
        .args(["flatten", "--template"])
        .arg(dir.join("google-gemma-4-31B-it.jinja"))
        .arg(&tools)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("1. first-type-with-note"), "{text}");
    assert!(text.contains("chosen: first-type-with-note"), "{text}");
}

/// `flatten --template` on a template that renders nothing (here a syntax error) exits 2 with
/// the render error: no strategy can be chosen on it (it used to print `chosen: type-list`,
/// exit 0). A template that renders still ranks.
#[test]
fn cli_flatten_template_that_renders_nothing_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let tools = support::root().join("tests/data/diff/request-tools.json");
    let bad = dir.path().join("bad.jinja");
    std::fs::write(&bad, "{% for x in %}").unwrap();
    let flatten_with = |template: &std::path::Path| {
        Command::new(support::bin())
            .arg("flatten")
            .arg(&tools)
            .arg("--template")
            .arg(template)
            .output()
            .unwrap()
    };
    let out = flatten_with(&bad);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!("{}: renders neither", bad.display()))
            && err.contains("syntax error"),
        "{err}"
    );

    let good = dir.path().join("good.jinja");
    std::fs::write(&good, "{{ tools | tojson }}").unwrap();
    let out = flatten_with(&good);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
