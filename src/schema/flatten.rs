//! Flattening: rewrite tool parameter schemas into shapes chat templates can print.
//!
//! Chat templates print JSON Schema with hand-written Jinja. Many only understand a node with a
//! single string `type`; Gemma 4's official template prints an `anyOf` parameter as
//! `type:<|"|><|"|>` and a type list as a stringified Python list; almost none resolve `$ref`.
//! [`flatten_tools`] rewrites every schema into the subset templates handle and reports each
//! rewrite as a [`Change`] with what it lost.
//!
//! Rewrites (applied bottom-up, every node of every tool's parameter schema):
//! * `$ref` (`#/$defs/…`, `#/definitions/…`, any JSON Pointer into the tool's schema) → the
//!   target inlined; sibling keywords next to the `$ref` win over the target's. A recursive
//!   reference is expanded [`FlattenOptions::recursion_depth`] times along one path, then cut
//!   (the node keeps the target's `type` and a description note). `$defs`/`definitions` are removed.
//! * `allOf` → merged into one schema (`properties` and `required` united, `type`/`enum`
//!   intersected; conflicting annotations keep the first and are reported).
//! * `anyOf`/`oneOf` → alternatives united: `null` alternatives become `nullable: true`; a single
//!   remaining alternative replaces the node; alternatives that are all objects are merged into
//!   one object (union of `properties`, `required` = intersection, the mutual exclusivity is
//!   reported lost); otherwise the distinct types form a type list, then the [`Strategy`] applies.
//! * `type: [..]` lists → `"null"` removed into `nullable: true`; one remaining type → that
//!   type; several → the [`Strategy`].
//!
//! `enum`, `const`, `default`, `description`, `items`, `properties` and every keyword the
//! flattener does not rewrite are kept. Flattening is idempotent: flattening the output again
//! changes nothing.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::tools::{escape_token, locate_tools};
use super::types::json_type;

/// How a node with several types is written for templates and engines that cannot print a
/// type list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Strategy {
    /// `"type": ["string", "number"]` (the common workaround; JSON-dumping templates print it,
    /// Gemma 4's official template does not). Nothing is lost in the schema.
    #[default]
    TypeList,
    /// The first type only (`"type": "string"`); the other types are lost.
    FirstType,
    /// The first type, with the alternatives written into the description
    /// (`"description": "how many (string or number)"`). Engines that validate arguments
    /// against the schema will reject the other types.
    FirstTypeWithNote,
    /// `"type": "string"`, with the alternatives written into the description; the tool must
    /// accept the other types as strings.
    StringWithNote,
}

impl Strategy {
    /// All strategies, in tie-break order (earlier wins a tie in template-aware ranking).
    pub const ALL: &'static [Strategy] = &[
        Strategy::TypeList,
        Strategy::FirstTypeWithNote,
        Strategy::StringWithNote,
        Strategy::FirstType,
    ];

    /// The CLI name (`type-list`, `first-type`, `first-type-with-note`, `string-with-note`).
    pub fn name(self) -> &'static str {
        match self {
            Strategy::TypeList => "type-list",
            Strategy::FirstType => "first-type",
            Strategy::FirstTypeWithNote => "first-type-with-note",
            Strategy::StringWithNote => "string-with-note",
        }
    }

    /// Looks a strategy up by its CLI name.
    pub fn from_name(name: &str) -> Option<Strategy> {
        Strategy::ALL.iter().copied().find(|s| s.name() == name)
    }

    /// One line for help and reports.
    pub fn summary(self) -> &'static str {
        match self {
            Strategy::TypeList => {
                "several types as a type list: \"type\": [\"string\", \"number\"]"
            }
            Strategy::FirstType => "the first type only; the others are dropped",
            Strategy::FirstTypeWithNote => {
                "the first type, the alternatives noted in the description"
            }
            Strategy::StringWithNote => "type string, the alternatives noted in the description",
        }
    }

    fn notes(self) -> bool {
        matches!(self, Strategy::FirstTypeWithNote | Strategy::StringWithNote)
    }
}

impl std::fmt::Display for Strategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Options of [`flatten_tools`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlattenOptions {
    /// How nodes with several types are written.
    pub strategy: Strategy,
    /// How many times one recursive `$ref` is expanded along a single path before it is cut
    /// (default 2: a tree node, its children, their children, then a cut).
    pub recursion_depth: usize,
    /// Schema nesting depth beyond which subschemas are cut (default 48).
    pub max_depth: usize,
    /// Maximum schema nodes produced per tool (guards against exponential `$ref` fan-out;
    /// default 20 000). Beyond it, `$ref`s are cut instead of inlined.
    pub max_nodes: usize,
}

impl Default for FlattenOptions {
    fn default() -> Self {
        FlattenOptions {
            strategy: Strategy::TypeList,
            recursion_depth: 2,
            max_depth: 48,
            max_nodes: 20_000,
        }
    }
}

impl FlattenOptions {
    /// Default options with `strategy`.
    pub fn with_strategy(strategy: Strategy) -> Self {
        FlattenOptions {
            strategy,
            ..FlattenOptions::default()
        }
    }
}

/// One rewrite.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    /// JSON Pointer (RFC 6901) of the rewritten node from the root of the input document
    /// (e.g. `/0/function/parameters/properties/quantity`). Inside an inlined `$ref` it is the
    /// use site's pointer continued into the target, i.e. where the node sits in the output.
    pub path: String,
    /// What was done, e.g. `anyOf [string, number] → type list`.
    pub change: String,
    /// What the schema can no longer express after the rewrite; `null` when nothing.
    pub lost: Option<String>,
    /// Name of the tool concerned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
}

/// The result of [`flatten_tools`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Flattened {
    /// The input document with every tool's parameter schema flattened (same shape as the input).
    pub tools: Value,
    /// Every rewrite, in document order (depth-first, children before their parent).
    pub changes: Vec<Change>,
}

impl Flattened {
    /// Number of changes that lost something.
    pub fn lossy_changes(&self) -> usize {
        self.changes.iter().filter(|c| c.lost.is_some()).count()
    }
}

/// Flattens the parameter schema of every tool in `doc` (see [`super::tools::locate_tools`] for
/// the accepted shapes) and returns the same document with the schemas rewritten.
///
/// Errors: `doc` holds no tool list (message lists the accepted shapes). Never panics, whatever
/// the JSON; schemas that are not objects (`true`, `false`, garbage) are left as they are.
pub fn flatten_tools(doc: &Value, opts: &FlattenOptions) -> Result<Flattened, String> {
    let list = locate_tools(doc)?;
    let mut out = doc.clone();
    let mut changes = Vec::new();
    for tool in &list.tools {
        let Some(ptr) = &tool.schema_pointer else {
            continue;
        };
        let Some(schema) = doc.pointer(ptr) else {
            continue;
        };
        let (flat, mut ch) = flatten_schema(schema, opts, ptr);
        for c in &mut ch {
            c.tool = Some(tool.name.clone());
        }
        changes.extend(ch);
        if let Some(slot) = out.pointer_mut(ptr) {
            *slot = flat;
        }
    }
    Ok(Flattened {
        tools: out,
        changes,
    })
}

/// Flattens one JSON Schema (a tool's parameters). `base` is the JSON Pointer of `schema` used
/// as the prefix of every [`Change::path`]. `$ref`s resolve against `schema` itself.
pub fn flatten_schema(schema: &Value, opts: &FlattenOptions, base: &str) -> (Value, Vec<Change>) {
    let mut cx = Cx {
        root: schema,
        opts,
        changes: Vec::new(),
        ref_stack: Vec::new(),
        nodes: 0,
    };
    let out = cx.node(schema, base, 0);
    (out, cx.changes)
}

/// Keywords whose value is one subschema.
const SCHEMA_VALUED: &[&str] = &[
    "additionalProperties",
    "items",
    "additionalItems",
    "contains",
    "not",
    "if",
    "then",
    "else",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
    "contentSchema",
];
/// Keywords whose value is a map of name → subschema.
const SCHEMA_MAPS: &[&str] = &["properties", "patternProperties", "dependentSchemas"];
/// Keywords whose value is an array of subschemas (besides the combinators).
const SCHEMA_ARRAYS: &[&str] = &["prefixItems", "items"];

/// True for a JSON Schema keyword whose value is (or holds) subschemas — the positions the
/// flattener walks. Everything else (`enum`, `const`, `default`, `examples`, `x-…`) is data.
pub fn is_schema_position(key: &str) -> bool {
    SCHEMA_VALUED.contains(&key)
        || SCHEMA_MAPS.contains(&key)
        || SCHEMA_ARRAYS.contains(&key)
        || matches!(key, "anyOf" | "oneOf" | "allOf" | "$defs" | "definitions")
}

struct Cx<'a> {
    root: &'a Value,
    opts: &'a FlattenOptions,
    changes: Vec<Change>,
    ref_stack: Vec<String>,
    nodes: usize,
}

fn ptr(base: &str, key: &str) -> String {
    format!("{base}/{}", escape_token(key))
}

/// A compact one-line rendering of a JSON value for change messages (at most ~80 chars).
fn compact(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 80 {
        format!("{}…", s.chars().take(79).collect::<String>())
    } else {
        s
    }
}

fn join_or(items: &[String]) -> String {
    match items.len() {
        0 => String::new(),
        1 => items[0].clone(),
        n => format!("{} or {}", items[..n - 1].join(", "), items[n - 1]),
    }
}

/// Appends `note` (in parentheses) to the node's description, once.
fn add_note(m: &mut Map<String, Value>, note: &str) {
    let desc = m
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let wrapped = format!("({note})");
    if desc.contains(&wrapped) {
        return;
    }
    let new = if desc.trim().is_empty() {
        wrapped
    } else {
        format!("{} {wrapped}", desc.trim_end())
    };
    m.insert("description".into(), Value::String(new));
}

/// True when the schema only admits `null`.
fn is_null_schema(v: &Value) -> bool {
    let Value::Object(m) = v else { return false };
    let t = match m.get("type") {
        Some(Value::String(s)) => s == "null",
        Some(Value::Array(a)) => !a.is_empty() && a.iter().all(|x| x == "null"),
        Some(_) => false,
        None => {
            m.get("const").is_some_and(Value::is_null)
                || m.get("enum")
                    .and_then(Value::as_array)
                    .is_some_and(|e| !e.is_empty() && e.iter().all(Value::is_null))
        }
    };
    t && !m.contains_key("properties") && !m.contains_key("items")
}

/// The declared or implied type(s) of a flat schema; empty when unconstrained.
fn types_of(v: &Value) -> Vec<String> {
    let Value::Object(m) = v else {
        return Vec::new();
    };
    match m.get("type") {
        Some(Value::String(s)) => {
            let mut t = vec![s.clone()];
            if m.get("nullable") == Some(&Value::Bool(true)) && s != "null" {
                t.push("null".into());
            }
            t
        }
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        Some(_) => Vec::new(),
        None => {
            if m.contains_key("properties") {
                vec!["object".into()]
            } else if m.contains_key("items") || m.contains_key("prefixItems") {
                vec!["array".into()]
            } else if let Some(vals) = m.get("enum").and_then(Value::as_array).or(None) {
                let mut t: Vec<String> = Vec::new();
                for v in vals {
                    let n = json_type(v).to_string();
                    if !t.contains(&n) {
                        t.push(n);
                    }
                }
                t
            } else if let Some(c) = m.get("const") {
                vec![json_type(c).to_string()]
            } else {
                Vec::new()
            }
        }
    }
}

/// Keywords that make an alternative more than a bare constraint on its parent.
fn is_constraint_only(v: &Value) -> bool {
    match v {
        Value::Bool(_) => true,
        Value::Object(m) => {
            !m.contains_key("type")
                && !m.contains_key("properties")
                && !m.contains_key("items")
                && !m.contains_key("enum")
                && !m.contains_key("const")
        }
        _ => true,
    }
}

impl<'a> Cx<'a> {
    fn push(&mut self, path: &str, change: impl Into<String>, lost: Option<String>) {
        self.changes.push(Change {
            path: path.to_string(),
            change: change.into(),
            lost,
            tool: None,
        });
    }

    /// Flattens one node.
    fn node(&mut self, v: &Value, path: &str, depth: usize) -> Value {
        let Value::Object(map) = v else {
            return v.clone();
        };
        if depth > self.opts.max_depth {
            self.push(
                path,
                format!(
                    "schema nested deeper than {} levels cut",
                    self.opts.max_depth
                ),
                Some("everything below this node".into()),
            );
            return Value::Object(Map::new());
        }
        self.nodes += 1;
        let mut base = Map::new();
        for (k, val) in map {
            match k.as_str() {
                "$ref" | "allOf" | "anyOf" | "oneOf" => {}
                "$defs" | "definitions" => {
                    self.push(
                        &ptr(path, k),
                        format!("removed `{k}` (references inlined where used)"),
                        None,
                    );
                }
                _ => {
                    let child = self.child(k, val, &ptr(path, k), depth);
                    base.insert(k.clone(), child);
                }
            }
        }
        let mut out = base;
        if let Some(r) = map.get("$ref") {
            out = self.inline_ref(r, out, path, depth);
        }
        if let Some(all) = map.get("allOf") {
            out = self.all_of(all, out, path, depth);
        }
        for kw in ["anyOf", "oneOf"] {
            if let Some(alts) = map.get(kw) {
                out = self.union(kw, alts, out, path, depth);
            }
        }
        self.normalize_type(&mut out, path);
        Value::Object(out)
    }

    /// Flattens the value of keyword `key` (subschemas are walked, data is copied).
    fn child(&mut self, key: &str, val: &Value, path: &str, depth: usize) -> Value {
        if SCHEMA_MAPS.contains(&key) {
            if let Value::Object(m) = val {
                let mut o = Map::new();
                for (name, s) in m {
                    o.insert(name.clone(), self.node(s, &ptr(path, name), depth + 1));
                }
                return Value::Object(o);
            }
            return val.clone();
        }
        if SCHEMA_ARRAYS.contains(&key)
            && let Value::Array(a) = val
        {
            return Value::Array(
                a.iter()
                    .enumerate()
                    .map(|(i, s)| self.node(s, &format!("{path}/{i}"), depth + 1))
                    .collect(),
            );
        }
        if SCHEMA_VALUED.contains(&key) {
            return self.node(val, path, depth + 1);
        }
        val.clone()
    }

    fn resolve(&self, r: &str) -> Option<&'a Value> {
        let frag = r.strip_prefix('#')?;
        if frag.is_empty() {
            return Some(self.root);
        }
        // JSON Pointer fragment, percent-decoded for the common escapes.
        let decoded = frag
            .replace("%25", "%")
            .replace("%22", "\"")
            .replace("%20", " ");
        self.root.pointer(&decoded)
    }

    fn inline_ref(
        &mut self,
        r: &Value,
        siblings: Map<String, Value>,
        path: &str,
        depth: usize,
    ) -> Map<String, Value> {
        let Some(rs) = r.as_str() else {
            self.push(
                &ptr(path, "$ref"),
                "removed a `$ref` that is not a string",
                Some(format!("the reference {}", compact(r))),
            );
            return siblings;
        };
        let Some(target) = self.resolve(rs) else {
            self.push(
                path,
                format!("removed unresolvable `$ref` {rs}"),
                Some(format!(
                    "the schema at {rs} (external or missing; the value is unconstrained)"
                )),
            );
            let mut s = siblings;
            if self.opts.strategy.notes() {
                add_note(&mut s, &format!("schema: {rs}"));
            }
            return s;
        };
        let seen = self.ref_stack.iter().filter(|x| *x == rs).count();
        if seen >= self.opts.recursion_depth || self.nodes >= self.opts.max_nodes {
            let mut cut = Map::new();
            let ttype = types_of(target).into_iter().find(|t| t != "null");
            if let Some(t) = &ttype {
                cut.insert("type".into(), Value::String(t.clone()));
            }
            let why = if seen >= self.opts.recursion_depth {
                format!(
                    "recursive `$ref` {rs} cut at depth {}",
                    self.opts.recursion_depth
                )
            } else {
                format!(
                    "`$ref` {rs} cut: more than {} schema nodes",
                    self.opts.max_nodes
                )
            };
            let mut out = merge_all(&siblings, &cut, &mut Vec::new());
            let desc = target.get("description").and_then(Value::as_str);
            if let (None, Some(d)) = (out.get("description"), desc) {
                out.insert("description".into(), Value::String(d.to_string()));
            }
            let name = rs.rsplit('/').next().unwrap_or(rs);
            add_note(&mut out, &format!("same structure as the enclosing {name}"));
            self.push(
                path,
                why,
                Some(format!(
                    "the structure of {rs} below this depth (only its type{} is kept)",
                    ttype.map(|t| format!(" {t}")).unwrap_or_default()
                )),
            );
            return out;
        }
        self.ref_stack.push(rs.to_string());
        let flat = self.node(target, path, depth + 1);
        self.ref_stack.pop();
        let Value::Object(tm) = flat else {
            // `$ref` to `true`/`false` or a non-schema: keep the siblings only.
            self.push(
                path,
                format!("inlined `$ref` {rs} (a boolean schema)"),
                None,
            );
            return siblings;
        };
        let mut conflicts = Vec::new();
        let out = merge_all(&siblings, &tm, &mut conflicts);
        let lost = conflicts_note(&conflicts, "of the target");
        self.push(path, format!("inlined `$ref` {rs}"), lost);
        out
    }

    fn all_of(
        &mut self,
        all: &Value,
        base: Map<String, Value>,
        path: &str,
        depth: usize,
    ) -> Map<String, Value> {
        let Value::Array(parts) = all else {
            self.push(
                &ptr(path, "allOf"),
                "removed a malformed `allOf` (not an array)",
                Some(format!("allOf {}", compact(all))),
            );
            return base;
        };
        let mut out = base;
        let mut conflicts = Vec::new();
        for (i, p) in parts.iter().enumerate() {
            match self.node(p, &format!("{path}/allOf/{i}"), depth + 1) {
                Value::Object(pm) => out = merge_all(&out, &pm, &mut conflicts),
                Value::Bool(false) => {
                    conflicts.push("allOf contains `false` (no value is valid)".to_string())
                }
                _ => {}
            }
        }
        self.push(
            path,
            format!(
                "merged allOf of {} schema{}",
                parts.len(),
                if parts.len() == 1 { "" } else { "s" }
            ),
            conflicts_note(&conflicts, ""),
        );
        self.normalize_type(&mut out, path);
        out
    }

    fn union(
        &mut self,
        kw: &str,
        alts: &Value,
        base: Map<String, Value>,
        path: &str,
        depth: usize,
    ) -> Map<String, Value> {
        let Value::Array(items) = alts else {
            self.push(
                &ptr(path, kw),
                format!("removed a malformed `{kw}` (not an array)"),
                Some(format!("{kw} {}", compact(alts))),
            );
            return base;
        };
        if items.is_empty() {
            // JSON Schema 2020-12 §10.2.1: `anyOf`/`oneOf`/`allOf` MUST be non-empty. An empty
            // `anyOf`/`oneOf` matches no value, an empty `allOf` every value: dropping the
            // former widens the schema to anything, so it is reported as lost.
            let lost =
                (kw != "allOf").then(|| format!("{kw} [] (no value was valid; now any value is)"));
            self.push(path, format!("removed an empty `{kw}`"), lost);
            return base;
        }
        let flat: Vec<Value> = items
            .iter()
            .enumerate()
            .map(|(i, a)| self.node(a, &format!("{path}/{kw}/{i}"), depth + 1))
            .collect();
        let nullable = flat.iter().any(is_null_schema);
        let rest: Vec<&Value> = flat.iter().filter(|a| !is_null_schema(a)).collect();
        let all_types: Vec<String> = flat
            .iter()
            .map(|a| {
                let t = types_of(a);
                if t.is_empty() {
                    "any".to_string()
                } else {
                    t.join("|")
                }
            })
            .collect();
        let listing = format!("{kw} [{}]", all_types.join(", "));
        let (mut merged, change, mut lost, note) =
            self.merge_alternatives(kw, &rest, nullable, &all_types, &listing);
        if nullable && !rest.is_empty() {
            merged.insert("nullable".into(), Value::Bool(true));
        }
        // The alternatives' own descriptions survive only when the parent has none.
        let mut conflicts = Vec::new();
        let out = merge_all(&base, &merged, &mut conflicts);
        lost.extend(
            conflicts
                .into_iter()
                .map(|c| format!("{c} of an alternative")),
        );
        let mut out = out;
        if let Some(n) = note {
            add_note(&mut out, &n);
        }
        let still_list = matches!(out.get("type"), Some(Value::Array(_)));
        if still_list && self.opts.strategy != Strategy::TypeList {
            // One change for the union and the strategy applied to it.
            self.normalize_type_as(&mut out, path, Some((listing, lost)));
        } else {
            self.push(
                path,
                change,
                if lost.is_empty() {
                    None
                } else {
                    Some(lost.join("; "))
                },
            );
            self.normalize_type(&mut out, path);
        }
        out
    }

    /// One schema from a union's non-null alternatives `rest` (`kw`: `anyOf` or `oneOf`; the
    /// alternatives' types `all_types`, listed as `listing`): `(schema, what changed, what
    /// was lost, a note for the description)`. Only null → `type null`; bare constraints →
    /// dropped (reported lost); one alternative → it; an unconstrained alternative → no type;
    /// objects → one merged object; mixed → a type list.
    fn merge_alternatives(
        &self,
        kw: &str,
        rest: &[&Value],
        nullable: bool,
        all_types: &[String],
        listing: &str,
    ) -> (Map<String, Value>, String, Vec<String>, Option<String>) {
        let mut lost: Vec<String> = Vec::new();
        let mut note: Option<String> = None;
        let mut merged: Map<String, Value>;
        let change: String;
        if rest.is_empty() {
            merged = Map::new();
            merged.insert("type".into(), Value::String("null".into()));
            change = format!("{listing} → type null");
        } else if rest.iter().all(|a| is_constraint_only(a)) {
            // anyOf of bare constraints on the parent (e.g. alternative `required` sets).
            merged = Map::new();
            change = format!(
                "removed {kw} of {} constraint{}",
                rest.len(),
                if rest.len() == 1 { "" } else { "s" }
            );
            if rest.len() > 1
                || !rest.iter().all(|a| {
                    a.as_object().is_some_and(|m| m.is_empty()) || **a == Value::Bool(true)
                })
            {
                let what: Vec<String> = rest.iter().map(|a| compact(a)).collect();
                lost.push(format!(
                    "the constraint {} of: {}",
                    if kw == "oneOf" {
                        "exactly one"
                    } else {
                        "at least one"
                    },
                    what.join(" | ")
                ));
            }
        } else if rest.len() == 1 {
            merged = rest[0].as_object().cloned().unwrap_or_default();
            change = if nullable {
                format!(
                    "{listing} → {} with nullable",
                    all_types
                        .iter()
                        .find(|t| *t != "null")
                        .cloned()
                        .unwrap_or_default()
                )
            } else {
                format!("{listing} → its only alternative")
            };
        } else if rest.iter().any(|a| is_constraint_only(a)) {
            // An unconstrained alternative makes the whole union unconstrained.
            merged = Map::new();
            change = format!("{listing} → no type (an alternative accepts any value)");
            lost.push("the typed alternatives (the value may be anything)".into());
        } else if rest.iter().all(|a| types_of(a) == ["object"]) {
            let (m, l) = merge_objects(kw, rest);
            merged = m;
            lost.extend(l);
            change = format!("{kw} of {} objects merged into one object", rest.len());
            if self.opts.strategy.notes() {
                let sets: Vec<String> = rest
                    .iter()
                    .map(|a| {
                        let names: Vec<String> = a
                            .get("properties")
                            .and_then(Value::as_object)
                            .map(|p| p.keys().cloned().collect())
                            .unwrap_or_default();
                        format!("{{{}}}", names.join(", "))
                    })
                    .collect();
                note = Some(format!(
                    "{}: {}",
                    if kw == "oneOf" {
                        "exactly one of"
                    } else {
                        "at least one of"
                    },
                    sets.join(" | ")
                ));
            }
        } else {
            let (m, l) = merge_mixed(rest);
            merged = m;
            lost.extend(l);
            change = format!("{listing} → type list");
            if kw == "oneOf"
                && rest
                    .iter()
                    .any(|a| types_of(a).iter().any(|t| t == "integer"))
                && rest
                    .iter()
                    .any(|a| types_of(a).iter().any(|t| t == "number"))
            {
                lost.push("oneOf exclusivity between integer and number".into());
            }
        }
        (merged, change, lost, note)
    }

    /// Normalizes `type` lists (null → nullable; one type → that type; several → strategy).
    fn normalize_type(&mut self, m: &mut Map<String, Value>, path: &str) {
        self.normalize_type_as(m, path, None);
    }

    /// [`Self::normalize_type`], reporting the change as coming from `origin` (the union's
    /// listing and what merging it already lost) when given.
    fn normalize_type_as(
        &mut self,
        m: &mut Map<String, Value>,
        path: &str,
        origin: Option<(String, Vec<String>)>,
    ) {
        let Some(Value::Array(list)) = m.get("type") else {
            return;
        };
        let list = list.clone();
        let mut names: Vec<String> = Vec::new();
        let mut junk = Vec::new();
        for t in &list {
            match t.as_str() {
                Some(s) if !names.iter().any(|n| n == s) => names.push(s.to_string()),
                Some(_) => {}
                None => junk.push(compact(t)),
            }
        }
        let nullable = names.iter().any(|n| n == "null");
        let rest: Vec<String> = names.iter().filter(|n| *n != "null").cloned().collect();
        let (listing, mut lost) =
            origin.unwrap_or_else(|| (format!("type [{}]", names.join(", ")), Vec::new()));
        if !junk.is_empty() {
            lost.push(format!("non-string type entries {}", junk.join(", ")));
        }
        let change;
        match rest.len() {
            0 => {
                if nullable {
                    m.insert("type".into(), Value::String("null".into()));
                    change = format!("{listing} → type null");
                } else {
                    m.remove("type");
                    change = format!(
                        "removed an empty type list {}",
                        compact(&Value::Array(list.clone()))
                    );
                }
            }
            1 => {
                m.insert("type".into(), Value::String(rest[0].clone()));
                change = if nullable {
                    format!("{listing} → type {} with nullable", rest[0])
                } else {
                    format!("{listing} → type {}", rest[0])
                };
            }
            _ => match self.opts.strategy {
                Strategy::TypeList => {
                    let canon: Vec<Value> = rest.iter().cloned().map(Value::String).collect();
                    if !nullable && junk.is_empty() && canon == list {
                        return; // already in final form
                    }
                    m.insert("type".into(), Value::Array(canon));
                    change = if nullable {
                        format!("{listing} → type list [{}] with nullable", rest.join(", "))
                    } else {
                        format!("{listing} → type list [{}]", rest.join(", "))
                    };
                }
                Strategy::FirstType => {
                    m.insert("type".into(), Value::String(rest[0].clone()));
                    change = format!("{listing} → type {} (first-type)", rest[0]);
                    lost.push(format!(
                        "the alternative type{} {}",
                        if rest.len() > 2 { "s" } else { "" },
                        rest[1..].join(", ")
                    ));
                }
                Strategy::FirstTypeWithNote => {
                    m.insert("type".into(), Value::String(rest[0].clone()));
                    add_note(m, &join_or(&rest));
                    change = format!(
                        "{listing} → type {}, alternatives noted in the description (first-type-with-note)",
                        rest[0]
                    );
                    lost.push(format!(
                        "{} as schema type{} (written in the description only)",
                        rest[1..].join(", "),
                        if rest.len() > 2 { "s" } else { "" }
                    ));
                }
                Strategy::StringWithNote => {
                    m.insert("type".into(), Value::String("string".into()));
                    add_note(m, &join_or(&rest));
                    let others: Vec<String> =
                        rest.iter().filter(|t| *t != "string").cloned().collect();
                    change = format!(
                        "{listing} → type string, alternatives noted in the description (string-with-note)"
                    );
                    lost.push(format!(
                        "{} as schema type{} (the value arrives as a string)",
                        others.join(", "),
                        if others.len() > 1 { "s" } else { "" }
                    ));
                }
            },
        }
        if nullable && !rest.is_empty() {
            m.insert("nullable".into(), Value::Bool(true));
        }
        self.push(
            path,
            change,
            if lost.is_empty() {
                None
            } else {
                Some(lost.join("; "))
            },
        );
    }
}

fn conflicts_note(conflicts: &[String], suffix: &str) -> Option<String> {
    if conflicts.is_empty() {
        None
    } else if suffix.is_empty() {
        Some(conflicts.join("; "))
    } else {
        Some(
            conflicts
                .iter()
                .map(|c| format!("{c} {suffix}"))
                .collect::<Vec<_>>()
                .join("; "),
        )
    }
}

/// allOf semantics: both must hold. `a` wins for annotations; `properties` and `required` are
/// united, `type` and `enum` intersected. Conflicts are appended to `conflicts`.
fn merge_all(
    a: &Map<String, Value>,
    b: &Map<String, Value>,
    conflicts: &mut Vec<String>,
) -> Map<String, Value> {
    let mut out = a.clone();
    for (k, bv) in b {
        let Some(av) = a.get(k) else {
            out.insert(k.clone(), bv.clone());
            continue;
        };
        if av == bv {
            continue;
        }
        match k.as_str() {
            "properties" | "patternProperties" => {
                if let (Value::Object(ap), Value::Object(bp)) = (av, bv) {
                    let mut merged = ap.clone();
                    for (name, bs) in bp {
                        match (ap.get(name), bs) {
                            (Some(Value::Object(x)), Value::Object(y)) => {
                                let m = merge_all(x, y, conflicts);
                                merged.insert(name.clone(), Value::Object(m));
                            }
                            (Some(_), _) => {}
                            (None, _) => {
                                merged.insert(name.clone(), bs.clone());
                            }
                        }
                    }
                    out.insert(k.clone(), Value::Object(merged));
                }
            }
            "required" => {
                if let (Value::Array(x), Value::Array(y)) = (av, bv) {
                    let mut r = x.clone();
                    for v in y {
                        if !r.contains(v) {
                            r.push(v.clone());
                        }
                    }
                    out.insert(k.clone(), Value::Array(r));
                }
            }
            "type" => {
                let ta = type_set(av);
                let tb = type_set(bv);
                let mut both: Vec<String> = ta
                    .iter()
                    .filter(|t| {
                        tb.contains(t)
                            || (t.as_str() == "integer" && tb.iter().any(|x| x == "number"))
                    })
                    .cloned()
                    .collect();
                for t in &tb {
                    if t == "integer" && ta.iter().any(|x| x == "number") && !both.contains(t) {
                        both.push(t.clone());
                    }
                }
                let has_int = both.iter().any(|x| x == "integer");
                both.retain(|t| !(t == "number" && has_int && !(ta.contains(t) && tb.contains(t))));
                match both.len() {
                    0 => conflicts.push(format!(
                        "type {} (conflicts with {})",
                        compact(bv),
                        compact(av)
                    )),
                    1 => {
                        out.insert(k.clone(), Value::String(both[0].clone()));
                    }
                    _ => {
                        out.insert(
                            k.clone(),
                            Value::Array(both.into_iter().map(Value::String).collect()),
                        );
                    }
                }
            }
            "enum" => {
                if let (Value::Array(x), Value::Array(y)) = (av, bv) {
                    let both: Vec<Value> = x.iter().filter(|v| y.contains(v)).cloned().collect();
                    out.insert(k.clone(), Value::Array(both));
                }
            }
            "items" => {
                if let (Value::Object(x), Value::Object(y)) = (av, bv) {
                    out.insert(k.clone(), Value::Object(merge_all(x, y, conflicts)));
                }
            }
            _ => conflicts.push(format!("{k} {}", compact(bv))),
        }
    }
    out
}

fn type_set(v: &Value) -> Vec<String> {
    match v {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        _ => Vec::new(),
    }
}

/// Merges object alternatives: union of properties, intersection of required.
fn merge_objects(kw: &str, alts: &[&Value]) -> (Map<String, Value>, Vec<String>) {
    let mut out = Map::new();
    out.insert("type".into(), Value::String("object".into()));
    let mut props = Map::new();
    let mut lost = Vec::new();
    let mut required: Option<Vec<Value>> = None;
    let mut sets = Vec::new();
    for a in alts {
        let Some(m) = a.as_object() else { continue };
        let names: Vec<String> = m
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default();
        let req: Vec<Value> = m
            .get("required")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        sets.push(format!("{{{}}}", names.join(", ")));
        if let Some(p) = m.get("properties").and_then(Value::as_object) {
            for (name, s) in p {
                match props.get(name) {
                    None => {
                        props.insert(name.clone(), s.clone());
                    }
                    Some(prev) if prev == s => {}
                    Some(_) => lost.push(format!(
                        "the other alternative's definition of property `{name}`"
                    )),
                }
            }
        }
        required = Some(match required {
            None => req,
            Some(r) => r.into_iter().filter(|x| req.contains(x)).collect(),
        });
        for (k, v) in m {
            if matches!(k.as_str(), "type" | "properties" | "required") {
                continue;
            }
            match out.get(k) {
                None => {
                    out.insert(k.clone(), v.clone());
                }
                Some(prev) if prev == v => {}
                Some(_) => lost.push(format!("{k} {} of an alternative", compact(v))),
            }
        }
    }
    out.insert("properties".into(), Value::Object(props));
    if let Some(r) = required.filter(|r| !r.is_empty()) {
        out.insert("required".into(), Value::Array(r));
    }
    let rel = if kw == "oneOf" {
        "exactly one of"
    } else {
        "at least one of"
    };
    lost.insert(
        0,
        format!(
            "mutual exclusivity ({rel} {}; the required properties of each alternative)",
            sets.join(" | ")
        ),
    );
    (out, lost)
}

/// Merges alternatives of different types into one node with a type list.
fn merge_mixed(alts: &[&Value]) -> (Map<String, Value>, Vec<String>) {
    let mut out = Map::new();
    let mut types: Vec<String> = Vec::new();
    let mut lost = Vec::new();
    let all_enum = alts
        .iter()
        .all(|a| a.get("enum").is_some_and(Value::is_array) || a.get("const").is_some());
    let mut enum_vals: Vec<Value> = Vec::new();
    for a in alts {
        let Some(m) = a.as_object() else { continue };
        for t in types_of(a) {
            if !types.contains(&t) {
                types.push(t);
            }
        }
        if all_enum {
            let vals = m
                .get("enum")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_else(|| m.get("const").cloned().into_iter().collect());
            for v in vals {
                if !enum_vals.contains(&v) {
                    enum_vals.push(v);
                }
            }
        }
        for (k, v) in m {
            match k.as_str() {
                "type" | "nullable" => {}
                "enum" | "const" if all_enum => {}
                "enum" | "const" => lost.push(format!(
                    "the {k} {} of the {} alternative",
                    compact(v),
                    types_of(a).join("|")
                )),
                _ => match out.get(k) {
                    None => {
                        out.insert(k.clone(), v.clone());
                    }
                    Some(prev) if prev == v => {}
                    Some(_) => lost.push(format!(
                        "{k} {} of the {} alternative",
                        compact(v),
                        types_of(a).join("|")
                    )),
                },
            }
        }
    }
    if all_enum && !enum_vals.is_empty() {
        out.insert("enum".into(), Value::Array(enum_vals));
    }
    types.retain(|t| t != "null");
    // integer alongside number is subsumed by number.
    if types.iter().any(|t| t == "number") {
        types.retain(|t| t != "integer");
    }
    let tv = if types.len() == 1 {
        Value::String(types[0].clone())
    } else {
        Value::Array(types.into_iter().map(Value::String).collect())
    };
    out.insert("type".into(), tv);
    (out, lost)
}

/// True when `v` (a flattened schema) still contains `anyOf`, `oneOf`, `allOf` or `$ref` in a
/// schema position (used by tests and by `flatten --check`-style callers).
pub fn has_combinators(v: &Value) -> bool {
    let Value::Object(m) = v else { return false };
    for (k, val) in m {
        if matches!(k.as_str(), "anyOf" | "oneOf" | "allOf" | "$ref") {
            return true;
        }
        if SCHEMA_MAPS.contains(&k.as_str()) || matches!(k.as_str(), "$defs" | "definitions") {
            if let Value::Object(mm) = val
                && mm.values().any(has_combinators)
            {
                return true;
            }
        } else if SCHEMA_ARRAYS.contains(&k.as_str()) && val.is_array() {
            if val
                .as_array()
                .is_some_and(|a| a.iter().any(has_combinators))
            {
                return true;
            }
        } else if SCHEMA_VALUED.contains(&k.as_str()) && has_combinators(val) {
            return true;
        }
    }
    false
}
