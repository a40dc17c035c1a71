//! `toolscope flatten TOOLS.json [--strategy NAME] [--template SRC [--engine ENGINE]] [--format text|json]`.
//!
//! Reads the files, calls [`crate::schema`], prints. Exit 0 on success, 2 on unusable
//! input (the message names the file and the JSON line:column).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use serde_json::{Value, json};

use super::Format;
use crate::schema::flatten::{FlattenOptions, Flattened, Strategy, flatten_tools};
use crate::schema::rank::{Ranking, as_request, rank_strategies, request_input};
use crate::template::render::DEFAULT_NAME;
use crate::template::{Profile, RenderInput, RenderOptions};

/// Arguments of `toolscope flatten`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Tools to flatten: an OpenAI `tools` array or request, Anthropic tools, or an MCP
    /// `tools/list` result (bare or a JSON-RPC response). `-` reads stdin.
    pub tools: PathBuf,
    /// How to write a node with several types: type-list, first-type, first-type-with-note,
    /// string-with-note. Default: type-list, or with --template the strategy that loses least.
    #[arg(long, value_parser = parse_strategy)]
    pub strategy: Option<Strategy>,
    /// Chat template (.jinja, tokenizer_config.json, tokenizer.json, .gguf, llama-server URL or
    /// corpus:NAME.jinja): try every strategy, render each, measure what the prompt loses, pick
    /// the best and show the ranking.
    #[arg(long, value_name = "SRC")]
    pub template: Option<String>,
    /// Render profile for --template: `transformers`, `llama.cpp` or `llama.cpp@BUILD`
    /// (default: the source's engine — a llama-server URL renders as llama.cpp — else
    /// transformers).
    #[arg(long, value_name = "ENGINE", requires = "template")]
    pub engine: Option<Profile>,
    /// How often a recursive `$ref` is expanded along one path before it is cut (0 to 64).
    #[arg(long, default_value_t = 2, value_name = "N", value_parser = clap::value_parser!(u64).range(0..=64))]
    pub recursion_depth: u64,
    /// Output format: text (a report, then the flattened tools) or json
    /// (`{"tools":…,"changes":[{"path","change","lost"}],"ranking":…}`).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Also write the flattened tools (same shape as the input) to this file.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

fn parse_strategy(s: &str) -> Result<Strategy, String> {
    Strategy::from_name(s).ok_or_else(|| {
        format!(
            "unknown strategy `{s}`; one of: {}",
            Strategy::ALL
                .iter()
                .map(|s| s.name())
                .collect::<Vec<_>>()
                .join(", ")
        )
    })
}

/// Reads a JSON file; errors name the file and the line:column.
pub fn read_json(path: &Path) -> anyhow::Result<Value> {
    let bytes = crate::input::read_file_or_stdin(path)?;
    serde_json::from_slice(&bytes).map_err(|e| super::json_error(path.display(), &e))
}

/// Runs `toolscope flatten`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let doc = read_json(&args.tools)?;
    if let Ok(list) = crate::schema::tools::locate_tools(&doc) {
        for (at, what) in &list.skipped {
            crate::errln!(
                "{}: {at}: not a tool ({what}); skipped",
                args.tools.display()
            );
        }
    }
    let base = FlattenOptions {
        recursion_depth: args.recursion_depth as usize,
        ..FlattenOptions::default()
    };
    let (flat, ranking, template_name): (Flattened, Option<Ranking>, Option<String>) =
        match &args.template {
            Some(tp) => {
                let src = super::render::load_template(tp)?;
                let profile = src.profile_for(args.engine);
                let (ranking, best) = rank_strategies(&doc, &base, |d| {
                    let req = as_request(d);
                    // the llama.cpp profile reads the body as OpenAI, as llama-server does, and
                    // names errors by the source; transformers reads it as rank does
                    let (input, name) = if profile.is_llama_cpp() {
                        (RenderInput::from_openai_request(&req), None)
                    } else {
                        (request_input(&req), Some(DEFAULT_NAME.to_owned()))
                    };
                    let opts = RenderOptions {
                        name,
                        profile: Some(profile),
                        ..Default::default()
                    };
                    src.render(&input, &opts).map_err(|e| e.to_string())
                })
                .map_err(|e| anyhow::anyhow!("{}: {e}", args.tools.display()))?;
                // nothing rendered: no strategy can be chosen (and none judged) on this template
                if ranking.best().is_none() && ranking.baseline.score.is_none() {
                    let err = ranking
                        .baseline
                        .render_error
                        .clone()
                        .or_else(|| ranking.ranked.iter().find_map(|r| r.render_error.clone()))
                        .unwrap_or_default();
                    let tools = args.tools.display();
                    anyhow::bail!("{tp}: renders neither {tools} as given nor flattened: {err}");
                }
                let flat = match args.strategy {
                    Some(s) => flatten_tools(
                        &doc,
                        &FlattenOptions {
                            strategy: s,
                            ..base.clone()
                        },
                    )
                    .map_err(|e| anyhow::anyhow!("{}: {e}", args.tools.display()))?,
                    None => best,
                };
                (flat, Some(ranking), Some(tp.clone()))
            }
            None => {
                let o = FlattenOptions {
                    strategy: args.strategy.unwrap_or_default(),
                    ..base.clone()
                };
                (
                    flatten_tools(&doc, &o)
                        .map_err(|e| anyhow::anyhow!("{}: {e}", args.tools.display()))?,
                    None,
                    None,
                )
            }
        };
    let chosen = match (&args.strategy, &ranking) {
        (Some(s), _) => *s,
        (None, Some(r)) => r.best().unwrap_or_default(),
        (None, None) => Strategy::default(),
    };
    if let Some(out) = &args.output {
        let text = serde_json::to_string_pretty(&flat.tools)? + "\n";
        std::fs::write(out, text).with_context(|| format!("{}: cannot write", out.display()))?;
    }
    match args.format {
        Format::Json => {
            let mut v =
                json!({"tools": flat.tools, "changes": flat.changes, "strategy": chosen.name()});
            if let Some(r) = &ranking {
                v["ranking"] = serde_json::to_value(r)?;
            }
            crate::text::print_json(&format!("{}\n", serde_json::to_string_pretty(&v)?));
        }
        Format::Text => {
            crate::text::print_out(&text_report(
                &args.tools.display().to_string(),
                &flat,
                chosen,
                ranking.as_ref(),
                template_name.as_deref(),
            ));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The human-readable report (text format).
pub fn text_report(
    file: &str,
    flat: &Flattened,
    chosen: Strategy,
    ranking: Option<&Ranking>,
    template: Option<&str>,
) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let lossy = flat.lossy_changes();
    let _ = writeln!(
        s,
        "{file}: {} change{} ({lossy} lossy), strategy {chosen}",
        flat.changes.len(),
        if flat.changes.len() == 1 { "" } else { "s" }
    );
    let mut last_tool: Option<&str> = None;
    for c in &flat.changes {
        let tool = c.tool.as_deref().unwrap_or("");
        if last_tool != Some(tool) {
            let _ = writeln!(s, "\n  {tool}");
            last_tool = Some(tool);
        }
        let _ = writeln!(s, "    {}\n      {}", c.path, c.change);
        if let Some(l) = &c.lost {
            let _ = writeln!(s, "      lost: {l}");
        }
    }
    if let Some(r) = ranking {
        let _ = writeln!(
            s,
            "\nranking on {} (weighted loss of the original schema in the prompt; lower is better):",
            template.unwrap_or("the template")
        );
        let row = |s: &mut String, label: &str, x: &crate::schema::rank::Ranked| {
            let score = x
                .score
                .map(|v| v.to_string())
                .unwrap_or_else(|| "render error".into());
            let _ = writeln!(
                s,
                "  {label:<24} {score:>6}{}",
                if x.lossy_changes > 0 {
                    format!(
                        "   ({} lossy change{})",
                        x.lossy_changes,
                        if x.lossy_changes == 1 { "" } else { "s" }
                    )
                } else {
                    String::new()
                }
            );
            if let Some(e) = &x.render_error {
                let _ = writeln!(s, "      {e}");
            }
            for l in x.lost.iter().take(6) {
                let _ = writeln!(s, "      lost {l}");
            }
            if x.lost.len() > 6 {
                let _ = writeln!(s, "      … {} more", x.lost.len() - 6);
            }
        };
        for (i, x) in r.ranked.iter().enumerate() {
            let label = format!("{}. {}", i + 1, x.strategy.map(|s| s.name()).unwrap_or("?"));
            row(&mut s, &label, x);
        }
        row(&mut s, "   (as given)", &r.baseline);
        let _ = writeln!(s, "chosen: {chosen}");
    }
    let _ = writeln!(
        s,
        "\nflattened tools:\n{}",
        serde_json::to_string_pretty(&flat.tools).unwrap_or_default()
    );
    s
}
