//! Rendering a chat template as transformers' `apply_chat_template` does, with minijinja.
//!
//! The environment mirrors transformers (`utils/chat_template_utils.py`,
//! `_compile_jinja_template`): Jinja2 `ImmutableSandboxedEnvironment(trim_blocks=True,
//! lstrip_blocks=True, extensions=[AssistantTracker, loopcontrols])`, a `tojson` filter that is
//! `json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)`, the
//! globals `raise_exception(msg)` and `strftime_now(fmt)`, and `{% generation %}` blocks that
//! render their body. Where minijinja and Python Jinja2 differ in printing values, Python wins:
//! `{{ x }}`, `string`, `upper`, `lower`, `join` use Python `str()` (`None`, `True`,
//! `['a', 'b']`), floats print as Python `repr`. Python string methods (`.strip()`,
//! `.split()`, `.items()`, …) come from minijinja-contrib's pycompat callback.
//!
//! Hostile templates are bounded: a fuel limit (instructions), a recursion limit, and an output
//! cap each stop rendering with a [`RenderError`] of kind [`RenderErrorKind::Limit`].

use std::io;

use minijinja::value::{Kwargs, Value as JValue, ValueKind};
use minijinja::{Environment, Error, ErrorKind, State, UndefinedBehavior};

use super::profile::{Profile, VocabFlags};
use super::pyfmt::{self, JsonOptions};

/// Name under which the template is compiled when [`RenderOptions::name`] is unset.
pub const DEFAULT_NAME: &str = "chat_template";

/// Rendering knobs. `Default` gives: no clock (`strftime_now` renders the Unix epoch), lenient
/// undefined (as Jinja2's default `Undefined`), the default [`crate::budget::Budget`] (4 000 000
/// fuel, recursion limit 250), output cap 8 MiB.
#[derive(Debug, Clone)]
pub struct RenderOptions {
    /// The clock `strftime_now` reads (`--now RFC3339`). `None` renders 1970-01-01T00:00:00Z
    /// so renders stay reproducible (analysis is pure: no clock is read here).
    pub now: Option<time::OffsetDateTime>,
    /// Strict mode: printing, iterating or indexing an undefined variable is an error with the
    /// template line and column (testing it with `if`/`is defined` stays allowed; minijinja
    /// `UndefinedBehavior::SemiStrict`).
    pub strict: bool,
    /// Name used in error messages (a file name or URL).
    pub name: Option<String>,
    /// Fuel: VM instructions plus created bytes / 64 a render may spend (`minijinja` fuel; the
    /// memory budget, see [`crate::budget`]).
    pub fuel: u64,
    /// Maximum nesting of macro calls / includes / recursive loops.
    pub recursion_limit: usize,
    /// Output cap in bytes.
    pub max_output: usize,
    /// The render profile ([`Profile`]); `None`: the caller's default (a template source's
    /// profile, else transformers).
    pub profile: Option<Profile>,
    /// llama.cpp profile only: whether the engine's vocabulary adds BOS / EOS itself (a leading
    /// `bos_token` printed by the template is then removed, as llama.cpp does).
    pub vocab: VocabFlags,
}

impl Default for RenderOptions {
    fn default() -> Self {
        RenderOptions {
            now: None,
            strict: false,
            name: None,
            fuel: crate::budget::Budget::default().fuel,
            recursion_limit: crate::budget::Budget::default().recursion_limit,
            max_output: 8 << 20,
            profile: None,
            vocab: VocabFlags::default(),
        }
    }
}

/// What went wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RenderErrorKind {
    /// The template does not parse.
    Syntax,
    /// Strict mode: an undefined variable was used.
    Undefined,
    /// The template called `raise_exception(msg)` (it rejects the conversation).
    Raised,
    /// Fuel, recursion or output cap exhausted (a hostile or looping template).
    Limit,
    /// Any other evaluation error (unknown filter, bad operand types, …).
    Eval,
}

/// A render failure with its position in the template (1-based line and column, column in
/// characters) when known.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, thiserror::Error)]
#[error("{}", self.display())]
pub struct RenderError {
    pub kind: RenderErrorKind,
    /// The engine's message (for `Raised`, exactly the template's message).
    pub message: String,
    /// Template name (file, URL or [`DEFAULT_NAME`]).
    pub name: String,
    /// 1-based line.
    pub line: Option<usize>,
    /// 1-based column in characters.
    pub column: Option<usize>,
}

impl RenderError {
    fn display(&self) -> String {
        let pos = match (self.line, self.column) {
            (Some(l), Some(c)) => format!("{}:{l}:{c}", self.name),
            (Some(l), None) => format!("{}:{l}", self.name),
            _ => self.name.clone(),
        };
        format!("{pos}: {}", self.message)
    }
}

/// Maps a byte offset in the text minijinja compiled to the offset in the template as given
/// (a profile that rewrites the source before compiling reports errors at the template's own
/// positions through it).
pub type SourceMap = Box<dyn Fn(usize) -> usize + Send + Sync>;

/// A template compiled by the core Jinja environment (the module docs), ready to render many
/// contexts. Profiles build on it ([`super::CompiledTemplate`]): this type knows no request
/// handling, only contexts.
pub struct JinjaTemplate {
    env: Environment<'static>,
    name: String,
    source: String,
    max_output: usize,
    /// The render budget's fuel, for the message when it runs out.
    fuel: u64,
    /// When the compiled text is a rewrite of `source`: its offset map.
    offsets: Option<SourceMap>,
}

impl std::fmt::Debug for JinjaTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JinjaTemplate")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// Rewrites Jinja2's `{% generation %}` / `{% endgeneration %}` (transformers' AssistantTracker
/// extension) to `{% if true %}` / `{% endif %}`, padded with spaces so that byte offsets,
/// lines and columns of everything else stay the same.
pub fn rewrite_generation_blocks(src: &str) -> String {
    let mut out = String::with_capacity(src.len());
    let mut rest = src;
    while let Some(i) = rest.find("{%") {
        out.push_str(&rest[..i]);
        let tag = &rest[i..];
        let Some(end) = tag.find("%}") else {
            out.push_str(tag);
            return out;
        };
        let inner = &tag[2..end];
        let body = inner
            .trim_start_matches(['-', '+'])
            .trim_end_matches(['-', '+']);
        let word = body.trim();
        let replacement = match word {
            "generation" => Some("if true   "),
            "endgeneration" => Some("endif        "),
            _ => None,
        };
        match replacement {
            Some(r) => {
                let start = inner.find(word).unwrap_or(0);
                out.push_str("{%");
                out.push_str(&inner[..start]);
                out.push_str(r);
                out.push_str(&inner[start + word.len()..]);
                out.push_str("%}");
            }
            None => out.push_str(&tag[..end + 2]),
        }
        rest = &tag[end + 2..];
    }
    out.push_str(rest);
    out
}

/// 1-based line and column (in characters) of byte `offset` in `src`.
pub fn line_col(src: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(src.len());
    let before = &src[..super::divergence::floor_boundary(src, offset)];
    let line = before.matches('\n').count() + 1;
    let col = before
        .rsplit('\n')
        .next()
        .map(|l| l.chars().count())
        .unwrap_or(0)
        + 1;
    (line, col)
}

impl JinjaTemplate {
    /// Compiles `source` with the environment described in the module docs.
    /// Errors: [`RenderErrorKind::Syntax`] with line and column.
    pub fn compile(source: &str, opts: &RenderOptions) -> Result<JinjaTemplate, RenderError> {
        JinjaTemplate::compile_with(source, source, None, opts, |_| {})
    }

    /// Compiles `compiled` (the text minijinja reads: `source` itself, or a profile's rewrite
    /// of it whose offsets `offsets` maps back) in the module docs' environment, `configure`d
    /// further by the profile before the template is added. [`Self::source`] is `source`;
    /// errors are reported at `source`'s lines and columns.
    pub fn compile_with(
        source: &str,
        compiled: &str,
        offsets: Option<SourceMap>,
        opts: &RenderOptions,
        configure: impl FnOnce(&mut Environment<'static>),
    ) -> Result<JinjaTemplate, RenderError> {
        let name = opts.name.clone().unwrap_or_else(|| DEFAULT_NAME.to_owned());
        let mut env = build_env(opts);
        configure(&mut env);
        let rewritten = rewrite_generation_blocks(compiled);
        if let Err(e) = env.add_template_owned(name.clone(), rewritten) {
            return Err(convert_error(
                &e,
                &name,
                source,
                offsets.as_ref(),
                opts.fuel,
            ));
        }
        Ok(JinjaTemplate {
            env,
            name,
            source: source.to_owned(),
            max_output: opts.max_output,
            fuel: opts.fuel,
            offsets,
        })
    }

    /// The template name used in messages.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Renders with an explicit JSON context object.
    pub fn render_context(&self, ctx: &serde_json::Value) -> Result<String, RenderError> {
        self.render_value(pyfmt::json_to_value(ctx))
    }

    /// [`Self::render_context`] (the name llama.cpp's pipeline uses).
    pub fn render_plain(&self, ctx: &serde_json::Value) -> Result<String, RenderError> {
        self.render_context(ctx)
    }

    /// Renders with a context of (name, value) pairs.
    pub fn render_values(&self, vars: Vec<(String, JValue)>) -> Result<String, RenderError> {
        let map: std::collections::BTreeMap<String, JValue> = vars.into_iter().collect();
        self.render_value(JValue::from(map))
    }

    fn render_value(&self, ctx: JValue) -> Result<String, RenderError> {
        let tmpl = self.env.get_template(&self.name).map_err(|e| {
            convert_error(
                &e,
                &self.name,
                &self.source,
                self.offsets.as_ref(),
                self.fuel,
            )
        })?;
        let mut w = CapWriter {
            buf: Vec::new(),
            cap: self.max_output,
            exceeded: false,
        };
        let res = tmpl.render_captured_to(ctx, &mut w);
        if w.exceeded {
            return Err(RenderError {
                kind: RenderErrorKind::Limit,
                message: format!(
                    "output exceeds the cap of {} bytes; rendering stopped",
                    self.max_output
                ),
                name: self.name.clone(),
                line: None,
                column: None,
            });
        }
        match res {
            Ok(_) => String::from_utf8(w.buf).map_err(|e| RenderError {
                kind: RenderErrorKind::Eval,
                message: format!("output is not UTF-8: {e}"),
                name: self.name.clone(),
                line: None,
                column: None,
            }),
            Err(e) => Err(convert_error(
                &e,
                &self.name,
                &self.source,
                self.offsets.as_ref(),
                self.fuel,
            )),
        }
    }

    /// The template source as given (before the `generation` rewrite).
    pub fn source(&self) -> &str {
        &self.source
    }
}

struct CapWriter {
    buf: Vec<u8>,
    cap: usize,
    exceeded: bool,
}

impl io::Write for CapWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if self.buf.len() + data.len() > self.cap {
            self.exceeded = true;
            return Err(io::Error::other("output cap exceeded"));
        }
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn convert_error(
    e: &Error,
    name: &str,
    source: &str,
    offsets: Option<&SourceMap>,
    fuel: u64,
) -> RenderError {
    // The innermost error with a position is the most useful one.
    let kind = match e.kind() {
        ErrorKind::SyntaxError | ErrorKind::InvalidDelimiter | ErrorKind::UnknownBlock => {
            RenderErrorKind::Syntax
        }
        ErrorKind::UndefinedError => RenderErrorKind::Undefined,
        ErrorKind::OutOfFuel => RenderErrorKind::Limit,
        ErrorKind::InvalidOperation
            if e.detail()
                .is_some_and(|d| d.starts_with("raise_exception: ")) =>
        {
            RenderErrorKind::Raised
        }
        ErrorKind::InvalidOperation if e.detail().is_some_and(|d| d.contains("recursion")) => {
            RenderErrorKind::Limit
        }
        ErrorKind::InvalidOperation
            if e.detail().is_some_and(|d| {
                d.starts_with(crate::budget::MARK) || crate::budget::engine_cap_message(d).is_some()
            }) =>
        {
            RenderErrorKind::Limit
        }
        _ => RenderErrorKind::Eval,
    };
    let mut message = match (kind, e.detail()) {
        (RenderErrorKind::Raised, Some(d)) => d.trim_start_matches("raise_exception: ").to_owned(),
        (RenderErrorKind::Limit, _) if e.kind() == ErrorKind::OutOfFuel => {
            crate::budget::exhausted_message(fuel)
        }
        (RenderErrorKind::Limit, Some(d)) if d.starts_with(crate::budget::MARK) => d.to_owned(),
        (RenderErrorKind::Limit, Some(d)) if crate::budget::engine_cap_message(d).is_some() => {
            crate::budget::engine_cap_message(d).unwrap_or_default()
        }
        (_, Some(d)) => format!("{}: {d}", e.kind()),
        (_, None) => e.kind().to_string(),
    };
    if kind == RenderErrorKind::Raised {
        message = format!("template raised an exception: {message}");
    }
    let (line, column) = match e.range() {
        Some(r) => {
            let start = offsets.map_or(r.start, |o| o(r.start));
            let (l, c) = line_col(source, start);
            (Some(l), Some(c))
        }
        None => (e.line(), None),
    };
    RenderError {
        kind,
        message,
        name: e
            .name()
            .map(str::to_owned)
            .unwrap_or_else(|| name.to_owned()),
        line,
        column,
    }
}

fn build_env(opts: &RenderOptions) -> Environment<'static> {
    let mut env = Environment::new();
    let syntax = minijinja::syntax::SyntaxConfig::builder()
        .trim_blocks(true)
        .lstrip_blocks(true)
        .build()
        .expect("default delimiters are valid");
    env.set_syntax(syntax);
    env.set_undefined_behavior(if opts.strict {
        UndefinedBehavior::SemiStrict
    } else {
        UndefinedBehavior::Lenient
    });
    // the one budget every environment is built with (budget.rs, seam 3); filters below
    // that build more than they are given check it before allocating
    crate::budget::install(
        &mut env,
        &crate::budget::Budget {
            fuel: opts.fuel,
            recursion_limit: opts.recursion_limit,
        },
    );
    env.set_unknown_method_callback(crate::budget::bounded_method);
    env.set_auto_escape_callback(|_| minijinja::AutoEscape::None);
    env.set_formatter(|out, state, value| {
        if value.is_undefined() {
            return minijinja::escape_formatter(out, state, value);
        }
        let text = match value.as_str() {
            Some(s) => {
                return out
                    .write_str(s)
                    .map_err(|_| Error::from(ErrorKind::WriteFailure));
            }
            None => {
                crate::budget::ensure_print(state, value, 0, 0, "printing a value")?;
                pyfmt::py_str(value)
            }
        };
        out.write_str(&text)
            .map_err(|_| Error::from(ErrorKind::WriteFailure))
    });
    env.add_filter("tojson", tojson);
    env.add_filter("indent", indent);
    env.add_filter("upper", |state: &State, v: &JValue| {
        crate::budget::ensure_print(state, v, 0, 0, "upper")?;
        Ok::<_, Error>(pyfmt::py_str(v).to_uppercase())
    });
    env.add_filter("lower", |state: &State, v: &JValue| {
        crate::budget::ensure_print(state, v, 0, 0, "lower")?;
        Ok::<_, Error>(pyfmt::py_str(v).to_lowercase())
    });
    env.add_filter("string", |state: &State, v: &JValue| {
        crate::budget::ensure_print(state, v, 0, 0, "string")?;
        Ok::<_, Error>(JValue::from(pyfmt::py_str(v)))
    });
    env.add_filter("join", join);
    env.add_test("iterable", |v: &JValue| match v.kind() {
        ValueKind::Undefined
        | ValueKind::String
        | ValueKind::Seq
        | ValueKind::Map
        | ValueKind::Iterable
        | ValueKind::Bytes => true,
        ValueKind::Plain => v.try_iter().is_ok(),
        _ => false,
    });
    env.add_test("sequence", |v: &JValue| {
        matches!(
            v.kind(),
            ValueKind::Undefined
                | ValueKind::String
                | ValueKind::Seq
                | ValueKind::Map
                | ValueKind::Bytes
        )
    });
    env.add_test("number", |v: &JValue| {
        matches!(v.kind(), ValueKind::Number | ValueKind::Bool)
    });
    env.add_function(
        "raise_exception",
        |msg: Option<JValue>| -> Result<JValue, Error> {
            let m = msg.map(|m| pyfmt::py_str(&m)).unwrap_or_default();
            Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("raise_exception: {m}"),
            ))
        },
    );
    let now = opts.now.unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    env.add_function("strftime_now", move |fmt: String| {
        pyfmt::strftime(&now, &fmt)
    });
    env
}

/// transformers' `tojson`: `json.dumps(x, ensure_ascii=False, indent=None, separators=None,
/// sort_keys=False)` with those keyword arguments (and `ensure_ascii` positionally).
fn tojson(
    state: &State,
    value: &JValue,
    ensure_ascii: Option<JValue>,
    kwargs: Kwargs,
) -> Result<JValue, Error> {
    let mut opts = JsonOptions::default();
    let names = ["ensure_ascii", "indent", "separators", "sort_keys"];
    let get = |i: usize| -> Result<Option<JValue>, Error> {
        if i == 0 && ensure_ascii.is_some() {
            return Ok(ensure_ascii.clone());
        }
        kwargs.get::<Option<JValue>>(names[i])
    };
    if let Some(v) = get(0)? {
        opts.ensure_ascii = v.is_true();
    }
    if let Some(v) = get(1)? {
        opts.indent = match v.kind() {
            ValueKind::None | ValueKind::Undefined => None,
            ValueKind::String => Some(v.as_str().unwrap_or_default().to_owned()),
            _ => {
                let n = v.as_i64().ok_or_else(|| {
                    Error::new(
                        ErrorKind::InvalidOperation,
                        "tojson: indent must be an integer or a string",
                    )
                })?;
                let n = n.max(0) as u64;
                crate::budget::ensure_bytes(state, n, "tojson indent")?;
                Some(" ".repeat(n as usize))
            }
        };
    }
    if let Some(v) = get(2)?
        && !v.is_none()
        && !v.is_undefined()
    {
        let parts: Vec<JValue> = v.try_iter()?.collect();
        if parts.len() != 2 {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                "tojson: separators must be a pair of strings",
            ));
        }
        opts.separators = Some((pyfmt::py_str(&parts[0]), pyfmt::py_str(&parts[1])));
    }
    if let Some(v) = get(3)? {
        opts.sort_keys = v.is_true();
    }
    kwargs.assert_all_used()?;
    let per_item = opts
        .separators
        .as_ref()
        .map_or(4, |(a, b)| a.len() + b.len());
    let per_level = opts.indent.as_ref().map_or(0, String::len);
    crate::budget::ensure_print(state, value, per_level, per_item, "tojson")?;
    pyfmt::py_json_dumps(value, &opts)
        .map(JValue::from)
        .map_err(|m| Error::new(ErrorKind::InvalidOperation, format!("tojson: {m}")))
}

/// Jinja2's `indent(width=4, first=False, blank=False)`; `width` may be a string.
fn indent(
    state: &State,
    value: &JValue,
    args: minijinja::value::Rest<minijinja::value::ValueOrKwargs>,
) -> Result<JValue, Error> {
    // positional and keyword arguments split by hand: with the state, one parameter too many
    // for minijinja's typed signatures
    let args = args.into_values();
    let (width, first, blank, kwargs): (Option<JValue>, Option<bool>, Option<bool>, Kwargs) =
        minijinja::value::from_args(&args)?;
    let width = match width {
        Some(w) => Some(w),
        None => kwargs.get::<Option<JValue>>("width")?,
    };
    let first = match first {
        Some(f) => f,
        None => kwargs.get::<Option<bool>>("first")?.unwrap_or(false),
    };
    let blank = match blank {
        Some(b) => b,
        None => kwargs.get::<Option<bool>>("blank")?.unwrap_or(false),
    };
    kwargs.assert_all_used()?;
    crate::budget::ensure_print(state, value, 0, 0, "indent")?;
    let text = pyfmt::py_str(value);
    let lines = text.bytes().filter(|&b| b == b'\n').count() as u64 + 1;
    let width_bytes = match &width {
        None => 4,
        Some(w) if w.kind() == ValueKind::String => w.as_str().map_or(0, str::len) as u64,
        Some(w) => w.as_i64().unwrap_or(4).max(0) as u64,
    };
    crate::budget::ensure_bytes(
        state,
        width_bytes
            .saturating_mul(lines)
            .saturating_add(text.len() as u64),
        "indent",
    )?;
    let indention = match width {
        None => "    ".to_owned(),
        Some(w) if w.kind() == ValueKind::String => w.as_str().unwrap_or_default().to_owned(),
        Some(w) => " ".repeat(w.as_i64().unwrap_or(4).max(0) as usize),
    };
    Ok(JValue::from(pyfmt::jinja_indent(
        &text, &indention, first, blank,
    )))
}

/// Jinja2's `join(d="", attribute=None)`: items converted with Python `str()`.
fn join(state: &State, value: &JValue, d: Option<String>, kwargs: Kwargs) -> Result<String, Error> {
    let attribute: Option<String> = kwargs.get("attribute")?;
    let d = match d {
        Some(d) => d,
        None => kwargs.get::<Option<String>>("d")?.unwrap_or_default(),
    };
    kwargs.assert_all_used()?;
    if value.is_undefined() || value.is_none() {
        return Ok(String::new());
    }
    if let Some(s) = value.as_str() {
        let n = s.chars().count() as u64;
        crate::budget::ensure_bytes(
            state,
            n.saturating_mul(d.len() as u64)
                .saturating_add(s.len() as u64),
            "join",
        )?;
        return Ok(s.chars().map(String::from).collect::<Vec<_>>().join(&d));
    }
    let mut parts = Vec::new();
    let mut size = 0u64;
    for item in value.try_iter()? {
        let item = match &attribute {
            Some(a) => {
                let mut cur = item;
                for seg in a.split('.') {
                    cur = match seg.parse::<usize>() {
                        Ok(i) if cur.kind() == ValueKind::Seq => cur.get_item_by_index(i)?,
                        _ => cur.get_attr(seg)?,
                    };
                }
                cur
            }
            None => item,
        };
        crate::budget::ensure_print(state, &item, 0, 0, "join")?;
        let part = pyfmt::py_str(&item);
        // the result so far, this item and one more separator must fit the budget
        size = size
            .saturating_add(part.len() as u64)
            .saturating_add(d.len() as u64);
        crate::budget::ensure_bytes(state, size, "join")?;
        parts.push(part);
    }
    Ok(parts.join(&d))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn r(src: &str, ctx: serde_json::Value) -> Result<String, RenderError> {
        JinjaTemplate::compile(src, &RenderOptions::default())?.render_context(&ctx)
    }

    #[test]
    fn python_printing() {
        // Expected values: Python Jinja2 3.1 output for the same template and context.
        let out = r(
            "{{ x }}|{{ n }}|{{ b }}|{{ f }}|{{ l | upper }}|{{ l | join(',') }}",
            json!({"x": {"a": [1, null]}, "n": null, "b": true, "f": 1e16, "l": ["a", true]}),
        )
        .unwrap();
        assert_eq!(out, "{'a': [1, None]}|None|True|1e+16|['A', TRUE]|a,True");
    }

    #[test]
    fn tojson_keywords() {
        // Python: json.dumps({"b": 1, "a": [1.5, "é"]}, ensure_ascii=True, indent=2, sort_keys=True)
        let out = r("{{ x | tojson(ensure_ascii=true, indent=2, sort_keys=true) }}|{{ x | tojson(separators=(',', ':')) }}|{{ x | tojson }}", json!({"x": {"b": 1, "a": [1.5, "é"]}})).unwrap();
        assert_eq!(
            out,
            "{\n  \"a\": [\n    1.5,\n    \"\\u00e9\"\n  ],\n  \"b\": 1\n}|{\"b\":1,\"a\":[1.5,\"é\"]}|{\"b\": 1, \"a\": [1.5, \"é\"]}"
        );
        assert!(r("{{ x | tojson(bogus=1) }}", json!({"x": 1})).is_err());
    }

    #[test]
    fn generation_block_and_trim() {
        let src =
            "{% for m in messages %}\n  {% generation %}{{ m }}{% endgeneration %}\n{% endfor %}";
        assert_eq!(r(src, json!({"messages": ["a", "b"]})).unwrap(), "ab");
        assert_eq!(
            rewrite_generation_blocks("{%- generation -%}x{% endgeneration %}").len(),
            "{%- generation -%}x{% endgeneration %}".len()
        );
    }

    #[test]
    fn raise_exception_and_position() {
        let e = r(
            "line1\n  {{ raise_exception('no system role') }}",
            json!({}),
        )
        .unwrap_err();
        assert_eq!(e.kind, RenderErrorKind::Raised);
        assert!(e.message.contains("no system role"), "{e}");
        assert_eq!(e.line, Some(2));
    }

    #[test]
    fn strict_undefined_has_line_and_column() {
        let opts = RenderOptions {
            strict: true,
            ..Default::default()
        };
        let e = JinjaTemplate::compile("ok\n{% if tools %}x{% endif %}ab {{ missing }}", &opts)
            .unwrap()
            .render_context(&json!({}))
            .unwrap_err();
        assert_eq!(e.kind, RenderErrorKind::Undefined);
        assert_eq!((e.line, e.column), (Some(2), Some(33)), "{e}");
        // lenient: prints nothing
        assert_eq!(r("a{{ missing }}b", json!({})).unwrap(), "ab");
    }

    #[test]
    fn syntax_error_position() {
        let e = JinjaTemplate::compile("a\nb {% if %}", &RenderOptions::default()).unwrap_err();
        assert_eq!(e.kind, RenderErrorKind::Syntax);
        assert_eq!(e.line, Some(2));
    }

    #[test]
    fn hostile_templates_are_bounded() {
        let opts = RenderOptions {
            fuel: 200_000,
            ..Default::default()
        };
        let looping =
            "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}";
        let e = JinjaTemplate::compile(looping, &opts)
            .unwrap()
            .render_context(&json!({}))
            .unwrap_err();
        assert_eq!(e.kind, RenderErrorKind::Limit, "{e}");
        let recursive = "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}";
        let e = r(recursive, json!({})).unwrap_err();
        assert_eq!(e.kind, RenderErrorKind::Limit, "{e}");
        let opts = RenderOptions {
            max_output: 1000,
            ..Default::default()
        };
        let big = "{% for i in range(10000) %}xxxxxxxxxx{% endfor %}";
        let e = JinjaTemplate::compile(big, &opts)
            .unwrap()
            .render_context(&json!({}))
            .unwrap_err();
        assert_eq!(e.kind, RenderErrorKind::Limit, "{e}");
    }

    #[test]
    fn tests_like_jinja2() {
        let out = r("{{ s is sequence }}{{ d is sequence }}{{ n is iterable }}{{ s is iterable }}{{ t is number }}", json!({"s": "x", "d": {}, "n": null, "t": true})).unwrap();
        assert_eq!(out, "TrueTrueFalseTrueTrue");
    }

    #[test]
    fn strftime_now_uses_clock() {
        let opts = RenderOptions {
            now: Some(time::macros::datetime!(2026-11-29 18:00 UTC)),
            ..Default::default()
        };
        let out = JinjaTemplate::compile("{{ strftime_now('%d %b %Y') }}", &opts)
            .unwrap()
            .render_context(&json!({}))
            .unwrap();
        assert_eq!(out, "29 Nov 2026");
    }
}
