//! The shipped sessions' (sessions/*.jsonl) Replay `e` views, as the inspector builds them: each
//! exchange analysed as the panes analyse it ([`toolscope::analysis::analyse`] at
//! [`Depth::Panes`](toolscope::analysis::Depth::Panes)), and the verdicts the view shows
//! ([`toolscope::tui::screen::engines::verdicts`]) for every exchange with raw model text and a
//! call family. The engines' checks (tests/e2e/engines_real.rs, engines_llama.rs,
//! engines_dynamo.rs) run each engine's own parser code on the same text and request.

use crate::support;

use serde_json::Value;
use toolscope::stream::raw::RawOutput;
use toolscope::tui::screen::engines::{Verdicts, verdicts};

/// One exchange's view.
pub struct View {
    /// `FILE#ID`.
    pub id: String,
    /// The chat template the session's server ran with (`/props` `chat_template`), if recorded.
    pub template: Option<String>,
    /// The request as the OpenAI chat body the engine parses it for (a `/v1/messages` body
    /// converted as llama-server converts it, [`toolscope::template::input::anthropic_to_openai`]).
    pub request: Value,
    /// The request's tools in the OpenAI shape (`[]` when it has none).
    pub tools: Value,
    /// The raw model text the view gives the engines' parsers: the request's assistant prefill
    /// (if any) followed by what the model generated.
    pub text: String,
    /// What the model generated (`text` without the prefill): what llama-server's parser is
    /// given after the generation prompt, which holds the prefill.
    pub generated: String,
    pub verdicts: Verdicts,
}

/// Every shipped exchange with raw text and a call family, in file and exchange order.
pub fn views() -> Vec<View> {
    let mut sessions: Vec<_> = std::fs::read_dir(support::root().join("sessions"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    sessions.sort();
    let mut out = Vec::new();
    for path in &sessions {
        let s = toolscope::session::read_session(path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let template = s
            .header
            .props
            .as_ref()
            .and_then(|p| p["chat_template"].as_str())
            .map(str::to_owned);
        for ex in &s.exchanges {
            let anns = s.annotations.get(&ex.id).map(Vec::as_slice).unwrap_or(&[]);
            let a = toolscope::analysis::analyse(
                ex.clone(),
                toolscope::analysis::Context {
                    header: &s.header,
                    annotations: anns,
                },
                toolscope::analysis::Depth::Panes,
            );
            let Some(text) = a.raw.as_ref().and_then(|r| r.models_text()) else {
                continue;
            };
            let id = format!("{name}#{}", ex.id);
            // the view replays the raw text
            assert_eq!(a.replay.text(), text, "{id}: the view's text");
            let Some(v) = verdicts(&a) else { continue };
            let prefill = match &a.raw {
                Some(RawOutput::Text { prefill, .. }) => prefill.as_str(),
                _ => "",
            };
            let generated = text.strip_prefix(prefill).unwrap_or_else(|| {
                panic!("{id}: the raw text does not start with the prefill {prefill:?}")
            });
            let body = a.request.clone().unwrap_or(Value::Null);
            let request = if ex.request.path.starts_with("/v1/messages") {
                toolscope::template::input::anthropic_to_openai(&body)
            } else {
                body
            };
            let tools = match request.get("tools") {
                Some(t @ Value::Array(_)) => t.clone(),
                _ => Value::Array(Vec::new()),
            };
            out.push(View {
                id,
                template: template.clone(),
                request,
                tools,
                text: text.to_owned(),
                generated: generated.to_owned(),
                verdicts: v,
            });
        }
    }
    assert!(
        !out.is_empty(),
        "no shipped session has raw text with a call family"
    );
    out
}
