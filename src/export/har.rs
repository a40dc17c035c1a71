//! Session → HAR 1.2 (`toolscope export`): the writer half of [`crate::session::har`], which
//! reads HAR back (as mitmproxy splits `io/har.py` and `addons/savehar.py`).
//!
//! A HAR written here ([`exchange_to_entry`]) carries what HAR cannot say in `_`-prefixed
//! custom fields — every stream chunk's size and receive time, the exchange's id, label,
//! outcome and µs timings, the session header and annotations — and
//! [`crate::session::har::har_to_session`] gives back the same session lines byte for byte.
//!
//! Spec: <http://www.softwareishard.com/blog/har-12-spec/>.

use serde_json::Value;

use crate::session::read::Session;
use crate::session::{Annotation, Body, Exchange, Header};

/// The `log` fields that open an exported HAR, before `entries`: `version`, `creator`
/// (`toolscope <version>`), `pages` (empty) and `_toolscope_header` (the session header, so
/// `import` gives it back). Streamed export writes these, then each entry from
/// [`exchange_to_entry`], then [`har_log_tail`].
pub fn har_log_head(header: &Header) -> serde_json::Map<String, Value> {
    let mut m = serde_json::Map::new();
    m.insert("version".into(), Value::from("1.2"));
    m.insert(
        "creator".into(),
        serde_json::json!({"name": "toolscope", "version": env!("CARGO_PKG_VERSION")}),
    );
    m.insert("pages".into(), Value::Array(Vec::new()));
    m.insert(
        "_toolscope_header".into(),
        serde_json::to_value(header).unwrap_or(Value::Null),
    );
    m
}

/// The `log` fields after `entries`: `_toolscope_annotations` (every annotation, in the
/// order given).
pub fn har_log_tail(annotations: &[Annotation]) -> serde_json::Map<String, Value> {
    let mut m = serde_json::Map::new();
    m.insert(
        "_toolscope_annotations".into(),
        serde_json::to_value(annotations).unwrap_or(Value::Null),
    );
    m
}

fn har_pairs(h: &[(String, String)]) -> Value {
    Value::Array(
        h.iter()
            .map(|(k, v)| serde_json::json!({"name": k, "value": v}))
            .collect(),
    )
}

fn content_type(h: &[(String, String)]) -> &str {
    h.iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-type"))
        .map(|(_, v)| v.as_str())
        .unwrap_or("")
}

/// `text` for UTF-8 bytes, else base64 with `encoding: "base64"`.
fn put_text(obj: &mut serde_json::Map<String, Value>, bytes: &[u8]) {
    match Body::from_bytes(bytes) {
        Body::Text { text } => {
            obj.insert("text".into(), Value::String(text));
        }
        Body::Base64 { base64 } => {
            obj.insert("text".into(), Value::String(base64));
            obj.insert("encoding".into(), Value::from("base64"));
        }
    }
}

fn ms(us: u64) -> Value {
    serde_json::Number::from_f64(us as f64 / 1000.0)
        .map(Value::Number)
        .unwrap_or(Value::from(0))
}

/// One exchange as a HAR 1.2 entry. `upstream` is the session's upstream base URL (the
/// entry's URL is `upstream + path`; `http://localhost` when unknown); `events` the stream's
/// events as (byte offset, receive µs), from [`crate::stream::ollama::event_marks`].
///
/// HAR fields: `startedDateTime`, `time` (ms, the exchange's `total_us`), `request` (method,
/// URL, headers as recorded — already redacted —, `queryString`, `postData` when the body is
/// not empty), `response` (status, headers, `content.text` the whole body — base64 with
/// `encoding` when not UTF-8 —, `content.mimeType`), `timings` (`wait` = time to the response
/// head, `receive` = the rest; the parts HAR has and toolscope does not measure are `-1`).
/// Custom fields (HAR 1.2 allows `_`-prefixed ones): `response.content._chunks`
/// `[{"t_us", "size"}]` — every recorded read of a stream, µs from the request start and its
/// byte length, so `import` restores the chunks exactly; `response.content._events`
/// `[{"offset", "t_us"}]` — each SSE event or NDJSON line, its byte offset in the body and
/// the receive time of the read that completed it; `_toolscope` — `id`, `label`, `path`,
/// `outcome`, `error`, `timings` (µs), `no_response`; `_error` for an exchange that failed
/// before a response (status 0).
pub fn exchange_to_entry(
    upstream: Option<&str>,
    ex: &Exchange,
    events: Option<&[(usize, Option<u64>)]>,
) -> Value {
    use serde_json::json;
    let base = upstream.unwrap_or("http://localhost").trim_end_matches('/');
    let query: Vec<Value> = ex
        .request
        .path
        .split_once('?')
        .map(|(_, q)| {
            q.split('&')
                .filter(|p| !p.is_empty())
                .map(|p| {
                    let (k, v) = p.split_once('=').unwrap_or((p, ""));
                    json!({"name": k, "value": v})
                })
                .collect()
        })
        .unwrap_or_default();
    let req_bytes = ex.request.body.to_bytes();
    let mut request = json!({
        "method": ex.request.method,
        "url": format!("{base}{}", ex.request.path),
        "httpVersion": "HTTP/1.1",
        "cookies": [],
        "headers": har_pairs(&ex.request.headers),
        "queryString": query,
        "headersSize": -1,
        "bodySize": req_bytes.len(),
    });
    if !req_bytes.is_empty() {
        let mut post = serde_json::Map::new();
        post.insert(
            "mimeType".into(),
            Value::from(content_type(&ex.request.headers)),
        );
        put_text(&mut post, &req_bytes);
        request["postData"] = Value::Object(post);
    }
    let ttfb = ex.timings.ttfb_us.unwrap_or(0);
    let total = ex.timings.total_us.unwrap_or(ttfb);
    let mut ts = serde_json::Map::new();
    ts.insert("id".into(), Value::from(ex.id));
    if let Some(l) = &ex.label {
        ts.insert("label".into(), Value::from(l.as_str()));
    }
    ts.insert("path".into(), Value::from(ex.request.path.as_str()));
    ts.insert(
        "outcome".into(),
        serde_json::to_value(ex.outcome).unwrap_or(Value::Null),
    );
    if let Some(e) = &ex.error {
        ts.insert("error".into(), Value::from(e.as_str()));
    }
    ts.insert(
        "timings".into(),
        serde_json::to_value(ex.timings).unwrap_or(Value::Null),
    );
    let response = match &ex.response {
        None => {
            ts.insert("no_response".into(), Value::Bool(true));
            json!({
                "status": 0, "statusText": "", "httpVersion": "HTTP/1.1", "cookies": [],
                "headers": [], "content": {"size": 0, "mimeType": ""}, "redirectURL": "",
                "headersSize": -1, "bodySize": -1,
                "_error": ex.error.clone().unwrap_or_else(|| "no response".into()),
            })
        }
        Some(r) => {
            let bytes = ex.response_bytes();
            let mut content = serde_json::Map::new();
            content.insert("size".into(), Value::from(bytes.len()));
            content.insert("mimeType".into(), Value::from(content_type(&r.headers)));
            put_text(&mut content, &bytes);
            if let Some(chunks) = &r.chunks {
                let marks: Vec<Value> = chunks
                    .iter()
                    .map(|c| json!({"t_us": c.t_us, "size": c.data.len()}))
                    .collect();
                content.insert("_chunks".into(), Value::Array(marks));
                if let Some(events) = events {
                    content.insert(
                        "_events".into(),
                        Value::Array(
                            events
                                .iter()
                                .map(|(offset, t_us)| json!({"offset": offset, "t_us": t_us}))
                                .collect(),
                        ),
                    );
                }
            }
            if r.body.is_none() && r.chunks.is_none() {
                ts.insert("no_body".into(), Value::Bool(true));
            }
            json!({
                "status": r.status,
                "statusText": StatusText(r.status).to_string(),
                "httpVersion": "HTTP/1.1",
                "cookies": [],
                "headers": har_pairs(&r.headers),
                "content": Value::Object(content),
                "redirectURL": "",
                "headersSize": -1,
                "bodySize": bytes.len(),
            })
        }
    };
    let mut entry = json!({
        "startedDateTime": ex.started,
        "time": ms(total),
        "request": request,
        "response": response,
        "cache": {},
        "timings": {
            "blocked": -1, "dns": -1, "connect": -1, "ssl": -1,
            "send": 0, "wait": ms(ttfb), "receive": ms(total.saturating_sub(ttfb)),
        },
        "_toolscope": Value::Object(ts),
    });
    if ex.response.is_none() {
        entry["_error"] = Value::from(ex.error.clone().unwrap_or_else(|| "no response".into()));
    }
    entry
}

/// The reason phrase of common statuses (HAR's `statusText`); empty for others.
struct StatusText(u16);

impl std::fmt::Display for StatusText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(
            hyper::StatusCode::from_u16(self.0)
                .ok()
                .and_then(|s| s.canonical_reason())
                .unwrap_or(""),
        )
    }
}

/// A whole session as one HAR document (for small sessions and tests; `toolscope export`
/// streams the same pieces one exchange at a time).
pub fn session_to_har(session: &Session) -> Value {
    let mut log = har_log_head(&session.header);
    let upstream = session.header.upstream.as_deref();
    log.insert(
        "entries".into(),
        Value::Array(
            session
                .exchanges
                .iter()
                .map(|e| {
                    let marks = crate::stream::ollama::event_marks(e);
                    exchange_to_entry(upstream, e, marks.as_deref())
                })
                .collect(),
        ),
    );
    let anns: Vec<Annotation> = session.annotations.values().flatten().cloned().collect();
    log.extend(har_log_tail(&anns));
    serde_json::json!({ "log": Value::Object(log) })
}
