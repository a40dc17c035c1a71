//! Parser benchmark (prints figures; `cargo bench --bench parser`).
//!
//! * throughput of the auto parser on a 10 MB mixed stream (prose with `<`, `[` and code,
//!   reasoning blocks, calls in several syntaxes), one-shot and fed in 16-byte chunks;
//! * time to scrub to a random step of a 100,000-step trace (`Trace::state_at`, O(1)), and to
//!   resume a live parser there (`Trace::parser_at`, snapshot + ≤256 chunks re-fed);
//! * the engines' verdicts (`parser::engines::expected`, what `parse --engines` and the Replay
//!   `e` view compute) on a 1 MB code answer full of `{` and `}` and no call, per family that
//!   looks for calls inside prose (hermes through Dynamo's bare-JSON read, llama3): the search
//!   for a call object in prose once cost O(n²) (39.9 s on 90 KB in a debug build).
//!
//! Goals (issue 5): ≥ 200 MB/s; ≤ 1 ms per scrub.
//!
//! `TOOLSCOPE_BENCH_FIXED=1`: only one one-shot parse and one 16-byte-chunk streamed parse of a
//! fixed 1 MB mixed text, for an instruction count that does not depend on the machine's load:
//! `TOOLSCOPE_BENCH_FIXED=1 valgrind --tool=callgrind target/release/deps/parser-*`.

use std::hint::black_box;
use std::time::Instant;

use serde_json::json;
use toolscope::parser::trace::Trace;
use toolscope::parser::{Parser, parse};

const PIECES: &[&str] = &[
    "Sure, here is the plan. We compare a < b and c > d, then index v[3] of the array; nothing special here.\n",
    "<think>\nThe user wants the weather. I should call get_weather with the city they named.\n</think>\n",
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call>\n",
    "```rust\nfn main() { let v: Vec<u8> = vec![1, 2, 3]; println!(\"{:?}\", v); }\n```\n",
    "<tool_call>\n<function=set_limit>\n<parameter=limit>\n5\n</parameter>\n<parameter=unit>\nkg\n</parameter>\n</function>\n</tool_call>\n",
    "<|tool_call>call:get_time{city:<|\"|>London<|\"|>,n:3}<tool_call|>",
    "Plain prose without any markup at all, the most common case in a long answer, repeated to weigh it like real output. ",
    "<function_call>\n{\"name\": \"write_file\", \"arguments\": {\"path\": \"a.txt\", \"content\": \"x\"}}}\n</function_call>\n",
    "<invoke name=\"search\">\n<parameter name=\"q\">rust memchr</parameter>\n</invoke>\n",
];

fn mixed(target: usize) -> String {
    let weights = [6usize, 1, 1, 2, 1, 1, 8, 1, 1];
    let mut s = String::with_capacity(target + 1024);
    let mut i = 0usize;
    while s.len() < target {
        let k = i % PIECES.len();
        for _ in 0..weights[k] {
            s.push_str(PIECES[k]);
        }
        i += 1;
    }
    s
}

struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}

fn main() {
    let tools = json!([
        {"type": "function", "function": {"name": "set_limit", "parameters": {"type": "object", "properties": {"limit": {"anyOf": [{"type": "integer"}, {"type": "null"}]}, "unit": {"type": "string"}}}}},
    ]);
    if std::env::var_os("TOOLSCOPE_BENCH_FIXED").is_some() {
        let text = mixed(1024 * 1024);
        let out = parse(black_box(&text), None, Some(&tools));
        let mut p = Parser::new(None, Some(&tools));
        let mut ev = Vec::new();
        let b = text.as_bytes();
        let mut at = 0;
        while at < b.len() {
            let mut e = (at + 16).min(b.len());
            while !text.is_char_boundary(e) {
                e += 1;
            }
            p.feed_into(&text[at..e], &mut ev);
            ev.clear();
            at = e;
        }
        p.finish_into(&mut ev);
        println!("fixed: {} calls", out.tool_calls.len());
        return;
    }
    engines_verdicts();
    let text = mixed(10 * 1024 * 1024);
    let mb = text.len() as f64 / (1024.0 * 1024.0);

    // one-shot
    let mut best = f64::MAX;
    let mut calls = 0;
    for _ in 0..3 {
        let t0 = Instant::now();
        let out = parse(black_box(&text), None, Some(&tools));
        let dt = t0.elapsed().as_secs_f64();
        calls = out.tool_calls.len();
        best = best.min(dt);
    }
    println!(
        "parser one-shot, auto, {mb:.1} MB mixed stream: {:.0} MB/s ({calls} calls, best of 3: {:.1} ms)",
        mb / best,
        best * 1e3
    );

    // streamed in 16-byte chunks (cut at char boundaries)
    let mut chunks = Vec::new();
    let mut at = 0;
    while at < text.len() {
        let mut e = (at + 16).min(text.len());
        while !text.is_char_boundary(e) {
            e += 1;
        }
        chunks.push(&text[at..e]);
        at = e;
    }
    let mut best = f64::MAX;
    for _ in 0..3 {
        let t0 = Instant::now();
        let mut p = Parser::new(None, Some(&tools));
        let mut ev = Vec::new();
        for c in &chunks {
            p.feed_into(c, &mut ev);
            ev.clear();
        }
        p.finish_into(&mut ev);
        best = best.min(t0.elapsed().as_secs_f64());
    }
    println!(
        "parser streamed, 16-byte chunks ({} chunks): {:.0} MB/s (best of 3: {:.1} ms)",
        chunks.len(),
        mb / best,
        best * 1e3
    );

    // 100,000-step trace
    let small = mixed(900_000);
    let mut pieces: Vec<String> = Vec::new();
    let mut at = 0;
    while pieces.len() < 100_000 - 1 && at < small.len() {
        let mut e = (at + 8).min(small.len());
        while !small.is_char_boundary(e) {
            e += 1;
        }
        pieces.push(small[at..e].to_string());
        at = e;
    }
    let t0 = Instant::now();
    let trace = Trace::record(&pieces, None, Some(&tools));
    let rec = t0.elapsed().as_secs_f64();
    println!(
        "trace: {} steps recorded in {:.0} ms",
        trace.len(),
        rec * 1e3
    );
    let mut rng = Lcg(42);
    let n = 100_000;
    let t0 = Instant::now();
    let mut worst = 0f64;
    let mut sink = 0usize;
    for _ in 0..n {
        let s = (rng.next() as usize) % trace.len();
        let t1 = Instant::now();
        let v = trace.state_at(black_box(s));
        sink += v.content.len() + v.tool_calls.len() + v.events.len();
        worst = worst.max(t1.elapsed().as_secs_f64());
    }
    let avg = t0.elapsed().as_secs_f64() / n as f64;
    println!(
        "scrub to a random step (state_at): mean {:.3} µs, worst {:.3} µs over {n} random steps ({sink})",
        avg * 1e6,
        worst * 1e6
    );
    let m = 2_000;
    let t0 = Instant::now();
    let mut worst = 0f64;
    for _ in 0..m {
        let s = (rng.next() as usize) % trace.len();
        let t1 = Instant::now();
        let p = trace.parser_at(black_box(s));
        black_box(p.state());
        worst = worst.max(t1.elapsed().as_secs_f64());
    }
    let avg = t0.elapsed().as_secs_f64() / m as f64;
    println!(
        "resume a live parser at a random step (parser_at): mean {:.1} µs, worst {:.1} µs over {m} steps",
        avg * 1e6,
        worst * 1e6
    );
}

/// The engines' verdicts on a 1 MB code answer (braces everywhere, no call), per family.
fn engines_verdicts() {
    let line = "fn f(v: &[u8]) -> Option<u8> { if v.is_empty() { None } else { Some(v[0]) } }\n";
    let text = line.repeat(1024 * 1024 / line.len());
    let mb = text.len() as f64 / (1024.0 * 1024.0);
    for family in [
        toolscope::parser::Syntax::Hermes,
        toolscope::parser::Syntax::Llama3,
    ] {
        let t0 = Instant::now();
        let (_, out) = toolscope::parser::engines::expected(family, black_box(&text), None);
        let dt = t0.elapsed().as_secs_f64();
        println!(
            "engines' verdicts, {} family, {mb:.1} MB code answer: {:.1} ms ({} engines)",
            family.name(),
            dt * 1e3,
            out.len()
        );
    }
}
