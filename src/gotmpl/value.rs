//! The values a Go template sees, modelled on what `reflect` shows text/template for Ollama's
//! data (Go `map[string]any`, slices, structs with JSON tags, `fmt.Stringer` types), with Go's
//! printing (`fmt.Sprint`, `%v`) and Go's `encoding/json` marshalling (sorted map keys, HTML
//! escaping of `<`, `>`, `&`, float formats).

use std::fmt::Write as _;
use std::rc::Rc;

/// How a value prints with `fmt` when its Go type has a `String()` method (Ollama
/// template/template.go: `templateTools`, `templateTool`, `templateArgs`,
/// `templateProperties`; api/types.go: `PropertyType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stringer {
    /// No `String()` method: `fmt`'s own `%v`.
    None,
    /// `String()` returns `json.Marshal(v)`; a nil map gives `{}` (templateArgs,
    /// templateProperties).
    Json,
    /// api.PropertyType: one type → itself, several → `[a b]`, none → empty.
    PropertyType,
}

/// A Go struct value: its type name (for errors, `%v` does not show it) and fields in
/// declaration order with their JSON tags.
#[derive(Debug, Clone)]
pub struct Struct {
    /// Go type as reflect prints it, e.g. `*template.templateMessage`.
    pub type_name: &'static str,
    pub fields: Vec<Field>,
    pub stringer: Stringer,
    /// Extra methods callable from templates (name, implementation).
    pub methods: &'static [Method],
}

/// A method templates can call on a struct: name and implementation (no arguments).
pub type Method = (&'static str, fn(&Struct) -> Value);

/// One struct field.
#[derive(Debug, Clone)]
pub struct Field {
    pub name: &'static str,
    /// JSON name; `None` → the Go field name. `"-"` is not used.
    pub json: Option<&'static str>,
    pub omitempty: bool,
    pub value: Value,
}

/// A map: Go maps are printed and ranged in sorted key order (text/template and fmt sort
/// basic keys); `ordered` keeps insertion order (Ollama's orderedmap types).
#[derive(Debug, Clone)]
pub struct Map {
    pub type_name: &'static str,
    pub entries: Vec<(String, Value)>,
    pub nil: bool,
    pub stringer: Stringer,
    /// Whether this is an `orderedmap` wrapper (a struct to templates: not rangeable).
    pub ordered: bool,
}

/// A slice.
#[derive(Debug, Clone)]
pub struct List {
    pub type_name: &'static str,
    pub items: Vec<Value>,
    pub nil: bool,
    pub stringer: Stringer,
}

/// A Go value as text/template sees it.
#[derive(Debug, Clone, Default)]
pub enum Value {
    /// reflect's invalid value (a missing key with the default `missingkey`): prints
    /// `<no value>`, is false, fields of it are invalid too.
    #[default]
    Invalid,
    /// A nil `interface{}` (a missing `map[string]any` key under `missingkey=zero`, a JSON
    /// null): prints `<no value>` at top level, `<nil>` inside a slice/map; a field of it is
    /// the error `nil pointer evaluating interface {}.X`.
    Nil,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(Rc<str>),
    List(Rc<List>),
    Map(Rc<Map>),
    Struct(Rc<Struct>),
}

impl Value {
    pub fn str(s: impl Into<Rc<str>>) -> Value {
        Value::Str(s.into())
    }

    /// A `[]any` / `map[string]any` from JSON, as Go's `encoding/json` decodes into `any`
    /// (numbers become float64; objects sorted as Go maps are).
    pub fn from_json(v: &serde_json::Value) -> Value {
        match v {
            serde_json::Value::Null => Value::Nil,
            serde_json::Value::Bool(b) => Value::Bool(*b),
            serde_json::Value::Number(n) => Value::Float(n.as_f64().unwrap_or(0.0)),
            serde_json::Value::String(s) => Value::str(s.as_str()),
            serde_json::Value::Array(a) => Value::List(Rc::new(List {
                type_name: "[]interface {}",
                items: a.iter().map(Value::from_json).collect(),
                nil: false,
                stringer: Stringer::None,
            })),
            serde_json::Value::Object(o) => Value::Map(Rc::new(Map::go_map(
                "map[string]interface {}",
                o.iter()
                    .map(|(k, v)| (k.clone(), Value::from_json(v)))
                    .collect(),
                Stringer::None,
            ))),
        }
    }

    /// The Go type name reflect would print (for error messages).
    pub fn type_name(&self) -> String {
        match self {
            Value::Invalid => "<invalid reflect.Value>".into(),
            Value::Nil => "interface {}".into(),
            Value::Bool(_) => "bool".into(),
            Value::Int(_) => "int".into(),
            Value::Float(_) => "float64".into(),
            Value::Str(_) => "string".into(),
            Value::List(l) => l.type_name.into(),
            Value::Map(m) => m.type_name.into(),
            Value::Struct(s) => s.type_name.into(),
        }
    }

    /// text/template's `isTrue`: false, 0, nil, empty string/slice/map are false; structs
    /// are true.
    pub fn truth(&self) -> bool {
        match self {
            Value::Invalid | Value::Nil => false,
            Value::Bool(b) => *b,
            Value::Int(i) => *i != 0,
            Value::Float(f) => *f != 0.0,
            Value::Str(s) => !s.is_empty(),
            Value::List(l) => !l.items.is_empty(),
            Value::Map(m) => {
                if m.ordered {
                    !m.nil
                } else {
                    !m.entries.is_empty()
                }
            }
            Value::Struct(_) => true,
        }
    }

    /// Go's `encoding/json` "empty" for `omitempty`.
    fn json_empty(&self) -> bool {
        match self {
            Value::Invalid | Value::Nil => true,
            Value::Bool(b) => !b,
            Value::Int(i) => *i == 0,
            Value::Float(f) => *f == 0.0,
            Value::Str(s) => s.is_empty(),
            Value::List(l) => l.items.is_empty(),
            Value::Map(m) => {
                if m.ordered {
                    m.nil
                } else {
                    m.entries.is_empty()
                }
            }
            Value::Struct(_) => false,
        }
    }
}

impl Map {
    /// A Go map: entries sorted by key, as fmt and text/template iterate them.
    pub fn go_map(
        type_name: &'static str,
        mut entries: Vec<(String, Value)>,
        stringer: Stringer,
    ) -> Map {
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        Map {
            type_name,
            entries,
            nil: false,
            stringer,
            ordered: false,
        }
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
}

impl Struct {
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.fields
            .iter()
            .find(|f| f.name == name)
            .map(|f| &f.value)
    }
}

// ------------------------------------------------------------------ fmt

/// `fmt.Sprint(v)` for one operand as text/template prints an action's value (exec.go
/// `printValue`): invalid and nil interfaces print `<no value>`, Stringers their `String()`.
pub fn print_top(v: &Value, out: &mut String) {
    match v {
        Value::Invalid | Value::Nil => out.push_str("<no value>"),
        v => fmt_v(v, out),
    }
}

/// Go's `%v` of a value (Stringers inside slices, maps and structs print with `String()`, as
/// fmt's `handleMethods` does at depth > 0).
pub fn fmt_v(v: &Value, out: &mut String) {
    match v {
        Value::Invalid => out.push_str("<invalid reflect.Value>"),
        Value::Nil => out.push_str("<nil>"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int(i) => {
            let _ = write!(out, "{i}");
        }
        Value::Float(f) => out.push_str(&go_float_g(*f)),
        Value::Str(s) => out.push_str(s),
        Value::List(l) => match l.stringer {
            Stringer::Json => out.push_str(&json_string(v)),
            Stringer::PropertyType => match l.items.len() {
                0 => {}
                1 => fmt_v(&l.items[0], out),
                _ => {
                    out.push('[');
                    for (i, it) in l.items.iter().enumerate() {
                        if i > 0 {
                            out.push(' ');
                        }
                        fmt_v(it, out);
                    }
                    out.push(']');
                }
            },
            Stringer::None => {
                out.push('[');
                for (i, it) in l.items.iter().enumerate() {
                    if i > 0 {
                        out.push(' ');
                    }
                    fmt_v(it, out);
                }
                out.push(']');
            }
        },
        Value::Map(m) => {
            if m.stringer == Stringer::Json {
                if m.nil {
                    out.push_str("{}");
                } else {
                    out.push_str(&json_string(v));
                }
                return;
            }
            if m.ordered {
                // an orderedmap wrapper struct: fmt shows its pointer field
                out.push_str("{0xc000000000}");
                return;
            }
            out.push_str("map[");
            for (i, (k, val)) in m.entries.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                out.push_str(k);
                out.push(':');
                fmt_v(val, out);
            }
            out.push(']');
        }
        Value::Struct(s) => {
            if s.stringer == Stringer::Json {
                out.push_str(&json_string(v));
                return;
            }
            out.push('{');
            for (i, f) in s.fields.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                fmt_v(&f.value, out);
            }
            out.push('}');
        }
    }
}

/// Go's `%v` of a float64 (fmt/print.go `fmtFloat` → `strconv.AppendFloat(f, 'g', -1, 64)`):
/// shortest round-trip digits, exponent form when the exponent is < -4 or >= 6
/// (strconv/ftoa.go: "if precision was the shortest possible, use precision 6"), so
/// `1e+06`, `123456`, `1e-05`.
pub fn go_float_g(f: f64) -> String {
    go_float_shortest(f, 6)
}

/// Shortest round-trip digits of `f` with Go's `%e`/`%f` choice at exponent threshold
/// `eprec` (exponent < -4 or >= eprec → `d.ddde±XX`).
pub fn go_float_shortest(f: f64, eprec: i32) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    if f == 0.0 {
        return if f.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    // Rust's `{:e}` is the shortest round-trip form: "1.5e-7", "1e21"
    let e = format!("{:e}", f.abs());
    let (mant, exp) = e.split_once('e').unwrap_or((&e, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mant.chars().filter(|c| c.is_ascii_digit()).collect();
    let neg = if f < 0.0 { "-" } else { "" };
    if exp < -4 || exp >= eprec {
        let mut m = digits[..1].to_owned();
        if digits.len() > 1 {
            m.push('.');
            m.push_str(&digits[1..]);
        }
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{neg}{m}e{sign}{:02}", exp.abs());
    }
    // fixed notation
    let nd = digits.len() as i32;
    let dp = exp + 1; // digits before the decimal point
    let s = if dp <= 0 {
        format!("0.{}{}", "0".repeat((-dp) as usize), digits)
    } else if dp >= nd {
        format!("{}{}", digits, "0".repeat((dp - nd) as usize))
    } else {
        format!("{}.{}", &digits[..dp as usize], &digits[dp as usize..])
    };
    format!("{neg}{s}")
}

// ------------------------------------------------------------------ json

/// `json.Marshal(v)` as Go's encoding/json writes it (errors ignored, as Ollama's funcs do).
pub fn json_string(v: &Value) -> String {
    let mut out = String::new();
    json_write(v, &mut out);
    out
}

fn json_write(v: &Value, out: &mut String) {
    match v {
        Value::Invalid | Value::Nil => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int(i) => {
            let _ = write!(out, "{i}");
        }
        Value::Float(f) => out.push_str(&go_json_float(*f)),
        Value::Str(s) => json_str(s, out),
        Value::List(l) => {
            if l.stringer == Stringer::PropertyType && l.items.len() == 1 {
                json_write(&l.items[0], out);
                return;
            }
            if l.nil {
                out.push_str("null");
                return;
            }
            out.push('[');
            for (i, it) in l.items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                json_write(it, out);
            }
            out.push(']');
        }
        Value::Map(m) => {
            if m.nil {
                out.push_str("null");
                return;
            }
            out.push('{');
            for (i, (k, val)) in m.entries.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                json_str(k, out);
                out.push(':');
                json_write(val, out);
            }
            out.push('}');
        }
        Value::Struct(s) => {
            out.push('{');
            let mut first = true;
            for f in &s.fields {
                if f.omitempty && f.value.json_empty() {
                    continue;
                }
                if !first {
                    out.push(',');
                }
                first = false;
                json_str(f.json.unwrap_or(f.name), out);
                out.push(':');
                json_write(&f.value, out);
            }
            out.push('}');
        }
    }
}

/// encoding/json string escaping: `"`, `\\`, control characters (`\n`, `\r`, `\t`, `\b`, `\f`,
/// else `\u00XX`), and with HTML escaping on (json.Marshal's default) `<`, `>`, `&`, U+2028,
/// U+2029 as `\u003c`, `\u003e`, `\u0026`, `\u2028`, `\u2029`.
pub fn json_str(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// encoding/json float64: `'f'` format for 1e-6 ≤ |f| < 1e21, else `'e'` with a one-digit
/// minimum exponent (`1e-7`, `1e+21`).
pub fn go_json_float(f: f64) -> String {
    let a = f.abs();
    if a == 0.0 || (1e-6..1e21).contains(&a) {
        // Rust's Display is the shortest round-trip fixed form
        let s = format!("{f}");
        return if s == "-0" { "-0".into() } else { s };
    }
    let e = format!("{f:e}");
    let (m, x) = e.split_once('e').unwrap_or((&e, "0"));
    let x: i32 = x.parse().unwrap_or(0);
    format!("{m}e{}{}", if x < 0 { '-' } else { '+' }, x.abs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_as_go() {
        // hand-checked against Go: fmt.Sprint(float64(x)), json.Marshal(float64(x))
        assert_eq!(go_float_g(3.0), "3");
        assert_eq!(go_float_g(0.5), "0.5");
        assert_eq!(go_float_g(1e6), "1e+06");
        assert_eq!(go_float_g(123456.0), "123456");
        assert_eq!(go_float_g(1e-5), "1e-05");
        assert_eq!(go_float_g(0.0001), "0.0001");
        assert_eq!(go_json_float(1e6), "1000000");
        assert_eq!(go_json_float(1e21), "1e+21");
        assert_eq!(go_json_float(1e-7), "1e-7");
    }

    #[test]
    fn json_escapes_html() {
        let mut s = String::new();
        json_str("<a&b>\n\u{1}", &mut s);
        assert_eq!(s, r#""\u003ca\u0026b\u003e\n\u0001""#);
    }
}
