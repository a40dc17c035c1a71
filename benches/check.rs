//! `toolscope check` on a big session (prints figures; `cargo bench --bench check`).
//!
//! Generates a ~250 MB session from the shipped probe session's exchanges and annotations
//! (sessions/h-probe-qwen3.jsonl) repeated with new ids, then runs `check --format json` on it
//! in a child process (this bench binary re-run in measuring mode, so the generator's memory is
//! not counted) and prints the wall time and the child's peak RSS (`/proc/self/status` VmHWM).
//! Goal (issue #17): peak ≤ 150 MB, no slower than 4 s in release.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

const TARGET_BYTES: u64 = 250 * 1000 * 1000;
const MEASURE: &str = "TOOLSCOPE_BENCH_CHECK_FILE";

fn vm_hwm_kb() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Writes the probe session's exchanges (and their annotations) again and again, ids
/// renumbered, until the file reaches [`TARGET_BYTES`]. Returns (bytes, exchanges).
fn generate(path: &Path) -> (u64, u64) {
    let src = std::fs::read_to_string("sessions/h-probe-qwen3.jsonl")
        .expect("run from the crate root (sessions/h-probe-qwen3.jsonl)");
    let mut lines = src.lines().filter(|l| !l.trim().is_empty());
    let header = lines.next().unwrap();
    let body: Vec<serde_json::Value> = lines.map(|l| serde_json::from_str(l).unwrap()).collect();
    let per_round = body.iter().filter(|v| v["type"] == "exchange").count() as u64;
    let max_id = body
        .iter()
        .filter_map(|v| v["id"].as_u64().or(v["exchange"].as_u64()))
        .max()
        .unwrap_or(1);
    let mut w = BufWriter::with_capacity(1 << 20, std::fs::File::create(path).unwrap());
    writeln!(w, "{header}").unwrap();
    let (mut bytes, mut exchanges, mut round) = (header.len() as u64 + 1, 0u64, 0u64);
    while bytes < TARGET_BYTES {
        for v in &body {
            let mut v = v.clone();
            for k in ["id", "exchange"] {
                if let Some(id) = v[k].as_u64() {
                    v[k] = (round * max_id + id).into();
                }
            }
            let line = serde_json::to_string(&v).unwrap();
            writeln!(w, "{line}").unwrap();
            bytes += line.len() as u64 + 1;
        }
        exchanges += per_round;
        round += 1;
    }
    w.flush().unwrap();
    (bytes, exchanges)
}

/// Measuring mode: check `path` as `toolscope check --format json` does (the report written
/// as found, here to a sink), print `wall_ms peak_kb exchanges findings`.
fn measure(path: PathBuf) {
    let args = toolscope::cli::check::Args {
        template: None,
        vocab: None,
        request: None,
        response: None,
        response_sse: None,
        tokens: None,
        api: None,
        engine: None,
        format: toolscope::cli::Format::Json,
        files: vec![path],
    };
    let t = Instant::now();
    let tally = toolscope::cli::check::check_into(&args, std::io::sink()).unwrap();
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    println!(
        "{ms:.0} {} {} {}",
        vm_hwm_kb().unwrap_or(0),
        tally.exchanges,
        tally.findings()
    );
}

fn main() {
    if let Some(p) = std::env::var_os(MEASURE) {
        measure(PathBuf::from(p));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // TOOLSCOPE_BENCH_CHECK_KEEP=PATH writes the session there and keeps it (to time another
    // build's `toolscope check` on the same file).
    let path = std::env::var_os("TOOLSCOPE_BENCH_CHECK_KEEP")
        .map(PathBuf::from)
        .unwrap_or_else(|| dir.path().join("big.jsonl"));
    let t = Instant::now();
    let (bytes, exchanges) = generate(&path);
    println!(
        "check bench: generated {:.1} MB, {exchanges} exchanges (sessions/h-probe-qwen3.jsonl repeated) in {:.1} s",
        bytes as f64 / 1e6,
        t.elapsed().as_secs_f64()
    );
    let mut runs = Vec::new();
    for _ in 0..3 {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .env(MEASURE, &path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let s = String::from_utf8_lossy(&out.stdout);
        let f: Vec<f64> = s
            .split_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect();
        println!(
            "  check --format json: {:.0} ms, peak RSS {:.1} MB ({} exchanges listed, {} findings)",
            f[0],
            f[1] / 1024.0,
            f[2],
            f[3]
        );
        runs.push((f[0], f[1] / 1024.0));
    }
    runs.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (ms, mb) = runs[runs.len() / 2];
    println!(
        "check bench: median {ms:.0} ms, peak RSS {mb:.1} MB ({:.2}× the file; goal ≤ 150 MB, ≤ 4,000 ms)",
        mb * 1024.0 * 1024.0 / bytes as f64
    );
}
