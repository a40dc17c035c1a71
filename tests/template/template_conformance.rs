//! Conformance of toolscope's template rendering with Python Jinja2 configured as transformers'
//! `apply_chat_template` (scripts/reference_render.py), over every template of llama.cpp's
//! `models/templates/` corpus × three scenarios. Byte-for-byte; ≥ 97 % of the pairs the
//! reference renders must be identical, and every remaining mismatch must be listed with its
//! cause in tests/data/template_known_differences.json (a new mismatch fails).

use crate::support;
use crate::template_support;

use template_support::scenarios;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use toolscope::template::{CompiledTemplate, RenderInput, RenderOptions};

const NOW: &str = "2026-11-29T12:00:00Z";

fn python() -> Option<String> {
    let ok = Command::new("python3")
        .args(["-c", "import jinja2"])
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        Some("python3".into())
    } else if support::setup_required() {
        panic!("python3 with jinja2 is required for the conformance test (pip install jinja2)");
    } else {
        eprintln!("SKIP: python3 with jinja2 not found");
        None
    }
}

/// Runs the reference renderer on jobs; returns id → Ok(prompt) | Err(error).
fn reference(py: &str, jobs: &[Value]) -> BTreeMap<String, Result<String, String>> {
    let script = support::root().join("scripts/reference_render.py");
    let mut child = Command::new(py)
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start reference_render.py");
    let input = serde_json::to_vec(&json!({"jobs": jobs})).unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        stdin.write_all(&input).unwrap();
    });
    let out = child
        .wait_with_output()
        .expect("reference_render.py output");
    writer.join().unwrap();
    assert!(out.status.success(), "reference_render.py failed");
    let mut map = BTreeMap::new();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        let id = v["id"].as_str().unwrap().to_owned();
        let r = match v.get("prompt").and_then(Value::as_str) {
            Some(p) => Ok(p.to_owned()),
            None => Err(v["error"].as_str().unwrap_or("?").to_owned()),
        };
        map.insert(id, r);
    }
    map
}

fn first_diff(a: &str, b: &str) -> String {
    let i = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    let fb = toolscope::template::divergence::floor_boundary;
    let lo = fb(a, i.saturating_sub(40));
    let cut = |s: &str| {
        let end = fb(s, i + 40);
        let start = fb(s, lo.min(end));
        s[start..end].escape_debug().to_string()
    };
    format!("byte {i}: ours …{}… reference …{}…", cut(a), cut(b))
}

#[test]
fn corpus_matches_python_jinja2() {
    let Some(corpus) = support::corpus() else {
        return;
    };
    let Some(py) = python() else { return };
    let known: Value = serde_json::from_str(
        &std::fs::read_to_string(
            support::root().join("tests/data/template_known_differences.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let known: BTreeMap<String, String> = known["mismatches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                format!(
                    "{}#{}",
                    m["template"].as_str().unwrap(),
                    m["scenario"].as_str().unwrap()
                ),
                m["cause"].as_str().unwrap().to_owned(),
            )
        })
        .collect();

    let mut files: Vec<_> = std::fs::read_dir(&corpus)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jinja"))
        .collect();
    files.sort();
    assert!(files.len() >= 60, "corpus too small: {}", files.len());
    let now =
        time::OffsetDateTime::parse(NOW, &time::format_description::well_known::Rfc3339).unwrap();
    let mut jobs = Vec::new();
    let mut ours = BTreeMap::new();
    for f in &files {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        let src = std::fs::read_to_string(f).unwrap();
        let opts = RenderOptions {
            now: Some(now),
            name: Some(name.clone()),
            ..Default::default()
        };
        let compiled = CompiledTemplate::compile(&src, &opts);
        for (scn, body) in scenarios() {
            let id = format!("{name}#{scn}");
            let ctx = RenderInput::from_openai_request(&body).context();
            let r = match &compiled {
                Ok(c) => c.render_context(&ctx).map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            ours.insert(id.clone(), r);
            jobs.push(json!({"id": id, "template": src, "context": ctx, "now": NOW}));
        }
    }
    let reference = reference(&py, &jobs);

    let mut per: BTreeMap<&str, (usize, usize, usize)> = BTreeMap::new(); // identical, rendered, ref errors
    let mut new_mismatches = Vec::new();
    let mut listed_mismatches = Vec::new();
    let mut both_fail = 0;
    for (id, r) in &reference {
        let scn = scenarios()
            .iter()
            .map(|s| s.0)
            .find(|s| id.ends_with(&format!("#{s}")))
            .unwrap();
        let e = per.entry(scn).or_default();
        let mine = &ours[id];
        match r {
            Err(_) => {
                e.2 += 1;
                if mine.is_err() {
                    both_fail += 1;
                }
            }
            Ok(p) => {
                e.1 += 1;
                let same = matches!(mine, Ok(m) if m == p);
                if same {
                    e.0 += 1;
                } else {
                    let detail = match mine {
                        Ok(m) => first_diff(m, p),
                        Err(err) => format!("ours failed: {err}"),
                    };
                    if let Some(cause) = known.get(id) {
                        listed_mismatches.push(format!("{id}: {cause}"));
                    } else {
                        new_mismatches.push(format!("{id}: {detail}"));
                    }
                }
            }
        }
    }
    let (ident, total): (usize, usize) = per.values().fold((0, 0), |a, v| (a.0 + v.0, a.1 + v.1));
    println!(
        "template conformance vs Python Jinja2 (transformers settings): {ident}/{total} identical ({:.1}%)",
        100.0 * ident as f64 / total.max(1) as f64
    );
    for (scn, (i, t, errs)) in &per {
        println!("  {scn:16} {i}/{t} identical; reference raised on {errs} more");
    }
    println!("  reference errors where toolscope also fails: {both_fail}");
    for m in &listed_mismatches {
        println!("  known: {m}");
    }
    for m in &new_mismatches {
        println!("  NEW: {m}");
    }
    // Reference errors where we render: show them (informational).
    for (id, r) in &reference {
        if let (Err(e), Ok(_)) = (r, &ours[id]) {
            println!(
                "  reference raised, toolscope rendered: {id}: {}",
                e.chars().take(120).collect::<String>()
            );
        }
    }
    let stale: Vec<&String> = known
        .keys()
        .filter(
            |k| matches!((reference.get(*k), ours.get(*k)), (Some(Ok(p)), Some(Ok(m))) if p == m),
        )
        .collect();
    for s in &stale {
        println!("  stale known difference (now identical): {s}");
    }
    assert!(
        new_mismatches.is_empty(),
        "{} new mismatches (list them with a cause in tests/data/template_known_differences.json or fix them):\n{}",
        new_mismatches.len(),
        new_mismatches.join("\n")
    );
    assert!(
        ident as f64 >= 0.97 * total as f64,
        "only {ident}/{total} identical"
    );
}

fn render_case(case: &str) -> String {
    let corpus = support::corpus().unwrap();
    let c = support::case_json(case, "case.json");
    let tname = c["inputs"]["template"]
        .as_str()
        .unwrap()
        .strip_prefix("corpus:")
        .unwrap();
    let src = std::fs::read_to_string(corpus.join(tname)).unwrap();
    let input = RenderInput::from_openai_request(&c["inputs"]["request"]);
    toolscope::template::render(&src, &input, &RenderOptions::default()).unwrap()
}

fn check_case(case: &str) {
    if support::corpus().is_none() {
        return;
    }
    let c = support::case_json(case, "case.json");
    let out = render_case(case);
    for frag in c["expect"]["rendered_contains"].as_array().unwrap() {
        let frag = frag.as_str().unwrap();
        assert!(
            out.contains(frag),
            "{case}: render lacks {frag:?}\n--- render ---\n{out}"
        );
    }
}

#[test]
fn case_01_gemma4_anyof_fragments() {
    check_case("01-gemma4-anyof-type-lost");
}

#[test]
fn case_02_gemma4_type_list_fragments() {
    check_case("02-gemma4-type-list");
}
