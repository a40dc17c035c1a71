//! Parsers for the inside of one closed call block, per syntax, with the accepted drifts.
//!
//! Each returns the calls (and repairs, offsets relative to the body) or a message saying why
//! the block did not parse; the caller keeps unparsed blocks as text and counts them malformed.

use serde_json::{Map, Value};

use super::syntax::Syntax;
use super::tools::ToolIndex;
use crate::schema::types::{allowed_types, json_type};

/// One call found in a block.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RawCall {
    pub name: String,
    pub arguments: Value,
    pub id: Option<String>,
    pub syntax: Syntax,
}

impl RawCall {
    /// The call as output, with the byte range of its markup.
    pub(crate) fn into_parsed(self, span: (usize, usize)) -> super::types::ParsedCall {
        super::types::ParsedCall {
            name: self.name,
            arguments: self.arguments,
            syntax: Some(self.syntax.name().to_string()),
            span: Some(span),
            id: self.id,
        }
    }
}

/// A repair note, `offset` relative to the start of the body.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Note {
    pub kind: &'static str,
    pub message: String,
    pub offset: usize,
}

pub(crate) type BodyResult = Result<(Vec<RawCall>, Vec<Note>), String>;

/// Parses the first JSON value of `s` (after whitespace). Returns the value, where it started and
/// the byte offset just after it.
pub(crate) fn first_json(s: &str) -> Result<(Value, usize, usize), String> {
    let lead = s.len() - s.trim_start().len();
    let mut it = serde_json::Deserializer::from_str(&s[lead..]).into_iter::<Value>();
    match it.next() {
        Some(Ok(v)) => Ok((v, lead, lead + it.byte_offset())),
        Some(Err(e)) => Err(format!(
            "invalid JSON at line {} column {}: {}",
            e.line(),
            e.column(),
            crate::json_reason(&e)
        )),
        None => Err("empty block".to_string()),
    }
}

/// A JSON value filling the body, tolerating one stray `}`/`]` after it (repair `stray_closer`).
pub(crate) fn json_filling(s: &str, notes: &mut Vec<Note>) -> Result<Value, String> {
    let (v, _, end) = first_json(s)?;
    let rest = &s[end..];
    let t = rest.trim();
    if t.is_empty() {
        return Ok(v);
    }
    if t == "}" || t == "]" {
        let off = end + (rest.len() - rest.trim_start().len());
        notes.push(Note {
            kind: "stray_closer",
            message: format!("dropped one stray `{t}` after the JSON value"),
            offset: off,
        });
        return Ok(v);
    }
    let off = end + (rest.len() - rest.trim_start().len());
    Err(format!(
        "unexpected text after the JSON value at byte {off}: {:?}",
        excerpt(t)
    ))
}

fn excerpt(s: &str) -> String {
    s.chars().take(40).collect()
}

/// Turns call-shaped JSON into calls, accepting the field's drifts (as notes):
/// `{"type":"function","function":{…}}` (function_wrapper), `parameters` (parameters_for_arguments,
/// native for llama3), `input` (input_for_arguments), arguments as a JSON string
/// (string_arguments), arguments at the top level (top_level_arguments). Arrays give several calls.
pub(crate) fn json_calls(
    v: Value,
    syntax: Syntax,
    at: usize,
    notes: &mut Vec<Note>,
) -> Result<Vec<RawCall>, String> {
    match v {
        Value::Array(items) => {
            if items.is_empty() {
                return Err("empty call array".into());
            }
            let mut out = Vec::new();
            for it in items {
                out.extend(json_calls(it, syntax, at, notes)?);
            }
            Ok(out)
        }
        Value::Object(mut obj) => {
            if let Some(Value::Object(_)) = obj.get("function")
                && (obj.get("type").and_then(Value::as_str) == Some("function")
                    || !obj.contains_key("name"))
            {
                let id = obj.get("id").and_then(Value::as_str).map(str::to_string);
                notes.push(Note {
                    kind: "function_wrapper",
                    message: "unwrapped a {\"type\":\"function\",\"function\":{…}} wrapper".into(),
                    offset: at,
                });
                let inner = obj.remove("function").unwrap_or(Value::Null);
                let mut calls = json_calls(inner, syntax, at, notes)?;
                if let (Some(id), [c]) = (id, calls.as_mut_slice())
                    && c.id.is_none()
                {
                    c.id = Some(id);
                }
                return Ok(calls);
            }
            let name = match obj.get("name") {
                Some(Value::String(n)) if !n.is_empty() => n.clone(),
                Some(_) => return Err("\"name\" is not a non-empty string".into()),
                None => return Err("no \"name\" in the call object".into()),
            };
            let id = obj.get("id").and_then(Value::as_str).map(str::to_string);
            let arguments = if let Some(a) = obj.remove("arguments") {
                match a {
                    Value::String(s) => match serde_json::from_str::<Value>(&s) {
                        Ok(v) => {
                            notes.push(Note {
                                kind: "string_arguments",
                                message: "decoded \"arguments\" given as a JSON string".into(),
                                offset: at,
                            });
                            v
                        }
                        Err(e) => {
                            return Err(format!("\"arguments\" is a string that is not JSON: {e}"));
                        }
                    },
                    other => other,
                }
            } else if let Some(a) = obj.remove("parameters") {
                if syntax != Syntax::Llama3 {
                    notes.push(Note {
                        kind: "parameters_for_arguments",
                        message: "read \"parameters\" as \"arguments\"".into(),
                        offset: at,
                    });
                }
                a
            } else if let Some(a) = obj.remove("input") {
                notes.push(Note {
                    kind: "input_for_arguments",
                    message: "read \"input\" as \"arguments\"".into(),
                    offset: at,
                });
                a
            } else {
                let mut rest = Map::new();
                for (k, v) in obj {
                    if !matches!(k.as_str(), "name" | "id" | "type") {
                        rest.insert(k, v);
                    }
                }
                if !rest.is_empty() {
                    notes.push(Note {
                        kind: "top_level_arguments",
                        message: "collected arguments written at the top level of the call object"
                            .into(),
                        offset: at,
                    });
                }
                Value::Object(rest)
            };
            Ok(vec![RawCall {
                name,
                arguments,
                id,
                syntax,
            }])
        }
        _ => Err("the JSON value is not a call object".into()),
    }
}

/// Hermes `<tool_call>` body: JSON (or a Qwen3-Coder `<function=…>` body).
pub(crate) fn hermes(body: &str, tools: &ToolIndex) -> BodyResult {
    let t = body.trim_start();
    if let Some(rest) = t.strip_prefix("<function=") {
        let off = body.len() - rest.len();
        return qwen_function(rest, tools).map(|(c, n)| (c, shift(n, off)));
    }
    json_block(body, Syntax::Hermes)
}

/// A block whose body is a call JSON (hermes, function-call, fence, llama3 python_tag).
pub(crate) fn json_block(body: &str, syntax: Syntax) -> BodyResult {
    let mut notes = Vec::new();
    let v = json_filling(body, &mut notes)?;
    let at = body.len() - body.trim_start().len();
    let calls = json_calls(v, syntax, at, &mut notes)?;
    Ok((calls, notes))
}

fn shift(mut n: Vec<Note>, by: usize) -> Vec<Note> {
    for x in &mut n {
        x.offset += by;
    }
    n
}

/// Qwen3-Coder: the text after `<function=`: `N>\n<parameter=k>\nv\n</parameter>…[</function>]`.
pub(crate) fn qwen_function(s: &str, tools: &ToolIndex) -> BodyResult {
    let gt = s.find('>').ok_or("no `>` after `<function=`")?;
    let name = s[..gt].trim();
    if name.is_empty() || name.contains(['<', '\n']) {
        return Err("bad function name after `<function=`".into());
    }
    let mut notes = Vec::new();
    let (args, rest) = xml_params(s, gt + 1, name, tools, XmlDialect::Qwen, &mut notes)?;
    let tail = rest.trim();
    let tail = tail
        .strip_suffix("</tool_call>")
        .map(str::trim_end)
        .unwrap_or(tail);
    if !(tail.is_empty() || tail == "</function>") {
        return Err(format!(
            "unexpected text in the function body: {:?}",
            excerpt(tail)
        ));
    }
    Ok((
        vec![RawCall {
            name: name.to_string(),
            arguments: Value::Object(args),
            id: None,
            syntax: Syntax::Qwen3Coder,
        }],
        notes,
    ))
}

fn strip_one_newline(s: &str) -> &str {
    let s = s
        .strip_prefix("\r\n")
        .or_else(|| s.strip_prefix('\n'))
        .unwrap_or(s);
    s.strip_suffix("\r\n")
        .or_else(|| s.strip_suffix('\n'))
        .unwrap_or(s)
}

/// The two XML parameter dialects read by [`xml_params`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum XmlDialect {
    /// Qwen3-Coder `<parameter=k>v</parameter>` (a `</function>` may stand between parameters).
    Qwen,
    /// Anthropic-style `<parameter name="k" [string="true|false"]>v</parameter>`.
    Invoke,
}

/// Reads the `<parameter…>v</parameter>` elements of `body[from..]` into an arguments object,
/// each value typed by the schema of parameter k of tool `tool` ([`typed`]); a value kept as a
/// string against a schema that allows no string gives a `degenerated_to_string` note (offset of
/// the value in `body`). Returns the object and the text after the last parameter.
fn xml_params<'a>(
    body: &'a str,
    from: usize,
    tool: &str,
    tools: &ToolIndex,
    d: XmlDialect,
    notes: &mut Vec<Note>,
) -> Result<(Map<String, Value>, &'a str), String> {
    let open = match d {
        XmlDialect::Qwen => "<parameter=",
        XmlDialect::Invoke => "<parameter",
    };
    let mut rest = &body[from..];
    let mut args = Map::new();
    while let Some(p) = find_str(rest, open) {
        let between = rest[..p].trim();
        match d {
            XmlDialect::Qwen if !between.is_empty() && between != "</function>" => {
                return Err(format!(
                    "unexpected text before <parameter=: {:?}",
                    excerpt(between)
                ));
            }
            XmlDialect::Invoke if !between.is_empty() => {
                return Err(format!(
                    "unexpected text in <invoke>: {:?}",
                    excerpt(between)
                ));
            }
            _ => {}
        }
        let after = &rest[p + open.len()..];
        let gt = after.find('>').ok_or(match d {
            XmlDialect::Qwen => "no `>` after `<parameter=`",
            XmlDialect::Invoke => "no `>` closing <parameter",
        })?;
        let head = &after[..gt];
        let key = match d {
            XmlDialect::Qwen => head.trim().to_string(),
            XmlDialect::Invoke => attr(head, "name").ok_or("no name=\"…\" on <parameter>")?,
        };
        let val_all = &after[gt + 1..];
        let e = find_str(val_all, "</parameter>")
            .ok_or_else(|| format!("parameter {key:?} has no </parameter>"))?;
        let raw = strip_one_newline(&val_all[..e]);
        let forced = match d {
            XmlDialect::Invoke => attr(head, "string"),
            XmlDialect::Qwen => None,
        };
        let v = match forced.as_deref() {
            Some("true") => Value::String(raw.to_string()),
            Some("false") => {
                serde_json::from_str(raw.trim()).unwrap_or_else(|_| Value::String(raw.to_string()))
            }
            _ => {
                let types = tools.param(tool, &key).map(allowed_types);
                let v = typed(raw, types.as_deref());
                if let Some(types) = types.filter(|t| !t.is_empty() && !t.contains(&"string"))
                    && v.is_string()
                {
                    notes.push(Note {
                        kind: "degenerated_to_string",
                        message: format!(
                            "value {:?} of parameter {key:?} of tool {tool:?} is not of the schema type ({}); kept as a string",
                            excerpt(raw.trim()),
                            types.join(" or ")
                        ),
                        offset: body.len() - val_all.len(),
                    });
                }
                v
            }
        };
        args.insert(key, v);
        rest = &val_all[e + "</parameter>".len()..];
    }
    Ok((args, rest))
}

/// Types an unquoted XML parameter value by its schema: the value parsed as JSON when that JSON
/// type is allowed and is not a string (`anyOf[integer,null]` + `5` → `5`; an integer also
/// satisfies `number`); else the raw string (a string-typed `5` stays `"5"`). Without a schema the
/// value stays a string. Python literals `True`/`False`/`None` are accepted for boolean/null.
/// `types`: the JSON types the parameter's schema allows
/// ([`crate::schema::types::allowed_types`]), `None` without a schema.
fn typed(raw: &str, types: Option<&[&'static str]>) -> Value {
    let Some(types) = types else {
        return Value::String(raw.to_string());
    };
    let t = raw.trim();
    // only a schema allowing a non-string type can turn the text into anything but a string
    if types.iter().all(|t| *t == "string") {
        return Value::String(raw.to_string());
    }
    // a JSON value other than a string starts with one of these (skips a failing parse)
    let json_start = matches!(
        t.as_bytes().first(),
        Some(b'-' | b'0'..=b'9' | b't' | b'f' | b'n' | b'[' | b'{')
    );
    if json_start && let Ok(v) = serde_json::from_str::<Value>(t) {
        let jt = json_type(&v);
        // JSON Schema 2020-12 validation §6.1.1: "integer" matches any number with a zero
        // fractional part, so `5.0` and `-0` fit an integer parameter.
        let whole = v
            .as_f64()
            .is_some_and(|f| f.is_finite() && f.fract() == 0.0);
        let ok = jt != "string"
            && (types.contains(&jt)
                || (jt == "integer" && types.contains(&"number"))
                || (jt == "number" && whole && types.contains(&"integer")));
        if ok {
            return v;
        }
    }
    match t {
        "True" | "False" if types.contains(&"boolean") && !types.contains(&"string") => {
            return Value::Bool(t == "True");
        }
        "None" if types.contains(&"null") && !types.contains(&"string") => return Value::Null,
        _ => {}
    }
    Value::String(raw.to_string())
}

/// Gemma 4 body: `call:N{k:<|"|>text<|"|>,n:3}`.
pub(crate) fn gemma4(body: &str) -> BodyResult {
    let t = body.trim();
    let rest = t
        .strip_prefix("call:")
        .ok_or("Gemma 4 call does not start with `call:`")?;
    let brace = rest.find('{').ok_or("no `{` after the function name")?;
    let name = rest[..brace].trim();
    if name.is_empty() {
        return Err("empty function name".into());
    }
    let src = &rest[brace..];
    let mut i = 0;
    let args = gemma_value(src, &mut i)?;
    let tail = src[i..].trim();
    let mut notes = vec![];
    if !tail.is_empty() {
        if tail == "}" || tail == "]" {
            let off = body.len() - src.len() + i;
            notes.push(Note {
                kind: "stray_closer",
                message: format!("dropped one stray `{tail}` after the arguments"),
                offset: off,
            });
        } else {
            return Err(format!(
                "unexpected text after the arguments: {:?}",
                excerpt(tail)
            ));
        }
    }
    Ok((
        vec![RawCall {
            name: name.to_string(),
            arguments: args,
            id: None,
            syntax: Syntax::Gemma4,
        }],
        notes,
    ))
}

const GQ: &str = "<|\"|>";

fn skip_ws(s: &str, i: &mut usize) {
    let b = s.as_bytes();
    while *i < b.len() && b[*i].is_ascii_whitespace() {
        *i += 1;
    }
}

fn gemma_value(s: &str, i: &mut usize) -> Result<Value, String> {
    skip_ws(s, i);
    let r = &s[*i..];
    if let Some(after) = r.strip_prefix(GQ) {
        let e = find_str(after, GQ).ok_or("unterminated <|\"|> string")?;
        *i += GQ.len() + e + GQ.len();
        return Ok(Value::String(after[..e].to_string()));
    }
    match r.as_bytes().first() {
        None => Err("unexpected end of arguments".into()),
        Some(b'{') => {
            *i += 1;
            let mut m = Map::new();
            loop {
                skip_ws(s, i);
                match s.as_bytes().get(*i) {
                    None => return Err("unterminated `{`".into()),
                    Some(b'}') => {
                        *i += 1;
                        return Ok(Value::Object(m));
                    }
                    _ => {}
                }
                let key = if s[*i..].starts_with(GQ) || s[*i..].starts_with('"') {
                    match gemma_value(s, i)? {
                        Value::String(k) => k,
                        _ => return Err("bad key".into()),
                    }
                } else {
                    let r = &s[*i..];
                    let e = r.find(':').ok_or("key without `:`")?;
                    let k = r[..e].trim();
                    if k.is_empty() || k.contains(['{', '}', ',', '[', ']']) {
                        return Err(format!("bad key {:?}", excerpt(k)));
                    }
                    *i += e;
                    k.to_string()
                };
                skip_ws(s, i);
                if s.as_bytes().get(*i) != Some(&b':') {
                    return Err(format!("expected `:` after key {key:?}"));
                }
                *i += 1;
                let v = gemma_value(s, i)?;
                m.insert(key, v);
                skip_ws(s, i);
                match s.as_bytes().get(*i) {
                    Some(b',') => *i += 1,
                    Some(b'}') => {}
                    _ => return Err("expected `,` or `}` in arguments".into()),
                }
            }
        }
        Some(b'[') => {
            *i += 1;
            let mut a = Vec::new();
            loop {
                skip_ws(s, i);
                match s.as_bytes().get(*i) {
                    None => return Err("unterminated `[`".into()),
                    Some(b']') => {
                        *i += 1;
                        return Ok(Value::Array(a));
                    }
                    _ => {}
                }
                a.push(gemma_value(s, i)?);
                skip_ws(s, i);
                match s.as_bytes().get(*i) {
                    Some(b',') => *i += 1,
                    Some(b']') => {}
                    _ => return Err("expected `,` or `]` in array".into()),
                }
            }
        }
        Some(b'"') => {
            let mut it = serde_json::Deserializer::from_str(r).into_iter::<Value>();
            match it.next() {
                Some(Ok(v)) => {
                    *i += it.byte_offset();
                    Ok(v)
                }
                _ => Err("bad quoted string".into()),
            }
        }
        Some(_) => {
            let e = r.find([',', '}', ']']).unwrap_or(r.len());
            let tok = r[..e].trim();
            *i += e;
            Ok(serde_json::from_str::<Value>(tok)
                .unwrap_or_else(|_| Value::String(tok.to_string())))
        }
    }
}

/// Strips a Markdown code fence (```` ```json … ``` ````) around `s`, if any.
fn unfence(s: &str) -> &str {
    let t = s.trim();
    if let Some(r) = t.strip_prefix("```") {
        let r = match r.find('\n') {
            Some(nl) if r[..nl].trim().chars().all(|c| c.is_ascii_alphanumeric()) => &r[nl + 1..],
            _ => r.strip_prefix("json").unwrap_or(r),
        };
        return r.trim_end().strip_suffix("```").unwrap_or(r).trim();
    }
    t
}

pub(crate) const DS_CALL_BEGIN: &str = "<｜tool▁call▁begin｜>";
pub(crate) const DS_CALL_END: &str = "<｜tool▁call▁end｜>";
const DS_SEP: &str = "<｜tool▁sep｜>";

/// DeepSeek: the body of `<｜tool▁calls▁begin｜>` (several items) or of one
/// `<｜tool▁call▁begin｜>` (`item = true`).
pub(crate) fn deepseek(body: &str, item: bool) -> BodyResult {
    let mut calls = Vec::new();
    let mut notes = Vec::new();
    if item {
        calls.push(deepseek_item(body, 0, &mut notes)?);
        return Ok((calls, notes));
    }
    let mut rest = body;
    let mut off = 0;
    loop {
        let t = rest.trim_start();
        if t.is_empty() {
            break;
        }
        let Some(after) = t.strip_prefix(DS_CALL_BEGIN) else {
            return Err(format!("expected {DS_CALL_BEGIN}, found {:?}", excerpt(t)));
        };
        let start = off + (rest.len() - after.len());
        let e = after
            .find(DS_CALL_END)
            .ok_or("a tool call without <｜tool▁call▁end｜>")?;
        calls.push(deepseek_item(&after[..e], start, &mut notes)?);
        let consumed = rest.len() - after.len() + e + DS_CALL_END.len();
        off += consumed;
        rest = &rest[consumed..];
    }
    if calls.is_empty() {
        return Err("no tool call inside the section".into());
    }
    Ok((calls, notes))
}

fn deepseek_item(s: &str, off: usize, notes: &mut Vec<Note>) -> Result<RawCall, String> {
    let (left, right) = s
        .split_once(DS_SEP)
        .ok_or("no <｜tool▁sep｜> in the tool call")?;
    let (name, args_src) = if left.trim() == "function" {
        let r = right.trim_start();
        let nl = r.find(['\n', '`', '{']).unwrap_or(r.len());
        (r[..nl].trim(), &r[nl..])
    } else {
        (left.trim(), right)
    };
    if name.is_empty() {
        return Err("empty function name".into());
    }
    let mut local = Vec::new();
    let v = json_filling(unfence(args_src), &mut local)?;
    notes.extend(shift(local, off));
    Ok(RawCall {
        name: name.to_string(),
        arguments: v,
        id: None,
        syntax: Syntax::DeepSeekV3,
    })
}

pub(crate) const KIMI_CALL_BEGIN: &str = "<|tool_call_begin|>";
pub(crate) const KIMI_CALL_END: &str = "<|tool_call_end|>";
const KIMI_ARG: &str = "<|tool_call_argument_begin|>";

/// Kimi K2: the body of the section (several items) or of one `<|tool_call_begin|>` (`item`).
pub(crate) fn kimi(body: &str, item: bool) -> BodyResult {
    let mut calls = Vec::new();
    let mut notes = Vec::new();
    if item {
        calls.push(kimi_item(body, 0, &mut notes)?);
        return Ok((calls, notes));
    }
    let mut rest = body;
    let mut off = 0;
    loop {
        let t = rest.trim_start();
        if t.is_empty() {
            break;
        }
        let Some(after) = t.strip_prefix(KIMI_CALL_BEGIN) else {
            return Err(format!(
                "expected {KIMI_CALL_BEGIN}, found {:?}",
                excerpt(t)
            ));
        };
        let start = off + (rest.len() - after.len());
        let e = after
            .find(KIMI_CALL_END)
            .ok_or("a tool call without <|tool_call_end|>")?;
        calls.push(kimi_item(&after[..e], start, &mut notes)?);
        let consumed = rest.len() - after.len() + e + KIMI_CALL_END.len();
        off += consumed;
        rest = &rest[consumed..];
    }
    if calls.is_empty() {
        return Err("no tool call inside the section".into());
    }
    Ok((calls, notes))
}

fn kimi_item(s: &str, off: usize, notes: &mut Vec<Note>) -> Result<RawCall, String> {
    let (head, args) = s
        .split_once(KIMI_ARG)
        .ok_or("no <|tool_call_argument_begin|> in the tool call")?;
    let id = head.trim();
    let name = id.strip_prefix("functions.").unwrap_or(id);
    let name = match name.rsplit_once(':') {
        Some((n, idx)) if idx.chars().all(|c| c.is_ascii_digit()) => n,
        _ => name,
    };
    if name.is_empty() {
        return Err("empty function name".into());
    }
    let mut local = Vec::new();
    let v = json_filling(args, &mut local)?;
    notes.extend(shift(local, off + head.len() + KIMI_ARG.len()));
    Ok(RawCall {
        name: name.to_string(),
        arguments: v,
        id: Some(id.to_string()),
        syntax: Syntax::KimiK2,
    })
}

/// Scanner state for the end of a JSON object/array (string-aware bracket depth), resumable
/// across chunks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct JsonEnd {
    depth: usize,
    in_str: bool,
    esc: bool,
}

impl JsonEnd {
    /// Scans `s` (the bytes after the ones already seen); `Some(i + 1)` when the value closes
    /// at `s[i]`.
    fn scan(&mut self, s: &[u8]) -> Option<usize> {
        for (i, &c) in s.iter().enumerate() {
            if self.in_str {
                if self.esc {
                    self.esc = false;
                } else if c == b'\\' {
                    self.esc = true;
                } else if c == b'"' {
                    self.in_str = false;
                }
                continue;
            }
            match c {
                b'"' => self.in_str = true,
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' => {
                    self.depth = self.depth.saturating_sub(1);
                    if self.depth == 0 {
                        return Some(i + 1);
                    }
                }
                _ => {}
            }
        }
        None
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum MistralPhase {
    /// Skipping whitespace before the first token.
    #[default]
    Lead,
    /// Looking for `[ARGS]` after a function name.
    Args,
    /// Skipping whitespace after `[ARGS]`.
    AfterArgs,
    /// Inside a JSON array/object.
    Json(JsonEnd),
}

/// Where a Mistral `[TOOL_CALLS]` body ends (relative to the body): after a JSON array/object,
/// or after `name…[ARGS]{json}`; resumable, so a body streamed in pieces is scanned once
/// (linear in its length). Feed it the whole body held so far each time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct MistralEnd {
    phase: MistralPhase,
    /// Bytes of the body already scanned.
    at: usize,
}

impl MistralEnd {
    /// The end of the body (`None` while undecided); `body` must extend the body given before.
    pub(crate) fn advance(&mut self, body: &str) -> Option<usize> {
        const ARGS: &str = "[ARGS]";
        loop {
            match self.phase {
                MistralPhase::Lead | MistralPhase::AfterArgs => {
                    let rest = &body[self.at..];
                    let t = rest.trim_start();
                    self.at += rest.len() - t.len();
                    let &c = t.as_bytes().first()?;
                    self.phase = match (self.phase, c) {
                        (_, b'[' | b'{') => MistralPhase::Json(JsonEnd::default()),
                        (MistralPhase::Lead, _) => MistralPhase::Args,
                        _ => return Some(self.at),
                    };
                }
                MistralPhase::Args => {
                    match memchr::memmem::find(&body.as_bytes()[self.at..], ARGS.as_bytes()) {
                        Some(p) => {
                            self.at += p + ARGS.len();
                            self.phase = MistralPhase::AfterArgs;
                        }
                        None => {
                            // keep a partial `[ARGS` at the end for the next piece
                            self.at = body.len().saturating_sub(ARGS.len() - 1).max(self.at);
                            while !body.is_char_boundary(self.at) {
                                self.at += 1;
                            }
                            return None;
                        }
                    }
                }
                MistralPhase::Json(mut j) => {
                    let r = j.scan(&body.as_bytes()[self.at..]);
                    match r {
                        Some(e) => {
                            self.at += e;
                            self.phase = MistralPhase::Json(j);
                            return Some(self.at);
                        }
                        None => {
                            self.at = body.len();
                            self.phase = MistralPhase::Json(j);
                            return None;
                        }
                    }
                }
            }
        }
    }
}

/// Mistral body (without `[TOOL_CALLS]`): a JSON array of calls, or `name[CALL_ID]id[ARGS]{json}`.
pub(crate) fn mistral(body: &str) -> BodyResult {
    let t = body.trim_start();
    let mut notes = Vec::new();
    if t.starts_with('[') || t.starts_with('{') {
        let v = json_filling(body, &mut notes)?;
        let at = body.len() - t.len();
        return Ok((json_calls(v, Syntax::Mistral, at, &mut notes)?, notes));
    }
    let a = t
        .find("[ARGS]")
        .ok_or("no [ARGS] after the function name")?;
    let head = &t[..a];
    let (name, id) = match head.split_once("[CALL_ID]") {
        Some((n, id)) => (n.trim(), Some(id.trim().to_string())),
        None => (head.trim(), None),
    };
    if name.is_empty() || name.contains(['{', '[', ' ']) {
        return Err(format!("bad function name {:?}", excerpt(name)));
    }
    let args_src = &t[a + "[ARGS]".len()..];
    let mut local = Vec::new();
    let v = json_filling(args_src, &mut local)?;
    notes.extend(shift(local, body.len() - args_src.len()));
    Ok((
        vec![RawCall {
            name: name.to_string(),
            arguments: v,
            id,
            syntax: Syntax::Mistral,
        }],
        notes,
    ))
}

/// Anthropic-style `<invoke` body: ` name="N">…<parameter name="k">v</parameter>…`.
/// Values typed by the schema; a DSML-style `string="true"` attribute forces a string.
pub(crate) fn invoke(body: &str, tools: &ToolIndex) -> BodyResult {
    let gt = body.find('>').ok_or("no `>` closing <invoke")?;
    let name = attr(&body[..gt], "name").ok_or("no name=\"…\" on <invoke>")?;
    if name.is_empty() {
        return Err("empty function name".into());
    }
    let mut notes = Vec::new();
    let (args, rest) = xml_params(body, gt + 1, &name, tools, XmlDialect::Invoke, &mut notes)?;
    if !rest.trim().is_empty() {
        return Err(format!(
            "unexpected text in <invoke>: {:?}",
            excerpt(rest.trim())
        ));
    }
    Ok((
        vec![RawCall {
            name,
            arguments: Value::Object(args),
            id: None,
            syntax: Syntax::AnthropicXml,
        }],
        notes,
    ))
}

fn attr(head: &str, key: &str) -> Option<String> {
    let hb = head.as_bytes();
    let mut from = 0;
    while let Some(p) = find_str(&head[from..], key) {
        let at = from + p;
        let eq = at + key.len();
        if hb.get(eq) != Some(&b'=') {
            from = at + 1;
            continue;
        }
        let ok_before = at == 0 || hb[at - 1].is_ascii_whitespace();
        let r = &head[eq + 1..];
        if ok_before {
            if let Some(q) = r.chars().next().filter(|c| *c == '"' || *c == '\'') {
                let inner = &r[1..];
                return inner.find(q).map(|e| inner[..e].to_string());
            }
            let e = r.find(|c: char| c.is_whitespace()).unwrap_or(r.len());
            return Some(r[..e].to_string());
        }
        from = eq + 1;
    }
    None
}

/// Byte offset of the first `needle` in `h` (memchr on its first byte, then a comparison;
/// cheaper than `str::find` for the short markers and bodies searched here).
pub(crate) fn find_str(h: &str, needle: &str) -> Option<usize> {
    let (hb, nb) = (h.as_bytes(), needle.as_bytes());
    let Some(&first) = nb.first() else {
        return Some(0);
    };
    let mut i = 0;
    while let Some(p) = memchr::memchr(first, &hb[i..]) {
        let at = i + p;
        if hb[at..].starts_with(nb) {
            return Some(at);
        }
        i = at + 1;
    }
    None
}

/// A harmony message header (text between `<|start|>`/`<|channel|>` and `<|message|>`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct HarmonyHeader {
    pub channel: Option<String>,
    pub recipient: Option<String>,
}

/// Parses `assistant to=functions.N<|channel|>commentary <|constrain|>json` and its variants:
/// the recipient may be in the role part or the channel part; the channel is the first word of
/// the last `<|channel|>` part. `to=assistant` is no recipient. The recipient is returned as
/// written (`functions.N`, or a built-in such as `python`).
pub(crate) fn harmony_header(h: &str) -> HarmonyHeader {
    let mut out = HarmonyHeader::default();
    let mut s = h;
    if let Some(p) = s.find("<|constrain|>") {
        s = &s[..p];
    }
    for word in s.split(|c: char| c.is_whitespace() || c == '<' || c == '>') {
        if let Some(r) = word.strip_prefix("to=") {
            let r = r.trim_end_matches('|');
            if !r.is_empty() && r != "assistant" {
                out.recipient = Some(r.to_string());
            }
        }
    }
    let chan_src = s.rsplit_once("<|channel|>").map(|(_, c)| c);
    if let Some(c) = chan_src {
        out.channel = c
            .split_whitespace()
            .find(|w| !w.starts_with("to="))
            .map(str::to_string);
    } else if let Some(first) = s.split_whitespace().find(|w| !w.starts_with("to="))
        && matches!(first, "analysis" | "commentary" | "final")
    {
        out.channel = Some(first.to_string());
    }
    out
}

/// A harmony call body: JSON arguments (name from the header).
pub(crate) fn harmony_call(body: &str, name: &str) -> BodyResult {
    let mut notes = Vec::new();
    let t = body.trim();
    let v = json_filling(t, &mut notes)?;
    Ok((
        vec![RawCall {
            name: name.to_string(),
            arguments: v,
            id: None,
            syntax: Syntax::GptOss,
        }],
        notes,
    ))
}
