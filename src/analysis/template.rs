//! The Template pane's model: the server's render of an exchange, toolscope's own render of
//! the same request, and their difference. Pure.

use serde_json::Value;

use crate::parser::engines::LlamaPrompt;
use crate::session::{Api, Exchange, Header, TokenPiece};

use super::ServerRender;

/// The Template pane's model.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TemplateView {
    /// toolscope's own render of the request ([`crate::template::TemplateSource::render`]: the session's
    /// `/props` `chat_template`, the request's messages and tools, `now` = the exchange's start
    /// time), or why it failed (`None`: the header has no `/props` template).
    pub local: Option<Result<String, String>>,
    /// Where the local render's template came from (`/props chat_template, MODEL FILE`).
    pub local_source: Option<String>,
    /// Local render (left, A) against the server's (right, B), line by line with token
    /// changes inside ([`crate::diff::side_by_side`]); `None` unless both renders exist.
    pub diff: Option<Vec<crate::diff::Row>>,
    /// llama-server's render (`/apply-template` annotation or `__verbose.prompt`).
    pub server: Option<String>,
    /// Where `server` came from.
    pub server_source: Option<String>,
    /// The server's tokenization of its render.
    pub tokens: Option<Vec<TokenPiece>>,
    /// Marker strings that are single special tokens (highlighted).
    pub specials: Vec<String>,
    /// Marker-looking strings (`<tool_call>`) that the vocabulary splits into several pieces.
    pub pseudo_specials: Vec<String>,
    /// BOS token text (props `bos_token`).
    pub bos_token: Option<String>,
    /// Number of BOS tokens at the start of the tokenization (2+ is a doubled BOS).
    pub bos_count: Option<usize>,
}

/// toolscope's render of `request` with the session's `/props` template, as
/// `toolscope render --template /props` does (OpenAI body, or Anthropic / Responses converted as
/// llama-server build 11434 converts them, tools/server/server-chat.cpp). `strftime_now` reads
/// the exchange's recorded start time, so a render is reproducible and matches the server's
/// date. Returns (origin, render or error); `None` without a `/props` `chat_template`.
fn local_render(
    ex: &Exchange,
    request: Option<&Value>,
    header: &Header,
) -> Option<(String, Result<String, String>)> {
    use crate::template::{RenderOptions, TemplateSource};
    let source = TemplateSource::from_props(header.props.as_ref()?).ok()?;
    let Some(body) = request else {
        return Some((source.origin, Err("the request body is not JSON".into())));
    };
    let input = match render_input(ex, body) {
        Ok(i) => i,
        Err(e) => return Some((source.origin, Err(e))),
    };
    let opts = RenderOptions {
        now: started(ex),
        ..Default::default()
    };
    let out = source.render(&input, &opts).map_err(|e| e.to_string());
    let model = header
        .props
        .as_ref()
        .and_then(|p| p.get("model_path"))
        .and_then(Value::as_str)
        .map(|p| p.rsplit(['/', '\\']).next().unwrap_or(p).to_owned());
    let origin = match model {
        Some(m) => format!("/props chat_template, {m}"),
        None => "/props chat_template".to_owned(),
    };
    Some((origin, out))
}

/// `body` as the chat request llama-server renders: OpenAI, or Anthropic / Responses converted
/// as llama-server build 11434 converts them. Errors: a Responses body it refuses (HTTP 400).
fn render_input(ex: &Exchange, body: &Value) -> Result<crate::template::RenderInput, String> {
    use crate::template::RenderInput;
    Ok(match ex.api() {
        Api::Anthropic => RenderInput::from_anthropic_request(body),
        // llama-server converts a Responses body to a chat body first; a body it refuses
        // (HTTP 400) has no render
        Api::Responses => match crate::template::responses::responses_to_chat(body) {
            Ok(c) => RenderInput::from_openai_request(&c.body),
            Err(e) => {
                return Err(format!(
                    "llama-server refuses this Responses request (HTTP 400, tools/server/server-chat.cpp:{}, b11434): {e}",
                    e.kind.source_line()
                ));
            }
        },
        _ => RenderInput::from_openai_request(body),
    })
}

/// The exchange's recorded start time: the clock `strftime_now` reads in a render.
fn started(ex: &Exchange) -> Option<time::OffsetDateTime> {
    time::OffsetDateTime::parse(&ex.started, &time::format_description::well_known::Rfc3339).ok()
}

/// The generation prompt llama.cpp parses in front of `ex`'s reply, the assistant prefill
/// included ([`LlamaPrompt`]; for [`crate::parser::engines::expected_with`]), when the raw text
/// is known (`raw`), from the first source that has it:
///
/// 1. recorded: the `/slots` `params.generation_prompt` of the slot the raw text was read from
///    (the `raw_text` annotation, [`crate::stream::raw::recorded_generation_prompt`]);
/// 2. the server's render (`server_prompt`, `/apply-template` or `__verbose.prompt`, which ends
///    with it) after toolscope's render of the closed messages, when the server's starts with
///    that;
/// 3. toolscope's own render of the request with `template` (the session's `/props` one, or
///    `check --template`) under the llama.cpp profile
///    ([`crate::template::TemplateSource::generation_prompt`]: with minus without
///    `add_generation_prompt`, a prefill continued).
///
/// `None` otherwise (the family's corpus prompt is then used). Pure: renders only.
pub fn llama_prompt(
    ex: &Exchange,
    request: Option<&Value>,
    raw: &crate::stream::raw::RawOutput,
    annotations: &[crate::session::Annotation],
    server_prompt: Option<&str>,
    template: Option<&crate::template::TemplateSource>,
) -> Option<LlamaPrompt> {
    use crate::stream::raw::RawOutput;
    let RawOutput::Text { prefill, .. } = raw else {
        return None;
    };
    raw.models_text()?;
    let prompt = |text: String, source: String| LlamaPrompt {
        text,
        prefill: prefill.clone(),
        source,
    };
    if let Some(p) = crate::stream::raw::recorded_generation_prompt(raw, annotations) {
        return Some(prompt(p, "llama-server /slots".into()));
    }
    if !matches!(ex.api(), Api::Openai | Api::Anthropic | Api::Responses) {
        return None;
    }
    let source = template?;
    let input = render_input(ex, request?).ok()?;
    let opts = crate::template::RenderOptions {
        now: started(ex),
        profile: Some(
            source
                .profile
                .unwrap_or(crate::template::Profile::LLAMA_CPP),
        ),
        ..Default::default()
    };
    let (closed, local) = source.generation_prompt(&input, &opts)?.ok()?;
    let bos = source.bos_token.as_deref().unwrap_or("");
    let server = server_prompt.and_then(|s| {
        s.strip_prefix(closed.as_str())
            .or_else(|| s.strip_prefix(bos)?.strip_prefix(closed.as_str()))
    });
    Some(match server {
        Some(g) if !closed.is_empty() => prompt(g.to_owned(), "server render".into()),
        _ => prompt(
            local,
            format!("local render ({})", opts.profile.unwrap_or_default()),
        ),
    })
}

/// An Ollama exchange's render (`/api/chat`, non-raw `/api/generate`) from its `/api/show`
/// annotation ([`crate::template::source::ollama_exchange_render`]): `(origin, render or
/// error)`; `None` for other exchanges or without the annotation.
pub fn ollama_render(
    ex: &Exchange,
    request: Option<&Value>,
    header: &Header,
    annotations: &[crate::session::Annotation],
    parsed: &crate::template::ollama::ParsedTemplates,
) -> Option<(String, Result<String, String>)> {
    let path = ex.request.path.split('?').next().unwrap_or_default();
    if !(path.ends_with("/api/chat") || path.ends_with("/api/generate"))
        || request.and_then(|r| r.get("raw")).and_then(Value::as_bool) == Some(true)
    {
        return None;
    }
    let (model, show) = crate::session::Annotation::latest_ollama_show(annotations)?;
    Some(crate::template::source::ollama_exchange_render(
        parsed,
        model,
        show,
        request,
        &ex.started,
        header
            .engine
            .as_ref()
            .filter(|e| e.kind == crate::session::ServerKind::Ollama)
            .and_then(|e| e.version.as_deref()),
    ))
}

/// The Template pane's model: the server's render ([`ServerRender`]) with its special and
/// pseudo-special markers and BOS count, toolscope's local render, and their line diff.
pub fn template_view(
    ex: &Exchange,
    request: Option<&Value>,
    header: &Header,
    server: Option<&ServerRender>,
) -> TemplateView {
    let props = header.props.as_ref();
    let bos_token = props
        .and_then(|p| p.get("bos_token"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let mut v = TemplateView {
        bos_token: bos_token.clone(),
        ..Default::default()
    };
    if let Some(r) = server {
        v.server = r.prompt.clone();
        v.server_source = r.prompt.as_ref().map(|_| r.source.to_owned());
        v.tokens = r.tokens.clone();
    }
    if let Some(tokens) = &v.tokens {
        let text = |t: &TokenPiece| String::from_utf8_lossy(t.piece.as_bytes()).into_owned();
        // Single-token markers.
        let mut specials: Vec<String> = tokens.iter().map(text).filter(|p| is_marker(p)).collect();
        specials.sort();
        specials.dedup();
        // Markers written as several ordinary pieces: the same rule as `token.pseudo_special`
        // (crate::tokens::pseudo_special), over the server's prompt and its pieces.
        let pseudo: Vec<String> = v
            .server
            .as_deref()
            .map(|prompt| {
                let toks = crate::tokens::tokens_from_pieces(prompt, tokens);
                crate::tokens::pseudo_special(prompt, &toks)
                    .into_iter()
                    .filter_map(|f| f.evidence.excerpt)
                    .collect()
            })
            .unwrap_or_default();
        v.specials = specials;
        v.pseudo_specials = pseudo;
        if let Some(bos) = &bos_token {
            v.bos_count = Some(tokens.iter().take_while(|t| text(t) == *bos).count());
        }
    } else if let (Some(p), Some(bos)) = (&v.server, &bos_token) {
        let mut n = 0;
        let mut rest = p.as_str();
        while let Some(r) = rest.strip_prefix(bos.as_str()) {
            n += 1;
            rest = r;
        }
        v.bos_count = Some(n);
    }
    if matches!(ex.api(), Api::Openai | Api::Anthropic | Api::Responses)
        && let Some((origin, out)) = local_render(ex, request, header)
    {
        v.local_source = Some(origin);
        v.local = Some(out);
    }
    if let (Some(Ok(local)), Some(server)) = (&v.local, &v.server) {
        v.diff = Some(crate::diff::side_by_side(
            local,
            server,
            crate::diff::ViewOptions::default(),
        ));
    }
    v
}

/// `<…>` or `<|…|>` with no whitespace inside, 3..=40 bytes.
fn is_marker(s: &str) -> bool {
    s.len() >= 3
        && s.len() <= 40
        && s.starts_with('<')
        && s.ends_with('>')
        && !s[1..s.len() - 1].contains(['<', '>', ' ', '\n'])
}
