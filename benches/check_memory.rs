//! `check`'s peak memory on one huge streamed exchange (plain `main`, prints figures, asserts
//! nothing; issue #27 item 2). Writes a session holding one streamed exchange of
//! `TOOLSCOPE_BENCH_MB` MB (default 100) of response body, runs `toolscope check` on it as a
//! child process and prints the child's peak resident memory (`ru_maxrss` of the waited-for
//! child, Linux: KiB), its wall time, and the factor peak ÷ exchange size. Kinds (each run):
//! - `openai-content`: OpenAI chat SSE, one `delta.content` of 8 characters per event;
//! - `openai-args`: OpenAI chat SSE, one tool call whose `arguments` stream 8 characters per
//!   event;
//! - `ollama`: Ollama `/api/chat` NDJSON, one `message.content` of 8 characters per line.
//!
//! The recorded body is cut into 64 KiB network chunks, as the recorder stores reads. Goal:
//! peak ≤ 10× the exchange (before the bounded replay: ~175×, 1.9 GB for 10 MB).
//!
//! Run: `cargo bench --bench check_memory` (release). `TOOLSCOPE_BENCH_MB` sets the size in MB;
//! `TOOLSCOPE_BENCH_KIND` runs one kind; `TOOLSCOPE_BENCH_BIN` measures another toolscope
//! binary (e.g. main's, for a before/after); `TOOLSCOPE_BENCH_CMD=export` measures
//! `export --format otel` instead of `check`.

use std::io::Write;
use std::time::Instant;

use serde_json::json;

const PIECE: &str = "abcdefgh";

/// The response body: `size` bytes (at least) of stream events of `kind`.
fn body(kind: &str, size: usize) -> (String, &'static str) {
    let mut out = String::with_capacity(size + 4096);
    let mut i = 0usize;
    match kind {
        "ollama" => {
            while out.len() < size {
                let line = json!({"model": "m", "created_at": "2026-01-01T00:00:00Z",
                    "message": {"role": "assistant", "content": PIECE}, "done": false});
                out.push_str(&line.to_string());
                out.push('\n');
            }
            let last = json!({"model": "m", "created_at": "2026-01-01T00:00:00Z",
                "message": {"role": "assistant", "content": ""}, "done": true,
                "done_reason": "stop"});
            out.push_str(&last.to_string());
            out.push('\n');
            (out, "application/x-ndjson")
        }
        _ => {
            let args = kind == "openai-args";
            let ev = |delta: serde_json::Value, finish: serde_json::Value| {
                let v = json!({"id": "chatcmpl-1", "object": "chat.completion.chunk",
                    "created": 1, "model": "m",
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
                format!("data: {v}\n\n")
            };
            if args {
                out.push_str(&ev(
                    json!({"role": "assistant", "content": null, "tool_calls": [{"index": 0,
                        "id": "call_1", "type": "function",
                        "function": {"name": "write", "arguments": "{\"text\": \""}}]}),
                    serde_json::Value::Null,
                ));
            }
            while out.len() < size {
                let delta = if args {
                    json!({"tool_calls": [{"index": 0, "function": {"arguments": PIECE}}]})
                } else {
                    json!({"content": PIECE})
                };
                out.push_str(&ev(delta, serde_json::Value::Null));
                i += 1;
            }
            if args {
                out.push_str(&ev(
                    json!({"tool_calls": [{"index": 0, "function": {"arguments": "\"}"}}]}),
                    serde_json::Value::Null,
                ));
            }
            let reason = if args { "tool_calls" } else { "stop" };
            out.push_str(&ev(json!({}), json!(reason)));
            out.push_str("data: [DONE]\n\n");
            let _ = i;
            (out, "text/event-stream")
        }
    }
}

/// Writes the session (header + one exchange) to `path`; returns the body's size in bytes.
fn write_session(path: &std::path::Path, kind: &str, size: usize) -> usize {
    let (text, ctype) = body(kind, size);
    let (api_path, req) = if kind == "ollama" {
        (
            "/api/chat",
            json!({"model": "m", "stream": true,
                "messages": [{"role": "user", "content": "write"}]}),
        )
    } else {
        (
            "/v1/chat/completions",
            json!({"model": "m", "stream": true,
                "messages": [{"role": "user", "content": "write"}],
                "tools": [{"type": "function", "function": {"name": "write",
                    "parameters": {"type": "object",
                        "properties": {"text": {"type": "string"}}}}}]}),
        )
    };
    let mut chunks = Vec::new();
    let mut at = 0;
    while at < text.len() {
        let end = (at + 64 * 1024).min(text.len());
        chunks.push(json!({"t_us": chunks.len() as u64 * 1000, "text": &text[at..end]}));
        at = end;
    }
    let header = json!({"type": "header", "format": "toolscope-session/1",
        "created": "2026-01-01T00:00:00Z", "tool": "check_memory bench"});
    let exchange = json!({"type": "exchange", "id": 1, "started": "2026-01-01T00:00:00Z",
        "request": {"method": "POST", "path": api_path,
            "headers": [["content-type", "application/json"]],
            "body": {"text": req.to_string()}},
        "response": {"status": 200, "headers": [["content-type", ctype]], "chunks": chunks}});
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    writeln!(f, "{header}").unwrap();
    writeln!(f, "{exchange}").unwrap();
    f.flush().unwrap();
    text.len()
}

/// Runs `bin args…` to completion; returns (exit code, peak RSS in bytes, seconds).
fn run(bin: &std::ffi::OsStr, args: &[&std::ffi::OsStr]) -> (Option<i32>, u64, f64) {
    let t = Instant::now();
    let status = std::process::Command::new(bin)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("toolscope binary");
    let secs = t.elapsed().as_secs_f64();
    // ru_maxrss of RUSAGE_CHILDREN: the largest peak of the children waited for so far, so
    // each measurement runs in its own process (see main).
    (status.code(), children_peak_rss(), secs)
}

fn main() {
    let bin = std::env::var_os("TOOLSCOPE_BENCH_BIN")
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_toolscope").into());
    let mb: usize = std::env::var("TOOLSCOPE_BENCH_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let cmd = std::env::var("TOOLSCOPE_BENCH_CMD").unwrap_or_else(|_| "check".into());
    // one measurement per process: RUSAGE_CHILDREN keeps the maximum over all children
    if let Ok(kind) = std::env::var("TOOLSCOPE_BENCH_ONE") {
        let dir =
            std::env::temp_dir().join(format!("toolscope-check-memory-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let session = dir.join("one.jsonl");
        let size = write_session(&session, &kind, mb * 1_000_000);
        let s = session.as_os_str();
        let args: Vec<&std::ffi::OsStr> = if cmd == "export" {
            vec!["export".as_ref(), s, "--format".as_ref(), "otel".as_ref()]
        } else {
            vec!["check".as_ref(), s]
        };
        let (code, peak, secs) = run(&bin, &args);
        let _ = std::fs::remove_dir_all(&dir);
        println!(
            "{cmd:6} {kind:15} exchange {:7.1} MB  peak RSS {:7.1} MB  factor {:5.2}×  {secs:6.2} s  exit {code:?}",
            size as f64 / 1e6,
            peak as f64 / 1e6,
            peak as f64 / size as f64,
        );
        return;
    }
    let kinds = match std::env::var("TOOLSCOPE_BENCH_KIND") {
        Ok(k) => vec![k],
        Err(_) => vec![
            "openai-content".into(),
            "openai-args".into(),
            "ollama".into(),
        ],
    };
    let me = std::env::current_exe().unwrap();
    for kind in kinds {
        let status = std::process::Command::new(&me)
            .env("TOOLSCOPE_BENCH_ONE", &kind)
            .status()
            .unwrap();
        assert!(status.success(), "measuring {kind}");
    }
}

/// `ru_maxrss` of `RUSAGE_CHILDREN` in bytes: the largest peak RSS of the children waited for
/// so far (getrusage(2); Linux reports KiB). No safe std API reads it.
#[allow(unsafe_code)]
fn children_peak_rss() -> u64 {
    // SAFETY: `rusage` is plain data (all-zero is a valid value) and getrusage only writes
    // into the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_CHILDREN is a valid `who`.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    ru.ru_maxrss as u64 * 1024
}
