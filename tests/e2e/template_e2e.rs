//! End-to-end: toolscope's local renders against the real llama-server's `POST /apply-template`
//! (build 11434, SmolLM2-135M) for every corpus template the server accepts with
//! `--chat-template-file`, on the conformance scenarios. Prints the agreement rate (no
//! threshold: llama.cpp's own Jinja engine and input handling differ from transformers by
//! design) and each divergence as a `template.engine_divergence` finding.
//!
//! Also checks toolscope's SmolLM2 tokenization against the server's `/tokenize` on a rendered
//! prompt (ids must match exactly).

use crate::support;
use crate::template_support;

use serde_json::{Value, json};
use toolscope::record::client::ServerClient;
use toolscope::record::llama::{LlamaOptions, LlamaServer};
use toolscope::template::{RenderInput, RenderOptions, divergence};
use toolscope::tokens;

fn without_tokens(body: &Value) -> Value {
    let mut b = body.clone();
    if let Some(o) = b.as_object_mut() {
        o.remove("bos_token");
        o.remove("eos_token");
    }
    b
}

#[test]
#[ignore = "e2e: needs llama-server"]
fn local_renders_vs_llama_server_apply_template() {
    let Some((model, corpus)) = support::smollm2_and_corpus() else {
        return;
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut files: Vec<_> = std::fs::read_dir(&corpus)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jinja"))
        .collect();
    files.sort();
    if let Ok(only) = std::env::var("TOOLSCOPE_E2E_TEMPLATES") {
        files.retain(|f| only.split(',').any(|o| f.to_string_lossy().contains(o)));
    }
    let (mut same, mut compared, mut rejected_start, mut server_errors, mut local_errors) =
        (0, 0, 0, 0, 0);
    let mut per: std::collections::BTreeMap<&str, (usize, usize)> = Default::default();
    let mut divergences = Vec::new();
    for f in &files {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        let server = match LlamaServer::start(LlamaOptions {
            model: model.clone(),
            chat_template_file: Some(f.clone()),
            ctx: 4096,
            ..Default::default()
        }) {
            Ok(s) => s,
            Err(e) => {
                rejected_start += 1;
                println!(
                    "  server rejects {name}: {}",
                    e.to_string().lines().next().unwrap_or("")
                );
                continue;
            }
        };
        let client = ServerClient::new(&server.base_url());
        let props = rt.block_on(client.props()).unwrap();
        let bos = props.get("bos_token").and_then(Value::as_str);
        let eos = props.get("eos_token").and_then(Value::as_str);
        for (scn, body) in template_support::scenarios() {
            let body = without_tokens(&body);
            let engine = match rt.block_on(client.apply_template(&body)) {
                Ok(p) => p,
                Err(e) => {
                    server_errors += 1;
                    println!(
                        "  server error {name}#{scn}: {}",
                        e.to_string().chars().take(160).collect::<String>()
                    );
                    continue;
                }
            };
            let input = RenderInput::from_openai_request(&body).with_default_tokens(bos, eos);
            let tmpl = std::fs::read_to_string(f).unwrap();
            let local = match toolscope::template::render(
                &tmpl,
                &input,
                &RenderOptions {
                    now: Some(time::OffsetDateTime::now_utc()),
                    ..Default::default()
                },
            ) {
                Ok(p) => p,
                Err(e) => {
                    local_errors += 1;
                    println!("  local error {name}#{scn}: {e}");
                    continue;
                }
            };
            compared += 1;
            let e = per.entry(scn).or_default();
            e.1 += 1;
            match divergence::engine_divergence(&local, &engine, "llama-server") {
                None => {
                    same += 1;
                    e.0 += 1;
                }
                Some(finding) => {
                    assert_eq!(finding.rule.id(), "template.engine_divergence");
                    divergences.push(format!("{name}#{scn}: {}", finding.message));
                }
            }
        }
        drop(server);
    }
    println!(
        "llama-server /apply-template agreement: {same}/{compared} identical ({:.1}%); templates the server rejects at start: {rejected_start}; server errors: {server_errors}; local errors: {local_errors}",
        100.0 * same as f64 / compared.max(1) as f64
    );
    for (scn, (s, t)) in &per {
        println!("  {scn:16} {s}/{t}");
    }
    for d in &divergences {
        println!("  {d}");
    }
    assert!(compared > 0, "no template could be compared");
}

#[test]
#[ignore = "e2e: needs llama-server"]
fn smollm2_tokenization_matches_server() {
    let Some((model, corpus)) = support::smollm2_and_corpus() else {
        return;
    };
    let server = support::start_llama(&model, None, false, 4096);
    let client = ServerClient::new(&server.base_url());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let md = toolscope::gguf::read_metadata(std::io::BufReader::new(
        std::fs::File::open(&model).unwrap(),
    ))
    .unwrap();
    let vocab = tokens::Vocab::from_gguf("smollm2", &md).unwrap();
    let tmpl = std::fs::read_to_string(corpus.join("Qwen-Qwen3-0.6B.jinja")).unwrap();
    let (_, body) = template_support::scenarios()
        .into_iter()
        .find(|s| s.0 == "reasoning_multi")
        .unwrap();
    let prompt = toolscope::template::render(
        &tmpl,
        &RenderInput::from_openai_request(&body),
        &RenderOptions::default(),
    )
    .unwrap();
    let server_pieces = rt.block_on(client.tokenize(&prompt)).unwrap();
    let server_ids: Vec<u32> = server_pieces.iter().map(|p| p.id).collect();
    let ours: Vec<u32> = tokens::tokenize(&vocab, &prompt)
        .iter()
        .map(|t| t.id)
        .collect();
    let first = ours.iter().zip(&server_ids).position(|(a, b)| a != b);
    println!(
        "SmolLM2 tokenization: {} tokens ours, {} server, first difference at {first:?}",
        ours.len(),
        server_ids.len()
    );
    assert_eq!(ours, server_ids);
    // Pseudo-special markers agree whichever tokenization is used.
    let f_ours = tokens::pseudo_special(&prompt, &tokens::tokenize(&vocab, &prompt));
    let f_server = tokens::pseudo_special(
        &prompt,
        &tokens::tokens_from_pieces(&prompt, &server_pieces),
    );
    let ex = |f: &[toolscope::Finding]| {
        f.iter()
            .map(|x| x.evidence.excerpt.clone().unwrap_or_default())
            .collect::<Vec<_>>()
    };
    assert_eq!(ex(&f_ours), ex(&f_server));
    assert!(ex(&f_server).contains(&"<tool_call>".to_owned()));
    let _ = json!(null);
}
