//! Prints SSE decoding and OpenAI reassembly throughput on a ~10 MB synthetic
//! `chat.completion.chunk` stream (content, reasoning and tool-call argument deltas with
//! multi-byte text), fed in chunks of 1–1500 bytes as TCP would deliver them.
//!
//! Run: `cargo bench --bench stream` (figures in MB/s of SSE body bytes).

use std::time::Instant;

use toolscope::stream::reassemble::reassemble_openai;
use toolscope::stream::sse::SseDecoder;

fn body(target: usize) -> Vec<u8> {
    let mut s = String::with_capacity(target + 4096);
    let mut i = 0u64;
    while s.len() < target {
        let delta = match i % 4 {
            0 => serde_json::json!({"content": format!("word {i} é🦀 ")}),
            1 => serde_json::json!({"reasoning_content": "think ｜▁ "}),
            2 => {
                serde_json::json!({"tool_calls":[{"index": i / 1000, "id": format!("call_{}", i / 1000), "function":{"name":"f","arguments":""}}]})
            }
            _ => {
                serde_json::json!({"tool_calls":[{"index": i / 1000, "function":{"arguments":"{\"k\": 1}"}}]})
            }
        };
        let ch = serde_json::json!({"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":delta,"finish_reason":null}]});
        s.push_str("data: ");
        s.push_str(&ch.to_string());
        s.push_str("\r\n\r\n");
        i += 1;
    }
    s.push_str("data: [DONE]\n\n");
    s.into_bytes()
}

fn main() {
    let b = body(10 << 20);
    let mb = b.len() as f64 / 1e6;
    // Deterministic chunk sizes 1..=1500.
    let mut sizes = Vec::new();
    let (mut x, mut at) = (12345u64, 0usize);
    while at < b.len() {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let n = ((x >> 33) % 1500 + 1) as usize;
        sizes.push(n.min(b.len() - at));
        at += n;
    }
    let mut best_dec = f64::MAX;
    let mut best_re = f64::MAX;
    let mut n_events = 0;
    for _ in 0..3 {
        let t = Instant::now();
        let mut d = SseDecoder::new();
        let mut evs = Vec::new();
        let mut at = 0;
        for (i, &n) in sizes.iter().enumerate() {
            d.feed_into(&b[at..at + n], Some(i as u64), &mut evs);
            at += n;
        }
        evs.extend(d.finish());
        best_dec = best_dec.min(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let r = reassemble_openai(&evs);
        best_re = best_re.min(t.elapsed().as_secs_f64());
        n_events = evs.len();
        std::hint::black_box(r);
    }
    println!(
        "stream body: {mb:.1} MB, {} chunks, {n_events} events",
        sizes.len()
    );
    println!(
        "sse decode:      {:8.1} MB/s  ({:.1} ms)",
        mb / best_dec,
        best_dec * 1e3
    );
    println!(
        "openai reassembly: {:6.1} MB/s  ({:.1} ms, JSON parse of every event included)",
        mb / best_re,
        best_re * 1e3
    );
}
