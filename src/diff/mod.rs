//! Template and engine comparison: token-level and structural diffs of two renders of the same
//! request, schema loss under each, implied tool-call syntax. Pure.
//!
//! The pipeline for one pair of sides (two templates, or two servers' renders):
//!
//! * [`structure`] — from the two template sources: the markers each uses per [`Role`]
//!   (turns, reasoning, tool declarations, tool calls, tool results, BOS/EOS, media), whether
//!   each prints `bos_token`/`eos_token`, and the tool-call syntax each implies;
//! * [`diff_exchange`] — per exchange, from the two rendered prompts: the token-level diff
//!   ([`tokdiff::token_diff`], `similar`'s Myers, special tokens whole), the markers each
//!   render actually uses (with counts) and the turn-role sequence, and the schema loss under
//!   each (which parameters lose what under A but not B, and the reverse);
//! * [`DiffReport`] — the whole comparison, serialised as the stable JSON of
//!   `toolscope diff --format json` (documented in docs/diff.md), and [`render_text`] for the
//!   terminal;
//! * [`side_by_side`] — a row view model for the TUI's side-by-side diff.

pub mod adapt;
pub mod sessions;
pub mod split;
pub mod tokdiff;
pub mod view;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::tokens::markers::{self, BosEos, MarkerInventory, Role};

pub use split::{DiffToken, split_markers};
pub use tokdiff::{OpTag, TokenDiff, TokenOp, token_diff};
pub use view::{Row, RowKind, Segment, SideLine, ViewOptions, side_by_side};

/// Format tag of the JSON report. Bumped on incompatible change.
pub const FORMAT: &str = "toolscope-diff/1";

/// One template of a comparison.
#[derive(Debug, Clone, Copy)]
pub struct TemplateSide<'a> {
    /// Template source text.
    pub template: &'a str,
    /// `bos_token` the source declares (tokenizer_config / GGUF / server props), if any.
    pub bos: Option<&'a str>,
    /// `eos_token` the source declares, if any.
    pub eos: Option<&'a str>,
}

/// A set compared across A and B.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetDiff {
    pub a: Vec<String>,
    pub b: Vec<String>,
    pub only_a: Vec<String>,
    pub only_b: Vec<String>,
    pub changed: bool,
}

impl SetDiff {
    /// Compares two sets.
    pub fn of(a: &BTreeSet<String>, b: &BTreeSet<String>) -> SetDiff {
        let only_a: Vec<String> = a.difference(b).cloned().collect();
        let only_b: Vec<String> = b.difference(a).cloned().collect();
        let changed = !only_a.is_empty() || !only_b.is_empty();
        SetDiff {
            a: a.iter().cloned().collect(),
            b: b.iter().cloned().collect(),
            only_a,
            only_b,
            changed,
        }
    }
}

/// A value compared across A and B.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Pair<T> {
    pub a: T,
    pub b: T,
    pub changed: bool,
}

impl<T: PartialEq> Pair<T> {
    pub fn of(a: T, b: T) -> Pair<T> {
        let changed = a != b;
        Pair { a, b, changed }
    }
}

/// What the two template sources declare.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StructureDiff {
    /// Role name (`turn`, `reasoning`, `tool_declaration`, `tool_call`, `tool_result`, `bos`,
    /// `eos`, `media`, `other`) → the markers each source contains. Roles neither uses are
    /// omitted.
    pub markers: BTreeMap<String, SetDiff>,
    /// BOS/EOS: whether each template prints `bos_token`/`eos_token`, and the strings.
    pub bos_eos: Pair<BosEos>,
    /// Tool-call syntax each template implies for the parser (`null`: writes no tool calls).
    pub syntax: Pair<Option<String>>,
    /// The template sources are byte-identical.
    pub identical_source: bool,
    /// Names of what changed: role names, `bos_eos`, `syntax`.
    pub changed: Vec<String>,
}

/// Structural diff of two template sources (markers per role, BOS/EOS, implied syntax).
pub fn structure(a: &TemplateSide, b: &TemplateSide) -> StructureDiff {
    let ia = MarkerInventory::of(a.template, true, a.bos, a.eos);
    let ib = MarkerInventory::of(b.template, true, b.bos, b.eos);
    let mut out = StructureDiff {
        identical_source: a.template == b.template,
        ..StructureDiff::default()
    };
    for role in Role::ALL {
        let (sa, sb) = (ia.set(role), ib.set(role));
        if sa.is_empty() && sb.is_empty() {
            continue;
        }
        let d = SetDiff::of(&sa, &sb);
        if d.changed {
            out.changed.push(role.name().to_owned());
        }
        out.markers.insert(role.name().to_owned(), d);
    }
    out.bos_eos = Pair::of(
        BosEos::of(a.template, a.bos, a.eos),
        BosEos::of(b.template, b.bos, b.eos),
    );
    if out.bos_eos.changed {
        out.changed.push("bos_eos".into());
    }
    out.syntax = Pair::of(
        adapt::implied_syntax(a.template),
        adapt::implied_syntax(b.template),
    );
    if out.syntax.changed {
        out.changed.push("syntax".into());
    }
    out
}

/// One rendered prompt of an exchange, as given to [`diff_exchange`].
#[derive(Debug, Clone)]
pub struct Rendered {
    /// The prompt, or why it could not be rendered (template error, server error).
    pub prompt: Result<String, String>,
    /// The prompt's tokens from a vocabulary (or a server's `/tokenize`), if available; else
    /// the marker-aware splitter is used.
    pub tokens: Option<Vec<DiffToken>>,
    /// BOS / EOS strings of this side, kept whole by the splitter and classified as such.
    pub bos: Option<String>,
    pub eos: Option<String>,
}

/// Summary of one side's render.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RenderStatus {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Prompt length in bytes.
    pub bytes: usize,
    /// Prompt length in diff tokens (vocab tokens or splitter pieces).
    pub tokens: usize,
}

/// Marker occurrences of one role in the two renders.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountDiff {
    /// Marker → occurrences in A's render.
    pub a: BTreeMap<String, usize>,
    /// Marker → occurrences in B's render.
    pub b: BTreeMap<String, usize>,
    /// Markers in A's render only.
    pub only_a: Vec<String>,
    /// Markers in B's render only.
    pub only_b: Vec<String>,
    /// Markers in both renders whose counts differ.
    pub count_changed: Vec<String>,
    pub changed: bool,
}

/// One schema-loss fact: rule id, tool, JSON Pointer of the parameter, message.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Loss {
    pub rule: String,
    pub tool: String,
    pub pointer: String,
    pub message: String,
}

/// Schema loss under each side; facts compared by (rule, tool, pointer).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchemaDiff {
    pub a: Vec<Loss>,
    pub b: Vec<Loss>,
    /// Lost under A but not under B.
    pub only_a: Vec<Loss>,
    /// Lost under B but not under A.
    pub only_b: Vec<Loss>,
    pub changed: bool,
}

/// The diff of one exchange.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExchangeDiff {
    /// Exchange id in the session (`null` for `--request`).
    pub id: Option<u64>,
    /// `openai` or `anthropic`.
    pub api: String,
    pub a: RenderStatus,
    pub b: RenderStatus,
    /// Both rendered and the prompts are byte-identical.
    pub identical: bool,
    /// Token-level diff (absent when either side failed to render).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<TokenDiff>,
    /// Role name → marker occurrences in each render (roles neither render uses omitted).
    pub markers: BTreeMap<String, CountDiff>,
    /// Turn-role sequence of each render (`system`, `user`, `model`, `tool`, `ipython`, …).
    pub turn_roles: Pair<Vec<String>>,
    pub schema: SchemaDiff,
    /// Replies of both servers to the re-sent request (`--server … --generate` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<ReplyDiff>,
    /// What changed: `render` (one side failed), `prompt`, `markers.<role>`, `turn_roles`,
    /// `schema`, and with `--generate` `reply.<field>` (`error`, `content`, `reasoning`,
    /// `tool_calls`, `finish_reason`).
    pub changed: Vec<String>,
}

/// One tool call of a reply: name and arguments (parsed JSON when they parse, else the raw
/// text as a JSON string), so key order and spacing do not count as a difference.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallSummary {
    pub name: String,
    pub arguments: Value,
}

/// The two replies to one re-sent request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReplyDiff {
    /// Why a side has no reply (HTTP or transport error), per side.
    pub error: Pair<Option<String>>,
    pub content: Pair<String>,
    pub reasoning: Pair<String>,
    pub tool_calls: Pair<Vec<CallSummary>>,
    /// OpenAI `finish_reason` / Anthropic `stop_reason`.
    pub finish_reason: Pair<Option<String>>,
    /// Names of the fields that differ.
    pub changed: Vec<String>,
}

/// Compares two replies (reassembled as [`crate::stream::message::AssistantMessage`]); `Err`
/// is why a side has none.
pub fn diff_replies(
    a: &Result<crate::stream::message::AssistantMessage, String>,
    b: &Result<crate::stream::message::AssistantMessage, String>,
) -> ReplyDiff {
    use crate::stream::message::AssistantMessage;
    let calls = |m: &AssistantMessage| -> Vec<CallSummary> {
        m.tool_calls
            .iter()
            .map(|c| CallSummary {
                name: c.name.clone(),
                arguments: serde_json::from_str(&c.arguments)
                    .unwrap_or_else(|_| Value::String(c.arguments.clone())),
            })
            .collect()
    };
    let empty = AssistantMessage::default();
    let (ma, mb) = (a.as_ref().unwrap_or(&empty), b.as_ref().unwrap_or(&empty));
    let mut d = ReplyDiff {
        error: Pair::of(a.as_ref().err().cloned(), b.as_ref().err().cloned()),
        content: Pair::of(ma.content.clone(), mb.content.clone()),
        reasoning: Pair::of(ma.reasoning.clone(), mb.reasoning.clone()),
        tool_calls: Pair::of(calls(ma), calls(mb)),
        finish_reason: Pair::of(ma.finish_reason.clone(), mb.finish_reason.clone()),
        changed: Vec::new(),
    };
    for (name, ch) in [
        ("error", d.error.changed),
        ("content", d.content.changed),
        ("reasoning", d.reasoning.changed),
        ("tool_calls", d.tool_calls.changed),
        ("finish_reason", d.finish_reason.changed),
    ] {
        if ch {
            d.changed.push(name.to_owned());
        }
    }
    d
}

impl ExchangeDiff {
    /// Attaches the reply comparison and records what changed as `reply.<field>`.
    pub fn with_reply(mut self, reply: ReplyDiff) -> ExchangeDiff {
        self.changed
            .extend(reply.changed.iter().map(|c| format!("reply.{c}")));
        self.reply = Some(reply);
        self
    }
}

fn losses(tools: Option<&Value>, prompt: &str) -> Vec<Loss> {
    let Some(tools) = tools else {
        return Vec::new();
    };
    let mut v: Vec<Loss> = crate::schema::loss::schema_loss(tools, prompt)
        .into_iter()
        .map(|f| Loss {
            rule: f.rule.id().to_owned(),
            tool: f.evidence.tool.clone().unwrap_or_default(),
            pointer: f.evidence.pointer.clone().unwrap_or_default(),
            message: f.message,
        })
        .collect();
    v.sort();
    v.dedup_by(|x, y| (&x.rule, &x.tool, &x.pointer) == (&y.rule, &y.tool, &y.pointer));
    v
}

/// Diffs one exchange's two renders. `tools` is the request's OpenAI `tools` array (for schema
/// loss). Pure.
pub fn diff_exchange(
    id: Option<u64>,
    api: &str,
    tools: Option<&Value>,
    a: &Rendered,
    b: &Rendered,
) -> ExchangeDiff {
    let toks = |r: &Rendered, p: &str| -> (Vec<DiffToken>, &'static str) {
        match &r.tokens {
            Some(t) => (t.clone(), "vocab"),
            None => {
                let extra: Vec<String> = r
                    .bos
                    .iter()
                    .chain(r.eos.iter())
                    .filter(|s| !s.is_empty())
                    .cloned()
                    .collect();
                (split_markers(p, &extra), "markers")
            }
        }
    };
    let status = |r: &Rendered, n: usize| match &r.prompt {
        Ok(p) => RenderStatus {
            ok: true,
            error: None,
            bytes: p.len(),
            tokens: n,
        },
        Err(e) => RenderStatus {
            ok: false,
            error: Some(e.clone()),
            bytes: 0,
            tokens: 0,
        },
    };
    let mut changed = Vec::new();
    let (pa, pb) = (r_prompt(a), r_prompt(b));
    let (ta, kind_a) = toks(a, pa);
    let (tb, kind_b) = toks(b, pb);
    let tokens = match (&a.prompt, &b.prompt) {
        (Ok(_), Ok(_)) => {
            let kind = if kind_a == kind_b { kind_a } else { "mixed" };
            Some(token_diff(&ta, &tb, kind))
        }
        _ => {
            changed.push("render".to_owned());
            None
        }
    };
    let identical = matches!((&a.prompt, &b.prompt), (Ok(x), Ok(y)) if x == y);
    if !identical && tokens.is_some() {
        changed.push("prompt".to_owned());
    }
    // markers used by the renders
    let ia = MarkerInventory::of(pa, false, a.bos.as_deref(), a.eos.as_deref());
    let ib = MarkerInventory::of(pb, false, b.bos.as_deref(), b.eos.as_deref());
    let mut markers = BTreeMap::new();
    for role in Role::ALL {
        let (ca, cb) = (ia.counts(role), ib.counts(role));
        if ca.is_empty() && cb.is_empty() {
            continue;
        }
        let only_a: Vec<String> = ca
            .keys()
            .filter(|k| !cb.contains_key(*k))
            .cloned()
            .collect();
        let only_b: Vec<String> = cb
            .keys()
            .filter(|k| !ca.contains_key(*k))
            .cloned()
            .collect();
        let count_changed: Vec<String> = ca
            .iter()
            .filter(|(k, n)| cb.get(*k).is_some_and(|m| m != *n))
            .map(|(k, _)| k.clone())
            .collect();
        let ch = !only_a.is_empty() || !only_b.is_empty() || !count_changed.is_empty();
        if ch && a.prompt.is_ok() && b.prompt.is_ok() {
            changed.push(format!("markers.{}", role.name()));
        }
        markers.insert(
            role.name().to_owned(),
            CountDiff {
                a: ca,
                b: cb,
                only_a,
                only_b,
                count_changed,
                changed: ch,
            },
        );
    }
    let turn_roles = Pair::of(markers::turn_roles(pa), markers::turn_roles(pb));
    if turn_roles.changed && a.prompt.is_ok() && b.prompt.is_ok() {
        changed.push("turn_roles".to_owned());
    }
    let (la, lb) = (
        if a.prompt.is_ok() {
            losses(tools, pa)
        } else {
            Vec::new()
        },
        if b.prompt.is_ok() {
            losses(tools, pb)
        } else {
            Vec::new()
        },
    );
    let k = |l: &Loss| (l.rule.clone(), l.tool.clone(), l.pointer.clone());
    let kb: BTreeSet<_> = lb.iter().map(k).collect();
    let ka: BTreeSet<_> = la.iter().map(k).collect();
    let only_a: Vec<Loss> = la.iter().filter(|l| !kb.contains(&k(l))).cloned().collect();
    let only_b: Vec<Loss> = lb.iter().filter(|l| !ka.contains(&k(l))).cloned().collect();
    let schema_changed = !only_a.is_empty() || !only_b.is_empty();
    if schema_changed {
        changed.push("schema".to_owned());
    }
    ExchangeDiff {
        id,
        api: api.to_owned(),
        a: status(a, ta.len()),
        b: status(b, tb.len()),
        identical,
        tokens,
        markers,
        turn_roles,
        schema: SchemaDiff {
            a: la,
            b: lb,
            only_a,
            only_b,
            changed: schema_changed,
        },
        reply: None,
        changed,
    }
}

fn r_prompt(r: &Rendered) -> &str {
    r.prompt.as_deref().unwrap_or("")
}

/// One side of a comparison, as reported.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SideInfo {
    /// What the user named (`--template` / `--server` argument).
    pub source: String,
    /// `template` or `server`.
    pub kind: String,
    /// Where the template came from (file path, `tokenizer_config.json`, GGUF, server props).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    /// Server `build_info` (`/props`), for `--server`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build_info: Option<String>,
    /// Server `chat_template_caps` (`/props`), for `--server`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat_template_caps: Option<Value>,
    /// Server model path (`/props` `model_path`), for `--server`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Render profile of a template side (`transformers`, `llama.cpp@11434`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
}

/// Differences between two servers' `/props`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PropsDiff {
    pub build_info: Pair<Option<String>>,
    /// Capability name → `[a, b]` for capabilities whose values differ.
    pub chat_template_caps: BTreeMap<String, [Value; 2]>,
    /// The `chat_template` strings differ.
    pub chat_template_changed: bool,
    /// Top-level `/props` fields only A's / only B's server reports (a newer build's new
    /// fields, e.g. `architecture` from build 11434 on), sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields_only_a: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields_only_b: Vec<String>,
    pub changed: bool,
}

impl PropsDiff {
    /// Compares two `/props` answers (llama.cpp tools/server, build 11434: `build_info`,
    /// `chat_template`, `chat_template_caps`).
    pub fn of(a: &Value, b: &Value) -> PropsDiff {
        let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
        let build_info = Pair::of(s(a, "build_info"), s(b, "build_info"));
        let mut caps = BTreeMap::new();
        let empty = serde_json::Map::new();
        let ca = a
            .get("chat_template_caps")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let cb = b
            .get("chat_template_caps")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        for k in ca.keys().chain(cb.keys()) {
            let (x, y) = (
                ca.get(k).cloned().unwrap_or(Value::Null),
                cb.get(k).cloned().unwrap_or(Value::Null),
            );
            if x != y {
                caps.insert(k.clone(), [x, y]);
            }
        }
        let chat_template_changed = s(a, "chat_template") != s(b, "chat_template");
        let keys = |v: &Value| -> std::collections::BTreeSet<String> {
            v.as_object()
                .map(|o| o.keys().cloned().collect())
                .unwrap_or_default()
        };
        let (ka, kb) = (keys(a), keys(b));
        let fields_only_a: Vec<String> = ka.difference(&kb).cloned().collect();
        let fields_only_b: Vec<String> = kb.difference(&ka).cloned().collect();
        let changed = build_info.changed
            || !caps.is_empty()
            || chat_template_changed
            || !fields_only_a.is_empty()
            || !fields_only_b.is_empty();
        PropsDiff {
            build_info,
            chat_template_caps: caps,
            chat_template_changed,
            fields_only_a,
            fields_only_b,
            changed,
        }
    }
}

/// Totals over all exchanges.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    pub exchanges: usize,
    /// Exchanges whose prompts are byte-identical.
    pub identical: usize,
    /// Exchanges with any change.
    pub differing: usize,
    /// Exchanges skipped (not a chat request, body not JSON), with reasons in `notes`.
    pub skipped: usize,
    pub render_errors_a: usize,
    pub render_errors_b: usize,
    /// Distinct (rule, tool, pointer) schema facts lost under A only / B only.
    pub schema_only_a: usize,
    pub schema_only_b: usize,
    /// Union of every exchange's `changed` and the structure's `changed` (`structure.<x>`),
    /// sorted.
    pub changed: Vec<String>,
}

/// The whole comparison (`toolscope diff --format json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiffReport {
    /// Always [`FORMAT`].
    pub format: String,
    /// `templates` or `servers`.
    pub mode: String,
    pub a: SideInfo,
    pub b: SideInfo,
    /// Structural diff of the template sources (absent when a server reported no template).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structure: Option<StructureDiff>,
    /// `/props` comparison, for `servers` mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub props: Option<PropsDiff>,
    pub exchanges: Vec<ExchangeDiff>,
    pub summary: Summary,
    /// Human-readable notes (skipped exchanges, tokenizer used).
    pub notes: Vec<String>,
}

impl DiffReport {
    /// Assembles a report and computes the summary.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        mode: &str,
        a: SideInfo,
        b: SideInfo,
        structure: Option<StructureDiff>,
        props: Option<PropsDiff>,
        exchanges: Vec<ExchangeDiff>,
        skipped: usize,
        notes: Vec<String>,
    ) -> DiffReport {
        let mut changed: BTreeSet<String> = BTreeSet::new();
        if let Some(s) = &structure {
            changed.extend(s.changed.iter().map(|c| format!("structure.{c}")));
        }
        if props.as_ref().is_some_and(|p| p.changed) {
            changed.insert("props".into());
        }
        let mut sa = BTreeSet::new();
        let mut sb = BTreeSet::new();
        for e in &exchanges {
            changed.extend(e.changed.iter().cloned());
            sa.extend(
                e.schema
                    .only_a
                    .iter()
                    .map(|l| (l.rule.clone(), l.tool.clone(), l.pointer.clone())),
            );
            sb.extend(
                e.schema
                    .only_b
                    .iter()
                    .map(|l| (l.rule.clone(), l.tool.clone(), l.pointer.clone())),
            );
        }
        let summary = Summary {
            exchanges: exchanges.len(),
            identical: exchanges.iter().filter(|e| e.identical).count(),
            differing: exchanges.iter().filter(|e| !e.changed.is_empty()).count(),
            skipped,
            render_errors_a: exchanges.iter().filter(|e| !e.a.ok).count(),
            render_errors_b: exchanges.iter().filter(|e| !e.b.ok).count(),
            schema_only_a: sa.len(),
            schema_only_b: sb.len(),
            changed: changed.into_iter().collect(),
        };
        DiffReport {
            format: FORMAT.into(),
            mode: mode.into(),
            a,
            b,
            structure,
            props,
            exchanges,
            summary,
            notes,
        }
    }

    /// True when anything differs (the CLI exits 1).
    pub fn has_differences(&self) -> bool {
        !self.summary.changed.is_empty()
    }
}

fn show(s: &str, max: usize) -> String {
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i >= max {
            out.push('…');
            break;
        }
        match c {
            '\n' => out.push('⏎'),
            '\t' => out.push('⇥'),
            c => out.push(c),
        }
    }
    out
}

fn list(v: &[String]) -> String {
    if v.is_empty() {
        "-".into()
    } else {
        v.join(" ")
    }
}

/// Plain-text rendering of a report for the terminal (no colour). Stable enough to read, not
/// to parse: use the JSON.
pub fn render_text(r: &DiffReport) -> String {
    let mut o = String::new();
    let side = |s: &SideInfo| {
        let mut t = s.source.clone();
        if let Some(e) = &s.engine
            && !s.source.starts_with(e.as_str())
        {
            let _ = write!(t, " [{e}]");
        }
        if let Some(b) = &s.build_info {
            let _ = write!(t, " (build {b})");
        }
        t
    };
    let _ = writeln!(o, "A: {}", side(&r.a));
    let _ = writeln!(o, "B: {}", side(&r.b));
    if let Some(p) = &r.props {
        text_props(&mut o, p);
    }
    if let Some(s) = &r.structure {
        text_structure(&mut o, s);
    }
    for e in &r.exchanges {
        text_exchange(&mut o, e);
    }
    let s = &r.summary;
    let _ = writeln!(
        o,
        "\n{} exchange(s): {} with identical prompts, {} differing (prompt, markers or reply), {} skipped; render errors A {} B {}; schema facts lost only under A {} / only under B {}",
        s.exchanges,
        s.identical,
        s.differing,
        s.skipped,
        s.render_errors_a,
        s.render_errors_b,
        s.schema_only_a,
        s.schema_only_b
    );
    if !s.changed.is_empty() {
        let _ = writeln!(o, "changed: {}", s.changed.join(", "));
    }
    for n in &r.notes {
        let _ = writeln!(o, "note: {n}");
    }
    o
}

/// [`render_text`]'s `/props` lines.
fn text_props(o: &mut String, p: &PropsDiff) {
    if p.build_info.changed {
        let _ = writeln!(o, "build_info: {:?} → {:?}", p.build_info.a, p.build_info.b);
    }
    for (k, [x, y]) in &p.chat_template_caps {
        let _ = writeln!(o, "chat_template_caps.{k}: {x} → {y}");
    }
    if p.chat_template_changed {
        let _ = writeln!(o, "chat_template: differs");
    }
    if !p.fields_only_a.is_empty() {
        let _ = writeln!(
            o,
            "/props fields only A has: {}",
            p.fields_only_a.join(", ")
        );
    }
    if !p.fields_only_b.is_empty() {
        let _ = writeln!(
            o,
            "/props fields only B has: {}",
            p.fields_only_b.join(", ")
        );
    }
}

/// [`render_text`]'s structure section (template sources).
fn text_structure(o: &mut String, s: &StructureDiff) {
    let _ = writeln!(
        o,
        "\n== structure (template sources){}",
        if s.identical_source {
            ": identical"
        } else {
            ""
        }
    );
    for (role, d) in &s.markers {
        if d.changed {
            let _ = writeln!(
                o,
                "  {role:<17} A only: {}   B only: {}",
                list(&d.only_a),
                list(&d.only_b)
            );
        } else {
            let _ = writeln!(o, "  {role:<17} same: {}", list(&d.a));
        }
    }
    let be = |b: &BosEos| {
        format!(
            "bos_token {} / eos_token {}",
            if b.prints_bos_token {
                "printed"
            } else {
                "not printed"
            },
            if b.prints_eos_token {
                "printed"
            } else {
                "not printed"
            }
        )
    };
    let _ = writeln!(
        o,
        "  {:<17} A: {}   B: {}{}",
        "bos/eos",
        be(&s.bos_eos.a),
        be(&s.bos_eos.b),
        if s.bos_eos.changed { "  (changed)" } else { "" }
    );
    let sy = |x: &Option<String>| x.clone().unwrap_or_else(|| "none".into());
    let _ = writeln!(
        o,
        "  {:<17} A: {}   B: {}{}",
        "tool-call syntax",
        sy(&s.syntax.a),
        sy(&s.syntax.b),
        if s.syntax.changed { "  (changed)" } else { "" }
    );
}

/// [`render_text`]'s section of one exchange.
fn text_exchange(o: &mut String, e: &ExchangeDiff) {
    let id =
        e.id.map(|i| format!("exchange {i}"))
            .unwrap_or_else(|| "request".into());
    let _ = writeln!(o, "\n== {id} ({})", e.api);
    for (n, st) in [("A", &e.a), ("B", &e.b)] {
        match &st.error {
            Some(err) => {
                let _ = writeln!(o, "  {n}: render failed: {err}");
            }
            None => {
                let _ = writeln!(o, "  {n}: {} bytes, {} tokens", st.bytes, st.tokens);
            }
        }
    }
    if e.identical {
        let _ = writeln!(o, "  prompts identical");
    }
    text_tokens(o, e);
    for (role, d) in e.markers.iter().filter(|(_, d)| d.changed) {
        let cnt = |m: &BTreeMap<String, usize>| {
            m.iter()
                .map(|(k, n)| format!("{k}×{n}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let _ = writeln!(
            o,
            "  markers {role}: A {}   B {}",
            if d.a.is_empty() {
                "-".into()
            } else {
                cnt(&d.a)
            },
            if d.b.is_empty() {
                "-".into()
            } else {
                cnt(&d.b)
            }
        );
    }
    if e.turn_roles.changed {
        let _ = writeln!(
            o,
            "  turns: A [{}]   B [{}]",
            e.turn_roles.a.join(", "),
            e.turn_roles.b.join(", ")
        );
    }
    if let Some(rp) = &e.reply {
        text_reply(o, rp);
    }
    for (n, v) in [("A", &e.schema.a), ("B", &e.schema.b)] {
        for l in v {
            let only = if n == "A" {
                e.schema.only_a.contains(l)
            } else {
                e.schema.only_b.contains(l)
            };
            let _ = writeln!(
                o,
                "  schema under {n}{}: {} {} {} — {}",
                if only { " only" } else { "" },
                l.rule,
                l.tool,
                l.pointer,
                l.message
            );
        }
    }
}

/// [`render_text`]'s token difference of one exchange (at most 40 changes).
fn text_tokens(o: &mut String, e: &ExchangeDiff) {
    if let Some(t) = &e.tokens
        && !t.is_identical()
    {
        let _ = writeln!(
            o,
            "  tokens ({}): {} equal, {} only in A, {} only in B",
            t.tokenizer, t.equal, t.deleted, t.inserted
        );
        for (shown, op) in t.ops.iter().filter(|op| op.tag != OpTag::Equal).enumerate() {
            if shown == 40 {
                let _ = writeln!(o, "    … more changes in the JSON output");
                break;
            }
            let _ = writeln!(o, "    @ A+{} B+{}", op.a_offset, op.b_offset);
            if let Some(x) = &op.a_text {
                let _ = writeln!(o, "    - {}", show(x, 160));
            }
            if let Some(x) = &op.b_text {
                let _ = writeln!(o, "    + {}", show(x, 160));
            }
        }
    }
}

/// [`render_text`]'s two replies of one exchange.
fn text_reply(o: &mut String, rp: &ReplyDiff) {
    let side = |err: &Option<String>,
                reasoning: &str,
                content: &str,
                calls: &[CallSummary],
                fin: &Option<String>| match err {
        Some(x) => format!("error: {x}"),
        None => format!(
            "finish {} · calls [{}] · {}{}",
            fin.as_deref().unwrap_or("-"),
            calls
                .iter()
                .map(|c| format!("{}({})", c.name, c.arguments))
                .collect::<Vec<_>>()
                .join(", "),
            if reasoning.is_empty() {
                String::new()
            } else {
                format!("reasoning {} · ", show(reasoning, 60))
            },
            show(content, 100)
        ),
    };
    let _ = writeln!(
        o,
        "  reply A: {}",
        side(
            &rp.error.a,
            &rp.reasoning.a,
            &rp.content.a,
            &rp.tool_calls.a,
            &rp.finish_reason.a
        )
    );
    let _ = writeln!(
        o,
        "  reply B: {}",
        side(
            &rp.error.b,
            &rp.reasoning.b,
            &rp.content.b,
            &rp.tool_calls.b,
            &rp.finish_reason.b
        )
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::message::{AssistantMessage, CallRecord};

    fn call(args: &str) -> AssistantMessage {
        AssistantMessage {
            tool_calls: vec![CallRecord {
                index: Some(0),
                id: None,
                name: "f".into(),
                arguments: args.into(),
            }],
            finish_reason: Some("tool_calls".into()),
            ..AssistantMessage::default()
        }
    }

    #[test]
    fn replies_compare_arguments_as_json() {
        let d = diff_replies(
            &Ok(call(r#"{"a": 1, "b": 2}"#)),
            &Ok(call(r#"{"b":2,"a":1}"#)),
        );
        assert!(d.changed.is_empty(), "{:?}", d.changed);
        let d = diff_replies(&Ok(call(r#"{"a": 1}"#)), &Ok(call(r#"{"a": 1}}"#)));
        assert_eq!(d.changed, ["tool_calls"]);
        assert_eq!(
            d.tool_calls.b[0].arguments,
            Value::String(r#"{"a": 1}}"#.into())
        );
        let d = diff_replies(&Ok(call("{}")), &Err("HTTP 500".into()));
        assert_eq!(d.changed, ["error", "tool_calls", "finish_reason"]);
    }

    #[test]
    fn props_caps_only_differences() {
        let a = serde_json::json!({"build_info": "b1", "chat_template": "x", "chat_template_caps": {"supports_tools": true, "supports_system_role": true}});
        let b = serde_json::json!({"build_info": "b1", "chat_template": "y", "chat_template_caps": {"supports_tools": false, "supports_system_role": true}});
        let d = PropsDiff::of(&a, &b);
        assert!(!d.build_info.changed);
        assert!(d.chat_template_changed);
        assert_eq!(
            d.chat_template_caps.keys().collect::<Vec<_>>(),
            ["supports_tools"]
        );
        assert_eq!(
            d.chat_template_caps["supports_tools"],
            [Value::Bool(true), Value::Bool(false)]
        );
    }
}
