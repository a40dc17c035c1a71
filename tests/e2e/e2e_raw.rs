//! End-to-end (issue #12): the model's raw output on a real agent's live traffic.
//!
//! The official `openai` and `anthropic` Python SDKs (`$TOOLSCOPE_PYTHON`), streaming and not,
//! talk through `toolscope proxy` to llama-server build 11434 started the way users start it:
//! without `-v`, with `LLAMA_SERVER_SLOTS_DEBUG=1`, and after the proxy (the proxy cannot learn
//! the engine at first). Expected values come from the SDKs themselves: the calls they parsed,
//! and the bytes they read from the socket (a tee on their httpx transport).
//!
//! The second test runs `proxy --regenerate` against a server without the env var: the raw text
//! of a greedy tool-call exchange is regenerated through `/completion` and verified.
//!
//! The third drives the OpenAI-style path against the same kind of server: `toolscope
//! regenerate --endpoint v1-completions` (the server's render as a string prompt), then
//! toolscope's local render of the template file as SGLang regeneration sends it, then the server
//! render's token ids as `prompt` (the shape vLLM's `/tokenize` gives), all verified.

use crate::support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use base64::Engine as _;
use serde_json::Value;
use toolscope::parser::{Syntax, parse};
use toolscope::record::llama::{LlamaOptions, LlamaServer, free_port};
use toolscope::record::regenerate::{Endpoint, Prompt, RegenOptions, regenerate_with};
use toolscope::record::send::{SendOptions, send};
use toolscope::session::{
    Annotation, Api, Exchange, Outcome, RawTextSource, SessionWriter, read_session,
};
use toolscope::stream::raw::{RawOutput, RawSource, Verdict, raw_output};

/// `toolscope proxy --headless` on a free loopback port, upstream `upstream`; returns the child
/// and the proxy's URL (read from its start line on stderr).
fn start_proxy(upstream: &str, session: &Path, extra: &[&str]) -> (Child, String) {
    let mut child = Command::new(support::bin())
        .args(["proxy", "--headless", "--upstream", upstream])
        .args(["--listen", "127.0.0.1:0", "--session"])
        .arg(session)
        .args(extra)
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
            let status = child.wait();
            panic!("the proxy exited before listening: {status:?}");
        }
        if let Some(rest) = line.strip_prefix("toolscope proxy: http://") {
            let addr = rest.split_whitespace().next().unwrap().to_owned();
            // keep draining stderr so the proxy never blocks on it
            std::thread::spawn(move || {
                let mut sink = String::new();
                while err.read_line(&mut sink).unwrap_or(0) > 0 {
                    eprint!("{sink}");
                    sink.clear();
                }
            });
            return (child, format!("http://{addr}"));
        }
    }
}

/// Stops the proxy with SIGINT (it writes everything in flight) and waits for it.
fn stop_proxy(mut child: Child) {
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    let status = child.wait().unwrap();
    assert!(status.success(), "proxy exit: {status}");
}

/// Runs tests/support/sdk_clients.py; one JSON object per SDK call.
fn run_sdks(python: &Path, base: &str, only: Option<&str>) -> Vec<Value> {
    let root = support::root();
    let mut cmd = Command::new(python);
    cmd.arg(root.join("tests/support/sdk_clients.py")).arg(base);
    cmd.arg(root.join("scripts/record-requests/a-two-tools-stream.json"));
    cmd.arg(root.join("scripts/record-requests/sdk-anthropic-two-tools.json"));
    if let Some(o) = only {
        cmd.arg(o);
    }
    let out = cmd.output().expect("run the SDK clients");
    assert!(
        out.status.success(),
        "SDK clients failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn qwen3_template() -> Option<(std::path::PathBuf, std::path::PathBuf, String)> {
    let (model, corpus) = support::smollm2_and_corpus()?;
    let t = corpus.join("Qwen-Qwen3-0.6B.jinja");
    let text = std::fs::read_to_string(&t).unwrap();
    Some((model, t, text))
}

/// The SDK's calls as (name, arguments value) pairs.
fn sdk_calls(r: &Value) -> Vec<(String, Value)> {
    r["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_owned(),
                c["arguments"].clone(),
            )
        })
        .collect()
}

/// toolscope's parse of a raw text under the template's call syntax, as (name, arguments).
fn parsed_calls(raw: &str, template: &str, request: &Value) -> Vec<(String, Value)> {
    let syntax = Syntax::detect_from_template(template);
    parse(raw, syntax, Some(request))
        .tool_calls
        .into_iter()
        .map(|c| (c.name, c.arguments))
        .collect()
}

/// Annotations in brief (the server render's prompt and tokens are long).
fn kinds(anns: &[Annotation]) -> Vec<String> {
    anns.iter()
        .map(|a| match a {
            Annotation::ServerRender { error, .. } => format!("server_render error={error:?}"),
            other => format!("{other:?}"),
        })
        .collect()
}

#[test]
#[ignore = "e2e: needs llama-server and the SDK venv"]
fn official_sdks_through_a_proxy_started_before_the_server() {
    let (Some((model, template, template_text)), Some(python)) =
        (qwen3_template(), support::sdk_python())
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join("sdk.jsonl");
    let port = free_port().unwrap();
    let upstream = format!("http://127.0.0.1:{port}");
    // The proxy first: nothing answers on the upstream port yet.
    let (proxy, base) = start_proxy(&upstream, &session, &[]);
    let server = LlamaServer::start_on(
        LlamaOptions {
            model,
            chat_template_file: Some(template),
            verbose: false,
            extra_args: vec![],
            ctx: 4096,
        },
        port,
        &[("LLAMA_SERVER_SLOTS_DEBUG", "1")],
    )
    .expect("llama-server starts");
    let results = run_sdks(&python, &base, None);
    stop_proxy(proxy);
    drop(server);

    // The header was written before the server answered.
    let first = std::fs::read_to_string(&session).unwrap();
    let header: Value = serde_json::from_str(first.lines().next().unwrap()).unwrap();
    assert_eq!(header["engine"]["kind"], "unknown", "{header}");
    let s = read_session(&session).unwrap();
    assert!(s.warnings.is_empty(), "{:?}", s.warnings);
    // ... and the proxy learnt the engine from the first exchange on; readers see it.
    let learnt = s.annotations.values().flatten().find_map(|a| match a {
        Annotation::Engine {
            exchange, engine, ..
        } => Some((*exchange, engine.clone())),
        _ => None,
    });
    let (at, engine) = learnt.expect("an engine annotation");
    assert_eq!(at, 1);
    assert_eq!(engine.kind.as_str(), "llama-server");
    let header_engine = s.header.engine.clone().unwrap();
    assert_eq!(header_engine.kind.as_str(), "llama-server");
    assert!(
        header_engine
            .version
            .as_deref()
            .unwrap_or("")
            .contains("11434"),
        "{header_engine:?}"
    );

    let mut exs = s.exchanges.clone();
    exs.sort_by_key(|e| e.id);
    assert_eq!(exs.len(), results.len(), "{exs:#?}");
    let mut tool_exchanges = 0;
    for (ex, r) in exs.iter().zip(&results) {
        let name = r["name"].as_str().unwrap();
        // Every exchange complete, the official openai SDK's close after [DONE] included.
        assert_eq!(ex.outcome, Outcome::Complete, "{name}: {:?}", ex.error);
        assert_eq!(ex.is_stream(), r["stream"].as_bool().unwrap(), "{name}");
        // The client got exactly the recorded bytes.
        let got = base64::engine::general_purpose::STANDARD
            .decode(r["received_b64"].as_str().unwrap())
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&ex.response_bytes()),
            String::from_utf8_lossy(&got),
            "{name}"
        );
        // The raw text, from the slot that served the exchange.
        let anns = s.annotations.get(&ex.id).cloned().unwrap_or_default();
        let raw = raw_output(ex, &anns);
        let calls = sdk_calls(r);
        eprintln!("{name}: sdk calls {calls:?}; raw {raw:?}");
        if calls.is_empty() {
            continue;
        }
        tool_exchanges += 1;
        let RawOutput::Text { text, source, .. } = &raw else {
            panic!("{name}: no raw text: {raw:?}")
        };
        assert!(
            matches!(source, RawSource::SlotsDebug { .. }),
            "{name}: {source:?}"
        );
        let request = ex.request_json().unwrap();
        assert_eq!(
            parsed_calls(text, &template_text, &request),
            calls,
            "{name}: raw {text:?}"
        );
    }
    assert!(
        tool_exchanges >= 2,
        "the few-shot history makes SmolLM2 call get_weather"
    );
}

#[test]
#[ignore = "e2e: needs llama-server and the SDK venv"]
fn proxy_regenerate_verifies_a_greedy_exchange_without_slots_debug() {
    let (Some((model, template, template_text)), Some(python)) =
        (qwen3_template(), support::sdk_python())
    else {
        return;
    };
    let server = LlamaServer::start(LlamaOptions {
        model,
        chat_template_file: Some(template),
        verbose: false,
        extra_args: vec![],
        ctx: 4096,
    })
    .expect("llama-server starts");
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join("regen.jsonl");
    let (proxy, base) = start_proxy(&server.base_url(), &session, &["--regenerate"]);
    // One greedy streamed exchange (a stream carries no raw text of its own). One at a time:
    // a regeneration running next to another request is batched with it, and batched decoding
    // is not bit-identical to a lone sequence.
    let results = run_sdks(&python, &base, Some("openai-stream"));
    stop_proxy(proxy);
    drop(server);

    let s = read_session(&session).unwrap();
    let mut exs = s.exchanges.clone();
    exs.sort_by_key(|e| e.id);
    let chats: Vec<_> = exs.iter().filter(|e| e.label.is_none()).collect();
    assert_eq!(chats.len(), results.len());
    for (ex, r) in chats.iter().zip(&results) {
        let name = r["name"].as_str().unwrap();
        let anns = s.annotations.get(&ex.id).cloned().unwrap_or_default();
        // Without the env var the slots say so ...
        assert!(
            anns.iter().any(|a| matches!(a, Annotation::RawText { source: RawTextSource::SlotsDebug, error: Some(e), .. } if e.contains("LLAMA_SERVER_SLOTS_DEBUG=1"))),
            "{name}: {:?}",
            kinds(&anns)
        );
        // ... and the regeneration is recorded as its own exchange ...
        let by = anns
            .iter()
            .find_map(|a| match a {
                Annotation::RawText {
                    source: RawTextSource::Regenerated,
                    by,
                    ..
                } => *by,
                _ => None,
            })
            .unwrap_or_else(|| panic!("{name}: no regeneration: {:?}", kinds(&anns)));
        let regen = exs.iter().find(|e| e.id == by).unwrap();
        assert_eq!(
            regen.label.as_deref(),
            Some(format!("regenerate:{}", ex.id).as_str())
        );
        assert_eq!(regen.request.path, "/completion");
        // ... verified: greedy sampling gives the text whose parse is the server's answer.
        let raw = raw_output(ex, &anns);
        let RawOutput::Text { text, source, .. } = &raw else {
            panic!("{name}: {raw:?}")
        };
        let server = toolscope::stream::decode_exchange(ex).unwrap().message;
        assert_eq!(
            source,
            &RawSource::Regenerated {
                by: Some(by),
                verdict: Verdict::Verified
            },
            "{name}: regenerated {text:?}, the server answered {server:?}"
        );
        let calls = sdk_calls(r);
        assert!(
            !calls.is_empty(),
            "{name}: the few-shot history makes SmolLM2 call a tool"
        );
        let request = ex.request_json().unwrap();
        assert_eq!(
            parsed_calls(text, &template_text, &request),
            calls,
            "{name}"
        );
    }
}

/// The greedy streamed two-tools request, sent to `base` and recorded into `session` (label
/// `send`); returns the recorded exchange.
fn send_two_tools(rt: &tokio::runtime::Runtime, base: &str, session: &Path) -> Exchange {
    let body =
        std::fs::read(support::root().join("scripts/record-requests/a-two-tools-stream.json"))
            .unwrap();
    let opts = SendOptions {
        url: base.to_owned(),
        api: Some(Api::Openai),
        session: session.to_owned(),
        keep_secrets: false,
        headers: vec![],
    };
    let sent = rt.block_on(send(body.into(), &opts, |_| {})).expect("send");
    assert_eq!(sent.status, 200);
    sent.exchange.expect("recorded")
}

/// The regenerated raw_text annotation of exchange `id` written by exchange `by`.
fn regenerated_of(anns: &[Annotation], by: u64) -> Annotation {
    anns.iter()
        .find(|a| matches!(a, Annotation::RawText { source: RawTextSource::Regenerated, by: Some(b), .. } if *b == by))
        .cloned()
        .unwrap_or_else(|| panic!("no regeneration by #{by}: {:?}", kinds(anns)))
}

/// What `toolscope regenerate` did for one exchange: its stdout, the newest `regenerate:<id>`
/// exchange, the original's annotations and the regenerated text, verdict and prompt source.
struct CliRegen {
    stdout: String,
    regen: Exchange,
    anns: Vec<Annotation>,
    text: String,
    verified: Option<bool>,
    prompt_from: Option<String>,
}

/// Runs `toolscope regenerate SESSION --url BASE --exchange ID EXTRA…` (must exit 0) and reads
/// what it recorded.
fn cli_regenerate(session: &Path, base: &str, id: u64, extra: &[&str]) -> CliRegen {
    let out = Command::new(support::bin())
        .arg("regenerate")
        .arg(session)
        .args(["--url", base, "--exchange", &id.to_string()])
        .args(extra)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = read_session(session).unwrap();
    let regen = s
        .exchanges
        .iter()
        .filter(|e| e.label.as_deref() == Some(&format!("regenerate:{id}")))
        .max_by_key(|e| e.id)
        .cloned()
        .expect("the regeneration is recorded");
    let anns = s.annotations.get(&id).cloned().unwrap_or_default();
    let Annotation::RawText {
        text: Some(text),
        verified,
        prompt_from,
        ..
    } = regenerated_of(&anns, regen.id)
    else {
        panic!("no regenerated text: {stdout}")
    };
    CliRegen {
        stdout,
        regen,
        anns,
        text,
        verified,
        prompt_from,
    }
}

#[test]
#[ignore = "e2e: needs llama-server"]
fn regenerate_through_v1_completions_verifies_a_greedy_tool_call() {
    let Some((model, template, template_text)) = qwen3_template() else {
        return;
    };
    // Default flags: no -v, no LLAMA_SERVER_SLOTS_DEBUG — no raw text of its own.
    let server = LlamaServer::start(LlamaOptions {
        model,
        chat_template_file: Some(template),
        verbose: false,
        extra_args: vec![],
        ctx: 4096,
    })
    .expect("llama-server starts");
    let base = server.base_url();
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join("v1.jsonl");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let original = send_two_tools(&rt, &base, &session);
    let server_msg = toolscope::stream::decode_exchange(&original)
        .unwrap()
        .message;
    let server_calls: Vec<(String, Value)> = server_msg
        .tool_calls
        .iter()
        .map(|c| (c.name.clone(), c.arguments_json().unwrap()))
        .collect();
    assert!(
        !server_calls.is_empty(),
        "the few-shot history makes SmolLM2 call get_weather: {server_msg:?}"
    );
    let request = original.request_json().unwrap();

    // 1. The CLI, OpenAI-style /v1/completions with the server's render as a string prompt.
    let r = cli_regenerate(
        &session,
        &base,
        original.id,
        &["--endpoint", "v1-completions"],
    );
    let (stdout, regen) = (&r.stdout, &r.regen);
    assert!(
        stdout.contains("prompt from: llama-server /apply-template"),
        "{stdout}"
    );
    assert!(
        stdout.contains("as the model's output: regenerated, verified"),
        "{stdout}"
    );
    assert_eq!(regen.request.path, "/v1/completions");
    let sent: Value = regen.request_json().unwrap();
    assert!(sent["prompt"].is_string(), "{sent}");
    // The recorded sampling settings, under /v1/completions names.
    assert_eq!(sent["temperature"], request["temperature"]);
    assert_eq!(sent["seed"], request["seed"]);
    assert_eq!(sent["max_tokens"], request["max_tokens"]);
    assert_eq!(sent["stream"], false);
    let (anns, text, verified, prompt_from) = (&r.anns, &r.text, r.verified, &r.prompt_from);
    assert_eq!(
        verified,
        Some(true),
        "regenerated {text:?}, server {server_msg:?}"
    );
    assert_eq!(prompt_from.as_deref(), Some("llama-server /apply-template"));
    assert_eq!(parsed_calls(text, &template_text, &request), server_calls);
    let raw = raw_output(&original, anns);
    assert!(
        matches!(
            raw,
            RawOutput::Text {
                source: RawSource::Regenerated {
                    verdict: Verdict::Verified,
                    ..
                },
                ..
            }
        ),
        "{raw:?}"
    );

    // 2. The SGLang path: toolscope's local render of the template file (SGLang cannot render
    // a chat request), as a string prompt to /v1/completions — here llama-server's.
    let template_path = qwen3_template().unwrap().1;
    let r = cli_regenerate(
        &session,
        &base,
        original.id,
        &[
            "--engine",
            "sglang",
            "--template",
            template_path.to_str().unwrap(),
        ],
    );
    assert_eq!(r.regen.request.path, "/v1/completions");
    let (stdout, text, verified, prompt_from) = (&r.stdout, &r.text, r.verified, r.prompt_from);
    assert_eq!(
        prompt_from,
        Some(format!("local render of {}", template_path.display()))
    );
    assert_eq!(verified, Some(true), "{stdout}");
    assert_eq!(parsed_calls(text, &template_text, &request), server_calls);

    // 3. The prompt as token ids (vLLM's /tokenize shape): llama-server's own tokens of its
    // render, sent as `prompt: [ids]` to /v1/completions.
    let client = reqwest::Client::new();
    let rendered: Value = rt
        .block_on(async {
            client
                .post(format!("{base}/apply-template"))
                .json(&request)
                .send()
                .await?
                .json()
                .await
        })
        .unwrap();
    let prompt_text = rendered["prompt"].as_str().unwrap().to_owned();
    let tokenized: Value = rt
        .block_on(async {
            client
                .post(format!("{base}/tokenize"))
                .json(&serde_json::json!({"content": prompt_text, "add_special": true, "parse_special": true}))
                .send()
                .await?
                .json()
                .await
        })
        .unwrap();
    let ids: Vec<u64> = serde_json::from_value(tokenized["tokens"].clone()).unwrap();
    assert!(ids.len() > 100, "{tokenized}");
    let header = read_session(&session).unwrap().header;
    let mut writer = SessionWriter::open(&session, &header).unwrap();
    let opts = RegenOptions {
        server: Some(toolscope::session::ServerKind::LlamaServer),
        endpoint: Some(Endpoint::V1Completions),
        prompt: Some(Prompt {
            text: prompt_text,
            token_ids: Some(ids.clone()),
            from: "llama-server /tokenize ids".into(),
        }),
        template: Some(template_text.clone()),
        label: None,
    };
    let r = rt
        .block_on(regenerate_with(&base, &original, &mut writer, &opts))
        .expect("regenerate from token ids");
    drop(writer);
    let sent = r.exchange.request_json().unwrap();
    assert_eq!(sent["prompt"], serde_json::json!(ids));
    let Annotation::RawText { verified, .. } = &r.annotation else {
        unreachable!()
    };
    assert_eq!(
        *verified,
        Some(true),
        "regenerated {:?}, server {server_msg:?}",
        r.generated
    );
    assert_eq!(
        parsed_calls(&r.raw_text, &template_text, &request),
        server_calls
    );
}
