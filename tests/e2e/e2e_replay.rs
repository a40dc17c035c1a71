//! End-to-end: `serve`, `resend` + `diff --against`, and `export --format otel`, with the
//! official clients (openai, anthropic, ollama Python SDKs from $TOOLSCOPE_PYTHON), a real
//! llama-server (build 11434, SmolLM2) and the official opentelemetry-proto package.
use crate::support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use toolscope::record::llama::{LlamaOptions, LlamaServer};
use toolscope::record::proxy::{Proxy, ProxyConfig};
use toolscope::record::serve::{ServeConfig, ServeHandle, Timing};
use toolscope::session::read_session;
use toolscope::session::replay::MatchMode;

/// The client venv's python ($TOOLSCOPE_PYTHON), or a skip (a failure under TOOLSCOPE_REQUIRE_SETUP).
fn python() -> Option<PathBuf> {
    let p = std::env::var_os("TOOLSCOPE_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            dirs::home_dir()
                .unwrap_or_default()
                .join(".cache/toolscope/venv/bin/python")
        });
    if p.exists() {
        Some(p)
    } else if support::setup_required() {
        panic!(
            "client venv python not found at {}; run scripts/setup.sh",
            p.display()
        );
    } else {
        eprintln!("SKIP: client venv python not found at {}", p.display());
        None
    }
}

/// Runs python with `args`, off the async runtime; returns stdout parsed as JSON.
async fn py(python: &Path, args: Vec<String>) -> Value {
    let python = python.to_owned();
    let out =
        tokio::task::spawn_blocking(move || Command::new(&python).args(&args).output().unwrap())
            .await
            .unwrap();
    assert!(
        out.status.success(),
        "python failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

fn script(name: &str) -> String {
    support::root().join(name).display().to_string()
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn serve_config(unmatched: PathBuf) -> ServeConfig {
    ServeConfig {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        timing: Timing::Fast,
        mode: MatchMode::Sequence,
        unmatched_session: unmatched,
    }
}

#[test]
#[ignore = "e2e: needs llama-server and the client venv"]
fn openai_and_anthropic_sdks_get_the_same_objects_from_serve_as_from_the_live_server() {
    let (Some(_), Some((model, corpus)), Some(python)) = (
        support::llama_server(),
        support::smollm2_and_corpus(),
        python(),
    ) else {
        return;
    };
    // SmolLM2 with the Qwen3 template (as sessions/a-two-tools-stream.jsonl): llama-server
    // parses its <tool_call> syntax, and tool_choice "required" makes the model call a tool
    let server = LlamaServer::start(LlamaOptions {
        model,
        chat_template_file: Some(corpus.join("Qwen-Qwen3-0.6B.jinja")),
        verbose: false,
        extra_args: vec![],
        ctx: 4096,
    })
    .expect("llama-server starts");
    rt().block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let session = dir.path().join("live.jsonl");
        let clients = script("tests/data/replay/sdk_clients.py");
        // live, through the recording proxy
        let proxy = Proxy::spawn(ProxyConfig::new(&server.base_url(), session.clone()), None)
            .await
            .unwrap();
        let live = py(&python, vec![clients.clone(), proxy.url(), "run".into()]).await;
        assert!(proxy.shutdown(Duration::from_secs(30)).await);
        // the live answers are real: tool_choice required gave a tool call (streamed deltas)
        let streamed_call = live["openai_stream"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["choices"][0]["delta"]["tool_calls"].is_array());
        assert!(streamed_call, "{live}");
        assert!(live["openai_stream"].as_array().unwrap().len() > 3);
        drop(server); // the model is gone: serve answers from the recording alone

        let recorded = read_session(&session).unwrap();
        assert!(recorded.exchanges.len() >= 5);
        let unmatched = dir.path().join("live.unmatched.jsonl");
        let serve = ServeHandle::spawn(recorded.clone(), serve_config(unmatched.clone()), None)
            .await
            .unwrap();
        let replayed = py(&python, vec![clients.clone(), serve.url(), "run".into()]).await;
        serve.shutdown().await;
        for key in [
            "openai_stream",
            "openai",
            "openai_text",
            "anthropic_stream",
            "anthropic_stream_final",
            "anthropic",
        ] {
            assert_eq!(replayed[key], live[key], "{key}");
        }
        assert!(!unmatched.exists());

        // a request the recording does not have: the documented 404, through both SDKs
        let serve = ServeHandle::spawn(recorded, serve_config(unmatched.clone()), None)
            .await
            .unwrap();
        let miss = py(&python, vec![clients, serve.url(), "mismatch".into()]).await;
        serve.shutdown().await;
        // the first request of the path is compared with exchange #1 (OpenAI: the few-shot
        // stream, first difference max_tokens) and #4 (Anthropic: the stream, the question).
        // The OpenAI SDK exposes the `error` object as e.body, the Anthropic SDK the whole body.
        let cases = [
            ("openai", &miss["openai"]["body"], "/max_tokens"),
            (
                "anthropic",
                &miss["anthropic"]["body"]["error"],
                "/messages/0/content",
            ),
        ];
        for (sdk, body, pointer) in cases {
            assert_eq!(miss[sdk]["status"], 404, "{sdk}: {miss}");
            assert_eq!(body["type"], "toolscope_replay_mismatch", "{sdk}: {miss}");
            assert_eq!(body["pointer"], pointer, "{sdk}: {miss}");
            assert!(
                miss[sdk]["message"]
                    .as_str()
                    .unwrap()
                    .contains("nearest recorded request: exchange #"),
                "{sdk}: {miss}"
            );
        }
        let u = read_session(&unmatched).unwrap();
        assert_eq!(u.exchanges.len(), 2);
        assert!(
            u.exchanges
                .iter()
                .all(|x| x.label.as_deref() == Some("serve:unmatched"))
        );
    });
}

#[test]
#[ignore = "e2e: needs the client venv"]
fn ollama_client_gets_the_documented_objects_from_serve() {
    let Some(python) = python() else { return };
    rt().block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let session = read_session(&support::root().join("tests/data/replay/ollama-docs.jsonl")).unwrap();
        let serve = ServeHandle::spawn(session, serve_config(dir.path().join("u.jsonl")), None).await.unwrap();
        // the builder script's own calls and checks (docs/api.md objects), now against serve
        let code = format!(
            "import importlib.util,json,sys\nspec=importlib.util.spec_from_file_location('d',{:?})\nm=importlib.util.module_from_spec(spec);spec.loader.exec_module(m)\nout=m.drive(sys.argv[1]);m.check(out)\nprint(json.dumps(out,default=str))",
            script("scripts/ollama-docs-session.py")
        );
        let out = py(&python, vec!["-c".into(), code, serve.url()]).await;
        serve.shutdown().await;
        assert!(!dir.path().join("u.jsonl").exists(), "every request matched");
        assert_eq!(out["tools"][0]["message"]["tool_calls"][0]["function"]["arguments"]["city"], "Tokyo");
        assert_eq!(out["tools"][1]["done_reason"], "stop");
        assert_eq!(out["raw"]["response"], " The sky appears blue because of a phenomenon called Rayleigh scattering.");
    });
}

#[test]
#[ignore = "e2e: needs the client venv"]
fn otel_export_parses_as_export_trace_service_request() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let mut files: Vec<PathBuf> = std::fs::read_dir(support::root().join("sessions"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.push(support::root().join("tests/data/replay/ollama-docs.jsonl"));
    let check = r#"
import json, sys
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
req = json_format.Parse(open(sys.argv[1]).read(), ExportTraceServiceRequest())
spans = [s for rs in req.resource_spans for ss in rs.scope_spans for s in ss.spans]
keys = sorted({a.key for s in spans for a in s.attributes})
events = sorted({e.name for s in spans for e in s.events})
print(json.dumps({"spans": len(spans), "keys": keys, "events": events, "kinds": sorted({s.kind for s in spans})}))
"#;
    let rt = rt();
    for f in files {
        let out = dir.path().join("t.json");
        let st = Command::new(support::bin())
            .arg("export")
            .arg(&f)
            .args(["--format", "otel", "-o"])
            .arg(&out)
            .status()
            .unwrap();
        assert!(st.success());
        let n = read_session(&f).unwrap().exchanges.len();
        let v = rt.block_on(py(
            &python,
            vec!["-c".into(), check.into(), out.display().to_string()],
        ));
        assert_eq!(v["spans"], n, "{}", f.display());
        assert_eq!(
            v["kinds"],
            serde_json::json!([3]),
            "{}: SPAN_KIND_CLIENT",
            f.display()
        );
        let keys: Vec<&str> = v["keys"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k.as_str().unwrap())
            .collect();
        // e-http500: the server answered HTTP 500, there is no reply to describe
        let failed = f.ends_with("e-http500-peg-native.jsonl");
        let reply_keys: &[&str] = if failed {
            &[]
        } else {
            &["gen_ai.output.messages", "gen_ai.response.finish_reasons"]
        };
        assert_eq!(
            failed,
            !keys.contains(&"gen_ai.output.messages"),
            "{}",
            f.display()
        );
        for k in [
            "gen_ai.operation.name",
            "gen_ai.request.model",
            "gen_ai.input.messages",
        ]
        .iter()
        .chain(reply_keys)
        {
            assert!(
                keys.contains(k),
                "{}: {k} missing from {keys:?}",
                f.display()
            );
        }
        if f.ends_with("a-two-tools-stream.jsonl") {
            for k in [
                "gen_ai.tool.definitions",
                "gen_ai.usage.input_tokens",
                "gen_ai.usage.output_tokens",
            ] {
                assert!(keys.contains(&k), "{k} missing from {keys:?}");
            }
        }
        if f.ends_with("ollama-docs.jsonl") {
            assert_eq!(
                v["events"],
                serde_json::json!(["toolscope.finding"]),
                "findings as span events"
            );
        }
    }
}

#[test]
#[ignore = "e2e: needs llama-server and the template corpus"]
fn resend_to_another_template_then_diff_shows_the_changed_render_and_calls() {
    let (Some(_), Some((model, corpus))) = (support::llama_server(), support::smollm2_and_corpus())
    else {
        return;
    };
    // another template than the one the session was recorded with (SmolLM2's own):
    // Llama 3.x's, whose tool calls llama-server parses as its own JSON format
    let template = corpus.join("meta-llama-Llama-3.2-3B-Instruct.jinja");
    let server = LlamaServer::start(LlamaOptions {
        model,
        chat_template_file: Some(template),
        verbose: true,
        extra_args: vec![],
        ctx: 4096,
    })
    .expect("llama-server starts");
    let dir = tempfile::tempdir().unwrap();
    let original = support::root().join("sessions/a-two-tools-stream.jsonl");
    let out = dir.path().join("b.jsonl");
    let st = Command::new(support::bin())
        .arg("resend")
        .arg(&original)
        .args(["--url", &server.base_url(), "--session"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        st.status.code().is_some_and(|c| c <= 1),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let b = read_session(&out).unwrap();
    assert_eq!(b.exchanges.len(), 1);
    assert_eq!(b.exchanges[0].label.as_deref(), Some("resend:1"));
    let diff = Command::new(support::bin())
        .arg("diff")
        .arg(&original)
        .arg("--against")
        .arg(&out)
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert_eq!(
        diff.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&diff.stderr)
    );
    let v: Value = serde_json::from_slice(&diff.stdout).unwrap();
    let d = &v[0];
    assert_eq!(
        (d["a"].as_u64(), d["b"].as_u64()),
        (Some(1), Some(b.exchanges[0].id))
    );
    let render = d["render"].as_str().expect("the render changed");
    assert!(
        render.contains("-<|im_start|>system")
            && render.contains("<|start_header_id|>system<|end_header_id|>"),
        "{render}"
    );
    assert!(!d["calls"].is_null(), "the calls changed: {d}");
    drop(server);
}
