//! What-if runs, the pure half: the request a fix sends ([`fixed_request`]), what one run of a
//! variant gave ([`RunOutcome`], from the run's [`AnalysedExchange`]), and the tally over K runs
//! ([`Tally`]: valid-call rate with its 95 % Wilson interval, finish reasons, the findings that
//! remain, and whether the outcome changed between runs of the same request). `toolscope try`
//! (`crate::record::whatif`, `crate::cli::whatif`) sends the runs and records them; the
//! inspector shows the same tallies.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::AnalysedExchange;
use crate::diagnose::request::{self, ToolChoice};
use crate::finding::{Edit, Rule};
use crate::session::Api;

/// One variant's request: the path it goes to and its body.
#[derive(Debug, Clone, PartialEq)]
pub struct VariantRequest {
    /// Request path (the original's, or another API's for [`Edit::OtherApi`]).
    pub path: String,
    /// The body (JSON).
    pub body: Value,
}

/// The request fix `edit` sends in place of `body` (sent to `path`, speaking `api`). Only
/// edits applied by re-sending ([`crate::finding::Apply::Resend`]) change a request.
///
/// Errors (as text): the edit is applied otherwise (another template, another parser), the
/// body has no tools to flatten, or a conversion failed.
pub fn fixed_request(
    edit: &Edit,
    api: Api,
    path: &str,
    body: &Value,
) -> Result<VariantRequest, String> {
    let mut out = body.clone();
    let mut path = path.to_owned();
    match edit {
        Edit::FlattenSchemas { strategy, .. } => {
            let s = crate::schema::flatten::Strategy::from_name(strategy)
                .ok_or_else(|| format!("unknown flatten strategy {strategy:?}"))?;
            let flat = crate::schema::flatten::flatten_tools(
                body,
                &crate::schema::flatten::FlattenOptions::with_strategy(s),
            )?;
            out = flat.tools;
        }
        Edit::StopClientSide { .. } => {
            if let Some(o) = out.as_object_mut() {
                o.remove("stop");
                o.remove("stop_sequences");
            }
        }
        Edit::ForceNamedTool { tool, prefill } => {
            keep_only_tool(&mut out, tool)?;
            out["tool_choice"] = match api {
                Api::Anthropic => json!({"type": "any"}),
                _ => json!("required"),
            };
            if let Some(p) = prefill {
                append_prefill(&mut out, p)?;
            }
        }
        Edit::OtherApi {
            path: to,
            tool,
            prefill,
        } => {
            if api != Api::Anthropic || Api::from_path(to) != Api::Openai {
                return Err(format!(
                    "other_api converts /v1/messages to /v1/chat/completions, not {path} to {to}"
                ));
            }
            let choice = ToolChoice::from_request(api, body);
            out = crate::template::input::anthropic_to_openai_checked(body)?;
            // the conversion keeps the server's faults; the other API reads the choice itself
            match (choice, tool) {
                (_, Some(t)) => {
                    keep_only_tool(&mut out, t)?;
                    out["tool_choice"] = json!("required");
                    if let Some(p) = prefill {
                        append_prefill(&mut out, p)?;
                    }
                }
                (ToolChoice::None, None) => out["tool_choice"] = json!("none"),
                (ToolChoice::Required, None) => out["tool_choice"] = json!("required"),
                (ToolChoice::Named(n), None) => {
                    out["tool_choice"] = json!({"type": "function", "function": {"name": n}})
                }
                _ => {}
            }
            path = to.clone();
        }
        Edit::DropTools => {
            if let Some(o) = out.as_object_mut() {
                o.remove("tools");
                o.remove("tool_choice");
            }
        }
        Edit::MaxTokens { field, to, .. } => match field.split_once('.') {
            Some((outer, inner)) => {
                let o = out
                    .as_object_mut()
                    .ok_or("the request body is not an object")?
                    .entry(outer)
                    .or_insert_with(|| Value::Object(Map::new()));
                o[inner] = json!(to);
            }
            None => out[field.as_str()] = json!(to),
        },
        Edit::Template { .. } | Edit::OtherParser { .. } => {
            return Err(format!(
                "fix {} is not applied by re-sending the request",
                edit.id()
            ));
        }
    }
    Ok(VariantRequest { path, body: out })
}

/// Keeps only tool `tool` in `body.tools` (OpenAI `function.name` or Anthropic `name`).
fn keep_only_tool(body: &mut Value, tool: &str) -> Result<(), String> {
    let name_of = |t: &Value| {
        t.pointer("/function/name")
            .or_else(|| t.get("name"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let tools = body
        .get_mut("tools")
        .and_then(Value::as_array_mut)
        .ok_or("the request has no tools")?;
    tools.retain(|t| name_of(t).as_deref() == Some(tool));
    if tools.is_empty() {
        return Err(format!("the request offers no tool {tool:?}"));
    }
    Ok(())
}

/// Appends `{"role": "assistant", "content": prefill}` to `body.messages` (the same shape on
/// the OpenAI and Anthropic APIs), which llama-server continues. Errors: no `messages`, or
/// the request already ends with an assistant message (b11434 refuses two).
fn append_prefill(body: &mut Value, prefill: &str) -> Result<(), String> {
    let messages = body
        .get_mut("messages")
        .and_then(Value::as_array_mut)
        .ok_or("the request has no messages to prefill")?;
    if messages.last().and_then(|m| m.get("role")) == Some(&json!("assistant")) {
        return Err("the request already ends with an assistant message (a prefill)".into());
    }
    messages.push(json!({"role": "assistant", "content": prefill}));
    Ok(())
}

/// The calls fix [`Edit::OtherParser`] reads from `raw_text` (the original exchange's raw
/// output): the named engine's parser ([`crate::parser::engines::expected`], family from
/// `template`'s markers, else the text's; llama.cpp's after the exchange's generation prompt
/// `prompt` when known, [`crate::parser::engines::expected_with`]), or toolscope's tolerant
/// parse for engine `toolscope`. Each call as (name, arguments JSON text). Errors: another
/// edit, or no family.
pub fn reparse_calls(
    edit: &Edit,
    raw_text: &str,
    template: Option<&str>,
    tools: Option<&Value>,
    prompt: Option<&crate::parser::engines::LlamaPrompt>,
) -> Result<Vec<(String, String)>, String> {
    use crate::parser::engines::{Outcome, expected_with, family_for};
    let Edit::OtherParser { engine, .. } = edit else {
        return Err(format!("fix {} is not a parse of the raw text", edit.id()));
    };
    let chosen = template.and_then(crate::parser::Syntax::detect_from_template);
    let read = crate::parser::parse(raw_text, chosen, tools);
    let family = family_for(chosen, &read, raw_text).ok_or("the raw text has no call syntax")?;
    let (ours, engines) = expected_with(family, raw_text, tools, prompt);
    let calls = if engine == "toolscope" {
        ours.tool_calls
    } else {
        match engines.into_iter().find(|e| e.engine.name() == engine) {
            Some(e) => match e.outcome {
                Outcome::Calls { tool_calls, .. } => tool_calls,
                _ => Vec::new(),
            },
            None => return Err(format!("no modelled engine {engine:?}")),
        }
    };
    Ok(calls
        .into_iter()
        .map(|c| (c.name, c.arguments.to_string()))
        .collect())
}

/// `template` without the BOS it prints at its start (fix [`Edit::Template`] with `drop_bos`):
/// a leading `{{ bos_token }}` expression (any whitespace control), or the literal `bos` text.
/// Unchanged when it prints neither first.
pub fn template_without_bos(template: &str, bos: Option<&str>) -> String {
    let t = template.trim_start();
    if let Some(rest) = t.strip_prefix("{{") {
        let (inner, after) = match rest.split_once("}}") {
            Some(x) => x,
            None => return template.to_owned(),
        };
        if inner.trim_matches(|c: char| c == '-' || c == '+' || c.is_whitespace()) == "bos_token" {
            return after.to_owned();
        }
    }
    match bos
        .filter(|b| !b.is_empty())
        .and_then(|b| t.strip_prefix(b))
    {
        Some(rest) => rest.to_owned(),
        None => template.to_owned(),
    }
}

/// `body` with sampling seed `seed`, under the name the engine reads: `options.seed` for
/// Ollama's native API, top-level `seed` otherwise (OpenAI; llama-server reads it on every
/// endpoint, vLLM on its OpenAI endpoints). Engines that take no seed get the body unchanged
/// (`takes_seed` false).
pub fn with_seed(api: Api, body: &Value, seed: u64, takes_seed: bool) -> Value {
    let mut out = body.clone();
    if !takes_seed || !out.is_object() {
        return out;
    }
    if api == Api::Ollama {
        let o = out
            .as_object_mut()
            .map(|o| o.entry("options").or_insert_with(|| json!({})));
        if let Some(Value::Object(o)) = o {
            o.insert("seed".into(), json!(seed));
        }
    } else {
        out["seed"] = json!(seed);
    }
    out
}

/// True when the engine kind (session header `engine.kind`) takes a per-request sampling seed:
/// llama-server (`seed`, tools/server/server-task.cpp), vLLM and SGLang (`seed`), Ollama
/// (`options.seed`).
pub fn engine_takes_seed(kind: &crate::session::ServerKind) -> bool {
    kind.is_known()
}

/// What one run gave.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunOutcome {
    /// HTTP status, when the engine answered.
    pub status: Option<u16>,
    /// At least one call, and every call names a tool the original request declared with
    /// arguments that validate against that tool's schema (the original's, not a flattened one).
    pub valid_call: bool,
    /// The calls: `name(arguments)`.
    pub calls: Vec<String>,
    /// Finish / stop reason (`error` for a failed HTTP status, `none` when absent).
    pub finish: String,
    /// Rules of the run's findings.
    pub rules: Vec<Rule>,
    /// The visible answer (content), for the repeatability comparison.
    pub content: String,
    /// The reasoning, for the repeatability comparison.
    pub reasoning: String,
    /// Why the run gave no answer, when it failed: `HTTP 500: <the error body's message>`,
    /// the proxy's upstream error (`upstream … failed: connection refused`), or the run's
    /// timeout. `None` for a run the engine answered with a 2xx.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl RunOutcome {
    /// The outcome's identity for repeatability: status, finish, calls, content, reasoning.
    fn signature(&self) -> String {
        format!(
            "{:?}|{}|{}|{}|{}",
            self.status,
            self.finish,
            self.calls.join(";"),
            self.content,
            self.reasoning
        )
    }

    /// One line: `tool_calls get_time({"city":"Vienna"}) ✓`; a run without a call shows the
    /// start of its content (`completed no call: "Use the Python code…"`), so two outcomes that
    /// differ only in their text read differently.
    pub fn line(&self) -> String {
        let calls = if self.calls.is_empty() {
            match self.content.trim() {
                "" => "no call".to_owned(),
                text => format!("no call: {:?}", cut(text, 60)),
            }
        } else {
            self.calls.join(", ")
        };
        if let Some(e) = &self.error {
            return format!("{} {}", self.finish, crate::text::visible(&cut(e, 100)));
        }
        format!(
            "{} {}{}",
            self.finish,
            crate::text::visible(&cut(&calls, 100)),
            if self.valid_call { " ✓" } else { "" }
        )
    }
}

fn cut(s: &str, n: usize) -> String {
    if s.chars().count() > n {
        format!("{}…", s.chars().take(n).collect::<String>())
    } else {
        s.to_owned()
    }
}

/// The outcome of run `run` (analysed like any exchange), judged against the tools of
/// `declared` (the original request). For a variant whose calls come from a parse of the raw
/// text rather than the server's answer (another template, another parser), pass them as
/// `calls_override` (name, arguments).
pub fn outcome(
    run: &AnalysedExchange,
    declared: &Value,
    calls_override: Option<&[(String, String)]>,
) -> RunOutcome {
    let status = run.exchange.response.as_ref().map(|r| r.status);
    let m = run.message.as_ref();
    let calls: Vec<(String, String)> = match calls_override {
        Some(c) => c.to_vec(),
        None => m
            .map(|m| {
                m.tool_calls
                    .iter()
                    .map(|c| (c.name.clone(), c.arguments.clone()))
                    .collect()
            })
            .unwrap_or_default(),
    };
    let failed = status.is_none_or(|s| s >= 400);
    let finish = if failed {
        "error".to_owned()
    } else {
        m.and_then(|m| m.finish_reason.clone())
            .unwrap_or_else(|| "none".into())
    };
    RunOutcome {
        status,
        valid_call: !failed && valid_calls(declared, &calls),
        calls: calls.iter().map(|(n, a)| format!("{n}({a})")).collect(),
        finish,
        rules: run.findings.iter().map(|f| f.rule).collect(),
        content: m.map(|m| m.content.clone()).unwrap_or_default(),
        reasoning: m.map(|m| m.reasoning.clone()).unwrap_or_default(),
        error: failed.then(|| failure(&run.exchange)),
    }
}

/// Why a failed run gave no answer, in one line: `HTTP STATUS: MESSAGE` (the OpenAI/Anthropic
/// error body's `error.message`, an `error` string, else the body's start), or the recorded
/// exchange's error (the proxy's upstream failure) when no response came.
fn failure(ex: &crate::session::Exchange) -> String {
    let Some(r) = &ex.response else {
        return ex.error.clone().unwrap_or_else(|| "no response".to_owned());
    };
    let body = r.body.as_ref().map(|b| b.bytes()).unwrap_or_default();
    let v: Option<Value> = serde_json::from_slice(&body).ok();
    let message = v.as_ref().and_then(|v| {
        let e = v.get("error")?;
        e.get("message")
            .and_then(Value::as_str)
            .or(e.as_str())
            .map(str::to_owned)
    });
    let message = message.unwrap_or_else(|| {
        String::from_utf8_lossy(&body)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    });
    match message.trim() {
        "" => format!("HTTP {}", r.status),
        m => format!("HTTP {}: {}", r.status, cut(m, 120)),
    }
}

/// True when `calls` (name, arguments text) is not empty and every call names a tool of
/// `declared`'s `tools` whose JSON Schema (`jsonschema` crate) its arguments validate against.
/// A tool without a schema takes any JSON object.
pub fn valid_calls(declared: &Value, calls: &[(String, String)]) -> bool {
    let defs = request::tools(declared);
    !calls.is_empty()
        && calls.iter().all(|(name, args)| {
            let Some(def) = defs.iter().find(|d| &d.name == name) else {
                return false;
            };
            let args: Value = if args.trim().is_empty() {
                json!({})
            } else {
                match serde_json::from_str(args) {
                    Ok(v) => v,
                    Err(_) => return false,
                }
            };
            match def.schema.as_ref().map(jsonschema::validator_for) {
                Some(Ok(v)) => v.is_valid(&args),
                Some(Err(_)) | None => args.is_object(),
            }
        })
}

/// The 95 % Wilson score interval of `k` successes in `n` trials, as (low, high) proportions
/// (E. B. Wilson, "Probable inference…", JASA 1927; z = 1.959964). `(0, 1)` for `n = 0`.
pub fn wilson(k: usize, n: usize) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let z = 1.959_963_984_540_054_f64;
    let (k, n) = (k as f64, n as f64);
    let p = k / n;
    let z2 = z * z;
    let denom = 1.0 + z2 / n;
    let center = (p + z2 / (2.0 * n)) / denom;
    let half = z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / denom;
    ((center - half).max(0.0), (center + half).min(1.0))
}

/// The runs of one variant, tallied.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Tally {
    /// Runs finished.
    pub runs: usize,
    /// Runs with a valid call ([`RunOutcome::valid_call`]).
    pub valid: usize,
    /// Finish reason → runs.
    pub finish: BTreeMap<String, usize>,
    /// Rule → runs whose findings include it.
    pub findings: BTreeMap<String, usize>,
    /// Distinct outcomes (status, finish, calls, content, reasoning) → runs, most frequent
    /// first; more than one means the outcome changed between runs of the same request.
    pub outcomes: Vec<(String, usize)>,
}

impl Tally {
    /// Tallies `runs`.
    pub fn of(runs: &[RunOutcome]) -> Tally {
        let mut t = Tally {
            runs: runs.len(),
            valid: runs.iter().filter(|r| r.valid_call).count(),
            ..Tally::default()
        };
        let mut outcomes: Vec<(String, String, usize)> = Vec::new();
        for r in runs {
            *t.finish.entry(r.finish.clone()).or_default() += 1;
            let mut seen: Vec<Rule> = r.rules.clone();
            seen.sort();
            seen.dedup();
            for rule in seen {
                *t.findings.entry(rule.id().to_owned()).or_default() += 1;
            }
            let sig = r.signature();
            match outcomes.iter_mut().find(|(s, _, _)| *s == sig) {
                Some(o) => o.2 += 1,
                None => outcomes.push((sig, r.line(), 1)),
            }
        }
        outcomes.sort_by_key(|o| std::cmp::Reverse(o.2));
        t.outcomes = outcomes.into_iter().map(|(_, l, n)| (l, n)).collect();
        t
    }

    /// The valid-call rate's 95 % Wilson interval.
    pub fn interval(&self) -> (f64, f64) {
        wilson(self.valid, self.runs)
    }

    /// True when the outcome changed between runs of the same request.
    pub fn unstable(&self) -> bool {
        self.outcomes.len() > 1
    }

    /// `valid calls 3/10 (30 %, 95 % CI 11–60 %)`.
    pub fn rate_line(&self) -> String {
        if self.runs == 0 {
            return "valid calls 0/0 (no run finished)".to_owned();
        }
        let (lo, hi) = self.interval();
        format!(
            "valid calls {}/{} ({:.0} %, 95 % CI {:.0}–{:.0} %)",
            self.valid,
            self.runs,
            100.0 * self.valid as f64 / self.runs as f64,
            100.0 * lo,
            100.0 * hi
        )
    }

    /// `tool_calls ×7, length ×3`.
    pub fn finish_line(&self) -> String {
        counts(&self.finish)
    }

    /// `tool_choice.named_ignored ×10`, or `none`.
    pub fn findings_line(&self) -> String {
        if self.findings.is_empty() {
            "none".to_owned()
        } else {
            counts(&self.findings)
        }
    }
}

fn counts(m: &BTreeMap<String, usize>) -> String {
    let mut v: Vec<(&String, &usize)> = m.iter().collect();
    v.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    v.iter()
        .map(|(k, n)| format!("{k} ×{n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The label of a what-if run: `try:<exchange id>:<variant>` (`original`, or a fix id).
pub fn label(exchange: u64, variant: &str) -> String {
    format!("try:{exchange}:{variant}")
}

/// Reads a what-if label back: (exchange id, variant).
pub fn parse_label(label: &str) -> Option<(u64, &str)> {
    let rest = label.strip_prefix("try:")?;
    let (id, variant) = rest.split_once(':')?;
    Some((id.parse().ok()?, variant))
}

/// Session B compared with session A exchange by exchange (`toolscope diff A --against B`, the
/// inspector's what-if view): each side through the one analysed exchange, then
/// [`crate::diff::sessions::diff_pair`].
pub fn session_diffs(
    a: &crate::session::read::Session,
    b: &crate::session::read::Session,
) -> Vec<crate::diff::sessions::PairDiff> {
    let analyse = |s: &crate::session::read::Session, e: &crate::session::Exchange| {
        let annotations = s.annotations.get(&e.id).map_or(&[][..], Vec::as_slice);
        let ctx = crate::analysis::Context {
            header: &s.header,
            annotations,
        };
        crate::analysis::analyse(e.clone(), ctx, crate::analysis::Depth::Findings)
    };
    crate::diff::sessions::pair(a, b)
        .into_iter()
        .map(|(x, y)| {
            let (ax, ay) = (analyse(a, x), analyse(b, y));
            let none = crate::stream::AssistantMessage::default();
            crate::diff::sessions::diff_pair(&diff_side(&ax, &none), &diff_side(&ay, &none))
        })
        .collect()
}

/// One side of a session diff, from the analysed exchange.
fn diff_side<'a>(
    a: &'a crate::analysis::AnalysedExchange,
    none: &'a crate::stream::AssistantMessage,
) -> crate::diff::sessions::Side<'a> {
    crate::diff::sessions::Side {
        id: a.exchange.id,
        status: a.exchange.response.as_ref().map(|r| r.status),
        server_prompt: a.server_render.as_ref().and_then(|r| r.prompt.as_deref()),
        message: a.message.as_ref().unwrap_or(none),
        raw_text: a.raw.as_ref().and_then(|r| r.models_text()),
        findings: &a.findings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wilson_matches_hand_computed_values() {
        // Hand-checked with the closed form (and R's prop.test(correct = FALSE)$conf.int):
        // 0/10 → [0, 0.2775]; 10/10 → [0.7225, 1]; 5/10 → [0.2366, 0.7634].
        let r = |x: f64| (x * 10_000.0).round() / 10_000.0;
        let (lo, hi) = wilson(0, 10);
        assert_eq!((r(lo), r(hi)), (0.0, 0.2775));
        let (lo, hi) = wilson(10, 10);
        assert_eq!((r(lo), r(hi)), (0.7225, 1.0));
        let (lo, hi) = wilson(5, 10);
        assert_eq!((r(lo), r(hi)), (0.2366, 0.7634));
        assert_eq!(wilson(0, 0), (0.0, 1.0));
    }

    fn two_tools() -> Value {
        json!([
            {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
            {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
        ])
    }

    #[test]
    fn a_valid_call_names_a_declared_tool_with_arguments_its_schema_accepts() {
        let req = json!({"tools": two_tools()});
        let c = |n: &str, a: &str| vec![(n.to_owned(), a.to_owned())];
        assert!(valid_calls(&req, &c("get_time", r#"{"city":"Vienna"}"#)));
        assert!(!valid_calls(&req, &c("get_time", r#"{"town":"Vienna"}"#)));
        assert!(!valid_calls(&req, &c("get_time", r#"{"city":"Vie"#)));
        assert!(!valid_calls(&req, &c("Vienna", r#"{"city":"Vienna"}"#)));
        assert!(!valid_calls(&req, &[]));
    }

    #[test]
    fn force_named_tool_keeps_only_that_tool_and_forces_a_call() {
        let oa = json!({"messages": [], "tools": two_tools(), "tool_choice": {"type": "function", "function": {"name": "get_time"}}});
        let v = fixed_request(
            &Edit::ForceNamedTool {
                tool: "get_time".into(),
                prefill: None,
            },
            Api::Openai,
            "/v1/chat/completions",
            &oa,
        )
        .unwrap();
        assert_eq!(v.body["tool_choice"], json!("required"));
        assert_eq!(v.body["tools"].as_array().unwrap().len(), 1);
        assert_eq!(v.body["tools"][0]["function"]["name"], "get_time");
        let an = json!({"max_tokens": 64, "messages": [], "tool_choice": {"type": "tool", "name": "get_time"},
            "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}, {"name": "get_time", "input_schema": {"type": "object"}}]});
        let v = fixed_request(
            &Edit::ForceNamedTool {
                tool: "get_time".into(),
                prefill: Some("<tool_call>\n".into()),
            },
            Api::Anthropic,
            "/v1/messages",
            &an,
        )
        .unwrap();
        assert_eq!(v.body["tool_choice"], json!({"type": "any"}));
        assert_eq!(
            v.body["tools"],
            json!([{"name": "get_time", "input_schema": {"type": "object"}}])
        );
        assert_eq!(v.path, "/v1/messages");
        // the call opener as the final assistant message, which llama-server continues
        assert_eq!(
            v.body["messages"],
            json!([{"role": "assistant", "content": "<tool_call>\n"}])
        );
    }

    #[test]
    fn other_api_converts_and_keeps_the_choice() {
        let an = json!({"max_tokens": 64, "messages": [{"role": "user", "content": "hi"}], "tool_choice": {"type": "none"},
            "tools": [{"name": "get_time", "input_schema": {"type": "object"}}]});
        let v = fixed_request(
            &Edit::OtherApi {
                path: "/v1/chat/completions".into(),
                tool: None,
                prefill: None,
            },
            Api::Anthropic,
            "/v1/messages",
            &an,
        )
        .unwrap();
        assert_eq!(v.path, "/v1/chat/completions");
        assert_eq!(v.body["tool_choice"], json!("none"));
        assert_eq!(v.body["tools"][0]["function"]["name"], "get_time");
        // a named choice: only that tool, "required", the opener prefilled after the
        // converted messages
        let named = json!({"max_tokens": 64, "messages": [{"role": "user", "content": "hi"}],
            "tool_choice": {"type": "tool", "name": "get_time"},
            "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}, {"name": "get_time", "input_schema": {"type": "object"}}]});
        let v = fixed_request(
            &Edit::OtherApi {
                path: "/v1/chat/completions".into(),
                tool: Some("get_time".into()),
                prefill: Some("<tool_call>\n".into()),
            },
            Api::Anthropic,
            "/v1/messages",
            &named,
        )
        .unwrap();
        assert_eq!(v.body["tool_choice"], json!("required"));
        assert_eq!(v.body["tools"].as_array().unwrap().len(), 1);
        assert_eq!(v.body["tools"][0]["function"]["name"], "get_time");
        let msgs = v.body["messages"].as_array().unwrap();
        assert_eq!(
            msgs.last().unwrap(),
            &json!({"role": "assistant", "content": "<tool_call>\n"})
        );
        assert_eq!(msgs[msgs.len() - 2]["role"], "user");
    }

    #[test]
    fn stop_and_limit_edits() {
        let body = json!({"messages": [], "stop": ["The"], "max_tokens": 8, "options": {"num_predict": 8}});
        let v = fixed_request(
            &Edit::StopClientSide {
                stop: vec!["The".into()],
            },
            Api::Openai,
            "/v1/chat/completions",
            &body,
        )
        .unwrap();
        assert!(v.body.get("stop").is_none());
        let v = fixed_request(
            &Edit::MaxTokens {
                field: "max_tokens".into(),
                from: Some(8),
                to: 256,
            },
            Api::Openai,
            "/v1/chat/completions",
            &body,
        )
        .unwrap();
        assert_eq!(v.body["max_tokens"], 256);
        let v = fixed_request(
            &Edit::MaxTokens {
                field: "options.num_predict".into(),
                from: Some(8),
                to: 256,
            },
            Api::Ollama,
            "/api/chat",
            &body,
        )
        .unwrap();
        assert_eq!(v.body["options"]["num_predict"], 256);
        assert_eq!(with_seed(Api::Openai, &body, 7, true)["seed"], 7);
        assert_eq!(with_seed(Api::Ollama, &body, 7, true)["options"]["seed"], 7);
        assert!(
            with_seed(Api::Openai, &body, 7, false)
                .get("seed")
                .is_none()
        );
    }

    #[test]
    fn bos_printed_first_is_dropped() {
        assert_eq!(
            template_without_bos("{{- bos_token }}{% for m in messages %}", None),
            "{% for m in messages %}"
        );
        assert_eq!(template_without_bos("<s>[INST]", Some("<s>")), "[INST]");
        assert_eq!(
            template_without_bos("{{ messages }}", Some("<s>")),
            "{{ messages }}"
        );
    }

    #[test]
    fn reparse_reads_the_raw_text_with_the_named_parser() {
        let tools = two_tools();
        let text = "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"city\": \"Vienna\"}}\n</tool_call>";
        let edit = Edit::OtherParser {
            engine: "vLLM".into(),
            parser: "hermes".into(),
        };
        let calls = reparse_calls(&edit, text, None, Some(&tools), None).unwrap();
        assert_eq!(
            calls,
            vec![("get_time".to_owned(), r#"{"city":"Vienna"}"#.to_owned())]
        );
        assert!(valid_calls(&json!({"tools": tools}), &calls));
    }

    #[test]
    fn labels_round_trip() {
        assert_eq!(label(3, "max_tokens"), "try:3:max_tokens");
        assert_eq!(parse_label("try:3:max_tokens"), Some((3, "max_tokens")));
        assert_eq!(parse_label("resend:3"), None);
    }

    #[test]
    fn tally_flags_an_outcome_that_changes() {
        let run = |calls: &[&str], finish: &str, valid: bool| RunOutcome {
            status: Some(200),
            valid_call: valid,
            calls: calls.iter().map(|s| s.to_string()).collect(),
            finish: finish.into(),
            rules: if valid {
                vec![]
            } else {
                vec![Rule::ToolChoiceRequiredIgnored]
            },
            content: String::new(),
            reasoning: String::new(),
            error: None,
        };
        let same = vec![run(&["get_time({})"], "tool_calls", true); 3];
        let t = Tally::of(&same);
        assert!(!t.unstable());
        assert_eq!(t.rate_line(), "valid calls 3/3 (100 %, 95 % CI 44–100 %)");
        let mixed = vec![
            run(&["get_time({})"], "tool_calls", true),
            run(&[], "length", false),
            run(&["get_time({})"], "tool_calls", true),
        ];
        let t = Tally::of(&mixed);
        assert!(t.unstable());
        assert_eq!(t.outcomes[0].1, 2);
        assert_eq!(t.finish_line(), "tool_calls ×2, length ×1");
        assert_eq!(t.findings_line(), "tool_choice.required_ignored ×1");
        // Runs without a call that differ only in their text say so in their lines.
        let text = |c: &str| RunOutcome {
            content: c.into(),
            ..run(&[], "stop", false)
        };
        let texts = Tally::of(&[
            text("Use the tool."),
            text("Use the tool."),
            text("I can't."),
        ]);
        let lines: Vec<(&str, usize)> = texts
            .outcomes
            .iter()
            .map(|(l, n)| (l.as_str(), *n))
            .collect();
        assert_eq!(
            lines,
            [
                ("stop no call: \"Use the tool.\"", 2),
                ("stop no call: \"I can't.\"", 1)
            ]
        );
    }
}
