//! Safe to open anything a colleague sends (issue #16): hostile templates under a real memory
//! limit, escape sequences in recorded content, FIFOs and never-ending inputs, credentials in
//! URLs, one error shape for invalid UTF-8. Every test runs the real `toolscope` binary (or the
//! inspector's app harness) on hand-made inputs whose right answer is stated in the test.
//!
//! Timeouts here are hang guards only (a command that waits on a FIFO forever fails the test
//! after 60 s instead of hanging the suite); nothing asserts how fast anything is.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_toolscope"))
}

/// Runs `cmd` to completion; panics if it is still running after `guard` (killed first).
fn run_guarded(cmd: &mut Command, guard: Duration) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let start = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            return child.wait_with_output().expect("output");
        }
        if start.elapsed() > guard {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "hang guard: {cmd:?} still running after {guard:?}; stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

const GUARD: Duration = Duration::from_secs(60);

/// A template that asks for 100 GB in one call (issue #16 item 1, the 2-line session).
const HOSTILE: &str =
    "{{ 'a\\nb'|indent(100000000000) }}{% for m in messages %}{{ m.content }}{% endfor %}";
/// The same shape without the bomb (a control: the memory limit alone does not fail `check`).
const BENIGN: &str = "{{ 'a\\nb'|indent(2) }}{% for m in messages %}{{ m.content }}{% endfor %}";

fn session_with_template(dir: &Path, name: &str, template: &str) -> PathBuf {
    let header = serde_json::json!({
        "type": "header", "format": "toolscope-session/1", "created": "2026-12-01T10:00:00Z",
        "tool": "toolscope test", "upstream": "http://127.0.0.1:8080",
        "engine": {"kind": "llama-server"},
        "props": {"chat_template": template, "bos_token": "<s>"}
    });
    let body = r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
    let ex = serde_json::json!({
        "type": "exchange", "id": 1, "started": "2026-12-01T10:00:01Z",
        "request": {"method": "POST", "path": "/v1/chat/completions",
                    "headers": [["content-type", "application/json"]], "body": {"text": body}},
        "response": {"status": 200, "headers": [["content-type", "application/json"]],
                     "body": {"text": "{\"choices\":[{\"index\":0,\"finish_reason\":\"stop\",\"message\":{\"role\":\"assistant\",\"content\":\"hello\"}}]}"}},
        "timings": {"ttfb_us": 10, "total_us": 20}, "outcome": "complete"
    });
    let p = dir.join(name);
    std::fs::write(&p, format!("{header}\n{ex}\n")).unwrap();
    p
}

fn vocab() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/diagnose/vocab/tokenizer.json")
}

/// 1.5 GB of address space: far below what the hostile template asks for (100 GB), far above
/// what a check needs.
const AS_LIMIT: &str = "--as=1500000000";

#[test]
fn check_under_a_memory_limit_exits_2_naming_the_template_budget() {
    let dir = tempfile::tempdir().unwrap();
    let hostile = session_with_template(dir.path(), "hostile.jsonl", HOSTILE);
    let benign = session_with_template(dir.path(), "benign.jsonl", BENIGN);
    let check = |session: &Path| {
        run_guarded(
            Command::new("prlimit")
                .arg(AS_LIMIT)
                .arg("--")
                .arg(bin())
                .arg("check")
                .arg("--vocab")
                .arg(vocab())
                .arg(session),
            GUARD,
        )
    };
    let ok = check(&benign);
    assert!(
        matches!(ok.status.code(), Some(0 | 1)),
        "control under the same limit: {:?} {}",
        ok.status,
        String::from_utf8_lossy(&ok.stderr)
    );
    let out = check(&hostile);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{:?}: {err}", out.status);
    // names the file and exchange, the template position, and the limit
    assert!(err.contains("hostile.jsonl: exchange 1"), "{err}");
    assert!(err.contains("chat_template:1:"), "{err}");
    assert!(err.contains("template budget"), "{err}");
    assert!(err.contains("indent would build"), "{err}");
}

#[test]
fn render_under_a_memory_limit_exits_2_naming_the_template_budget() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("t.jinja");
    std::fs::write(&t, "x\n  {{ messages|tojson(indent=1000000000)|length }}").unwrap();
    let r = dir.path().join("r.json");
    std::fs::write(&r, r#"{"messages":[{"role":"user","content":"hi"}]}"#).unwrap();
    let out = run_guarded(
        Command::new("prlimit")
            .arg(AS_LIMIT)
            .arg("--")
            .arg(bin())
            .arg("render")
            .arg("--template")
            .arg(&t)
            .arg("--request")
            .arg(&r),
        GUARD,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!("{}:2:", t.display())) && err.contains("template budget"),
        "{err}"
    );
}

/// The inspector opens the hostile session and shows the failed render in the Template pane.
/// Runs the app harness in a child process under `prlimit --as` (this same test binary,
/// re-executed with the inner test selected).
#[test]
fn inspector_opens_the_hostile_session_under_a_memory_limit() {
    let dir = tempfile::tempdir().unwrap();
    let hostile = session_with_template(dir.path(), "hostile.jsonl", HOSTILE);
    let out = run_guarded(
        Command::new("prlimit")
            .arg(AS_LIMIT)
            .arg("--")
            .arg(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "safe_inputs::inner_inspector_on_hostile_session",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("TOOLSCOPE_TEST_SESSION", &hostile),
        GUARD,
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{:?}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("1 passed"), "{stdout}");
}

#[tokio::test]
#[ignore = "run by inspector_opens_the_hostile_session_under_a_memory_limit"]
async fn inner_inspector_on_hostile_session() {
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;
    use toolscope::tui::keymap::{Key, Keymap};
    use toolscope::tui::theme::Theme;
    use toolscope::tui::{State, Tui};
    let Some(path) = std::env::var_os("TOOLSCOPE_TEST_SESSION") else {
        return;
    };
    let theme = Theme::resolve(Some("dark"), None, true).unwrap();
    let mut state = State::new(Keymap::default(), theme, (110, 34));
    let fx = state.open_files(vec![PathBuf::from(path)], None);
    let mut tui = Tui::new(
        Terminal::new(TestBackend::new(110, 34)).unwrap(),
        state,
        true,
    );
    tui.run_effects(fx);
    let key = |k: &str| {
        let key = Key::parse(k).unwrap();
        Ok(crossterm::event::Event::Key(crossterm::event::KeyEvent {
            code: key.code,
            modifiers: key.mods,
            kind: crossterm::event::KeyEventKind::Press,
            state: crossterm::event::KeyEventState::NONE,
        }))
    };
    tui.run(futures::stream::iter(vec![key("3"), key("s")]))
        .await
        .unwrap();
    let t = &tui.state.analysis().expect("exchange analysed").template;
    let err = match &t.local {
        Some(Err(e)) => e.clone(),
        other => panic!("the local render must fail with the budget: {other:?}"),
    };
    assert!(err.contains("template budget"), "{err}");
    let buf = tui.terminal.backend().buffer();
    let screen: String = (0..buf.area.height)
        .map(|y| {
            (0..buf.area.width)
                .map(|x| buf[(x, y)].symbol())
                .collect::<String>()
                + "\n"
        })
        .collect();
    assert!(screen.contains("template budget"), "{screen}");
}

/// tests/data/replay/ollama-docs.jsonl with every `ollama_show` template replaced by Go's
/// `{{range 1000000000000}}{{end}}` (issue #27 item 1: collected before the first step it asked
/// for 48 TB and aborted `open` with exit 134).
fn session_with_hostile_show(dir: &Path) -> PathBuf {
    let src = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/replay/ollama-docs.jsonl"),
    )
    .unwrap();
    let mut out = String::new();
    for line in src.lines() {
        let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
        if v["kind"] == "ollama_show" {
            v["show"]["template"] = "{{range 1000000000000}}{{end}}".into();
        }
        out.push_str(&format!("{v}\n"));
    }
    let p = dir.join("hostile-show.jsonl");
    std::fs::write(&p, out).unwrap();
    p
}

/// `open` on an Ollama session whose `/api/show` template is the hostile Go `range`: the
/// inspector opens, analyses exchange #1 and shows the budget failure as a finding, under the
/// same `prlimit --as` as the Jinja session above.
#[test]
fn inspector_opens_the_hostile_ollama_show_session_under_a_memory_limit() {
    let dir = tempfile::tempdir().unwrap();
    let hostile = session_with_hostile_show(dir.path());
    let out = run_guarded(
        Command::new("prlimit")
            .arg(AS_LIMIT)
            .arg("--")
            .arg(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "safe_inputs::inner_inspector_on_hostile_ollama_show",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("TOOLSCOPE_TEST_SESSION", &hostile),
        GUARD,
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{:?}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("1 passed"), "{stdout}");
}

#[tokio::test]
#[ignore = "run by inspector_opens_the_hostile_ollama_show_session_under_a_memory_limit"]
async fn inner_inspector_on_hostile_ollama_show() {
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;
    use toolscope::tui::keymap::{Key, Keymap};
    use toolscope::tui::theme::Theme;
    use toolscope::tui::{State, Tui};
    let Some(path) = std::env::var_os("TOOLSCOPE_TEST_SESSION") else {
        return;
    };
    let theme = Theme::resolve(Some("dark"), None, true).unwrap();
    let mut state = State::new(Keymap::default(), theme, (110, 34));
    let fx = state.open_files(vec![PathBuf::from(path)], None);
    let mut tui = Tui::new(
        Terminal::new(TestBackend::new(110, 34)).unwrap(),
        state,
        true,
    );
    tui.run_effects(fx);
    let key = |k: &str| {
        let key = Key::parse(k).unwrap();
        Ok(crossterm::event::Event::Key(crossterm::event::KeyEvent {
            code: key.code,
            modifiers: key.mods,
            kind: crossterm::event::KeyEventKind::Press,
            state: crossterm::event::KeyEventState::NONE,
        }))
    };
    // the Template pane, then the Findings pane (every pane that renders the template)
    tui.run(futures::stream::iter(vec![key("3"), key("1")]))
        .await
        .unwrap();
    let a = tui.state.analysis().expect("exchange analysed");
    assert_eq!(a.exchange.id, 1);
    // check names the same failure for #1: `template.render_error … template budget: more
    // than 4000000 steps` (the Go interpreter's step budget)
    assert!(
        a.findings
            .iter()
            .any(|f| f.message.contains("template budget")),
        "{:#?}",
        a.findings
    );
}

/// A session whose recorded content carries OSC 52 (clipboard) and OSC 0 (title) sequences:
/// in the client's model field, a message, and the model's reply (a leaked tool call, which
/// `check` quotes in its finding).
fn session_with_escapes(dir: &Path) -> PathBuf {
    let header = serde_json::json!({
        "type": "header", "format": "toolscope-session/1", "created": "2026-12-01T10:00:00Z",
        "tool": "toolscope test", "upstream": "http://127.0.0.1:8080",
        "engine": {"kind": "unknown"}
    });
    let req = serde_json::json!({
        "model": "m\u{1b}]0;pwned-title\u{7}",
        "messages": [{"role": "user", "content": "weather?"}],
        "tools": [{"type": "function", "function": {"name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
    });
    let reply = serde_json::json!({"choices": [{"index": 0, "finish_reason": "stop", "message": {
        "role": "assistant",
        "content": "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"\u{1b}]52;c;cm0gLXJmIH4=\u{7}Wien\"}}\n</tool_call>"
    }}]});
    let ex = serde_json::json!({
        "type": "exchange", "id": 1, "started": "2026-12-01T10:00:01Z",
        "request": {"method": "POST", "path": "/v1/chat/completions",
                    "headers": [["content-type", "application/json"]],
                    "body": {"text": req.to_string()}},
        "response": {"status": 200, "headers": [["content-type", "application/json"]],
                     "body": {"text": reply.to_string()}},
        "timings": {"ttfb_us": 10, "total_us": 20}, "outcome": "complete"
    });
    let p = dir.join("escapes.jsonl");
    std::fs::write(&p, format!("{header}\n{ex}\n")).unwrap();
    p
}

#[test]
fn check_prints_escape_sequences_visibly_never_raw() {
    let dir = tempfile::tempdir().unwrap();
    let s = session_with_escapes(dir.path());
    let before = std::fs::read(&s).unwrap();
    let out = run_guarded(Command::new(bin()).arg("check").arg(&s), GUARD);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{:?} {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !out.stdout.contains(&0x1b) && !out.stderr.contains(&0x1b),
        "{stdout}"
    );
    assert!(!out.stdout.contains(&0x07), "{stdout}");
    // the sequence is shown, not dropped: the finding quoting the reply still says what it held
    assert!(stdout.contains("\\x1b]52;c;"), "{stdout}");
    // recorded bytes are untouched
    assert_eq!(std::fs::read(&s).unwrap(), before);
}

#[test]
fn fifo_inputs_are_refused_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("input.fifo");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let req = dir.path().join("r.json");
    std::fs::write(&req, r#"{"messages":[{"role":"user","content":"hi"}]}"#).unwrap();
    let tpl = dir.path().join("t.jinja");
    std::fs::write(&tpl, "{{ messages }}").unwrap();
    let out_session = dir.path().join("out.jsonl");
    let f = fifo.to_str().unwrap();
    let cases: Vec<Vec<&str>> = vec![
        vec!["check", f],
        vec!["check", "--request", f],
        vec!["import", f, "-o", out_session.to_str().unwrap()],
        vec![
            "render",
            "--template",
            f,
            "--request",
            req.to_str().unwrap(),
        ],
        vec![
            "render",
            "--template",
            tpl.to_str().unwrap(),
            "--request",
            f,
        ],
        vec!["flatten", f],
        vec!["parse", f],
        vec!["parse", "--template", f, req.to_str().unwrap()],
        vec!["send", f, "--url", "http://127.0.0.1:9"],
        vec![
            "diff",
            "--template",
            tpl.to_str().unwrap(),
            "--template",
            f,
            "--request",
            req.to_str().unwrap(),
        ],
        vec![
            "diff",
            "--template",
            tpl.to_str().unwrap(),
            "--template",
            tpl.to_str().unwrap(),
            "--request",
            f,
        ],
        vec!["check", "/dev/zero"],
    ];
    for args in cases {
        let out = run_guarded(Command::new(bin()).args(&args), GUARD);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("not a regular file (FIFO)")
                || err.contains("not a regular file (character device)"),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn invalid_utf8_has_one_error_shape_with_line_column_and_byte() {
    let dir = tempfile::tempdir().unwrap();
    let req = dir.path().join("r.json");
    std::fs::write(&req, b"{\"messages\":\n [\"\xff\"]}").unwrap();
    let tpl = dir.path().join("t.jinja");
    std::fs::write(&tpl, b"ok\n{{ x }}\xfe").unwrap();
    let good_req = dir.path().join("g.json");
    std::fs::write(&good_req, r#"{"messages":[]}"#).unwrap();
    // byte offsets and line:column counted by hand from the bytes above
    let cases = [
        (
            vec![
                "render",
                "--template",
                tpl.to_str().unwrap(),
                "--request",
                req.to_str().unwrap(),
            ],
            format!("{}:2:4: invalid UTF-8 (byte 16)", req.display()),
        ),
        (
            vec![
                "render",
                "--template",
                tpl.to_str().unwrap(),
                "--request",
                good_req.to_str().unwrap(),
            ],
            format!("{}:2:8: invalid UTF-8 (byte 10)", tpl.display()),
        ),
        (
            vec!["parse", tpl.to_str().unwrap()],
            format!("{}:2:8: invalid UTF-8 (byte 10)", tpl.display()),
        ),
    ];
    for (args, want) in cases {
        let out = run_guarded(Command::new(bin()).args(&args), GUARD);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(&want), "{args:?}: want {want:?} in {err}");
    }
}

#[test]
fn har_import_redacts_query_credentials_and_userinfo() {
    let dir = tempfile::tempdir().unwrap();
    let har = serde_json::json!({"log": {"version": "1.2", "creator": {"name": "t"}, "entries": [{
        "startedDateTime": "2026-12-01T10:00:00Z", "time": 1,
        "request": {"method": "POST",
            "url": "http://alice:S3CRET-PW@127.0.0.1:8080/v1beta/models/g:generateContent?alt=sse&key=S3CRET-KEY&access_token=S3CRET-TOK",
            "headers": [{"name": "x-goog-api-key", "value": "S3CRET-HDR"}, {"name": "content-type", "value": "application/json"}],
            "postData": {"mimeType": "application/json", "text": "{}"}},
        "response": {"status": 200, "headers": [], "content": {"mimeType": "application/json", "text": "{}"}},
        "timings": {"send": 0, "wait": 1, "receive": 0}
    }]}});
    let p = dir.path().join("in.har");
    std::fs::write(&p, har.to_string()).unwrap();
    let out_path = dir.path().join("out.jsonl");
    let out = run_guarded(
        Command::new(bin())
            .arg("import")
            .arg(&p)
            .arg("-o")
            .arg(&out_path),
        GUARD,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let written = std::fs::read_to_string(&out_path).unwrap();
    assert!(!written.contains("S3CRET"), "{written}");
    assert!(
        written.contains("alt=sse&key=[redacted]&access_token=[redacted]"),
        "{written}"
    );
    assert!(
        written.contains("http://[redacted]@127.0.0.1:8080"),
        "{written}"
    );
    assert!(!String::from_utf8_lossy(&out.stderr).contains("S3CRET"));
    // --keep-secrets keeps its meaning: verbatim
    let out = run_guarded(
        Command::new(bin())
            .arg("import")
            .arg(&p)
            .arg("-o")
            .arg(&out_path)
            .arg("--force")
            .arg("--keep-secrets"),
        GUARD,
    );
    assert!(out.status.success());
    let written = std::fs::read_to_string(&out_path).unwrap();
    assert!(written.contains("key=S3CRET-KEY") && written.contains("S3CRET-HDR"));
}

#[test]
fn error_messages_show_escape_sequences_visibly() {
    // a file name with an OSC title sequence, named in the error message
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x\u{1b}]0;title\u{7}.json");
    std::fs::write(&p, "{not json").unwrap();
    let out = run_guarded(Command::new(bin()).arg("flatten").arg(&p), GUARD);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(!out.stderr.contains(&0x1b), "{err}");
    assert!(err.contains("x\\x1b]0;title\\x07.json:1:2:"), "{err}");
    let _ = std::io::stderr().flush();
}

#[test]
fn a_request_without_messages_is_unusable_input_for_render_and_check() {
    let dir = tempfile::tempdir().unwrap();
    let req = dir.path().join("r.json");
    std::fs::write(&req, r#"{"model":"m","tools":[]}"#).unwrap();
    let tpl = dir.path().join("t.jinja");
    std::fs::write(&tpl, "{% for m in messages %}{{ m.content }}{% endfor %}").unwrap();
    let resp = dir.path().join("resp.json");
    std::fs::write(
        &resp,
        r#"{"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"x"}}]}"#,
    )
    .unwrap();
    for args in [
        vec![
            "render",
            "--template",
            tpl.to_str().unwrap(),
            "--request",
            req.to_str().unwrap(),
        ],
        vec!["check", "--request", req.to_str().unwrap()],
        vec![
            "check",
            "--request",
            req.to_str().unwrap(),
            "--response",
            resp.to_str().unwrap(),
        ],
    ] {
        let out = run_guarded(Command::new(bin()).args(&args), GUARD);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(&format!("{}: /messages: missing", req.display())),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn check_does_not_say_ok_on_a_request_body_it_cannot_read() {
    let dir = tempfile::tempdir().unwrap();
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let header = r#"{"type":"header","format":"toolscope-session/1","created":"2026-12-01T10:00:00Z","tool":"t"}"#;
    let ex = serde_json::json!({
        "type": "exchange", "id": 1, "started": "2026-12-01T10:00:01Z",
        "request": {"method": "POST", "path": "/v1/chat/completions", "headers": [],
                    "body": {"text": deep}},
        "response": {"status": 200, "headers": [], "body": {"text": "{}"}},
        "timings": {}, "outcome": "complete"
    });
    let p = dir.path().join("deep.jsonl");
    std::fs::write(&p, format!("{header}\n{ex}\n")).unwrap();
    let out = run_guarded(Command::new(bin()).arg("check").arg(&p), GUARD);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("exchange 1: request body 1:"), "{stdout}");
    assert!(stdout.contains("recursion limit exceeded"), "{stdout}");
}

#[tokio::test]
async fn list_rows_keep_their_columns_with_control_characters_in_the_model() {
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;
    use toolscope::tui::keymap::Keymap;
    use toolscope::tui::theme::Theme;
    use toolscope::tui::{State, Tui};
    let dir = tempfile::tempdir().unwrap();
    let header = r#"{"type":"header","format":"toolscope-session/1","created":"2026-12-01T10:00:00Z","tool":"t"}"#;
    let line = |id: u64, model: &str| {
        let body =
            serde_json::json!({"model": model, "messages": [{"role": "user", "content": "x"}]});
        serde_json::json!({
            "type": "exchange", "id": id, "started": "2026-12-01T10:00:01Z",
            "request": {"method": "POST", "path": "/v1/chat/completions", "headers": [],
                        "body": {"text": body.to_string()}},
            "response": {"status": 200, "headers": [], "body": {"text": "{}"}},
            "timings": {"ttfb_us": 1, "total_us": 2}, "outcome": "complete"
        })
        .to_string()
    };
    let p = dir.path().join("ctl.jsonl");
    std::fs::write(
        &p,
        format!(
            "{header}\n{}\n{}\n",
            line(1, "plain"),
            line(2, "a\tb\n\u{1b}[31mc")
        ),
    )
    .unwrap();
    let theme = Theme::resolve(Some("dark"), None, true).unwrap();
    let mut state = State::new(Keymap::default(), theme, (110, 34));
    let fx = state.open_files(vec![p], None);
    let mut tui = Tui::new(
        Terminal::new(TestBackend::new(110, 34)).unwrap(),
        state,
        true,
    );
    tui.run_effects(fx);
    tui.run(futures::stream::iter(Vec::new())).await.unwrap();
    let buf = tui.terminal.backend().buffer();
    let rows: Vec<String> = (0..buf.area.height)
        .map(|y| (0..buf.area.width).map(|x| buf[(x, y)].symbol()).collect())
        .collect();
    let row = |id: &str| {
        rows.iter()
            .find(|r| r.contains(&format!("   {id} POST")))
            .unwrap_or_else(|| panic!("row {id}: {rows:#?}"))
            .clone()
    };
    let (r1, r2) = (row("1"), row("2"));
    assert!(r2.contains("a\\tb\\n\\x1b[31mc"), "{r2}");
    // the status column is at the same place in both rows
    assert_eq!(r1.find(" 200 "), r2.find(" 200 "), "\n{r1}\n{r2}");
}
