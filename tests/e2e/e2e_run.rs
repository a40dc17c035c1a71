//! End-to-end (issue #25 item 6): `toolscope run` in front of real agents against
//! llama-server build 11434, with no configuration of the agent's own:
//!
//! * `toolscope run python -- tests/support/loop_agent.py env loop`: the official `openai` SDK's
//!   4-turn tool loop (tests/e2e/e2e_loop.rs), whose client reads only `OPENAI_BASE_URL` and
//!   `OPENAI_API_KEY` from the environment `run` gives it; the session must hold what
//!   e2e_loop's proxy run holds (same turns, links, sub-agent, reuse = `timings.cache_n`).
//! * `toolscope run codex -- exec …`: Codex CLI 0.169.0 with no `-c` of the test's own; the
//!   session must hold what e2e_responses's proxy run holds (Codex's `/v1/responses`
//!   exchanges, complete and analysed, the tools the server log says it dropped reported,
//!   `check` exit 1).
//!
//! Expected values come from the agent (its JSON lines, its exit code), the server (its log,
//! `timings.cache_n`) and the proxy's start line (the port), never from `run`'s code.

use crate::support;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Instant;

use serde_json::Value;

use super::e2e_loop::{loop_recorded, loop_server};
use super::e2e_responses::codex_session_analysed;

/// The port in the proxy's start line (`toolscope proxy: http://127.0.0.1:PORT → …`).
fn proxy_port(stderr: &str) -> u16 {
    let rest = stderr
        .lines()
        .find_map(|l| l.strip_prefix("toolscope proxy: http://127.0.0.1:"))
        .unwrap_or_else(|| panic!("no start line: {stderr}"));
    rest.split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// The session path `run` printed last (`toolscope run: AGENT exited with N; session: P`).
fn printed_session(stderr: &str) -> String {
    let last = stderr.lines().last().unwrap_or("");
    last.split_once("; session: ")
        .unwrap_or_else(|| panic!("last line: {stderr}"))
        .1
        .to_owned()
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
#[ignore = "e2e: needs llama-server"]
fn run_records_the_python_loop_through_openai_base_url() {
    let Some((server, python)) = loop_server() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join("run-loop.jsonl");
    let t = Instant::now();
    let out = Command::new(support::bin())
        .args(["run", "--upstream", &server.base_url(), "--session"])
        .arg(&session)
        .arg(&python)
        .arg("--")
        .arg(support::root().join("tests/support/loop_agent.py"))
        .args(["env", "loop"])
        // nothing of the test's own reaches the SDK: only what `run` sets
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    eprintln!(
        "toolscope run (loop): {:.1} s\n{stderr}",
        t.elapsed().as_secs_f64()
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    proxy_port(&stderr);
    assert_eq!(printed_session(&stderr), session.display().to_string());
    // the agent's stdout is toolscope's: one JSON line per request it made
    let main: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    loop_recorded(&main, &session);
    // one recorded chat exchange per request the agent made, nothing else on that path
    let s = toolscope::session::read_session(&session).unwrap();
    let chats = s
        .exchanges
        .iter()
        .filter(|e| e.request.path == "/v1/chat/completions")
        .count();
    assert_eq!(chats, main.len(), "{stderr}");
}

#[test]
#[ignore = "e2e: needs llama-server"]
fn run_records_codex_exec_with_no_other_configuration() {
    let (Some((model, corpus)), Some(codex)) =
        (support::smollm2_and_corpus(), super::e2e_responses::codex())
    else {
        assert!(!support::setup_required(), "setup artefacts missing");
        return;
    };
    let server = toolscope::record::llama::LlamaServer::start_on(
        toolscope::record::llama::LlamaOptions {
            model,
            chat_template_file: Some(corpus.join("Qwen-Qwen3-0.6B.jinja")),
            verbose: false,
            // the server's own cap on each reply (a 135M model on 2 shared cores writes about
            // 1–3 tokens/s under load): bounds the run, configures nothing in Codex
            extra_args: vec!["-n".into(), "96".into()],
            ctx: 32768,
        },
        toolscope::record::llama::free_port().unwrap(),
        &[("LLAMA_SERVER_SLOTS_DEBUG", "1")],
    )
    .expect("llama-server starts");
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join("run-codex.jsonl");
    let work = dir.path().join("work");
    // a fresh CODEX_HOME: no config.toml or login of the machine's user reaches Codex
    let home = dir.path().join("codex-home");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(work.join("notes.txt"), "hello\n").unwrap();
    std::fs::write(work.join("main.py"), "print('hi')\n").unwrap();
    let t = Instant::now();
    let out = Command::new(support::bin())
        .current_dir(&work)
        .args(["run", "--upstream", &server.base_url(), "--session"])
        .arg(&session)
        .arg(&codex)
        .args(["--", "exec", "--skip-git-repo-check"])
        .arg("List the files in this directory.")
        .env("CODEX_HOME", &home)
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    eprintln!(
        "toolscope run codex: {:.1} s, exit {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        t.elapsed().as_secs_f64(),
        out.status
    );
    assert_eq!(printed_session(&stderr), session.display().to_string());
    // Codex's exit code is toolscope's; a run that answered exits 0
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let port = proxy_port(&stderr);
    let s = toolscope::session::read_session(&session).unwrap();
    let model = s.header.engine.as_ref().and_then(|e| e.model.clone());
    let model = model.expect("the proxy learnt the upstream's model");
    // Codex talked to the proxy `run` defined for it: its requests carry the proxy's host
    for ex in s
        .exchanges
        .iter()
        .filter(|e| e.request.path.ends_with("/responses"))
    {
        // the upstream's model, as `run` told Codex (not Codex's default model, whose tools
        // llama-server b11434 rejects: HTTP 400)
        assert_eq!(
            ex.request_json().unwrap()["model"],
            model.as_str(),
            "#{}",
            ex.id
        );
        let host = ex
            .request
            .headers
            .iter()
            .find(|(k, _)| k == "host")
            .map(|(_, v)| v.as_str());
        assert_eq!(
            host,
            Some(format!("127.0.0.1:{port}").as_str()),
            "#{}",
            ex.id
        );
        assert_eq!(ex.request.path, "/v1/responses", "#{}", ex.id);
    }
    codex_session_analysed(&session, &server.log_text());
}

/// The session path is printed even when the agent fails (here: Codex's own usage error, exit
/// 2), and its code is toolscope's.
#[test]
#[ignore = "e2e: needs Codex CLI"]
fn run_passes_codex_s_own_exit_code_through() {
    let Some(codex) = super::e2e_responses::codex() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join("usage.jsonl");
    let direct = Command::new(&codex)
        .arg("--no-such-flag")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let out = Command::new(support::bin())
        .args(["run", "--upstream", "http://127.0.0.1:9", "--session"])
        .arg(&session)
        .arg(&codex)
        .args(["--", "--no-such-flag"])
        .env("CODEX_HOME", dir.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let (_, stderr) = text(&out);
    assert_ne!(direct.status.code(), Some(0));
    assert_eq!(out.status.code(), direct.status.code(), "{stderr}");
    assert_eq!(printed_session(&stderr), session.display().to_string());
    assert!(Path::new(&session).exists());
}
