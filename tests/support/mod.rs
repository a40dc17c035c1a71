//! Shared helpers for integration tests: where the setup artefacts are, and whether a missing
//! one is a failure (CI, `scripts/test.sh`) or a skip (a plain `cargo test` on a fresh clone).
#![allow(dead_code)]

pub mod tui;
pub mod whatif;

use std::path::PathBuf;

/// Repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The field cases copied from shared/cases (tests/cases/NN-name/).
pub fn cases_dir() -> PathBuf {
    root().join("tests/cases")
}

/// True when setup artefacts must be present (`TOOLSCOPE_REQUIRE_SETUP=1`, set by
/// scripts/test.sh and .ci/run; or `CI=true`).
pub fn setup_required() -> bool {
    std::env::var("TOOLSCOPE_REQUIRE_SETUP").is_ok_and(|v| v == "1")
        || std::env::var("CI").is_ok_and(|v| v == "true")
}

fn cache() -> PathBuf {
    std::env::var_os("TOOLSCOPE_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            dirs::home_dir()
                .unwrap_or_default()
                .join(".cache/toolscope")
        })
}

fn artefact(env: &str, default: PathBuf, what: &str) -> Option<PathBuf> {
    let p = std::env::var_os(env).map(PathBuf::from).unwrap_or(default);
    if p.exists() {
        Some(p)
    } else if setup_required() {
        panic!(
            "{what} not found at {} (${env}); run scripts/setup.sh",
            p.display()
        );
    } else {
        eprintln!(
            "SKIP: {what} not found at {}; run scripts/setup.sh (or scripts/test.sh)",
            p.display()
        );
        None
    }
}

/// llama.cpp `models/templates/` (the template corpus).
pub fn corpus() -> Option<PathBuf> {
    artefact(
        "TOOLSCOPE_CORPUS",
        cache().join("src/llama.cpp/models/templates"),
        "template corpus",
    )
}

/// llama.cpp source tree (build 11434).
pub fn llama_src() -> Option<PathBuf> {
    artefact(
        "TOOLSCOPE_LLAMA_SRC",
        cache().join("src/llama.cpp"),
        "llama.cpp source",
    )
}

/// The llama-server binary.
pub fn llama_server() -> Option<PathBuf> {
    artefact(
        "TOOLSCOPE_LLAMA_SERVER",
        cache().join("bin/llama-server"),
        "llama-server binary",
    )
}

/// SmolLM2-135M-Instruct Q4_1 GGUF.
pub fn smollm2() -> Option<PathBuf> {
    artefact(
        "TOOLSCOPE_SMOLLM2",
        cache().join("models/SmolLM2-135M-Instruct.Q4_1.gguf"),
        "SmolLM2 GGUF",
    )
}

/// Gemma 3 270M Q4_K_M GGUF.
pub fn gemma3() -> Option<PathBuf> {
    artefact(
        "TOOLSCOPE_GEMMA3",
        cache().join("models/gemma-3-270m-q4_k_m.gguf"),
        "Gemma 3 GGUF",
    )
}

/// Reads a case file `tests/cases/<case>/<file>` as JSON.
pub fn case_json(case: &str, file: &str) -> serde_json::Value {
    let p = cases_dir().join(case).join(file);
    let s = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&s).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Waits for `child` to exit; a hang guard, not a timing assertion: after `guard` the child is
/// killed and the test fails naming `what`, so a hung process fails its test instead of the run.
pub fn wait_guarded(
    child: &mut std::process::Child,
    guard: std::time::Duration,
    what: &str,
) -> std::process::ExitStatus {
    let start = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        if start.elapsed() > guard {
            let _ = child.kill();
            let _ = child.wait();
            panic!("hang guard: {what} still running after {guard:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Path of the built `toolscope` binary.
pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_toolscope"))
}

/// The SmolLM2 GGUF and the template corpus, when they and the llama-server binary are all
/// present; `None` (the e2e test skips, or panics under [`setup_required`]) otherwise.
pub fn smollm2_and_corpus() -> Option<(PathBuf, PathBuf)> {
    let (Some(_), Some(model), Some(corpus)) = (llama_server(), smollm2(), corpus()) else {
        return None;
    };
    Some((model, corpus))
}

/// Starts llama-server (build 11434) on a free loopback port with `model`, the corpus
/// template `template` (`--chat-template-file`) when given, `-v` when `verbose`, and a context
/// of `ctx` tokens. Panics with the server's start error (log tail) when it does not come up.
pub fn start_llama(
    model: &std::path::Path,
    template: Option<PathBuf>,
    verbose: bool,
    ctx: u32,
) -> toolscope::record::llama::LlamaServer {
    toolscope::record::llama::LlamaServer::start(toolscope::record::llama::LlamaOptions {
        model: model.to_owned(),
        chat_template_file: template,
        verbose,
        extra_args: vec![],
        ctx,
    })
    .expect("llama-server starts")
}

/// The Python of the client venv with the official openai / anthropic / ollama SDKs
/// (`$TOOLSCOPE_PYTHON`, made by scripts/setup.sh).
pub fn sdk_python() -> Option<PathBuf> {
    artefact(
        "TOOLSCOPE_PYTHON",
        cache().join("venv/bin/python"),
        "client SDK venv (python)",
    )
}

/// [`read_http_request`] on a blocking connection (a canned server on a plain thread).
pub fn read_http_request_sync(s: &mut std::net::TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 4096];
    let mut fill = |buf: &mut Vec<u8>| -> Option<()> {
        let n = std::io::Read::read(s, &mut tmp).ok()?;
        (n > 0).then(|| buf.extend_from_slice(&tmp[..n]))
    };
    let pos = loop {
        fill(&mut buf)?;
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos;
        }
    };
    let head = String::from_utf8_lossy(&buf[..pos]).to_string();
    let len: usize = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().parse().unwrap_or(0))
        })
        .unwrap_or(0);
    while buf.len() < pos + 4 + len {
        fill(&mut buf)?;
    }
    Some((head, buf[pos + 4..pos + 4 + len].to_vec()))
}

/// Reads one HTTP/1.1 request from a canned server's connection: (head, body by
/// `content-length`); `None` when the client closed first.
pub async fn read_http_request(s: &mut tokio::net::TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 4096];
    loop {
        let n = tokio::io::AsyncReadExt::read(s, &mut tmp).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&tmp[..n]);
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..pos]).to_string();
            let len: usize = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse().unwrap_or(0))
                })
                .unwrap_or(0);
            while buf.len() < pos + 4 + len {
                let n = tokio::io::AsyncReadExt::read(s, &mut tmp).await.ok()?;
                if n == 0 {
                    return None;
                }
                buf.extend_from_slice(&tmp[..n]);
            }
            return Some((head, buf[pos + 4..pos + 4 + len].to_vec()));
        }
    }
}
