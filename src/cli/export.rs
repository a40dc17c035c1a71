//! `toolscope export`: a session as HAR 1.2 or OpenTelemetry OTLP/JSON traces
//! ([`crate::session::har`], [`crate::session::otel`]; docs/replay.md).
//!
//! The session is read line by line and one exchange is converted at a time, so exporting a
//! huge session needs memory for one exchange plus the annotations (read in a first pass: an
//! exchange's llama-server render is written after it).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use serde_json::Value;

use crate::session::{Annotation, Api, Exchange, Header, Line};

/// Output format of `toolscope export`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// HAR 1.2 (whole bodies, per-chunk and per-event receive times in `_`-fields).
    Har,
    /// OTLP/JSON ExportTraceServiceRequest, one span per exchange (GenAI conventions).
    Otel,
}

/// Arguments of `toolscope export`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Session file (.jsonl).
    pub session: PathBuf,
    /// `har` or `otel`.
    #[arg(long, value_enum)]
    pub format: ExportFormat,
    /// Output file (default: stdout).
    #[arg(short = 'o', long = "output")]
    pub output: Option<PathBuf>,
}

/// Calls `f(line number, line)` for every readable line of a session file, header first;
/// unreadable lines are reported on stderr as `FILE:LINE:COLUMN: …` and skipped.
///
/// Errors: the file cannot be read; the first line is not a `toolscope-session/1` header.
pub fn for_each_line(
    path: &Path,
    mut f: impl FnMut(usize, Line) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let name = path.display().to_string();
    let file = std::fs::File::open(path).with_context(|| format!("{name}: cannot read"))?;
    let mut reader = BufReader::new(file);
    let mut buf = Vec::new();
    let mut n = 0usize;
    let mut have_header = false;
    loop {
        buf.clear();
        let read = reader
            .read_until(b'\n', &mut buf)
            .with_context(|| format!("{name}: cannot read"))?;
        if read == 0 {
            break;
        }
        n += 1;
        let raw = buf.strip_suffix(b"\n").unwrap_or(&buf);
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        let raw = if n == 1 {
            raw.strip_prefix(b"\xef\xbb\xbf").unwrap_or(raw)
        } else {
            raw
        };
        if raw.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<Line>(raw) {
            Ok(Line::Header(h)) if !have_header => {
                if h.format != crate::session::FORMAT {
                    bail!(
                        "{name}:{n}:1: unsupported session format {:?} (this toolscope reads {})",
                        h.format,
                        crate::session::FORMAT
                    );
                }
                have_header = true;
                f(n, Line::Header(h))?;
            }
            Ok(_) if !have_header => {
                bail!("{name}:{n}:1: not a toolscope session: the first line is not a header")
            }
            Ok(Line::Header(_)) => {
                eprintln!("toolscope export: {name}:{n}:1: second header line ignored")
            }
            Ok(line) => f(n, line)?,
            Err(e) if !have_header => {
                return Err(super::json_error(&name, &e).context("not a toolscope session"));
            }
            Err(e) => eprintln!(
                "toolscope export: {name}:{n}:{}: {}; line skipped",
                e.column(),
                if e.is_eof() {
                    "truncated line".to_owned()
                } else {
                    crate::json_reason(&e)
                }
            ),
        }
    }
    if !have_header {
        bail!("{name}: not a toolscope session: the file is empty");
    }
    Ok(())
}

/// The findings of one exchange, as `check` computes them (server render and template from
/// the session).
fn findings_of(header: &Header, annotations: &[Annotation], ex: &Exchange) -> Vec<crate::Finding> {
    if !matches!(
        ex.api(),
        Api::Openai | Api::Anthropic | Api::Completion | Api::Ollama
    ) {
        return Vec::new();
    }
    let cx = crate::diagnose::load::exchange_context_in(header.props.as_ref(), annotations, ex);
    crate::diagnose::check_exchange(&cx)
}

/// Writes the export. Exit 0; 2 for an unreadable session or output.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    // pass 1: annotations (they follow their exchange, often after later exchanges)
    let mut annotations: std::collections::BTreeMap<u64, Vec<Annotation>> = Default::default();
    let mut ann_order: Vec<Annotation> = Vec::new();
    for_each_line(&args.session, |_, line| {
        if let Line::Annotation(a) = line {
            annotations.entry(a.exchange()).or_default().push(a.clone());
            ann_order.push(a);
        }
        Ok(())
    })?;
    let mut out: Box<dyn Write> = match &args.output {
        Some(p) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("{}: cannot write", p.display()))?,
        )),
        None => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
    };
    let mut header = Header::default();
    let mut count = 0usize;
    match args.format {
        ExportFormat::Har => {
            for_each_line(&args.session, |_, line| {
                match line {
                    Line::Header(h) => {
                        let head = crate::session::har::har_log_head(&h);
                        let head = serde_json::to_string(&Value::Object(head))?;
                        // `{"log":{…head…,"entries":[` — the head object without its closing brace
                        write!(out, "{{\"log\":{},\"entries\":[", &head[..head.len() - 1])?;
                        header = h;
                    }
                    Line::Exchange(ex) => {
                        let marks = crate::stream::ollama::event_marks(&ex);
                        let entry = crate::session::har::exchange_to_entry(
                            header.upstream.as_deref(),
                            &ex,
                            marks.as_deref(),
                        );
                        if count > 0 {
                            out.write_all(b",")?;
                        }
                        out.write_all(b"\n")?;
                        serde_json::to_writer(&mut out, &entry)?;
                        count += 1;
                    }
                    Line::Annotation(_) => {}
                }
                Ok(())
            })?;
            let tail = serde_json::to_string(&Value::Object(crate::session::har::har_log_tail(
                &ann_order,
            )))?;
            write!(out, "\n],{}}}\n", &tail[1..])?;
        }
        ExportFormat::Otel => {
            let mut trace = String::new();
            let mut spans = Vec::new();
            for_each_line(&args.session, |_, line| {
                match line {
                    Line::Header(h) => {
                        trace = crate::session::otel::trace_id(&h);
                        header = h;
                    }
                    Line::Exchange(ex) => {
                        let decoded = crate::stream::decode_exchange(&ex);
                        let anns = annotations.get(&ex.id).map(Vec::as_slice).unwrap_or(&[]);
                        let findings = findings_of(&header, anns, &ex);
                        let times: Vec<Option<u64>> = decoded
                            .as_ref()
                            .map(|r| r.events.iter().map(|e| e.t_us).collect())
                            .unwrap_or_default();
                        let provider = header.engine.as_ref().map(|e| e.kind.clone());
                        // llama-server's `timings` (last chunk of a stream, or the body)
                        let timings = decoded
                            .as_ref()
                            .and_then(|r| {
                                r.events.iter().rev().find_map(|e| {
                                    serde_json::from_str::<Value>(&e.data)
                                        .ok()?
                                        .get("timings")
                                        .cloned()
                                })
                            })
                            .or_else(|| {
                                let body = ex.response.as_ref()?.body.as_ref()?.json().ok()?;
                                body.get("timings").cloned()
                            });
                        spans.push(crate::session::otel::exchange_span(
                            &trace,
                            provider.as_deref(),
                            &ex,
                            decoded.as_ref().map(|r| &r.message),
                            timings.as_ref(),
                            &times,
                            &findings,
                        ));
                        count += 1;
                    }
                    Line::Annotation(_) => {}
                }
                Ok(())
            })?;
            // spans are small next to the exchanges they summarise; the request is one object
            serde_json::to_writer(
                &mut out,
                &crate::session::otel::export_request(&header, spans),
            )?;
            out.write_all(b"\n")?;
        }
    }
    out.flush()?;
    eprintln!(
        "toolscope export: {count} exchange(s) from {} as {}{}",
        args.session.display(),
        match args.format {
            ExportFormat::Har => "HAR 1.2",
            ExportFormat::Otel => "OTLP/JSON",
        },
        args.output
            .as_ref()
            .map(|p| format!(" → {}", p.display()))
            .unwrap_or_default()
    );
    Ok(ExitCode::SUCCESS)
}
