//! Ollama Go-template rendering speed (`template::ollama::render_ollama_in`: the template
//! parsed once, kept in a `ParsedTemplates` the caller owns, then Ollama's Execute; parsed
//! every time a render took 49–79 µs, two thirds of it parsing): per template of
//! tests/data/ollama_template_vectors.json (Ollama's nine library tool templates on
//! tools/testdata's conversation), and one long conversation (200 turns with
//! a tool call each) through the qwen2.5 one. Prints figures; asserts nothing.
//!
//! Run: `cargo bench --bench gotmpl`. `TOOLSCOPE_BENCH_RENDERS` sets renders per template
//! (default 500).

use std::time::Instant;

use serde_json::{Value, json};
use toolscope::gotmpl::ExecOptions;
use toolscope::template::ollama::{OllamaModel, ParsedTemplates, render_ollama_in};

fn main() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/ollama_template_vectors.json"
    ))
    .expect("tests/data/ollama_template_vectors.json");
    let v: Value = serde_json::from_str(&text).unwrap();
    let n: u32 = std::env::var("TOOLSCOPE_BENCH_RENDERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(500);
    let t = &v["tools"];
    let req = json!({"model": "m", "messages": t["messages"], "tools": t["tools"]});
    let model = OllamaModel::default();
    let opts = ExecOptions::default();
    let parsed = ParsedTemplates::default();
    println!("template                 prompt B   µs/render (execute; parsed once, {n} renders)");
    for tt in t["templates"].as_array().unwrap() {
        let tmpl = tt["template"].as_str().unwrap();
        let out = render_ollama_in(&parsed, tmpl, &req, &model, &opts).unwrap();
        let start = Instant::now();
        for _ in 0..n {
            std::hint::black_box(render_ollama_in(&parsed, tmpl, &req, &model, &opts).unwrap());
        }
        let us = start.elapsed().as_secs_f64() * 1e6 / f64::from(n);
        println!(
            "{:<24} {:>8}   {:>9.1}",
            tt["name"].as_str().unwrap(),
            out.len(),
            us
        );
    }
    // a long conversation: 200 user/assistant-tool-call/tool triples
    let mut msgs = vec![json!({"role": "system", "content": "You can call tools."})];
    for i in 0..200 {
        msgs.push(json!({"role": "user", "content": format!("Weather in city {i}?")}));
        msgs.push(
            json!({"role": "assistant", "tool_calls": [{"function": {"name": "get_current_weather",
            "arguments": {"location": format!("City {i}"), "format": "celsius"}}}]}),
        );
        msgs.push(json!({"role": "tool", "content": format!("{}", 10 + i % 20)}));
    }
    let long = json!({"model": "m", "messages": msgs, "tools": t["tools"]});
    let qwen = t["templates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["name"] == "qwen2.5")
        .unwrap()["template"]
        .as_str()
        .unwrap();
    let out = render_ollama_in(&parsed, qwen, &long, &model, &opts).unwrap();
    let reps = (n / 20).max(5);
    let start = Instant::now();
    for _ in 0..reps {
        std::hint::black_box(render_ollama_in(&parsed, qwen, &long, &model, &opts).unwrap());
    }
    let ms = start.elapsed().as_secs_f64() * 1e3 / f64::from(reps);
    println!(
        "qwen2.5, 601 messages: {} bytes of prompt in {ms:.2} ms/render ({reps} renders)",
        out.len()
    );
}
