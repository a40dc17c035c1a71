//! `toolscope check --vocab`: the request rendered with the template, split by the vocabulary,
//! and judged by the token rules (bos.duplicate, token.special_split, token.pseudo_special).

use crate::support;

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

fn data(file: &str) -> PathBuf {
    support::root().join("tests/data/diagnose/vocab").join(file)
}

/// Runs `toolscope check --format json ARGS`; returns (exit code, stdout JSON, stderr).
fn check(args: &[&str]) -> (i32, Value, String) {
    let out = Command::new(support::bin())
        .args(["check", "--format", "json"])
        .args(args)
        .output()
        .expect("run toolscope");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let v = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {stdout}\nstderr: {stderr}"));
    (out.status.code().unwrap_or(-1), v, stderr)
}

fn findings<'a>(v: &'a Value, rule: &str) -> Vec<&'a Value> {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["rule"] == rule)
        .collect()
}

fn s(p: &std::path::Path) -> &str {
    p.to_str().unwrap()
}

/// `check --template TPL --vocab VOCAB --request REQ`.
fn check_pair(
    tpl: &std::path::Path,
    vocab: &std::path::Path,
    req: &std::path::Path,
) -> (i32, Value, String) {
    check(&[
        "--template",
        s(tpl),
        "--vocab",
        s(vocab),
        "--request",
        s(req),
    ])
}

/// The template prints `<s>` and the tokenizer's post-processor prepends `<s>` too: two BOS at
/// token positions 0 and 1 (case 09's shape, by construction of tests/data/diagnose/vocab).
#[test]
fn template_bos_and_engine_bos_are_a_duplicate() {
    let (tpl, vocab, req) = (
        data("tokenizer_config.json"),
        data("tokenizer.json"),
        data("request.json"),
    );
    let (code, v, err) = check_pair(&tpl, &vocab, &req);
    let f = findings(&v, "bos.duplicate");
    assert_eq!(f.len(), 1, "{v:#}\n{err}");
    assert!(
        f[0]["message"]
            .as_str()
            .unwrap()
            .contains("2 BOS tokens (`<s>`) at the start of the prompt, at token positions 0, 1"),
        "{}",
        f[0]["message"]
    );
    assert_eq!(f[0]["evidence"]["token"], 1);
    // The engine's BOS is zero-width; the printed one starts the prompt.
    assert_eq!(f[0]["evidence"]["offset"], 0);
    assert_eq!(f[0]["evidence"]["file"], s(&req));
    assert_eq!(code, 1);

    // The same vocabulary with a template that does not print the BOS: one BOS, no finding.
    let tpl = data("tokenizer_config-no-bos.json");
    let (code, v, err) = check_pair(&tpl, &vocab, &req);
    assert!(findings(&v, "bos.duplicate").is_empty(), "{v:#}\n{err}");
    assert_eq!(code, 0, "{v:#}");
}

/// Without --vocab the same inputs have no tokenization to judge: no token findings (the rule
/// only fires on the vocabulary's split).
#[test]
fn without_vocab_no_token_rules() {
    let (tpl, req) = (data("tokenizer_config.json"), data("request.json"));
    let (_, v, _) = check(&["--template", s(&tpl), "--request", s(&req)]);
    assert!(findings(&v, "bos.duplicate").is_empty(), "{v:#}");
}

/// A session exchange with a request, a tokenizer.json vocabulary and the template as
/// `--template`: the token rules run per exchange, and evidence names the session file.
#[test]
fn session_exchanges_are_rendered_with_the_vocab() {
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join("s.jsonl");
    let req = std::fs::read_to_string(data("request.json")).unwrap();
    let header = r#"{"type":"header","format":"toolscope-session/1","created":"2026-11-30T10:00:00.000Z","tool":"toolscope 0.1.0","upstream":"http://127.0.0.1:8080"}"#;
    let body = serde_json::json!({"object":"chat.completion","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"hello"}}]});
    let ex = serde_json::json!({"type":"exchange","id":1,"started":"2026-11-30T10:00:01.000000Z",
        "request":{"method":"POST","path":"/v1/chat/completions","headers":[["content-type","application/json"]],"body":{"text":req}},
        "response":{"status":200,"headers":[["content-type","application/json"]],"body":{"text":body.to_string()}},
        "timings":{"ttfb_us":1000,"total_us":2000},"outcome":"complete"});
    std::fs::write(&session, format!("{header}\n{ex}\n")).unwrap();
    let (tpl, vocab) = (data("tokenizer_config.json"), data("tokenizer.json"));
    let (code, v, err) = check(&["--template", s(&tpl), "--vocab", s(&vocab), s(&session)]);
    let f = findings(&v, "bos.duplicate");
    assert_eq!(f.len(), 1, "{v:#}\n{err}");
    assert_eq!(f[0]["exchange"], 1);
    assert_eq!(f[0]["evidence"]["file"], s(&session));
    assert_eq!(v["exchanges"][0]["file"], s(&session));
    assert_eq!(code, 1);
}

/// SmolLM2's GGUF vocabulary with the Qwen3-0.6B corpus template: the Hermes parser's
/// `<tool_call>` is no token there. Alone it is 5 pieces `<`,`tool`,`_`,`call`,`>` (llama-server
/// build 11434 /tokenize on SmolLM2, shared/notes/real-server.md); in the template's sentence
/// "within <tool_call></tool_call> XML tags" the real server's /tokenize, recorded with
/// exchange 1 of tests/data/session-smollm2.jsonl, gives ` <`,`tool`,`_`,`call`,`></` — and so
/// must toolscope's render split by the GGUF.
#[test]
fn qwen3_template_on_smollm2_splits_tool_call() {
    let (Some(gguf), Some(corpus)) = (support::smollm2(), support::corpus()) else {
        return;
    };
    const PIECES: &str = "5 pieces (` <`,`tool`,`_`,`call`,`></`)";
    // The real server's tokens (no --vocab: the session's /tokenize annotation).
    let session = support::root().join("tests/data/session-smollm2.jsonl");
    let (_, server, _) = check(&[s(&session)]);
    let srv = findings(&server, "token.special_split");
    assert!(
        srv.iter().any(|f| f["exchange"] == 1
            && f["evidence"]["excerpt"] == "<tool_call>"
            && f["message"].as_str().unwrap().contains(PIECES)),
        "the recorded server tokens changed: {server:#}"
    );

    let tpl = corpus.join("Qwen-Qwen3-0.6B.jinja");
    let req = data("request-tools.json");
    let (code, v, err) = check_pair(&tpl, &gguf, &req);
    let split = findings(&v, "token.special_split");
    let tc = split
        .iter()
        .find(|f| f["evidence"]["excerpt"] == "<tool_call>")
        .unwrap_or_else(|| panic!("no <tool_call> split: {v:#}\n{err}"));
    let msg = tc["message"].as_str().unwrap();
    assert!(
        msg.contains("hermes parser needs `<tool_call>`") && msg.contains(PIECES),
        "{msg}"
    );
    // The offset is where the template's instructions print the marker first.
    let prompt = Command::new(support::bin())
        .args(["render", "--template", s(&tpl), "--request", s(&req)])
        .output()
        .unwrap();
    let prompt = String::from_utf8(prompt.stdout).unwrap();
    let at = prompt.find("<tool_call>").unwrap();
    assert!(
        prompt[at..].starts_with("<tool_call></tool_call> XML tags"),
        "{prompt}"
    );
    assert_eq!(tc["evidence"]["offset"], at);
    // `</tool_call>` is split as well; neither is reported again as pseudo_special.
    assert!(
        split
            .iter()
            .any(|f| f["evidence"]["excerpt"] == "</tool_call>"),
        "{v:#}"
    );
    assert!(
        !findings(&v, "token.pseudo_special")
            .iter()
            .any(|f| f["evidence"]["excerpt"] == "<tool_call>"),
        "{v:#}"
    );
    assert_eq!(code, 1);

    // Session exchanges rendered with --template get the same syntax (from that template),
    // so exchange 2 (no call in its reply) reports the split too.
    let (_, v, err) = check(&["--template", s(&tpl), "--vocab", s(&gguf), s(&session)]);
    let ex2: Vec<&Value> = findings(&v, "token.special_split")
        .into_iter()
        .filter(|f| f["exchange"] == 2)
        .collect();
    assert!(
        ex2.iter()
            .any(|f| f["evidence"]["excerpt"] == "<tool_call>"),
        "{v:#}\n{err}"
    );
}

/// `--vocab tokenizer_config.json` reads the tokenizer.json beside it, and its `add_bos_token`
/// decides whether the engine adds BOS: false → the template's printed `<s>` is the only one.
#[test]
fn tokenizer_config_as_vocab_applies_add_bos_token() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(data("tokenizer.json"), dir.path().join("tokenizer.json")).unwrap();
    let cfg = dir.path().join("tokenizer_config.json");
    let base: Value =
        serde_json::from_str(&std::fs::read_to_string(data("tokenizer_config.json")).unwrap())
            .unwrap();
    let req = data("request.json");
    for (add, dup) in [(false, 0), (true, 1)] {
        let mut c = base.clone();
        c["add_bos_token"] = Value::Bool(add);
        std::fs::write(&cfg, c.to_string()).unwrap();
        let (_, v, err) = check_pair(&cfg, &cfg, &req);
        assert_eq!(
            findings(&v, "bos.duplicate").len(),
            dup,
            "add_bos_token {add}: {v:#}\n{err}"
        );
    }
    // Alone, a tokenizer_config.json is no vocabulary: exit 2 naming the missing file.
    std::fs::remove_file(dir.path().join("tokenizer.json")).unwrap();
    let out = Command::new(support::bin())
        .args([
            "check",
            "--template",
            s(&cfg),
            "--vocab",
            s(&cfg),
            "--request",
            s(&req),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("tokenizer.json") && err.contains("holds no vocabulary"),
        "{err}"
    );
}
