//! Raw regeneration: re-run an exchange whose server answered with a tool-call parse error as a
//! raw text completion, so the text the server's parser choked on can be seen and replayed.
//!
//! llama-server (build 11434) answers a chat request whose generated text its tool-call parser
//! cannot read with HTTP 500 `"The model produced output that does not match the expected
//! <name> format"` (tools/server/server-context.cpp; the parser is common/chat.cpp's PEG
//! parser) and the text is lost. [`regenerate`] asks the same server for the prompt it rendered
//! (`POST /apply-template` with the same chat body; Anthropic bodies are first converted as the
//! server does, [`crate::record::anthropic`]) and sends that prompt to `POST /completion` with
//! the same sampling settings ([`completion_body`]). The answer is recorded as a new exchange
//! labelled `regenerate:<id>` in the session.
//!
//! With greedy sampling (`temperature: 0`, or a fixed `seed`) the regenerated text is the text
//! the chat request produced; otherwise it is another sample from the same distribution.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Map, Value, json};

use crate::parser::Syntax;
use crate::record::client::ServerClient;
use crate::session::{
    Annotation, Api, Body, Exchange, Line, RawTextSource, Request, Response, SessionWriter, Timings,
};
use crate::stream::raw::{Verdict, verify_regenerated};

/// True when `ex` is a chat exchange (OpenAI or Anthropic) that llama-server answered with its
/// tool-call parse error: HTTP 500 (or an SSE `error` event) whose message says the output
/// "does not match the expected … format" (the condition of rule `server.parse_error`).
pub fn is_parse_error(ex: &Exchange) -> bool {
    if !matches!(ex.api(), Api::Openai | Api::Anthropic) {
        return false;
    }
    let Some(resp) = &ex.response else {
        return false;
    };
    let text = String::from_utf8_lossy(&ex.response_bytes()).into_owned();
    let msg = text.contains("does not match the expected");
    msg && (resp.status >= 500 || resp.chunks.is_some())
}

/// The `/completion` body for `prompt` with the sampling settings of the chat body `chat`
/// (OpenAI or Anthropic field names): `temperature`, `top_p`, `top_k`, `min_p`, `seed`,
/// `presence_penalty`, `frequency_penalty`, `repeat_penalty`; `max_tokens` /
/// `max_completion_tokens` / `n_predict` → `n_predict`; `stop` / `stop_sequences` → `stop`
/// (a single string becomes a one-element array). Always `stream: false`,
/// `cache_prompt: false`. Fields follow llama.cpp tools/server/README.md "POST /completion".
pub fn completion_body(chat: &Value, prompt: &str) -> Value {
    let mut b = Map::new();
    b.insert("prompt".into(), json!(prompt));
    for k in [
        "temperature",
        "top_p",
        "top_k",
        "min_p",
        "seed",
        "presence_penalty",
        "frequency_penalty",
        "repeat_penalty",
    ] {
        if let Some(v) = chat.get(k).filter(|v| !v.is_null()) {
            b.insert(k.into(), v.clone());
        }
    }
    if let Some(n) = ["max_completion_tokens", "max_tokens", "n_predict"]
        .iter()
        .find_map(|k| chat.get(*k).filter(|v| v.is_number()))
    {
        b.insert("n_predict".into(), n.clone());
    }
    let stop = chat.get("stop").or_else(|| chat.get("stop_sequences"));
    match stop {
        Some(Value::String(s)) => {
            b.insert("stop".into(), json!([s]));
        }
        Some(Value::Array(a)) if !a.is_empty() => {
            b.insert("stop".into(), Value::Array(a.clone()));
        }
        _ => {}
    }
    b.insert("stream".into(), json!(false));
    b.insert("cache_prompt".into(), json!(false));
    Value::Object(b)
}

pub use crate::stream::raw::assistant_prefill;

/// What [`regenerate`] produced.
#[derive(Debug, Clone)]
pub struct Regenerated {
    /// The recorded exchange (`POST /completion`, label `regenerate:<id>`).
    pub exchange: Exchange,
    /// The prompt `/apply-template` returned.
    pub prompt: String,
    /// The generated text (`content` of the `/completion` answer).
    pub generated: String,
    /// The text to replay the parser on: the assistant prefill (if any) + `generated`.
    pub raw_text: String,
    /// The [`Annotation::RawText`] written for the original exchange (source `regenerated`,
    /// `by` = the new exchange, and the verdict of [`crate::stream::raw::verify_regenerated`]).
    pub annotation: Annotation,
}

/// The chat body of a chat exchange, converted to OpenAI shape as llama-server converts
/// Anthropic bodies (`/apply-template` takes OpenAI bodies only): `(original body, chat body)`.
fn chat_bodies(original: &Exchange) -> anyhow::Result<(Value, Value)> {
    let id = original.id;
    let body = original
        .request_json()
        .with_context(|| format!("exchange {id}: request body is not JSON"))?;
    let chat = match original.api() {
        Api::Openai => body.clone(),
        Api::Anthropic => crate::record::anthropic::anthropic_to_openai(&body)
            .map_err(|e| anyhow::anyhow!("exchange {id}: {e}"))?,
        other => bail!(
            "exchange {id}: {} is not a chat request ({})",
            original.request.path,
            other.as_str()
        ),
    };
    Ok((body, chat))
}

/// Sends `prompt` to llama-server `POST /completion` with the sampling settings of `original`
/// ([`completion_body`]) and returns the recorded exchange (id `new_id`, label
/// `regenerate:<original id>`, timings measured) and the generated text.
///
/// Errors: `/completion` cannot be reached or its answer cannot be read (an HTTP error status
/// is recorded, not an error). Messages name the original exchange id.
async fn complete(
    base: &str,
    original: &Exchange,
    body: &Value,
    prompt: &str,
    new_id: u64,
) -> anyhow::Result<(Exchange, String)> {
    let id = original.id;
    let req_bytes = serde_json::to_vec(&completion_body(body, prompt))?;
    let started = crate::record::recorder::now_rfc3339();
    let t0 = Instant::now();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(600))
        .build()
        .context("building the HTTP client")?;
    let url = format!("{base}/completion");
    let resp = http
        .post(&url)
        .header("content-type", "application/json")
        .body(req_bytes.clone())
        .send()
        .await
        .with_context(|| format!("exchange {id}: POST {url}"))?;
    let ttfb = t0.elapsed().as_micros() as u64;
    let status = resp.status().as_u16();
    let headers = recorded_headers(resp.headers());
    let bytes = resp
        .bytes()
        .await
        .with_context(|| format!("exchange {id}: reading the /completion answer"))?;
    let total = t0.elapsed().as_micros() as u64;
    let generated = serde_json::from_slice::<Value>(&bytes)
        .ok()
        .and_then(|v| v.get("content").and_then(Value::as_str).map(str::to_owned))
        .unwrap_or_default();
    let exchange = Exchange {
        id: new_id,
        started,
        label: Some(format!("regenerate:{id}")),
        request: Request {
            method: "POST".into(),
            path: "/completion".into(),
            headers: vec![("content-type".into(), "application/json".into())],
            body: Body::from_bytes(&req_bytes),
        },
        response: Some(Response {
            status,
            headers,
            body: Some(Body::from_bytes(&bytes)),
            chunks: None,
        }),
        timings: Timings {
            ttfb_us: Some(ttfb),
            total_us: Some(total),
        },
        ..Default::default()
    };
    Ok((exchange, generated))
}

/// The [`Annotation::RawText`] for `original` regenerated as `generated` by exchange `by`:
/// verified against the server's answer when the original exchange has one (a complete
/// response with a status below 400), under the call syntax of `template` (the server's chat
/// template; else the syntax the text shows).
pub fn regenerated_annotation(
    original: &Exchange,
    generated: &str,
    by: Option<u64>,
    template: Option<&str>,
) -> Annotation {
    let body = original.request_json();
    let prefill = body
        .as_ref()
        .and_then(assistant_prefill)
        .unwrap_or_default();
    let answered = original.response.as_ref().is_some_and(|r| r.status < 400)
        && !original.is_partial()
        && !is_parse_error(original);
    let server = answered
        .then(|| crate::stream::decode_exchange(original))
        .flatten()
        .map(|r| r.message);
    let verdict = server.map(|m| {
        let raw = format!("{prefill}{generated}");
        let syntax = template
            .and_then(Syntax::detect_from_template)
            .or_else(|| Syntax::detect_from_text(&raw));
        verify_regenerated(&m, &prefill, generated, syntax, body.as_ref())
    });
    Annotation::RawText {
        exchange: original.id,
        source: RawTextSource::Regenerated,
        text: Some(generated.to_owned()),
        slot: None,
        generation_prompt: None,
        by,
        verified: verdict.map(|v| v == Verdict::Verified),
        diverged_at: match verdict {
            Some(Verdict::Diverged { at }) => Some(at),
            _ => None,
        },
        error: None,
    }
}

/// Regenerates exchange `original` against the llama-server at `base_url` (`http://HOST:PORT`)
/// and appends to `writer` the new exchange (id from [`SessionWriter::next_id`], label
/// `regenerate:<original id>`, `started` now, timings measured) and the
/// [`Annotation::RawText`] for the original exchange, verified against the server's answer
/// under the server's own chat template (`GET /props`).
///
/// Errors: the original request body is not JSON or not a chat body; `/apply-template` fails;
/// `/completion` cannot be reached (an HTTP error status from `/completion` is recorded, not an
/// error); the session line cannot be written. Every message names the original exchange id.
pub async fn regenerate(
    base_url: &str,
    original: &Exchange,
    writer: &mut SessionWriter,
) -> anyhow::Result<Regenerated> {
    let id = original.id;
    let (body, chat) = chat_bodies(original)?;
    let base = base_url.trim_end_matches('/');
    let client = ServerClient::new(base);
    let prompt = client
        .apply_template(&chat)
        .await
        .with_context(|| format!("exchange {id}: /apply-template"))?;
    let template = client.props().await.ok().and_then(|p| {
        p.get("chat_template")
            .and_then(Value::as_str)
            .map(str::to_owned)
    });
    let (exchange, generated) = complete(base, original, &body, &prompt, writer.next_id()).await?;
    let annotation =
        regenerated_annotation(original, &generated, Some(exchange.id), template.as_deref());
    let path = writer.path().display().to_string();
    writer
        .append(&Line::Exchange(Box::new(exchange.clone())))
        .and_then(|()| writer.append(&Line::Annotation(annotation.clone())))
        .with_context(|| format!("exchange {id}: writing the regenerated exchange to {path}"))?;
    let raw_text = format!(
        "{}{generated}",
        assistant_prefill(&body).unwrap_or_default()
    );
    Ok(Regenerated {
        exchange,
        prompt,
        generated,
        raw_text,
        annotation,
    })
}

/// `proxy --regenerate`: regenerates `original` from its already fetched rendered `prompt`
/// through `client`'s `/completion`, as exchange `new_id`. Returns the exchange to record (when
/// `/completion` answered) and the original's [`Annotation::RawText`] (with `error` when the
/// regeneration failed).
pub async fn regenerate_recorded(
    client: &ServerClient,
    original: &Exchange,
    prompt: &str,
    new_id: u64,
    template: Option<&str>,
) -> (Option<Exchange>, Annotation) {
    let failed = |e: anyhow::Error| Annotation::RawText {
        exchange: original.id,
        source: RawTextSource::Regenerated,
        text: None,
        slot: None,
        generation_prompt: None,
        by: None,
        verified: None,
        diverged_at: None,
        error: Some(format!("{e:#}")),
    };
    let body = match chat_bodies(original) {
        Ok((body, _)) => body,
        Err(e) => return (None, failed(e)),
    };
    match complete(client.base(), original, &body, prompt, new_id).await {
        Ok((ex, generated)) if ex.response.as_ref().is_some_and(|r| r.status < 400) => {
            let ann = regenerated_annotation(original, &generated, Some(ex.id), template);
            (Some(ex), ann)
        }
        Ok((ex, _)) => {
            let status = ex.response.as_ref().map_or(0, |r| r.status);
            (
                Some(ex),
                failed(anyhow::anyhow!("/completion answered HTTP {status}")),
            )
        }
        Err(e) => (None, failed(e)),
    }
}

/// Response headers as a session records them: `(lower-case name, value)` pairs in the
/// server's order, values decoded lossily as UTF-8. Shared with [`super::probe`].
pub(crate) fn recorded_headers(headers: &reqwest::header::HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_ascii_lowercase(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampling_settings_carried_over() {
        let chat = json!({"model":"m","temperature":0,"top_p":0.9,"seed":7,"max_tokens":64,"stop":"</tool_call>","messages":[]});
        assert_eq!(
            completion_body(&chat, "P"),
            json!({"prompt":"P","temperature":0,"top_p":0.9,"seed":7,"n_predict":64,"stop":["</tool_call>"],"stream":false,"cache_prompt":false})
        );
        let anth = json!({"max_tokens":10,"stop_sequences":["a","b"],"top_k":5});
        assert_eq!(
            completion_body(&anth, "Q"),
            json!({"prompt":"Q","top_k":5,"n_predict":10,"stop":["a","b"],"stream":false,"cache_prompt":false})
        );
    }

    #[test]
    fn prefill_and_parse_error_detection() {
        let chat = json!({"messages":[{"role":"user","content":"x"},{"role":"assistant","content":"<tool_call>\n{\"name\": \""}]});
        assert_eq!(
            assistant_prefill(&chat).as_deref(),
            Some("<tool_call>\n{\"name\": \"")
        );
        assert_eq!(
            assistant_prefill(&json!({"messages":[{"role":"user","content":"x"}]})),
            None
        );
        let mut ex = Exchange {
            request: Request { method: "POST".into(), path: "/v1/chat/completions".into(), ..Default::default() },
            response: Some(Response {
                status: 500,
                body: Some(Body::from_bytes(br#"{"error":{"code":500,"message":"The model produced output that does not match the expected peg-native format","type":"server_error"}}"#)),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(is_parse_error(&ex));
        ex.response.as_mut().unwrap().status = 400;
        assert!(!is_parse_error(&ex));
    }
}
