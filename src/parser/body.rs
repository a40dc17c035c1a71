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
            // Command R7B: {"tool_call_id", "tool_name", "parameters"}
            if syntax == Syntax::CommandR7b && !obj.contains_key("name") {
                if let Some(n) = obj.remove("tool_name") {
                    obj.insert("name".into(), n);
                }
                if let Some(id) = obj.remove("tool_call_id") {
                    obj.insert("id".into(), id);
                }
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
                if !matches!(syntax, Syntax::Llama3 | Syntax::CommandR7b) {
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
    // glm4.5: a bare name, then `<arg_key>` pairs (or nothing: a call without arguments)
    if t.starts_with(|c: char| c.is_alphanumeric() || c == '_') {
        return glm(body, tools);
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
    qwen_function_with(s, tools, true)
}

/// As [`qwen_function`]; `strip`: drop one newline after `<parameter=k>` and before
/// `</parameter>`.
fn qwen_function_with(s: &str, tools: &ToolIndex, strip: bool) -> BodyResult {
    let gt = s.find('>').ok_or("no `>` after `<function=`")?;
    let name = s[..gt].trim();
    if name.is_empty() || name.contains(['<', '\n']) {
        return Err("bad function name after `<function=`".into());
    }
    let mut notes = Vec::new();
    // functionary v3.1: `<function=N>{json}</function>`
    let after = s[gt + 1..].trim_start();
    if after.starts_with('{') {
        let end = find_str(after, "</function>").unwrap_or(after.len());
        let v = json_filling(&after[..end], &mut notes)?;
        let tail = after[end..].trim_start();
        let tail = tail.strip_prefix("</function>").unwrap_or(tail).trim();
        if !tail.is_empty() {
            return Err(format!(
                "unexpected text after the arguments: {:?}",
                excerpt(tail)
            ));
        }
        let off = s.len() - after.len();
        return Ok((
            vec![RawCall {
                name: name.to_string(),
                arguments: v,
                id: None,
                syntax: Syntax::FunctionaryV31,
            }],
            shift(notes, off),
        ));
    }
    let d = if strip {
        XmlDialect::Qwen
    } else {
        XmlDialect::QwenVerbatim
    };
    let (args, rest) = xml_params(s, gt + 1, name, tools, d, &mut notes)?;
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
    /// As `Qwen`, values kept with their newlines (Seed-OSS).
    QwenVerbatim,
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
        XmlDialect::Qwen | XmlDialect::QwenVerbatim => "<parameter=",
        XmlDialect::Invoke => "<parameter",
    };
    let mut rest = &body[from..];
    let mut args = Map::new();
    while let Some(p) = find_str(rest, open) {
        let between = rest[..p].trim();
        match d {
            XmlDialect::Qwen | XmlDialect::QwenVerbatim
                if !between.is_empty() && between != "</function>" =>
            {
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
            XmlDialect::Qwen | XmlDialect::QwenVerbatim => "no `>` after `<parameter=`",
            XmlDialect::Invoke => "no `>` closing <parameter",
        })?;
        let head = &after[..gt];
        let key = match d {
            XmlDialect::Qwen | XmlDialect::QwenVerbatim => head.trim().to_string(),
            XmlDialect::Invoke => attr(head, "name").ok_or("no name=\"…\" on <parameter>")?,
        };
        let val_all = &after[gt + 1..];
        let e = find_str(val_all, "</parameter>")
            .ok_or_else(|| format!("parameter {key:?} has no </parameter>"))?;
        let raw = if d == XmlDialect::QwenVerbatim {
            &val_all[..e]
        } else {
            strip_one_newline(&val_all[..e])
        };
        let forced = match d {
            XmlDialect::Invoke => attr(head, "string"),
            XmlDialect::Qwen | XmlDialect::QwenVerbatim => None,
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
    gemma_call(body, GQ)
}

/// A Gemma-style call `call:N{k:Qtext Q,n:3}` with string quote `q` (Gemma 4 `<|"|>`,
/// FunctionGemma `<escape>`).
fn gemma_call(body: &str, q: &str) -> BodyResult {
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
    let args = gemma_value(src, &mut i, q)?;
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
/// FunctionGemma's string quote.
const FG_Q: &str = "<escape>";

fn skip_ws(s: &str, i: &mut usize) {
    let b = s.as_bytes();
    while *i < b.len() && b[*i].is_ascii_whitespace() {
        *i += 1;
    }
}

fn gemma_value(s: &str, i: &mut usize, q: &str) -> Result<Value, String> {
    skip_ws(s, i);
    let r = &s[*i..];
    if let Some(after) = r.strip_prefix(q) {
        let e = find_str(after, q).ok_or_else(|| format!("unterminated {q} string"))?;
        *i += q.len() + e + q.len();
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
                let key = if s[*i..].starts_with(q) || s[*i..].starts_with('"') {
                    match gemma_value(s, i, q)? {
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
                let v = gemma_value(s, i, q)?;
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
                a.push(gemma_value(s, i, q)?);
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

// ---------------------------------------------------------------------------------------------
// Pythonic calls (Llama 3.2 / 4, Olmo, LFM2, Llama 3.1 built-ins)

/// Whether `t` (starting with `[`) starts like a pythonic call list `[name(` : `Some(true)`
/// yes, `Some(false)` no, `None` undecided yet (more text needed).
pub(crate) fn pythonic_prefix(t: &str) -> Option<bool> {
    let r = t.strip_prefix('[')?.trim_start();
    let mut seen = false;
    for c in r.chars() {
        if c.is_ascii_alphanumeric() || c == '_' || (c == '.' && seen) {
            seen = true;
            continue;
        }
        return Some(seen && c == '(');
    }
    None
}

/// A Python literal reader over `s` (JSON literals accepted too): strings in `'…'` or `"…"`
/// with escapes, numbers, `True`/`False`/`None`, lists, tuples (as lists) and dicts.
struct Py<'a> {
    s: &'a str,
    i: usize,
    /// Lists and dicts open around the value being read ([`PY_MAX_DEPTH`]).
    depth: usize,
}

/// How deep lists and dicts may nest in a Python literal: as deep as serde_json reads JSON
/// (its recursion limit, 128), so a model's `[[[[…` is a malformed call, not a stack overflow.
const PY_MAX_DEPTH: usize = 128;

impl Py<'_> {
    fn ws(&mut self) {
        let b = self.s.as_bytes();
        while self.i < b.len() && b[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.as_bytes().get(self.i).copied()
    }

    fn eat(&mut self, c: u8) -> bool {
        self.ws();
        if self.peek() == Some(c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn ident(&mut self) -> &str {
        self.ws();
        let b = self.s.as_bytes();
        let st = self.i;
        while self.i < b.len() && (b[self.i].is_ascii_alphanumeric() || b"_.-".contains(&b[self.i]))
        {
            self.i += 1;
        }
        &self.s[st..self.i]
    }

    fn string(&mut self, q: char) -> Result<String, String> {
        self.i += 1;
        let mut out = String::new();
        let mut it = self.s[self.i..].char_indices();
        while let Some((k, c)) = it.next() {
            if c == q {
                self.i += k + 1;
                return Ok(out);
            }
            if c != '\\' {
                out.push(c);
                continue;
            }
            let Some((_, e)) = it.next() else { break };
            match e {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                'r' => out.push('\r'),
                '0' => out.push('\0'),
                'u' => {
                    let hex: String = it.by_ref().take(4).map(|(_, c)| c).collect();
                    let cp = u32::from_str_radix(&hex, 16).map_err(|_| "bad \\u escape")?;
                    out.push(char::from_u32(cp).unwrap_or('\u{fffd}'));
                }
                other => out.push(other),
            }
        }
        Err("unterminated string".into())
    }

    fn value(&mut self) -> Result<Value, String> {
        self.ws();
        if matches!(self.peek(), Some(b'[' | b'(' | b'{')) {
            if self.depth >= PY_MAX_DEPTH {
                return Err(format!(
                    "lists or dicts nested deeper than {PY_MAX_DEPTH} levels"
                ));
            }
            self.depth += 1;
            let v = self.scalar_or_nested();
            self.depth -= 1;
            return v;
        }
        self.scalar_or_nested()
    }

    fn scalar_or_nested(&mut self) -> Result<Value, String> {
        match self.peek() {
            None => Err("unexpected end of arguments".into()),
            Some(q @ (b'"' | b'\'')) => self.string(q as char).map(Value::String),
            Some(open @ (b'[' | b'(')) => {
                self.i += 1;
                let close = if open == b'[' { b']' } else { b')' };
                let mut a = Vec::new();
                loop {
                    if self.eat(close) {
                        return Ok(Value::Array(a));
                    }
                    a.push(self.value()?);
                    if !self.eat(b',') {
                        if self.eat(close) {
                            return Ok(Value::Array(a));
                        }
                        return Err("expected `,` or a closing bracket in a list".into());
                    }
                }
            }
            Some(b'{') => {
                self.i += 1;
                let mut m = Map::new();
                loop {
                    if self.eat(b'}') {
                        return Ok(Value::Object(m));
                    }
                    let k = match self.value()? {
                        Value::String(k) => k,
                        other => other.to_string(),
                    };
                    if !self.eat(b':') {
                        return Err(format!("expected `:` after key {k:?}"));
                    }
                    let v = self.value()?;
                    m.insert(k, v);
                    if !self.eat(b',') {
                        if self.eat(b'}') {
                            return Ok(Value::Object(m));
                        }
                        return Err("expected `,` or `}` in a dict".into());
                    }
                }
            }
            Some(_) => {
                let w = self.ident().to_string();
                match w.as_str() {
                    "True" | "true" => Ok(Value::Bool(true)),
                    "False" | "false" => Ok(Value::Bool(false)),
                    "None" | "null" => Ok(Value::Null),
                    "" => Err(format!("unexpected {:?}", excerpt(&self.s[self.i..]))),
                    _ => {
                        // a number (ident() also took digits, `.`, `-`; exponents: `e`/`+`)
                        let mut w = w;
                        if w.ends_with(['e', 'E']) && matches!(self.peek(), Some(b'+' | b'-')) {
                            self.i += 1;
                            w.push(self.s.as_bytes()[self.i - 1] as char);
                            w.push_str(self.ident());
                        }
                        serde_json::from_str::<Value>(&w)
                            .ok()
                            .filter(Value::is_number)
                            .ok_or_else(|| format!("not a Python literal: {:?}", excerpt(&w)))
                    }
                }
            }
        }
    }

    /// `name(k=v, …)` (name may be dotted) → (name, arguments).
    fn call(&mut self) -> Result<(String, Map<String, Value>), String> {
        let name = self.ident().to_string();
        if name.is_empty() {
            return Err("expected a function name".into());
        }
        if !self.eat(b'(') {
            return Err(format!("expected `(` after {name:?}"));
        }
        let mut args = Map::new();
        loop {
            if self.eat(b')') {
                return Ok((name, args));
            }
            let k = self.ident().to_string();
            if k.is_empty() || !self.eat(b'=') {
                return Err(format!("expected `key=value` in the call of {name:?}"));
            }
            let v = self.value()?;
            args.insert(k, v);
            if !self.eat(b',') {
                if self.eat(b')') {
                    return Ok((name, args));
                }
                return Err(format!("expected `,` or `)` in the call of {name:?}"));
            }
        }
    }
}

/// A pythonic call list `[f(a=1), g(b="x")]` filling `s` (after trimming).
pub(crate) fn pythonic_list(s: &str, syntax: Syntax) -> Result<Vec<RawCall>, String> {
    let mut p = Py {
        s: s.trim(),
        i: 0,
        depth: 0,
    };
    if !p.eat(b'[') {
        return Err("a pythonic call list starts with `[`".into());
    }
    let mut calls = Vec::new();
    loop {
        if p.eat(b']') {
            break;
        }
        let (name, args) = p.call()?;
        calls.push(RawCall {
            name,
            arguments: Value::Object(args),
            id: None,
            syntax,
        });
        if !p.eat(b',') {
            if p.eat(b']') {
                break;
            }
            return Err("expected `,` or `]` after a call".into());
        }
    }
    p.ws();
    if p.i != p.s.len() {
        return Err(format!(
            "unexpected text after the call list: {:?}",
            excerpt(&p.s[p.i..])
        ));
    }
    if calls.is_empty() {
        return Err("empty call list".into());
    }
    Ok(calls)
}

/// LFM2 `<|tool_call_start|>` body: a pythonic call list, or JSON calls.
pub(crate) fn lfm2(body: &str) -> BodyResult {
    let t = body.trim();
    if t.starts_with('[') && pythonic_prefix(t) == Some(true) {
        return Ok((pythonic_list(t, Syntax::Lfm2)?, vec![]));
    }
    json_block(body, Syntax::Lfm2)
}

/// Llama 3.1 `<|python_tag|>` body: call JSON (several separated by `;`), a built-in tool call
/// `brave_search.call(query="…")` (name `brave_search`), or, for functionary v3.1, Python code
/// (a call of `python` with `{"code": …}`).
pub(crate) fn python_tag(body: &str, syntax: Option<Syntax>) -> BodyResult {
    let t = body.trim();
    if t.starts_with('{') {
        return json_seq_block(body, Syntax::Llama3);
    }
    let mut p = Py {
        s: t,
        i: 0,
        depth: 0,
    };
    if let Ok((name, args)) = p.call() {
        p.ws();
        if p.i == t.len() {
            let name = name.strip_suffix(".call").unwrap_or(&name).to_string();
            return Ok((
                vec![RawCall {
                    name,
                    arguments: Value::Object(args),
                    id: None,
                    syntax: Syntax::Llama3,
                }],
                vec![],
            ));
        }
    }
    if syntax == Some(Syntax::FunctionaryV31) && !t.is_empty() {
        let mut args = Map::new();
        args.insert("code".into(), Value::String(t.to_string()));
        return Ok((
            vec![RawCall {
                name: "python".into(),
                arguments: Value::Object(args),
                id: None,
                syntax: Syntax::FunctionaryV31,
            }],
            vec![],
        ));
    }
    Err(format!(
        "neither call JSON nor a built-in `tool.call(…)`: {:?}",
        excerpt(t)
    ))
}

/// JSON values separated by `;` (Llama 3.x writes parallel calls as `{…}; {…}`, vLLM
/// llama_tool_parser.py): the values and the byte offset after the last one.
pub(crate) fn json_seq(s: &str) -> Result<(Vec<Value>, usize, usize), String> {
    let (v, lead, mut end) = first_json(s)?;
    let mut out = vec![v];
    loop {
        let rest = &s[end..];
        let t = rest.trim_start();
        let Some(after) = t.strip_prefix(';') else {
            break;
        };
        if !after.trim_start().starts_with('{') {
            break;
        }
        let at = end + (rest.len() - after.len());
        match first_json(after) {
            Ok((v, _, e)) => {
                out.push(v);
                end = at + e;
            }
            Err(_) => break,
        }
    }
    Ok((out, lead, end))
}

/// A block whose body is call JSON values separated by `;`.
fn json_seq_block(body: &str, syntax: Syntax) -> BodyResult {
    let (vals, lead, end) = json_seq(body)?;
    let t = body[end..].trim();
    if !t.is_empty() {
        return Err(format!(
            "unexpected text after the JSON value at byte {end}: {:?}",
            excerpt(t)
        ));
    }
    let mut notes = Vec::new();
    let mut calls = Vec::new();
    for v in vals {
        calls.extend(json_calls(v, syntax, lead, &mut notes)?);
    }
    Ok((calls, notes))
}

// ---------------------------------------------------------------------------------------------
// XML-ish families

/// Seed-OSS `<seed:tool_call>` body: `<function=N><parameter=k>v</parameter></function>`.
pub(crate) fn seed(body: &str, tools: &ToolIndex) -> BodyResult {
    let t = body.trim_start();
    let rest = t
        .strip_prefix("<function=")
        .ok_or("no <function= in <seed:tool_call>")?;
    let off = body.len() - rest.len();
    // Seed-OSS values are kept as written, newlines included (llama.cpp test-chat.cpp)
    let (mut calls, notes) = qwen_function_with(rest, tools, false)?;
    for c in &mut calls {
        c.syntax = Syntax::SeedOss;
    }
    Ok((calls, shift(notes, off)))
}

/// GLM 4.5–4.7 `<tool_call>` body: `N\n<arg_key>k</arg_key>\n<arg_value>v</arg_value>…`, values
/// typed by the schema like qwen3-coder's (llama.cpp test-chat.cpp GLM-4.7-Flash, Ling 3).
pub(crate) fn glm(body: &str, tools: &ToolIndex) -> BodyResult {
    let t = body.trim_start();
    let nend = t.find('<').unwrap_or(t.len());
    let name = t[..nend].trim();
    if name.is_empty() || name.contains(['{', '}', '"', '\n']) {
        return Err("bad function name after <tool_call>".into());
    }
    let mut notes = Vec::new();
    let mut args = Map::new();
    let mut rest = &t[nend..];
    loop {
        let r = rest.trim_start();
        if r.is_empty() {
            break;
        }
        let Some(k) = r.strip_prefix("<arg_key>") else {
            return Err(format!("expected <arg_key>, found {:?}", excerpt(r)));
        };
        let ke = find_str(k, "</arg_key>").ok_or("<arg_key> without </arg_key>")?;
        let key = k[..ke].trim().to_string();
        let r = k[ke + "</arg_key>".len()..].trim_start();
        let v = r
            .strip_prefix("<arg_value>")
            .ok_or_else(|| format!("no <arg_value> after key {key:?}"))?;
        let ve = find_str(v, "</arg_value>").ok_or("<arg_value> without </arg_value>")?;
        let raw = &v[..ve];
        let val_off = body.len() - v.len();
        args.insert(
            key.clone(),
            typed_param(raw, name, &key, tools, val_off, &mut notes),
        );
        rest = &v[ve + "</arg_value>".len()..];
    }
    Ok((
        vec![RawCall {
            name: name.to_string(),
            arguments: Value::Object(args),
            id: None,
            syntax: Syntax::Glm45,
        }],
        notes,
    ))
}

/// One untyped parameter value typed by the schema of parameter `key` of tool `tool`
/// ([`typed`]), with a `degenerated_to_string` note when the schema allows no string.
fn typed_param(
    raw: &str,
    tool: &str,
    key: &str,
    tools: &ToolIndex,
    offset: usize,
    notes: &mut Vec<Note>,
) -> Value {
    let types = tools.param(tool, key).map(allowed_types);
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
            offset,
        });
    }
    v
}

/// DeepSeek V3.2 / V4 DSML body: `<｜DSML｜invoke name="N"><｜DSML｜parameter name="k"
/// string="true|false">v</｜DSML｜parameter></｜DSML｜invoke>…` (llama.cpp common/parsers/deepseek.cpp):
/// `string="true"` keeps the text, `string="false"` reads JSON.
pub(crate) fn dsml(body: &str, tools: &ToolIndex) -> BodyResult {
    // the same elements as Anthropic-style XML with a `｜DSML｜` prefix on every tag
    let plain = body.replace("<｜DSML｜", "<").replace("</｜DSML｜", "</");
    element_seq(&plain, "<invoke", "</invoke>", Syntax::DeepSeekV32, |b| {
        invoke(b, tools)
    })
}

/// `s` as a sequence of `open…close` elements (whitespace between), each parsed by `one`; the
/// calls are marked `syntax`. `s` is a rewritten body (prefixes stripped), so repair notes point
/// at the start of the block.
fn element_seq(
    s: &str,
    open: &str,
    close: &str,
    syntax: Syntax,
    one: impl Fn(&str) -> BodyResult,
) -> BodyResult {
    let mut calls = Vec::new();
    let mut notes = Vec::new();
    let mut rest = s;
    loop {
        let r = rest.trim_start();
        if r.is_empty() {
            break;
        }
        let inner = r
            .strip_prefix(open)
            .ok_or_else(|| format!("expected {open}, found {:?}", excerpt(r)))?;
        let e = find_str(inner, close).ok_or_else(|| format!("{open} without {close}"))?;
        let (mut c, n) = one(&inner[..e])?;
        for x in &mut c {
            x.syntax = syntax;
        }
        calls.extend(c);
        notes.extend(n);
        rest = &inner[e + close.len()..];
    }
    if calls.is_empty() {
        return Err(format!("no {open} element in the block"));
    }
    for n in &mut notes {
        n.offset = 0;
    }
    Ok((calls, notes))
}

/// MiniMax M3 body (after `]<]minimax[>[<tool_call>`): invokes whose parameters are elements
/// named by the key, `<invoke name="N"><city>Tokyo</city></invoke>`, each tag after a
/// `]<]minimax[>[` separator (llama.cpp common/parsers/minimax-m3.cpp). A value is typed by its
/// schema: a schema allowing a string keeps the text as written (separators included);
/// otherwise child elements build an object (`<real>1.5</real>`) or, for an array, a list of
/// `<item>`s; leaves are typed like qwen3-coder values.
pub(crate) fn minimax_m3(body: &str, tools: &ToolIndex) -> BodyResult {
    use super::syntax::MM3_SEP;
    let mut calls = Vec::new();
    let mut notes = Vec::new();
    let mut rest = body;
    loop {
        let r = rest.trim_start().trim_start_matches(MM3_SEP).trim_start();
        if r.is_empty() {
            break;
        }
        let inv = r
            .strip_prefix("<invoke")
            .ok_or_else(|| format!("expected <invoke, found {:?}", excerpt(r)))?;
        let gt = inv.find('>').ok_or("no `>` closing <invoke")?;
        let name = attr(&inv[..gt], "name").ok_or("no name=\"…\" on <invoke>")?;
        let e = find_str(inv, "</invoke>").ok_or("<invoke> without </invoke>")?;
        let inner = inv[gt + 1..e].trim_end().trim_end_matches(MM3_SEP);
        let mut args = Map::new();
        for (key, raw) in m3_elements(inner)? {
            let schema = tools.param(&name, key);
            let v = m3_value(raw, schema);
            if let Some(types) = schema
                .map(allowed_types)
                .filter(|t| !t.is_empty() && !t.contains(&"string"))
                && v.is_string()
            {
                notes.push(Note {
                    kind: "degenerated_to_string",
                    message: format!(
                        "value {:?} of parameter {key:?} of tool {name:?} is not of the schema type ({}); kept as a string",
                        excerpt(raw.trim()),
                        types.join(" or ")
                    ),
                    offset: 0,
                });
            }
            args.insert(key.to_string(), v);
        }
        calls.push(RawCall {
            name,
            arguments: Value::Object(args),
            id: None,
            syntax: Syntax::MiniMaxM3,
        });
        rest = &inv[e + "</invoke>".len()..];
    }
    if calls.is_empty() {
        return Err("no invoke inside the tool call".into());
    }
    Ok((calls, notes))
}

/// The `<key>value</key>` elements of a MiniMax M3 element list (separators between them are
/// skipped; a value keeps inner separators but not the one before its closing tag).
fn m3_elements(mut s: &str) -> Result<Vec<(&str, &str)>, String> {
    use super::syntax::MM3_SEP;
    let mut out = Vec::new();
    loop {
        let t = s.trim_start().trim_start_matches(MM3_SEP).trim_start();
        if t.is_empty() {
            return Ok(out);
        }
        let open = t
            .strip_prefix('<')
            .ok_or_else(|| format!("expected an element, found {:?}", excerpt(t)))?;
        let kg = open.find('>').ok_or("no `>` after an element name")?;
        let key = &open[..kg];
        if key.is_empty() || key.starts_with('/') {
            return Err(format!("unexpected {:?}", excerpt(t)));
        }
        let close = format!("</{key}>");
        let v = &open[kg + 1..];
        // the matching close tag (same-named elements may nest)
        let (mut depth, mut at) = (0usize, 0usize);
        let open_tag = format!("<{key}>");
        let ve = loop {
            let c = find_str(&v[at..], &close).ok_or_else(|| format!("<{key}> without {close}"))?;
            let o = find_str(&v[at..], &open_tag);
            match o {
                Some(o) if o < c => {
                    depth += 1;
                    at += o + open_tag.len();
                }
                _ if depth > 0 => {
                    depth -= 1;
                    at += c + close.len();
                }
                _ => break at + c,
            }
        };
        let raw = v[..ve].strip_suffix(MM3_SEP).unwrap_or(&v[..ve]);
        out.push((key, raw));
        s = &v[ve + close.len()..];
    }
}

/// The member of `schema` (itself, or an `anyOf`/`oneOf` member) whose `type` is `ty`.
fn schema_member<'a>(schema: Option<&'a Value>, ty: &str) -> Option<&'a Value> {
    let s = schema?;
    let has = |v: &Value| match v.get("type") {
        Some(Value::String(t)) => t == ty,
        Some(Value::Array(a)) => a.iter().any(|x| x == ty),
        _ => false,
    };
    if has(s) {
        return Some(s);
    }
    ["anyOf", "oneOf"]
        .iter()
        .filter_map(|k| s.get(*k).and_then(Value::as_array))
        .flatten()
        .find(|m| has(m))
}

/// A MiniMax M3 value by its schema (see [`minimax_m3`]).
fn m3_value(raw: &str, schema: Option<&Value>) -> Value {
    use super::syntax::MM3_SEP;
    let types = schema.map(allowed_types);
    if types.as_ref().is_some_and(|t| t.contains(&"string")) || schema.is_none() {
        return Value::String(raw.to_string());
    }
    let stripped = raw.replace(MM3_SEP, "");
    let t = stripped.trim();
    if t.starts_with('<')
        && let Ok(children) = m3_elements(raw)
    {
        if let Some(arr) = schema_member(schema, "array")
            && children.iter().all(|(k, _)| *k == "item")
        {
            let items = arr.get("items");
            return Value::Array(children.iter().map(|(_, r)| m3_value(r, items)).collect());
        }
        if let Some(obj) = schema_member(schema, "object") {
            let mut m = Map::new();
            for (k, r) in children {
                let sub = obj.get("properties").and_then(|p| p.get(k));
                m.insert(k.to_string(), m3_value(r, sub));
            }
            return Value::Object(m);
        }
    }
    typed(t, types.as_deref())
}

/// Kimi K3 tools body: `<|open|>call tool="N" index="1"<|sep|><|open|>argument key="k"
/// type="number"<|sep|>v<|close|>argument<|sep|>…<|close|>call<|sep|>` (llama.cpp
/// common/parsers/kimi-k3.cpp): `type="string"` keeps the text, other types read JSON, falling
/// back to the schema.
pub(crate) fn kimi_k3(body: &str, tools: &ToolIndex) -> BodyResult {
    const OPEN: &str = "<|open|>";
    const SEP: &str = "<|sep|>";
    const END_ARG: &str = "<|close|>argument<|sep|>";
    const END_CALL: &str = "<|close|>call<|sep|>";
    let mut calls = Vec::new();
    let mut notes = Vec::new();
    let mut rest = body;
    loop {
        let r = rest.trim_start();
        if r.is_empty() {
            break;
        }
        let head = r
            .strip_prefix(OPEN)
            .and_then(|x| x.strip_prefix("call"))
            .ok_or_else(|| format!("expected <|open|>call, found {:?}", excerpt(r)))?;
        let hs = find_str(head, SEP).ok_or("no <|sep|> after <|open|>call")?;
        let name = attr(&head[..hs], "tool").ok_or("no tool=\"…\" on the call")?;
        let ce = find_str(head, END_CALL).ok_or("a call without <|close|>call<|sep|>")?;
        let mut inner = &head[hs + SEP.len()..ce];
        let mut args = Map::new();
        loop {
            let t = inner.trim_start();
            if t.is_empty() {
                break;
            }
            let a = t
                .strip_prefix(OPEN)
                .and_then(|x| x.strip_prefix("argument"))
                .ok_or_else(|| format!("expected <|open|>argument, found {:?}", excerpt(t)))?;
            let s2 = find_str(a, SEP).ok_or("no <|sep|> after <|open|>argument")?;
            let key = attr(&a[..s2], "key").ok_or("no key=\"…\" on the argument")?;
            let ty = attr(&a[..s2], "type");
            let v = &a[s2 + SEP.len()..];
            let ve = find_str(v, END_ARG).ok_or("an argument without <|close|>argument<|sep|>")?;
            let raw = &v[..ve];
            let val = match ty.as_deref() {
                Some("string") => Value::String(raw.to_string()),
                Some(_) => serde_json::from_str(raw.trim())
                    .unwrap_or_else(|_| typed_param(raw, &name, &key, tools, 0, &mut notes)),
                None => typed_param(raw, &name, &key, tools, 0, &mut notes),
            };
            args.insert(key, val);
            inner = &v[ve + END_ARG.len()..];
        }
        calls.push(RawCall {
            name,
            arguments: Value::Object(args),
            id: None,
            syntax: Syntax::KimiK3,
        });
        rest = &head[ce + END_CALL.len()..];
    }
    if calls.is_empty() {
        return Err("no call inside <|open|>tools".into());
    }
    Ok((calls, notes))
}

/// FunctionGemma body: `call:N{k:<escape>v<escape>,n:3}` (vLLM functiongemma_tool_parser.py).
pub(crate) fn function_gemma(body: &str) -> BodyResult {
    let (mut calls, notes) = gemma_call(body, FG_Q)?;
    for c in &mut calls {
        c.syntax = Syntax::FunctionGemma;
    }
    Ok((calls, notes))
}

/// Apertus `<|tools_prefix|>` body: `[{"N": {args}}, …]` (llama.cpp test-chat.cpp, Apertus-8B).
pub(crate) fn apertus(body: &str) -> BodyResult {
    let mut notes = Vec::new();
    let v = json_filling(body, &mut notes)?;
    let items = match v {
        Value::Array(a) => a,
        o @ Value::Object(_) => vec![o],
        _ => return Err("expected a JSON list of {name: arguments}".into()),
    };
    let mut calls = Vec::new();
    for it in items {
        match it {
            Value::Object(o) if o.contains_key("name") => calls.extend(json_calls(
                Value::Object(o),
                Syntax::Apertus,
                0,
                &mut notes,
            )?),
            Value::Object(o) if o.len() == 1 => {
                let (name, args) = o.into_iter().next().unwrap_or_default();
                calls.push(RawCall {
                    name,
                    arguments: args,
                    id: None,
                    syntax: Syntax::Apertus,
                });
            }
            _ => return Err("expected {\"name\": {arguments}} items".into()),
        }
    }
    if calls.is_empty() {
        return Err("empty call list".into());
    }
    Ok((calls, notes))
}

/// GigaChat 3 (`<|message_sep|>` + `\n\nfunction call<|role_sep|>\n{json}`, `v3 = true`) and
/// 3.1 (`<|function_call|>{json}`) bodies (llama.cpp common/parsers/gigachat-v3.cpp).
pub(crate) fn gigachat(body: &str, v3: bool) -> BodyResult {
    let b = if v3 {
        body.trim_start()
            .strip_prefix("function call")
            .and_then(|r| r.trim_start().strip_prefix("<|role_sep|>"))
            .ok_or("not a `function call` message")?
    } else {
        body
    };
    json_block(b, Syntax::GigaChat3)
}

/// Functionary v3.2 element (after `>>>`, or the reply's start): `N\n{json}`; `python\ncode`
/// is a call of `python` with the code. (`all\n` + text, content, is handled by the caller.)
pub(crate) fn functionary_v32(body: &str) -> BodyResult {
    let nl = body
        .find('\n')
        .ok_or("no newline after the function name")?;
    let name = body[..nl].trim();
    if name.is_empty() || name.contains([' ', '{', '<']) {
        return Err(format!("bad function name {:?}", excerpt(name)));
    }
    let rest = &body[nl + 1..];
    let mut notes = Vec::new();
    let args = match json_filling(rest, &mut notes) {
        Ok(v) => v,
        Err(_) if name == "python" => {
            let mut m = Map::new();
            m.insert("code".into(), Value::String(rest.trim().to_string()));
            Value::Object(m)
        }
        Err(e) => return Err(e),
    };
    Ok((
        vec![RawCall {
            name: name.to_string(),
            arguments: args,
            id: None,
            syntax: Syntax::FunctionaryV32,
        }],
        shift(notes, nl + 1),
    ))
}

/// Command R+ `Action:` body: a ```` ```json ```` fence around `[{"tool_name","parameters"}]`.
pub(crate) fn command_r_plus(body: &str) -> BodyResult {
    let mut notes = Vec::new();
    let v = json_filling(unfence(body), &mut notes)?;
    Ok((json_calls(v, Syntax::CommandR7b, 0, &mut notes)?, notes)).map(
        |(mut c, n): (Vec<RawCall>, Vec<Note>)| {
            for x in &mut c {
                x.syntax = Syntax::CommandRPlus;
            }
            (c, n)
        },
    )
}

/// MiniCPM 5 `<function name=` body: `"N"><param name="k">v</param>…` with `<![CDATA[…]]>`
/// values kept verbatim; other values typed by the schema.
pub(crate) fn minicpm5(body: &str, tools: &ToolIndex) -> BodyResult {
    let gt = body.find('>').ok_or("no `>` closing <function")?;
    let name = attr(&format!("name={}", &body[..gt]), "name").ok_or("no function name")?;
    if name.is_empty() {
        return Err("empty function name".into());
    }
    let mut notes = Vec::new();
    let mut args = Map::new();
    let mut rest = &body[gt + 1..];
    loop {
        let r = rest.trim_start();
        if r.is_empty() {
            break;
        }
        let p = r
            .strip_prefix("<param")
            .ok_or_else(|| format!("expected <param, found {:?}", excerpt(r)))?;
        let pg = p.find('>').ok_or("no `>` closing <param")?;
        let key = attr(&p[..pg], "name").ok_or("no name=\"…\" on <param>")?;
        let v = &p[pg + 1..];
        let (val, after) = if let Some(cd) = v.strip_prefix("<![CDATA[") {
            let e = find_str(cd, "]]>").ok_or("unterminated CDATA")?;
            let after = cd[e + 3..]
                .strip_prefix("</param>")
                .ok_or("no </param> after CDATA")?;
            (Value::String(cd[..e].to_string()), after)
        } else {
            let e = find_str(v, "</param>")
                .ok_or_else(|| format!("<param {key:?}> without </param>"))?;
            let off = body.len() - v.len();
            (
                typed_param(&v[..e], &name, &key, tools, off, &mut notes),
                &v[e + "</param>".len()..],
            )
        };
        args.insert(key, val);
        rest = after;
    }
    Ok((
        vec![RawCall {
            name,
            arguments: Value::Object(args),
            id: None,
            syntax: Syntax::MiniCpm5,
        }],
        notes,
    ))
}

/// Muse Glimmer call message body: `<atem:function_calls><atem:invoke name="N"><atem:parameter
/// name="k">v</atem:parameter></atem:invoke></atem:function_calls>` (llama.cpp
/// common/parsers/muse-glimmer.cpp); `recipient` from the header.
pub(crate) fn muse(body: &str, recipient: &str, tools: &ToolIndex) -> BodyResult {
    let plain = body.replace("<atem:", "<").replace("</atem:", "</");
    let t = plain.trim();
    let t = t.strip_prefix("<function_calls>").unwrap_or(t);
    let t = t.trim_end();
    let t = t.strip_suffix("</function_calls>").unwrap_or(t);
    element_seq(t, "<invoke", "</invoke>", Syntax::MuseGlimmer, |b| {
        invoke(b, tools)
    })
    .map_err(|e| format!("message to {recipient:?}: {e}"))
}

/// `<tool_calls>` body: a JSON array (Apriel) or one call JSON object a line (MiniMax M1).
pub(crate) fn tool_calls_tag(body: &str) -> BodyResult {
    if body.trim_start().starts_with('[') {
        return json_block(body, Syntax::Apriel);
    }
    let mut notes = Vec::new();
    let mut calls = Vec::new();
    let mut rest = body;
    while !rest.trim().is_empty() {
        let (v, lead, end) = first_json(rest)?;
        calls.extend(json_calls(v, Syntax::MiniMaxM1, lead, &mut notes)?);
        rest = &rest[end..];
    }
    if calls.is_empty() {
        return Err("no call inside <tool_calls>".into());
    }
    Ok((calls, notes))
}

/// Solar Open body: `ID<|tool_call:name|>N<|tool_call:args|>{json}` (the id is kept).
pub(crate) fn solar(body: &str) -> BodyResult {
    const NAME: &str = "<|tool_call:name|>";
    const ARGS: &str = "<|tool_call:args|>";
    let (id, rest) = body.split_once(NAME).ok_or("no <|tool_call:name|>")?;
    let (name, args) = rest.split_once(ARGS).ok_or("no <|tool_call:args|>")?;
    let name = name.trim();
    if name.is_empty() {
        return Err("empty function name".into());
    }
    let mut notes = Vec::new();
    let v = json_filling(args, &mut notes)?;
    let id = id.trim();
    Ok((
        vec![RawCall {
            name: name.to_string(),
            arguments: v,
            id: (!id.is_empty()).then(|| id.to_string()),
            syntax: Syntax::SolarOpen,
        }],
        notes,
    ))
}

/// Hunyuan 3 `<tool_calls:opensource>` body: `<tool_call:opensource>N<tool_sep:opensource>`
/// + GLM-style `<arg_key:…>`/`<arg_value:…>` pairs, one `<tool_call:…>` per call.
pub(crate) fn hy3(body: &str, tools: &ToolIndex) -> BodyResult {
    let plain = body.replace(":opensource>", ">");
    element_seq(&plain, "<tool_call>", "</tool_call>", Syntax::Hy3, |b| {
        glm(&b.replacen("<tool_sep>", "", 1), tools)
    })
}
