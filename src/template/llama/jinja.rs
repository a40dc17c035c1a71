//! llama.cpp's C++ Jinja engine (`common/jinja/`, build 11434) as a minijinja configuration:
//! the places where its value printing, filters and tests differ from Python Jinja2.
//!
//! Source facts reproduced here (file: function):
//! * `runtime.h: gather_string_parts_recursive` — `{{ x }}` prints strings verbatim, integers,
//!   floats and booleans through `as_string`, arrays as the concatenation of their printed items,
//!   and nothing for `none`, undefined and objects.
//! * `value.h: value_float_t::as_string` — `std::to_string(double)` (`%f`) with trailing zeros
//!   removed and one kept after the point: `1.0`, `12.5`, `1e16` → `10000000000000000.0`.
//! * `value.h: value_array_t / value_object_t::as_string`, `value.cpp: value_to_string_repr` —
//!   `['a', 1, True, None]`, `{'k': 'v'}`; a string holding `'` is written as JSON (`"it's"`).
//! * `value.cpp: value_to_json_internal` — `tojson`: numbers through C++ `ostream << double`
//!   (`%g`, 6 significant digits: `1.0` → `1`, `1234567.0` → `1.23457e+06`), `", "`/`": "`
//!   separators (`","` with an indent), non-ASCII kept, `sort_keys=true` not implemented (an
//!   error), `ensure_ascii` escapes after formatting.
//! * `value.cpp`: `string` on an integer or float is `tojson`; `join` accepts strings and numbers
//!   only; `raise_exception(msg)` throws `Jinja Exception: msg`; `is number` is false for
//!   booleans; `is iterable` / `is sequence` are true for undefined, strings, arrays, objects.
//! * `runtime.cpp: member_expression` — an attribute of an undefined value is undefined (no
//!   error), so undefined chains like minijinja's `Chainable`.

use std::fmt::Write as _;

use minijinja::value::{Kwargs, Value as JValue, ValueKind};
use minijinja::{Environment, Error, ErrorKind};

use super::BuildRules;

/// `raise_exception`'s prefix in llama.cpp (`value.cpp`: `"Jinja Exception: " + msg`).
pub const RAISE_PREFIX: &str = "Jinja Exception: ";

/// Reconfigures `env` (already set up as transformers' Jinja2 by the caller) to print, filter
/// and test values as llama.cpp's engine at `rules.build` does. `now` feeds `strftime_now`
/// (llama.cpp formats the server's local time; toolscope renders the given clock, UTC).
pub fn configure(env: &mut Environment<'static>, _rules: &BuildRules, now: time::OffsetDateTime) {
    env.set_undefined_behavior(minijinja::UndefinedBehavior::Chainable);
    env.set_formatter(|out, state, value| {
        if value.as_str().is_none() {
            // the render's memory budget (budget.rs, seam 3) before building the text
            crate::budget::ensure_print(state, value, 0, 0, "printing a value")?;
        }
        let mut s = String::new();
        print_value(&mut s, value, 0);
        out.write_str(&s)
            .map_err(|_| Error::from(ErrorKind::WriteFailure))
    });
    // binary operators with llama.cpp's semantics, called by the rewritten source (rewrite.rs)
    super::ops::install(env);
    env.add_filter("tojson", tojson);
    env.add_filter("string", string_filter);
    env.add_filter("join", join);
    env.add_filter("default", default_filter);
    env.add_filter("d", default_filter);
    env.add_test("number", |v: &JValue| {
        v.kind() == ValueKind::Number && !is_bool(v)
    });
    env.add_test("iterable", |v: &JValue| {
        matches!(
            v.kind(),
            ValueKind::Undefined | ValueKind::String | ValueKind::Seq | ValueKind::Map
        )
    });
    env.add_test("sequence", |v: &JValue| {
        matches!(
            v.kind(),
            ValueKind::Undefined | ValueKind::String | ValueKind::Seq | ValueKind::Map
        )
    });
    env.add_function(
        "raise_exception",
        |msg: Option<JValue>| -> Result<JValue, Error> {
            let m = msg.map(|m| as_string(&m)).unwrap_or_default();
            Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("raise_exception: {RAISE_PREFIX}{m}"),
            ))
        },
    );
    // namespace(): list attributes become mutable lists (`ns.ids.append(x)`, `ns.ids.pop(0)`:
    // llama.cpp arrays are mutable, value.cpp `append`/`pop`; minijinja's are not)
    env.add_function(
        "namespace",
        |defaults: Option<minijinja::value::ValueOrKwargs>| -> Result<JValue, Error> {
            use minijinja::value::ArgType;
            let defaults = match defaults {
                Some(d) => {
                    let v = mutable_lists(&d.into_value());
                    Some(minijinja::value::ValueOrKwargs::from_value(Some(&v))?)
                }
                None => None,
            };
            minijinja::functions::namespace(defaults)
        },
    );
    env.add_function("strftime_now", move |fmt: String| {
        crate::template::pyfmt::strftime(&now, &fmt)
    });
}

/// A list llama.cpp templates can change in place (`append`, `pop`, `extend`, `insert`).
#[derive(Debug, Default)]
pub struct MutList(std::sync::Mutex<Vec<JValue>>);

impl minijinja::value::Object for MutList {
    fn repr(self: &std::sync::Arc<Self>) -> minijinja::value::ObjectRepr {
        minijinja::value::ObjectRepr::Seq
    }

    fn get_value(self: &std::sync::Arc<Self>, key: &JValue) -> Option<JValue> {
        let items = self.0.lock().ok()?;
        let i = key.as_i64()?;
        let i = if i < 0 { items.len() as i64 + i } else { i };
        items.get(usize::try_from(i).ok()?).cloned()
    }

    fn enumerate(self: &std::sync::Arc<Self>) -> minijinja::value::Enumerator {
        minijinja::value::Enumerator::Seq(self.0.lock().map(|l| l.len()).unwrap_or(0))
    }

    fn call_method(
        self: &std::sync::Arc<Self>,
        state: &mut minijinja::State<'_, '_>,
        method: &str,
        args: &[JValue],
    ) -> Result<JValue, Error> {
        let mut items = self
            .0
            .lock()
            .map_err(|_| Error::new(ErrorKind::InvalidOperation, "list poisoned"))?;
        match (method, args) {
            ("append", [v]) => {
                items.push(v.clone());
                Ok(JValue::from(()))
            }
            ("extend", [v]) => {
                // one list slot per item, paid for as it is added (budget.rs)
                for x in v.try_iter()? {
                    crate::budget::charge_work(state, crate::budget::BYTES_PER_ITEM)?;
                    items.push(x);
                }
                Ok(JValue::from(()))
            }
            ("insert", [i, v]) => {
                let i = i.as_i64().unwrap_or(0).clamp(0, items.len() as i64) as usize;
                items.insert(i, v.clone());
                Ok(JValue::from(()))
            }
            ("pop", []) => items
                .pop()
                .ok_or_else(|| Error::new(ErrorKind::InvalidOperation, "pop from empty list")),
            ("pop", [i]) => {
                let n = items.len() as i64;
                let i = i.as_i64().unwrap_or(-1);
                let i = if i < 0 { n + i } else { i };
                if i < 0 || i >= n {
                    return Err(Error::new(
                        ErrorKind::InvalidOperation,
                        "pop index out of range",
                    ));
                }
                Ok(items.remove(i as usize))
            }
            _ => Err(Error::from(ErrorKind::UnknownMethod)),
        }
    }
}

/// Keyword-argument maps with list values → the same with [`MutList`]s.
fn mutable_lists(v: &JValue) -> JValue {
    match v.kind() {
        ValueKind::Seq => JValue::from_object(MutList(std::sync::Mutex::new(
            v.try_iter().map(|it| it.collect()).unwrap_or_default(),
        ))),
        ValueKind::Map => match v.try_iter() {
            Ok(keys) => {
                let pairs: Vec<(JValue, JValue)> = keys
                    .map(|k| {
                        let item = v.get_item(&k).unwrap_or(JValue::UNDEFINED);
                        let item = if item.kind() == ValueKind::Seq {
                            mutable_lists(&item)
                        } else {
                            item
                        };
                        (k, item)
                    })
                    .collect();
                if v.is_kwargs() {
                    JValue::from(minijinja::value::Kwargs::from_iter(
                        pairs
                            .into_iter()
                            .filter_map(|(k, v)| Some((k.as_str()?.to_owned(), v))),
                    ))
                } else {
                    JValue::from_iter(pairs)
                }
            }
            Err(_) => v.clone(),
        },
        _ => v.clone(),
    }
}

fn is_bool(v: &JValue) -> bool {
    v.kind() == ValueKind::Bool
}

/// `{{ x }}` as `gather_string_parts_recursive` prints it.
pub fn print_value(out: &mut String, v: &JValue, depth: usize) {
    if depth > 200 {
        return;
    }
    match v.kind() {
        ValueKind::String => out.push_str(v.as_str().unwrap_or_default()),
        ValueKind::Bool => out.push_str(if v.is_true() { "True" } else { "False" }),
        ValueKind::Number => out.push_str(&number_string(v)),
        ValueKind::Seq | ValueKind::Iterable => {
            if let Ok(it) = v.try_iter() {
                for item in it {
                    print_value(out, &item, depth + 1);
                }
            }
        }
        // none, undefined, objects (and macros, namespaces): nothing
        _ => {}
    }
}

/// An integer as `std::to_string(int64_t)`, a float as `value_float_t::as_string`.
pub fn number_string(v: &JValue) -> String {
    if v.is_integer() {
        return v.to_string();
    }
    match f64::try_from(v.clone()) {
        Ok(f) => float_as_string(f),
        Err(_) => v.to_string(),
    }
}

/// `value_float_t::as_string`: `std::to_string` (`%f`), trailing zeros removed, one zero kept
/// after a bare point.
pub fn float_as_string(f: f64) -> String {
    if f.is_nan() {
        return if f.is_sign_negative() { "-nan" } else { "nan" }.into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf" } else { "-inf" }.into();
    }
    let mut s = format!("{f:.6}");
    while s.ends_with('0') {
        s.pop();
    }
    if s.ends_with('.') {
        s.push('0');
    }
    s
}

/// C++ `std::ostream << double` with the default format (`%g`, precision 6).
pub fn float_g(f: f64) -> String {
    if f.is_nan() {
        return if f.is_sign_negative() { "-nan" } else { "nan" }.into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf" } else { "-inf" }.into();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0" } else { "0" }.into();
    }
    const P: i32 = 6;
    // Round to P significant digits first: the exponent after rounding decides the style.
    let sci = format!("{:.*e}", (P - 1) as usize, f);
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let x: i32 = exp.parse().unwrap_or(0);
    let strip = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_owned()
        } else {
            s.to_owned()
        }
    };
    if (-4..P).contains(&x) {
        let decimals = (P - 1 - x).max(0) as usize;
        strip(&format!("{f:.decimals$}"))
    } else {
        let m = strip(mant);
        format!("{m}e{}{:02}", if x < 0 { '-' } else { '+' }, x.abs())
    }
}

/// `as_string()` of a value: strings verbatim, numbers as printed, `True`/`False`, `None`,
/// arrays and objects as their repr.
pub fn as_string(v: &JValue) -> String {
    match v.kind() {
        ValueKind::String => v.as_str().unwrap_or_default().to_owned(),
        ValueKind::Undefined => String::new(),
        _ => {
            let mut s = String::new();
            repr(&mut s, v, 0);
            s
        }
    }
}

/// `value_to_string_repr`.
fn repr(out: &mut String, v: &JValue, depth: usize) {
    if depth > 200 {
        return;
    }
    match v.kind() {
        ValueKind::String => {
            let s = v.as_str().unwrap_or_default();
            if s.contains('\'') {
                let mut j = String::new();
                json_str(&mut j, s);
                out.push_str(&j);
            } else {
                out.push('\'');
                out.push_str(s);
                out.push('\'');
            }
        }
        ValueKind::None => out.push_str("None"),
        ValueKind::Undefined => out.push_str("Undefined"),
        ValueKind::Bool => out.push_str(if v.is_true() { "True" } else { "False" }),
        ValueKind::Number => out.push_str(&number_string(v)),
        ValueKind::Seq | ValueKind::Iterable => {
            out.push('[');
            if let Ok(it) = v.try_iter() {
                for (i, item) in it.enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    repr(out, &item, depth + 1);
                }
            }
            out.push(']');
        }
        ValueKind::Map => {
            out.push('{');
            if let Ok(it) = v.try_iter() {
                for (i, k) in it.enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    repr(out, &k, depth + 1);
                    out.push_str(": ");
                    let item = v.get_item(&k).unwrap_or(JValue::UNDEFINED);
                    repr(out, &item, depth + 1);
                }
            }
            out.push('}');
        }
        _ => {
            let _ = write!(out, "{v}");
        }
    }
}

fn json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// `value_to_json_internal` with `indent` (< 0: none), separators.
pub fn to_json(
    out: &mut String,
    v: &JValue,
    lvl: usize,
    indent: i64,
    item_sep: &str,
    key_sep: &str,
) -> Result<(), Error> {
    if lvl > 500 {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            "tojson: nesting too deep",
        ));
    }
    let ind = |n: usize| -> String {
        if indent > 0 {
            " ".repeat(n * indent as usize)
        } else {
            String::new()
        }
    };
    let nl = if indent >= 0 { "\n" } else { "" };
    match v.kind() {
        ValueKind::None | ValueKind::Undefined => out.push_str("null"),
        ValueKind::Bool => out.push_str(if v.is_true() { "true" } else { "false" }),
        ValueKind::Number => {
            if v.is_integer() {
                out.push_str(&v.to_string());
            } else {
                let f = f64::try_from(v.clone())?;
                out.push_str(&float_g(f));
            }
        }
        ValueKind::String => json_str(out, v.as_str().unwrap_or_default()),
        ValueKind::Seq | ValueKind::Iterable => {
            let items: Vec<JValue> = v.try_iter()?.collect();
            out.push('[');
            if !items.is_empty() {
                out.push_str(nl);
                for (i, item) in items.iter().enumerate() {
                    out.push_str(&ind(lvl + 1));
                    to_json(out, item, lvl + 1, indent, item_sep, key_sep)?;
                    if i + 1 < items.len() {
                        out.push_str(item_sep);
                    }
                    out.push_str(nl);
                }
                out.push_str(&ind(lvl));
            }
            out.push(']');
        }
        ValueKind::Map => {
            let keys: Vec<JValue> = v.try_iter()?.collect();
            out.push('{');
            if !keys.is_empty() {
                out.push_str(nl);
                for (i, k) in keys.iter().enumerate() {
                    out.push_str(&ind(lvl + 1));
                    json_str(out, &as_string(k));
                    out.push_str(key_sep);
                    let item = v.get_item(k)?;
                    to_json(out, &item, lvl + 1, indent, item_sep, key_sep)?;
                    if i + 1 < keys.len() {
                        out.push_str(item_sep);
                    }
                    out.push_str(nl);
                }
                out.push_str(&ind(lvl));
            }
            out.push('}');
        }
        _ => out.push_str("null"),
    }
    Ok(())
}

/// `json_ensure_ascii_preserving_format`: non-ASCII characters inside JSON strings become
/// `\uXXXX` (UTF-16 pairs above U+FFFF).
fn ensure_ascii(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let (mut in_str, mut esc) = (false, false);
    for c in s.chars() {
        if !in_str {
            out.push(c);
            in_str = c == '"';
            continue;
        }
        if esc {
            out.push(c);
            esc = false;
        } else if c == '\\' {
            out.push(c);
            esc = true;
        } else if c == '"' {
            out.push(c);
            in_str = false;
        } else if c.is_ascii() {
            out.push(c);
        } else {
            let mut buf = [0u16; 2];
            for u in c.encode_utf16(&mut buf) {
                let _ = write!(out, "\\u{u:04x}");
            }
        }
    }
    out
}

/// llama.cpp's `tojson(ensure_ascii, indent, separators, sort_keys)` (positional or keyword).
fn tojson(
    state: &minijinja::State,
    value: &JValue,
    args: minijinja::value::Rest<JValue>,
    kwargs: Kwargs,
) -> Result<JValue, Error> {
    let arg = |name: &str, pos: usize| -> Result<Option<JValue>, Error> {
        if let Some(v) = kwargs.get::<Option<JValue>>(name)? {
            return Ok(Some(v));
        }
        Ok(args.get(pos).cloned())
    };
    let ascii = arg("ensure_ascii", 0)?.is_some_and(|v| v.is_true());
    let indent = match arg("indent", 1)? {
        Some(v) if v.is_integer() => v.as_i64().unwrap_or(-1),
        _ => -1,
    };
    let seps: Vec<String> = match arg("separators", 2)? {
        Some(v) if v.kind() == ValueKind::Seq => v.try_iter()?.map(|s| as_string(&s)).collect(),
        _ => Vec::new(),
    };
    if arg("sort_keys", 3)?.is_some_and(|v| v.is_true()) {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            "tojson sort_keys=true not implemented",
        ));
    }
    kwargs.assert_all_used()?;
    let per_level = usize::try_from(indent.max(0)).unwrap_or(0);
    crate::budget::ensure_print(state, value, per_level, 2, "tojson")?;
    let item_sep = seps
        .first()
        .cloned()
        .unwrap_or_else(|| if indent < 0 { ", " } else { "," }.to_owned());
    let key_sep = seps.get(1).cloned().unwrap_or_else(|| ": ".to_owned());
    let mut out = String::new();
    to_json(&mut out, value, 0, indent, &item_sep, &key_sep)?;
    if ascii {
        out = ensure_ascii(&out);
    }
    Ok(JValue::from(out))
}

/// `string`: numbers through `tojson`, booleans `True`/`False`, `none` → `None`, undefined → `""`,
/// strings as they are, arrays and objects as their repr.
fn string_filter(state: &minijinja::State, v: &JValue) -> Result<JValue, Error> {
    crate::budget::ensure_print(state, v, 0, 0, "string")?;
    Ok(JValue::from(match v.kind() {
        ValueKind::Number => {
            let mut s = String::new();
            to_json(&mut s, v, 0, -1, ", ", ": ")?;
            s
        }
        _ => as_string(v),
    }))
}

/// llama.cpp's `default(value, default, boolean=false)`: the default replaces undefined *and*
/// `none` (Jinja2 replaces only undefined), or any falsy value with `boolean=true`.
fn default_filter(
    value: &JValue,
    other: Option<JValue>,
    boolean: Option<bool>,
    kwargs: Kwargs,
) -> Result<JValue, Error> {
    let boolean = match boolean {
        Some(b) => b,
        None => kwargs.get::<Option<bool>>("boolean")?.unwrap_or(false),
    };
    kwargs.assert_all_used()?;
    let missing = if boolean {
        !value.is_true()
    } else {
        value.is_undefined() || value.is_none()
    };
    Ok(if missing {
        other.unwrap_or_else(|| JValue::from(""))
    } else {
        value.clone()
    })
}

/// `join(d="", attribute=None)`: items must be strings or numbers (`as_string`); undefined → `""`.
fn join(
    state: &minijinja::State,
    value: &JValue,
    d: Option<JValue>,
    kwargs: Kwargs,
) -> Result<String, Error> {
    let d = match d {
        Some(d) => Some(d),
        None => kwargs.get::<Option<JValue>>("d")?,
    };
    let attribute: Option<JValue> = kwargs.get("attribute")?;
    kwargs.assert_all_used()?;
    if value.is_undefined() {
        return Ok(String::new());
    }
    if value.kind() != ValueKind::Seq && value.kind() != ValueKind::Iterable {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            "join() first argument must be an array",
        ));
    }
    let delim = d.map(|d| as_string(&d)).unwrap_or_default();
    // the render's budget (budget.rs) before anything is built: the delimiter is repeated
    // once per item, items are strings or numbers (at most 32 bytes printed)
    let mut size = 0u64;
    for item in value.try_iter()? {
        let item = match &attribute {
            Some(a) if !a.is_undefined() => item.get_item(a).unwrap_or(JValue::UNDEFINED),
            _ => item,
        };
        let n = item.as_str().map_or(32, |s| s.len() as u64);
        size = size.saturating_add(n).saturating_add(delim.len() as u64);
        crate::budget::ensure_bytes(state, size.saturating_mul(2), "join")?;
    }
    let mut parts = Vec::new();
    for item in value.try_iter()? {
        let item = match &attribute {
            Some(a) if !a.is_undefined() => item.get_item(a).unwrap_or(JValue::UNDEFINED),
            _ => item,
        };
        match item.kind() {
            ValueKind::String => parts.push(item.as_str().unwrap_or_default().to_owned()),
            ValueKind::Number if !is_bool(&item) => parts.push(number_string(&item)),
            _ => {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    "join() can only join arrays of strings or numerics",
                ));
            }
        }
    }
    Ok(parts.join(&delim))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_as_llama_cpp_prints_them() {
        // C++: std::ostream << 1.0 → "1"; << 1234567.0 → "1.23457e+06"; << 0.0001 → "0.0001";
        // << 1e-05 → "1e-05"; << 12.5 → "12.5"; << 1e16 → "1e+16".
        assert_eq!(float_g(1.0), "1");
        assert_eq!(float_g(1234567.0), "1.23457e+06");
        assert_eq!(float_g(0.0001), "0.0001");
        assert_eq!(float_g(0.00001), "1e-05");
        assert_eq!(float_g(12.5), "12.5");
        assert_eq!(float_g(1e16), "1e+16");
        assert_eq!(float_g(100000.0), "100000");
        assert_eq!(float_g(999999.5), "1e+06");
        // std::to_string(1.0) = "1.000000" → "1.0"; (12.5) → "12.5"; (0.1) → "0.1"
        assert_eq!(float_as_string(1.0), "1.0");
        assert_eq!(float_as_string(12.5), "12.5");
        assert_eq!(float_as_string(0.1), "0.1");
        assert_eq!(float_as_string(1e-7), "0.0");
    }
}
