//! `toolscope run [proxy options] AGENT -- ARGS` (issue #25 item 6) through the real binary,
//! no server: small `sh` agents against a fake OpenAI upstream (a tokio server in the test).
//!
//! Expected values come from outside toolscope's code: the proxy's port from its start line,
//! the environment and arguments as the agent itself prints them, the request as the agent
//! sent it and as the upstream received it, the answer as the upstream sent it.

use crate::support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use toolscope::session::read_session;

/// What the fake upstream answers to `POST /v1/chat/completions` (anything else: 404).
const ANSWER: &str = r#"{"id":"c-run","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"answer-from-upstream"},"finish_reason":"stop"}]}"#;

/// A fake OpenAI upstream on loopback (its own thread and tokio runtime): `POST
/// /v1/chat/completions` gets [`ANSWER`], `GET /props` gets `props` when given (a
/// llama-server look-alike), anything else (the proxy's other engine probes) a 404; each
/// connection closes after one answer. Every request it got goes to the receiver as (request
/// line, body).
fn fake_upstream_with(
    props: Option<&'static str>,
) -> (String, std::sync::mpsc::Receiver<(String, Vec<u8>)>) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.set_nonblocking(true).unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let l = tokio::net::TcpListener::from_std(l).unwrap();
            loop {
                let Ok((mut s, _)) = l.accept().await else {
                    return;
                };
                let tx = tx.clone();
                tokio::spawn(async move {
                    let Some((head, body)) = support::read_http_request(&mut s).await else {
                        return;
                    };
                    let line = head.lines().next().unwrap_or("").to_owned();
                    let chat = line.starts_with("POST /v1/chat/completions ");
                    let is_props = line.starts_with("GET /props ");
                    let _ = tx.send((line, body));
                    let (status, body) = match (chat, is_props.then_some(props).flatten()) {
                        (true, _) => ("200 OK", ANSWER),
                        (false, Some(p)) => ("200 OK", p),
                        _ => ("404 Not Found", "not found"),
                    };
                    let reply = format!(
                        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = tokio::io::AsyncWriteExt::write_all(&mut s, reply.as_bytes()).await;
                    let _ = tokio::io::AsyncWriteExt::shutdown(&mut s).await;
                });
            }
        });
    });
    (url, rx)
}

/// [`fake_upstream_with`] no `/props`: an engine the proxy does not know.
fn fake_upstream() -> (String, std::sync::mpsc::Receiver<(String, Vec<u8>)>) {
    fake_upstream_with(None)
}

/// Writes an executable `sh` script `dir/name`.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

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

/// The session path in `run`'s last line (`toolscope run: AGENT exited with N; session: P`).
fn printed_session(stderr: &str) -> (String, String) {
    let last = stderr.lines().last().unwrap_or("");
    let rest = last
        .strip_prefix("toolscope run: ")
        .unwrap_or_else(|| panic!("last line: {stderr}"));
    let (exit, path) = rest.split_once("; session: ").unwrap();
    (exit.to_owned(), path.to_owned())
}

/// The request body the agent sends (a marker toolscope never makes up).
const REQUEST: &str =
    r#"{"model":"run-test","messages":[{"role":"user","content":"marker-7f3a from the agent"}]}"#;

/// An agent that prints its environment and arguments, makes one chat request to
/// `$OPENAI_BASE_URL/chat/completions` and exits 3: its environment points at the proxy
/// (dummy key only where none is set, a key already set kept, an `OLLAMA_HOST` already set
/// replaced), its stdout is toolscope's, its exit code is toolscope's, the session path is
/// printed last and that session holds the exchange byte for byte as the agent sent it and the
/// upstream answered it; the per-exchange line goes to stderr, never into the agent's stdout.
#[test]
fn run_points_the_agent_at_the_proxy_and_passes_its_exit_code_through() {
    let dir = tempfile::tempdir().unwrap();
    let (upstream, got) = fake_upstream();
    std::fs::write(dir.path().join("request.json"), REQUEST).unwrap();
    let agent = script(
        dir.path(),
        "agent.sh",
        r#"for v in OPENAI_BASE_URL OPENAI_API_BASE ANTHROPIC_BASE_URL OLLAMA_HOST OPENAI_API_KEY ANTHROPIC_API_KEY; do
  eval "echo env $v=\${$v-unset}"
done
echo "args: $*"
curl -sS --noproxy '*' -H 'content-type: application/json' --data-binary @request.json "$OPENAI_BASE_URL/chat/completions"
echo
echo "curl: $?"
exit 3
"#,
    );
    let out = Command::new(support::bin())
        .current_dir(dir.path())
        .args(["run", "--upstream", &upstream, "sh", "--"])
        .arg(&agent)
        .args(["--verbose", "two words"])
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env("ANTHROPIC_API_KEY", "sk-ant-kept")
        .env("OLLAMA_HOST", "http://10.9.9.9:11434")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(3), "{stdout}\n{stderr}");
    let port = proxy_port(&stderr);
    let env: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("env "))
        .collect();
    let want = [
        format!("OPENAI_BASE_URL=http://127.0.0.1:{port}/v1"),
        format!("OPENAI_API_BASE=http://127.0.0.1:{port}/v1"),
        format!("ANTHROPIC_BASE_URL=http://127.0.0.1:{port}"),
        format!("OLLAMA_HOST=http://127.0.0.1:{port}"),
        "OPENAI_API_KEY=sk-toolscope-dummy".to_owned(),
        "ANTHROPIC_API_KEY=sk-ant-kept".to_owned(),
    ];
    assert_eq!(env, want, "{stdout}");
    assert!(stdout.contains("args: --verbose two words\n"), "{stdout}");
    // the agent got the upstream's answer through the proxy
    assert!(
        stdout.contains(&format!("{ANSWER}\ncurl: 0\n")),
        "{stdout}\n{stderr}"
    );
    assert!(
        !stdout.contains("POST /v1/chat"),
        "exchange lines stay off stdout: {stdout}"
    );
    assert!(
        stderr.contains("#1 POST /v1/chat/completions 200"),
        "{stderr}"
    );

    let (exit, path) = printed_session(&stderr);
    assert_eq!(exit, "sh exited with 3", "{stderr}");
    // the agent exited by itself with nothing in flight: no stopping line, and nothing speaks
    // of a second Ctrl-C (there was no first)
    assert!(!stderr.contains("Ctrl-C"), "{stderr}");
    assert!(!stderr.contains("stopping"), "{stderr}");
    // the default session path, under the agent's (and toolscope's) working directory
    assert!(
        path.starts_with("sessions/") && path.ends_with(".jsonl"),
        "{path}"
    );
    let s = read_session(&dir.path().join(&path)).unwrap();
    assert!(s.warnings.is_empty(), "{:?}", s.warnings);
    let chats: Vec<_> = s
        .exchanges
        .iter()
        .filter(|e| e.request.path == "/v1/chat/completions")
        .collect();
    assert_eq!(chats.len(), 1, "{:#?}", s.exchanges);
    let ex = chats[0];
    assert_eq!(ex.request.method, "POST");
    assert_eq!(ex.request.body.to_bytes(), REQUEST.as_bytes());
    let resp = ex.response.as_ref().expect("a response");
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body.as_ref().unwrap().to_bytes(), ANSWER.as_bytes());
    // and the upstream got exactly what the agent sent
    let upstream_saw: Vec<(String, Vec<u8>)> = got.try_iter().collect();
    let chat_bodies: Vec<&Vec<u8>> = upstream_saw
        .iter()
        .filter(|(l, _)| l.starts_with("POST /v1/chat/completions "))
        .map(|(_, b)| b)
        .collect();
    assert_eq!(
        chat_bodies,
        [&REQUEST.as_bytes().to_vec()],
        "{upstream_saw:?}"
    );
}

/// Codex (an AGENT whose file name is `codex`) gets a model provider at the proxy as `-c`
/// overrides before its ARGS, and the upstream's model when the upstream reports one; Claude
/// Code (`claude`) and others get ARGS unchanged. An agent that cannot be found exits 127 and
/// the session is still written.
#[test]
fn codex_gets_a_provider_before_its_args_and_claude_only_the_env() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let print_args = r#"for a in "$@"; do echo "arg $a"; done
echo "base $OPENAI_BASE_URL"
"#;
    let codex = script(&bin, "codex", print_args);
    let claude = script(&bin, "claude", print_args);
    // nothing listens on the upstream: the proxy starts anyway (engine unknown)
    let upstream = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let run = |agent: &Path, session: &str, upstream: &str| {
        let out = Command::new(support::bin())
            .current_dir(dir.path())
            .args(["run", "--upstream", upstream, "--session", session])
            .arg(agent)
            .args([
                "--",
                "exec",
                "--skip-git-repo-check",
                "-m",
                "smollm2",
                "say hi",
            ])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
        let args: Vec<String> = stdout
            .lines()
            .filter_map(|l| l.strip_prefix("arg "))
            .map(str::to_owned)
            .collect();
        let base = stdout
            .lines()
            .find_map(|l| l.strip_prefix("base "))
            .unwrap()
            .to_owned();
        (proxy_port(&stderr), args, base, printed_session(&stderr))
    };
    let theirs = ["exec", "--skip-git-repo-check", "-m", "smollm2", "say hi"];

    let (port, args, base, (_, path)) = run(&codex, "codex.jsonl", &upstream);
    let provider = format!("model_providers.toolscope.base_url=\"http://127.0.0.1:{port}/v1\"");
    let mut want: Vec<String> = [
        "-c",
        "model_provider=\"toolscope\"",
        "-c",
        "model_providers.toolscope.name=\"toolscope\"",
        "-c",
        &provider,
        "-c",
        "model_providers.toolscope.wire_api=\"responses\"",
        "-c",
        "model_providers.toolscope.supports_websockets=false",
    ]
    .map(str::to_owned)
    .to_vec();
    want.extend(theirs.map(str::to_owned));
    assert_eq!(args, want);
    assert_eq!(base, format!("http://127.0.0.1:{port}/v1"));
    assert_eq!(path, "codex.jsonl");

    let (port, args, base, _) = run(&claude, "claude.jsonl", &upstream);
    assert_eq!(args, theirs);
    assert_eq!(base, format!("http://127.0.0.1:{port}/v1"));

    // an upstream that reports its model (llama-server's /props model_path): Codex is told
    // that model, after the provider and before ARGS (whose -m would win)
    let (llama, _got) = fake_upstream_with(Some(
        r#"{"build_info":"b11434-test","model_path":"/models/Small \"LM\".gguf","chat_template":""}"#,
    ));
    let (port, args, _, _) = run(&codex, "codex-model.jsonl", &llama);
    let provider = format!("model_providers.toolscope.base_url=\"http://127.0.0.1:{port}/v1\"");
    assert_eq!(args[5], provider);
    assert_eq!(args[10..12], ["-c", r#"model="/models/Small \"LM\".gguf""#]);
    assert_eq!(args[12..], theirs);

    let out = Command::new(support::bin())
        .current_dir(dir.path())
        .args(["run", "--upstream", &upstream, "--session", "missing.jsonl"])
        .arg(dir.path().join("no-such-agent"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(127), "{stderr}");
    assert!(stderr.contains("cannot start"), "{stderr}");
    let s = read_session(&dir.path().join("missing.jsonl")).unwrap();
    assert!(s.exchanges.is_empty());
}

/// Starts `toolscope run --upstream UPSTREAM --session SESSION AGENT` in `dir` (stdout and
/// stderr piped) and waits for the agent's `ready` line; the child and its stdout.
fn run_until_ready(
    dir: &Path,
    upstream: &str,
    session: &str,
    agent: &Path,
) -> (std::process::Child, BufReader<std::process::ChildStdout>) {
    let mut child = Command::new(support::bin())
        .current_dir(dir)
        .args(["run", "--upstream", upstream, "--session", session])
        .arg(agent)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line, "ready\n");
    (child, out)
}

/// A SIGINT to toolscope (not from a terminal: the agent did not get it too) goes to the
/// agent; toolscope waits for it, drains the proxy, prints the session and exits with the
/// agent's code (42 from its trap; an agent that never got the signal ends by itself after
/// 30 s with 7).
#[test]
fn a_sigint_goes_to_the_agent_and_its_exit_code_comes_back() {
    let dir = tempfile::tempdir().unwrap();
    let (upstream, _got) = fake_upstream();
    let agent = script(
        dir.path(),
        "agent.sh",
        r#"trap 'echo got-int; exit 42' INT
echo ready
i=0
while [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done
exit 7
"#,
    );
    let (mut child, mut out) = run_until_ready(dir.path(), &upstream, "int.jsonl", &agent);
    let sent = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let status = support::wait_guarded(&mut child, Duration::from_secs(60), "run after SIGINT");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(rest, "got-int\n", "{stderr}");
    assert_eq!(status.code(), Some(42), "{stderr}");
    let (exit, path) = printed_session(&stderr);
    assert!(exit.ends_with("exited with 42"), "{stderr}");
    assert_eq!(path, "int.jsonl");
    assert!(read_session(&dir.path().join("int.jsonl")).is_ok());
}

/// A SIGTERM to toolscope (no terminal: the agent runs in a process group of its own) reaches
/// the agent's children too: the agent's background `sleep` (its pid written by the agent)
/// is gone once toolscope exits with the agent's 143 (128 + SIGTERM).
#[test]
fn a_sigterm_reaches_the_agents_children() {
    let dir = tempfile::tempdir().unwrap();
    let (upstream, _got) = fake_upstream();
    let agent = script(
        dir.path(),
        "agent.sh",
        r#"sleep 300 < /dev/null > /dev/null 2>&1 &
echo $! > child.pid
echo ready
wait
exit 7
"#,
    );
    let (mut child, _out) = run_until_ready(dir.path(), &upstream, "term.jsonl", &agent);
    let grandchild = std::fs::read_to_string(dir.path().join("child.pid")).unwrap();
    let grandchild = grandchild.trim().to_owned();
    let alive = |pid: &str| {
        Command::new("kill")
            .args(["-0", pid])
            .stderr(Stdio::null())
            .status()
            .unwrap()
            .success()
    };
    assert!(alive(&grandchild));
    let sent = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let status = support::wait_guarded(&mut child, Duration::from_secs(60), "run after SIGTERM");
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(143), "{stderr}");
    // the sleep was the shell's child, not toolscope's: once it is killed, init reaps it
    let gone = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(50));
        !alive(&grandchild)
    });
    if !gone {
        let _ = Command::new("kill").args(["-KILL", &grandchild]).status();
    }
    assert!(
        gone,
        "the agent's child {grandchild} outlived the SIGTERM: {stderr}"
    );
}
