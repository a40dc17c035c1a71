//! Starting and stopping a real llama-server for end-to-end tests and recordings.
//!
//! [`LlamaServer::start`] spawns `$TOOLSCOPE_LLAMA_SERVER` (falling back to
//! `~/.cache/toolscope/bin/llama-server`, as `scripts/setup.sh` caches it) on a free
//! `127.0.0.1` port with `--jinja`, sends its stdout and stderr to a log file, waits until
//! `GET /health` answers `{"status":"ok"}`, and kills the process when dropped.
//!
//! The command line follows llama.cpp `tools/server` (build 11434):
//! `llama-server -m MODEL --jinja -c CTX --host 127.0.0.1 --port PORT --seed 42 --temp 0
//! --no-webui [--chat-template-file T] [-v] EXTRA…`. `--seed 42 --temp 0` make the sampling
//! greedy and reproducible unless a request overrides them; `extra_args` come last, so they
//! override these defaults (llama.cpp's argument parser keeps the last value).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

/// How to start a llama-server.
#[derive(Debug, Clone, Default)]
pub struct LlamaOptions {
    /// GGUF model file (`-m`).
    pub model: PathBuf,
    /// Chat template forced with `--chat-template-file` (e.g. a corpus `.jinja`).
    pub chat_template_file: Option<PathBuf>,
    /// Pass `-v`: responses then carry `__verbose` (raw generated text, prompt, stop type) and
    /// the log holds every request.
    pub verbose: bool,
    /// More arguments, appended last (they override the defaults above).
    pub extra_args: Vec<String>,
    /// Context size in tokens (`-c`); 0 means 4096.
    pub ctx: u32,
}

/// A running llama-server on `127.0.0.1`. Killed (SIGKILL) and reaped on drop.
#[derive(Debug)]
pub struct LlamaServer {
    child: Option<Child>,
    port: u16,
    log: PathBuf,
    keep_log: bool,
}

/// How long [`LlamaServer::start`] waits for `/health`.
pub const START_TIMEOUT: Duration = Duration::from_secs(60);

/// The llama-server binary: `$TOOLSCOPE_LLAMA_SERVER`, else `$TOOLSCOPE_CACHE/bin/llama-server`,
/// else `~/.cache/toolscope/bin/llama-server`. The path is returned even when it does not exist.
pub fn llama_server_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("TOOLSCOPE_LLAMA_SERVER") {
        return PathBuf::from(p);
    }
    let cache = std::env::var_os("TOOLSCOPE_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            dirs::home_dir()
                .unwrap_or_default()
                .join(".cache/toolscope")
        });
    cache.join("bin/llama-server")
}

impl LlamaServer {
    /// Spawns the server and blocks until `GET /health` is ok.
    ///
    /// Errors: the binary or model is missing; the process exits early; `/health` is not ok
    /// within [`START_TIMEOUT`]. The message includes the last lines of the server log.
    /// A port race (another process took the free port first) is retried up to 3 times.
    pub fn start(opts: LlamaOptions) -> anyhow::Result<LlamaServer> {
        Self::start_binary(&llama_server_binary(), opts)
    }

    /// [`LlamaServer::start`] with another llama-server binary (a second build, e.g.
    /// `$TOOLSCOPE_LLAMA_SERVER_OLD`, for `diff --server OLD --server NEW`). Same errors.
    pub fn start_binary(bin: &Path, opts: LlamaOptions) -> anyhow::Result<LlamaServer> {
        let bin = bin.to_owned();
        if !bin.exists() {
            bail!(
                "llama-server binary not found at {} ($TOOLSCOPE_LLAMA_SERVER); run scripts/setup.sh",
                bin.display()
            );
        }
        if !opts.model.exists() {
            bail!("model not found: {}", opts.model.display());
        }
        if let Some(t) = &opts.chat_template_file
            && !t.exists()
        {
            bail!("chat template file not found: {}", t.display());
        }
        let mut last_err = None;
        for _attempt in 0..3 {
            let port = free_port()?;
            match Self::try_start(&bin, &opts, port, &[]) {
                Ok(s) => return Ok(s),
                Err((e, retry)) => {
                    if !retry {
                        return Err(e);
                    }
                    last_err = Some(e);
                }
            }
        }
        Err(last_err.unwrap_or_else(|| anyhow::anyhow!("llama-server did not start")))
    }

    /// As [`LlamaServer::start`], on the given `port` (e.g. one a proxy was already pointed at
    /// before the server started) and with `env` added to the server's environment (e.g.
    /// `LLAMA_SERVER_SLOTS_DEBUG=1`, which makes `GET /slots` show each slot's prompt and
    /// generated text; tools/server/server-context.cpp, build 11434). No retry on a port race.
    pub fn start_on(
        opts: LlamaOptions,
        port: u16,
        env: &[(&str, &str)],
    ) -> anyhow::Result<LlamaServer> {
        let bin = llama_server_binary();
        if !bin.exists() {
            bail!(
                "llama-server binary not found at {} ($TOOLSCOPE_LLAMA_SERVER); run scripts/setup.sh",
                bin.display()
            );
        }
        Self::try_start(&bin, &opts, port, env).map_err(|(e, _)| e)
    }

    fn try_start(
        bin: &Path,
        opts: &LlamaOptions,
        port: u16,
        env: &[(&str, &str)],
    ) -> Result<LlamaServer, (anyhow::Error, bool)> {
        let log =
            std::env::temp_dir().join(format!("toolscope-llama-{}-{port}.log", std::process::id()));
        let log_file = std::fs::File::create(&log)
            .with_context(|| format!("creating {}", log.display()))
            .map_err(|e| (e, false))?;
        let log_err = log_file
            .try_clone()
            .context("cloning log handle")
            .map_err(|e| (e, false))?;
        let ctx = if opts.ctx == 0 { 4096 } else { opts.ctx };
        let mut cmd = Command::new(bin);
        cmd.arg("-m").arg(&opts.model);
        cmd.args([
            "--jinja",
            "-c",
            &ctx.to_string(),
            "--host",
            "127.0.0.1",
            "--port",
            &port.to_string(),
        ]);
        cmd.args([
            "--seed",
            "42",
            "--temp",
            "0",
            "--no-webui",
            "--log-colors",
            "off",
        ]);
        if let Some(t) = &opts.chat_template_file {
            cmd.arg("--chat-template-file").arg(t);
        }
        if opts.verbose {
            cmd.arg("-v");
        }
        cmd.args(&opts.extra_args);
        cmd.envs(env.iter().copied());
        cmd.stdin(Stdio::null())
            .stdout(Stdio::from(log_file))
            .stderr(Stdio::from(log_err));
        let child = cmd
            .spawn()
            .with_context(|| format!("spawning {}", bin.display()))
            .map_err(|e| (e, false))?;
        let keep_log = std::env::var("TOOLSCOPE_KEEP_LLAMA_LOG").is_ok_and(|v| v == "1");
        let mut server = LlamaServer {
            child: Some(child),
            port,
            log,
            keep_log,
        };
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(child) = server.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                let tail = server.log_tail(30);
                let retry = tail.contains("bind") || tail.contains("Address already in use");
                server.keep_log = true;
                return Err((
                    anyhow::anyhow!(
                        "llama-server exited with {status} before becoming healthy (log {}):\n{tail}",
                        server.log.display()
                    ),
                    retry,
                ));
            }
            if health_ok(port) {
                return Ok(server);
            }
            if Instant::now() >= deadline {
                let tail = server.log_tail(30);
                server.keep_log = true;
                return Err((
                    anyhow::anyhow!(
                        "llama-server not healthy after {} s on 127.0.0.1:{port} (log {}):\n{tail}",
                        START_TIMEOUT.as_secs(),
                        server.log.display()
                    ),
                    false,
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `http://127.0.0.1:PORT` (no trailing slash).
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The TCP port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The file holding the server's stdout and stderr. Deleted on drop unless
    /// `TOOLSCOPE_KEEP_LLAMA_LOG=1` or the start failed.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// The whole log so far (lossy UTF-8; empty if unreadable).
    pub fn log_text(&self) -> String {
        std::fs::read(&self.log)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }

    /// The last `n` lines of the log.
    pub fn log_tail(&self, n: usize) -> String {
        let text = self.log_text();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    /// Kills the server now (also done on drop).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        self.stop();
        if !self.keep_log {
            let _ = std::fs::remove_file(&self.log);
        }
    }
}

/// A free TCP port on 127.0.0.1 (bound then released; another process may take it first).
pub fn free_port() -> anyhow::Result<u16> {
    let l = TcpListener::bind("127.0.0.1:0").context("binding 127.0.0.1:0 to find a free port")?;
    Ok(l.local_addr()?.port())
}

/// Blocking `GET /health` on 127.0.0.1:`port`; true for HTTP 200 with `"status":"ok"`.
fn health_ok(port: u16) -> bool {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(500)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = s.set_write_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut buf = Vec::new();
    let _ = s.take(64 * 1024).read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf);
    text.starts_with("HTTP/1.1 200") && text.contains("\"ok\"")
}
