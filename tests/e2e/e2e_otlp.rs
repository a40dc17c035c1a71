//! End-to-end (issue #25 item 5): live traces of a real agent loop. tests/support/loop_agent.py
//! (the official `openai` SDK: a 4-turn tool loop with a parallel call and a sub-agent) runs
//! through `toolscope proxy --headless --otlp URL` against llama-server build 11434 (SmolLM2,
//! the Qwen3-0.6B corpus template, as tests/e2e/e2e_loop.rs). The collector is
//! tests/support/otlp_receiver.py, which decodes every POST with the official
//! `opentelemetry-proto` package (`json_format.Parse` into `ExportTraceServiceRequest`).
//!
//! Expected values come from outside the exporter: the number of requests the agent made, and
//! the conversations and call links of the recorded session (`conversation::of_session`, the
//! batch grouping).

use crate::support;

use std::collections::{BTreeSet, HashMap};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use toolscope::conversation::of_session;
use toolscope::record::llama::{LlamaOptions, LlamaServer, free_port};
use toolscope::session::read_session;

/// A child process killed (by its own handle) when dropped.
struct Kill(Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The receiver on a free loopback port, appending to `out`; the child and its URL.
fn start_receiver(python: &Path, out: &Path) -> (Kill, String) {
    let mut child = Command::new(python)
        .arg(support::root().join("tests/support/otlp_receiver.py"))
        .arg(out)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the OTLP receiver");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .unwrap();
    let port = line
        .strip_prefix("listening ")
        .unwrap_or_else(|| panic!("receiver said {line:?}"))
        .trim()
        .to_owned();
    (Kill(child), format!("http://127.0.0.1:{port}"))
}

/// `toolscope proxy --headless --otlp OTLP` on a free loopback port: the child, its URL, and
/// its stderr lines as they come.
fn start_proxy(
    upstream: &str,
    session: &Path,
    otlp: &str,
) -> (Child, String, Arc<Mutex<Vec<String>>>) {
    let mut child = Command::new(support::bin())
        .args(["proxy", "--headless", "--upstream", upstream])
        .args(["--listen", "127.0.0.1:0", "--otlp", otlp, "--session"])
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
    let lines = Arc::new(Mutex::new(Vec::new()));
    let mut line = String::new();
    loop {
        line.clear();
        if err.read_line(&mut line).unwrap_or(0) == 0 {
            let _ = child.kill();
            panic!("the proxy exited before listening: {:?}", child.wait());
        }
        lines.lock().unwrap().push(line.clone());
        if let Some(rest) = line.strip_prefix("toolscope proxy: http://") {
            let addr = rest.split_whitespace().next().unwrap().to_owned();
            let l2 = lines.clone();
            std::thread::spawn(move || {
                let mut s = String::new();
                while err.read_line(&mut s).unwrap_or(0) > 0 {
                    l2.lock().unwrap().push(std::mem::take(&mut s));
                }
            });
            return (child, format!("http://{addr}"), lines);
        }
    }
}

/// Every span the receiver decoded so far (and panics on a POST it could not decode).
fn received(out: &Path) -> Vec<Value> {
    let Ok(text) = std::fs::read_to_string(out) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .flat_map(|post| {
            assert_eq!(
                post["ok"], true,
                "the receiver could not decode a POST: {post}"
            );
            post["spans"].as_array().cloned().unwrap_or_default()
        })
        .collect()
}

fn op(span: &Value) -> &str {
    span["attrs"]["gen_ai.operation.name"]
        .as_str()
        .unwrap_or("")
}

#[test]
#[ignore = "e2e: needs llama-server and the SDK venv (opentelemetry-proto)"]
fn a_real_agent_loop_is_traced_live() {
    let (Some((model, _)), Some(python), Some(src)) = (
        support::smollm2_and_corpus(),
        support::sdk_python(),
        support::llama_src(),
    ) else {
        assert!(!support::setup_required(), "setup artefacts missing");
        return;
    };
    let server = LlamaServer::start_on(
        LlamaOptions {
            model,
            chat_template_file: Some(src.join("models/templates/Qwen-Qwen3-0.6B.jinja")),
            verbose: false,
            extra_args: vec!["-np".into(), "1".into()],
            ctx: 8192,
        },
        free_port().unwrap(),
        &[("LLAMA_SERVER_SLOTS_DEBUG", "1")],
    )
    .expect("llama-server starts");
    let dir = tempfile::tempdir().unwrap();
    let out: PathBuf = dir.path().join("otlp.jsonl");
    let (_receiver, otlp) = start_receiver(&python, &out);
    let session = dir.path().join("loop.jsonl");
    let (mut proxy, base, stderr) = start_proxy(&server.base_url(), &session, &otlp);
    let requests = super::e2e_loop::agent(&python, &base, "loop");
    assert!(requests.len() >= 5, "{requests:#?}");

    // the batch grouping of what was recorded: the expected traces and tool spans
    let started = Instant::now();
    let mut l = of_session(&read_session(&session).unwrap());
    while l.conversations.iter().map(|c| c.turns.len()).sum::<usize>() < requests.len() {
        assert!(started.elapsed() < Duration::from_secs(60), "{l:#?}");
        std::thread::sleep(Duration::from_millis(100));
        l = of_session(&read_session(&session).unwrap());
    }
    assert!(
        l.conversations.len() >= 2,
        "a main and a sub-agent conversation: {l:#?}"
    );
    let answered: Vec<_> = l.calls.iter().filter(|c| c.result.is_some()).collect();
    assert!(answered.len() >= 4, "{l:#?}");

    // live: one exchange span per request and one tool span per answered call reach the
    // receiver while the proxy still runs
    let mut spans = Vec::new();
    while started.elapsed() < Duration::from_secs(120) {
        spans = received(&out);
        let chats = spans.iter().filter(|s| op(s) == "chat").count();
        let tools = spans.iter().filter(|s| op(s) == "execute_tool").count();
        if chats >= requests.len() && tools >= answered.len() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        proxy.try_wait().unwrap().is_none(),
        "the proxy must still be running"
    );
    let chats: Vec<&Value> = spans.iter().filter(|s| op(s) == "chat").collect();
    let tools: Vec<&Value> = spans.iter().filter(|s| op(s) == "execute_tool").collect();
    assert_eq!(
        chats.len(),
        requests.len(),
        "a span per exchange: {spans:#?}"
    );
    assert_eq!(
        tools.len(),
        answered.len(),
        "a tool span per answered call: {spans:#?}"
    );
    assert_eq!(spans.len(), chats.len() + tools.len());

    let by_ex: HashMap<u64, &Value> = chats
        .iter()
        .map(|s| (s["attrs"]["toolscope.exchange.id"].as_u64().unwrap(), *s))
        .collect();
    assert_eq!(by_ex.len(), chats.len(), "one span per exchange id");
    for s in &chats {
        assert_eq!(s["kind"], 3, "CLIENT");
        assert_eq!(
            s["parent"], "",
            "the openai SDK sends no traceparent: roots"
        );
        assert_eq!(s["service"], "toolscope");
        assert_eq!(s["attrs"]["gen_ai.provider.name"], "llama-server");
        assert!(s["attrs"]["gen_ai.input.messages"].is_string());
        assert!(s["end"].as_u64() >= s["start"].as_u64());
    }
    // a trace per conversation: the turns of one conversation share one trace, and no two
    // conversations share one
    let mut traces = BTreeSet::new();
    for c in &l.conversations {
        let t: BTreeSet<&str> = c
            .turns
            .iter()
            .map(|t| by_ex[&t.exchange]["trace"].as_str().unwrap())
            .collect();
        assert_eq!(t.len(), 1, "conversation {}: {t:?}", c.id);
        assert!(
            traces.insert(*t.iter().next().unwrap()),
            "trace shared: {traces:?}"
        );
    }
    // tool spans: under the span of the exchange that made the call, in its trace, from its
    // end to the start of the request that carried the result
    for c in &answered {
        let caller = by_ex[&c.exchange];
        let (rex, _) = c.result.unwrap();
        let t = tools
            .iter()
            .find(|t| {
                t["attrs"]["toolscope.exchange.id"].as_u64() == Some(c.exchange)
                    && t["attrs"]["toolscope.call.index"].as_u64() == Some(c.index as u64)
            })
            .unwrap_or_else(|| panic!("no tool span for {c:?}: {tools:#?}"));
        assert_eq!(t["name"], format!("execute_tool {}", c.call.name));
        assert_eq!(t["kind"], 1, "INTERNAL");
        assert_eq!(t["trace"], caller["trace"]);
        assert_eq!(t["parent"], caller["span"]);
        assert_eq!(t["start"], caller["end"]);
        assert_eq!(t["end"], by_ex[&rex]["start"]);
        assert_eq!(
            t["attrs"]["toolscope.result.exchange.id"].as_u64(),
            Some(rex)
        );
    }
    // the sub-agent's first exchange links to the exchange whose `task` call started it
    let sub = l
        .conversations
        .iter()
        .find(|c| c.started_by.is_some())
        .expect("a sub-agent");
    let (by, _) = sub.started_by.unwrap();
    let first = by_ex[&sub.turns[0].exchange];
    assert_eq!(
        first["links"],
        serde_json::json!([[by_ex[&by]["trace"], by_ex[&by]["span"]]])
    );

    let _ = Command::new("kill")
        .args(["-INT", &proxy.id().to_string()])
        .status();
    assert!(proxy.wait().unwrap().success());
    std::thread::sleep(Duration::from_millis(200));
    let err = stderr.lock().unwrap().concat();
    let want = format!("otlp: {} span(s) sent, 0 dropped", spans.len());
    assert!(err.contains(&want), "{want:?} not in:\n{err}");
}
