//! Schema-loss detection: which facts of each tool's parameter schema never reached a rendered
//! prompt. Template-agnostic: it works on the rendered text alone, for templates that dump JSON
//! (`tojson`: Hermes, Qwen, Llama 3.x) and for custom printers (Gemma 4's
//! `key:{description:<|"|>…<|"|>,type:<|"|>STRING<|"|>}`, Functionary's TypeScript, XML lists).
//!
//! How a fact is looked for:
//! 1. Every description string of every tool (the author's prose) is masked out of the prompt,
//!    so "how many" or "the order number" never counts as a printed type. Text a flattening note
//!    added to a description is not masked, so a note does count.
//! 2. A list of quoted type names sitting inside a quoted slot (`<|"|>['STRING', 'NUMBER']<|"|>`,
//!    `"['string', 'null']"`) is a stringified host-language list — the template applied a string
//!    filter (`upper`) to a type list — and is masked too: a model does not get a type from it.
//! 3. Each tool's declaration region is located: the word-bounded occurrences of its name, each
//!    taken with the brace block that follows it (`name{…}`, `name = (_: {…`) or, failing that,
//!    the innermost brace block enclosing it (`{"name": "x", …}`), clipped at the next tool; the
//!    occurrence whose region holds most of the tool's parameter names wins.
//! 4. Each parameter is located inside its parent's region: the occurrence of its name written
//!    like a key (followed by `:`, `=`, `{`, `(`, `?`, `<`, `>`, `|` after optional quotes) at the
//!    shallowest brace depth; its region is the brace block that follows the key, or else the
//!    text up to the next sibling.
//! 5. Facts are words in that region: type names and their synonyms (`integer`/`int`,
//!    `boolean`/`bool`, `array`/`list`/`[]`, `null`/`none`/`nullable`), enum values, nested
//!    property names, `required`; descriptions are looked for verbatim (or JSON-escaped) in the
//!    tool's region.
//!
//! Pointers in findings ([`crate::finding::Evidence::pointer`]) are JSON Pointers relative to the
//! tool's parameter schema (`function.parameters`, `input_schema`, `inputSchema`), e.g.
//! `/properties/quantity`, `/properties/address/properties/city`, `/properties/tags/items`,
//! `/properties/note/anyOf/1`, `/properties/priority/enum`. A tool missing from the prompt is
//! reported at pointer `""` (the whole schema).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::tools::{escape_token, locate_tools};
use crate::finding::{Evidence, Finding, Pane, Rule};

/// A kind of schema fact.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FactKind {
    /// The parameter (its name) appears at all.
    Name,
    /// Its type (or, for a union, at least one alternative's type).
    Type,
    /// One alternative of an `anyOf`/`oneOf`/type list (the others reached the prompt).
    Alternative,
    /// That `null` is allowed (`nullable: true`, a `null` alternative).
    Nullable,
    /// One `enum`/`const` value.
    EnumValue,
    /// The `required` list of an object.
    Required,
    /// The description.
    Description,
    /// A `$ref` target (the referenced definition is shown and named).
    Ref,
}

impl FactKind {
    /// Loss weight used to rank flattening strategies (higher = worse to lose).
    pub fn weight(self) -> u32 {
        match self {
            FactKind::Name => 5,
            FactKind::Type | FactKind::Ref => 4,
            FactKind::Alternative | FactKind::Nullable => 2,
            FactKind::EnumValue | FactKind::Required | FactKind::Description => 1,
        }
    }

    /// Short label (`type`, `alternative`, …) for tables.
    pub fn label(self) -> &'static str {
        match self {
            FactKind::Name => "name",
            FactKind::Type => "type",
            FactKind::Alternative => "alternative",
            FactKind::Nullable => "nullable",
            FactKind::EnumValue => "enum",
            FactKind::Required => "required",
            FactKind::Description => "description",
            FactKind::Ref => "ref",
        }
    }
}

/// A candidate occurrence of a parameter in the prompt: its rank (lost weight, ties), its
/// byte offset, and the parameters judged there.
type BestOccurrence = ((u32, u32, u32), usize, Vec<ParamLoss>);

/// One fact and whether it reached the prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FactCheck {
    pub kind: FactKind,
    /// Pointer of the fact inside the tool's parameter schema (e.g. `/properties/note/anyOf/1`).
    pub pointer: String,
    /// What was expected, e.g. `string`, `"express"`, `string | number`.
    pub expected: String,
    /// True when the prompt carries it.
    pub reached: bool,
    /// Why it counts as lost, when it does (e.g. "printed as a stringified list ['STRING', 'NUMBER']").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// One parameter (at any depth; array `items` count as a parameter named `[]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParamLoss {
    /// Pointer of the parameter's schema inside the tool's parameters (`/properties/quantity`).
    pub pointer: String,
    /// The property name (`[]` for array items).
    pub name: String,
    /// Byte range `[start, end)` of the parameter's region in the prompt, when found.
    pub span: Option<(usize, usize)>,
    /// Every fact checked, reached or not.
    pub facts: Vec<FactCheck>,
}

impl ParamLoss {
    /// The facts that did not reach the prompt.
    pub fn lost(&self) -> impl Iterator<Item = &FactCheck> {
        self.facts.iter().filter(|f| !f.reached)
    }
}

/// One tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolLoss {
    /// The tool's name.
    pub tool: String,
    /// 0-based index in the tool list.
    pub index: usize,
    /// Byte range `[start, end)` of the tool's declaration in the prompt; `None` when the prompt
    /// does not contain the tool.
    pub span: Option<(usize, usize)>,
    /// Parameters in schema order, depth-first.
    pub params: Vec<ParamLoss>,
}

/// Per-parameter loss of every tool (for the TUI's Schema pane and for strategy ranking).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct LossReport {
    pub tools: Vec<ToolLoss>,
}

impl LossReport {
    /// Weighted count of lost facts ([`FactKind::weight`]); 0 = nothing lost. A tool missing
    /// from the prompt counts as every one of its facts lost.
    pub fn score(&self) -> u32 {
        self.lost_facts().map(|(_, _, f)| f.kind.weight()).sum()
    }

    /// Every lost fact with its tool and parameter.
    pub fn lost_facts(&self) -> impl Iterator<Item = (&ToolLoss, &ParamLoss, &FactCheck)> {
        self.tools.iter().flat_map(|t| {
            t.params
                .iter()
                .flat_map(move |p| p.lost().map(move |f| (t, p, f)))
        })
    }

    /// True when the fact kind was lost anywhere.
    pub fn lost_kind(&self, kind: FactKind) -> bool {
        self.lost_facts().any(|(_, _, f)| f.kind == kind)
    }

    /// True when some fact of this kind was checked at all.
    pub fn has_kind(&self, kind: FactKind) -> bool {
        self.tools.iter().any(|t| {
            t.params
                .iter()
                .any(|p| p.facts.iter().any(|f| f.kind == kind))
        })
    }

    /// The findings (rules `schema.type_lost`, `schema.alternative_dropped`,
    /// `schema.ref_unresolved`). Lost descriptions and `required` lists appear only in the
    /// report (no rule id covers them).
    pub fn findings(&self, rendered: &str) -> Vec<Finding> {
        let mut out = Vec::new();
        for t in &self.tools {
            if t.span.is_none() {
                out.extend(tool_absent(t, rendered));
                continue;
            }
            // The tool's name is in the prompt (a tool list, or only the agent's own prose)
            // but none of its top-level parameters is: one finding for the tool, not one per
            // parameter.
            if let Some(f) = no_parameter_reached(t, rendered) {
                out.push(f);
                continue;
            }
            for p in &t.params {
                param_findings(t, p, rendered, &mut out);
            }
        }
        out
    }
}

/// A tool whose name is not in the prompt: one finding when it has facts to lose.
fn tool_absent(t: &ToolLoss, rendered: &str) -> Option<Finding> {
    if !t.params.iter().any(|p| !p.facts.is_empty()) {
        return None;
    }
    Some(finding(
        Rule::SchemaTypeLost,
        &t.tool,
        "",
        None,
        rendered,
        format!(
            "tool `{}` does not appear in the rendered prompt: none of its parameter types reach the model",
            t.tool
        ),
        "this template does not print tools (or prints them elsewhere); use a template with tool support",
    ))
}

/// The tool's name is in the prompt but none of its (several) top-level parameters is: one
/// finding for the tool.
fn no_parameter_reached(t: &ToolLoss, rendered: &str) -> Option<Finding> {
    let top: Vec<&ParamLoss> = t
        .params
        .iter()
        .filter(|p| !p.name.is_empty() && p.pointer.matches("/properties/").count() == 1)
        .collect();
    if top.len() > 1
        && top.iter().all(|p| {
            p.facts
                .iter()
                .any(|f| f.kind == FactKind::Name && !f.reached)
        })
    {
        let names: Vec<&str> = top.iter().map(|p| p.name.as_str()).collect();
        return Some(finding(
            Rule::SchemaTypeLost,
            &t.tool,
            "",
            t.span,
            rendered,
            format!(
                "none of the {} parameters of `{}` ({}) reached the prompt: the template never printed this tool's parameters",
                names.len(),
                t.tool,
                names.join(", ")
            ),
            "use a template that prints tool parameters (the model's own tool-calling template)",
        ));
    }
    None
}

/// The findings for one parameter's lost facts: its name (alone: nothing else can reach), an
/// unresolved `$ref`, its type, dropped alternatives (when the type itself survived) and
/// dropped enum values.
fn param_findings(t: &ToolLoss, p: &ParamLoss, rendered: &str, out: &mut Vec<Finding>) {
    let lost: Vec<&FactCheck> = p.lost().collect();
    if lost.is_empty() {
        return;
    }
    let label = if p.name == "[]" {
        format!("items of `{}`", parent_name(&p.pointer))
    } else {
        format!("parameter `{}`", p.name)
    };
    if let Some(f) = lost.iter().find(|f| f.kind == FactKind::Name) {
        out.push(finding(
            Rule::SchemaTypeLost,
            &t.tool,
            &f.pointer,
            p.span,
            rendered,
            format!("{label} of `{}` never reached the prompt (the template skipped it)", t.tool),
            "rename the parameter or flatten the schema so the template prints it (toolscope flatten --template)",
        ));
        return;
    }
    if let Some(f) = lost.iter().find(|f| f.kind == FactKind::Ref) {
        out.push(finding(
            Rule::SchemaRefUnresolved,
            &t.tool,
            &f.pointer,
            p.span,
            rendered,
            format!(
                "{label} of `{}` is a `$ref` to {} that the prompt never resolves{}",
                t.tool,
                f.expected,
                f.detail
                    .as_deref()
                    .map(|d| format!(" ({d})"))
                    .unwrap_or_default()
            ),
            "inline the reference: toolscope flatten",
        ));
    }
    if let Some(f) = lost.iter().find(|f| f.kind == FactKind::Type) {
        let also_null = lost.iter().any(|x| x.kind == FactKind::Nullable);
        out.push(finding(
            Rule::SchemaTypeLost,
            &t.tool,
            &f.pointer,
            p.span,
            rendered,
            format!(
                "{label} of `{}`: declared type {}{} never reached the prompt{}",
                t.tool,
                f.expected,
                if also_null { " (nullable)" } else { "" },
                f.detail.as_deref().map(|d| format!(": {d}")).unwrap_or_default()
            ),
            "flatten the schema for this template: toolscope flatten --template SRC picks a rewrite it can print",
        ));
    }
    let type_lost = lost.iter().any(|f| f.kind == FactKind::Type);
    for f in lost
        .iter()
        .filter(|f| matches!(f.kind, FactKind::Alternative | FactKind::Nullable))
    {
        if type_lost {
            continue;
        }
        out.push(finding(
            Rule::SchemaAlternativeDropped,
            &t.tool,
            &f.pointer,
            p.span,
            rendered,
            format!(
                "{label} of `{}`: the alternative {} never reached the prompt; the model will not produce it",
                t.tool, f.expected
            ),
            "write the alternatives into the description (toolscope flatten --strategy first-type-with-note)",
        ));
    }
    let enums: Vec<&FactCheck> = lost
        .iter()
        .filter(|f| f.kind == FactKind::EnumValue)
        .copied()
        .collect();
    if !enums.is_empty() {
        let vals: Vec<&str> = enums.iter().map(|f| f.expected.as_str()).collect();
        let ptr = enums[0]
            .pointer
            .rsplit_once('/')
            .map(|(a, _)| a.to_string())
            .unwrap_or_default();
        out.push(finding(
            Rule::SchemaAlternativeDropped,
            &t.tool,
            &ptr,
            p.span,
            rendered,
            format!(
                "{label} of `{}`: allowed value{} {} never reached the prompt",
                t.tool,
                if vals.len() == 1 { "" } else { "s" },
                vals.join(", ")
            ),
            "list the allowed values in the description",
        ));
    }
}

fn parent_name(pointer: &str) -> String {
    let parts: Vec<&str> = pointer.split('/').collect();
    parts
        .iter()
        .rev()
        .skip(1)
        .find(|p| !p.is_empty() && **p != "items" && **p != "properties")
        .map(|s| s.to_string())
        .unwrap_or_default()
}

fn finding(
    rule: Rule,
    tool: &str,
    pointer: &str,
    span: Option<(usize, usize)>,
    rendered: &str,
    message: String,
    hint: &str,
) -> Finding {
    let excerpt = span.map(|(s, e)| excerpt(rendered, s, e));
    Finding::new(rule, message, hint).with_evidence(Evidence {
        pane: Some(Pane::Schema),
        tool: Some(tool.to_string()),
        pointer: Some(pointer.to_string()),
        offset: span.map(|s| s.0),
        excerpt,
        ..Evidence::default()
    })
}

fn excerpt(text: &str, s: usize, e: usize) -> String {
    let e = e.min(text.len()).min(s + 160);
    let mut end = e;
    while end > s && !text.is_char_boundary(end) {
        end -= 1;
    }
    if !text.is_char_boundary(s) {
        return String::new();
    }
    let mut x = text[s..end].to_string();
    if end < e || e < text.len() && e - s >= 160 {
        x.push('…');
    }
    x
}

/// Schema-loss findings for `tools` (any shape [`super::tools::locate_tools`] accepts — an
/// OpenAI/Anthropic request body works too) against the prompt `rendered` by a chat template.
/// Rules: `schema.type_lost`, `schema.alternative_dropped`, `schema.ref_unresolved`; evidence
/// pane Schema, the tool name, a pointer relative to the tool's parameter schema and the byte
/// offset of the parameter in the prompt. A document without tools yields no findings.
pub fn schema_loss(tools: &Value, rendered: &str) -> Vec<Finding> {
    loss_report(tools, rendered).findings(rendered)
}

/// The per-parameter report behind [`schema_loss`].
pub fn loss_report(tools: &Value, rendered: &str) -> LossReport {
    let Ok(list) = locate_tools(tools) else {
        return LossReport::default();
    };
    // Descriptions of every tool, longest first, are masked.
    let mut descs: Vec<String> = Vec::new();
    for t in &list.tools {
        if let Some(d) = &t.description {
            descs.push(d.clone());
        }
        if let Some(s) = list.schema(tools, t) {
            collect_descriptions(s, &mut descs, 0);
        }
    }
    let masked = Masked::new(rendered, &descs);
    let names: Vec<&str> = list.tools.iter().map(|t| t.name.as_str()).collect();

    // Locate each tool.
    let mut candidates: Vec<Vec<(usize, (usize, usize))>> = Vec::new();
    for t in &list.tools {
        let schema = list.schema(tools, t);
        let params: Vec<String> = schema
            .and_then(|s| s.get("properties"))
            .and_then(Value::as_object)
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default();
        candidates.push(if t.name.is_empty() {
            Vec::new()
        } else {
            masked.locate_tool(&t.name, &params)
        });
    }
    // Other tools' regions are clipped at each tool's first candidate.
    let positions: Vec<Option<(usize, (usize, usize))>> =
        candidates.iter().map(|c| c.first().copied()).collect();
    let mut report = LossReport::default();
    for (i, t) in list.tools.iter().enumerate() {
        let clip = |(pos, (s, e)): (usize, (usize, usize))| {
            // Clip at other tools' name positions.
            let mut s = s;
            let mut e = e;
            for (j, o) in positions.iter().enumerate() {
                if j == i || names[j] == t.name {
                    continue;
                }
                if let Some((op, _)) = o {
                    if *op > pos && *op < e {
                        e = *op;
                    }
                    if *op < pos && *op >= s {
                        s = pos;
                    }
                }
            }
            (s, e)
        };
        // Of the tied occurrences, the one whose region carries the most facts wins (ties:
        // the first), as for parameters in `object_props`.
        let span = match (list.schema(tools, t), candidates[i].len()) {
            (Some(schema), n) if n > 1 => {
                let mut best: Option<(u32, (usize, usize))> = None;
                for &c in &candidates[i] {
                    let region = clip(c);
                    let cx = Check {
                        m: &masked,
                        root: schema,
                        tool_span: Some(region),
                    };
                    let mut tmp = Vec::new();
                    cx.object_props(schema, "", region, &mut tmp, 0);
                    let lost: u32 = tmp
                        .iter()
                        .flat_map(|p| p.lost())
                        .map(|f| f.kind.weight())
                        .sum();
                    if best.is_none_or(|(bl, _)| lost < bl) {
                        best = Some((lost, region));
                    }
                }
                best.map(|(_, r)| r)
            }
            _ => positions[i].map(clip),
        };
        let mut tl = ToolLoss {
            tool: t.name.clone(),
            index: t.index,
            span,
            params: Vec::new(),
        };
        if let Some(schema) = list.schema(tools, t) {
            let cx = Check {
                m: &masked,
                root: schema,
                tool_span: span,
            };
            match span {
                Some(region) => {
                    cx.object_props(schema, "", region, &mut tl.params, 0);
                    // The top-level `required` list.
                    if let Some(req) = schema
                        .get("required")
                        .and_then(Value::as_array)
                        .filter(|a| !a.is_empty())
                    {
                        let reached =
                            masked.any_word(REQUIRED_WORDS, region) || cx.optional_marker(region);
                        let names: Vec<&str> = req.iter().filter_map(Value::as_str).collect();
                        tl.params.push(ParamLoss {
                            pointer: String::new(),
                            name: String::new(),
                            span: Some(region),
                            facts: vec![FactCheck {
                                kind: FactKind::Required,
                                pointer: "/required".into(),
                                expected: names.join(", "),
                                reached,
                                detail: None,
                            }],
                        });
                    }
                }
                None => cx.all_lost(schema, "", &mut tl.params, 0),
            }
        }
        report.tools.push(tl);
    }
    report
}

fn collect_descriptions(v: &Value, out: &mut Vec<String>, depth: usize) {
    if depth > 64 {
        return;
    }
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                if k == "description" {
                    if let Value::String(s) = x {
                        out.push(s.clone());
                    }
                } else if !matches!(k.as_str(), "enum" | "const" | "default" | "examples") {
                    collect_descriptions(x, out, depth + 1);
                }
            }
        }
        Value::Array(a) => a
            .iter()
            .for_each(|x| collect_descriptions(x, out, depth + 1)),
        _ => {}
    }
}

/// The prompt with descriptions and stringified type lists blanked (same byte offsets).
struct Masked<'a> {
    orig: &'a str,
    text: String,
    /// `text` ASCII-lowercased (same offsets), for case-insensitive search.
    lower: String,
    /// `depth[i]` = unclosed `{` in `text[..i]`.
    depth: Vec<i32>,
    /// Stringified lists found, as (start, end).
    reprs: Vec<(usize, usize)>,
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80
}

/// Replaces bytes `[s, e)` with spaces (`s`, `e` are char boundaries, so UTF-8 stays valid).
fn blank(buf: &mut [u8], s: usize, e: usize) {
    let e = e.min(buf.len());
    for b in &mut buf[s.min(e)..e] {
        *b = b' ';
    }
}

impl<'a> Masked<'a> {
    fn new(orig: &'a str, descs: &[String]) -> Self {
        let mut buf = orig.as_bytes().to_vec();
        let mut ds: Vec<String> = Vec::new();
        for d in descs {
            let d = d.trim();
            if d.len() < 3 {
                continue;
            }
            ds.push(d.to_string());
            let esc = serde_json::to_string(d).unwrap_or_default();
            let esc = esc.trim_matches('"').to_string();
            if esc != d {
                ds.push(esc);
            }
        }
        ds.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        ds.dedup();
        for d in &ds {
            for (s, _) in orig.match_indices(d.as_str()) {
                blank(&mut buf, s, s + d.len());
            }
        }
        let masked = String::from_utf8(buf).unwrap_or_else(|_| orig.to_string());
        let reprs = find_stringified_lists(&masked);
        let mut buf = masked.into_bytes();
        for (s, e) in &reprs {
            blank(&mut buf, *s, *e);
        }
        let text = String::from_utf8(buf).unwrap_or_else(|_| orig.to_string());
        let lower = text.to_ascii_lowercase();
        let mut depth = Vec::with_capacity(text.len() + 1);
        let mut d = 0i32;
        depth.push(0);
        for &c in text.as_bytes() {
            if c == b'{' {
                d += 1;
            } else if c == b'}' {
                d -= 1;
            }
            depth.push(d);
        }
        Masked {
            orig,
            text,
            lower,
            depth,
            reprs,
        }
    }

    fn bytes(&self) -> &[u8] {
        self.text.as_bytes()
    }

    /// Word-bounded occurrences of `w` in `[s, e)`; `ci` = ASCII case-insensitive.
    fn words(&self, w: &str, s: usize, e: usize, ci: bool) -> Vec<usize> {
        let b = self.bytes();
        let wb = w.as_bytes();
        let mut out = Vec::new();
        let e = e.min(b.len());
        if wb.is_empty() || s >= e {
            return out;
        }
        let (hay, needle) = if ci {
            (self.lower.as_str(), w.to_ascii_lowercase())
        } else {
            (self.text.as_str(), w.to_string())
        };
        let (mut s, mut e) = (s, e);
        while !hay.is_char_boundary(s) {
            s += 1;
        }
        while !hay.is_char_boundary(e) {
            e -= 1;
        }
        if s >= e {
            return out;
        }
        for (k, _) in hay[s..e].match_indices(needle.as_str()) {
            let i = s + k;
            let before_ok = i == 0 || !is_word(wb[0]) || !is_word(b[i - 1]);
            let j = i + wb.len();
            let after_ok = j >= b.len() || !is_word(wb[wb.len() - 1]) || !is_word(b[j]);
            if before_ok && after_ok {
                out.push(i);
            }
        }
        out
    }

    fn any_word(&self, ws: &[&str], r: (usize, usize)) -> bool {
        ws.iter().any(|w| !self.words(w, r.0, r.1, true).is_empty())
    }

    /// `[start, end)` of the brace block starting at `open` (a `{`), or to the end of text.
    fn block(&self, open: usize) -> (usize, usize) {
        let b = self.bytes();
        let mut depth = 0usize;
        for (i, &c) in b.iter().enumerate().skip(open) {
            if c == b'{' {
                depth += 1;
            } else if c == b'}' {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return (open, i + 1);
                }
            }
        }
        (open, b.len())
    }

    /// A `{` right after position `p` (within 16 bytes, same line), if any.
    fn brace_after(&self, p: usize) -> Option<usize> {
        let b = self.bytes();
        for (k, &c) in b.iter().enumerate().skip(p).take(16) {
            if c == b'{' {
                return Some(k);
            }
            if c == b'\n' || c == b'}' || c == b',' || c == b';' {
                return None;
            }
        }
        None
    }

    /// Innermost `{…}` enclosing `p`.
    fn enclosing(&self, p: usize) -> Option<(usize, usize)> {
        let b = self.bytes();
        let mut depth = 0usize;
        let mut i = p;
        while i > 0 {
            i -= 1;
            match b[i] {
                b'}' => depth += 1,
                b'{' if depth == 0 => return Some(self.block(i)),
                b'{' => depth -= 1,
                _ => {}
            }
        }
        None
    }

    /// The occurrences of tool `name` whose region holds the most of its parameter names, in
    /// prompt order (at most [`MAX_CANDIDATES`]); empty when the name never occurs. A call
    /// example in a message ties with the declaration; the caller judges each by its facts.
    fn locate_tool(&self, name: &str, params: &[String]) -> Vec<(usize, (usize, usize))> {
        let cands = self.words(name, 0, self.text.len(), false);
        let mut best: Vec<(usize, usize, (usize, usize))> = Vec::new();
        for c in cands {
            let region = if let Some(o) = self.brace_after(c + name.len()) {
                let (_, e) = self.block(o);
                (c, e)
            } else if let Some(r) = self.enclosing(c) {
                r
            } else {
                (c, self.text.len())
            };
            let score = params
                .iter()
                .filter(|p| !self.words(p, region.0, region.1, false).is_empty())
                .count();
            match best.first() {
                Some((bs, _, _)) if score < *bs => {}
                Some((bs, _, _)) if score == *bs => best.push((score, c, region)),
                _ => best = vec![(score, c, region)],
            }
        }
        best.truncate(MAX_CANDIDATES);
        best.into_iter().map(|(_, c, r)| (c, r)).collect()
    }

    /// Occurrences of property `name` inside `r`: the key-like ones (all of them when none is
    /// key-like), shallowest brace depth first.
    fn key_candidates(&self, name: &str, r: (usize, usize)) -> Vec<usize> {
        let occ = self.words(name, r.0, r.1, false);
        let keyed: Vec<usize> = occ
            .iter()
            .copied()
            .filter(|p| self.keylike(p + name.len()))
            .collect();
        let mut c = if keyed.is_empty() { occ } else { keyed };
        c.sort_by_key(|p| (self.depth[*p], *p));
        c.truncate(MAX_CANDIDATES);
        c
    }

    /// The first key-like occurrence of `name` in `r` at the shallowest depth.
    fn locate_key(&self, name: &str, r: (usize, usize)) -> Option<usize> {
        self.key_candidates(name, r).first().copied()
    }

    /// Region of a parameter whose key is at `at`: the brace block after the key (plus a
    /// trailing `[]`, TypeScript's array mark), else the text up to the next sibling key.
    fn param_region(
        &self,
        name: &str,
        at: usize,
        r: (usize, usize),
        siblings: &[usize],
    ) -> (usize, usize) {
        match self.brace_after(at + name.len()) {
            Some(o) => {
                let (_, mut e) = self.block(o);
                while self.bytes()[e.min(self.text.len())..].starts_with(b"[]") {
                    e += 2;
                }
                (at, e.min(r.1))
            }
            None => {
                let next = siblings
                    .iter()
                    .copied()
                    .filter(|a| *a > at)
                    .min()
                    .unwrap_or(r.1);
                (at, next.min(r.1))
            }
        }
    }

    fn keylike(&self, mut i: usize) -> bool {
        let b = self.bytes();
        loop {
            if b[i.min(b.len())..].starts_with(b"<|\"|>") {
                i += 5;
                continue;
            }
            match b.get(i) {
                Some(b'"' | b'\'' | b'`' | b'*') => i += 1,
                _ => break,
            }
        }
        while matches!(b.get(i), Some(b' ' | b'\t')) {
            i += 1;
        }
        matches!(
            b.get(i),
            Some(b':' | b'=' | b'{' | b'(' | b'?' | b'<' | b'>' | b'|' | b'\n')
        )
    }

    fn repr_in(&self, r: (usize, usize)) -> Option<&str> {
        self.reprs
            .iter()
            .find(|(s, e)| *s >= r.0 && *e <= r.1)
            .map(|(s, e)| &self.orig[*s..*e])
    }
}

/// Spans of `[…]` lists of quoted words that sit inside a quoted slot: the run of punctuation
/// right before `[` equals the run right after `]` (`<|"|>[…]<|"|>`, `"[…]"`).
fn find_stringified_lists(text: &str) -> Vec<(usize, usize)> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'[' {
            i += 1;
            continue;
        }
        let Some(close) = b[i..]
            .iter()
            .take(400)
            .position(|&c| c == b']')
            .map(|k| i + k)
        else {
            i += 1;
            continue;
        };
        let inner = &text[i + 1..close];
        let items: Vec<&str> = inner.split(',').map(str::trim).collect();
        let quoted = !inner.trim().is_empty()
            && items.iter().all(|it| {
                let it = it.as_bytes();
                it.len() >= 2
                    && (it[0] == b'\'' || it[0] == b'"')
                    && it[it.len() - 1] == it[0]
                    && it[1..it.len() - 1]
                        .iter()
                        .all(|c| c.is_ascii_alphanumeric() || *c == b'_')
            });
        if quoted {
            let mut s = i;
            while s > 0 && is_delim(b[s - 1]) {
                s -= 1;
            }
            let mut e = close + 1;
            while e < b.len() && is_delim(b[e]) {
                e += 1;
            }
            let pre = &b[s..i];
            let post = &b[close + 1..e];
            let pre_trim: &[u8] = pre;
            if !pre_trim.is_empty()
                && post.starts_with(pre_trim)
                && !pre_trim.contains(&b':')
                && !pre_trim.contains(&b'[')
            {
                out.push((i, close + 1));
            }
        }
        i = close + 1;
    }
    out
}

fn is_delim(c: u8) -> bool {
    matches!(c, b'"' | b'\'' | b'<' | b'>' | b'|' | b'`')
}

/// Occurrences of one parameter name tried when locating it (the shallowest first).
const MAX_CANDIDATES: usize = 8;

/// Words that mark a parameter as required or optional (llama.cpp corpus: English, and the
/// Chinese 必填/选填 of ByteDance Seed-OSS).
const REQUIRED_WORDS: &[&str] = &["required", "optional", "mandatory", "必填", "选填"];

/// Type-name synonyms a template may print for each JSON Schema type.
fn synonyms(t: &str) -> &'static [&'static str] {
    match t {
        "string" => &["string", "str"],
        "integer" => &["integer", "int", "number", "int64", "int32"],
        "number" => &["number", "float", "double", "decimal"],
        "boolean" => &["boolean", "bool"],
        "array" => &["array", "list", "[]", "sequence"],
        "object" => &["object", "dict", "map", "record"],
        "null" => &["null", "none", "nullable"],
        _ => &[],
    }
}

struct Check<'a, 'b> {
    m: &'b Masked<'a>,
    root: &'b Value,
    tool_span: Option<(usize, usize)>,
}

fn ptr(base: &str, key: &str) -> String {
    format!("{base}/{}", escape_token(key))
}

/// Declared alternatives of a node: `(pointer, types, is_null, property names)`.
struct Alt {
    pointer: String,
    label: String,
    types: Vec<String>,
    null: bool,
    props: Vec<String>,
}

impl Check<'_, '_> {
    /// Checks the properties (and items) of an object node whose region is `r`.
    fn object_props(
        &self,
        node: &Value,
        p: &str,
        r: (usize, usize),
        out: &mut Vec<ParamLoss>,
        depth: usize,
    ) {
        if depth > 16 {
            return;
        }
        let Some(props) = node.get("properties").and_then(Value::as_object) else {
            return;
        };
        // Key-like occurrences of every sibling, to bound fallback regions.
        let all_keys: Vec<usize> = props
            .keys()
            .flat_map(|k| self.m.key_candidates(k, r))
            .collect();
        for (name, sub) in props {
            let pp = ptr(&ptr(p, "properties"), name);
            let cands = self.m.key_candidates(name, r);
            // The occurrence whose region carries the most facts wins (ties: shallowest, first).
            let mut best: Option<BestOccurrence> = None;
            for at in cands {
                let region = self.m.param_region(name, at, r, &all_keys);
                let mut tmp = Vec::new();
                // Judge the occurrence by the parameter's own facts; recurse only into the winner.
                self.param(
                    sub,
                    &pp,
                    name,
                    region,
                    at + name.len(),
                    false,
                    &mut tmp,
                    depth,
                );
                let lost: u32 = tmp
                    .iter()
                    .flat_map(|p| p.lost())
                    .map(|f| f.kind.weight())
                    .sum();
                // Ties: the region showing more nested names, then a brace block.
                let nested = nested_names(sub)
                    .iter()
                    .filter(|n| !self.m.words(n, region.0, region.1, false).is_empty())
                    .count() as u32;
                let braced = u32::from(self.m.brace_after(at + name.len()).is_some());
                let key = (lost, u32::MAX - nested, 1 - braced);
                if best.as_ref().is_none_or(|(bk, _, _)| key < *bk) {
                    best = Some((key, at, tmp));
                }
            }
            match best {
                Some((_, at, _)) => {
                    let region = self.m.param_region(name, at, r, &all_keys);
                    self.param(sub, &pp, name, region, at + name.len(), true, out, depth);
                }
                None => out.push(ParamLoss {
                    pointer: pp.clone(),
                    name: name.clone(),
                    span: None,
                    facts: vec![FactCheck {
                        kind: FactKind::Name,
                        pointer: pp,
                        expected: name.clone(),
                        reached: false,
                        detail: None,
                    }],
                }),
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn param(
        &self,
        node: &Value,
        p: &str,
        name: &str,
        region: (usize, usize),
        body: usize,
        recurse: bool,
        out: &mut Vec<ParamLoss>,
        depth: usize,
    ) {
        let Value::Object(m) = node else { return };
        let r = (body.min(region.1), region.1);
        let mut facts = vec![FactCheck {
            kind: FactKind::Name,
            pointer: p.to_string(),
            expected: name.to_string(),
            reached: true,
            detail: None,
        }];
        self.type_facts(m, p, r, &mut facts);
        // enum / const
        let vals: Vec<(String, Value)> = match (m.get("enum"), m.get("const")) {
            (Some(Value::Array(a)), _) => a
                .iter()
                .enumerate()
                .map(|(i, v)| (format!("{p}/enum/{i}"), v.clone()))
                .collect(),
            (_, Some(c)) => vec![(format!("{p}/const"), c.clone())],
            _ => Vec::new(),
        };
        for (vp, v) in vals {
            let s = match &v {
                Value::String(s) => s.clone(),
                Value::Null => continue,
                other => other.to_string(),
            };
            if s.is_empty() {
                continue;
            }
            let reached = !self.m.words(&s, r.0, r.1, false).is_empty();
            facts.push(FactCheck {
                kind: FactKind::EnumValue,
                pointer: vp,
                expected: format!("{v}"),
                reached,
                detail: None,
            });
        }
        // description
        if let Some(Value::String(d)) = m.get("description")
            && d.trim().len() >= 3
        {
            let reached = self.description_reached(d);
            facts.push(FactCheck {
                kind: FactKind::Description,
                pointer: format!("{p}/description"),
                expected: short(d),
                reached,
                detail: None,
            });
        }
        // required of an object
        if let Some(Value::Array(req)) = m.get("required")
            && !req.is_empty()
        {
            let reached = self.m.any_word(REQUIRED_WORDS, r) || self.optional_marker(r);
            let names: Vec<String> = req
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect();
            facts.push(FactCheck {
                kind: FactKind::Required,
                pointer: format!("{p}/required"),
                expected: names.join(", "),
                reached,
                detail: None,
            });
        }
        out.push(ParamLoss {
            pointer: p.to_string(),
            name: name.to_string(),
            span: Some(region),
            facts,
        });
        if !recurse {
            return;
        }
        self.object_props(node, p, r, out, depth + 1);
        if let Some(items @ Value::Object(_)) = m.get("items") {
            let ip = format!("{p}/items");
            // The `items` key inside this parameter's body, and the block after it.
            let found = self.m.locate_key("items", r).and_then(|k| {
                self.m
                    .brace_after(k + 5)
                    .map(|o| ((k, self.m.block(o).1.min(r.1)), o))
            });
            let (ir, body) = found.unwrap_or((r, r.0));
            self.param(items, &ip, "[]", ir, body, true, out, depth + 1);
        }
    }

    fn type_facts(
        &self,
        m: &Map<String, Value>,
        p: &str,
        r: (usize, usize),
        facts: &mut Vec<FactCheck>,
    ) {
        if let Some(Value::String(rf)) = m.get("$ref") {
            let target = rf.strip_prefix('#').and_then(|f| {
                if f.is_empty() {
                    Some(self.root)
                } else {
                    self.root.pointer(f)
                }
            });
            let def = rf.rsplit('/').next().unwrap_or(rf);
            let named = !self.m.words(def, r.0, r.1, false).is_empty();
            let shown = target.is_some_and(|t| {
                let span = self.tool_span.unwrap_or(r);
                let props: Vec<String> = t
                    .get("properties")
                    .and_then(Value::as_object)
                    .map(|p| p.keys().cloned().collect())
                    .unwrap_or_default();
                let at = self.m.locate_key(def, span);
                at.is_some_and(|a| {
                    let dr = self
                        .m
                        .brace_after(a + def.len())
                        .map(|o| self.m.block(o))
                        .unwrap_or((a, span.1));
                    props.is_empty()
                        && !types_of_node(t).is_empty()
                        && types_of_node(t)
                            .iter()
                            .any(|ty| self.m.any_word(synonyms(ty), dr))
                        || props
                            .iter()
                            .any(|pn| !self.m.words(pn, dr.0, dr.1, false).is_empty())
                })
            });
            let detail = if !named {
                Some("the reference is not printed".to_string())
            } else if !shown {
                Some("its definition is not in the prompt".to_string())
            } else {
                None
            };
            facts.push(FactCheck {
                kind: FactKind::Ref,
                pointer: p.to_string(),
                expected: rf.clone(),
                reached: named && shown,
                detail,
            });
            return;
        }
        let alts = alternatives(m, p);
        if alts.len() >= 2 || alts.iter().any(|a| a.null) {
            let checks: Vec<(bool, &Alt)> =
                alts.iter().map(|a| (self.alt_reached(a, r), a)).collect();
            let typed: Vec<&(bool, &Alt)> = checks.iter().filter(|(_, a)| !a.null).collect();
            let any_typed = typed.iter().any(|(ok, _)| *ok);
            let repr = self.m.repr_in(r);
            let expected = alts
                .iter()
                .filter(|a| !a.null)
                .map(|a| a.label.clone())
                .collect::<Vec<_>>()
                .join(" | ");
            if !typed.is_empty() {
                let detail = if any_typed {
                    None
                } else if let Some(x) = repr {
                    Some(format!("printed as a stringified list {x}"))
                } else {
                    Some(format!(
                        "no type name in `{}`",
                        short(&self.m.orig[r.0.min(r.1)..r.1])
                    ))
                };
                facts.push(FactCheck {
                    kind: FactKind::Type,
                    pointer: p.to_string(),
                    expected,
                    reached: any_typed,
                    detail,
                });
                if any_typed && typed.len() >= 2 {
                    for (ok, a) in &typed {
                        facts.push(FactCheck {
                            kind: FactKind::Alternative,
                            pointer: a.pointer.clone(),
                            expected: a.label.clone(),
                            reached: *ok,
                            detail: None,
                        });
                    }
                }
            }
            for (ok, a) in checks.iter().filter(|(_, a)| a.null) {
                facts.push(FactCheck {
                    kind: FactKind::Nullable,
                    pointer: a.pointer.clone(),
                    expected: "null".into(),
                    reached: *ok,
                    detail: None,
                });
            }
            return;
        }
        if let Some(a) = alts.first() {
            let quoted_enum = a.types == ["string"]
                && m.get("enum").and_then(Value::as_array).is_some_and(|vals| {
                    vals.iter().filter_map(Value::as_str).any(|v| {
                        let hay = &self.m.orig[r.0.min(r.1)..r.1];
                        hay.contains(&format!("\"{v}\""))
                            || hay.contains(&format!("'{v}'"))
                            || hay.contains(&format!("<|\"|>{v}<|\"|>"))
                    })
                });
            let ok = quoted_enum || self.alt_reached(a, r);
            let detail = if ok {
                None
            } else {
                self.m
                    .repr_in(r)
                    .map(|x| format!("printed as a stringified list {x}"))
                    .or_else(|| {
                        Some(format!(
                            "no type name in `{}`",
                            short(&self.m.orig[r.0.min(r.1)..r.1])
                        ))
                    })
            };
            facts.push(FactCheck {
                kind: FactKind::Type,
                pointer: p.to_string(),
                expected: a.label.clone(),
                reached: ok,
                detail,
            });
        }
    }

    fn alt_reached(&self, a: &Alt, r: (usize, usize)) -> bool {
        if a.null {
            return self.m.any_word(synonyms("null"), r);
        }
        if a.types.iter().any(|t| self.m.any_word(synonyms(t), r)) {
            return true;
        }
        // An object alternative is shown by its properties, an array by `[]` notation.
        if !a.props.is_empty()
            && a.props
                .iter()
                .any(|pn| !self.m.words(pn, r.0, r.1, false).is_empty())
        {
            return true;
        }
        false
    }

    fn optional_marker(&self, r: (usize, usize)) -> bool {
        let b = self.m.bytes();
        b[r.0..r.1.min(b.len())].windows(2).any(|w| w == b"?:")
    }

    fn description_reached(&self, d: &str) -> bool {
        let span = self.tool_span.unwrap_or((0, self.m.orig.len()));
        let hay = &self.m.orig[span.0..span.1];
        let d = d.trim();
        if hay.contains(d) {
            return true;
        }
        let esc = serde_json::to_string(d).unwrap_or_default();
        hay.contains(esc.trim_matches('"'))
    }

    /// Every fact of `node` lost (the tool is not in the prompt).
    fn all_lost(&self, node: &Value, p: &str, out: &mut Vec<ParamLoss>, depth: usize) {
        if depth > 16 {
            return;
        }
        let Some(props) = node.get("properties").and_then(Value::as_object) else {
            return;
        };
        for (name, sub) in props {
            let pp = ptr(&ptr(p, "properties"), name);
            out.push(ParamLoss {
                pointer: pp.clone(),
                name: name.clone(),
                span: None,
                facts: vec![FactCheck {
                    kind: FactKind::Name,
                    pointer: pp.clone(),
                    expected: name.clone(),
                    reached: false,
                    detail: Some("the tool is not in the prompt".into()),
                }],
            });
            self.all_lost(sub, &pp, out, depth + 1);
        }
    }
}

/// Property names one or two levels below a schema (its `properties` and its `items`'
/// `properties`), used to tell a full declaration from a passing mention.
fn nested_names(v: &Value) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for node in [Some(v), v.get("items")].into_iter().flatten() {
        if let Some(p) = node.get("properties").and_then(Value::as_object) {
            out.extend(p.keys().cloned());
        }
    }
    out
}

fn short(s: &str) -> String {
    let s = s.trim();
    if s.chars().count() > 60 {
        format!("{}…", s.chars().take(59).collect::<String>())
    } else {
        s.to_string()
    }
}

fn types_of_node(v: &Value) -> Vec<String> {
    match v.get("type") {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        _ if v.get("properties").is_some() => vec!["object".into()],
        _ if v.get("items").is_some() => vec!["array".into()],
        _ => Vec::new(),
    }
}

/// The declared alternatives of a node (anyOf/oneOf branches, type-list members, `nullable`).
fn alternatives(m: &Map<String, Value>, p: &str) -> Vec<Alt> {
    let mut out = Vec::new();
    for kw in ["anyOf", "oneOf"] {
        if let Some(Value::Array(a)) = m.get(kw) {
            for (i, alt) in a.iter().enumerate() {
                let types = types_of_node(alt);
                let null = types.iter().all(|t| t == "null") && !types.is_empty();
                let props: Vec<String> = alt
                    .get("properties")
                    .and_then(Value::as_object)
                    .map(|p| p.keys().cloned().collect())
                    .unwrap_or_default();
                let label = if types.is_empty() {
                    if alt.get("$ref").is_some() {
                        "$ref".to_string()
                    } else {
                        "any".to_string()
                    }
                } else {
                    types.join("|")
                };
                if types.is_empty() {
                    continue; // unconstrained or $ref alternatives carry no checkable type
                }
                out.push(Alt {
                    pointer: format!("{p}/{kw}/{i}"),
                    label,
                    types,
                    null,
                    props,
                });
            }
            return out;
        }
    }
    match m.get("type") {
        Some(Value::String(t)) => {
            let props: Vec<String> = m
                .get("properties")
                .and_then(Value::as_object)
                .map(|p| p.keys().cloned().collect())
                .unwrap_or_default();
            out.push(Alt {
                pointer: format!("{p}/type"),
                label: t.clone(),
                types: vec![t.clone()],
                null: t == "null",
                props,
            });
        }
        Some(Value::Array(a)) => {
            for (i, t) in a.iter().enumerate() {
                if let Some(t) = t.as_str() {
                    out.push(Alt {
                        pointer: format!("{p}/type/{i}"),
                        label: t.to_string(),
                        types: vec![t.to_string()],
                        null: t == "null",
                        props: Vec::new(),
                    });
                }
            }
        }
        _ => {}
    }
    if m.get("nullable") == Some(&Value::Bool(true))
        && !out.iter().any(|a| a.null)
        && !out.is_empty()
    {
        out.push(Alt {
            pointer: format!("{p}/nullable"),
            label: "null".into(),
            types: vec!["null".into()],
            null: true,
            props: Vec::new(),
        });
    }
    out
}
