//! Template-aware flattening: flatten with every [`Strategy`], render each result with the
//! template, measure what the prompt lost against the ORIGINAL schema ([`loss_report`]) and
//! rank the strategies, least loss first. Also the pre-flight lint used by `toolscope check`.
//!
//! Loss is always measured against the tools as the agent wrote them, so a strategy cannot win
//! by dropping facts: `first-type` loses the alternatives it drops, a `*-with-note` strategy
//! keeps them in words the template prints.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::flatten::{FlattenOptions, Flattened, Strategy, flatten_tools};
use super::loss::{LossReport, loss_report};
use crate::finding::{Evidence, Finding, Pane, Rule};

/// One row of a ranking.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ranked {
    /// The strategy, or `None` for the tools as given (the baseline row).
    pub strategy: Option<Strategy>,
    /// Weighted loss ([`LossReport::score`]); lower is better. `None` when rendering failed.
    pub score: Option<u32>,
    /// One line per lost fact: `tool /pointer: kind expected`.
    pub lost: Vec<String>,
    /// Changes the flattening itself reported as lossy.
    pub lossy_changes: usize,
    /// The render error, when the template failed on this variant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub render_error: Option<String>,
}

/// The result of [`rank_strategies`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ranking {
    /// Strategies, best first (render errors last; ties broken by fewer lossy changes, then
    /// [`Strategy::ALL`] order).
    pub ranked: Vec<Ranked>,
    /// The tools as given, rendered unflattened.
    pub baseline: Ranked,
}

impl Ranking {
    /// The winning strategy (`None` when every variant failed to render).
    pub fn best(&self) -> Option<Strategy> {
        self.ranked
            .first()
            .filter(|r| r.score.is_some())
            .and_then(|r| r.strategy)
    }
}

/// Flattens `doc` (any tool shape [`super::tools::locate_tools`] accepts) with each strategy,
/// renders each variant with `render` (which receives the flattened document, same shape as
/// `doc`, and returns the prompt or an error text), and ranks the strategies by the loss of
/// the original schema's facts in the prompt.
///
/// Returns the ranking and the flattening of the winner (with `opts`' other settings).
/// Errors: `doc` holds no tools.
pub fn rank_strategies<F>(
    doc: &Value,
    opts: &FlattenOptions,
    mut render: F,
) -> Result<(Ranking, Flattened), String>
where
    F: FnMut(&Value) -> Result<String, String>,
{
    let measure = |report: &LossReport| -> Vec<String> {
        report
            .lost_facts()
            .map(|(t, _, f)| {
                format!(
                    "{} {}: {} {}",
                    t.tool,
                    f.pointer,
                    f.kind.label(),
                    f.expected
                )
            })
            .collect()
    };
    let baseline = match render(doc) {
        Ok(prompt) => {
            let r = loss_report(doc, &prompt);
            Ranked {
                strategy: None,
                score: Some(r.score()),
                lost: measure(&r),
                lossy_changes: 0,
                render_error: None,
            }
        }
        Err(e) => Ranked {
            strategy: None,
            score: None,
            lost: Vec::new(),
            lossy_changes: 0,
            render_error: Some(e),
        },
    };
    let mut rows: Vec<(Ranked, Flattened)> = Vec::new();
    for s in Strategy::ALL {
        let o = FlattenOptions {
            strategy: *s,
            ..opts.clone()
        };
        let flat = flatten_tools(doc, &o)?;
        let row = match render(&flat.tools) {
            Ok(prompt) => {
                let r = loss_report(doc, &prompt);
                Ranked {
                    strategy: Some(*s),
                    score: Some(r.score()),
                    lost: measure(&r),
                    lossy_changes: flat.lossy_changes(),
                    render_error: None,
                }
            }
            Err(e) => Ranked {
                strategy: Some(*s),
                score: None,
                lost: Vec::new(),
                lossy_changes: flat.lossy_changes(),
                render_error: Some(e),
            },
        };
        rows.push((row, flat));
    }
    // Stable sort keeps Strategy::ALL order on ties.
    rows.sort_by_key(|(r, _)| {
        (
            r.score.is_none(),
            r.score.unwrap_or(u32::MAX),
            r.lossy_changes,
        )
    });
    let best = rows
        .first()
        .map(|(_, f)| f.clone())
        .ok_or("no strategies")?;
    Ok((
        Ranking {
            ranked: rows.into_iter().map(|(r, _)| r).collect(),
            baseline,
        },
        best,
    ))
}

/// Builds a minimal chat-completions request around a tools document, for rendering a
/// template's tool block: the `tools` of `doc` (converted to OpenAI `{"type":"function",…}`
/// entries when they are Anthropic or MCP tools) and one user message.
pub fn request_for_tools(doc: &Value) -> Value {
    let tools: Vec<Value> = match super::tools::locate_tools(doc) {
        Ok(list) => list
            .tools
            .iter()
            .map(|t| {
                let params = list
                    .schema(doc, t)
                    .cloned()
                    .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
                let mut f = serde_json::Map::new();
                f.insert("name".into(), Value::String(t.name.clone()));
                if let Some(d) = &t.description {
                    f.insert("description".into(), Value::String(d.clone()));
                }
                f.insert("parameters".into(), params);
                json!({"type": "function", "function": Value::Object(f)})
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    json!({"messages": [{"role": "user", "content": "Hello"}], "tools": tools, "add_generation_prompt": true})
}

/// Pre-flight lint of a request before it is sent: render `request` (an OpenAI
/// chat-completions or Anthropic Messages body; its `tools` are linted) with `render`
/// and report every schema fact the prompt lost (rules `schema.type_lost`,
/// `schema.alternative_dropped`, `schema.ref_unresolved`), or one `template.render_error`
/// finding when the template fails. A request without tools yields no findings.
///
/// `toolscope check --template SRC --request REQ.json` calls this (or [`preflight`]).
pub fn preflight_with<F>(request: &Value, mut render: F) -> Vec<Finding>
where
    F: FnMut(&Value) -> Result<String, String>,
{
    let has_tools = request
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty());
    if !has_tools {
        return Vec::new();
    }
    match render(request) {
        Ok(prompt) => {
            let mut f = super::loss::schema_loss(request, &prompt);
            // Attach the best strategy as the hint when something was lost.
            if !f.is_empty()
                && let Ok((ranking, _)) = rank_strategies(request, &FlattenOptions::default(), &mut render)
                && let Some(best) = ranking.ranked.first().filter(|r| r.score.is_some())
                && let Some(s) = best.strategy
            {
                let note = format!(
                    "toolscope flatten --strategy {s} loses {} (weighted) on this template, as sent: {}",
                    best.score.unwrap_or(0),
                    ranking
                        .baseline
                        .score
                        .map(|x| x.to_string())
                        .unwrap_or_else(|| "render error".into())
                );
                for x in &mut f {
                    x.hint = format!("{} — {note}", x.hint);
                }
            }
            f
        }
        Err(e) => vec![
            Finding::new(
                Rule::TemplateRenderError,
                format!("the chat template failed on this request: {e}"),
                "fix the template or the request; toolscope render --template SRC --request F shows where",
            )
            .with_evidence(Evidence {
                pane: Some(Pane::Template),
                excerpt: Some(e),
                ..Evidence::default()
            }),
        ],
    }
}

/// [`preflight_with`] rendering with [`crate::template::render()`] (transformers-faithful,
/// no clock) on the template source `template`.
pub fn preflight(request: &Value, template: &str) -> Vec<Finding> {
    preflight_with(request, |req| {
        render_template(template, &as_request(req), None, None)
    })
}

/// Renders `request` (OpenAI chat-completions or Anthropic Messages body, [`request_input`])
/// with the bare Jinja `template` ([`crate::template::TemplateSource::render`], transformers,
/// named [`crate::template::render::DEFAULT_NAME`] in errors), filling `bos_token`/`eos_token`
/// from `bos`/`eos` when the request has none. Errors: the render error as text (with its line
/// and column).
pub fn render_template(
    template: &str,
    request: &Value,
    bos: Option<&str>,
    eos: Option<&str>,
) -> Result<String, String> {
    use crate::template::render::DEFAULT_NAME;
    use crate::template::{RenderOptions, TemplateSource};
    TemplateSource::from_jinja(DEFAULT_NAME, template)
        .render(
            &request_input(request).with_default_tokens(bos, eos),
            &RenderOptions::default(),
        )
        .map_err(|e| e.to_string())
}

/// A tools document's request as a template reads it: an Anthropic Messages body (a `system`,
/// or tools with `input_schema`) converted as llama-server converts it, else an OpenAI body.
pub fn request_input(request: &Value) -> crate::template::RenderInput {
    use crate::template::RenderInput;
    let anthropic = request.get("system").is_some()
        || request
            .get("tools")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|t| t.get("input_schema").is_some()));
    if anthropic {
        RenderInput::from_anthropic_request(request)
    } else {
        RenderInput::from_openai_request(request)
    }
}

/// A tools document turned into something renderable: requests pass through, bare tool lists
/// (OpenAI array, Anthropic, MCP) are wrapped by [`request_for_tools`].
pub fn as_request(doc: &Value) -> Value {
    if doc.get("messages").is_some() {
        doc.clone()
    } else {
        request_for_tools(doc)
    }
}
