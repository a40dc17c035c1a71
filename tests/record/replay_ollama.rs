//! Ollama's native API on the session made from Ollama's documentation
//! (tests/data/replay/ollama-docs.jsonl, scripts/ollama-docs-session.py): every stream decodes
//! to the documented objects, and `check` reports the call left in content.

use std::path::Path;

use toolscope::analysis::{Context, Depth, analyse};
use toolscope::session::{Api, read_session};
use toolscope::stream::decode_exchange;

fn session() -> toolscope::session::read::Session {
    read_session(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/replay/ollama-docs.jsonl"))
        .unwrap()
}

#[test]
fn every_ollama_exchange_decodes_to_the_documented_objects() {
    let s = session();
    let d = |id| decode_exchange(s.exchange(id).unwrap()).unwrap();
    assert_eq!(s.exchange(1).unwrap().api(), Api::Ollama);
    // docs/api.md "Chat request (Streaming with tools)"
    let r = d(1);
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    let m = &r.message;
    assert_eq!(m.tool_calls.len(), 1);
    assert_eq!(
        (
            m.tool_calls[0].name.as_str(),
            m.tool_calls[0].arguments.as_str()
        ),
        ("get_weather", r#"{"city":"Tokyo"}"#)
    );
    assert_eq!(m.finish_reason.as_deref(), Some("stop"));
    assert_eq!(m.usage.as_ref().unwrap()["prompt_eval_count"], 169);
    assert_eq!(r.events.len(), 2);
    // thinking stream
    let r = d(2);
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    assert_eq!(
        r.message.reasoning,
        "The user asks how many r's are in strawberry: s-t-r-a-w-b-e-r-r-y."
    );
    assert_eq!(
        r.message.content,
        "There are **3** letter r's in strawberry."
    );
    // raw generate, not streamed
    let r = d(3);
    assert_eq!(
        r.message.content,
        " The sky appears blue because of a phenomenon called Rayleigh scattering."
    );
    assert_eq!(r.message.finish_reason.as_deref(), Some("stop"));
    // the call left in content
    let r = d(4);
    assert!(r.message.tool_calls.is_empty());
    assert!(
        r.message
            .content
            .starts_with("<tool_call>\n{\"name\": \"get_weather\"")
    );
    // /api/show is not a generation
    assert!(decode_exchange(s.exchange(5).unwrap()).is_none());
}

#[test]
fn check_reports_the_call_left_in_content_and_accepts_stop_with_calls() {
    let s = session();
    assert!(s.warnings.is_empty());
    let analysed: Vec<_> = s
        .exchanges
        .iter()
        .filter(|e| e.api().is_generation())
        .map(|e| {
            let annotations = s.annotations.get(&e.id).map_or(&[][..], Vec::as_slice);
            let ctx = Context {
                header: &s.header,
                annotations,
            };
            analyse(e.clone(), ctx, Depth::Findings)
        })
        .collect();
    assert_eq!(analysed.len(), 4, "chat ×3 and generate, not /api/show");
    let by_id = |id: u64| {
        let a = analysed.iter().find(|a| a.exchange.id == id).unwrap();
        let mut ids: Vec<&str> = a.findings.iter().map(|f| f.rule.id()).collect();
        ids.dedup();
        ids
    };
    assert_eq!(
        by_id(1),
        Vec::<&str>::new(),
        "done_reason stop with calls is Ollama's contract"
    );
    assert_eq!(by_id(2), Vec::<&str>::new());
    assert_eq!(by_id(4), vec!["tool_call.leaked_as_text"]);
}

/// The Template pane of an Ollama exchange renders its request through the `/api/show`
/// template recorded for it (the docs/template.mdx Mistral tools template), as Ollama's
/// template.go `Execute` does. Expected text derived by hand from that template: one user
/// message with tools → `[AVAILABLE_TOOLS] <json.Marshal of the tools>[/AVAILABLE_TOOLS]`, then
/// `[INST] content[/INST]`; Go's json.Marshal keeps templateTool's field order (type,
/// function{name, description, parameters{type, required, properties}}).
#[test]
fn template_pane_renders_the_api_show_template() {
    let s = session();
    let ex = s.exchange(1).unwrap().clone();
    let annotations = s.annotations.get(&1).map_or(&[][..], Vec::as_slice);
    assert!(
        !annotations.is_empty(),
        "the docs session carries /api/show for exchange 1"
    );
    let a = analyse(
        ex,
        Context {
            header: &s.header,
            annotations,
        },
        Depth::Panes,
    );
    assert_eq!(
        a.template.local_source.as_deref(),
        Some("/api/show template, llama3.2")
    );
    let want = concat!(
        r#"[AVAILABLE_TOOLS] [{"type":"function","function":{"name":"get_weather","description":"Get the weather in a given city","#,
        r#""parameters":{"type":"object","required":["city"],"properties":{"city":{"type":"string","description":"The city to get the weather for"}}}}}]"#,
        "[/AVAILABLE_TOOLS][INST] what is the weather in tokyo?[/INST]"
    );
    assert_eq!(a.template.local, Some(Ok(want.to_owned())));
    // no annotation (the thinking chat): no Ollama render, and no error either
    let ex2 = s.exchange(2).unwrap().clone();
    let a2 = analyse(
        ex2,
        Context {
            header: &s.header,
            annotations: &[],
        },
        Depth::Panes,
    );
    assert_eq!(a2.template.local, None);
}
