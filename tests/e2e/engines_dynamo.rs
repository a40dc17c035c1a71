//! toolscope's Dynamo verdicts (`parser::engines::expected`, [`Engine::Dynamo`]) checked against
//! the Dynamo frontend's own parser code: scripts/engines/dynamo (`dynamo-parse`) links the
//! `dynamo-parsers` crate 11.0.1 in-process and runs, per text, what the frontend runs for a
//! non-streamed chat completion with `--dyn-tool-call-parser NAME`: the text as one delta plus
//! a `finish_reason: stop` delta through `apply_tool_calling_jail` (tool_choice auto, the corpus
//! tools), folded as the frontend's DeltaAggregator folds it, then the aggregator's re-parse
//! without tools. Needs scripts/engines/dynamo/build.sh (run by scripts/engines/setup.sh);
//! skipped with a message when the driver is missing and TOOLSCOPE_REQUIRE_SETUP is unset.
//!
//! A verdict agrees when the calls (names, arguments as JSON) and the content (trimmed) are the
//! same, or both are errors. gpt-oss (`harmony`) tokenizes with OpenAI's o200k vocabulary
//! (openai-harmony, which would download it at first use): the driver runs with
//! `TIKTOKEN_ENCODINGS_BASE` naming the folder scripts/engines/setup.sh rebuilds it in. Every
//! difference must be listed in docs/parser.md as `dynamo ID` with its cause.

use crate::support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};
use toolscope::parser::Syntax;
use toolscope::parser::engines::{Engine, Outcome, expected, parsers};

use crate::verdicts::Verdict;

fn cache() -> PathBuf {
    std::env::var_os("TOOLSCOPE_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            dirs::home_dir()
                .unwrap_or_default()
                .join(".cache/toolscope")
        })
}

/// The built driver, or a skip (a failure under TOOLSCOPE_REQUIRE_SETUP).
fn driver() -> Option<PathBuf> {
    let p = cache().join("engines/dynamo-parse");
    let vocab = tiktoken_base().join("o200k_base.tiktoken");
    if p.exists() && vocab.exists() {
        return Some(p);
    }
    let missing = if p.exists() { &vocab } else { &p };
    if support::setup_required() {
        panic!(
            "{} is missing; run scripts/engines/setup.sh",
            missing.display()
        );
    }
    eprintln!(
        "SKIP: {} is missing; run scripts/engines/setup.sh",
        missing.display()
    );
    None
}

/// The folder holding o200k_base.tiktoken, which openai-harmony (Dynamo's `harmony` parser)
/// reads from `TIKTOKEN_ENCODINGS_BASE` and checks by SHA-256 (openai-harmony 0.0.8
/// src/tiktoken_ext/public_encodings.rs `Encoding::load`); scripts/engines/setup.sh builds it.
fn tiktoken_base() -> PathBuf {
    std::env::var_os("TIKTOKEN_ENCODINGS_BASE")
        .map(PathBuf::from)
        .unwrap_or_else(|| cache().join("engines/tiktoken"))
}

/// Runs the driver with `parser` on `texts` (`mode`: frontend | batch).
fn run_driver(driver: &Path, parser: &str, mode: &str, tools: &Value, texts: &[&str]) -> Value {
    let req = json!({"parser": parser, "mode": mode, "tools": tools, "texts": texts});
    crate::verdicts::pipe_json(
        Command::new(driver).env("TIKTOKEN_ENCODINGS_BASE", tiktoken_base()),
        &req,
        &format!("{} ({parser})", driver.display()),
    )
}

/// toolscope's verdict; an error's text is not compared.
fn predicted(o: &Outcome) -> Verdict {
    crate::verdicts::predicted(o).any_error()
}

/// The driver's result for one text; argument text that is not JSON stays that text.
fn real(r: &Value) -> Verdict {
    if !r["error"].is_null() {
        return Verdict::Error(String::new());
    }
    Verdict::from_driver(
        &r["tool_calls"],
        &r["content"],
        crate::verdicts::json_or_text,
    )
}

/// The share of verdicts that must agree (measured; see docs/parser.md "Dynamo").
const THRESHOLD: f64 = 0.995;

#[test]
#[ignore = "e2e: needs the Dynamo frontend's parser code (scripts/engines/dynamo/build.sh)"]
fn dynamo_verdicts_agree_with_dynamos_own_parser_code() {
    let Some(driver) = driver() else { return };
    let corpus: Value = serde_json::from_str(
        &std::fs::read_to_string(support::root().join("tests/data/engine_corpus.json")).unwrap(),
    )
    .unwrap();
    let docs = std::fs::read_to_string(support::root().join("docs/parser.md")).unwrap();
    // (family, tools) → texts, so each driver run is one request
    let mut groups: BTreeMap<(String, String), Vec<&Value>> = BTreeMap::new();
    for t in corpus["texts"].as_array().unwrap() {
        let fam = t["family"].as_str().unwrap();
        let sx = Syntax::from_name(fam).unwrap_or_else(|| panic!("family {fam}"));
        if parsers(sx)[3].is_none() {
            continue;
        }
        let tools = t.get("tools").unwrap_or(&corpus["tools"]);
        groups
            .entry((fam.to_string(), tools.to_string()))
            .or_default()
            .push(t);
    }
    // every name toolscope gives is one the crate registers (an unknown name is an error:
    // "Parser '…' is not implemented", tool_calling/parsers.rs:177)
    let mut wrong_names = Vec::new();
    for s in Syntax::ALL {
        let Some(name) = parsers(*s)[3] else { continue };
        let r = run_driver(&driver, name, "batch", &json!([]), &["hello"]);
        if let Some(e) = r[0]["error"].as_str() {
            wrong_names.push(format!("{s}: {name}: {e}"));
        }
    }
    let mut by: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut differences = Vec::new();
    for ((fam, tools_s), texts) in &groups {
        let tools: Value = serde_json::from_str(tools_s).unwrap();
        let sx = Syntax::from_name(fam).unwrap();
        let parser = parsers(sx)[3].unwrap();
        let raw: Vec<&str> = texts.iter().map(|t| t["text"].as_str().unwrap()).collect();
        let out = run_driver(&driver, parser, "frontend", &tools, &raw);
        for (t, r) in texts.iter().zip(out.as_array().unwrap()) {
            let id = t["id"].as_str().unwrap();
            let text = t["text"].as_str().unwrap();
            let (_, list) = expected(sx, text, Some(&tools));
            let e = list.iter().find(|o| o.engine == Engine::Dynamo).unwrap();
            let p = predicted(&e.outcome);
            let r = real(r);
            let tally = by.entry(fam.clone()).or_default();
            tally.1 += 1;
            if p == r {
                tally.0 += 1;
            } else {
                differences.push(format!(
                    "dynamo {id}\n  predicted {p:?}\n  dynamo    {r:?}\n  text {text:?}\n  why {}",
                    e.why
                ));
            }
        }
    }
    let mut report = String::new();
    let (mut agree, mut total) = (0, 0);
    for (fam, (a, n)) in &by {
        report.push_str(&format!("dynamo {fam:16} {a:3}/{n:3}\n"));
        agree += a;
        total += n;
    }
    let share = agree as f64 / total as f64;
    eprintln!(
        "{report}all: {agree}/{total} ({:.1}%)\n{} differences:\n{}",
        100.0 * share,
        differences.len(),
        differences.join("\n")
    );
    assert!(wrong_names.is_empty(), "{}", wrong_names.join("\n"));
    let unlisted: Vec<&String> = differences
        .iter()
        .filter(|d| {
            let id = d.split_whitespace().nth(1).unwrap();
            !docs.contains(&format!("`dynamo {id}`"))
        })
        .collect();
    assert!(
        unlisted.is_empty(),
        "{} differences not listed in docs/parser.md (`dynamo ID` with the cause):\n{}",
        unlisted.len(),
        unlisted
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        share >= THRESHOLD,
        "{agree}/{total} Dynamo verdicts agree ({:.1}%), below {:.0}%",
        100.0 * share,
        100.0 * THRESHOLD
    );
}

/// The shipped sessions' Replay `e` views ([`crate::shipped_views`]): on every exchange with raw
/// text and a call family Dynamo registers a parser for (gpt-oss aside, as above), the view's
/// Dynamo verdict is what `dynamo-parse` returns for that text with the request's tools.
#[test]
#[ignore = "e2e: needs the Dynamo frontend's parser code (scripts/engines/dynamo/build.sh)"]
fn shipped_sessions_dynamo_views_agree_with_dynamos_own_parser_code() {
    let Some(driver) = driver() else { return };
    let (mut failures, mut checked) = (Vec::new(), 0);
    for v in crate::shipped_views::views() {
        let family = v.verdicts.family;
        let Some(parser) = parsers(family)[3] else {
            eprintln!("{}: not checked: Dynamo has no parser for {family}", v.id);
            continue;
        };
        if family == Syntax::GptOss {
            eprintln!("{}: not checked: gpt-oss (harmony needs o200k)", v.id);
            continue;
        }
        let e = v
            .verdicts
            .engines
            .iter()
            .find(|o| o.engine == Engine::Dynamo);
        let p = predicted(&e.unwrap().outcome);
        let out = run_driver(&driver, parser, "frontend", &v.tools, &[&v.text]);
        let r = real(&out[0]);
        checked += 1;
        let same = if p == r { "agree" } else { "DIFFER" };
        eprintln!("dynamo {} ({family}, {parser}): {same}: view {p:?}", v.id);
        if p != r {
            failures.push(format!(
                "dynamo {}\n  view   {p:?}\n  dynamo {r:?}\n  text {:?}",
                v.id, v.text
            ));
        }
    }
    eprintln!(
        "shipped sessions: {checked} Dynamo verdicts checked, {} differ",
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(checked > 0, "no shipped view checked");
}
