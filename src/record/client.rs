//! Client for the inspection endpoints of inference servers.
//!
//! llama-server (llama.cpp tools/server/server.cpp, build 11434): `GET /props`,
//! `POST /apply-template` (chat body → `{"prompt"}`), `POST /tokenize`
//! (`{"content", "with_pieces": true, "parse_special": true}` → `{"tokens":[{"id","piece"}]}`),
//! `GET /health`, `GET /slots`. Ollama: `POST /api/show {"model"}` → `{"template", …}`.

use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::{Value, json};

use crate::session::TokenPiece;

/// A client for one server base URL (scheme, host, port; a trailing `/` is ignored).
#[derive(Debug, Clone)]
pub struct ServerClient {
    base: String,
    http: reqwest::Client,
}

impl ServerClient {
    /// A client with a 30 s per-request timeout.
    pub fn new(base: &str) -> ServerClient {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .expect("reqwest client");
        ServerClient {
            base: base.trim_end_matches('/').to_owned(),
            http,
        }
    }

    /// Base URL without trailing slash.
    pub fn base(&self) -> &str {
        &self.base
    }

    async fn get_json(&self, path: &str) -> anyhow::Result<Value> {
        let url = format!("{}{}", self.base, path);
        let resp = self
            .http
            .get(&url)
            .send()
            .await
            .with_context(|| format!("GET {url}"))?;
        let status = resp.status();
        let text = resp
            .text()
            .await
            .with_context(|| format!("GET {url}: reading body"))?;
        if !status.is_success() {
            bail!("GET {url}: HTTP {status}: {}", truncate(&text, 300));
        }
        serde_json::from_str(&text).with_context(|| format!("GET {url}: body is not JSON"))
    }

    async fn post_json(&self, path: &str, body: &Value) -> anyhow::Result<Value> {
        let url = format!("{}{}", self.base, path);
        let resp = self
            .http
            .post(&url)
            .json(body)
            .send()
            .await
            .with_context(|| format!("POST {url}"))?;
        let status = resp.status();
        let text = resp
            .text()
            .await
            .with_context(|| format!("POST {url}: reading body"))?;
        if !status.is_success() {
            bail!("POST {url}: HTTP {status}: {}", truncate(&text, 300));
        }
        serde_json::from_str(&text).with_context(|| format!("POST {url}: body is not JSON"))
    }

    /// `GET /props` (llama-server), verbatim.
    pub async fn props(&self) -> anyhow::Result<Value> {
        self.get_json("/props").await
    }

    /// `GET /health` succeeded with `{"status":"ok"}`.
    pub async fn healthy(&self) -> bool {
        matches!(self.get_json("/health").await, Ok(v) if v.get("status").and_then(Value::as_str) == Some("ok"))
    }

    /// `POST /apply-template` with an OpenAI chat body; returns the rendered prompt.
    pub async fn apply_template(&self, chat_body: &Value) -> anyhow::Result<String> {
        let v = self.post_json("/apply-template", chat_body).await?;
        v.get("prompt")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .context("/apply-template answer has no \"prompt\" string")
    }

    /// `POST /tokenize` with pieces and special-token parsing.
    pub async fn tokenize(&self, content: &str) -> anyhow::Result<Vec<TokenPiece>> {
        let v = self
            .post_json(
                "/tokenize",
                &json!({"content": content, "with_pieces": true, "parse_special": true}),
            )
            .await?;
        let tokens = v
            .get("tokens")
            .cloned()
            .context("/tokenize answer has no \"tokens\"")?;
        serde_json::from_value(tokens).context("/tokenize \"tokens\" is not [{id, piece}]")
    }

    /// `GET /slots` (llama-server), verbatim: one object per slot; with
    /// `LLAMA_SERVER_SLOTS_DEBUG=1` each carries `prompt`, `generated` and `params`
    /// (tools/server/server-context.cpp, build 11434). See [`crate::stream::raw::pick_slot`].
    pub async fn slots(&self) -> anyhow::Result<Value> {
        self.get_json("/slots").await
    }

    /// vLLM `POST /tokenize` with a chat body ([`crate::record::regenerate::vllm_tokenize_body`]):
    /// the server applies its chat template and returns the prompt's token ids
    /// (vllm/entrypoints/serve/tokenize/protocol.py `TokenizeChatRequest` → `TokenizeResponse`
    /// `{"count", "max_model_len", "tokens"}`).
    pub async fn vllm_tokenize_chat(&self, body: &Value) -> anyhow::Result<Vec<u64>> {
        let v = self.post_json("/tokenize", body).await?;
        serde_json::from_value(
            v.get("tokens")
                .cloned()
                .context("/tokenize answer has no \"tokens\"")?,
        )
        .context("/tokenize \"tokens\" is not a list of token ids")
    }

    /// vLLM `POST /detokenize {"model", "tokens"}` → the answer's `prompt` text
    /// (vllm/entrypoints/serve/tokenize/protocol.py `DetokenizeResponse`).
    pub async fn vllm_detokenize(
        &self,
        model: Option<&Value>,
        tokens: &[u64],
    ) -> anyhow::Result<String> {
        let mut body = json!({ "tokens": tokens });
        if let Some(m) = model {
            body["model"] = m.clone();
        }
        let v = self.post_json("/detokenize", &body).await?;
        v.get("prompt")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .context("/detokenize answer has no \"prompt\" string")
    }

    /// `POST /api/show {"model"}` (Ollama); returns the whole answer (`template` is a Go template).
    pub async fn ollama_show(&self, model: &str) -> anyhow::Result<Value> {
        self.post_json("/api/show", &json!({"model": model})).await
    }
}

fn truncate(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}
