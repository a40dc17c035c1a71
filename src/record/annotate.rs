//! What the recorder fetches about an exchange after it ends, off the client's path: the
//! llama-server render (`/apply-template` + `/tokenize`) and `GET /slots` raw text, Ollama's
//! `/api/show`, engine learning (detection retried until the upstream answers), and
//! `--regenerate` (verified regenerations on llama-server, or on a vLLM / Ollama upstream).
//! Each result is written as an annotation line after its exchange
//! ([`crate::session::Annotation`]); [`Recorder::settle`] waits for the pending ones.

use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::Value;

use super::recorder::{RecordEvent, Recorder, emit_to};
use crate::record::client::ServerClient;
use crate::session::{
    Annotation, Api, Exchange, Line, Outcome, RawTextSource, Request, Server, ServerKind,
};

/// A llama-server upstream, known when the recorder opened or learnt later.
#[derive(Debug, Clone)]
pub(super) struct Llama {
    pub(super) client: ServerClient,
    pub(super) bos: Option<String>,
    /// `/props` `chat_template` (the server's call format, for verifying regenerations).
    pub(super) template: Option<String>,
}

/// What an ended exchange asks of the enrichment, decided by [`Recorder`] before its raw
/// bodies go to the writer thread.
pub(super) struct Enrichment {
    pub(super) id: u64,
    /// Ollama upstream base and model: fetch the model's `/api/show` (once per model).
    pub(super) ollama: Option<(String, String)>,
    /// `--regenerate` on a vLLM / Ollama upstream: `(base, engine kind)` and the exchange.
    pub(super) other: Option<((String, ServerKind), Exchange)>,
    /// The llama-server upstream, when known.
    pub(super) llama: Option<Llama>,
    /// Where to retry engine detection, while the engine is unknown.
    pub(super) learn: Option<String>,
    /// A chat exchange llama-server can render.
    pub(super) chat: bool,
    /// The request with its body, for a chat exchange.
    pub(super) request: Option<Request>,
    /// The whole exchange, for verifying a regeneration (`--regenerate`).
    pub(super) original: Option<Exchange>,
}

impl Recorder {
    /// Starts the fetches `e` asks for, each as a task on the current runtime counted as busy
    /// until its annotations are queued.
    pub(super) fn enrich(&self, e: Enrichment) {
        let Enrichment {
            id,
            ollama,
            other,
            llama,
            learn,
            chat,
            request,
            original,
        } = e;
        // Ollama: the model's /api/show (template source), once per model
        if let Some((base, model)) = ollama
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            self.busy_inc();
            let rec = self.clone();
            rt.spawn(async move {
                let show = rec.ollama_show(&base, &model).await;
                let (show, error) = match show {
                    Ok(v) => (Some(v), None),
                    Err(e) => (None, Some(e)),
                };
                rec.write_annotation(Annotation::OllamaShow {
                    exchange: id,
                    model,
                    show,
                    error,
                });
                rec.busy_dec();
            });
        }
        // --regenerate on a vLLM / Ollama upstream
        if let Some(((base, engine), original)) = other
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            self.busy_inc();
            let rec = self.clone();
            rt.spawn(async move {
                rec.regenerate_elsewhere(&base, &engine, original).await;
                rec.busy_dec();
            });
        }
        if (learn.is_some() || (llama.is_some() && chat))
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            self.busy_inc();
            let rec = self.clone();
            rt.spawn(async move {
                let llama = match (llama, learn) {
                    (Some(l), _) => Some(l),
                    (None, Some(base)) => rec.learn_engine(&base, id).await,
                    (None, None) => None,
                };
                if let (Some(l), Some(request)) = (llama, request) {
                    rec.annotate(&l, id, request, original).await;
                }
                rec.busy_dec();
            });
        }
    }

    /// `/api/show` for `model`, trimmed ([`trim_ollama_show`]); fetched on first use, then
    /// cached (failures too: one error per model, not one per exchange).
    async fn ollama_show(&self, base: &str, model: &str) -> Result<Value, String> {
        let mut cache = self.inner.ollama_shows.lock().await;
        if let Some(r) = cache.get(model) {
            return r.clone();
        }
        let r = ServerClient::new(base)
            .ollama_show(model)
            .await
            .map(|v| trim_ollama_show(&v))
            .map_err(|e| format!("{e:#}"));
        cache.insert(model.to_owned(), r.clone());
        r
    }

    /// Retries engine detection (at most one at a time). When the engine answers it is written
    /// as an [`Annotation::Engine`] after exchange `id` and detection stops; a llama-server
    /// becomes the upstream of the annotations from now on (and is returned).
    async fn learn_engine(&self, base: &str, id: u64) -> Option<Llama> {
        if self.inner.learning.swap(true, Ordering::SeqCst) {
            return None;
        }
        let (engine, props) = detect_engine(base).await;
        self.inner.learning.store(false, Ordering::SeqCst);
        if engine.kind.is_unknown() {
            return None;
        }
        if let Ok(mut l) = self.inner.learn_from.lock() {
            if l.is_none() {
                return None; // learnt meanwhile
            }
            *l = None;
        }
        let s = |k: &str| {
            props
                .as_ref()
                .and_then(|p| p.get(k))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let llama = (engine.kind == ServerKind::LlamaServer).then(|| Llama {
            client: ServerClient::new(base),
            bos: s("bos_token"),
            template: s("chat_template"),
        });
        if let (Some(l), Ok(mut slot)) = (&llama, self.inner.llama.write()) {
            *slot = Some(l.clone());
        }
        if self.inner.cfg.regenerate
            && matches!(engine.kind, ServerKind::Vllm | ServerKind::Ollama)
            && let Ok(mut r) = self.inner.regen_on.write()
        {
            *r = Some((base.to_owned(), engine.kind.clone()));
        }
        self.write_annotation(Annotation::Engine {
            exchange: id,
            engine,
            props,
        });
        llama
    }

    /// The annotations of one ended chat exchange against llama-server: `GET /slots` first (a
    /// later request may reuse the slot), then the server render, then the slot whose prompt
    /// is that render ([`crate::stream::raw::pick_slot`]), then — with `regenerate` and no raw
    /// text captured — a verified regeneration.
    async fn annotate(&self, l: &Llama, id: u64, request: Request, original: Option<Exchange>) {
        let api = Api::from_path(&request.path);
        let body = render_body(&request);
        let (anns, prompt) = exchange_annotations(&l.client, l.bos.as_deref(), id, api, body).await;
        let captured = anns
            .iter()
            .any(|a| matches!(a, Annotation::RawText { text: Some(_), .. }));
        for a in anns {
            self.write_annotation(a);
        }
        if let (Some(original), Some(prompt)) = (original, prompt)
            && !captured
            && crate::stream::raw::raw_output(&original, &[])
                .text()
                .is_none()
        {
            let new_id = self.inner.next_id.fetch_add(1, Ordering::SeqCst);
            let (ex, ann) = crate::record::regenerate::regenerate_recorded(
                &l.client,
                &original,
                &prompt,
                new_id,
                l.template.as_deref(),
            )
            .await;
            self.record_regeneration(ex, ann);
        }
    }

    /// `--regenerate` on a vLLM or Ollama upstream: unless the exchange carries its raw text
    /// itself (token pieces), regenerate it there and record the exchange and its annotation.
    async fn regenerate_elsewhere(&self, base: &str, engine: &ServerKind, original: Exchange) {
        if crate::stream::raw::raw_output(&original, &[])
            .text()
            .is_some()
        {
            return;
        }
        let new_id = self.inner.next_id.fetch_add(1, Ordering::SeqCst);
        let (ex, ann) =
            crate::record::regenerate::regenerate_on_engine(base, engine, &original, new_id).await;
        self.record_regeneration(ex, ann);
    }

    /// Records a regeneration: its exchange (when there is one) as an ended exchange, then the
    /// original's `raw_text` annotation.
    fn record_regeneration(&self, ex: Option<Exchange>, ann: Annotation) {
        if let Some(ex) = ex {
            if let Some(ev) = &self.inner.events {
                emit_to(
                    ev,
                    self.inner.rt.as_ref(),
                    RecordEvent::Ended(Box::new(ex.clone())),
                );
            }
            self.queue(Line::Exchange(Box::new(ex)));
        }
        self.write_annotation(ann);
    }
}

/// The request body as JSON for the server render: its `content-encoding` undone, at most
/// [`crate::record::spill::SPILL_AT`] (1 MiB) decoded — the size of a plain body the recorder
/// renders ([`crate::session::encoding`]); `None` when it is not JSON or cannot be decoded.
fn render_body(request: &Request) -> Option<Value> {
    let raw = request.body.to_bytes();
    let body = crate::session::encoding::decode_request_body(
        &request.headers,
        &raw,
        crate::record::spill::SPILL_AT,
    )
    .ok()?;
    serde_json::from_slice(&body).ok()
}

/// The llama-server annotations of one ended chat exchange (`api`, request `body`), in the
/// order they are fetched: `GET /slots` first (a later request may reuse the slot), then
/// [`server_render`] (`/apply-template` + `/tokenize`), then the [`Annotation::RawText`] of
/// the slot whose prompt is that render ([`crate::stream::raw::pick_slot`]; `bos`: the
/// server's `bos_token`), or why there is none. Returns `[server_render, raw_text]` and the
/// rendered prompt. The proxy, `send` and `probe` all record these.
pub async fn exchange_annotations(
    client: &ServerClient,
    bos: Option<&str>,
    exchange: u64,
    api: Api,
    body: Option<Value>,
) -> (Vec<Annotation>, Option<String>) {
    let slots = client.slots().await;
    let render = server_render(client, exchange, api, body).await;
    let prompt = match &render {
        Annotation::ServerRender {
            prompt: Some(p), ..
        } => Ok(p.clone()),
        Annotation::ServerRender { error, .. } => Err(error.clone().unwrap_or_default()),
        _ => Err(String::new()),
    };
    let picked = match (&prompt, slots) {
        (Ok(p), Ok(s)) => crate::stream::raw::pick_slot(&s, p, bos),
        (Err(e), _) => Err(format!(
            "no rendered prompt to find the exchange's slot by: {e}"
        )),
        (_, Err(e)) => Err(format!("GET /slots failed: {e:#}")),
    };
    let raw = match picked {
        Ok(t) => Annotation::RawText {
            exchange,
            source: RawTextSource::SlotsDebug,
            text: Some(t.generated),
            slot: Some(t.slot),
            generation_prompt: t.generation_prompt,
            by: None,
            verified: None,
            diverged_at: None,
            prompt_from: None,
            error: None,
        },
        Err(why) => Annotation::raw_text_missing(exchange, RawTextSource::SlotsDebug, None, why),
    };
    (vec![render, raw], prompt.ok())
}

/// Fetches llama-server's render of one exchange's request: `POST /apply-template` with the
/// same body (Anthropic bodies converted as the server does, see
/// [`crate::record::anthropic`]; Responses bodies as
/// [`crate::template::responses::responses_to_chat`] converts them), then `POST /tokenize` of
/// the prompt with pieces.
pub async fn server_render(
    client: &ServerClient,
    exchange: u64,
    api: Api,
    body: Option<Value>,
) -> Annotation {
    let result: anyhow::Result<(
        String,
        Option<Vec<crate::session::TokenPiece>>,
        Option<String>,
    )> = async {
        let body = body.ok_or_else(|| anyhow::anyhow!("request body is not JSON"))?;
        let chat = match api {
            Api::Anthropic => {
                crate::record::anthropic::anthropic_to_openai(&body).map_err(|e| {
                    anyhow::anyhow!("converting the /v1/messages body as llama-server does: {e}")
                })?
            }
            // llama-server converts a Responses request to a chat request itself
            // (server_chat_convert_responses_to_chatcmpl); the render is of that conversion.
            Api::Responses => {
                crate::template::responses::responses_to_chat(&body)
                    .map_err(|e| {
                        anyhow::anyhow!(
                            "converting the /v1/responses body as llama-server does: {e}"
                        )
                    })?
                    .body
            }
            _ => body,
        };
        let prompt = client.apply_template(&chat).await?;
        match client.tokenize(&prompt).await {
            Ok(t) => Ok((prompt, Some(t), None)),
            Err(e) => Ok((prompt, None, Some(format!("{e:#}")))),
        }
    }
    .await;
    match result {
        Ok((prompt, tokens, error)) => Annotation::ServerRender {
            exchange,
            prompt: Some(prompt),
            tokens,
            error,
        },
        Err(e) => Annotation::ServerRender {
            exchange,
            prompt: None,
            tokens: None,
            error: Some(format!("{e:#}")),
        },
    }
}

/// The model of an Ollama `/api/chat` or non-raw `/api/generate` POST (from its body), when
/// the exchange is one.
pub(super) fn ollama_model(ex: &Exchange, body: Option<&crate::session::Body>) -> Option<String> {
    let path = ex.request.path.split('?').next().unwrap_or_default();
    if ex.request.method != "POST"
        || !(path.ends_with("/api/chat") || path.ends_with("/api/generate"))
        || ex.outcome == Outcome::Shutdown
    {
        return None;
    }
    let v: Value = body?.json().ok()?;
    if v.get("raw").and_then(Value::as_bool) == Some(true) {
        return None;
    }
    v.get("model").and_then(Value::as_str).map(str::to_owned)
}

/// The parts of an Ollama `/api/show` answer a render needs: `template`, `system`,
/// `messages`, `capabilities`, `details`, `parameters`, `modified_at`.
pub fn trim_ollama_show(v: &Value) -> Value {
    let mut out = serde_json::Map::new();
    for k in [
        "template",
        "system",
        "messages",
        "capabilities",
        "details",
        "parameters",
        "modified_at",
    ] {
        if let Some(x) = v.get(k) {
            out.insert(k.to_owned(), x.clone());
        }
    }
    Value::Object(out)
}

/// Detects the engine behind `base` (`http://host:port`): `GET /props` (llama-server: the
/// props snapshot, `build_info`, `model_path`), else `GET /v1/models` (`owned_by` `vllm` or
/// `sglang`), else `GET /api/version` (Ollama). Returns the engine (kind `unknown` when none
/// answered) and the llama-server props.
pub async fn detect_engine(base: &str) -> (Server, Option<Value>) {
    let http = match reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
    {
        Ok(c) => c,
        Err(_) => {
            return (
                Server {
                    kind: ServerKind::unknown(),
                    ..Default::default()
                },
                None,
            );
        }
    };
    let base = base.trim_end_matches('/');
    let get = |path: &str| {
        let http = http.clone();
        let url = format!("{base}{path}");
        async move {
            let r = http.get(&url).send().await.ok()?;
            if !r.status().is_success() {
                return None;
            }
            r.json::<Value>().await.ok()
        }
    };
    if let Some(props) = get("/props").await
        && (props.get("build_info").is_some() || props.get("chat_template").is_some())
    {
        let s = |k: &str| props.get(k).and_then(Value::as_str).map(str::to_owned);
        return (
            Server {
                kind: ServerKind::LlamaServer,
                version: s("build_info"),
                model: s("model_path"),
            },
            Some(props),
        );
    }
    if let Some(models) = get("/v1/models").await {
        let first = models.get("data").and_then(|d| d.get(0));
        let owned = first
            .and_then(|m| m.get("owned_by"))
            .and_then(Value::as_str)
            .unwrap_or("");
        let id = first
            .and_then(|m| m.get("id"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        // `owned_by` names the server (vLLM, SGLang; llama-server says `llamacpp`)
        let kind = match owned {
            "vllm" => Some(ServerKind::Vllm),
            "sglang" => Some(ServerKind::Sglang),
            "llamacpp" => Some(ServerKind::LlamaServer),
            _ => None,
        };
        if let Some(kind) = kind {
            return (
                Server {
                    kind,
                    version: None,
                    model: id,
                },
                None,
            );
        }
    }
    if let Some(v) = get("/api/version").await
        && let Some(version) = v.get("version").and_then(Value::as_str)
    {
        return (
            Server {
                kind: ServerKind::Ollama,
                version: Some(version.to_owned()),
                model: None,
            },
            None,
        );
    }
    (
        Server {
            kind: ServerKind::unknown(),
            ..Default::default()
        },
        None,
    )
}
