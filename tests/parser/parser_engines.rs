//! `parser::engines::expected` and `toolscope parse --engines`: what llama.cpp, vLLM and SGLang's
//! parsers for a family return for one text. Expected values written by hand from the engines'
//! documented behaviour (module doc of src/parser/engines.rs: llama.cpp common/chat.cpp throws
//! "does not match the expected … format" → HTTP 500; vLLM tool parsers return the output as
//! content; SGLang detectors keep it as normal_text).

use crate::support;

use std::process::Command;

use serde_json::json;
use toolscope::parser::Syntax;
use toolscope::parser::engines::{Engine, Outcome, expected};

#[test]
fn a_clean_call_reads_the_same_everywhere() {
    let text = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
    let (ours, list) = expected(Syntax::Hermes, text, None);
    assert_eq!(ours.tool_calls.len(), 1);
    assert_eq!(list.len(), 3);
    for e in &list {
        match &e.outcome {
            Outcome::Calls { tool_calls, .. } => {
                assert_eq!(tool_calls[0].name, "get_weather");
                assert_eq!(tool_calls[0].arguments, json!({"city": "Paris"}));
            }
            other => panic!("{:?}: {other:?}", e.engine),
        }
    }
    assert_eq!(list[1].parser, Some("hermes"));
}

#[test]
fn a_drifted_call_is_a_500_in_llama_cpp_and_content_elsewhere() {
    // `parameters` for `arguments`: toolscope repairs it; the engines' parsers do not
    let text = "<tool_call>\n{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}\n</tool_call>";
    let (ours, list) = expected(Syntax::Hermes, text, None);
    assert_eq!(ours.tool_calls.len(), 1, "toolscope reads it");
    assert_eq!(ours.repairs[0].kind, "parameters_for_arguments");
    let by = |e: Engine| list.iter().find(|x| x.engine == e).unwrap();
    assert!(matches!(
        by(Engine::LlamaCpp).outcome,
        Outcome::Error { status: 500, .. }
    ));
    for e in [Engine::Vllm, Engine::Sglang] {
        assert_eq!(
            by(e).outcome,
            Outcome::Content {
                content: text.to_string()
            },
            "{e:?}"
        );
    }
}

#[test]
fn a_family_without_a_parser_comes_back_as_content() {
    // FunctionGemma: vLLM has functiongemma_tool_parser.py, llama.cpp and SGLang have none
    let text =
        "<start_function_call>call:get_weather{city:<escape>Paris<escape>}<end_function_call>";
    let (ours, list) = expected(Syntax::FunctionGemma, text, None);
    assert_eq!(ours.tool_calls[0].arguments, json!({"city": "Paris"}));
    assert!(
        matches!(list[0].outcome, Outcome::Content { .. }),
        "{:?}",
        list[0]
    );
    assert!(
        matches!(list[1].outcome, Outcome::Calls { .. }),
        "{:?}",
        list[1]
    );
    assert!(
        matches!(list[2].outcome, Outcome::Content { .. }),
        "{:?}",
        list[2]
    );
}

#[test]
fn every_family_names_its_engine_parsers() {
    // the table has a row for every syntax; prompt-emulated formats have no engine parser
    for s in Syntax::ALL {
        let p = toolscope::parser::engines::parsers(*s);
        if matches!(s, Syntax::FunctionCall | Syntax::ToolCallFence) {
            assert_eq!(p, [None, None, None]);
        }
    }
    assert_eq!(
        toolscope::parser::engines::parsers(Syntax::Glm45)[1],
        Some("glm45")
    );
}

#[test]
fn parse_engines_prints_each_engine() {
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("raw.txt");
    std::fs::write(
        &raw,
        "<tool_call>\n{\"name\": \"f\", \"parameters\": {}}\n</tool_call>",
    )
    .unwrap();
    let o = Command::new(support::bin())
        .args(["parse", "--syntax", "hermes", "--engines"])
        .arg(&raw)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("what each engine would return"), "{out}");
    assert!(
        out.contains("llama.cpp") && out.contains("HTTP 500"),
        "{out}"
    );
    assert!(
        out.contains("vLLM") && out.contains("content only"),
        "{out}"
    );
    // JSON carries the same outcomes
    let o = Command::new(support::bin())
        .args([
            "parse",
            "--syntax",
            "hermes",
            "--engines",
            "--format",
            "json",
        ])
        .arg(&raw)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["engines"]["family"], "hermes");
    assert_eq!(v["engines"]["outcomes"][0]["outcome"]["kind"], "error");
    assert_eq!(v["engines"]["outcomes"][1]["outcome"]["kind"], "content");
}

/// llama.cpp's 500 names its chat format, not the family: `peg-native` for the auto parser and
/// most dedicated ones, `peg-gemma4` and `peg-minimax-m3` for their own formats
/// (common/chat.cpp `common_chat_format_name`, build 11434; the shipped
/// sessions/e-http500-peg-native.jsonl has the real server's "…expected peg-native format" for a
/// Qwen3 `<tool_call>` template).
#[test]
fn llama_cpp_error_names_the_chat_format() {
    let cases = [
        (
            Syntax::Hermes,
            "<tool_call>\n{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}\n</tool_call>",
            "peg-native",
        ),
        (
            Syntax::Gemma4,
            "<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>}",
            "peg-gemma4",
        ),
    ];
    for (family, text, format) in cases {
        let (_, list) = expected(family, text, None);
        let want =
            format!("The model produced output that does not match the expected {format} format");
        assert_eq!(
            list[0].outcome,
            Outcome::Error {
                status: 500,
                message: want
            },
            "{family}"
        );
    }
}
