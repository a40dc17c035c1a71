//! `toolscope parse`: raw model text → tool calls, with the step-by-step parser trace.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::bail;
use serde_json::{Value, json};

use crate::parser::engines::EngineOutcome;
use crate::parser::trace::{Trace, check_chunkings, cut};
use crate::parser::{Collector, ParseOutput, ParserOptions, StateKind, Syntax};

/// Arguments of `toolscope parse`.
///
/// Input: `--chunks FILE.json` (a JSON array of strings, one per stream chunk, e.g. the
/// `delta.content` of each SSE event), or a raw text file, or `-` for stdin (one chunk).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Call syntax (`--syntax list` prints every name; vLLM/SGLang `--tool-call-parser` names
    /// work as aliases), or auto (from --template's markers, else the markers of every syntax
    /// that auto mode reads).
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
    /// Also show what llama.cpp, vLLM and SGLang's own parsers for the syntax would return
    /// (the syntax given, detected from --template, or from the text). With --template and a
    /// --tools request, llama.cpp's is for that request's generation prompt (a trailing assistant
    /// message is a prefill the raw text starts with), else the family's.
    #[arg(long)]
    pub engines: bool,
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
    if args.syntax.eq_ignore_ascii_case("list") {
        for s in Syntax::ALL {
            crate::outln!("{}", s.name());
        }
        return Ok(ExitCode::SUCCESS);
    }
    let (syntax, how) = resolve_syntax(&args)?;
    let tools = match &args.tools {
        Some(p) => Some(read_tools(p)?),
        None => None,
    };
    let chunks = read_chunks(&args)?;
    let opts = ParserOptions {
        reasoning_open: args.reasoning_open,
        ..ParserOptions::default()
    };
    let trace = Trace::record_with(&chunks, syntax, tools.as_ref(), opts);
    let mut col = Collector::default();
    for e in trace.events() {
        col.apply(e);
    }
    let out = col.into_output();
    // the family the engines would be configured for: given / from the template / the calls read
    let family = crate::parser::engines::family_for(syntax, &out, &chunks.concat());
    let engines = if args.engines {
        let prompt = llama_prompt(&args, tools.as_ref())?;
        family.map(|f| {
            crate::parser::engines::expected_with(
                f,
                &chunks.concat(),
                tools.as_ref(),
                prompt.as_ref(),
            )
            .1
        })
    } else {
        None
    };
    if args.format == "json" {
        let mut v = json_report(&out, &trace);
        if args.engines {
            v["engines"] = json!({
                "family": family.map(Syntax::name),
                "outcomes": engines,
            });
        }
        crate::text::print_json(&format!("{}\n", serde_json::to_string_pretty(&v)?));
        return Ok(ExitCode::SUCCESS);
    }
    let mut s = String::new();
    write_result(&mut s, syntax, how, &chunks.concat(), &out);
    write_steps(&mut s, &trace);
    if chunks.len() > 1 || chunks.first().is_some_and(|c| c.len() < 100_000) {
        write_recut_checks(&mut s, &chunks, syntax, tools.as_ref(), opts);
    }
    if args.engines {
        write_engines(&mut s, family, engines.as_deref());
    }
    crate::text::print_out(&s);
    Ok(ExitCode::SUCCESS)
}

/// `--engines` with `--template` and a `--tools` request with `messages`: the generation prompt
/// llama.cpp parses in front of the reply, rendered from both under the llama.cpp profile
/// ([`crate::template::TemplateSource::generation_prompt`]; a trailing assistant message is the
/// prefill the raw text starts with). `None` without both, or when the template does not
/// render the request (the family's generation prompt is then used).
fn llama_prompt(
    args: &Args,
    tools: Option<&Value>,
) -> anyhow::Result<Option<crate::parser::engines::LlamaPrompt>> {
    use crate::template::{Profile, RenderInput, RenderOptions, TemplateSource};
    let (Some(t), Some(req)) = (
        &args.template,
        tools.filter(|r| r.get("messages").is_some()),
    ) else {
        return Ok(None);
    };
    let source = TemplateSource::from_jinja(&t.display().to_string(), &template_text(t)?);
    // an Anthropic body: its tools carry `input_schema`
    let anthropic = req
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(|l| l.iter().any(|t| t.get("input_schema").is_some()));
    let input = if anthropic {
        RenderInput::from_anthropic_request(req)
    } else {
        RenderInput::from_openai_request(req)
    };
    let opts = RenderOptions {
        profile: Some(Profile::LLAMA_CPP),
        ..Default::default()
    };
    Ok(match source.generation_prompt(&input, &opts) {
        Some(Ok((_, text))) => Some(crate::parser::engines::LlamaPrompt {
            text,
            prefill: crate::stream::raw::assistant_prefill(req).unwrap_or_default(),
            source: format!("local render ({})", Profile::LLAMA_CPP),
        }),
        _ => None,
    })
}

/// `--syntax`: the syntax (`None`: auto, every syntax's markers) and how it was chosen.
fn resolve_syntax(args: &Args) -> anyhow::Result<(Option<Syntax>, String)> {
    if args.syntax.eq_ignore_ascii_case("auto") {
        return Ok(match &args.template {
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
        });
    }
    match Syntax::from_name(&args.syntax) {
        Some(s) => Ok((Some(s), "given".to_string())),
        None => {
            let names: Vec<&str> = Syntax::ALL.iter().map(|s| s.name()).collect();
            bail!(
                "--syntax {:?}: unknown syntax (known: auto, {})",
                args.syntax,
                names.join(", ")
            )
        }
    }
}

/// `--tools FILE`: a tools array, or a request with `tools`.
fn read_tools(p: &Path) -> anyhow::Result<Value> {
    let v = json_file(p)?;
    if !(v.is_array() || v.get("tools").is_some()) {
        bail!(
            "{}: expected a tools array or a request with `tools`",
            p.display()
        );
    }
    Ok(v)
}

/// The text as it arrived: the `--chunks` array's strings, or the raw file as one chunk.
fn read_chunks(args: &Args) -> anyhow::Result<Vec<String>> {
    Ok(match (&args.chunks, &args.raw) {
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
    })
}

/// `--format json`: the parse and its steps (the engines are added by the caller).
fn json_report(out: &ParseOutput, trace: &Trace) -> Value {
    let calls: Vec<Value> = out
        .tool_calls
        .iter()
        .map(|c| json!({"name": c.name, "arguments": c.arguments}))
        .collect();
    json!({
        "content": out.content,
        "reasoning": out.reasoning,
        "tool_calls": calls,
        "malformed": out.malformed,
        "repairs": out.repairs,
        "steps": trace.steps_json(),
    })
}

/// The text report's head: the syntax and how it was chosen, content, reasoning, the calls,
/// repairs and malformed blocks.
fn write_result(
    s: &mut String,
    syntax: Option<Syntax>,
    how: String,
    text: &str,
    out: &ParseOutput,
) {
    let sx = syntax.map(Syntax::name).unwrap_or("auto");
    let how = match (syntax, Syntax::detect_from_text(text)) {
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
}

/// Every parser step: the chunk, the state after it, what it holds back, its events.
fn write_steps(s: &mut String, trace: &Trace) {
    let _ = writeln!(s, "\nsteps ({})", trace.len());
    for i in 0..trace.len() {
        let v = trace.state_at(i);
        let chunk = if v.state.kind == StateKind::Done {
            "(end)".to_string()
        } else {
            format!("{:?}", cut(v.chunk, 40))
        };
        let state = v.state.to_string();
        let mut line = format!("  #{i:<4} {chunk:<46} {state:<22}");
        if !v.held.is_empty() {
            line += &format!(" holds {:?}", cut(v.held, 30));
        }
        let _ = writeln!(s, "{}", line.trim_end());
        for e in v.events {
            let _ = writeln!(s, "         → {}", e);
        }
    }
}

/// The same text re-cut (per character, per recorded chunk, every 2 and 8 chunks) parses as
/// one-shot does, or the divergences.
fn write_recut_checks(
    s: &mut String,
    chunks: &[String],
    syntax: Option<Syntax>,
    tools: Option<&Value>,
    opts: ParserOptions,
) {
    let findings: Vec<_> = check_chunkings(chunks, None, syntax, tools, opts)
        .iter()
        .map(|(c, d)| crate::diagnose::rules::replay::cut_divergence(c, d))
        .collect();
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

/// `--engines`: what each engine's parser for `family` would return, and where they differ.
fn write_engines(s: &mut String, family: Option<Syntax>, engines: Option<&[EngineOutcome]>) {
    let _ = writeln!(s, "\nwhat each engine would return");
    let (Some(f), Some(list)) = (family, engines) else {
        let _ = writeln!(
            s,
            "  no family: give --syntax or --template (the text has no call markers)"
        );
        return;
    };
    let _ = writeln!(s, "  family {f}");
    for e in list {
        let what = e.outcome.summary();
        let _ = writeln!(
            s,
            "  {:<10} {:<21} {:<26} {what}",
            e.engine.name(),
            e.release,
            e.parser.unwrap_or("(no parser)"),
        );
        if !matches!(e.outcome, crate::parser::engines::Outcome::Error { .. }) {
            for line in e.outcome.detail(100) {
                let _ = writeln!(s, "             {line}");
            }
        }
        if let Some(d) = e.defect {
            let _ = writeln!(s, "             engine defect: {d}");
        }
        let _ = writeln!(s, "             {}", e.why);
    }
    let differ = crate::parser::engines::disagreements(list);
    if differ.is_empty() {
        let _ = writeln!(s, "  the engines agree");
    }
    for d in differ {
        let _ = writeln!(s, "  {d}");
    }
}
