//! toolscope's llama.cpp verdicts (`parser::engines::expected`, [`Engine::LlamaCpp`]) checked
//! against llama.cpp's own parser code: scripts/engines/llama/parse.cpp, linked with the
//! libllama-common that llama-server b11434 (and b11312) is built from, applies the family's
//! corpus template (`$TOOLSCOPE_CORPUS`) to the request exactly as llama-server does for
//! `tool_choice: "auto"` (tools/server/server-common.cpp `oaicompat_chat_params_parse`) and runs
//! `common_chat_parse(text, is_partial = false, …)` as the final result of a non-streamed
//! completion does (tools/server/server-task.h:399). Needs scripts/engines/llama/build.sh (run by
//! scripts/engines/setup.sh); skipped with a message when the driver is missing and
//! TOOLSCOPE_REQUIRE_SETUP is unset.
//!
//! A verdict agrees when the calls (names, arguments as JSON) and the content (trimmed) are the
//! same, or both are the same HTTP 500 message.

use crate::support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};
use toolscope::parser::Syntax;
use toolscope::parser::engines::{Engine, expected};

pub use crate::verdicts::{Verdict, json_or_text, predicted};

/// The corpus template (`$TOOLSCOPE_CORPUS/NAME`) llama-server is started with for each corpus
/// family. Families with none: `functiongemma` and `pythonic` (no template in the corpus teaches
/// them; toolscope names no llama.cpp parser for them either).
pub const TEMPLATES: &[(&str, &str)] = &[
    ("hermes", "Qwen-Qwen3-0.6B.jinja"),
    ("qwen3-coder", "Qwen3-Coder.jinja"),
    ("glm4.5", "GLM-4.6.jinja"),
    ("seed-oss", "ByteDance-Seed-OSS.jinja"),
    ("gemma4", "google-gemma-4-31B-it.jinja"),
    ("llama3", "meta-llama-Llama-3.1-8B-Instruct.jinja"),
    ("lfm2", "LFM2-8B-A1B.jinja"),
    ("mistral", "mistralai-Mistral-Nemo-Instruct-2407.jinja"),
    (
        "deepseek-v3",
        "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja",
    ),
    ("deepseek-v3.2", "deepseek-ai-DeepSeek-V3.2.jinja"),
    ("kimi-k2", "Kimi-K2-Instruct.jinja"),
    ("kimi-k3", "Kimi-K3.jinja"),
    ("gpt-oss", "openai-gpt-oss-120b.jinja"),
    ("anthropic-xml", "MiniMax-M2.jinja"),
    ("minimax-m3", "MiniMax-M3.jinja"),
    (
        "command-r7b",
        "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja",
    ),
    ("apertus", "Apertus-8B-Instruct.jinja"),
    ("granite", "ibm-granite-granite-3.3-2B-Instruct.jinja"),
    ("gigachat3", "GigaChat3-10B-A1.8B.jinja"),
    ("minicpm5", "openbmb-MiniCPM5-1B.jinja"),
    ("muse-glimmer", "muse-glimmer.jinja"),
    ("hy3", "tencent-Hy3.jinja"),
    ("nemotron-v2", "NVIDIA-Nemotron-Nano-v2.jinja"),
    ("minimax-m1", "MiniMax-M1.jinja"),
    ("solar-open", "upstage-Solar-Open-100B.jinja"),
];

/// The built drivers: (release, path). A skip (failure under TOOLSCOPE_REQUIRE_SETUP) when the
/// b11434 one is missing.
fn drivers() -> Option<Vec<(&'static str, PathBuf)>> {
    let cache = std::env::var_os("TOOLSCOPE_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            dirs::home_dir()
                .unwrap_or_default()
                .join(".cache/toolscope")
        });
    let new = cache.join("engines/llama-parse");
    if !new.exists() {
        if support::setup_required() {
            panic!(
                "llama-parse is missing at {}; run scripts/engines/llama/build.sh",
                new.display()
            );
        }
        eprintln!(
            "SKIP: llama-parse is missing at {}; run scripts/engines/llama/build.sh",
            new.display()
        );
        return None;
    }
    let mut out = vec![("b11434", new)];
    let old = cache.join("engines/llama-parse-11312");
    if old.exists() {
        out.push(("b11312", old));
    }
    Some(out)
}

/// Runs `driver` with `template` on `texts` (one request: `messages` and `tools`).
pub fn run_driver(
    driver: &Path,
    template: &Path,
    messages: &Value,
    tools: &Value,
    texts: &[&str],
) -> Value {
    let req = json!({
        "messages": messages,
        "tools": tools,
        "texts": texts,
    });
    crate::verdicts::pipe_json(
        Command::new(driver).arg(template),
        &req,
        &format!("{} {}", driver.display(), template.display()),
    )
}

/// The driver's result for one text; arguments that are not JSON stay that text.
pub fn real(r: &Value) -> Verdict {
    if let Some(e) = r.get("error") {
        return Verdict::Error(e.as_str().unwrap_or("").to_string());
    }
    Verdict::from_driver(&r["tool_calls"], &r["content"], json_or_text)
}

#[test]
#[ignore = "e2e: needs llama.cpp's parser code (scripts/engines/llama/build.sh)"]
fn llama_cpp_verdicts_agree_with_llama_cpps_own_parser_code() {
    let Some(drivers) = drivers() else { return };
    let Some(corpus_dir) = support::corpus() else {
        return;
    };
    let corpus: Value = serde_json::from_str(
        &std::fs::read_to_string(support::root().join("tests/data/engine_corpus.json")).unwrap(),
    )
    .unwrap();
    let templates: BTreeMap<&str, &str> = TEMPLATES.iter().copied().collect();
    // (family, tools) → texts, so each driver run is one request
    let mut groups: BTreeMap<(String, String), Vec<&Value>> = BTreeMap::new();
    for t in corpus["texts"].as_array().unwrap() {
        let fam = t["family"].as_str().unwrap();
        if !templates.contains_key(fam) {
            continue;
        }
        let tools = t.get("tools").unwrap_or(&corpus["tools"]);
        groups
            .entry((fam.to_string(), tools.to_string()))
            .or_default()
            .push(t);
    }
    let mut by: BTreeMap<(&str, String), (usize, usize)> = BTreeMap::new();
    let mut differences = Vec::new();
    for (release, driver) in &drivers {
        for ((fam, tools_s), texts) in &groups {
            let tools: Value = serde_json::from_str(tools_s).unwrap();
            let template = corpus_dir.join(templates[fam.as_str()]);
            let raw: Vec<&str> = texts.iter().map(|t| t["text"].as_str().unwrap()).collect();
            let user = json!([{"role": "user", "content": "What is the weather in Paris?"}]);
            let out = run_driver(driver, &template, &user, &tools, &raw);
            let sx = Syntax::from_name(fam).unwrap();
            for (t, r) in texts.iter().zip(out["results"].as_array().unwrap()) {
                let id = t["id"].as_str().unwrap();
                let text = t["text"].as_str().unwrap();
                let (_, list) = expected(sx, text, Some(&tools));
                let e = list.iter().find(|o| o.engine == Engine::LlamaCpp).unwrap();
                let p = predicted(&e.outcome);
                let r = real(r);
                let tally = by.entry((release, fam.clone())).or_default();
                tally.1 += 1;
                if p == r {
                    tally.0 += 1;
                } else {
                    differences.push(format!(
                        "{release} {id}\n  predicted {p:?}\n  llama.cpp {r:?}\n  text {text:?}"
                    ));
                }
            }
        }
    }
    let mut report = String::new();
    let mut totals: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for ((release, fam), (a, n)) in &by {
        report.push_str(&format!("{release} {fam:16} {a:3}/{n:3}\n"));
        let t = totals.entry(release).or_default();
        t.0 += a;
        t.1 += n;
    }
    let (mut agree, mut total) = (0, 0);
    for (release, (a, n)) in &totals {
        report.push_str(&format!(
            "{release}: {a}/{n} ({:.1}%)\n",
            100.0 * *a as f64 / *n as f64
        ));
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
    assert!(
        share >= THRESHOLD,
        "{agree}/{total} llama.cpp verdicts agree ({:.1}%), below {:.0}%",
        100.0 * share,
        100.0 * THRESHOLD
    );
}

/// The share of verdicts that must agree (measured; see docs/parser.md).
const THRESHOLD: f64 = 0.987;

/// The shipped sessions recorded from llama-server b11434 and the corpus template each was
/// started with (sessions/README.md).
const SESSION_TEMPLATES: &[(&str, &str)] = &[
    ("a-two-tools-stream.jsonl", "Qwen-Qwen3-0.6B.jinja"),
    (
        "c-gemma4-template-anyof.jsonl",
        "google-gemma-4-31B-it.jinja",
    ),
    ("e-http500-peg-native.jsonl", "Qwen-Qwen3-0.6B.jinja"),
    ("h-probe-qwen3.jsonl", "Qwen-Qwen3-0.6B.jinja"),
];

/// What llama-server answered: the non-streamed message, the streamed deltas joined, or the
/// HTTP 500 message; in the driver's result shape.
fn server_answer(ex: &toolscope::session::Exchange) -> Value {
    let resp = ex.response.as_ref().unwrap();
    let body: Option<Value> = resp
        .body
        .as_ref()
        .and_then(|b| serde_json::from_str(&b.to_text()).ok());
    if let Some(m) = body.as_ref().and_then(|b| b["error"]["message"].as_str()) {
        return json!({ "error": m });
    }
    let (mut content, mut reasoning) = (String::new(), String::new());
    let mut calls: Vec<(String, String)> = Vec::new();
    let mut add = |d: &Value| {
        content.push_str(d["content"].as_str().unwrap_or(""));
        reasoning.push_str(d["reasoning_content"].as_str().unwrap_or(""));
        for (i, tc) in d["tool_calls"].as_array().into_iter().flatten().enumerate() {
            let i = tc["index"].as_u64().map_or(i, |x| x as usize);
            if calls.len() <= i {
                calls.resize(i + 1, Default::default());
            }
            calls[i]
                .0
                .push_str(tc["function"]["name"].as_str().unwrap_or(""));
            calls[i]
                .1
                .push_str(tc["function"]["arguments"].as_str().unwrap_or(""));
        }
    };
    match body {
        Some(b) => add(&b["choices"][0]["message"]),
        None => {
            let text: String = resp
                .chunks
                .iter()
                .flatten()
                .map(|c| c.data.to_text().into_owned())
                .collect();
            for line in text.lines() {
                let Some(data) = line.strip_prefix("data: ") else {
                    continue;
                };
                if let Ok(ev) = serde_json::from_str::<Value>(data) {
                    add(&ev["choices"][0]["delta"]);
                }
            }
        }
    }
    json!({
        "content": content,
        "reasoning_content": reasoning,
        "tool_calls": calls.iter().map(|(n, a)| json!({"name": n, "arguments": a})).collect::<Vec<_>>(),
    })
}

/// The driver is llama-server's parser: on every shipped exchange recorded from b11434 with
/// tools, `tool_choice: "auto"` and the slot's raw text, it gives the generation prompt the
/// server used and the same message (content, reasoning, calls) or the same HTTP 500 message.
#[test]
#[ignore = "e2e: needs llama.cpp's parser code (scripts/engines/llama/build.sh)"]
fn llama_parse_driver_gives_what_llama_server_answered_in_the_shipped_sessions() {
    let Some(drivers) = drivers() else { return };
    let Some(corpus_dir) = support::corpus() else {
        return;
    };
    let driver = &drivers[0].1;
    let mut checked = Vec::new();
    for (file, template) in SESSION_TEMPLATES {
        let s =
            toolscope::session::read_session(&support::root().join("sessions").join(file)).unwrap();
        for ex in &s.exchanges {
            let Some(req) = ex.request_json() else {
                continue;
            };
            let auto = req.get("tool_choice").is_none_or(|c| c == "auto");
            if ex.request.path != "/v1/chat/completions"
                || req.get("tools").is_none()
                || req.get("stop").is_some()
                || !auto
            {
                continue;
            }
            let anns = s.annotations.get(&ex.id).cloned().unwrap_or_default();
            let Some((text, prompt)) = anns.iter().find_map(|a| match a {
                toolscope::session::Annotation::RawText {
                    text: Some(text),
                    generation_prompt,
                    ..
                } => Some((text.clone(), generation_prompt.clone())),
                _ => None,
            }) else {
                continue;
            };
            let out = run_driver(
                driver,
                &corpus_dir.join(template),
                &req["messages"],
                &req["tools"],
                &[&text],
            );
            if let Some(p) = prompt {
                assert_eq!(out["generation_prompt"], p, "{file} exchange {}", ex.id);
            }
            assert_eq!(
                out["results"][0],
                server_answer(ex),
                "{file} exchange {}",
                ex.id
            );
            checked.push(format!("{file}#{}", ex.id));
        }
    }
    eprintln!("checked against llama-server: {}", checked.join(", "));
    assert!(checked.len() >= 4, "{checked:?}");
}

/// The template llama-server ran with for a shipped view: the session's recorded `/props`
/// `chat_template`, else the family's corpus template ([`TEMPLATES`], said in `notes`); `None`
/// when neither exists.
fn view_template(
    v: &crate::shipped_views::View,
    dir: &Path,
    corpus_dir: &Path,
    notes: &mut Vec<String>,
) -> Option<PathBuf> {
    if let Some(t) = &v.template {
        let p = dir.join(v.id.replace('#', "-") + ".jinja");
        std::fs::write(&p, t).unwrap();
        return Some(p);
    }
    let fam = v.verdicts.family.name();
    match TEMPLATES.iter().find(|(f, _)| *f == fam) {
        Some((_, t)) => {
            notes.push(format!(
                "{}: the session records no template; the {fam} corpus template {t}",
                v.id
            ));
            Some(corpus_dir.join(t))
        }
        None => {
            notes.push(format!(
                "{}: not checked: no recorded template and no corpus template for {fam}",
                v.id
            ));
            None
        }
    }
}

/// The shipped sessions' Replay `e` views ([`crate::shipped_views`]): on every exchange with raw
/// text and a call family, the view's llama.cpp verdict is what llama.cpp's own parser code
/// (b11434, and b11312 when built) returns for that text with the exchange's own template (the
/// session's `/props` one) and its request's `messages` and `tools` (tool_choice auto, as the
/// view models it). The driver is given what the model generated: an assistant prefill is in
/// the request's last message, so in the generation prompt, as llama-server has it; the view
/// gives llama.cpp the exchange's own generation prompt (the `/slots` one these sessions
/// recorded, `AnalysedExchange::llama_prompt`). Every verdict must agree.
#[test]
#[ignore = "e2e: needs llama.cpp's parser code (scripts/engines/llama/build.sh)"]
fn shipped_sessions_llama_cpp_views_agree_with_llama_cpps_own_parser_code() {
    let Some(drivers) = drivers() else { return };
    let Some(corpus_dir) = support::corpus() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let views = crate::shipped_views::views();
    let (mut notes, mut failures, mut checked, mut texts) = (Vec::new(), Vec::new(), 0, 0);
    for v in &views {
        let Some(template) = view_template(v, dir.path(), &corpus_dir, &mut notes) else {
            continue;
        };
        if let Some(c) = v.request.get("tool_choice").filter(|c| *c != "auto") {
            notes.push(format!(
                "{}: the request's tool_choice {c}; checked as auto",
                v.id
            ));
        }
        texts += 1;
        let e = v
            .verdicts
            .engines
            .iter()
            .find(|o| o.engine == Engine::LlamaCpp);
        let p = predicted(&e.unwrap().outcome);
        for (release, driver) in &drivers {
            let out = run_driver(
                driver,
                &template,
                &v.request["messages"],
                &v.tools,
                &[&v.generated],
            );
            let r = real(&out["results"][0]);
            checked += 1;
            let same = if p == r { "agree" } else { "DIFFER" };
            eprintln!(
                "{release} {} ({}, {}): {same}: view {p:?}",
                v.id, v.verdicts.family, out["format"]
            );
            if p != r {
                failures.push(format!(
                    "{release} {}\n  view      {p:?}\n  llama.cpp {r:?}\n  text {:?}",
                    v.id, v.text
                ));
            }
        }
    }
    eprintln!(
        "{}\nshipped sessions: {checked} llama.cpp verdicts checked on {texts} raw texts, {} \
         differ",
        notes.join("\n"),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {checked} llama.cpp verdicts differ from llama.cpp's own code:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(checked > 0, "no shipped view checked");
}
