//! Syntax detection from the corpus templates (llama.cpp models/templates, build 11434) and
//! from raw text; syntax names round-trip.

use crate::support;

use toolscope::parser::Syntax;

/// Every template of the llama.cpp corpus (build 11434) and the syntax it implies, by hand from
/// the template's tool-call rendering (and, for the ones test-chat.cpp covers, the syntax its
/// vectors are written in). `None`: the template renders no tool calls.
const CORPUS: &[(&str, Option<Syntax>)] = &[
    ("Apertus-8B-Instruct.jinja", Some(Syntax::Apertus)),
    ("Apriel-1.6-15b-Thinker-fixed.jinja", Some(Syntax::Apriel)),
    ("Bielik-11B-v3.0-Instruct.jinja", Some(Syntax::Hermes)),
    ("ByteDance-Seed-OSS.jinja", Some(Syntax::SeedOss)),
    ("Cohere2MoE.jinja", Some(Syntax::CommandR7b)),
    (
        "CohereForAI-c4ai-command-r-plus-tool_use.jinja",
        Some(Syntax::CommandRPlus),
    ),
    (
        "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja",
        Some(Syntax::CommandR7b),
    ),
    ("GLM-4.6.jinja", Some(Syntax::Glm45)),
    ("GLM-4.7-Flash.jinja", Some(Syntax::Glm45)),
    ("GigaChat3-10B-A1.8B.jinja", Some(Syntax::GigaChat3)),
    ("GigaChat3.1-10B-A1.8B.jinja", Some(Syntax::GigaChat3)),
    ("HuggingFaceTB-SmolLM3-3B.jinja", None),
    ("Kimi-K2-Instruct.jinja", Some(Syntax::KimiK2)),
    ("Kimi-K2-Thinking.jinja", Some(Syntax::KimiK2)),
    ("Kimi-K3.jinja", Some(Syntax::KimiK3)),
    ("LFM2-8B-A1B.jinja", Some(Syntax::Lfm2)),
    ("LFM2.5-8B-A1B.jinja", Some(Syntax::Lfm2)),
    ("LFM2.5-Instruct.jinja", Some(Syntax::Lfm2)),
    ("MiMo-VL.jinja", Some(Syntax::Hermes)),
    ("MiniMax-M1.jinja", Some(Syntax::MiniMaxM1)),
    ("MiniMax-M2.jinja", Some(Syntax::AnthropicXml)),
    ("MiniMax-M3.jinja", Some(Syntax::MiniMaxM3)),
    (
        "Mistral-Small-3.2-24B-Instruct-2506.jinja",
        Some(Syntax::Mistral),
    ),
    (
        "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja",
        Some(Syntax::Qwen3Coder),
    ),
    ("NVIDIA-Nemotron-Nano-v2.jinja", Some(Syntax::NemotronV2)),
    (
        "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja",
        Some(Syntax::Hermes),
    ),
    (
        "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja",
        Some(Syntax::Hermes),
    ),
    ("Qwen-QwQ-32B.jinja", Some(Syntax::Hermes)),
    ("Qwen-Qwen2.5-7B-Instruct.jinja", Some(Syntax::Hermes)),
    ("Qwen-Qwen3-0.6B.jinja", Some(Syntax::Hermes)),
    ("Qwen3-Coder.jinja", Some(Syntax::Qwen3Coder)),
    ("Qwen3.5-4B.jinja", Some(Syntax::Qwen3Coder)),
    ("Reka-Edge.jinja", Some(Syntax::Hermes)),
    ("Spark2.5.jinja", Some(Syntax::Glm45)),
    ("StepFun3.5-Flash.jinja", Some(Syntax::Qwen3Coder)),
    (
        "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja",
        Some(Syntax::DeepSeekV3),
    ),
    (
        "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja",
        Some(Syntax::DeepSeekV3),
    ),
    ("deepseek-ai-DeepSeek-V3.1.jinja", Some(Syntax::DeepSeekV3)),
    ("deepseek-ai-DeepSeek-V3.2.jinja", Some(Syntax::DeepSeekV32)),
    (
        "deepseek-ai-DeepSeek-V4-Flash-0731.jinja",
        Some(Syntax::DeepSeekV32),
    ),
    ("deepseek-ai-DeepSeek-V4.jinja", Some(Syntax::DeepSeekV32)),
    (
        "fireworks-ai-llama-3-firefunction-v2.jinja",
        Some(Syntax::FirefunctionV2),
    ),
    ("google-gemma-2-2b-it.jinja", None),
    (
        "google-gemma-4-31B-it-interleaved.jinja",
        Some(Syntax::Gemma4),
    ),
    ("google-gemma-4-31B-it.jinja", Some(Syntax::Gemma4)),
    (
        "ibm-granite-granite-3.3-2B-Instruct.jinja",
        Some(Syntax::Granite),
    ),
    ("ibm-granite-granite-4.0.jinja", Some(Syntax::Hermes)),
    ("ibm-granite-granite-4.1.jinja", Some(Syntax::Hermes)),
    ("inclusionai-ling-3.0-flash.jinja", Some(Syntax::Glm45)),
    ("llama-cpp-deepseek-r1.jinja", Some(Syntax::DeepSeekV3)),
    ("llama-cpp-rwkv-world.jinja", None),
    ("llm-jp-llm-jp-4.1-8b-thinking.jinja", Some(Syntax::GptOss)),
    (
        "meetkai-functionary-medium-v3.1.jinja",
        Some(Syntax::FunctionaryV31),
    ),
    (
        "meetkai-functionary-medium-v3.2.jinja",
        Some(Syntax::FunctionaryV32),
    ),
    (
        "meta-llama-Llama-3.1-8B-Instruct.jinja",
        Some(Syntax::Llama3),
    ),
    (
        "meta-llama-Llama-3.2-3B-Instruct.jinja",
        Some(Syntax::Llama3),
    ),
    (
        "meta-llama-Llama-3.3-70B-Instruct.jinja",
        Some(Syntax::Llama3),
    ),
    ("microsoft-Phi-3.5-mini-instruct.jinja", None),
    (
        "mistralai-Ministral-3-14B-Reasoning-2512.jinja",
        Some(Syntax::Mistral),
    ),
    (
        "mistralai-Mistral-Nemo-Instruct-2407.jinja",
        Some(Syntax::Mistral),
    ),
    ("moonshotai-Kimi-K2.jinja", Some(Syntax::KimiK2)),
    ("muse-glimmer.jinja", Some(Syntax::MuseGlimmer)),
    ("openai-gpt-oss-120b.jinja", Some(Syntax::GptOss)),
    ("openbmb-MiniCPM5-1B.jinja", Some(Syntax::MiniCpm5)),
    ("poolside-Laguna-S-2.1.jinja", Some(Syntax::Glm45)),
    ("poolside-Laguna-XS-2.1.jinja", Some(Syntax::Glm45)),
    ("poolside-Laguna-XS.2.jinja", Some(Syntax::Glm45)),
    ("tencent-Hy3.jinja", Some(Syntax::Hy3)),
    ("unsloth-Apriel-1.5.jinja", Some(Syntax::Apriel)),
    (
        "unsloth-mistral-Devstral-Small-2507.jinja",
        Some(Syntax::Mistral),
    ),
    ("upstage-Solar-Open-100B.jinja", Some(Syntax::SolarOpen)),
];

#[test]
fn every_corpus_template_names_its_syntax() {
    let Some(dir) = support::corpus() else { return };
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|f| f.ends_with(".jinja"))
        .collect();
    files.sort();
    let listed: Vec<&str> = CORPUS.iter().map(|(f, _)| *f).collect();
    for f in &files {
        assert!(listed.contains(&f.as_str()), "{f}: not in the CORPUS table");
    }
    for (f, want) in CORPUS {
        let src = std::fs::read_to_string(dir.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
        assert_eq!(Syntax::detect_from_template(&src), *want, "{f}");
    }
}

/// The templates of llama.cpp's test-chat.cpp vectors detect the syntax the vectors parse with.
#[test]
fn vector_templates_detect_the_syntax_their_vectors_use() {
    let Some(dir) = support::corpus() else { return };
    let p = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/test_chat_vectors.json"
    );
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
    for x in v["vectors"].as_array().unwrap() {
        let f = x["template"].as_str().unwrap();
        let src = std::fs::read_to_string(dir.join(f)).unwrap();
        let want = x["syntax"].as_str().map(|n| Syntax::from_name(n).unwrap());
        assert_eq!(Syntax::detect_from_template(&src), want, "{f}");
    }
}

#[test]
fn text_detection_takes_the_earliest_marker() {
    assert_eq!(
        Syntax::detect_from_text("hi <tool_call>\n{\"name\":\"f\"}</tool_call>"),
        Some(Syntax::Hermes)
    );
    assert_eq!(
        Syntax::detect_from_text("<tool_call>\n<function=f>\n</function>"),
        Some(Syntax::Qwen3Coder)
    );
    assert_eq!(
        Syntax::detect_from_text("x <|tool_call>call:f{}<tool_call|> <tool_call>"),
        Some(Syntax::Gemma4)
    );
    assert_eq!(
        Syntax::detect_from_text("[TOOL_CALLS]f[ARGS]{}"),
        Some(Syntax::Mistral)
    );
    assert_eq!(
        Syntax::detect_from_text("<｜tool▁calls▁begin｜>"),
        Some(Syntax::DeepSeekV3)
    );
    assert_eq!(
        Syntax::detect_from_text(" {\"name\": \"f\", \"parameters\": {}}"),
        Some(Syntax::Llama3)
    );
    assert_eq!(Syntax::detect_from_text("just prose"), None);
}

#[test]
fn names_round_trip() {
    for s in Syntax::ALL {
        assert_eq!(Syntax::from_name(s.name()), Some(*s));
    }
    assert_eq!(Syntax::from_name("harmony"), Some(Syntax::GptOss));
    assert_eq!(Syntax::from_name("auto"), None);
}
