//! Parsers for the inside of one closed call block, per syntax, with the accepted drifts.
//!
//! Each returns the calls (and repairs, offsets relative to the body) or a message saying why
//! the block did not parse; the caller keeps unparsed blocks as text and counts them malformed.

use serde_json::{Map, Value};

use super::syntax::Syntax;
use super::tools::ToolIndex;

/// One call found in a block.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RawCall {
    pub name: String,
    pub arguments: Value,
    pub id: Option<String>,
    pub syntax: Syntax,
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
        Some(Err(e)) => Err(format!("invalid JSON at line {} column {}: {e}", e.line(), e.column())),
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
        notes.push(Note { kind: "stray_closer", message: format!("dropped one stray `{t}` after the JSON value"), offset: off });
        return Ok(v);
    }
    let off = end + (rest.len() - rest.trim_start().len());
    Err(format!("unexpected text after the JSON value at byte {off}: {:?}", excerpt(t)))
}

fn excerpt(s: &str) -> String {
    s.chars().take(40).collect()
}

/// Turns call-shaped JSON into calls, accepting the field's drifts (as notes):
/// `{"type":"function","function":{…}}` (function_wrapper), `parameters` (parameters_for_arguments,
/// native for llama3), `input` (input_for_arguments), arguments as a JSON string
/// (string_arguments), arguments at the top level (top_level_arguments). Arrays give several calls.
pub(crate) fn json_calls(v: Value, syntax: Syntax, at: usize, notes: &mut Vec<Note>) -> Result<Vec<RawCall>, String> {
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
                && (obj.get("type").and_then(Value::as_str) == Some("function") || !obj.contains_key("name"))
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
                        Err(e) => return Err(format!("\"arguments\" is a string that is not JSON: {e}")),
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
                notes.push(Note { kind: "input_for_arguments", message: "read \"input\" as \"arguments\"".into(), offset: at });
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
                        message: "collected arguments written at the top level of the call object".into(),
                        offset: at,
                    });
                }
                Value::Object(rest)
            };
            Ok(vec![RawCall { name, arguments, id, syntax }])
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
    let mut rest = &s[gt + 1..];
    let mut args = Map::new();
    loop {
        let Some(p) = rest.find("<parameter=") else { break };
        let between = rest[..p].trim();
        if !between.is_empty() && between != "</function>" {
            return Err(format!("unexpected text before <parameter=: {:?}", excerpt(between)));
        }
        let after = &rest[p + "<parameter=".len()..];
        let kgt = after.find('>').ok_or("no `>` after `<parameter=`")?;
        let key = after[..kgt].trim().to_string();
        let val_all = &after[kgt + 1..];
        let (raw, next) = match val_all.find("</parameter>") {
            Some(e) => (&val_all[..e], &val_all[e + "</parameter>".len()..]),
            None => return Err(format!("parameter {key:?} has no </parameter>")),
        };
        let raw = strip_one_newline(raw);
        let schema = tools.param(name, &key);
        args.insert(key, typed(raw, schema));
        rest = next;
    }
    let tail = rest.trim();
    let tail = tail.strip_suffix("</tool_call>").map(str::trim_end).unwrap_or(tail);
    if !(tail.is_empty() || tail == "</function>") {
        return Err(format!("unexpected text in the function body: {:?}", excerpt(tail)));
    }
    Ok((vec![RawCall { name: name.to_string(), arguments: Value::Object(args), id: None, syntax: Syntax::Qwen3Coder }], vec![]))
}

fn strip_one_newline(s: &str) -> &str {
    let s = s.strip_prefix("\r\n").or_else(|| s.strip_prefix('\n')).unwrap_or(s);
    s.strip_suffix("\r\n").or_else(|| s.strip_suffix('\n')).unwrap_or(s)
}

/// JSON types a schema allows: `type` (string or list), `anyOf`/`oneOf` members, `enum`/`const`
/// values. Empty when unknown.
fn allowed_types(schema: &Value, out: &mut Vec<&'static str>) {
    fn push(out: &mut Vec<&'static str>, t: &str) {
        let t: &'static str = match t {
            "string" => "string",
            "integer" => "integer",
            "number" => "number",
            "boolean" => "boolean",
            "object" => "object",
            "array" => "array",
            "null" => "null",
            _ => return,
        };
        if !out.contains(&t) {
            out.push(t);
        }
    }
    match schema.get("type") {
        Some(Value::String(t)) => push(out, t),
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).for_each(|t| push(out, t)),
        _ => {}
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(alts)) = schema.get(key) {
            for a in alts {
                allowed_types(a, out);
            }
        }
    }
    let vals: Vec<&Value> = match (schema.get("enum"), schema.get("const")) {
        (Some(Value::Array(e)), _) => e.iter().collect(),
        (_, Some(c)) => vec![c],
        _ => vec![],
    };
    for v in vals {
        push(out, json_type(v));
    }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Types an unquoted XML parameter value by its schema: the value parsed as JSON when that JSON
/// type is allowed and is not a string (`anyOf[integer,null]` + `5` → `5`; an integer also
/// satisfies `number`); else the raw string (a string-typed `5` stays `"5"`). Without a schema the
/// value stays a string. Python literals `True`/`False`/`None` are accepted for boolean/null.
pub(crate) fn typed(raw: &str, schema: Option<&Value>) -> Value {
    let Some(schema) = schema else { return Value::String(raw.to_string()) };
    let mut types = Vec::new();
    allowed_types(schema, &mut types);
    let t = raw.trim();
    if let Ok(v) = serde_json::from_str::<Value>(t) {
        let jt = json_type(&v);
        let ok = jt != "string" && (types.contains(&jt) || (jt == "integer" && types.contains(&"number")));
        if ok {
            return v;
        }
    }
    match t {
        "True" | "False" if types.contains(&"boolean") && !types.contains(&"string") => return Value::Bool(t == "True"),
        "None" if types.contains(&"null") && !types.contains(&"string") => return Value::Null,
        _ => {}
    }
    Value::String(raw.to_string())
}

/// Gemma 4 body: `call:N{k:<|"|>text<|"|>,n:3}`.
pub(crate) fn gemma4(body: &str) -> BodyResult {
    let t = body.trim();
    let rest = t.strip_prefix("call:").ok_or("Gemma 4 call does not start with `call:`")?;
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
            notes.push(Note { kind: "stray_closer", message: format!("dropped one stray `{tail}` after the arguments"), offset: off });
        } else {
            return Err(format!("unexpected text after the arguments: {:?}", excerpt(tail)));
        }
    }
    Ok((vec![RawCall { name: name.to_string(), arguments: args, id: None, syntax: Syntax::Gemma4 }], notes))
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
        let e = after.find(GQ).ok_or("unterminated <|\"|> string")?;
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
            Ok(serde_json::from_str::<Value>(tok).unwrap_or_else(|_| Value::String(tok.to_string())))
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
        let e = after.find(DS_CALL_END).ok_or("a tool call without <｜tool▁call▁end｜>")?;
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
    let (left, right) = s.split_once(DS_SEP).ok_or("no <｜tool▁sep｜> in the tool call")?;
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
    Ok(RawCall { name: name.to_string(), arguments: v, id: None, syntax: Syntax::DeepSeekV3 })
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
            return Err(format!("expected {KIMI_CALL_BEGIN}, found {:?}", excerpt(t)));
        };
        let start = off + (rest.len() - after.len());
        let e = after.find(KIMI_CALL_END).ok_or("a tool call without <|tool_call_end|>")?;
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
    let (head, args) = s.split_once(KIMI_ARG).ok_or("no <|tool_call_argument_begin|> in the tool call")?;
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
    Ok(RawCall { name: name.to_string(), arguments: v, id: Some(id.to_string()), syntax: Syntax::KimiK2 })
}

/// Byte length of the JSON object/array starting at `s[0]` (`{` or `[`), string-aware;
/// `None` while it is not closed yet.
pub(crate) fn json_value_end(s: &[u8]) -> Option<usize> {
    let mut depth = 0usize;
    let mut in_str = false;
    let mut esc = false;
    for (i, &c) in s.iter().enumerate() {
        if in_str {
            if esc {
                esc = false;
            } else if c == b'\\' {
                esc = true;
            } else if c == b'"' {
                in_str = false;
            }
            continue;
        }
        match c {
            b'"' => in_str = true,
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
    }
    None
}

/// Where a Mistral `[TOOL_CALLS]` body ends (relative to the body): after a JSON array/object,
/// or after `name…[ARGS]{json}`. `None` while undecided.
pub(crate) fn mistral_end(body: &str) -> Option<usize> {
    let lead = body.len() - body.trim_start().len();
    let b = body.as_bytes();
    match b.get(lead) {
        None => None,
        Some(b'[') | Some(b'{') => json_value_end(&b[lead..]).map(|e| lead + e),
        Some(_) => {
            let a = body.find("[ARGS]")?;
            let after = a + "[ARGS]".len();
            let l2 = body[after..].len() - body[after..].trim_start().len();
            match b.get(after + l2) {
                None => None,
                Some(b'{') | Some(b'[') => json_value_end(&b[after + l2..]).map(|e| after + l2 + e),
                Some(_) => Some(after + l2),
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
    let a = t.find("[ARGS]").ok_or("no [ARGS] after the function name")?;
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
    Ok((vec![RawCall { name: name.to_string(), arguments: v, id, syntax: Syntax::Mistral }], notes))
}

/// Anthropic-style `<invoke` body: ` name="N">…<parameter name="k">v</parameter>…`.
/// Values typed by the schema; a DSML-style `string="true"` attribute forces a string.
pub(crate) fn invoke(body: &str, tools: &ToolIndex) -> BodyResult {
    let gt = body.find('>').ok_or("no `>` closing <invoke")?;
    let name = attr(&body[..gt], "name").ok_or("no name=\"…\" on <invoke>")?;
    if name.is_empty() {
        return Err("empty function name".into());
    }
    let mut rest = &body[gt + 1..];
    let mut args = Map::new();
    loop {
        let Some(p) = rest.find("<parameter") else { break };
        if !rest[..p].trim().is_empty() {
            return Err(format!("unexpected text in <invoke>: {:?}", excerpt(rest[..p].trim())));
        }
        let after = &rest[p + "<parameter".len()..];
        let pgt = after.find('>').ok_or("no `>` closing <parameter")?;
        let head = &after[..pgt];
        let key = attr(head, "name").ok_or("no name=\"…\" on <parameter>")?;
        let val_all = &after[pgt + 1..];
        let e = val_all.find("</parameter>").ok_or_else(|| format!("parameter {key:?} has no </parameter>"))?;
        let raw = strip_one_newline(&val_all[..e]);
        let v = match attr(head, "string").as_deref() {
            Some("true") => Value::String(raw.to_string()),
            Some("false") => serde_json::from_str(raw.trim()).unwrap_or_else(|_| Value::String(raw.to_string())),
            _ => typed(raw, tools.param(&name, &key)),
        };
        args.insert(key, v);
        rest = &val_all[e + "</parameter>".len()..];
    }
    if !rest.trim().is_empty() {
        return Err(format!("unexpected text in <invoke>: {:?}", excerpt(rest.trim())));
    }
    Ok((vec![RawCall { name, arguments: Value::Object(args), id: None, syntax: Syntax::AnthropicXml }], vec![]))
}

fn attr(head: &str, key: &str) -> Option<String> {
    let pat = format!("{key}=");
    let mut from = 0;
    while let Some(p) = head[from..].find(&pat) {
        let at = from + p;
        let ok_before = at == 0 || head.as_bytes()[at - 1].is_ascii_whitespace();
        let r = &head[at + pat.len()..];
        if ok_before {
            if let Some(q) = r.chars().next().filter(|c| *c == '"' || *c == '\'') {
                let inner = &r[1..];
                return inner.find(q).map(|e| inner[..e].to_string());
            }
            let e = r.find(|c: char| c.is_whitespace()).unwrap_or(r.len());
            return Some(r[..e].to_string());
        }
        from = at + pat.len();
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
            let r = r.trim_end_matches(|c: char| c == '|');
            if !r.is_empty() && r != "assistant" {
                out.recipient = Some(r.to_string());
            }
        }
    }
    let chan_src = match s.rsplit_once("<|channel|>") {
        Some((_, c)) => Some(c),
        None => None,
    };
    if let Some(c) = chan_src {
        out.channel = c.split_whitespace().find(|w| !w.starts_with("to=")).map(str::to_string);
    } else if let Some(first) = s.split_whitespace().find(|w| !w.starts_with("to=")) {
        if matches!(first, "analysis" | "commentary" | "final") {
            out.channel = Some(first.to_string());
        }
    }
    out
}

/// A harmony call body: JSON arguments (name from the header).
pub(crate) fn harmony_call(body: &str, name: &str) -> BodyResult {
    let mut notes = Vec::new();
    let t = body.trim();
    let v = json_filling(t, &mut notes)?;
    Ok((vec![RawCall { name: name.to_string(), arguments: v, id: None, syntax: Syntax::GptOss }], notes))
}
