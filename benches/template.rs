//! Template rendering speed: compile and render time per corpus template, next to Python
//! Jinja2 (scripts/reference_render.py --bench, transformers' settings) measured in the same run
//! on the same machine. Prints figures; asserts nothing.
//!
//! Run: `cargo bench --bench template` (needs the corpus from scripts/setup.sh and python3 with
//! jinja2). `TOOLSCOPE_BENCH_RENDERS` sets renders per template (default 200).

use std::io::Write as _;
use std::process::{Command, Stdio};
use std::time::Instant;

use serde_json::{Value, json};
use toolscope::template::{CompiledTemplate, RenderInput, RenderOptions};

fn request() -> Value {
    json!({
        "messages": [
            {"role": "system", "content": "You can call tools."},
            {"role": "user", "content": "What's the weather in Vienna?"},
            {"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function",
                "function": {"name": "get_weather", "arguments": {"city": "Vienna", "days": 2}}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp_c\": 12.5}"},
            {"role": "assistant", "content": "It is 12.5 °C in Vienna."},
            {"role": "user", "content": "And tomorrow?"}
        ],
        "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Get the weather",
            "parameters": {"type": "object", "properties": {
                "city": {"type": "string"},
                "days": {"type": ["integer", "null"]},
                "unit": {"anyOf": [{"type": "string", "enum": ["c", "f"]}, {"type": "null"}]}},
            "required": ["city"]}}}],
        "bos_token": "<s>", "eos_token": "</s>"
    })
}

fn main() {
    let corpus = std::env::var_os("TOOLSCOPE_CORPUS").map(std::path::PathBuf::from).unwrap_or_else(|| {
        dirs::home_dir().unwrap_or_default().join(".cache/toolscope/src/llama.cpp/models/templates")
    });
    let Ok(dir) = std::fs::read_dir(&corpus) else {
        println!("template bench: corpus not found at {} (run scripts/setup.sh)", corpus.display());
        return;
    };
    let renders: usize = std::env::var("TOOLSCOPE_BENCH_RENDERS").ok().and_then(|v| v.parse().ok()).unwrap_or(200);
    let mut files: Vec<_> = dir.filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "jinja")).collect();
    files.sort();
    let ctx = RenderInput::from_openai_request(&request()).context();
    let now = time::macros::datetime!(2026-11-29 12:00 UTC);
    let opts = RenderOptions { now: Some(now), ..Default::default() };

    // Rust: per template, compile time (mean of 20 compiles) and render time (mean of `renders`).
    let mut rows = Vec::new();
    let mut jobs = Vec::new();
    for f in &files {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        let src = std::fs::read_to_string(f).unwrap();
        let t0 = Instant::now();
        let mut compiled = None;
        for _ in 0..20 {
            compiled = CompiledTemplate::compile(&src, &opts).ok();
        }
        let compile = t0.elapsed().as_secs_f64() / 20.0;
        let Some(c) = compiled else { continue };
        let t1 = Instant::now();
        let mut ok = 0;
        for _ in 0..renders {
            if c.render_context(&ctx).is_ok() {
                ok += 1;
            }
        }
        let render = t1.elapsed().as_secs_f64() / renders as f64;
        rows.push((name.clone(), compile, render, ok));
        jobs.push(json!({"id": name, "template": src, "context": ctx, "now": "2026-11-29T12:00:00Z"}));
    }

    // Python Jinja2, same templates and context.
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/reference_render.py");
    let py: std::collections::BTreeMap<String, (f64, f64)> = match Command::new("python3")
        .arg(&script)
        .args(["--bench", &renders.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
    {
        Ok(mut child) => {
            let input = serde_json::to_vec(&json!({"jobs": jobs})).unwrap();
            let mut stdin = child.stdin.take().unwrap();
            let w = std::thread::spawn(move || stdin.write_all(&input));
            let out = child.wait_with_output().unwrap();
            let _ = w.join();
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .filter_map(|v| Some((v["id"].as_str()?.to_owned(), (v["compile_s"].as_f64()?, v["render_s"].as_f64()?))))
                .collect()
        }
        Err(e) => {
            println!("python3 not available ({e}); Rust figures only");
            Default::default()
        }
    };

    println!("{:<58} {:>11} {:>11} {:>11} {:>11} {:>8}", "template", "rs compile", "rs render", "py compile", "py render", "speedup");
    let (mut rs_c, mut rs_r, mut py_c, mut py_r, mut n) = (0.0, 0.0, 0.0, 0.0, 0usize);
    for (name, c, r, _ok) in &rows {
        let p = py.get(name);
        let sp = p.map(|(pc, pr)| (pc + pr) / (c + r));
        println!(
            "{:<58} {:>9.1}µs {:>9.1}µs {:>9.1}µs {:>9.1}µs {:>8}",
            name,
            c * 1e6,
            r * 1e6,
            p.map_or(f64::NAN, |x| x.0 * 1e6),
            p.map_or(f64::NAN, |x| x.1 * 1e6),
            sp.map_or("-".into(), |s| format!("{s:.0}×"))
        );
        if let Some((pc, pr)) = p {
            rs_c += c;
            rs_r += r;
            py_c += pc;
            py_r += pr;
            n += 1;
        }
    }
    if n > 0 {
        let nf = n as f64;
        println!();
        println!("templates compared: {n}; renders per template: {renders}");
        println!("mean compile: toolscope {:.1} µs, Python Jinja2 {:.1} µs ({:.0}×)", rs_c / nf * 1e6, py_c / nf * 1e6, py_c / rs_c);
        println!("mean render:  toolscope {:.1} µs, Python Jinja2 {:.1} µs ({:.1}×)", rs_r / nf * 1e6, py_r / nf * 1e6, py_r / rs_r);
        println!(
            "compile+render (one render per compile, as `toolscope render` does): toolscope {:.1} µs, Python {:.1} µs ({:.0}× faster)",
            (rs_c + rs_r) / nf * 1e6,
            (py_c + py_r) / nf * 1e6,
            (py_c + py_r) / (rs_c + rs_r)
        );
    }
}
