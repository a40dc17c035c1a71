//! `toolscope parse`: raw model text → tool calls, with the step-by-step parser trace.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::bail;
use serde_json::{Value, json};

use crate::parser::trace::{Trace, check_chunkings, cut};
use crate::parser::{Collector, Event, ParserOptions, StateKind, Syntax};

/// Arguments of `toolscope parse`.
///
/// Input: `--chunks FILE.json` (a JSON array of strings, one per stream chunk, e.g. the
/// `delta.content` of each SSE event), or a raw text file, or `-` for stdin (one chunk).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Call syntax: hermes, qwen3-coder, gemma4, llama3, mistral, deepseek-v3, kimi-k2, gpt-oss,
    /// anthropic-xml, function-call, tool-call-fence, or auto (from --template's markers, else
    /// every syntax's markers).
    #[arg(long, default_value = "auto")]
    pub syntax: String,
    /// Chat template (.jinja, or tokenizer_config.json with `chat_template`) to detect the syntax from.
    #[arg(long, value_name = "SRC")]
    pub template: Option<PathBuf>,
    /// Tools: an OpenAI/Anthropic `tools` array, or a whole request (its `tools` and `tool_choice`).
    #[arg(long, value_name = "FILE")]
    pub tools: Option<PathBuf>,
    /// JSON array of strings: the text as it arrived, chunk by chunk.
    #[arg(long, value_name = "FILE.json", conflicts_with = "raw")]
    pub chunks: Option<PathBuf>,
    /// The prompt ended inside an open `<think>` block: the text starts as reasoning.
    #[arg(long)]
    pub reasoning_open: bool,
    /// Output format.
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    pub format: String,
    /// Raw text file, or `-` for stdin.
    #[arg(value_name = "RAW_FILE", required_unless_present = "chunks")]
    pub raw: Option<PathBuf>,
}

fn read_file(p: &Path) -> anyhow::Result<Vec<u8>> {
    Ok(crate::input::read_file_or_stdin(p)?)
}

fn utf8(p: &Path, b: Vec<u8>) -> anyhow::Result<String> {
    Ok(crate::input::utf8(b, p)?)
}

fn json_file(p: &Path) -> anyhow::Result<Value> {
    let s = utf8(p, read_file(p)?)?;
    serde_json::from_str(&s).map_err(|e| super::json_error(p.display(), &e))
}

/// The template text of a .jinja file or a tokenizer_config.json (`chat_template` string, or
/// the list of named templates, joined).
fn template_text(p: &Path) -> anyhow::Result<String> {
    let bytes = read_file(p)?;
    if bytes.starts_with(b"GGUF") {
        bail!(
            "{}: GGUF files are not read by `parse`; pass the .jinja or tokenizer_config.json",
            p.display()
        );
    }
    let s = utf8(p, bytes)?;
    if s.trim_start().starts_with('{')
        && let Ok(v) = serde_json::from_str::<Value>(&s)
    {
        match v.get("chat_template") {
            Some(Value::String(t)) => return Ok(t.clone()),
            Some(Value::Array(list)) => {
                return Ok(list
                    .iter()
                    .filter_map(|t| t.get("template").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join("\n"));
            }
            _ => bail!("{}: JSON without a `chat_template`", p.display()),
        }
    }
    Ok(s)
}

/// Runs `toolscope parse`. Exit 0 after printing; unusable input exits 2 via the caller.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let (syntax, how) = if args.syntax.eq_ignore_ascii_case("auto") {
        match &args.template {
            Some(t) => {
                let src = template_text(t)?;
                match Syntax::detect_from_template(&src) {
                    Some(s) => (
                        Some(s),
                        format!("detected from the markers in {}", t.display()),
                    ),
                    None => (
                        None,
                        format!(
                            "auto: no call markers in {}; every syntax's markers active",
                            t.display()
                        ),
                    ),
                }
            }
            None => (None, "auto: every syntax's markers active".to_string()),
        }
    } else {
        match Syntax::from_name(&args.syntax) {
            Some(s) => (Some(s), "given".to_string()),
            None => {
                let names: Vec<&str> = Syntax::ALL.iter().map(|s| s.name()).collect();
                bail!(
                    "--syntax {:?}: unknown syntax (known: auto, {})",
                    args.syntax,
                    names.join(", ")
                )
            }
        }
    };
    let tools = match &args.tools {
        Some(p) => {
            let v = json_file(p)?;
            if !(v.is_array() || v.get("tools").is_some()) {
                bail!(
                    "{}: expected a tools array or a request with `tools`",
                    p.display()
                );
            }
            Some(v)
        }
        None => None,
    };
    let chunks: Vec<String> = match (&args.chunks, &args.raw) {
        (Some(p), _) => {
            let v = json_file(p)?;
            let Value::Array(items) = v else {
                bail!("{}: expected a JSON array of strings", p.display())
            };
            let mut out = Vec::with_capacity(items.len());
            for (i, it) in items.into_iter().enumerate() {
                match it {
                    Value::String(s) => out.push(s),
                    other => bail!(
                        "{}: element {i} is not a string but {}",
                        p.display(),
                        crate::json_kind(&other)
                    ),
                }
            }
            out
        }
        (None, Some(p)) => vec![utf8(p, read_file(p)?)?],
        (None, None) => bail!("give --chunks FILE.json, a raw text file, or - for stdin"),
    };
    let opts = ParserOptions {
        reasoning_open: args.reasoning_open,
    };
    let trace = Trace::record_with(&chunks, syntax, tools.as_ref(), opts);
    let mut col = Collector::default();
    for e in trace.events() {
        col.apply(e);
    }
    let out = col.into_output();
    if args.format == "json" {
        let calls: Vec<Value> = out
            .tool_calls
            .iter()
            .map(|c| json!({"name": c.name, "arguments": c.arguments}))
            .collect();
        let v = json!({
            "content": out.content,
            "reasoning": out.reasoning,
            "tool_calls": calls,
            "malformed": out.malformed,
            "repairs": out.repairs,
            "steps": trace.steps_json(),
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(ExitCode::SUCCESS);
    }
    // text
    let mut s = String::new();
    use std::fmt::Write;
    let sx = syntax.map(Syntax::name).unwrap_or("auto");
    let how = match (syntax, Syntax::detect_from_text(&chunks.concat())) {
        (None, Some(t)) => format!("{how}; the text looks like {t}"),
        _ => how,
    };
    let _ = writeln!(s, "syntax     {sx} ({how})");
    let _ = writeln!(s, "content    {:?}", out.content);
    let _ = writeln!(s, "reasoning  {:?}", out.reasoning);
    let _ = writeln!(s, "\ntool calls ({})", out.tool_calls.len());
    for (i, c) in out.tool_calls.iter().enumerate() {
        let span = c
            .span
            .map(|(a, b)| format!(", bytes {a}..{b}"))
            .unwrap_or_default();
        let _ = writeln!(
            s,
            "  [{i}] {}({})   [{}{span}]",
            c.name,
            c.arguments,
            c.syntax.as_deref().unwrap_or("?")
        );
    }
    let _ = writeln!(s, "\nrepairs ({})", out.repairs.len());
    for r in &out.repairs {
        let _ = writeln!(s, "  {} at byte {}: {}", r.kind, r.offset, r.message);
    }
    let _ = writeln!(s, "\nmalformed ({})", out.malformed.len());
    for m in &out.malformed {
        let _ = writeln!(
            s,
            "  {} at byte {}: {}\n      {:?}",
            m.syntax,
            m.offset,
            m.message,
            cut(&m.text, 80)
        );
    }
    let _ = writeln!(s, "\nsteps ({})", trace.len());
    for i in 0..trace.len() {
        let v = trace.state_at(i);
        let chunk = if v.state.kind == StateKind::Done {
            "(end)".to_string()
        } else {
            format!("{:?}", cut(v.chunk, 40))
        };
        let state = serde_json::to_value(v.state.kind)
            .ok()
            .and_then(|x| x.as_str().map(str::to_string))
            .unwrap_or_default();
        let state = match v.state.syntax {
            Some(sx) => format!("{state}:{sx}"),
            None => state,
        };
        let mut line = format!("  #{i:<4} {chunk:<46} {state:<22}");
        if !v.held.is_empty() {
            line += &format!(" holds {:?}", cut(v.held, 30));
        }
        let _ = writeln!(s, "{}", line.trim_end());
        for e in v.events {
            let _ = writeln!(s, "         → {}", describe(e));
        }
    }
    if chunks.len() > 1 || chunks.first().is_some_and(|c| c.len() < 100_000) {
        let findings = check_chunkings(&chunks, None, syntax, tools.as_ref(), opts);
        let _ = writeln!(
            s,
            "\nre-cut checks (per character, per recorded chunk, every 2 and 8 chunks): {}",
            if findings.is_empty() {
                "same result as one-shot"
            } else {
                "DIVERGENCE"
            }
        );
        for f in findings {
            let _ = writeln!(s, "  {}: {}", f.rule, f.message);
        }
    }
    print!("{}", crate::text::visible(&s));
    Ok(ExitCode::SUCCESS)
}

fn describe(e: &Event) -> String {
    match e {
        Event::Content(t) => format!("content {:?}", cut(t, 60)),
        Event::Reasoning(t) => format!("reasoning {:?}", cut(t, 60)),
        Event::CallStart {
            index,
            name,
            syntax,
            offset,
        } => format!("call start [{index}] {name} ({syntax}, byte {offset})"),
        Event::ArgumentsDelta { index, delta } => format!("arguments [{index}] {}", cut(delta, 60)),
        Event::CallEnd { index, .. } => format!("call end [{index}]"),
        Event::Repair(r) => format!("REPAIR {} at byte {}: {}", r.kind, r.offset, r.message),
        Event::Malformed(m) => {
            format!("MALFORMED {} at byte {}: {}", m.syntax, m.offset, m.message)
        }
        Event::ContentToReasoning { bytes } => {
            format!("orphan </think>: the {bytes} bytes of content so far were reasoning")
        }
    }
}
