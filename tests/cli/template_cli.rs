//! `toolscope render` as users run it: output, formats, errors and exit codes.

use crate::support;

use std::io::Write as _;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

fn write(dir: &std::path::Path, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn render(args: &[&str]) -> std::process::Output {
    Command::new(support::bin())
        .arg("render")
        .args(args)
        .output()
        .unwrap()
}

/// The Python reference render (transformers' Jinja2 settings) of `template` for `request`.
fn reference(template: &str, request: &Value, now: &str) -> Option<String> {
    let ctx = toolscope::template::RenderInput::from_openai_request(request).context();
    let jobs = json!({"jobs": [{"id": "x", "template": template, "context": ctx, "now": now}]});
    let mut child = Command::new("python3")
        .arg(support::root().join("scripts/reference_render.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .ok()?;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(jobs.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().ok()?;
    let v: Value = serde_json::from_slice(out.stdout.split(|&b| b == b'\n').next()?).ok()?;
    v.get("prompt").and_then(Value::as_str).map(str::to_owned)
}

#[test]
fn text_output_is_exactly_the_reference_prompt() {
    let Some(corpus) = support::corpus() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let case = support::case_json("01-gemma4-anyof-type-lost", "case.json");
    let req = case["inputs"]["request"].clone();
    let req_path = write(dir.path(), "req.json", &req.to_string());
    let tmpl_path = corpus.join("google-gemma-4-31B-it.jinja");
    let out = render(&[
        "--template",
        tmpl_path.to_str().unwrap(),
        "--request",
        req_path.to_str().unwrap(),
        "--now",
        "2026-11-29T12:00:00Z",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = String::from_utf8(out.stdout).unwrap();
    assert!(
        got.contains("quantity:{description:<|\"|>how many<|\"|>,type:<|\"|><|\"|>}"),
        "{got}"
    );
    if let Some(want) = reference(
        &std::fs::read_to_string(&tmpl_path).unwrap(),
        &req,
        "2026-11-29T12:00:00Z",
    ) {
        assert_eq!(got, want);
    }
}

#[test]
fn strict_mode_error_names_file_line_column_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let t = write(
        dir.path(),
        "bad.jinja",
        "{% for m in messages %}{{ m.content }}\n{% endfor %}  {{ nosuchvar }}",
    );
    let r = write(
        dir.path(),
        "req.json",
        r#"{"messages": [{"role": "user", "content": "hi"}]}"#,
    );
    let out = render(&[
        "--template",
        t.to_str().unwrap(),
        "--request",
        r.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "lenient mode renders undefined as empty"
    );
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "hi\n  ");
    let out = render(&[
        "--template",
        t.to_str().unwrap(),
        "--request",
        r.to_str().unwrap(),
        "--strict",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.jinja:2:18"), "{err}");
    assert!(out.stdout.is_empty());
}

#[test]
fn malformed_request_and_raise_exception_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let t = write(
        dir.path(),
        "t.jinja",
        "{% if messages[0].role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}ok",
    );
    let bad = write(
        dir.path(),
        "bad.json",
        "{\"messages\": [\n  {\"role\": \"user\",}\n]}",
    );
    let out = render(&[
        "--template",
        t.to_str().unwrap(),
        "--request",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("bad.json:2:"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sys = write(
        dir.path(),
        "sys.json",
        r#"{"messages": [{"role": "system", "content": "x"}]}"#,
    );
    let out = render(&[
        "--template",
        t.to_str().unwrap(),
        "--request",
        sys.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("System role not supported") && err.contains("t.jinja:1:"),
        "{err}"
    );
}

#[test]
fn json_output_with_gguf_vocab_flags_pseudo_special_markers() {
    let (Some(corpus), Some(gguf)) = (support::corpus(), support::smollm2()) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let r = write(
        dir.path(),
        "req.json",
        &json!({"messages": [{"role": "user", "content": "Weather?"}],
                "tools": [{"type": "function", "function": {"name": "w", "parameters": {"type": "object", "properties": {}}}}]})
        .to_string(),
    );
    let t = corpus.join("Qwen-Qwen3-0.6B.jinja");
    let out = render(&[
        "--template",
        t.to_str().unwrap(),
        "--request",
        r.to_str().unwrap(),
        "--vocab",
        gguf.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let prompt = v["prompt"].as_str().unwrap();
    let toks = v["tokens"].as_array().unwrap();
    let joined: String = toks.iter().map(|t| t["piece"].as_str().unwrap()).collect();
    assert_eq!(joined, prompt);
    assert_eq!(toks[0]["piece"], json!("<|im_start|>"));
    assert_eq!(toks[0]["special"], json!(true));
    let rules: Vec<(&str, &str)> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["rule"].as_str().unwrap(),
                f["evidence"]["excerpt"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert!(
        rules.contains(&("token.pseudo_special", "<tool_call>")),
        "{rules:?}"
    );
}

#[test]
fn anthropic_body_renders_like_its_openai_form() {
    let dir = tempfile::tempdir().unwrap();
    let t = write(
        dir.path(),
        "t.jinja",
        "{% for m in messages %}[{{ m.role }}]{% if m.content is string %}{{ m.content }}{% else %}{% for p in m.content %}{{ p.text }}{% endfor %}{% endif %}{% for c in m.tool_calls or [] %}<call {{ c.function.name }} {{ c.function.arguments | tojson }}>{% endfor %}\n{% endfor %}",
    );
    let anth = write(
        dir.path(),
        "a.json",
        &json!({"system": "S", "max_tokens": 10, "messages": [
            {"role": "user", "content": "Q"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {"x": 1}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "R"}]}]})
        .to_string(),
    );
    let out = render(&[
        "--template",
        t.to_str().unwrap(),
        "--request",
        anth.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Hand-derived from llama-server's conversion: system message, user, assistant with an
    // empty content and one call (arguments parsed back to an object), tool result. (The
    // newline after `{% endfor %}` is removed by trim_blocks, as in Jinja2.)
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "[system]S[user]Q[assistant]<call f {\"x\": 1}>[tool]R"
    );
}

/// A request whose `messages` is not an array of objects is an error naming the request file
/// and the JSON Pointer (exit 2), not a template line tripping over it.
#[test]
fn malformed_messages_name_the_request_and_pointer() {
    let dir = tempfile::tempdir().unwrap();
    let tpl = write(
        dir.path(),
        "t.jinja",
        "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}",
    );
    for (name, body, want) in [
        (
            "num.json",
            r#"{"messages": 5}"#,
            "num.json: /messages: expected an array of messages, got a number",
        ),
        (
            "elem.json",
            r#"{"messages": [{"role": "user", "content": "hi"}, "oops"]}"#,
            "elem.json: /messages/1: expected a message object with \"role\", got a string",
        ),
    ] {
        let req = write(dir.path(), name, body);
        let out = render(&[
            "--template",
            tpl.to_str().unwrap(),
            "--request",
            req.to_str().unwrap(),
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(want), "{err}");
    }
}

/// An Ollama Go template renders as Ollama renders it; a Jinja render profile (`--engine`)
/// cannot render one, which is an error naming the file, not a flag silently ignored.
#[test]
fn go_template_under_a_jinja_profile_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let tpl = write(
        dir.path(),
        "chat.gotmpl",
        "{{ range .Messages }}[{{ .Role }}:{{ .Content }}]{{ end }}",
    );
    let req = write(
        dir.path(),
        "req.json",
        r#"{"model": "m", "messages": [{"role": "user", "content": "Hi"}]}"#,
    );
    let (t, r) = (tpl.to_str().unwrap(), req.to_str().unwrap());
    let ok = render(&["--template", t, "--request", r]);
    assert_eq!(ok.status.code(), Some(0), "{ok:?}");
    assert_eq!(String::from_utf8_lossy(&ok.stdout), "[user:Hi]");
    for engine in ["llama.cpp", "transformers"] {
        let out = render(&["--template", t, "--request", r, "--engine", engine]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{engine}: {err}");
        assert!(
            err.contains("chat.gotmpl") && err.contains("Go template") && err.contains("--engine"),
            "{err}"
        );
    }
}

/// `--engine ollama` (and `ollama@VERSION`) is the Go templates' profile: it renders an Ollama
/// Go template as no `--engine` does, and a Jinja template under it is an error naming the file
/// and the profile, not a render by the wrong engine.
#[test]
fn ollama_profile_renders_go_templates_only() {
    let dir = tempfile::tempdir().unwrap();
    let go = write(
        dir.path(),
        "chat.gotmpl",
        "{{ range .Messages }}[{{ .Role }}:{{ .Content }}]{{ end }}",
    );
    let jinja = write(
        dir.path(),
        "chat.jinja",
        "{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}",
    );
    let req = write(
        dir.path(),
        "req.json",
        r#"{"model": "m", "messages": [{"role": "user", "content": "Hi"}]}"#,
    );
    let (g, j, r) = (
        go.to_str().unwrap(),
        jinja.to_str().unwrap(),
        req.to_str().unwrap(),
    );
    for engine in ["ollama", "ollama@0.13.5", "Ollama@v0.14.0-rc1"] {
        let out = render(&["--template", g, "--request", r, "--engine", engine]);
        assert_eq!(out.status.code(), Some(0), "{engine}: {out:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "[user:Hi]",
            "{engine}"
        );
        let out = render(&["--template", j, "--request", r, "--engine", engine]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{engine}: {err}");
        assert!(
            err.contains("chat.jinja")
                && err.contains("a Jinja template")
                && err.contains("--engine ollama"),
            "{err}"
        );
    }
    let out = render(&["--template", j, "--request", r]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "[user:Hi]");
    // an unknown profile names the accepted ones
    let out = render(&["--template", j, "--request", r, "--engine", "ollama@latest"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("ollama@VERSION") && err.contains("llama.cpp@BUILD"),
        "{err}"
    );
}
