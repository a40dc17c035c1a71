//! HAR 1.2 ↔ session conversion (browsers' devtools, mitmproxy, HTTP Toolkit exports; and
//! `toolscope export`).
//!
//! Spec: <http://www.softwareishard.com/blog/har-12-spec/>. Each `log.entries[]` becomes one
//! exchange in file order: `request.method`, the URL's path and query, `request.headers`
//! (lower-cased names), `request.postData.text`; `response.status`, `response.headers`,
//! `response.content.text` (decoded when `content.encoding` is `base64`). HAR keeps no
//! per-chunk receive times: a `text/event-stream` body is split into one chunk per SSE event
//! (blank-line separated), every chunk stamped with the time to first byte
//! (`blocked + dns + connect + send + wait`, negative parts ignored). `time` becomes the
//! total. An entry whose `response.status` is 0 or missing (the request failed) keeps its
//! request and is marked `upstream_error`; an entry missing its `_error`-free response text
//! keeps an empty body.
//!
//! A HAR written by `toolscope export` ([`crate::export::har::exchange_to_entry`]) carries what
//! HAR cannot say in `_`-prefixed custom fields — every stream chunk's size and receive time,
//! the exchange's id, label, outcome and µs timings, the session header and annotations — and
//! importing it gives back the same session lines byte for byte. An `application/x-ndjson` body (Ollama) without
//! `_chunks` is split into one chunk per line.
//!
//! Pure: takes the parsed JSON; the CLI reads the file and reports JSON syntax errors with
//! their line and column.

use anyhow::{Context, bail};
use serde_json::Value;

use super::model::*;
use super::read::Session;

/// Converts a parsed HAR document into a session named `name` (used as `Session::path`),
/// secret headers redacted (see [`har_to_session_with`]).
///
/// Errors: no `log.entries` array; an entry without `request.method` or `request.url`
/// (message names the entry index, e.g. `log.entries[3].request.url`).
pub fn har_to_session(name: &str, har: &Value) -> anyhow::Result<Session> {
    har_to_session_with(name, har, false)
}

/// [`har_to_session`], keeping secret headers verbatim when `keep_secrets`.
pub fn har_to_session_with(name: &str, har: &Value, keep_secrets: bool) -> anyhow::Result<Session> {
    let log = har
        .get("log")
        .with_context(|| format!("{name}: not a HAR file: no top-level \"log\" object"))?;
    let entries = log
        .get("entries")
        .and_then(Value::as_array)
        .with_context(|| format!("{name}: not a HAR file: no \"log.entries\" array"))?;
    let mut session = Session {
        path: name.to_owned(),
        ..Default::default()
    };
    let mut header = import_header(name, log);
    for (i, entry) in entries.iter().enumerate() {
        let at = |field: &str| format!("{name}: log.entries[{i}].{field}");
        let ex = entry_to_exchange(i, entry, keep_secrets, &mut header, &at)?;
        session.exchanges.push(ex);
    }
    // A HAR written by `toolscope export` carries the session's header and annotations.
    if let Some(h) = log.get("_toolscope_header") {
        header = exported_header(name, h, keep_secrets)?;
    }
    if let Some(anns) = log.get("_toolscope_annotations").and_then(Value::as_array) {
        for a in anns {
            if let Ok(a) = serde_json::from_value::<Annotation>(a.clone()) {
                session.annotations.entry(a.exchange()).or_default().push(a);
            }
        }
    }
    if header.created.is_empty() {
        bail!("{name}: HAR has no entries with startedDateTime and cannot be dated");
    }
    session.header = header;
    Ok(session)
}

/// The header of an imported HAR: source `import:NAME (HAR creator version)`, engine unknown
/// (upstream and creation time come from the entries).
fn import_header(name: &str, log: &Value) -> Header {
    let creator = log.get("creator").and_then(|c| {
        let n = c.get("name")?.as_str()?;
        Some(match c.get("version").and_then(Value::as_str) {
            Some(v) => format!("{n} {v}"),
            None => n.to_owned(),
        })
    });
    let mut header = super::write::new_header(String::new());
    header.source = Some(match &creator {
        Some(c) => format!("import:{name} (HAR {})", c),
        None => format!("import:{name}"),
    });
    header.engine = Some(Server {
        kind: ServerKind::unknown(),
        ..Default::default()
    });
    header
}

/// The session header a `toolscope export` HAR carries in `log._toolscope_header`, read as
/// strictly as the session reader reads a header line.
fn exported_header(name: &str, h: &Value, keep_secrets: bool) -> anyhow::Result<Header> {
    let mut header: Header = serde_json::from_value(h.clone())
        .map_err(|e| anyhow::anyhow!("{name}: log._toolscope_header: {e}"))?;
    if header.format != super::FORMAT {
        bail!(
            "{name}: log._toolscope_header.format is {:?}; toolscope reads {:?} only",
            header.format,
            super::FORMAT
        );
    }
    if !keep_secrets {
        header.upstream = header
            .upstream
            .map(|u| super::redact::redact_url(&u).into_owned());
    }
    Ok(header)
}

/// Entry `i` as exchange `i + 1`; the first origin and start time also date `header`. `at`
/// names a field of this entry in errors.
fn entry_to_exchange(
    i: usize,
    entry: &Value,
    keep_secrets: bool,
    header: &mut Header,
    at: &dyn Fn(&str) -> String,
) -> anyhow::Result<Exchange> {
    let req = entry
        .get("request")
        .with_context(|| format!("{} is missing", at("request")))?;
    let method = req
        .get("method")
        .and_then(Value::as_str)
        .with_context(|| format!("{} is missing or not a string", at("request.method")))?;
    let url = req
        .get("url")
        .and_then(Value::as_str)
        .with_context(|| format!("{} is missing or not a string", at("request.url")))?;
    let (mut origin, mut path) = split_url(url);
    if !keep_secrets {
        // credentials in the URL: userinfo and secret query values (session::redact)
        origin = super::redact::redact_url(&origin).into_owned();
        path = super::redact::redact_query(&path).into_owned();
    }
    if header.upstream.is_none() && !origin.is_empty() {
        header.upstream = Some(origin.clone());
    }
    let started = entry
        .get("startedDateTime")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    if header.created.is_empty() {
        header.created = started.clone();
    }
    let mut req_headers = har_headers(req.get("headers"));
    let req_body = request_body(req.get("postData"), at)?;
    let (ttfb_us, total_us) = entry_timings(entry);
    let resp = entry.get("response");
    let status = response_status(resp, at)?;
    let mut ex = Exchange {
        id: i as u64 + 1,
        started,
        label: None,
        request: Request {
            method: method.to_owned(),
            path,
            headers: Vec::new(),
            body: req_body,
        },
        response: None,
        timings: Timings { ttfb_us, total_us },
        outcome: Outcome::Complete,
        error: None,
        websocket: None,
    };
    if !keep_secrets {
        super::redact::redact_headers(&mut req_headers);
    }
    ex.request.headers = req_headers;
    if status == 0 {
        ex.outcome = Outcome::UpstreamError;
        ex.error = Some(
            entry
                .get("_error")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .unwrap_or_else(|| "no response in the HAR entry (status 0)".into()),
        );
    } else if let Some(resp) = resp {
        ex.response = Some(har_response(resp, status, ttfb_us, keep_secrets, at)?);
    }
    if let Some(t) = entry.get("_toolscope") {
        apply_toolscope(&mut ex, t);
    }
    if !keep_secrets {
        // toolscope's own fields are input like any other: `_toolscope.path` too
        ex.request.path = super::redact::redact_query(&ex.request.path).into_owned();
    }
    Ok(ex)
}

/// `request.postData.text`, decoded when its `encoding` is `base64`; empty without one.
fn request_body(post: Option<&Value>, at: &dyn Fn(&str) -> String) -> anyhow::Result<Body> {
    Ok(
        match post.and_then(|p| p.get("text")).and_then(Value::as_str) {
            Some(t)
                if post.and_then(|p| p.get("encoding")).and_then(Value::as_str)
                    == Some("base64") =>
            {
                decode_b64(t)
                    .map(|b| Body::from_bytes(&b))
                    .with_context(|| {
                        format!("{} is not valid base64", at("request.postData.text"))
                    })?
            }
            Some(t) => Body::Text { text: t.to_owned() },
            None => Body::default(),
        },
    )
}

/// `(time to first byte, total)` in µs: `blocked + dns + connect + send + wait` (negative
/// parts ignored; `None` without `timings`) and `time` (`None` when absent or negative).
fn entry_timings(entry: &Value) -> (Option<u64>, Option<u64>) {
    let timings = entry.get("timings");
    let part = |k: &str| {
        timings
            .and_then(|t| t.get(k))
            .and_then(Value::as_f64)
            .filter(|v| *v > 0.0)
            .unwrap_or(0.0)
    };
    let ttfb_ms = part("blocked") + part("dns") + part("connect") + part("send") + part("wait");
    let total_ms = entry
        .get("time")
        .and_then(Value::as_f64)
        .filter(|v| *v >= 0.0);
    let ttfb_us = (timings.is_some()).then_some((ttfb_ms * 1000.0).round() as u64);
    (ttfb_us, total_ms.map(|t| (t * 1000.0).round() as u64))
}

/// `response.status`: 0 (or none) for a failed request, else an HTTP status (100-599).
fn response_status(resp: Option<&Value>, at: &dyn Fn(&str) -> String) -> anyhow::Result<u64> {
    Ok(match resp.and_then(|r| r.get("status")) {
        None | Some(Value::Null) => 0,
        Some(v) => match v.as_u64() {
            // 0: the request failed (HAR); else an HTTP status, as the reader takes it
            Some(s @ (0 | 100..=599)) => s,
            _ => bail!(
                "{}: {v} is not an HTTP status (100-599, or 0 for a failed request)",
                at("response.status")
            ),
        },
    })
}

/// The response of an entry that got one: headers, and the content as exported chunks
/// (`_chunks`), one chunk per SSE event or NDJSON line stamped `ttfb_us`, or a whole body.
fn har_response(
    resp: &Value,
    status: u64,
    ttfb_us: Option<u64>,
    keep_secrets: bool,
    at: &dyn Fn(&str) -> String,
) -> anyhow::Result<Response> {
    let mut headers = har_headers(resp.get("headers"));
    if !keep_secrets {
        super::redact::redact_headers(&mut headers);
    }
    let content = resp.get("content");
    let mime = content
        .and_then(|c| c.get("mimeType"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let text = content
        .and_then(|c| c.get("text"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let bytes = if content
        .and_then(|c| c.get("encoding"))
        .and_then(Value::as_str)
        == Some("base64")
    {
        decode_b64(text)
            .with_context(|| format!("{} is not valid base64", at("response.content.text")))?
    } else {
        text.as_bytes().to_vec()
    };
    let is_type = |t: &str| {
        mime.to_ascii_lowercase().starts_with(t)
            || headers
                .iter()
                .any(|(k, v)| k == "content-type" && v.to_ascii_lowercase().starts_with(t))
    };
    let sse = is_type("text/event-stream");
    let ndjson = is_type("application/x-ndjson");
    let mut r = Response {
        status: status as u16,
        headers,
        body: None,
        chunks: None,
    };
    let exact = content
        .and_then(|c| c.get("_chunks"))
        .and_then(Value::as_array);
    if let Some(marks) = exact {
        r.chunks = Some(chunks_by_marks(&bytes, marks).with_context(|| {
            format!(
                "{} does not add up to the body",
                at("response.content._chunks")
            )
        })?);
    } else if sse || ndjson {
        let t = ttfb_us.unwrap_or(0);
        let pieces = if sse {
            split_sse(&bytes)
        } else {
            bytes.split_inclusive(|&b| b == b'\n').collect()
        };
        r.chunks = Some(
            pieces
                .into_iter()
                .map(|c| Chunk {
                    t_us: t,
                    data: Body::from_bytes(c),
                })
                .collect(),
        );
    } else {
        r.body = Some(Body::from_bytes(&bytes));
    }
    Ok(r)
}

/// The lines to write for `session` (header, exchanges, then annotations by exchange id) —
/// what `toolscope import` writes.
pub fn session_lines(session: &Session) -> Vec<Line> {
    let mut lines = vec![Line::Header(session.header.clone())];
    lines.extend(
        session
            .exchanges
            .iter()
            .map(|e| Line::Exchange(Box::new(e.clone()))),
    );
    lines.extend(
        session
            .annotations
            .values()
            .flatten()
            .map(|a| Line::Annotation(a.clone())),
    );
    lines
}

/// Restores what HAR cannot say from an entry's `_toolscope` object (written by
/// [`crate::export::har::exchange_to_entry`]): id, label, exact path, outcome, error, µs
/// timings, and a response that was never received.
fn apply_toolscope(ex: &mut Exchange, t: &Value) {
    if let Some(id) = t.get("id").and_then(Value::as_u64) {
        ex.id = id;
    }
    ex.label = t.get("label").and_then(Value::as_str).map(str::to_owned);
    if let Some(p) = t.get("path").and_then(Value::as_str) {
        ex.request.path = p.to_owned();
    }
    if let Some(o) = t
        .get("outcome")
        .and_then(|o| serde_json::from_value::<Outcome>(o.clone()).ok())
    {
        ex.outcome = o;
    }
    ex.error = t.get("error").and_then(Value::as_str).map(str::to_owned);
    if let Some(tm) = t
        .get("timings")
        .and_then(|x| serde_json::from_value::<Timings>(x.clone()).ok())
    {
        ex.timings = tm;
    }
    if t.get("no_response").and_then(Value::as_bool) == Some(true) {
        ex.response = None;
    }
    if t.get("no_body").and_then(Value::as_bool) == Some(true)
        && let Some(r) = ex.response.as_mut()
    {
        r.body = None;
    }
}

/// Splits `bytes` at the `size`s of `marks` (`[{"t_us", "size"}]`), each piece stamped with its
/// `t_us`. `None` when the sizes do not add up to the body.
fn chunks_by_marks(bytes: &[u8], marks: &[Value]) -> Option<Vec<Chunk>> {
    let mut out = Vec::with_capacity(marks.len());
    let mut at = 0usize;
    for m in marks {
        let size = m.get("size")?.as_u64()? as usize;
        let t_us = m.get("t_us")?.as_u64()?;
        let piece = bytes.get(at..at.checked_add(size)?)?;
        out.push(Chunk {
            t_us,
            data: Body::from_bytes(piece),
        });
        at += size;
    }
    (at == bytes.len()).then_some(out)
}

fn har_headers(v: Option<&Value>) -> Vec<(String, String)> {
    v.and_then(Value::as_array)
        .map(|hs| {
            hs.iter()
                .filter_map(|h| {
                    Some((
                        h.get("name")?.as_str()?.to_ascii_lowercase(),
                        h.get("value")?.as_str()?.to_owned(),
                    ))
                })
                // HTTP/2 pseudo-headers (":authority") are not request headers.
                .filter(|(k, _)| !k.starts_with(':'))
                .collect()
        })
        .unwrap_or_default()
}

/// `(scheme://authority, /path?query)`; for a URL without scheme, `("", url)`.
fn split_url(url: &str) -> (String, String) {
    if let Some(rest_at) = url.find("://") {
        let after = &url[rest_at + 3..];
        let cut = after.find(['/', '?', '#']).unwrap_or(after.len());
        let origin = url[..rest_at + 3 + cut].to_owned();
        let mut path = after[cut..].split('#').next().unwrap_or("").to_owned();
        if path.is_empty() || path.starts_with('?') {
            path.insert(0, '/');
        }
        (origin, path)
    } else {
        (String::new(), url.to_owned())
    }
}

fn decode_b64(s: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    let clean: String = s.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    base64::engine::general_purpose::STANDARD.decode(clean).ok()
}

/// Splits an SSE body after each event terminator (`\n\n`, `\r\n\r\n`, `\r\r`); the pieces
/// concatenate to the input.
fn split_sse(bytes: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        let term = if bytes[i..].starts_with(b"\r\n\r\n") {
            4
        } else if bytes[i..].starts_with(b"\n\n") || bytes[i..].starts_with(b"\r\r") {
            2
        } else {
            0
        };
        if term > 0 {
            out.push(&bytes[start..i + term]);
            i += term;
            start = i;
        } else {
            i += 1;
        }
    }
    if start < bytes.len() {
        out.push(&bytes[start..]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_sse_keeps_bytes() {
        let s = b"data: a\n\ndata: b\r\n\r\ndata: c";
        let parts = split_sse(s);
        assert_eq!(
            parts,
            vec![
                &b"data: a\n\n"[..],
                &b"data: b\r\n\r\n"[..],
                &b"data: c"[..]
            ]
        );
        assert_eq!(
            split_url("http://h:1/v1/x?y=1#f"),
            ("http://h:1".into(), "/v1/x?y=1".into())
        );
        assert_eq!(split_url("http://h:1"), ("http://h:1".into(), "/".into()));
    }
}
