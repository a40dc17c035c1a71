//! Regeneration on vLLM and Ollama, against loopback look-alikes that answer with the shapes
//! the engines document (no vLLM or Ollama server runs on this machine; the llama-server paths,
//! `/completion` and `/v1/completions` with a string or token-id prompt, run against the real
//! server in tests/e2e/e2e_raw.rs). What is asserted is what toolscope *sends* (the request bodies,
//! checked by hand against the engines' documented request fields) and what it makes of the
//! documented answers (the generated text, the verdict against the recorded chat answer).
//!
//! Shapes followed:
//! * vLLM `POST /tokenize` with `messages` + `tools` → `{"count", "max_model_len", "tokens",
//!   "token_strs"}`; `POST /detokenize {"model", "tokens"}` → `{"prompt"}`:
//!   vllm-project/vllm tests/entrypoints/openai/test_tokenization.py (`test_tokenize_chat_with_tools`,
//!   `test_detokenize`), vllm/entrypoints/serve/tokenize/protocol.py.
//! * vLLM `POST /v1/completions` → `{"object": "text_completion", "choices": [{"index", "text",
//!   "logprobs", "finish_reason", "stop_reason"}], "usage"}`:
//!   vllm/entrypoints/openai/completion/protocol.py `CompletionResponse`.
//! * Ollama `POST /api/show {"model"}` → `{"template", …}`, the prompt rendered as Ollama
//!   renders it (server/routes_debug_test.go `TestChatDebugRenderOnly`, its tools case, gives
//!   the expected prompt); `POST /api/generate` with `raw: true`, `stream: false`, `options` → one object with
//!   `response`, `done: true`, `done_reason`: ollama/ollama docs/api.md "Request (Raw Mode)",
//!   "Request (No streaming)", "Generate request (With options)"; `/api/chat` answers with
//!   `message.tool_calls[].function.arguments` as an object: docs/api.md "Chat request (with
//!   tools)".

use crate::support;

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use toolscope::record::regenerate::{Endpoint, Prompt, RegenOptions, regenerate_with};
use toolscope::session::write::new_header;
use toolscope::session::{
    Annotation, Body, Exchange, Request, Response, ServerKind, SessionWriter, read_session,
};

/// Hermes/Qwen call syntax, as a Qwen3 model writes it.
const CALL_PARIS: &str =
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
const CALL_ROME: &str =
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>";
const RENDERED: &str = "<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n";

/// A look-alike answering `path → JSON`; records every (request line, body) it received.
type Seen = Arc<Mutex<Vec<(String, Value)>>>;

async fn start(answers: Vec<(&'static str, Value)>) -> (String, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let seen: Seen = Arc::default();
    let seen2 = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                continue;
            };
            let answers = answers.clone();
            let seen = seen2.clone();
            tokio::spawn(async move {
                while let Some((head, body)) = support::read_http_request(&mut s).await {
                    let line = head.lines().next().unwrap_or("").to_owned();
                    let path = line.split_whitespace().nth(1).unwrap_or("").to_owned();
                    seen.lock().unwrap().push((
                        line.clone(),
                        serde_json::from_slice(&body).unwrap_or(Value::Null),
                    ));
                    let (status, answer) = match answers.iter().find(|(p, _)| *p == path) {
                        Some((_, a)) => ("200 OK", a.to_string()),
                        None => ("404 Not Found", "{\"error\":\"not found\"}".into()),
                    };
                    let head = format!(
                        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                        answer.len()
                    );
                    if s.write_all(head.as_bytes()).await.is_err()
                        || s.write_all(answer.as_bytes()).await.is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    (base, seen)
}

fn exchange(path: &str, request: &Value, answer: &Value) -> Exchange {
    Exchange {
        id: 1,
        request: Request {
            method: "POST".into(),
            path: path.into(),
            headers: vec![],
            body: Body::from_bytes(request.to_string().as_bytes()),
        },
        response: Some(Response {
            status: 200,
            headers: vec![("content-type".into(), "application/json".into())],
            body: Some(Body::from_bytes(answer.to_string().as_bytes())),
            chunks: None,
        }),
        ..Default::default()
    }
}

fn tools() -> Value {
    json!([{"type": "function", "function": {"name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])
}

fn vllm_completion(text: &str) -> Value {
    json!({"id": "cmpl-1", "object": "text_completion", "created": 1, "model": "Qwen/Qwen3-0.6B",
        "choices": [{"index": 0, "text": text, "logprobs": null, "finish_reason": "stop", "stop_reason": null}],
        "usage": {"prompt_tokens": 5, "total_tokens": 30, "completion_tokens": 25}})
}

/// The verdict fields of a regenerated annotation.
fn verdict(a: &Annotation) -> (Option<bool>, Option<usize>, Option<String>) {
    match a {
        Annotation::RawText {
            verified,
            diverged_at,
            prompt_from,
            ..
        } => (*verified, *diverged_at, prompt_from.clone()),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vllm_renders_by_tokenize_and_regenerates_from_token_ids() {
    let ids = json!([151644, 872, 198, 83, 151645, 198, 151644, 77091, 198]);
    for (text, verified) in [(CALL_PARIS, true), (CALL_ROME, false)] {
        let (base, seen) = start(vec![
            (
                "/tokenize",
                json!({"count": 9, "max_model_len": 8192, "tokens": ids, "token_strs": null}),
            ),
            ("/detokenize", json!({"prompt": RENDERED})),
            ("/v1/completions", vllm_completion(text)),
        ])
        .await;
        let chat = json!({"model": "Qwen/Qwen3-0.6B", "messages": [{"role": "user", "content": "Weather in Paris?"}],
            "tools": tools(), "tool_choice": "auto", "temperature": 0, "seed": 7, "max_tokens": 64,
            "repetition_penalty": 1.1, "stop": "<|im_end|>", "stream": false,
            "chat_template_kwargs": {"enable_thinking": false}});
        let answer = json!({"id": "chatcmpl-1", "object": "chat.completion", "model": "Qwen/Qwen3-0.6B",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "reasoning_content": null,
                "tool_calls": [{"id": "chatcmpl-tool-1", "type": "function",
                    "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
                "finish_reason": "tool_calls", "stop_reason": null}]});
        let original = exchange("/v1/chat/completions", &chat, &answer);
        let dir = tempfile::tempdir().unwrap();
        let session = dir.path().join("s.jsonl");
        let mut writer =
            SessionWriter::open(&session, &new_header("2026-01-01T00:00:00Z".into())).unwrap();
        let opts = RegenOptions {
            server: Some(ServerKind::parse("vllm")),
            ..Default::default()
        };
        let r = regenerate_with(&base, &original, &mut writer, &opts)
            .await
            .expect("regenerate on vLLM");
        drop(writer);
        let seen = seen.lock().unwrap().clone();
        let lines: Vec<&str> = seen.iter().map(|(l, _)| l.as_str()).collect();
        assert_eq!(
            lines,
            [
                "POST /tokenize HTTP/1.1",
                "POST /detokenize HTTP/1.1",
                "POST /v1/completions HTTP/1.1"
            ]
        );
        // The chat body's render inputs, nothing of its sampling.
        assert_eq!(
            seen[0].1,
            json!({"model": "Qwen/Qwen3-0.6B", "messages": chat["messages"], "tools": tools(),
                "chat_template_kwargs": {"enable_thinking": false}})
        );
        assert_eq!(
            seen[1].1,
            json!({"model": "Qwen/Qwen3-0.6B", "tokens": ids})
        );
        // The token ids as the prompt, the recorded sampling settings under vLLM's names.
        assert_eq!(
            seen[2].1,
            json!({"model": "Qwen/Qwen3-0.6B", "prompt": ids, "temperature": 0, "seed": 7,
                "repetition_penalty": 1.1, "max_tokens": 64, "stop": ["<|im_end|>"],
                "stream": false, "skip_special_tokens": false})
        );
        assert_eq!(r.prompt, RENDERED);
        assert_eq!(r.generated, text);
        assert_eq!(r.exchange.request.path, "/v1/completions");
        assert_eq!(r.exchange.label.as_deref(), Some("regenerate:1"));
        let (v, at, from) = verdict(&r.annotation);
        assert_eq!(from.as_deref(), Some("vLLM /tokenize (messages)"));
        assert_eq!(v, Some(verified), "{text}");
        if !verified {
            // "Rome" is where the call first differs from the server's: the call's start.
            assert_eq!(at, Some(0));
        }
        // Both lines are in the session.
        let s = read_session(&session).unwrap();
        assert_eq!(s.exchanges.len(), 1);
        assert_eq!(s.annotations.get(&1).map(Vec::len), Some(1));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sglang_needs_a_local_render_and_takes_it_through_v1_completions() {
    let (base, seen) = start(vec![("/v1/completions", vllm_completion(CALL_PARIS))]).await;
    let chat = json!({"model": "qwen", "messages": [{"role": "user", "content": "Weather in Paris?"}],
        "tools": tools(), "temperature": 0, "max_tokens": 32});
    let answer = json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": null,
        "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
        "finish_reason": "tool_calls"}]});
    let original = exchange("/v1/chat/completions", &chat, &answer);
    let dir = tempfile::tempdir().unwrap();
    let mut writer = SessionWriter::open(
        &dir.path().join("s.jsonl"),
        &new_header("2026-01-01T00:00:00Z".into()),
    )
    .unwrap();
    // Without a local render SGLang cannot be asked for its prompt: the error says what to pass.
    let opts = RegenOptions {
        server: Some(ServerKind::parse("sglang")),
        ..Default::default()
    };
    let e = regenerate_with(&base, &original, &mut writer, &opts)
        .await
        .unwrap_err();
    assert!(format!("{e:#}").contains("--template"), "{e:#}");
    assert!(seen.lock().unwrap().is_empty());
    let opts = RegenOptions {
        server: Some(ServerKind::parse("sglang")),
        prompt: Some(Prompt {
            text: RENDERED.into(),
            token_ids: None,
            from: "local render of corpus:Qwen-Qwen3-0.6B.jinja".into(),
        }),
        ..Default::default()
    };
    let r = regenerate_with(&base, &original, &mut writer, &opts)
        .await
        .unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].1,
        json!({"model": "qwen", "prompt": RENDERED, "temperature": 0, "max_tokens": 32,
            "stream": false, "skip_special_tokens": false})
    );
    let (v, _, from) = verdict(&r.annotation);
    assert_eq!(v, Some(true));
    assert_eq!(
        from.as_deref(),
        Some("local render of corpus:Qwen-Qwen3-0.6B.jinja")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ollama_generate_raw_with_the_chat_options() {
    // Ollama's own render vector: server/routes_debug_test.go (TestChatDebugRenderOnly, the
    // tools case) renders this template and request to exactly this prompt.
    let template = "{{ if .Tools }}{{ .Tools }}{{ end }}{{ range .Messages }}{{ .Role }}: {{ .Content }}\n{{ end }}";
    let expected_prompt = "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Get weather information\",\"parameters\":{\"type\":\"\",\"properties\":null}}}]user: Get the weather\n";
    let (base, seen) = start(vec![
        (
            "/api/show",
            json!({"template": template, "capabilities": ["completion", "tools"],
                "details": {"family": "qwen3"}}),
        ),
        (
            "/api/generate",
            json!({"model": "test-model", "created_at": "2025-01-01T00:00:00Z", "response": CALL_PARIS,
                "done": true, "done_reason": "stop", "total_duration": 1, "load_duration": 1,
                "prompt_eval_count": 9, "prompt_eval_duration": 1, "eval_count": 25, "eval_duration": 1}),
        ),
    ])
    .await;
    // An /api/chat body as the ollama Python SDK sends it: sampling in `options`.
    let chat = json!({"model": "test-model", "messages": [{"role": "user", "content": "Get the weather"}],
        "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Get weather information"}}],
        "stream": false,
        "options": {"temperature": 0, "seed": 42, "num_ctx": 4096, "num_predict": 64, "stop": ["<|im_end|>"]}});
    let answer = json!({"model": "test-model", "created_at": "2025-01-01T00:00:00Z",
        "message": {"role": "assistant", "content": "",
            "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
        "done_reason": "stop", "done": true});
    let original = exchange("/api/chat", &chat, &answer);
    let dir = tempfile::tempdir().unwrap();
    let mut writer = SessionWriter::open(
        &dir.path().join("s.jsonl"),
        &new_header("2026-01-01T00:00:00Z".into()),
    )
    .unwrap();
    let opts = RegenOptions {
        server: Some(ServerKind::parse("ollama")),
        ..Default::default()
    };
    let r = regenerate_with(&base, &original, &mut writer, &opts)
        .await
        .unwrap();
    let seen = seen.lock().unwrap().clone();
    let lines: Vec<&str> = seen.iter().map(|(l, _)| l.as_str()).collect();
    assert_eq!(
        lines,
        ["POST /api/show HTTP/1.1", "POST /api/generate HTTP/1.1"]
    );
    assert_eq!(seen[0].1, json!({"model": "test-model"}));
    assert_eq!(
        seen[1].1,
        json!({"model": "test-model", "prompt": expected_prompt, "raw": true, "stream": false,
            "options": {"temperature": 0, "seed": 42, "num_ctx": 4096, "num_predict": 64, "stop": ["<|im_end|>"]}})
    );
    assert_eq!(r.prompt, expected_prompt);
    assert_eq!(r.generated, CALL_PARIS);
    assert_eq!(r.exchange.request.path, "/api/generate");
    let (v, _, from) = verdict(&r.annotation);
    assert_eq!(
        from.as_deref(),
        Some("Ollama /api/show template of test-model")
    );
    assert_eq!(v, Some(true));

    // An OpenAI-compatible chat sent to Ollama (/v1/chat/completions) carries its sampling at
    // the top level: it goes into `options` under Ollama's names.
    let chat = json!({"model": "qwen3:0.6b", "messages": [], "temperature": 0.2, "max_tokens": 10,
        "stop": "x", "repeat_penalty": 1.1});
    let body = toolscope::record::regenerate::request_body(
        Endpoint::OllamaGenerate,
        &ServerKind::Ollama,
        &chat,
        &Prompt {
            text: "P".into(),
            ..Default::default()
        },
    );
    assert_eq!(
        body,
        json!({"model": "qwen3:0.6b", "prompt": "P", "raw": true, "stream": false,
            "options": {"temperature": 0.2, "repeat_penalty": 1.1, "num_predict": 10, "stop": ["x"]}})
    );
}

/// `proxy --regenerate` in front of vLLM (detected by `/v1/models` `owned_by: "vllm"`): after
/// the chat exchange the recorder renders it with `/tokenize`, regenerates it through
/// `/v1/completions` from the token ids, and records both, off the client's path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_regenerate_on_a_vllm_upstream() {
    let ids = json!([151644, 872, 198, 151645, 198, 151644, 77091, 198]);
    let answer = json!({"id": "chatcmpl-1", "object": "chat.completion", "model": "Qwen/Qwen3-0.6B",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": null,
            "tool_calls": [{"id": "chatcmpl-tool-1", "type": "function",
                "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
            "finish_reason": "tool_calls", "stop_reason": null}]});
    let (upstream, seen) = start(vec![
        (
            "/v1/models",
            json!({"object": "list", "data": [{"id": "Qwen/Qwen3-0.6B", "object": "model", "owned_by": "vllm"}]}),
        ),
        ("/v1/chat/completions", answer.clone()),
        (
            "/tokenize",
            json!({"count": 8, "max_model_len": 8192, "tokens": ids, "token_strs": null}),
        ),
        ("/detokenize", json!({"prompt": RENDERED})),
        ("/v1/completions", vllm_completion(CALL_PARIS)),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join("s.jsonl");
    let mut cfg = toolscope::record::proxy::ProxyConfig::new(&upstream, session.clone());
    cfg.regenerate = true;
    let proxy = toolscope::record::proxy::Proxy::spawn(cfg, None)
        .await
        .unwrap();
    assert_eq!(
        proxy.header().engine.as_ref().unwrap().kind.as_str(),
        "vllm"
    );
    let chat = json!({"model": "Qwen/Qwen3-0.6B", "messages": [{"role": "user", "content": "Weather in Paris?"}],
        "tools": tools(), "temperature": 0});
    let got: Value = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", proxy.url()))
        .json(&chat)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(got, answer);
    assert!(
        proxy
            .recorder()
            .settle(std::time::Duration::from_secs(10))
            .await
    );
    assert!(proxy.shutdown(std::time::Duration::from_secs(10)).await);

    let lines: Vec<String> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|(l, _)| l.clone())
        .collect();
    assert!(
        lines.ends_with(&[
            "POST /v1/chat/completions HTTP/1.1".to_owned(),
            "POST /tokenize HTTP/1.1".to_owned(),
            "POST /detokenize HTTP/1.1".to_owned(),
            "POST /v1/completions HTTP/1.1".to_owned(),
        ]),
        "{lines:?}"
    );
    let s = read_session(&session).unwrap();
    let mut exs = s.exchanges.clone();
    exs.sort_by_key(|e| e.id);
    assert_eq!(exs.len(), 2, "{exs:#?}");
    assert_eq!(exs[1].label.as_deref(), Some("regenerate:1"));
    assert_eq!(exs[1].request.path, "/v1/completions");
    assert_eq!(exs[1].request_json().unwrap()["prompt"], ids);
    let anns = s.annotations.get(&1).cloned().unwrap_or_default();
    assert_eq!(anns.len(), 1, "{anns:?}");
    let (v, _, from) = verdict(&anns[0]);
    assert_eq!(v, Some(true));
    assert_eq!(from.as_deref(), Some("vLLM /tokenize (messages)"));
}

/// The shipped session the CLI tests regenerate from (a copy is made per test).
fn shipped_http500() -> std::path::PathBuf {
    support::root().join("sessions/e-http500-peg-native.jsonl")
}

/// Unusable input and an unreachable engine (hand-checked against docs/record.md's exit codes):
/// a `--url` that is no http(s) URL is exit 2 naming the flag, before anything is opened; an
/// engine nobody answers at is exit 1 naming the exchange and the URL, and the summary does
/// not claim a recording that did not happen. The session file is byte for byte unchanged.
#[test]
fn cli_bad_url_and_unreachable_engine() {
    let (dir, src) = (tempfile::tempdir().unwrap(), shipped_http500());
    let session = dir.path().join("s.jsonl");
    std::fs::copy(&src, &session).unwrap();
    let before = std::fs::read(&session).unwrap();
    let run = |url: &str| {
        std::process::Command::new(support::bin())
            .arg("regenerate")
            .arg(&session)
            .args(["--url", url])
            .output()
            .unwrap()
    };
    let out = run("127.0.0.1:8080");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--url 127.0.0.1:8080: not an http(s) URL"),
        "{err}"
    );
    // a port nothing listens on
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = run(&format!("http://127.0.0.1:{port}"));
    let err = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("#1:") && err.contains(&format!("127.0.0.1:{port}")),
        "{err}"
    );
    assert!(!stdout.contains("replays it"), "{stdout}");
    assert!(stdout.contains("nothing recorded"), "{stdout}");
    assert_eq!(std::fs::read(&session).unwrap(), before);
}

/// `--endpoint completion` is llama-server's own endpoint and `ollama-generate` Ollama's: with
/// another engine at --url the combination is refused up front (exit 2, naming both flags),
/// nothing is sent and the session is unchanged. The server is named by `--server KIND` or by
/// its former name `--engine KIND` (a hidden alias: old command lines keep working).
#[test]
fn cli_endpoint_of_another_engine_is_refused() {
    let (dir, src) = (tempfile::tempdir().unwrap(), shipped_http500());
    let session = dir.path().join("s.jsonl");
    std::fs::copy(&src, &session).unwrap();
    let before = std::fs::read(&session).unwrap();
    for (i, (engine, endpoint)) in [
        ("vllm", "completion"),
        ("ollama", "completion"),
        ("llama-server", "ollama-generate"),
        ("sglang", "ollama-generate"),
    ]
    .into_iter()
    .enumerate()
    {
        let flag = if i % 2 == 0 { "--server" } else { "--engine" };
        let out = std::process::Command::new(support::bin())
            .arg("regenerate")
            .arg(&session)
            .args(["--url", "http://127.0.0.1:9", flag, engine])
            .args(["--endpoint", endpoint, "--prompt-file"])
            .arg(&src)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{engine} {endpoint}: {err}");
        assert!(
            err.contains(&format!("--endpoint {endpoint}")) && err.contains(engine),
            "{err}"
        );
        assert!(!err.contains("error sending request"), "{err}");
    }
    // an unknown kind is a usage error naming the known ones, under either name
    for flag in ["--server", "--engine"] {
        let out = std::process::Command::new(support::bin())
            .arg("regenerate")
            .arg(&session)
            .args(["--url", "http://127.0.0.1:9", flag, "tgi"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("llama-server, vllm, sglang, ollama"), "{err}");
    }
    assert_eq!(std::fs::read(&session).unwrap(), before);
}

/// A session without exchanges: the error says so rather than suggesting `--exchange N`.
#[test]
fn cli_session_without_exchanges() {
    let (dir, src) = (tempfile::tempdir().unwrap(), shipped_http500());
    let session = dir.path().join("s.jsonl");
    let header = std::fs::read_to_string(&src)
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .to_owned()
        + "\n";
    std::fs::write(&session, &header).unwrap();
    let out = std::process::Command::new(support::bin())
        .arg("regenerate")
        .arg(&session)
        .args(["--url", "http://127.0.0.1:9"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("has no exchanges"), "{err}");
    assert!(!err.contains("--exchange N"), "{err}");
    assert_eq!(std::fs::read_to_string(&session).unwrap(), header);
}
