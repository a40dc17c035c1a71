//! The inspector's Template pane on the shipped sessions (`sessions/*.jsonl`, recorded from
//! llama-server b11434): its model is built by the function the inspector calls
//! (`analysis::analyse(…, Depth::Panes).template`), whose local render is the session's `/props`
//! template under the profile the session's engine implies (llama.cpp@11434). Its diff against
//! the render the server itself reported for the exchange (`server_render` annotation:
//! llama-server's `/apply-template` on the recorded request) must have no differing row — the
//! pane's "differs from the server render" count is 0 — on every exchange whose template the
//! server accepted. The expected side is the real server's output, recorded in the session.

use std::path::Path;

use serde_json::Value;
use toolscope::diff::RowKind;
use toolscope::session::{Annotation, Api, read_session};
use toolscope::template::{Profile, RenderInput, RenderOptions, TemplateSource, divergence};

fn local_render(
    source: &TemplateSource,
    ex: &toolscope::session::Exchange,
    body: &Value,
) -> Result<String, String> {
    let input = match ex.api() {
        Api::Anthropic => RenderInput::from_anthropic_request(body),
        _ => RenderInput::from_openai_request(body),
    };
    let now =
        time::OffsetDateTime::parse(&ex.started, &time::format_description::well_known::Rfc3339)
            .ok();
    source
        .render(
            &input,
            &RenderOptions {
                now,
                ..Default::default()
            },
        )
        .map_err(|e| e.to_string())
}

#[test]
fn template_pane_agrees_with_the_server_render_on_every_shipped_session() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("sessions");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    let (mut compared, mut differing) = (0usize, Vec::new());
    for f in &files {
        let s = read_session(f).unwrap();
        let Some(props) = s.header.props.as_ref() else {
            continue;
        };
        let source = TemplateSource::from_props(props).unwrap();
        let engine = s.header.engine.as_ref();
        assert_eq!(
            source.profile,
            Some(engine.map(Profile::for_server).unwrap_or_default()),
            "{}: the pane renders under the recorded engine's profile",
            f.display()
        );
        for ex in &s.exchanges {
            let anns = s.annotations.get(&ex.id).map(Vec::as_slice).unwrap_or(&[]);
            // the Template pane's model, exactly as the inspector builds it
            let a = toolscope::analysis::analyse(
                ex.clone(),
                toolscope::analysis::Context {
                    header: &s.header,
                    annotations: anns,
                },
                toolscope::analysis::Depth::Panes,
            );
            let t = &a.template;
            let Some(server) = t.server.as_deref() else {
                continue;
            };
            // the server accepted the template for this request
            if !matches!(ex.api(), Api::Openai | Api::Anthropic) {
                continue;
            }
            compared += 1;
            match &t.local {
                Some(Ok(local)) => {
                    // the pane's "differs from the server render" count: non-equal diff rows
                    let rows = t.diff.as_deref().unwrap_or(&[]);
                    let changed = rows
                        .iter()
                        .filter(|r| !matches!(r.kind, RowKind::Equal | RowKind::Fold))
                        .count();
                    if changed > 0 || local != server {
                        let d = divergence::engine_divergence(local, server, "llama-server")
                            .map(|d| d.message)
                            .unwrap_or_default();
                        differing.push(format!(
                            "{}#{}: {changed} differing rows; {d}",
                            f.display(),
                            ex.id
                        ));
                    }
                }
                other => differing.push(format!(
                    "{}#{}: no local render: {other:?}",
                    f.display(),
                    ex.id
                )),
            }
        }
    }
    println!(
        "Template pane vs server render: {compared} exchanges, {} differ",
        differing.len()
    );
    assert!(
        compared >= 8,
        "the shipped sessions carry server renders ({compared})"
    );
    assert!(differing.is_empty(), "{differing:#?}");
}

/// The same exchanges under the transformers profile differ from the server (the measurement
/// this profile exists for): at least one shipped exchange renders differently, so the test
/// above cannot pass by accident of the profiles being equal.
#[test]
fn transformers_profile_differs_somewhere_on_the_shipped_sessions() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("sessions");
    let mut differs = 0;
    for e in std::fs::read_dir(&dir).unwrap().filter_map(|e| e.ok()) {
        let p = e.path();
        if p.extension().is_none_or(|x| x != "jsonl") {
            continue;
        }
        let s = read_session(&p).unwrap();
        let Some(props) = s.header.props.as_ref() else {
            continue;
        };
        let mut source = TemplateSource::from_props(props).unwrap();
        source.profile = Some(Profile::Transformers);
        for ex in &s.exchanges {
            let anns = s.annotations.get(&ex.id).map(Vec::as_slice).unwrap_or(&[]);
            if let (Some((Some(server), _)), Some(body)) =
                (Annotation::latest_server_render(anns), ex.request_json())
                && local_render(&source, ex, &body).ok().as_deref() != Some(server)
            {
                differs += 1;
            }
        }
    }
    assert!(differs > 0);
}

/// The generation prompt llama.cpp parses in front of the reply
/// (`analysis::template::llama_prompt`, what the Replay pane's engines view gives llama.cpp),
/// derived without the recorded one: on every shipped exchange whose `/slots` annotation
/// recorded llama-server's own `params.generation_prompt` (the real server's, prefilled
/// `<think>\n` exchanges included), the one read from the server's render after toolscope's
/// render of the closed messages, and toolscope's own render under the llama.cpp profile alone
/// (gen-prompt render minus no-gen-prompt render, a prefill continued), are that prompt.
#[test]
fn derived_generation_prompts_are_the_ones_llama_server_recorded() {
    use toolscope::analysis::template::llama_prompt;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("sessions");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    let (mut checked, mut prefilled) = (Vec::new(), 0);
    for f in &files {
        let s = read_session(f).unwrap();
        let Some(props) = s.header.props.as_ref() else {
            continue;
        };
        let source = TemplateSource::from_props(props).unwrap();
        for ex in &s.exchanges {
            let anns = s.annotations.get(&ex.id).cloned().unwrap_or_default();
            let Some(recorded) = anns.iter().rev().find_map(|a| match a {
                Annotation::RawText {
                    text: Some(_),
                    generation_prompt: Some(p),
                    ..
                } if !p.is_empty() => Some(p.clone()),
                _ => None,
            }) else {
                continue;
            };
            let id = format!("{}#{}", f.file_name().unwrap().to_string_lossy(), ex.id);
            let req = ex.request_json();
            let raw = toolscope::stream::raw::raw_output(ex, &anns);
            let server = toolscope::analysis::server_render(ex, &anns).and_then(|r| r.prompt);
            let p = llama_prompt(ex, req.as_ref(), &raw, &anns, None, Some(&source)).unwrap();
            assert_eq!(p.source, "llama-server /slots", "{id}");
            assert_eq!(p.text, recorded, "{id}: recorded");
            // without the recorded prompt: the slots text kept as a verbose one would be
            let others: Vec<Annotation> = anns
                .iter()
                .filter(|a| !matches!(a, Annotation::RawText { .. }))
                .cloned()
                .collect();
            let text = raw.models_text().unwrap().to_owned();
            let prefill = match &raw {
                toolscope::stream::raw::RawOutput::Text { prefill, .. } => prefill.clone(),
                _ => unreachable!(),
            };
            let bare = toolscope::stream::raw::RawOutput::Text {
                text,
                source: toolscope::stream::raw::RawSource::Verbose,
                pieces: None,
                prefill: prefill.clone(),
            };
            let local = llama_prompt(ex, req.as_ref(), &bare, &others, None, Some(&source))
                .unwrap_or_else(|| panic!("{id}: no local render"));
            assert_eq!(local.source, "local render (llama.cpp@11434)", "{id}");
            assert_eq!(local.text, recorded, "{id}: local render");
            if let Some(sp) = server.as_deref() {
                let from_server =
                    llama_prompt(ex, req.as_ref(), &bare, &others, Some(sp), Some(&source))
                        .unwrap();
                assert_eq!(from_server.source, "server render", "{id}");
                assert_eq!(from_server.text, recorded, "{id}: server render");
            }
            prefilled += usize::from(!prefill.is_empty());
            checked.push(id);
        }
    }
    eprintln!("generation prompts derived as recorded: {checked:?}");
    assert!(checked.len() >= 10, "{checked:?}");
    // the three prefilled `<think>\n` exchanges and the prefilled HTTP 500 one
    assert!(prefilled >= 4, "{prefilled} prefilled");
}
