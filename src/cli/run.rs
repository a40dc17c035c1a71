//! `toolscope run [proxy options] AGENT [--] ARGS`: the recording proxy, headless, in front of
//! one agent run.
//!
//! The proxy is `toolscope proxy --headless`'s own ([`super::proxy::start`],
//! [`super::proxy::print_until`], [`super::proxy::stop`]) on a free `127.0.0.1` port; the
//! agent runs in the foreground with the proxy in its environment ([`agent_env`]) and, for
//! Codex, a model provider pointing at it ([`codex_overrides`]). Its exit code becomes
//! toolscope's. docs/record.md ("toolscope run") lists per agent what is set and why.

use std::ffi::{OsStr, OsString};
use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use super::proxy::{Lines, ProxyOptions, Started};

/// Arguments of `toolscope run`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// What is recorded and how (the options of `toolscope proxy`).
    #[command(flatten)]
    pub proxy: ProxyOptions,
    /// The agent: a program on PATH or a path (`codex`, `claude`, `python`, `./agent.sh`).
    /// Options after it are the agent's, not toolscope's.
    #[arg(value_name = "AGENT")]
    pub agent: OsString,
    /// The agent's arguments; a `--` right after AGENT is optional and not passed on.
    #[arg(
        value_name = "ARGS",
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub args: Vec<OsString>,
}

/// The API key set for the agent where none is set (local servers take any key; the SDKs
/// refuse to start without one).
pub const DUMMY_API_KEY: &str = "sk-toolscope-dummy";

/// The model provider `run` defines for Codex (`model_provider` and `model_providers.NAME`).
pub const CODEX_PROVIDER: &str = "toolscope";

/// The environment the agent gets, on top of toolscope's own: every base URL an SDK or agent
/// reads pointed at the proxy on `127.0.0.1:port`, and a dummy API key where `is_set` says
/// none is set (unset or empty). Returned as (name, value), in a fixed order.
///
/// * `OPENAI_BASE_URL` = `http://127.0.0.1:PORT/v1`: the `openai` SDKs (Python, Node), Codex's
///   built-in provider, opencode, the OpenAI Agents SDK.
/// * `OPENAI_API_BASE`: the same, for LiteLLM, LangChain, aider and the pre-1.0 `openai` SDK.
/// * `ANTHROPIC_BASE_URL` = `http://127.0.0.1:PORT` (no `/v1`: the client adds it): the
///   `anthropic` SDKs and Claude Code.
/// * `OLLAMA_HOST` = `http://127.0.0.1:PORT`: the `ollama` SDKs and CLI.
/// * `OPENAI_API_KEY`, `ANTHROPIC_API_KEY` = [`DUMMY_API_KEY`] only when not set.
pub fn agent_env(port: u16, is_set: impl Fn(&str) -> bool) -> Vec<(&'static str, String)> {
    let root = format!("http://127.0.0.1:{port}");
    let mut env = vec![
        ("OPENAI_BASE_URL", format!("{root}/v1")),
        ("OPENAI_API_BASE", format!("{root}/v1")),
        ("ANTHROPIC_BASE_URL", root.clone()),
        ("OLLAMA_HOST", root),
    ];
    for key in ["OPENAI_API_KEY", "ANTHROPIC_API_KEY"] {
        if !is_set(key) {
            env.push((key, DUMMY_API_KEY.to_owned()));
        }
    }
    env
}

/// True when the environment variable `name` is set to something non-empty.
fn env_is_set(name: &str) -> bool {
    std::env::var_os(name).is_some_and(|v| !v.is_empty())
}

/// True when `agent` is Codex CLI: its file name is `codex` (`codex.js`, `codex.exe`,
/// `codex.cmd` too), whatever its folder.
pub fn is_codex(agent: &OsStr) -> bool {
    Path::new(agent)
        .file_name()
        .and_then(OsStr::to_str)
        .is_some_and(|n| matches!(n, "codex" | "codex.js" | "codex.exe" | "codex.cmd"))
}

/// The `-c key=value` overrides put before a Codex agent's ARGS (values are TOML): a model
/// provider [`CODEX_PROVIDER`] at `http://127.0.0.1:PORT/v1` on the Responses API over HTTP,
/// selected as the model provider, and `model` = the model the upstream reports (`model`,
/// when the proxy learnt one at start: llama-server's `/props` `model_path`, vLLM's and
/// SGLang's first `/v1/models` id; none for Ollama).
/// Codex 0.169.0 speaks only `wire_api = "responses"`, and dials WebSocket only for a provider
/// that declares `supports_websockets`; `false` says it outright. Its default model
/// (`gpt-6.1-sol`) sends its tools as an `additional_tools` input item, which llama-server
/// b11434 answers with HTTP 400 "Cannot determine type of 'item'"; under the upstream's own
/// model name Codex uses its generic model settings (top-level `tools`). Overrides in ARGS
/// come later and win (`-m MODEL`, `-c model_providers.toolscope.KEY=…`).
pub fn codex_overrides(port: u16, model: Option<&str>) -> Vec<String> {
    let p = CODEX_PROVIDER;
    let mut kv = vec![
        format!("model_provider=\"{p}\""),
        format!("model_providers.{p}.name=\"{p}\""),
        format!("model_providers.{p}.base_url=\"http://127.0.0.1:{port}/v1\""),
        format!("model_providers.{p}.wire_api=\"responses\""),
        format!("model_providers.{p}.supports_websockets=false"),
    ];
    if let Some(m) = model.filter(|m| !m.is_empty()) {
        // a JSON string is a TOML basic string (the same escapes: \" \\ \n \uXXXX)
        let quoted = serde_json::Value::String(m.to_owned()).to_string();
        kv.push(format!("model={quoted}"));
    }
    kv.into_iter()
        .flat_map(|kv| ["-c".to_owned(), kv])
        .collect()
}

/// The agent's arguments: ARGS without a leading `--`, after [`codex_overrides`] for Codex
/// (`model`: the upstream's model, when known).
pub fn agent_args(
    agent: &OsStr,
    args: &[OsString],
    port: u16,
    model: Option<&str>,
) -> Vec<OsString> {
    let args = match args.first() {
        Some(a) if a == "--" => &args[1..],
        _ => args,
    };
    let mut out: Vec<OsString> = Vec::new();
    if is_codex(agent) {
        out.extend(codex_overrides(port, model).into_iter().map(OsString::from));
    }
    out.extend(args.iter().cloned());
    out
}

/// Exit code when the agent cannot be started: 127 not found, 126 found but not runnable (as
/// a shell, `env` and `timeout` answer).
fn spawn_failure_code(e: &std::io::Error) -> u8 {
    match e.kind() {
        std::io::ErrorKind::NotFound => 127,
        _ => 126,
    }
}

/// The agent's exit status as toolscope's exit code: its code, or 128 + the signal that
/// ended it (as a shell reports it).
fn exit_code(status: std::process::ExitStatus) -> u8 {
    if let Some(c) = status.code() {
        return (c & 0xff) as u8;
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt as _;
        if let Some(sig) = status.signal() {
            return (128 + sig).clamp(0, 255) as u8;
        }
    }
    1
}

/// Whether toolscope is in its terminal's foreground process group (any of stdin, stdout,
/// stderr is a terminal whose foreground group is toolscope's own).
#[cfg(unix)]
#[allow(unsafe_code)]
fn in_foreground() -> bool {
    // SAFETY: getpgrp and tcgetpgrp read process state only (tcgetpgrp on a descriptor that
    // is not a terminal returns -1)
    unsafe {
        let own = libc::getpgrp();
        (0..3).any(|fd| libc::tcgetpgrp(fd) == own)
    }
}

#[cfg(not(unix))]
fn in_foreground() -> bool {
    true
}

/// How the agent is started: in toolscope's process group when toolscope is in its terminal's
/// foreground (an interactive agent needs the terminal, and the terminal's Ctrl-C reaches it
/// there), else in a process group of its own (no terminal: CI, a supervisor, a background
/// job), so that a SIGINT or SIGTERM passed on reaches the agent's children too.
fn spawn_agent(
    cmd: &mut std::process::Command,
    own_group: bool,
) -> std::io::Result<std::process::Child> {
    #[cfg(unix)]
    if own_group {
        use std::os::unix::process::CommandExt as _;
        cmd.process_group(0);
    }
    #[cfg(not(unix))]
    let _ = own_group;
    cmd.spawn()
}

/// Passes a SIGINT or SIGTERM toolscope received on to the agent (still running: `child` is
/// not reaped, so its pid is its own): to its whole process group when it has one of its own
/// (`own_group`, [`spawn_agent`]), else to the agent. A SIGINT is not passed on while
/// toolscope is in its terminal's foreground process group: a Ctrl-C there went to the whole
/// group, the agent included, and a second copy would read as a second Ctrl-C.
#[cfg(unix)]
#[allow(unsafe_code)]
fn forward(child: &mut std::process::Child, sig: &str, own_group: bool) {
    if !matches!(child.try_wait(), Ok(None)) {
        return;
    }
    let Ok(pid) = libc::pid_t::try_from(child.id()) else {
        return;
    };
    let signo = if sig == "SIGTERM" {
        libc::SIGTERM
    } else {
        libc::SIGINT
    };
    if signo == libc::SIGINT && in_foreground() {
        return;
    }
    let target = if own_group { -pid } else { pid };
    // SAFETY: kill signals our own child (or the process group it leads, whose id is its
    // pid), which try_wait just found running and which nothing else reaps (it is polled on
    // this task only), so the pid has not been reused.
    unsafe {
        libc::kill(target, signo);
    }
}

#[cfg(not(unix))]
fn forward(child: &mut std::process::Child, _sig: &str, _own_group: bool) {
    let _ = child.kill();
}

/// Waits for the agent, passing signals on ([`forward`]); its exit status.
async fn wait_agent(
    child: &mut std::process::Child,
    signals: &mut super::signals::Signals,
    own_group: bool,
) -> std::io::Result<std::process::ExitStatus> {
    // polled on this task alone, so the child is reaped here and nowhere else
    let mut tick = tokio::time::interval(Duration::from_millis(25));
    loop {
        tokio::select! {
            _ = tick.tick() => {
                if let Some(status) = child.try_wait()? {
                    return Ok(status);
                }
            }
            sig = signals.next() => forward(child, sig, own_group),
        }
    }
}

/// Runs `toolscope run`: the proxy, the agent in the foreground, then the proxy drained and
/// the session written; prints the session path on stderr. Exit code: the agent's (127/126
/// when it cannot be started).
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let rt = super::runtime();
    rt.block_on(async move {
        // before the agent starts, so every signal after it is seen (and passed on)
        let mut signals = super::signals::Signals::new()?;
        let listen = SocketAddr::from(([127, 0, 0, 1], 0));
        let Started {
            proxy,
            mut events,
            session,
            grace,
        } = super::proxy::start(&args.proxy, listen).await?;
        let port = proxy.local_addr().port();
        let model = proxy.header().engine.as_ref().and_then(|e| e.model.clone());
        let shown_agent = args.agent.to_string_lossy().into_owned();
        // stdout is the agent's; on a terminal stderr is its screen too: the per-exchange
        // lines wait until it exits
        let mut lines = if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            Lines::Held(Vec::new())
        } else {
            Lines::Stderr
        };
        let own_group = !in_foreground();
        let spawned = spawn_agent(
            std::process::Command::new(&args.agent)
                .args(agent_args(&args.agent, &args.args, port, model.as_deref()))
                .envs(agent_env(port, env_is_set)),
            own_group,
        );
        let code = match spawned {
            Ok(mut child) => {
                let status = {
                    let waiting = wait_agent(&mut child, &mut signals, own_group);
                    let mut waiting = std::pin::pin!(waiting);
                    let printed =
                        super::proxy::print_until(&mut events, &mut lines, waiting.as_mut());
                    match printed.await {
                        Some(status) => status,
                        None => waiting.await,
                    }
                };
                match status {
                    Ok(status) => exit_code(status),
                    Err(e) => {
                        crate::errln!(
                            "{}",
                            crate::text::visible(&format!(
                                "toolscope run: waiting for {shown_agent}: {e}"
                            ))
                        );
                        1
                    }
                }
            }
            Err(e) => {
                crate::errln!(
                    "{}",
                    crate::text::visible(&format!(
                        "toolscope run: cannot start {shown_agent}: {e}"
                    ))
                );
                spawn_failure_code(&e)
            }
        };
        lines.release();
        super::proxy::stop(
            proxy,
            grace,
            &mut signals,
            &session,
            Some((&mut events, &mut lines)),
            super::proxy::Stopping::AgentExited,
        )
        .await;
        crate::errln!(
            "{}",
            crate::text::visible(&format!(
                "toolscope run: {shown_agent} exited with {code}; session: {}",
                session.display()
            ))
        );
        Ok(ExitCode::from(code))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each variable with its value written out; keys only where none is set (empty counts as
    /// unset).
    #[test]
    fn the_agent_env_points_every_sdk_at_the_proxy() {
        let env = agent_env(4321, |k| k == "ANTHROPIC_API_KEY");
        let want: Vec<(&str, String)> = vec![
            ("OPENAI_BASE_URL", "http://127.0.0.1:4321/v1".into()),
            ("OPENAI_API_BASE", "http://127.0.0.1:4321/v1".into()),
            ("ANTHROPIC_BASE_URL", "http://127.0.0.1:4321".into()),
            ("OLLAMA_HOST", "http://127.0.0.1:4321".into()),
            ("OPENAI_API_KEY", "sk-toolscope-dummy".into()),
        ];
        assert_eq!(env, want);
        let keys = |f: fn(&str) -> bool| -> Vec<&str> {
            agent_env(1, f)
                .into_iter()
                .map(|(k, _)| k)
                .filter(|k| k.ends_with("_KEY"))
                .collect()
        };
        assert_eq!(keys(|_| true), Vec::<&str>::new());
        assert_eq!(keys(|_| false), ["OPENAI_API_KEY", "ANTHROPIC_API_KEY"]);
    }

    #[test]
    fn codex_gets_a_provider_before_its_args_and_others_get_their_args() {
        let args: Vec<OsString> = ["--", "exec", "-m", "x"].map(OsString::from).to_vec();
        let got = agent_args(OsStr::new("/opt/bin/codex"), &args, 9, None);
        let got: Vec<&str> = got.iter().map(|a| a.to_str().unwrap()).collect();
        assert_eq!(
            got,
            [
                "-c",
                "model_provider=\"toolscope\"",
                "-c",
                "model_providers.toolscope.name=\"toolscope\"",
                "-c",
                "model_providers.toolscope.base_url=\"http://127.0.0.1:9/v1\"",
                "-c",
                "model_providers.toolscope.wire_api=\"responses\"",
                "-c",
                "model_providers.toolscope.supports_websockets=false",
                "exec",
                "-m",
                "x"
            ]
        );
        for other in ["claude", "python", "./codex-wrapper", "codex/agent"] {
            let got = agent_args(OsStr::new(other), &args[1..], 9, Some("m"));
            assert_eq!(got, &args[1..], "{other}");
        }
        // only one leading `--` is toolscope's
        let twice: Vec<OsString> = ["--", "--", "a"].map(OsString::from).to_vec();
        assert_eq!(agent_args(OsStr::new("sh"), &twice, 9, None), &twice[1..]);
        // the upstream's model, as a TOML string (quotes and backslashes escaped)
        let with = agent_args(OsStr::new("codex"), &[], 9, Some(r#"/m/a "b"\c.gguf"#));
        let with: Vec<&str> = with.iter().map(|a| a.to_str().unwrap()).collect();
        assert_eq!(with[10..], ["-c", r#"model="/m/a \"b\"\\c.gguf""#]);
        let parsed: toml::Table = toml::from_str(with[11]).unwrap();
        assert_eq!(parsed["model"].as_str(), Some(r#"/m/a "b"\c.gguf"#));
        assert!(is_codex(OsStr::new("codex.exe")) && !is_codex(OsStr::new("codexx")));
    }

    #[cfg(unix)]
    #[test]
    fn exit_codes_pass_through_and_signals_read_as_a_shell_reads_them() {
        use std::os::unix::process::ExitStatusExt as _;
        assert_eq!(exit_code(std::process::ExitStatus::from_raw(3 << 8)), 3);
        assert_eq!(exit_code(std::process::ExitStatus::from_raw(0)), 0);
        // killed by SIGKILL (9): 137
        assert_eq!(exit_code(std::process::ExitStatus::from_raw(9)), 137);
        let nf = std::io::Error::from(std::io::ErrorKind::NotFound);
        let pd = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        assert_eq!(
            (spawn_failure_code(&nf), spawn_failure_code(&pd)),
            (127, 126)
        );
    }
}
