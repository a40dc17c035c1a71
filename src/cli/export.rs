//! `toolscope export`: a session as HAR 1.2 or OpenTelemetry OTLP/JSON traces
//! ([`crate::export::har`], [`crate::export::otel`]; docs/replay.md).
//!
//! The session is read as the inspector and `check` read it
//! ([`crate::session::index::SessionSource`]): one pass indexes the exchange and annotation
//! lines' byte ranges, then each exchange (in file order) is read, converted, written and dropped with
//! its annotations read back by offset, so exporting a huge session needs memory for one
//! exchange, not the file. Damaged lines are reported on stderr (`FILE:LINE:COLUMN: …; line
//! skipped`) and skipped.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use serde_json::Value;

use crate::session::{Annotation, Exchange, Header};

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

/// One exchange's OTLP span (GenAI conventions, [`crate::export::otel::span_of_exchange`]):
/// the provider from the header as written, the findings as `check` computes them (`analysed`
/// header, `annotations` of the exchange).
fn otel_span(
    trace: &str,
    header: &Header,
    analysed: &Header,
    annotations: &[Annotation],
    ex: Exchange,
) -> Value {
    // the analysis first, then the decode: one huge stream is held decoded once at a time,
    // and the exchange is moved through the analysis, not copied (issue #27 item 2)
    let (findings, ex) = crate::export::otel::findings_of(analysed, annotations, ex);
    let provider = header.engine.as_ref().map(|e| e.kind.to_string());
    let place = crate::export::otel::SpanPlace::root(trace, ex.id);
    crate::export::otel::span_of_exchange(&place, provider.as_deref(), &ex, &findings)
}

/// Writes the export. Exit 0; 2 for an unreadable session or output.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let src = crate::session::index::SessionSource::index_file(&args.session, &mut |_, _| {})?;
    let name = args.session.display().to_string();
    let skipped = |w: &crate::session::ReadWarning| {
        // the message says the line was skipped
        crate::errln!(
            "toolscope export: {name}:{}:{}: {}",
            w.line,
            w.column.unwrap_or(1),
            w.message
        )
    };
    src.warnings.iter().for_each(skipped);
    let mut out: Box<dyn Write> = match &args.output {
        Some(p) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("{}: cannot write", p.display()))?,
        )),
        // to the terminal or a pipe: the same JSON with C1 and bidi controls as `\uXXXX`
        None => Box::new(crate::text::JsonVisibleWriter::new(
            std::io::BufWriter::new(std::io::stdout().lock()),
        )),
    };
    // the header as written (the HAR carries it verbatim); the analysis reads the header with
    // an engine learnt later applied, as `check` and the inspector do
    let header = &src.header_as_written;
    let mut count = 0usize;
    // each exchange in file order, with its annotations read back by offset
    let mut exchanges =
        src.rows_in_file_order()
            .into_iter()
            .filter_map(|row| match src.load(row) {
                Ok(ex) => Some(ex),
                Err(e) => {
                    skipped(&crate::analysis::load_error_warning(src.rows[row].line, &e));
                    None
                }
            });
    match args.format {
        ExportFormat::Har => {
            let head = crate::export::har::har_log_head(header);
            let head = serde_json::to_string(&Value::Object(head))?;
            // `{"log":{…head…,"entries":[` — the head object without its closing brace
            write!(out, "{{\"log\":{},\"entries\":[", &head[..head.len() - 1])?;
            for ex in exchanges.by_ref() {
                let marks = crate::stream::ollama::event_marks(&ex);
                let entry = crate::export::har::exchange_to_entry(
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
            // `har_log_tail`'s one member, `"…annotations":[…]`, its array written one
            // annotation at a time (read back from the file in file order)
            let tail =
                serde_json::to_string(&Value::Object(crate::export::har::har_log_tail(&[])))?;
            let open = tail
                .strip_suffix("[]}")
                .context("har_log_tail: expected one array member")?;
            write!(out, "\n],{}[", &open[1..])?;
            let mut first = true;
            for a in src.all_annotations() {
                let a = match a {
                    Ok(a) => a,
                    Err(w) => {
                        skipped(&w);
                        continue;
                    }
                };
                if !first {
                    out.write_all(b",")?;
                }
                first = false;
                serde_json::to_writer(&mut out, &serde_json::to_value(&a)?)?;
            }
            out.write_all(b"]}}\n")?;
        }
        ExportFormat::Otel => {
            let trace = crate::export::otel::trace_id(header);
            // the request around the spans, with the spans written one at a time where
            // `export_request` puts them (`"spans":[]`, a key: unique in the JSON text)
            let around =
                serde_json::to_string(&crate::export::otel::export_request(header, Vec::new()))?;
            let (before, after) = around
                .split_once("\"spans\":[]")
                .context("export_request: expected one spans array")?;
            write!(out, "{before}\"spans\":[")?;
            for ex in exchanges.by_ref() {
                let (anns, damaged) = src.read_annotations(ex.id);
                damaged.iter().for_each(skipped);
                let span = otel_span(&trace, header, &src.header, &anns, ex);
                if count > 0 {
                    out.write_all(b",")?;
                }
                serde_json::to_writer(&mut out, &span)?;
                count += 1;
            }
            write!(out, "]{after}")?;
            out.write_all(b"\n")?;
        }
    }
    out.flush()?;
    crate::errln!(
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
