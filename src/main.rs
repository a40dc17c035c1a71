//! The `toolscope` binary: argument parsing and dispatch to [`toolscope::cli`].

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use toolscope::cli;

/// A terminal inspector for LLM tool calling against local inference servers.
///
/// Without a subcommand, opens the inspector on the sessions in ./sessions/.
#[derive(Debug, Parser)]
#[command(name = "toolscope", version, about, long_about = None)]
struct Cli {
    /// Colour theme of the inspector: dark (default), light, high-contrast, a theme in
    /// <config dir>/toolscope/themes/NAME.toml, or a path to a .toml file. NO_COLOR is respected.
    #[arg(
        long,
        global = false,
        value_name = "NAME|PATH",
        env = "TOOLSCOPE_THEME"
    )]
    theme: Option<String>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Open session (.jsonl) or HAR files in the inspector.
    Open(cli::browse::OpenArgs),
    /// Run a recording reverse proxy in front of an inference server.
    Proxy(cli::proxy::Args),
    /// Run an agent with the recording proxy in front of it: the proxy headless on a free
    /// loopback port, the agent pointed at it through its environment (and Codex's model
    /// provider), the session path printed at the end; exit code: the agent's.
    Run(cli::run::Args),
    /// Send one request directly and record it.
    Send(cli::send::Args),
    /// Convert a HAR 1.2 file into a session.
    Import(cli::import::Args),
    /// Render a chat template for a request, as the engines do.
    Render(cli::render::Args),
    /// Flatten tool schemas into shapes templates can print.
    Flatten(cli::flatten::Args),
    /// Parse raw model text into tool calls, with a step-by-step trace.
    Parse(cli::parse::Args),
    /// Diagnose sessions, HAR files or a request/response pair; exit 1 on findings.
    Check(cli::check::Args),
    /// Probe a server for ignored controls (tool_choice, stop strings).
    Probe(cli::probe::Args),
    /// Diff two templates or two servers on the same requests.
    Diff(cli::diff::Args),
    /// Re-run chat exchanges as raw completions of the engine's own prompt (default: those the
    /// server's parser rejected), verify the text against the recorded answer, replay the parser.
    Regenerate(cli::regenerate::Args),
    /// Answer an agent's requests from a recorded session (replay without the model).
    Serve(cli::serve::Args),
    /// Export a session as HAR 1.2 or OpenTelemetry (OTLP/JSON) traces.
    Export(cli::export::Args),
    /// Re-send recorded requests to another server and record the answers.
    Resend(cli::resend::Args),
    /// Run an exchange's request K times against the engine, as recorded and with each fix of
    /// its findings applied; print the valid-call rate per variant (what-if runs).
    Try(cli::whatif::Args),
}

/// Report-writing subcommands end like any Unix filter when their reader goes away
/// (`toolscope check … | head`): the default SIGPIPE action, instead of Rust's ignored SIGPIPE
/// turning the next `println!` into a panic with a backtrace. The proxy, serve and the other
/// long-running network commands keep SIGPIPE ignored.
#[cfg(unix)]
#[allow(unsafe_code)]
fn end_quietly_on_a_closed_stdout() {
    // SAFETY: called once at start-up, before any other thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

#[cfg(not(unix))]
fn end_quietly_on_a_closed_stdout() {}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if matches!(
        cli.command,
        Some(
            Command::Render(_)
                | Command::Flatten(_)
                | Command::Parse(_)
                | Command::Check(_)
                | Command::Diff(_)
                | Command::Export(_)
        )
    ) {
        end_quietly_on_a_closed_stdout();
    }
    let result = match cli.command {
        None => cli::browse::run_with_theme(Vec::new(), cli.theme),
        Some(Command::Open(a)) => cli::browse::run_with_theme(a.files, a.theme.or(cli.theme)),
        Some(Command::Proxy(a)) => cli::proxy::run(a),
        Some(Command::Run(a)) => cli::run::run(a),
        Some(Command::Send(a)) => cli::send::run(a),
        Some(Command::Import(a)) => cli::import::run(a),
        Some(Command::Render(a)) => cli::render::run(a),
        Some(Command::Flatten(a)) => cli::flatten::run(a),
        Some(Command::Parse(a)) => cli::parse::run(a),
        Some(Command::Check(a)) => cli::check::run(a),
        Some(Command::Probe(a)) => cli::probe::run(a),
        Some(Command::Diff(a)) => cli::diff::run(a),
        Some(Command::Regenerate(a)) => cli::regenerate::run(a),
        Some(Command::Serve(a)) => cli::serve::run(a),
        Some(Command::Export(a)) => cli::export::run(a),
        Some(Command::Resend(a)) => cli::resend::run(a),
        Some(Command::Try(a)) => cli::whatif::run(a),
    };
    match result {
        Ok(code) => code,
        Err(e) => cli::fail(&e),
    }
}
