//! End-to-end (issue #25): a real agent loop through `toolscope proxy --headless` against
//! llama-server build 11434 (SmolLM2-135M, the Qwen3-0.6B corpus template, one slot,
//! `LLAMA_SERVER_SLOTS_DEBUG=1` so the raw reply is recorded).
//!
//! The agent is tests/support/loop_agent.py on the official `openai` SDK ($TOOLSCOPE_PYTHON): a
//! 4-turn tool loop with one parallel call and one sub-agent conversation, the same loop with a
//! timestamp in its system prompt, and a stuck loop with a call answered under a wrong id.
//! Expected values come from the engine itself: `timings.cache_n` of every turn, and the
//! calls the SDK parsed.

use crate::support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::Value;
use toolscope::conversation::{Cause, Loop, of_session};
use toolscope::record::llama::{LlamaOptions, LlamaServer, free_port};
use toolscope::session::read_session;

/// `toolscope proxy --headless` on a free loopback port; the child and its URL.
fn start_proxy(upstream: &str, session: &Path) -> (Child, String) {
    let mut child = Command::new(support::bin())
        .args(["proxy", "--headless", "--upstream", upstream])
        .args(["--listen", "127.0.0.1:0", "--session"])
        .arg(session)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start toolscope proxy");
    let Some(stderr) = child.stderr.take() else {
        let _ = child.kill();
        let _ = child.wait();
        panic!("no stderr pipe");
    };
    let mut err = BufReader::new(stderr);
    let mut line = String::new();
    loop {
        line.clear();
        if err.read_line(&mut line).unwrap_or(0) == 0 {
            let _ = child.kill();
            panic!("the proxy exited before listening: {:?}", child.wait());
        }
        if let Some(rest) = line.strip_prefix("toolscope proxy: http://") {
            let addr = rest.split_whitespace().next().unwrap().to_owned();
            std::thread::spawn(move || {
                let mut sink = String::new();
                while err.read_line(&mut sink).unwrap_or(0) > 0 {
                    sink.clear();
                }
            });
            return (child, format!("http://{addr}"));
        }
    }
}

fn stop_proxy(mut child: Child) {
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    assert!(child.wait().unwrap().success());
}

/// Runs the agent in `mode`; one JSON line per request it made.
pub(crate) fn agent(python: &Path, base: &str, mode: &str) -> Vec<Value> {
    let out = Command::new(python)
        .arg(support::root().join("tests/support/loop_agent.py"))
        .args([base, mode])
        .output()
        .expect("run the agent");
    assert!(
        out.status.success(),
        "agent {mode} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn check_json(session: &Path) -> Value {
    let out = Command::new(support::bin())
        .args(["check", "--format", "json"])
        .arg(session)
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Every turn whose reuse and engine counter are known: (exchange, toolscope's shared prefix,
/// `timings.cache_n`).
fn reuse_vs_engine(l: &Loop) -> Vec<(u64, usize, u64)> {
    l.conversations
        .iter()
        .flat_map(|c| &c.turns)
        .filter_map(|t| {
            let r = t.reuse.as_ref()?;
            Some((t.exchange, r.shared, r.engine.cache_n?))
        })
        .collect()
}

/// llama-server for the loop (SmolLM2, the Qwen3-0.6B corpus template, one slot, slots
/// debug on, 8192 tokens of context), and the client venv's Python; `None` when setup is
/// missing (a skip, or a panic under [`support::setup_required`]).
pub(crate) fn loop_server() -> Option<(LlamaServer, std::path::PathBuf)> {
    let (Some((model, _)), Some(python), Some(src)) = (
        support::smollm2_and_corpus(),
        support::sdk_python(),
        support::llama_src(),
    ) else {
        assert!(!support::setup_required(), "setup artefacts missing");
        return None;
    };
    let template = src.join("models/templates/Qwen-Qwen3-0.6B.jinja");
    let server = LlamaServer::start_on(
        LlamaOptions {
            model,
            chat_template_file: Some(template),
            verbose: false,
            extra_args: vec!["-np".into(), "1".into()],
            ctx: 8192,
        },
        free_port().unwrap(),
        &[("LLAMA_SERVER_SLOTS_DEBUG", "1")],
    )
    .expect("llama-server starts");
    Some((server, python))
}

#[test]
#[ignore = "e2e: needs llama-server"]
fn a_real_agent_loop_is_linked_and_its_prompt_reuse_matches_cache_n() {
    let Some((server, python)) = loop_server() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join("loop.jsonl");
    let (proxy, base) = start_proxy(&server.base_url(), &session);
    let main = agent(&python, &base, "loop");
    stop_proxy(proxy);
    loop_recorded(&main, &session);
}

/// What the `loop` mode's run must have recorded (shared with `toolscope run`,
/// tests/e2e/e2e_run.rs), against `main`, the agent's own lines: a parallel reply and a `task`
/// call that ran the sub-agent; one turn per main request; every call linked to its result; the
/// sub-agent started by the `task` call; per-turn reuse equal to `timings.cache_n`.
pub(crate) fn loop_recorded(main: &[Value], session: &Path) {
    // what the SDK saw: a parallel reply, then a task call that ran the sub-agent
    let calls: Vec<usize> = main
        .iter()
        .filter(|r| r["conversation"] == "main")
        .map(|r| r["calls"].as_array().unwrap().len())
        .collect();
    assert!(calls.len() >= 4, "{main:#?}");
    assert!(calls.iter().any(|&n| n >= 2), "a parallel reply: {main:#?}");
    assert!(
        main.iter().any(|r| r["conversation"] == "subagent"),
        "{main:#?}"
    );

    let s = read_session(session).unwrap();
    let l = of_session(&s);
    let conv = &l.conversations[0];
    assert_eq!(conv.turns.len(), calls.len(), "{l:#?}");
    // every call is linked to the result that answered it, or to the sub-agent it started
    for c in &l.calls {
        assert!(
            c.result.is_some(),
            "call {} of exchange {} unanswered: {l:#?}",
            c.index,
            c.exchange
        );
    }
    let sub = l
        .conversations
        .iter()
        .find(|c| c.started_by.is_some())
        .expect("a sub-agent");
    let (ex, idx) = sub.started_by.unwrap();
    let starter = l
        .calls
        .iter()
        .find(|c| c.exchange == ex && c.index == idx)
        .unwrap();
    assert_eq!(starter.call.name, "task");
    // toolscope's per-turn reuse is the engine's own count
    let pairs = reuse_vs_engine(&l);
    assert!(pairs.len() >= 3, "{l:#?}");
    for (ex, ours, cache_n) in &pairs {
        assert_eq!(*ours as u64, *cache_n, "exchange {ex}: {l:#?}");
    }
}

#[test]
#[ignore = "e2e: needs llama-server"]
fn a_changing_timestamp_in_the_system_prompt_is_named_and_a_stuck_loop_is_reported() {
    let (Some((model, _)), Some(python), Some(src)) = (
        support::smollm2_and_corpus(),
        support::sdk_python(),
        support::llama_src(),
    ) else {
        assert!(!support::setup_required(), "setup artefacts missing");
        return;
    };
    let template = src.join("models/templates/Qwen-Qwen3-0.6B.jinja");
    let server = LlamaServer::start_on(
        LlamaOptions {
            model,
            chat_template_file: Some(template),
            verbose: false,
            extra_args: vec!["-np".into(), "1".into()],
            ctx: 8192,
        },
        free_port().unwrap(),
        &[("LLAMA_SERVER_SLOTS_DEBUG", "1")],
    )
    .expect("llama-server starts");
    let dir = tempfile::tempdir().unwrap();
    let ts = dir.path().join("timestamp.jsonl");
    let (proxy, base) = start_proxy(&server.base_url(), &ts);
    agent(&python, &base, "timestamp");
    stop_proxy(proxy);
    let l = of_session(&read_session(&ts).unwrap());
    let turns: Vec<_> = l.conversations[0].turns.iter().skip(1).collect();
    assert!(!turns.is_empty(), "{l:#?}");
    for t in &turns {
        let r = t.reuse.as_ref().expect("reuse");
        assert!(
            matches!(
                r.cause,
                Cause::SystemPrompt {
                    timestamp: true,
                    ..
                }
            ),
            "{r:#?}"
        );
        let cache_n = r.engine.cache_n.expect("timings.cache_n") as usize;
        if t.parent == Some(t.exchange - 1) {
            // the slot still holds the previous turn: the engine reused exactly the prefix
            assert_eq!(r.shared, cache_n, "{r:#?}");
        } else {
            // the sub-agent ran on the one slot in between, and a prefix this short is not
            // restored from the prompt cache: the engine kept less than the turn could share
            assert!(cache_n <= r.shared, "{r:#?}");
        }
    }
    let report = check_json(&ts);
    let prefix: Vec<&Value> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["rule"] == "cache.prefix_changed")
        .collect();
    assert_eq!(prefix.len(), turns.len(), "{report:#}");
    assert!(
        prefix[0]["message"].as_str().unwrap().contains("timestamp"),
        "{report:#}"
    );

    let stuck = dir.path().join("stuck.jsonl");
    let (proxy, base) = start_proxy(&server.base_url(), &stuck);
    agent(&python, &base, "stuck");
    stop_proxy(proxy);
    let report = check_json(&stuck);
    let rules: Vec<&str> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["rule"].as_str().unwrap())
        .collect();
    for want in [
        "loop.repeated_call",
        "loop.call_unanswered",
        "loop.result_unknown_id",
    ] {
        assert!(rules.contains(&want), "{want}: {report:#}");
    }
}

/// A `system` entry inside Anthropic `messages` (Claude Code ≥ 2.1.154) sent to llama-server
/// b11434 with the SmolLM3 template: the server's `/v1/messages` conversion passes it through as
/// a system message (server-chat.cpp `server_chat_convert_anthropic_to_oai`) and the template
/// prints only a leading system message, so the recorded server render lacks it.
#[test]
#[ignore = "e2e: needs llama-server"]
fn a_system_entry_inside_anthropic_messages_that_the_server_drops_is_reported() {
    let (Some((model, _)), Some(src)) = (support::smollm2_and_corpus(), support::llama_src())
    else {
        assert!(!support::setup_required(), "setup artefacts missing");
        return;
    };
    let template = src.join("models/templates/HuggingFaceTB-SmolLM3-3B.jinja");
    let server = LlamaServer::start_on(
        LlamaOptions {
            model,
            chat_template_file: Some(template),
            verbose: false,
            extra_args: vec![],
            ctx: 4096,
        },
        free_port().unwrap(),
        &[],
    )
    .expect("llama-server starts");
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join("anthropic.jsonl");
    let (proxy, base) = start_proxy(&server.base_url(), &session);
    let body = serde_json::json!({"model": "smollm2", "max_tokens": 8, "system": "You are a CLI.",
        "messages": [{"role": "user", "content": "List the files in this directory."},
                     {"role": "system", "content": "PostToolUse hook output: 3 files changed, lint passed."}]});
    let out = Command::new("curl")
        .args(["-s", "-H", "content-type: application/json", "-d"])
        .arg(body.to_string())
        .arg(format!("{base}/v1/messages"))
        .output()
        .unwrap();
    assert!(out.status.success());
    stop_proxy(proxy);
    let report = check_json(&session);
    let dropped: Vec<&Value> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["rule"] == "input.message_dropped")
        .collect();
    assert_eq!(dropped.len(), 1, "{report:#}");
    assert_eq!(dropped[0]["evidence"]["pointer"], "/messages/1");
    // the server's render (recorded by the proxy) really lacks it
    let s = read_session(&session).unwrap();
    let (prompt, _) =
        toolscope::session::Annotation::latest_server_render(&s.annotations[&1]).unwrap();
    let prompt = prompt.unwrap();
    assert!(prompt.contains("List the files"), "{prompt}");
    assert!(!prompt.contains("hook output"), "{prompt}");
}

/// Prints the loop of the session named by `TOOLSCOPE_LOOP_SESSION` (turns, reuse against
/// `timings.cache_n`, calls): a look at a recorded loop without re-running the agent.
#[test]
#[ignore = "e2e: needs llama-server"]
fn print_loop_of_a_recorded_session() {
    let Ok(path) = std::env::var("TOOLSCOPE_LOOP_SESSION") else {
        return;
    };
    let l = of_session(&read_session(Path::new(&path)).unwrap());
    for c in &l.conversations {
        println!("conversation {} started_by {:?}", c.id, c.started_by);
        for t in &c.turns {
            let r = t.reuse.as_ref();
            println!(
                "  exchange {} parent {:?} reply_kept {} calls {:?} shared {:?} cache_n {:?} cause {:?}",
                t.exchange,
                t.parent,
                t.reply_kept,
                t.calls,
                r.map(|r| r.shared),
                r.and_then(|r| r.engine.cache_n),
                r.map(|r| &r.cause)
            );
        }
    }
    for c in &l.calls {
        println!(
            "call {}#{} {} -> {:?}",
            c.exchange, c.index, c.call.name, c.result
        );
    }
}
