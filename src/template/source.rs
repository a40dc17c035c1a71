//! Where a chat template comes from: a `.jinja` file, a HF `tokenizer_config.json` (or
//! `chat_template.json`), GGUF metadata, llama-server `GET /props`, or Ollama `POST /api/show`
//! (a Go `text/template`, rendered as Ollama renders it by [`super::gotmpl`]). Pure: the CLI
//! layer reads files and fetches URLs.

use std::collections::BTreeMap;

use serde_json::Value;

use super::input::RenderInput;
use super::llama::VocabFlags;
use super::ollama::OllamaModel;
use super::profile::Profile;
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
    /// bodies by [`super::ollama::render_ollama_with`] ([`TemplateSource::render_ollama`]).
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
    /// The engine that serves this template, when the source says (llama-server `/props`:
    /// the llama.cpp profile at its `build_info`); renders default to it.
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
    /// [`Self::ollama`]. Render it with [`Self::render_ollama`]. Errors: no `template`
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

    /// Renders an Ollama request body (`/api/chat`, or a non-raw `/api/generate`) through this
    /// Go template as Ollama's server builds its prompt (ollama/ollama template/template.go
    /// `Execute`, server/prompt.go `chatPrompt`; see [`super::ollama`]). `today` is the
    /// date `currentDate` returns (the exchange's date; `None`: calling it is an error).
    /// Errors: a Jinja source (`Parse`, naming the origin), or the Go template's own error
    /// (`template: :LINE:COL: …`).
    pub fn render_ollama(
        &self,
        request: &Value,
        today: Option<Date>,
    ) -> Result<String, GoTemplateError> {
        self.render_ollama_in(&super::ollama::ParsedTemplates::default(), request, today)
    }

    /// [`Self::render_ollama`], the parsed template taken from (and kept in) `parsed`.
    pub fn render_ollama_in(
        &self,
        parsed: &super::ollama::ParsedTemplates,
        request: &Value,
        today: Option<Date>,
    ) -> Result<String, GoTemplateError> {
        if self.format != TemplateFormat::Go {
            return Err(GoTemplateError {
                kind: crate::gotmpl::ErrorKind::Parse,
                name: self.origin.clone(),
                line: 0,
                col: None,
                context: None,
                message: "a Jinja template, not an Ollama Go template".into(),
            });
        }
        let opts = ExecOptions {
            today,
            ..Default::default()
        };
        let model = self.ollama.clone().unwrap_or_default();
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

/// An Ollama exchange's render from its `/api/show` annotation (`model`, the trimmed answer):
/// `(origin, render or error)`, the request rendered as [`TemplateSource::render_ollama`] with
/// `currentDate` = the date of `started` (RFC 3339), as the Ollama `version` (the session's
/// `/api/version`, when known) renders it ([`OllamaModel::set_version`]), the parsed template
/// kept in `parsed`. The one place the Template pane and `check` get an Ollama prompt from.
pub fn ollama_exchange_render(
    parsed: &super::ollama::ParsedTemplates,
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
    let mut source = match TemplateSource::from_ollama_show(&origin, show) {
        Ok(s) => s,
        Err(e) => return (origin, Err(e.to_string())),
    };
    if let (Some(m), Some(v)) = (source.ollama.as_mut(), version) {
        m.set_version(v);
    }
    let Some(body) = request else {
        return (origin, Err("the request body is not JSON".into()));
    };
    let out = source
        .render_ollama_in(parsed, body, date_of(started))
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
            let out = g
                .render_ollama(
                    &serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}),
                    None,
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
        let jinja = TemplateSource::from_jinja("t.jinja", "{{ x }}");
        assert!(jinja.render_ollama(&req, None).is_err());
        assert_eq!(date_of("2025-07-07T20:22:19Z"), Some((2025, 7, 7)));
    }
}
