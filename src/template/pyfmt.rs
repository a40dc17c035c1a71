//! Python-compatible value formatting for templates written against Python Jinja2.
//!
//! Chat templates are authored and tested with Python Jinja2 as transformers'
//! `apply_chat_template` configures it, so every place where a value turns into text must follow
//! Python: `str()` for `{{ x }}` and string filters (`None`, `True`, `['a', 1]`, `{'k': 'v'}`),
//! `repr()` for floats (`1e+16`, `1e-05`, `0.1`), and `json.dumps` for `tojson` (transformers
//! `utils/chat_template_utils.py`: `json.dumps(x, ensure_ascii=False, indent=None,
//! separators=None, sort_keys=False)`, no HTML escaping).

use std::fmt::Write as _;

use minijinja::Value;
use minijinja::value::ValueKind;

/// Python `repr(float)` (CPython `float_repr_style = 'short'`): the shortest digits that round
/// trip; scientific notation when the decimal exponent is < -4 or >= 16, written as
/// `1e+16` / `1.5e-05`; integral values keep `.0`; `nan`, `inf`, `-inf`.
pub fn py_float_repr(f: f64) -> String {
    if f.is_nan() {
        return "nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0.0".into() } else { "0.0".into() };
    }
    // Rust's `{:e}` yields the shortest round-trip digits: "-1.2345e-7".
    let sci = format!("{f:e}");
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let neg = mant.starts_with('-');
    let digits: String = mant.chars().filter(|c| c.is_ascii_digit()).collect();
    let mut out = String::new();
    if neg {
        out.push('-');
    }
    if !(-4..16).contains(&exp) {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let _ = write!(out, "e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs());
    } else if exp < 0 {
        out.push_str("0.");
        for _ in 0..(-exp - 1) {
            out.push('0');
        }
        out.push_str(&digits);
    } else {
        let point = exp as usize + 1;
        if digits.len() <= point {
            out.push_str(&digits);
            for _ in digits.len()..point {
                out.push('0');
            }
            out.push_str(".0");
        } else {
            out.push_str(&digits[..point]);
            out.push('.');
            out.push_str(&digits[point..]);
        }
    }
    out
}

/// Converts a JSON value into a template value (object key order kept; integers stay integers,
/// so `1` prints as `1` and `1.0` as `1.0`, as after Python's `json.loads`).
pub fn json_to_value(v: &serde_json::Value) -> Value {
    match v {
        serde_json::Value::Null => Value::from(()),
        serde_json::Value::Bool(b) => Value::from(*b),
        serde_json::Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::from(i)
            } else if let Some(u) = n.as_u64() {
                Value::from(u)
            } else {
                Value::from(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        serde_json::Value::String(s) => Value::from(s.as_str()),
        serde_json::Value::Array(a) => Value::from(a.iter().map(json_to_value).collect::<Vec<_>>()),
        serde_json::Value::Object(o) => Value::from_pairs(o.iter().map(|(k, v)| (Value::from(k.as_str()), json_to_value(v)))),
    }
}

fn number_str(v: &Value) -> String {
    if v.is_integer() {
        v.to_string()
    } else {
        match f64::try_from(v.clone()) {
            Ok(f) => py_float_repr(f),
            Err(_) => v.to_string(),
        }
    }
}

/// Python `str(x)` of a template value: strings verbatim, `None`, `True`/`False`, numbers as
/// Python prints them, lists and dicts as their `repr`. Undefined prints as the empty string.
pub fn py_str(v: &Value) -> String {
    match v.kind() {
        ValueKind::String => v.as_str().unwrap_or_default().to_owned(),
        ValueKind::Undefined => String::new(),
        _ => py_repr(v),
    }
}

/// Python `repr(x)` of a template value (`'text'`, `None`, `[1, 'a']`, `{'k': True}`).
pub fn py_repr(v: &Value) -> String {
    let mut out = String::new();
    write_repr(&mut out, v, 0);
    out
}

fn write_repr(out: &mut String, v: &Value, depth: usize) {
    if depth > 200 {
        out.push_str("...");
        return;
    }
    match v.kind() {
        ValueKind::Undefined => out.push_str("Undefined"),
        ValueKind::None => out.push_str("None"),
        ValueKind::Bool => out.push_str(if v.is_true() { "True" } else { "False" }),
        ValueKind::Number => out.push_str(&number_str(v)),
        ValueKind::String => write_str_repr(out, v.as_str().unwrap_or_default()),
        ValueKind::Seq | ValueKind::Iterable => {
            out.push('[');
            if let Ok(iter) = v.try_iter() {
                for (i, item) in iter.enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    write_repr(out, &item, depth + 1);
                }
            }
            out.push(']');
        }
        ValueKind::Map => {
            out.push('{');
            if let Ok(iter) = v.try_iter() {
                for (i, key) in iter.enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    write_repr(out, &key, depth + 1);
                    out.push_str(": ");
                    let item = v.get_item(&key).unwrap_or(Value::UNDEFINED);
                    write_repr(out, &item, depth + 1);
                }
            }
            out.push('}');
        }
        _ => {
            let _ = write!(out, "{v}");
        }
    }
}

/// CPython `unicode_repr`: single quotes unless the text holds `'` and no `"`.
fn write_str_repr(out: &mut String, s: &str) {
    let quote = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if is_py_unprintable(c) => {
                let n = c as u32;
                if n <= 0xff {
                    let _ = write!(out, "\\x{n:02x}");
                } else if n <= 0xffff {
                    let _ = write!(out, "\\u{n:04x}");
                } else {
                    let _ = write!(out, "\\U{n:08x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push(quote);
}

/// An approximation of Python's `str.isprintable()` for non-ASCII characters: controls (Cc),
/// common format characters (Cf), separators other than the ASCII space (Zs, Zl, Zp) and private
/// use (Co) print escaped.
fn is_py_unprintable(c: char) -> bool {
    let n = c as u32;
    (0x80..=0xa0).contains(&n)
        || n == 0xad
        || n == 0x1680
        || (0x2000..=0x200f).contains(&n)
        || (0x2028..=0x202f).contains(&n)
        || (0x205f..=0x206f).contains(&n)
        || n == 0x3000
        || n == 0xfeff
        || (0xfff9..=0xfffb).contains(&n)
        || (0xe000..=0xf8ff).contains(&n)
}

/// Options of Python's `json.dumps` as transformers' `tojson` filter exposes them.
#[derive(Debug, Clone, Default)]
pub struct JsonOptions {
    /// Escape non-ASCII as `\uXXXX` (transformers' default: false).
    pub ensure_ascii: bool,
    /// Pretty-print with this indent string (`indent=2` → two spaces).
    pub indent: Option<String>,
    /// `(item_separator, key_separator)`; default `(", ", ": ")`, or `(",", ": ")` with indent.
    pub separators: Option<(String, String)>,
    /// Sort dict keys.
    pub sort_keys: bool,
}

/// Python `json.dumps(value, **opts)` of a template value. Undefined serialises as `null`.
/// Errors: a value that cannot be serialised (a macro, a callable) — as Python's `TypeError`.
pub fn py_json_dumps(v: &Value, opts: &JsonOptions) -> Result<String, String> {
    let (item_sep, key_sep) = match &opts.separators {
        Some((i, k)) => (i.clone(), k.clone()),
        None => (if opts.indent.is_some() { ",".to_owned() } else { ", ".to_owned() }, ": ".to_owned()),
    };
    let mut out = String::new();
    write_json(&mut out, v, opts, &item_sep, &key_sep, 0)?;
    Ok(out)
}

fn newline_indent(out: &mut String, opts: &JsonOptions, level: usize) {
    if let Some(ind) = &opts.indent {
        out.push('\n');
        for _ in 0..level {
            out.push_str(ind);
        }
    }
}

fn write_json(out: &mut String, v: &Value, opts: &JsonOptions, item_sep: &str, key_sep: &str, level: usize) -> Result<(), String> {
    if level > 500 {
        return Err("maximum recursion depth exceeded while encoding a JSON object".into());
    }
    match v.kind() {
        ValueKind::Undefined | ValueKind::None => out.push_str("null"),
        ValueKind::Bool => out.push_str(if v.is_true() { "true" } else { "false" }),
        ValueKind::Number => {
            if v.is_integer() {
                out.push_str(&v.to_string());
            } else {
                let f = f64::try_from(v.clone()).map_err(|e| e.to_string())?;
                if f.is_nan() {
                    out.push_str("NaN");
                } else if f.is_infinite() {
                    out.push_str(if f > 0.0 { "Infinity" } else { "-Infinity" });
                } else {
                    out.push_str(&py_float_repr(f));
                }
            }
        }
        ValueKind::String => write_json_str(out, v.as_str().unwrap_or_default(), opts.ensure_ascii),
        ValueKind::Seq | ValueKind::Iterable => {
            let items: Vec<Value> = v.try_iter().map_err(|e| e.to_string())?.collect();
            if items.is_empty() {
                out.push_str("[]");
                return Ok(());
            }
            out.push('[');
            newline_indent(out, opts, level + 1);
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(item_sep);
                    newline_indent(out, opts, level + 1);
                }
                write_json(out, item, opts, item_sep, key_sep, level + 1)?;
            }
            newline_indent(out, opts, level);
            out.push(']');
        }
        ValueKind::Map => {
            let mut keys: Vec<Value> = v.try_iter().map_err(|e| e.to_string())?.collect();
            if keys.is_empty() {
                out.push_str("{}");
                return Ok(());
            }
            if opts.sort_keys {
                keys.sort_by(|a, b| a.cmp(b));
            }
            out.push('{');
            newline_indent(out, opts, level + 1);
            for (i, key) in keys.iter().enumerate() {
                if i > 0 {
                    out.push_str(item_sep);
                    newline_indent(out, opts, level + 1);
                }
                let key_text = match key.kind() {
                    ValueKind::String => key.as_str().unwrap_or_default().to_owned(),
                    ValueKind::Bool => if key.is_true() { "true".into() } else { "false".into() },
                    ValueKind::None => "null".into(),
                    ValueKind::Number => number_str(key),
                    other => return Err(format!("keys must be str, int, float, bool or None, not {other}")),
                };
                write_json_str(out, &key_text, opts.ensure_ascii);
                out.push_str(key_sep);
                let item = v.get_item(key).map_err(|e| e.to_string())?;
                write_json(out, &item, opts, item_sep, key_sep, level + 1)?;
            }
            newline_indent(out, opts, level);
            out.push('}');
        }
        other => return Err(format!("Object of type {other} is not JSON serializable")),
    }
    Ok(())
}

/// Python `json` string encoding (`py_encode_basestring` / `_ascii`).
fn write_json_str(out: &mut String, s: &str, ensure_ascii: bool) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if ensure_ascii && (c as u32) > 0x7e => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Jinja2's `indent` filter (jinja2/filters.py `do_indent`, 3.1): appends a newline, splits with
/// Python `str.splitlines`, indents all lines but the first (and blank ones only with `blank`),
/// so a trailing newline in the input survives.
pub fn jinja_indent(s: &str, indention: &str, first: bool, blank: bool) -> String {
    let with_nl = format!("{s}\n");
    let lines = py_splitlines(&with_nl);
    let mut rv;
    if blank {
        rv = lines.join(&format!("\n{indention}"));
    } else {
        let mut it = lines.into_iter();
        rv = it.next().unwrap_or_default().to_owned();
        let rest: Vec<String> =
            it.map(|l| if l.is_empty() { String::new() } else { format!("{indention}{l}") }).collect();
        if !rest.is_empty() {
            rv.push('\n');
            rv.push_str(&rest.join("\n"));
        }
    }
    if first {
        rv = format!("{indention}{rv}");
    }
    rv
}

/// Python `str.splitlines()` (no keepends).
pub fn py_splitlines(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut chars = s.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let is_break = matches!(c, '\n' | '\r' | '\u{0b}' | '\u{0c}' | '\u{1c}' | '\u{1d}' | '\u{1e}' | '\u{85}' | '\u{2028}' | '\u{2029}');
        if is_break {
            out.push(&s[start..i]);
            let mut end = i + c.len_utf8();
            if c == '\r' {
                if let Some(&(_, '\n')) = chars.peek() {
                    chars.next();
                    end += 1;
                }
            }
            start = end;
        }
    }
    if start < s.len() {
        out.push(&s[start..]);
    }
    out
}

/// Python `time.strftime(fmt)` for the directives chat templates use (`%Y %m %d %e %b %B %a %A
/// %H %I %M %S %p %y %j %Z %z %%`, and glibc's `%-d`, `%-m`, `%-H`, `%-I`, `%-M`, `%-S` without
/// padding), in the C locale.
pub fn strftime(t: &time::OffsetDateTime, fmt: &str) -> String {
    const MONTHS: [&str; 12] = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"];
    const DAYS: [&str; 7] = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];
    let mut out = String::new();
    let mut chars = fmt.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut pad = true;
        let mut d = chars.next();
        if d == Some('-') {
            pad = false;
            d = chars.next();
        }
        let num = |n: i64, w: usize| if pad { format!("{n:0w$}") } else { n.to_string() };
        let month = u8::from(t.month()) as usize;
        let wd = t.weekday().number_days_from_monday() as usize;
        let h12 = match t.hour() % 12 {
            0 => 12,
            h => h,
        };
        match d {
            Some('Y') => out.push_str(&t.year().to_string()),
            Some('y') => out.push_str(&num((t.year() % 100) as i64, 2)),
            Some('m') => out.push_str(&num(month as i64, 2)),
            Some('d') => out.push_str(&num(t.day() as i64, 2)),
            Some('e') => out.push_str(&format!("{:>2}", t.day())),
            Some('b') | Some('h') => out.push_str(&MONTHS[month - 1][..3]),
            Some('B') => out.push_str(MONTHS[month - 1]),
            Some('a') => out.push_str(&DAYS[wd][..3]),
            Some('A') => out.push_str(DAYS[wd]),
            Some('H') => out.push_str(&num(t.hour() as i64, 2)),
            Some('I') => out.push_str(&num(h12 as i64, 2)),
            Some('M') => out.push_str(&num(t.minute() as i64, 2)),
            Some('S') => out.push_str(&num(t.second() as i64, 2)),
            Some('p') => out.push_str(if t.hour() < 12 { "AM" } else { "PM" }),
            Some('j') => out.push_str(&num(t.ordinal() as i64, 3)),
            Some('Z') => out.push_str(if t.offset().is_utc() { "UTC" } else { "" }),
            Some('z') => {
                let (h, m, _) = t.offset().as_hms();
                let sign = if h < 0 || m < 0 { '-' } else { '+' };
                out.push_str(&format!("{sign}{:02}{:02}", h.abs(), m.abs()));
            }
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                if !pad {
                    out.push('-');
                }
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_repr_matches_python() {
        // Values checked with CPython 3.11 `repr(float)`.
        let cases = [
            (1.0, "1.0"),
            (0.1, "0.1"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (123.456, "123.456"),
            (-2.5e-7, "-2.5e-07"),
            (1.5e300, "1.5e+300"),
            (3.0e-5, "3e-05"),
        ];
        for (f, want) in cases {
            assert_eq!(py_float_repr(f), want, "{f}");
        }
    }

    #[test]
    fn json_dumps_matches_python() {
        let v = json_to_value(&serde_json::json!({"b": [1, 2.0, "é"], "a": {"x": null, "y": true}, "e": []}));
        // json.dumps(v, ensure_ascii=False)
        assert_eq!(py_json_dumps(&v, &JsonOptions::default()).unwrap(), r#"{"b": [1, 2.0, "é"], "a": {"x": null, "y": true}, "e": []}"#);
        // json.dumps(v, ensure_ascii=True, indent=2, sort_keys=True)
        let o = JsonOptions { ensure_ascii: true, indent: Some("  ".into()), sort_keys: true, separators: None };
        assert_eq!(
            py_json_dumps(&v, &o).unwrap(),
            "{\n  \"a\": {\n    \"x\": null,\n    \"y\": true\n  },\n  \"b\": [\n    1,\n    2.0,\n    \"\\u00e9\"\n  ],\n  \"e\": []\n}"
        );
        let o = JsonOptions { separators: Some((",".into(), ":".into())), ..Default::default() };
        assert_eq!(py_json_dumps(&v, &o).unwrap(), r#"{"b":[1,2.0,"é"],"a":{"x":null,"y":true},"e":[]}"#);
    }

    #[test]
    fn repr_and_str() {
        let v = json_to_value(&serde_json::json!({"t": ["string", "number"], "n": null, "b": false, "q": "it's"}));
        assert_eq!(py_str(&v), r#"{'t': ['string', 'number'], 'n': None, 'b': False, 'q': "it's"}"#);
    }

    #[test]
    fn indent_keeps_trailing_newline() {
        // jinja2: "a\nb\n" | indent(2) == "a\n  b\n"; "a\n\nb" | indent(2) == "a\n\n  b"
        assert_eq!(jinja_indent("a\nb\n", "  ", false, false), "a\n  b\n");
        assert_eq!(jinja_indent("a\n\nb", "  ", false, false), "a\n\n  b");
        assert_eq!(jinja_indent("a\n\nb", "  ", true, true), "  a\n  \n  b");
    }

    #[test]
    fn strftime_c_locale() {
        let t = time::macros::datetime!(2026-03-05 14:07:09 UTC);
        assert_eq!(strftime(&t, "%d %b %Y"), "05 Mar 2026");
        assert_eq!(strftime(&t, "%Y-%m-%d %H:%M:%S %A %-d %B %I%p"), "2026-03-05 14:07:09 Thursday 5 March 02PM");
    }
}
