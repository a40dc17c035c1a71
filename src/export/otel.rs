//! Session → OpenTelemetry traces: OTLP/JSON `ExportTraceServiceRequest`, one span per
//! exchange, with the GenAI semantic-convention attributes and toolscope's findings as span
//! events. Pure: the caller decodes each exchange's reply ([`crate::stream::decode_exchange`])
//! and runs the checks; this module only shapes data.
//!
//! Follows the OTLP/JSON encoding (opentelemetry-proto `opentelemetry/proto/collector/trace/v1`,
//! OTLP specification "JSON Protobuf Encoding": lowerCamelCase field names, 64-bit integers as
//! decimal strings, enums as integers, `traceId`/`spanId` as lowercase hex) and the GenAI
//! semantic conventions (semantic-conventions `docs/gen-ai/gen-ai-spans.md`, v1.37):
//! span name `{gen_ai.operation.name} {gen_ai.request.model}`, kind CLIENT;
//! `gen_ai.operation.name` (`chat`, `text_completion`), `gen_ai.provider.name` (the engine),
//! `gen_ai.request.model`, `gen_ai.request.max_tokens` / `temperature` / `top_p`,
//! `gen_ai.response.model`, `gen_ai.response.finish_reasons`, `gen_ai.usage.input_tokens` /
//! `output_tokens`, and the opt-in content attributes `gen_ai.system_instructions`,
//! `gen_ai.input.messages`, `gen_ai.output.messages`, `gen_ai.tool.definitions` as JSON
//! strings in the conventions' message schema (`{"role", "parts": [{"type": "text" |
//! "reasoning" | "tool_call" | "tool_call_response", …}], "finish_reason"}`).
//!
//! Ids are deterministic: the trace id is an FNV-1a hash of the session's `created` time and
//! upstream (one trace per session), each span id a hash of the trace id and the exchange id, so
//! re-exporting a session gives the same ids.

use serde_json::{Value, json};

use crate::finding::Finding;
use crate::session::{Api, Exchange, Header};
use crate::stream::AssistantMessage;

/// OTLP `Span.SpanKind` CLIENT.
pub const SPAN_KIND_CLIENT: u64 = 3;

fn fnv1a(seed: u64, bytes: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ seed;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The session's trace id: 32 lowercase hex digits.
pub fn trace_id(header: &Header) -> String {
    let key = format!(
        "{}|{}",
        header.created,
        header.upstream.as_deref().unwrap_or("")
    );
    format!(
        "{:016x}{:016x}",
        fnv1a(1, key.as_bytes()),
        fnv1a(2, key.as_bytes())
    )
}

/// Exchange `id`'s span id in trace `trace`: 16 lowercase hex digits (never all zero).
pub fn span_id(trace: &str, id: u64) -> String {
    let h = fnv1a(3, format!("{trace}|{id}").as_bytes());
    format!("{:016x}", h.max(1))
}

fn s(v: impl Into<String>) -> Value {
    json!({ "stringValue": v.into() })
}

fn attr(key: &str, value: Value) -> Value {
    json!({ "key": key, "value": value })
}

fn int(n: u64) -> Value {
    json!({ "intValue": n.to_string() })
}

/// Unix nanoseconds of an RFC 3339 time (0 when unparsable).
pub fn unix_nanos(rfc3339: &str) -> u128 {
    time::OffsetDateTime::parse(rfc3339, &time::format_description::well_known::Rfc3339)
        .map(|t| t.unix_timestamp_nanos().max(0) as u128)
        .unwrap_or(0)
}

/// The text of an OpenAI/Ollama `content` (string, or an array of `{type: "text", text}`
/// parts) or an Anthropic `content` string.
fn text_of(content: &Value) -> Option<String> {
    match content {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => {
            let t: String = parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect();
            Some(t)
        }
        _ => None,
    }
}

/// Arguments as the conventions want them: a JSON value (a string that is JSON is parsed).
fn args_value(v: Option<&Value>) -> Value {
    match v {
        Some(Value::String(s)) => serde_json::from_str(s).unwrap_or(Value::String(s.clone())),
        Some(v) => v.clone(),
        None => Value::Null,
    }
}

/// The request's messages in the GenAI message schema, and the system instructions
/// (OpenAI/Ollama `system` messages are kept in the messages, as the conventions allow;
/// Anthropic's top-level `system` becomes the instructions).
pub fn input_messages(api: Api, request: &Value) -> (Vec<Value>, Option<Value>) {
    let mut out = Vec::new();
    let msgs = request
        .get("messages")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let system = match api {
        Api::Anthropic => request
            .get("system")
            .and_then(text_of)
            .map(|t| json!([{"type": "text", "content": t}])),
        _ => None,
    };
    if api == Api::Completion {
        if let Some(p) = request.get("prompt").and_then(text_of) {
            out.push(json!({"role": "user", "parts": [{"type": "text", "content": p}]}));
        }
        return (out, system);
    }
    for m in &msgs {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("user");
        let mut parts = Vec::new();
        match m.get("content") {
            Some(Value::Array(blocks)) if api == Api::Anthropic => {
                for b in blocks {
                    match b.get("type").and_then(Value::as_str) {
                        Some("text") => parts.push(json!({"type": "text", "content": b.get("text").cloned().unwrap_or(Value::Null)})),
                        Some("thinking") => parts.push(json!({"type": "reasoning", "content": b.get("thinking").cloned().unwrap_or(Value::Null)})),
                        Some("tool_use") => parts.push(json!({"type": "tool_call", "id": b.get("id"), "name": b.get("name"), "arguments": b.get("input")})),
                        Some("tool_result") => parts.push(json!({"type": "tool_call_response", "id": b.get("tool_use_id"), "response": b.get("content").and_then(text_of)})),
                        _ => {}
                    }
                }
            }
            Some(c) => {
                if let Some(t) = text_of(c).filter(|t| !t.is_empty()) {
                    if role == "tool" {
                        parts.push(json!({"type": "tool_call_response", "id": m.get("tool_call_id"), "response": t}));
                    } else {
                        parts.push(json!({"type": "text", "content": t}));
                    }
                }
            }
            None => {}
        }
        if let Some(r) = m
            .get("reasoning_content")
            .or_else(|| m.get("thinking"))
            .and_then(Value::as_str)
        {
            parts.insert(0, json!({"type": "reasoning", "content": r}));
        }
        for tc in m
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            parts.push(json!({
                "type": "tool_call",
                "id": tc.get("id"),
                "name": tc.pointer("/function/name"),
                "arguments": args_value(tc.pointer("/function/arguments")),
            }));
        }
        out.push(json!({"role": role, "parts": parts}));
    }
    (out, system)
}

/// The reply in the GenAI message schema (one assistant message).
pub fn output_messages(m: &AssistantMessage) -> Vec<Value> {
    let mut parts = Vec::new();
    if !m.reasoning.is_empty() {
        parts.push(json!({"type": "reasoning", "content": m.reasoning}));
    }
    if !m.content.is_empty() {
        parts.push(json!({"type": "text", "content": m.content}));
    }
    for c in &m.tool_calls {
        parts.push(json!({
            "type": "tool_call",
            "id": c.id,
            "name": c.name,
            "arguments": c.arguments_json().unwrap_or(Value::String(c.arguments.clone())),
        }));
    }
    vec![json!({
        "role": "assistant",
        "parts": parts,
        "finish_reason": m.finish_reason.clone().unwrap_or_default(),
    })]
}

/// The request's tools as `[{"type": "function", "name", "description", "parameters"}]`
/// (OpenAI/Ollama `function` objects and Anthropic `input_schema` tools alike).
pub fn tool_definitions(request: &Value) -> Vec<Value> {
    request
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|t| {
            let f = t.get("function").unwrap_or(t);
            json!({
                "type": "function",
                "name": f.get("name"),
                "description": f.get("description"),
                "parameters": f.get("parameters").or_else(|| f.get("input_schema")),
            })
        })
        .collect()
}

/// `(input, output)` tokens from a `usage` object: OpenAI `prompt_tokens`/`completion_tokens`,
/// Anthropic `input_tokens`/`output_tokens`, Ollama `prompt_eval_count`/`eval_count`; or from
/// llama-server's `timings` object (`cache_n + prompt_n`, `predicted_n`; sent in the last
/// chunk of every stream, where `usage` needs `stream_options.include_usage`).
pub fn usage_tokens(usage: &Value) -> (Option<u64>, Option<u64>) {
    let get = |keys: &[&str]| {
        keys.iter()
            .find_map(|k| usage.get(*k).and_then(Value::as_u64))
    };
    let prompt_n = get(&["prompt_n"]).map(|p| p + get(&["cache_n"]).unwrap_or(0));
    (
        get(&["prompt_tokens", "input_tokens", "prompt_eval_count"]).or(prompt_n),
        get(&[
            "completion_tokens",
            "output_tokens",
            "eval_count",
            "predicted_n",
        ]),
    )
}

/// Where a span goes: its trace, its own id, its parent span (none for a root) and the spans
/// it links to in other traces (a sub-agent conversation's first exchange links to the call
/// that started it). `export --format otel` places every exchange at the root of the
/// session's trace ([`SpanPlace::root`]); `proxy --otlp` places it in its conversation's
/// trace, under an incoming `traceparent`'s span when the client sent one.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SpanPlace {
    /// 32 lowercase hex digits.
    pub trace: String,
    /// 16 lowercase hex digits.
    pub span: String,
    /// The parent span id (same trace), `None` for a root span.
    pub parent: Option<String>,
    /// `(trace id, span id)` of linked spans (OTLP `Span.links`).
    pub links: Vec<(String, String)>,
}

impl SpanPlace {
    /// Exchange `id` at the root of trace `trace`, with its deterministic [`span_id`].
    pub fn root(trace: &str, id: u64) -> SpanPlace {
        SpanPlace {
            trace: trace.to_owned(),
            span: span_id(trace, id),
            parent: None,
            links: Vec::new(),
        }
    }
}

/// One exchange as an OTLP/JSON span in trace `trace`. `reply` is the decoded reply (if any),
/// `findings` the exchange's findings (each becomes an event named `toolscope.finding` with
/// `toolscope.rule`, `toolscope.severity`, `toolscope.message`, `toolscope.hint` and, when the
/// finding points at a stream event, the event's receive time). `provider` is the engine kind
/// (`llama-server`, `ollama`, …); `timings` llama-server's `timings` object, for the token
/// counts when the reply has no `usage`. Status: ERROR for an HTTP status ≥ 400, a partial exchange,
/// or a finding of severity error; else UNSET.
pub fn exchange_span(
    trace: &str,
    provider: Option<&str>,
    ex: &Exchange,
    reply: Option<&AssistantMessage>,
    timings: Option<&Value>,
    event_times: &[Option<u64>],
    findings: &[Finding],
) -> Value {
    let place = SpanPlace::root(trace, ex.id);
    placed_exchange_span(&place, provider, ex, reply, timings, event_times, findings)
}

/// [`exchange_span`] at `place` (trace, span id, parent, links).
pub fn placed_exchange_span(
    place: &SpanPlace,
    provider: Option<&str>,
    ex: &Exchange,
    reply: Option<&AssistantMessage>,
    timings: Option<&Value>,
    event_times: &[Option<u64>],
    findings: &[Finding],
) -> Value {
    let api = ex.api();
    let request = span_request(api, ex);
    let start = unix_nanos(&ex.started);
    let end = start + u128::from(ex.timings.total_us.unwrap_or(0)) * 1000;
    let op = match api {
        Api::Openai | Api::Anthropic | Api::Ollama | Api::Responses => Some("chat"),
        Api::Completion => Some("text_completion"),
        Api::Other => None,
    };
    let model = ex.model();
    let mut attrs = Vec::new();
    if let Some(op) = op {
        request_attributes(&mut attrs, op, provider, model.as_deref(), api, &request);
        if let Some(m) = reply {
            reply_attributes(&mut attrs, m, timings);
        }
    }
    exchange_attributes(&mut attrs, ex);
    let events = finding_events(findings, event_times, start);
    let name = match (op, &model) {
        (Some(op), Some(m)) => format!("{op} {m}"),
        (Some(op), None) => op.to_owned(),
        (None, _) => format!("{} {}", ex.request.method, ex.request.path),
    };
    let mut span = serde_json::Map::new();
    span.insert("traceId".into(), json!(place.trace));
    span.insert("spanId".into(), json!(place.span));
    if let Some(p) = &place.parent {
        span.insert("parentSpanId".into(), json!(p));
    }
    span.insert("name".into(), json!(name));
    span.insert("kind".into(), json!(SPAN_KIND_CLIENT));
    span.insert("startTimeUnixNano".into(), json!(start.to_string()));
    span.insert("endTimeUnixNano".into(), json!(end.to_string()));
    span.insert("attributes".into(), Value::Array(attrs));
    span.insert("events".into(), Value::Array(events));
    if !place.links.is_empty() {
        span.insert("links".into(), links_json(&place.links));
    }
    span.insert("status".into(), span_status(ex, findings));
    Value::Object(span)
}

/// The request as the span describes it: a Responses request as the chat request llama-server
/// converts it to (instructions and input items as messages, the function tools the model saw,
/// max_output_tokens as max_tokens); one the conversion refuses is described as sent.
fn span_request(api: Api, ex: &Exchange) -> Value {
    let request = ex.request_json().unwrap_or(Value::Null);
    if api == Api::Responses
        && let Ok(c) = crate::template::responses::responses_to_chat(&request)
    {
        return c.body;
    }
    request
}

/// `gen_ai.operation.name`, provider, request model and settings, input messages, system
/// instructions and tool definitions.
fn request_attributes(
    attrs: &mut Vec<Value>,
    op: &str,
    provider: Option<&str>,
    model: Option<&str>,
    api: Api,
    request: &Value,
) {
    attrs.push(attr("gen_ai.operation.name", s(op)));
    if let Some(p) = provider {
        attrs.push(attr("gen_ai.provider.name", s(p)));
    }
    if let Some(m) = model {
        attrs.push(attr("gen_ai.request.model", s(m)));
    }
    for (key, field) in [
        ("gen_ai.request.max_tokens", "max_tokens"),
        ("gen_ai.request.max_tokens", "max_completion_tokens"),
    ] {
        if let Some(n) = request.get(field).and_then(Value::as_u64) {
            attrs.push(attr(key, int(n)));
            break;
        }
    }
    for (key, field) in [
        ("gen_ai.request.temperature", "temperature"),
        ("gen_ai.request.top_p", "top_p"),
    ] {
        if let Some(x) = request.get(field).and_then(Value::as_f64) {
            attrs.push(attr(key, json!({ "doubleValue": x })));
        }
    }
    let (input, system) = input_messages(api, request);
    attrs.push(attr(
        "gen_ai.input.messages",
        s(Value::Array(input).to_string()),
    ));
    if let Some(sys) = system {
        attrs.push(attr("gen_ai.system_instructions", s(sys.to_string())));
    }
    let tools = tool_definitions(request);
    if !tools.is_empty() {
        attrs.push(attr(
            "gen_ai.tool.definitions",
            s(Value::Array(tools).to_string()),
        ));
    }
}

/// Output messages, response model, finish reasons and token usage of the reply.
fn reply_attributes(attrs: &mut Vec<Value>, m: &AssistantMessage, timings: Option<&Value>) {
    attrs.push(attr(
        "gen_ai.output.messages",
        s(Value::Array(output_messages(m)).to_string()),
    ));
    if let Some(rm) = &m.model {
        attrs.push(attr("gen_ai.response.model", s(rm.clone())));
    }
    if let Some(fr) = &m.finish_reason {
        attrs.push(attr(
            "gen_ai.response.finish_reasons",
            json!({"arrayValue": {"values": [{"stringValue": fr}]}}),
        ));
    }
    if let Some(u) = m.usage.as_ref().or(timings) {
        let (i, o) = usage_tokens(u);
        if let Some(i) = i {
            attrs.push(attr("gen_ai.usage.input_tokens", int(i)));
        }
        if let Some(o) = o {
            attrs.push(attr("gen_ai.usage.output_tokens", int(o)));
        }
    }
}

/// HTTP method, path and status, and the exchange's id and label.
fn exchange_attributes(attrs: &mut Vec<Value>, ex: &Exchange) {
    attrs.push(attr("http.request.method", s(ex.request.method.clone())));
    attrs.push(attr("url.path", s(ex.request.path.clone())));
    if let Some(r) = &ex.response {
        attrs.push(attr("http.response.status_code", int(u64::from(r.status))));
    }
    attrs.push(attr("toolscope.exchange.id", int(ex.id)));
    if let Some(l) = &ex.label {
        attrs.push(attr("toolscope.exchange.label", s(l.clone())));
    }
}

/// One `toolscope.finding` event per finding, at its stream event's receive time when it
/// points at one (else at the span's start).
fn finding_events(findings: &[Finding], event_times: &[Option<u64>], start: u128) -> Vec<Value> {
    findings
        .iter()
        .map(|f| {
            let t = f
                .evidence
                .event
                .and_then(|e| event_times.get(e).copied().flatten())
                .map_or(start, |us| start + u128::from(us) * 1000);
            let mut a = vec![
                attr("toolscope.rule", s(f.rule.id())),
                attr(
                    "toolscope.severity",
                    s(serde_json::to_value(f.severity)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_default()),
                ),
                attr("toolscope.message", s(f.message.clone())),
                attr("toolscope.hint", s(f.hint.clone())),
            ];
            if let Ok(ev) = serde_json::to_string(&f.evidence) {
                a.push(attr("toolscope.evidence", s(ev)));
            }
            json!({"timeUnixNano": t.to_string(), "name": "toolscope.finding", "attributes": a})
        })
        .collect()
}

/// ERROR (code 2) for an HTTP status ≥ 400, a partial exchange or a finding of severity
/// error; else UNSET (code 0).
fn span_status(ex: &Exchange, findings: &[Finding]) -> Value {
    let http_failed = ex.response.as_ref().is_none_or(|r| r.status >= 400);
    let error_finding = findings
        .iter()
        .any(|f| f.severity == crate::finding::Severity::Error);
    if http_failed || ex.is_partial() || error_finding {
        let msg = ex.error.clone().unwrap_or_else(|| {
            if http_failed {
                format!("HTTP {}", ex.response.as_ref().map_or(0, |r| r.status))
            } else {
                "toolscope findings of severity error".into()
            }
        });
        json!({"code": 2, "message": msg})
    } else {
        json!({"code": 0})
    }
}

fn links_json(links: &[(String, String)]) -> Value {
    Value::Array(
        links
            .iter()
            .map(|(t, s)| json!({"traceId": t, "spanId": s}))
            .collect(),
    )
}

/// One exchange's span with its reply decoded here ([`crate::stream::decode_exchange`]):
/// the stream events' receive times for the findings' events, and llama-server's `timings`
/// (the last chunk of a stream, or the body) for the token counts. `export --format otel`
/// and `proxy --otlp` both build their exchange spans through this.
pub fn span_of_exchange(
    place: &SpanPlace,
    provider: Option<&str>,
    ex: &Exchange,
    findings: &[Finding],
) -> Value {
    let decoded = crate::stream::decode_exchange(ex);
    let times: Vec<Option<u64>> = decoded
        .as_ref()
        .map(|r| r.events.iter().map(|e| e.t_us).collect())
        .unwrap_or_default();
    let timings = decoded
        .as_ref()
        .and_then(|r| {
            r.events.iter().rev().find_map(|e| {
                serde_json::from_str::<Value>(&e.data)
                    .ok()?
                    .get("timings")
                    .cloned()
            })
        })
        .or_else(|| {
            let body = ex.response.as_ref()?.body.as_ref()?.json().ok()?;
            body.get("timings").cloned()
        });
    placed_exchange_span(
        place,
        provider,
        ex,
        decoded.as_ref().map(|r| &r.message),
        timings.as_ref(),
        &times,
        findings,
    )
}

/// The findings of one exchange, as `check` computes them (server render and template from
/// `header` and the exchange's `annotations`), with the exchange handed back. Exchanges that
/// are not generations have none.
pub fn findings_of(
    header: &Header,
    annotations: &[crate::session::Annotation],
    ex: Exchange,
) -> (Vec<Finding>, Exchange) {
    if !ex.api().is_generation() {
        return (Vec::new(), ex);
    }
    // The one analysed exchange (issue #17): the same findings as `check` and the inspector.
    let ctx = crate::analysis::Context {
        header,
        annotations,
    };
    let a = crate::analysis::analyse(ex, ctx, crate::analysis::Depth::Findings);
    (a.findings, a.exchange)
}

/// OTLP `Span.SpanKind` INTERNAL.
pub const SPAN_KIND_INTERNAL: u64 = 1;

/// The execution of one tool call between two turns, as an OTLP/JSON span at `place`: from
/// `start_ns` (the end of the exchange whose reply made the call) to `end_ns` (the start of
/// the request that carried its result). GenAI conventions: span name `execute_tool {name}`,
/// kind INTERNAL, `gen_ai.operation.name` `execute_tool`, `gen_ai.tool.name`,
/// `gen_ai.tool.type` `function`, `gen_ai.tool.call.id`, `gen_ai.tool.call.arguments`,
/// `gen_ai.tool.call.result` (the result's text, shortened to 200 bytes); and
/// `toolscope.exchange.id` (the exchange that made the call), `toolscope.call.index`,
/// `toolscope.result.exchange.id` (the exchange whose request carried the result).
pub fn tool_span(
    place: &SpanPlace,
    link: &crate::conversation::CallLink,
    start_ns: u128,
    end_ns: u128,
) -> Value {
    let mut attrs = vec![
        attr("gen_ai.operation.name", s("execute_tool")),
        attr("gen_ai.tool.name", s(link.call.name.clone())),
        attr("gen_ai.tool.type", s("function")),
    ];
    if let Some(id) = &link.call.id {
        attrs.push(attr("gen_ai.tool.call.id", s(id.clone())));
    }
    attrs.push(attr(
        "gen_ai.tool.call.arguments",
        s(link.call.arguments.clone()),
    ));
    if let Some(r) = &link.result_text {
        attrs.push(attr("gen_ai.tool.call.result", s(r.clone())));
    }
    attrs.push(attr("toolscope.exchange.id", int(link.exchange)));
    attrs.push(attr("toolscope.call.index", int(link.index as u64)));
    if let Some((ex, _)) = link.result {
        attrs.push(attr("toolscope.result.exchange.id", int(ex)));
    }
    let mut span = serde_json::Map::new();
    span.insert("traceId".into(), json!(place.trace));
    span.insert("spanId".into(), json!(place.span));
    if let Some(p) = &place.parent {
        span.insert("parentSpanId".into(), json!(p));
    }
    span.insert(
        "name".into(),
        json!(format!("execute_tool {}", link.call.name)),
    );
    span.insert("kind".into(), json!(SPAN_KIND_INTERNAL));
    span.insert("startTimeUnixNano".into(), json!(start_ns.to_string()));
    span.insert(
        "endTimeUnixNano".into(),
        json!(end_ns.max(start_ns).to_string()),
    );
    span.insert("attributes".into(), Value::Array(attrs));
    if !place.links.is_empty() {
        span.insert("links".into(), links_json(&place.links));
    }
    span.insert("status".into(), json!({"code": 0}));
    Value::Object(span)
}

/// The `ExportTraceServiceRequest` around `spans`: one resource (`service.name` `toolscope`,
/// `toolscope.session.source` when known) with one scope (`toolscope`, this version).
pub fn export_request(header: &Header, spans: Vec<Value>) -> Value {
    let mut res = vec![attr("service.name", s("toolscope"))];
    if let Some(e) = &header.engine {
        res.push(attr("toolscope.engine.kind", s(e.kind.to_string())));
        if let Some(v) = &e.version {
            res.push(attr("toolscope.engine.version", s(v.clone())));
        }
    }
    if let Some(u) = &header.upstream {
        res.push(attr("server.address", s(u.clone())));
    }
    json!({
        "resourceSpans": [{
            "resource": {"attributes": res},
            "scopeSpans": [{
                "scope": {"name": "toolscope", "version": env!("CARGO_PKG_VERSION")},
                "spans": spans,
            }],
        }]
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::{Body, Request, Response, Timings};

    #[test]
    fn one_span_with_genai_attributes() {
        let req = json!({"model": "smollm2", "max_tokens": 64, "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "sunny"}],
            "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]});
        let ex = Exchange {
            id: 7,
            started: "2026-11-29T19:02:12.000000Z".into(),
            request: Request {
                method: "POST".into(),
                path: "/v1/chat/completions".into(),
                headers: vec![],
                body: Body::Text {
                    text: req.to_string(),
                },
            },
            response: Some(Response {
                status: 200,
                ..Default::default()
            }),
            timings: Timings {
                ttfb_us: Some(10),
                total_us: Some(1_500_000),
            },
            ..Default::default()
        };
        let reply = AssistantMessage {
            content: "It is sunny.".into(),
            finish_reason: Some("stop".into()),
            usage: Some(json!({"prompt_tokens": 40, "completion_tokens": 5})),
            ..Default::default()
        };
        let header = Header {
            created: "2026-11-29T19:02:11.482113Z".into(),
            ..Default::default()
        };
        let t = trace_id(&header);
        assert_eq!(t.len(), 32);
        let span = exchange_span(&t, Some("llama-server"), &ex, Some(&reply), None, &[], &[]);
        let get = |k: &str| {
            span["attributes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|a| a["key"] == k)
                .map(|a| a["value"].clone())
        };
        assert_eq!(span["name"], "chat smollm2");
        assert_eq!(
            get("gen_ai.operation.name"),
            Some(json!({"stringValue": "chat"}))
        );
        assert_eq!(
            get("gen_ai.usage.input_tokens"),
            Some(json!({"intValue": "40"}))
        );
        assert_eq!(
            get("gen_ai.response.finish_reasons").unwrap()["arrayValue"]["values"][0]["stringValue"],
            "stop"
        );
        let input: Value = serde_json::from_str(
            get("gen_ai.input.messages").unwrap()["stringValue"]
                .as_str()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(
            input[2]["parts"][0],
            json!({"type": "tool_call", "id": "c1", "name": "get_weather", "arguments": {"city": "Paris"}})
        );
        assert_eq!(
            input[3]["parts"][0],
            json!({"type": "tool_call_response", "id": "c1", "response": "sunny"})
        );
        // 2026-11-29T19:02:12Z = 1795978932 s after the epoch (date -d, checked by hand)
        assert_eq!(span["startTimeUnixNano"], "1795978932000000000");
        assert_eq!(span["endTimeUnixNano"], "1795978933500000000");
    }

    /// A Responses exchange is described as the chat request llama-server converts it to:
    /// `instructions` and input items as messages, only the function tools in the definitions,
    /// `max_output_tokens` as the max tokens, the `status` as the finish reason.
    #[test]
    fn responses_span_from_the_converted_request() {
        let req = json!({"model": "smollm2", "instructions": "Be brief.", "max_output_tokens": 64,
            "input": [{"role": "user", "content": "Weather in Paris?"}],
            "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}},
                      {"type": "custom", "name": "apply_patch"}]});
        let ex = Exchange {
            id: 1,
            started: "2026-12-02T01:44:00.000000Z".into(),
            request: Request {
                method: "POST".into(),
                path: "/v1/responses".into(),
                headers: vec![],
                body: Body::Text {
                    text: req.to_string(),
                },
            },
            response: Some(Response {
                status: 200,
                ..Default::default()
            }),
            ..Default::default()
        };
        let reply = AssistantMessage {
            finish_reason: Some("completed".into()),
            usage: Some(json!({"input_tokens": 40, "output_tokens": 5})),
            ..Default::default()
        };
        let span = exchange_span(
            &"0".repeat(32),
            Some("llama-server"),
            &ex,
            Some(&reply),
            None,
            &[],
            &[],
        );
        let get = |k: &str| {
            span["attributes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|a| a["key"] == k)
                .map(|a| a["value"].clone())
        };
        assert_eq!(
            get("gen_ai.operation.name"),
            Some(json!({"stringValue": "chat"}))
        );
        assert_eq!(
            get("gen_ai.request.max_tokens"),
            Some(json!({"intValue": "64"}))
        );
        let msgs: Value = serde_json::from_str(
            get("gen_ai.input.messages").unwrap()["stringValue"]
                .as_str()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(msgs[0]["role"], "system");
        assert_eq!(msgs[1]["role"], "user");
        let tools: Value = serde_json::from_str(
            get("gen_ai.tool.definitions").unwrap()["stringValue"]
                .as_str()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(tools.as_array().unwrap().len(), 1);
        assert_eq!(tools[0]["name"], "get_weather");
        assert_eq!(
            get("gen_ai.response.finish_reasons"),
            Some(json!({"arrayValue": {"values": [{"stringValue": "completed"}]}}))
        );
        assert_eq!(
            get("gen_ai.usage.output_tokens"),
            Some(json!({"intValue": "5"}))
        );
    }
}
