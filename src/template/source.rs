//! Where a chat template comes from: a `.jinja` file, a HF `tokenizer_config.json` (or
//! `chat_template.json`), GGUF metadata, llama-server `GET /props`, or Ollama `POST /api/show`
//! (a Go `text/template`, rendered as Ollama renders it by [`super::ollama`]), and the one
//! render entry point ([`TemplateSource::render`], [`TemplateSource::render_request`]) that
//! picks the renderer from the source's format and the render profile. Pure: the CLI layer
//! reads files and fetches URLs.

use std::collections::BTreeMap;

use serde_json::Value;

use super::input::RenderInput;
use super::ollama::{OllamaModel, ParsedTemplates};
use super::profile::{OllamaVersion, Profile, VocabFlags};
use super::render::{RenderError, RenderOptions};
use crate::gguf::{self, GgufMetadata};
use crate::gotmpl::{Date, ExecOptions, GoTemplateError};
use crate::tokens::Vocab;

/// The template language of a source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TemplateFormat {
    /// A Jinja2 chat template (HF, GGUF, llama-server): renderable.
    #[default]
    Jinja,
    /// An Ollama Go `text/template` (`/api/show` `template`): rendered for Ollama request
    /// bodies under the Ollama profile ([`TemplateSource::render`]).
    Go,
}

/// A chat template with what its source knows about the model.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TemplateSource {
    /// The default template text.
    pub template: String,
    /// Named templates (HF list form `[{"name", "template"}]`, GGUF
    /// `tokenizer.chat_template.<name>`, `/props` `chat_template_tool_use`), e.g. `tool_use`.
    /// The default one is also under `default` when the source names it.
    pub named: BTreeMap<String, String>,
    /// BOS text, when the source knows it.
    pub bos_token: Option<String>,
    /// EOS text, when the source knows it.
    pub eos_token: Option<String>,
    /// File name or URL, for messages.
    pub origin: String,
    /// The vocabulary, when the source carries one (GGUF).
    pub vocab: Option<Vocab>,
    /// Jinja or Go.
    pub format: TemplateFormat,
    /// The profile of the engine that serves this template, when the source says
    /// (llama-server `/props`: the llama.cpp profile at its `build_info`); renders default to
    /// it ([`TemplateSource::profile_for`]).
    pub profile: Option<Profile>,
    /// Whether the engine's tokenizer adds BOS / EOS itself (GGUF `tokenizer.ggml.add_bos_token`;
    /// llama-server: its model's vocabulary), for the llama.cpp profile's BOS handling.
    pub vocab_flags: Option<VocabFlags>,
    /// For an Ollama `/api/show` source: the model's `SYSTEM`, `MESSAGE`s and thinking
    /// capability, which change the render as the template does.
    pub ollama: Option<OllamaModel>,
}

/// A template source that cannot be used, naming the source and (for JSON) the position.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{origin}: {message}")]
pub struct SourceError {
    pub origin: String,
    pub message: String,
}

fn err(origin: &str, message: impl Into<String>) -> SourceError {
    SourceError {
        origin: origin.to_owned(),
        message: message.into(),
    }
}

/// Why a template source did not render ([`TemplateSource::render`]). Each message names the
/// source (its origin) first.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TemplateError {
    /// A request render from a source without a chat template.
    #[error("{origin}: the source has no chat template")]
    NoTemplate { origin: String },
    /// An Ollama Go template under a Jinja profile (transformers, llama.cpp).
    #[error(
        "{origin}: an Ollama Go template, rendered as Ollama renders it; --engine {profile} is a Jinja render profile: drop --engine"
    )]
    GoUnderJinjaProfile { origin: String, profile: Profile },
    /// A Jinja template under the Ollama profile, which renders Go templates only.
    #[error(
        "{origin}: a Jinja template; --engine {profile} renders Ollama Go templates only: drop --engine, or name a Jinja profile (transformers, llama.cpp, llama.cpp@BUILD)"
    )]
    JinjaUnderOllamaProfile { origin: String, profile: Profile },
    /// The Jinja template's own error (`NAME:LINE:COLUMN: message`).
    #[error(transparent)]
    Jinja(#[from] RenderError),
    /// The Go template's own error (`template: :LINE:COL: …`).
    #[error(transparent)]
    Go(#[from] GoTemplateError),
}

impl TemplateError {
    /// The Jinja render error, when that is what failed.
    pub fn render_error(&self) -> Option<&RenderError> {
        match self {
            TemplateError::Jinja(e) => Some(e),
            _ => None,
        }
    }
}

/// A token given as a string or as a HF AddedToken object `{"content": …}`.
fn token_text(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) => Some(s.clone()),
        Value::Object(o) => o.get("content").and_then(Value::as_str).map(str::to_owned),
        _ => None,
    }
}

impl TemplateSource {
    /// Detects the kind from the bytes: GGUF magic → [`TemplateSource::from_gguf`]; a JSON
    /// object with `chat_template` → tokenizer_config.json / chat_template.json (or
    /// llama-server `/props`); a JSON object with `template` and `modelfile` or `details` →
    /// Ollama `/api/show`; a name ending `.gotmpl` / `.tmpl` → a bare Go template
    /// ([`TemplateFormat::Go`]); a JSON `tokenizer.json` → error (use it as `--vocab`); anything else
    /// that is UTF-8 → a `.jinja` template. Errors: invalid UTF-8 (with byte offset), JSON
    /// without a template (with line/column for malformed JSON), damaged GGUF header.
    pub fn from_bytes(name: &str, bytes: &[u8]) -> Result<TemplateSource, SourceError> {
        if gguf::is_gguf(bytes) {
            let md = gguf::read_metadata(bytes).map_err(|e| err(name, e.to_string()))?;
            return TemplateSource::from_gguf(name, &md);
        }
        let text = std::str::from_utf8(bytes).map_err(|e| {
            // the one invalid-UTF-8 shape (crate::text::utf8_error): NAME:LINE:COL: …
            let (line, col, at) = crate::text::utf8_position(bytes, &e);
            err(
                &format!("{name}:{line}:{col}"),
                format!("invalid UTF-8 (byte {at}); not a GGUF file either"),
            )
        })?;
        if name.ends_with(".gotmpl") || name.ends_with(".tmpl") {
            // a bare Go template (Ollama's template/*.gotmpl, a Modelfile's TEMPLATE): no
            // SYSTEM, MESSAGEs or capabilities beside it
            return Ok(TemplateSource {
                template: text.to_owned(),
                origin: name.to_owned(),
                format: TemplateFormat::Go,
                ollama: Some(OllamaModel::default()),
                ..Default::default()
            });
        }
        let trimmed = text.trim_start();
        let looks_json = name.ends_with(".json")
            || (trimmed.starts_with('{')
                && !trimmed.starts_with("{%")
                && !trimmed.starts_with("{{")
                && !trimmed.starts_with("{#"));
        if looks_json {
            let v: Value = match serde_json::from_str(text) {
                Ok(v) => v,
                Err(e) if name.ends_with(".json") => {
                    return Err(err(
                        name,
                        format!(
                            "invalid JSON at line {} column {}: {}",
                            e.line(),
                            e.column(),
                            crate::json_reason(&e)
                        ),
                    ));
                }
                Err(_) => return Ok(TemplateSource::from_jinja(name, text)),
            };
            if v.get("chat_template").is_some() && v.get("default_generation_settings").is_some() {
                return TemplateSource::from_props(&v).map(|mut s| {
                    s.origin = name.to_owned();
                    s
                });
            }
            if v.get("chat_template").is_some() {
                return TemplateSource::from_tokenizer_config(name, &v);
            }
            if v.get("template").and_then(Value::as_str).is_some()
                && (v.get("modelfile").is_some() || v.get("details").is_some())
            {
                return TemplateSource::from_ollama_show(name, &v);
            }
            if v.get("model").is_some() && v.get("added_tokens").is_some() {
                return Err(err(
                    name,
                    "this is a tokenizer.json (a vocabulary, no chat template): pass it as --vocab, and the tokenizer_config.json as --template",
                ));
            }
            return Err(err(
                name,
                "JSON has no \"chat_template\" (expected tokenizer_config.json, chat_template.json or llama-server /props)",
            ));
        }
        Ok(TemplateSource::from_jinja(name, text))
    }

    /// A bare Jinja template.
    pub fn from_jinja(name: &str, text: &str) -> TemplateSource {
        TemplateSource {
            template: text.to_owned(),
            origin: name.to_owned(),
            ..Default::default()
        }
    }

    /// From a HF `tokenizer_config.json` value: `chat_template` is a string or a list of
    /// `{"name", "template"}` (the `default` entry, else the first, becomes [`Self::template`]);
    /// `bos_token` / `eos_token` are strings or AddedToken objects.
    pub fn from_tokenizer_config(name: &str, v: &Value) -> Result<TemplateSource, SourceError> {
        let mut src = TemplateSource {
            origin: name.to_owned(),
            ..Default::default()
        };
        match v.get("chat_template") {
            Some(Value::String(s)) => src.template = s.clone(),
            Some(Value::Array(list)) => {
                for (i, item) in list.iter().enumerate() {
                    let n = item.get("name").and_then(Value::as_str);
                    let t = item.get("template").and_then(Value::as_str);
                    match (n, t) {
                        (Some(n), Some(t)) => {
                            src.named.insert(n.to_owned(), t.to_owned());
                        }
                        _ => {
                            return Err(err(
                                name,
                                format!("/chat_template/{i} is not {{\"name\", \"template\"}}"),
                            ));
                        }
                    }
                }
                src.template = match src.named.get("default") {
                    Some(t) => t.clone(),
                    None => list
                        .first()
                        .and_then(|i| i.get("template"))
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                };
            }
            _ => {
                return Err(err(
                    name,
                    "/chat_template is neither a string nor a list of named templates",
                ));
            }
        }
        src.bos_token = token_text(v.get("bos_token"));
        src.eos_token = token_text(v.get("eos_token"));
        Ok(src)
    }

    /// From llama-server `GET /props` (tools/server/server-context.cpp, build 11434):
    /// `chat_template`, `chat_template_tool_use` (when the model has one), `bos_token`,
    /// `eos_token`. Errors: no `chat_template` string.
    pub fn from_props(v: &Value) -> Result<TemplateSource, SourceError> {
        let origin = v
            .get("model_path")
            .and_then(Value::as_str)
            .map(|p| format!("/props ({p})"))
            .unwrap_or_else(|| "/props".into());
        let template = v
            .get("chat_template")
            .and_then(Value::as_str)
            .ok_or_else(|| err(&origin, "/props has no \"chat_template\" string"))?;
        let mut src = TemplateSource {
            template: template.to_owned(),
            origin,
            ..Default::default()
        };
        if let Some(t) = v
            .get("chat_template_tool_use")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
        {
            src.named.insert("tool_use".into(), t.to_owned());
            src.named.insert("default".into(), template.to_owned());
        }
        src.bos_token = token_text(v.get("bos_token"));
        src.eos_token = token_text(v.get("eos_token"));
        src.profile = Some(Profile::from_llama_build_info(
            v.get("build_info").and_then(Value::as_str),
        ));
        Ok(src)
    }

    /// From Ollama `POST /api/show`: the `template` field is a Go template
    /// ([`TemplateFormat::Go`]); `system`, `messages` and `capabilities` become
    /// [`Self::ollama`]. Render it with [`Self::render_request`] (the Ollama profile). Errors: no `template`
    /// string.
    pub fn from_ollama_show(name: &str, v: &Value) -> Result<TemplateSource, SourceError> {
        let t = v
            .get("template")
            .and_then(Value::as_str)
            .ok_or_else(|| err(name, "/api/show answer has no \"template\""))?;
        Ok(TemplateSource {
            template: t.to_owned(),
            origin: name.to_owned(),
            format: TemplateFormat::Go,
            ollama: Some(OllamaModel::from_show(v)),
            ..Default::default()
        })
    }

    /// The profile a render of this source runs under: `requested` (`--engine`), else the
    /// source's own ([`Self::profile`]), else by format: transformers for a Jinja template,
    /// Ollama (current version) for a Go template.
    pub fn profile_for(&self, requested: Option<Profile>) -> Profile {
        requested.or(self.profile).unwrap_or(match self.format {
            TemplateFormat::Jinja => Profile::Transformers,
            TemplateFormat::Go => Profile::Ollama { version: None },
        })
    }

    /// Renders `input` with this source — the one function every caller (the inspector's
    /// Template pane, `render`, `check`, `flatten`, `diff`, `try`, the analysis) renders a
    /// template source with. The renderer follows from the source's format and the profile
    /// ([`Self::profile_for`] of `opts.profile`):
    ///
    /// * Jinja under transformers: the core renderer ([`mod@super::render`]); under llama.cpp at a
    ///   build: the llama.cpp profile ([`super::llama`]). The template is the source's named
    ///   `tool_use` one when the request has tools (both pick it so), else the default
    ///   ([`Self::select`]); `bos_token`/`eos_token` default to the source's when the request
    ///   does not set them; the llama.cpp profile's vocabulary flags (adds BOS/EOS) are the
    ///   source's unless `opts.vocab` was set; `opts.name` defaults to the source's origin.
    /// * Go under Ollama (at a version): Ollama's prompt building ([`super::ollama`]) over the
    ///   request as received (`input.request`), with the source's `/api/show` facts;
    ///   `currentDate` is the date of `opts.now` (`None`: calling it is an error).
    ///
    /// Errors: a Go template under a Jinja profile or a Jinja template under the Ollama profile
    /// ([`TemplateError`], naming the source and the profile), else the renderer's own error.
    pub fn render(
        &self,
        input: &RenderInput,
        opts: &RenderOptions,
    ) -> Result<String, TemplateError> {
        self.render_in(&ParsedTemplates::default(), input, opts)
    }

    /// [`Self::render`], a Go template's parse taken from (and kept in) `parsed`.
    pub fn render_in(
        &self,
        parsed: &ParsedTemplates,
        input: &RenderInput,
        opts: &RenderOptions,
    ) -> Result<String, TemplateError> {
        match self.renderer(opts)? {
            Profile::Ollama { version } => {
                let fallback;
                let body = match &input.request {
                    Some(b) => b,
                    None => {
                        fallback =
                            serde_json::json!({"messages": input.messages, "tools": input.tools});
                        &fallback
                    }
                };
                Ok(self.render_go(parsed, body, opts.now, version)?)
            }
            profile => {
                let input = input
                    .clone()
                    .with_default_tokens(self.bos_token.as_deref(), self.eos_token.as_deref());
                let opts = self.jinja_options(opts, profile);
                Ok(super::compiled::render(self.select(&input), &input, &opts)?)
            }
        }
    }

    /// Under a llama.cpp profile ([`Self::profile_for`] of `opts.profile`), the render of
    /// `input`'s closed messages and the generation prompt llama-server's parser reads in front
    /// of the reply ([`super::llama::generation_prompt`]), the template and options completed
    /// as [`Self::render`] completes them; `None` under another profile.
    pub fn generation_prompt(
        &self,
        input: &RenderInput,
        opts: &RenderOptions,
    ) -> Option<Result<(String, String), TemplateError>> {
        let profile = self.renderer(opts).ok()?;
        if !profile.is_llama_cpp() {
            return None;
        }
        let input = input
            .clone()
            .with_default_tokens(self.bos_token.as_deref(), self.eos_token.as_deref());
        let opts = self.jinja_options(opts, profile);
        let compiled = match super::compiled::CompiledTemplate::compile(self.select(&input), &opts)
        {
            Ok(c) => c,
            Err(e) => return Some(Err(e.into())),
        };
        Some(compiled.generation_prompt(&input)?.map_err(Into::into))
    }

    /// Renders a request `body` with this source as [`Self::render`] does: for a Jinja
    /// template the body read as OpenAI (or Anthropic when `anthropic`) chat
    /// ([`RenderInput`]); for a Go template the body as Ollama reads it. Returns the prompt
    /// and the input (its `notes` say what normalisation changed; for a Go template only
    /// `request` is set). `render --request`, `check`, `regenerate` and `try` render through
    /// this.
    ///
    /// Errors: as [`Self::render`], and a Jinja source with no chat template.
    pub fn render_request(
        &self,
        body: &Value,
        anthropic: bool,
        opts: &RenderOptions,
    ) -> Result<(String, RenderInput), TemplateError> {
        self.render_request_in(&ParsedTemplates::default(), body, anthropic, opts)
    }

    /// [`Self::render_request`], a Go template's parse taken from (and kept in) `parsed`.
    pub fn render_request_in(
        &self,
        parsed: &ParsedTemplates,
        body: &Value,
        anthropic: bool,
        opts: &RenderOptions,
    ) -> Result<(String, RenderInput), TemplateError> {
        if let Profile::Ollama { version } = self.renderer(opts)? {
            let prompt = self.render_go(parsed, body, opts.now, version)?;
            let input = RenderInput {
                request: Some(body.clone()),
                ..Default::default()
            };
            return Ok((prompt, input));
        }
        let input = if anthropic {
            RenderInput::from_anthropic_request(body)
        } else {
            RenderInput::from_openai_request(body)
        };
        let input = input.with_default_tokens(self.bos_token.as_deref(), self.eos_token.as_deref());
        if self.select(&input).is_empty() {
            return Err(TemplateError::NoTemplate {
                origin: self.origin.clone(),
            });
        }
        let prompt = self.render_in(parsed, &input, opts)?;
        Ok((prompt, input))
    }

    /// The profile a render runs under, or the error for a source it cannot render.
    fn renderer(&self, opts: &RenderOptions) -> Result<Profile, TemplateError> {
        let profile = self.profile_for(opts.profile);
        let origin = || self.origin.clone();
        match (self.format, profile.is_jinja()) {
            (TemplateFormat::Go, true) => Err(TemplateError::GoUnderJinjaProfile {
                origin: origin(),
                profile,
            }),
            (TemplateFormat::Jinja, false) => Err(TemplateError::JinjaUnderOllamaProfile {
                origin: origin(),
                profile,
            }),
            _ => Ok(profile),
        }
    }

    /// `opts` completed from this source for a Jinja render under `profile`: the name, the
    /// profile and the vocabulary flags.
    fn jinja_options(&self, opts: &RenderOptions, profile: Profile) -> RenderOptions {
        let mut opts = opts.clone();
        if opts.name.is_none() {
            opts.name = Some(self.origin.clone());
        }
        opts.profile = Some(profile);
        if opts.vocab == Default::default() {
            opts.vocab = self
                .vocab_flags
                .unwrap_or_else(|| VocabFlags::guess_from_bos(self.bos_token.as_deref()));
        }
        opts
    }

    /// An Ollama request body through this Go template as Ollama's server builds its prompt
    /// (ollama/ollama template/template.go `Execute`, server/prompt.go `chatPrompt`; see
    /// [`super::ollama`]), `currentDate` the date of `now`, as Ollama `version` renders it.
    fn render_go(
        &self,
        parsed: &ParsedTemplates,
        request: &Value,
        now: Option<time::OffsetDateTime>,
        version: Option<OllamaVersion>,
    ) -> Result<String, GoTemplateError> {
        let opts = ExecOptions {
            today: now.map(|n| (n.year(), u8::from(n.month()) as u32, n.day() as u32)),
            ..Default::default()
        };
        let mut model = self.ollama.clone().unwrap_or_default();
        if let Some(v) = version {
            model.follow_version(v);
        }
        super::ollama::render_ollama_in(parsed, &self.template, request, &model, &opts)
    }
}

/// The date part of an RFC 3339 timestamp (`2026-11-29T12:00:00Z` → `(2026, 11, 29)`), for
/// Ollama's `currentDate` at the exchange's start.
pub fn date_of(rfc3339: &str) -> Option<Date> {
    let d = rfc3339.get(..10)?;
    let mut it = d.split('-');
    let y = it.next()?.parse().ok()?;
    let m = it.next()?.parse().ok()?;
    let dd = it.next()?.parse().ok()?;
    Some((y, m, dd))
}

/// The clock of an exchange that started at `started` (RFC 3339): that time, or — a timestamp
/// that does not parse whole — midnight UTC of its date part ([`date_of`]).
pub fn clock_of(started: &str) -> Option<time::OffsetDateTime> {
    use time::format_description::well_known::Rfc3339;
    time::OffsetDateTime::parse(started, &Rfc3339)
        .ok()
        .or_else(|| midnight_of(date_of(started)?))
}

/// Midnight UTC of a civil date (`None`: no such date), the clock whose date is `date`.
pub fn midnight_of((y, m, d): Date) -> Option<time::OffsetDateTime> {
    let month = time::Month::try_from(u8::try_from(m).ok()?).ok()?;
    let date = time::Date::from_calendar_date(y, month, u8::try_from(d).ok()?).ok()?;
    Some(date.midnight().assume_utc())
}

/// An Ollama exchange's render from its `/api/show` annotation (`model`, the trimmed answer):
/// `(origin, render or error)`, the request rendered by [`TemplateSource::render_request`]
/// under the Ollama profile at `version` (the session's `/api/version`, when known) with
/// `currentDate` = the date of `started` (RFC 3339), the parsed template kept in `parsed`.
/// The one place the Template pane and `check` get an Ollama prompt from.
pub fn ollama_exchange_render(
    parsed: &ParsedTemplates,
    model: &str,
    show: &Value,
    request: Option<&Value>,
    started: &str,
    version: Option<&str>,
) -> (String, Result<String, String>) {
    let origin = match version {
        Some(v) => format!("/api/show template, {model}, Ollama {v}"),
        None => format!("/api/show template, {model}"),
    };
    let source = match TemplateSource::from_ollama_show(&origin, show) {
        Ok(s) => s,
        Err(e) => return (origin, Err(e.to_string())),
    };
    let Some(body) = request else {
        return (origin, Err("the request body is not JSON".into()));
    };
    let opts = RenderOptions {
        now: clock_of(started),
        profile: Some(Profile::Ollama {
            version: version.and_then(OllamaVersion::parse),
        }),
        ..Default::default()
    };
    let out = source
        .render_request_in(parsed, body, false, &opts)
        .map(|(prompt, _)| prompt)
        .map_err(|e| e.to_string());
    (origin, out)
}

impl TemplateSource {
    /// From GGUF metadata: `tokenizer.chat_template` (and `tokenizer.chat_template.<name>`),
    /// the vocabulary ([`Vocab::from_gguf`]) and BOS/EOS texts from it. A GGUF without a chat
    /// template yields an empty template (llama.cpp then falls back to chatml) — still useful as
    /// a vocabulary. Errors: a token list that cannot be turned into a vocabulary.
    pub fn from_gguf(name: &str, md: &GgufMetadata) -> Result<TemplateSource, SourceError> {
        let mut src = TemplateSource {
            origin: name.to_owned(),
            ..Default::default()
        };
        src.template = md
            .get_str("tokenizer.chat_template")
            .unwrap_or_default()
            .to_owned();
        for (k, v) in &md.kv {
            if let Some(n) = k.strip_prefix("tokenizer.chat_template.")
                && let Some(t) = v.as_str()
            {
                src.named.insert(n.to_owned(), t.to_owned());
            }
        }
        if !src.named.is_empty() && !src.template.is_empty() {
            src.named
                .entry("default".into())
                .or_insert_with(|| src.template.clone());
        }
        if md.get("tokenizer.ggml.tokens").is_some() {
            let vocab = Vocab::from_gguf(name, md).map_err(|e| err(name, e.message))?;
            src.bos_token = vocab.bos_text().map(str::to_owned);
            src.eos_token = vocab.eos_text().map(str::to_owned);
            src.vocab_flags = Some(VocabFlags {
                add_bos: vocab.add_bos,
                add_eos: md
                    .get("tokenizer.ggml.add_eos_token")
                    .and_then(|v| v.as_bool())
                    .unwrap_or(false),
            });
            src.vocab = Some(vocab);
        }
        Ok(src)
    }

    /// The template to render for `input`, as transformers picks from a named list: `tool_use`
    /// when the request passes `tools` and the source has one, else `default`, else
    /// [`Self::template`].
    pub fn select(&self, input: &RenderInput) -> &str {
        if input.tools.is_some()
            && let Some(t) = self.named.get("tool_use")
        {
            return t;
        }
        self.named
            .get("default")
            .map(String::as_str)
            .unwrap_or(&self.template)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tokenizer_config_named_list() {
        let v = json!({"chat_template": [{"name": "default", "template": "D"}, {"name": "tool_use", "template": "T"}],
                       "bos_token": {"content": "<s>", "lstrip": false}, "eos_token": "</s>"});
        let bytes = serde_json::to_vec(&v).unwrap();
        let s = TemplateSource::from_bytes("tokenizer_config.json", &bytes).unwrap();
        assert_eq!(s.template, "D");
        assert_eq!(s.bos_token.as_deref(), Some("<s>"));
        assert_eq!(s.eos_token.as_deref(), Some("</s>"));
        let with_tools = RenderInput::from_openai_request(&json!({"messages": [], "tools": []}));
        let without = RenderInput::from_openai_request(&json!({"messages": []}));
        assert_eq!(s.select(&with_tools), "T");
        assert_eq!(s.select(&without), "D");
    }

    #[test]
    fn detection() {
        assert_eq!(
            TemplateSource::from_bytes("t.jinja", b"{{ bos_token }}")
                .unwrap()
                .template,
            "{{ bos_token }}"
        );
        let e = TemplateSource::from_bytes("x.json", b"{\"a\": ").unwrap_err();
        assert!(e.message.contains("line 1"), "{e}");
        let e = TemplateSource::from_bytes("t.jinja", &[0x7b, 0xff]).unwrap_err();
        assert!(e.message.contains("byte 1"), "{e}");
        let o = TemplateSource::from_bytes(
            "show.json",
            br#"{"template": "{{ .Prompt }}", "details": {}}"#,
        )
        .unwrap();
        assert_eq!(o.format, TemplateFormat::Go);
        // a bare Go template file (Ollama's template/*.gotmpl, a Modelfile TEMPLATE saved
        // alone) is a Go template, rendered as Ollama renders it
        for name in ["chatml.gotmpl", "x.tmpl"] {
            let g =
                TemplateSource::from_bytes(name, b"{{ range .Messages }}{{ .Content }}{{ end }}")
                    .unwrap();
            assert_eq!(g.format, TemplateFormat::Go, "{name}");
            let (out, _) = g
                .render_request(
                    &serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}),
                    false,
                    &RenderOptions::default(),
                )
                .unwrap();
            assert_eq!(out, "hi");
        }
    }

    #[test]
    fn ollama_show_renders_with_the_models_system_and_date() {
        // an /api/show answer: SYSTEM prepended (routes.go ChatHandler), currentDate = the
        // exchange's date
        let show = json!({"template": "{{ range .Messages }}[{{ .Role }}:{{ .Content }}]{{ end }}{{ currentDate }}",
                          "system": "Be brief.", "details": {}});
        let req = json!({"model": "m", "messages": [{"role": "user", "content": "Hi"}]});
        let (origin, out) = ollama_exchange_render(
            &Default::default(),
            "m",
            &show,
            Some(&req),
            "2026-11-29T12:00:00Z",
            Some("0.12.3"),
        );
        assert_eq!(origin, "/api/show template, m, Ollama 0.12.3");
        assert_eq!(out.unwrap(), "[system:Be brief.][user:Hi]2026-11-29");
        assert_eq!(date_of("2025-07-07T20:22:19Z"), Some((2025, 7, 7)));
        assert_eq!(
            clock_of("2025-07-07T20:22:19+02:00").map(|t| t.date().to_string()),
            Some("2025-07-07".into())
        );
        assert_eq!(
            clock_of("2025-07-07 no time").map(|t| t.date().to_string()),
            Some("2025-07-07".into())
        );
    }

    /// The renderer follows (format, profile); a mismatch is an error naming both, never a
    /// render by the wrong engine.
    #[test]
    fn one_entry_point_picks_the_renderer() {
        let req = json!({"model": "m", "messages": [{"role": "user", "content": "Hi"}]});
        let go = TemplateSource::from_bytes(
            "t.gotmpl",
            b"{{ range .Messages }}<{{ .Content }}>{{ end }}",
        )
        .unwrap();
        let jinja = TemplateSource::from_jinja(
            "t.jinja",
            "{% for m in messages %}[{{ m.content }}]{% endfor %}",
        );
        let with = |p: &str| RenderOptions {
            profile: Some(p.parse().unwrap()),
            ..Default::default()
        };
        // Go: no profile or Ollama → the Go renderer
        assert_eq!(
            go.render_request(&req, false, &RenderOptions::default())
                .unwrap()
                .0,
            "<Hi>"
        );
        assert_eq!(
            go.render_request(&req, false, &with("ollama@0.13.5"))
                .unwrap()
                .0,
            "<Hi>"
        );
        // Jinja: no profile, transformers or llama.cpp → Jinja
        for p in ["transformers", "llama.cpp", "llama.cpp@11312"] {
            assert_eq!(
                jinja.render_request(&req, false, &with(p)).unwrap().0,
                "[Hi]",
                "{p}"
            );
        }
        // Go under a Jinja profile
        for p in ["transformers", "llama.cpp"] {
            let e = go.render_request(&req, false, &with(p)).unwrap_err();
            assert!(
                matches!(e, TemplateError::GoUnderJinjaProfile { .. }),
                "{e}"
            );
            let m = e.to_string();
            assert!(
                m.starts_with("t.gotmpl: an Ollama Go template")
                    && m.contains(&p.parse::<Profile>().unwrap().to_string()),
                "{m}"
            );
            let input = RenderInput::from_openai_request(&req);
            assert!(go.render(&input, &with(p)).is_err());
        }
        // Jinja under the Ollama profile
        let e = jinja
            .render_request(&req, false, &with("ollama"))
            .unwrap_err();
        assert!(
            matches!(e, TemplateError::JinjaUnderOllamaProfile { .. }),
            "{e}"
        );
        let m = e.to_string();
        assert!(
            m.starts_with("t.jinja: a Jinja template") && m.contains("--engine ollama"),
            "{m}"
        );
        assert!(
            jinja
                .render(
                    &RenderInput::from_openai_request(&req),
                    &with("ollama@0.12.0")
                )
                .is_err()
        );
        // an empty source
        let empty = TemplateSource::from_jinja("e.jinja", "");
        assert_eq!(
            empty
                .render_request(&req, false, &RenderOptions::default())
                .unwrap_err()
                .to_string(),
            "e.jinja: the source has no chat template"
        );
    }
}
