//! Syntax detection from the corpus templates (llama.cpp models/templates, build 11434) and
//! from raw text; syntax names round-trip.

mod support;

use toolscope::parser::Syntax;

#[test]
fn corpus_templates_detect_their_syntax() {
    let Some(dir) = support::corpus() else { return };
    let cases = [
        ("Qwen3-Coder.jinja", Some(Syntax::Qwen3Coder)),
        ("google-gemma-4-31B-it.jinja", Some(Syntax::Gemma4)),
        ("NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", Some(Syntax::Hermes)),
        ("Qwen-Qwen3-0.6B.jinja", Some(Syntax::Hermes)),
        ("moonshotai-Kimi-K2.jinja", Some(Syntax::KimiK2)),
        ("openai-gpt-oss-120b.jinja", Some(Syntax::GptOss)),
        ("deepseek-ai-DeepSeek-V3.1.jinja", Some(Syntax::DeepSeekV3)),
        ("llama-cpp-deepseek-r1.jinja", Some(Syntax::DeepSeekV3)),
        ("MiniMax-M2.jinja", Some(Syntax::AnthropicXml)),
        ("mistralai-Mistral-Nemo-Instruct-2407.jinja", Some(Syntax::Mistral)),
        ("Mistral-Small-3.2-24B-Instruct-2506.jinja", Some(Syntax::Mistral)),
        ("meta-llama-Llama-3.1-8B-Instruct.jinja", Some(Syntax::Llama3)),
        ("google-gemma-2-2b-it.jinja", None),
    ];
    for (f, want) in cases {
        let src = std::fs::read_to_string(dir.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
        assert_eq!(Syntax::detect_from_template(&src), want, "{f}");
    }
}

#[test]
fn text_detection_takes_the_earliest_marker() {
    assert_eq!(Syntax::detect_from_text("hi <tool_call>\n{\"name\":\"f\"}</tool_call>"), Some(Syntax::Hermes));
    assert_eq!(Syntax::detect_from_text("<tool_call>\n<function=f>\n</function>"), Some(Syntax::Qwen3Coder));
    assert_eq!(Syntax::detect_from_text("x <|tool_call>call:f{}<tool_call|> <tool_call>"), Some(Syntax::Gemma4));
    assert_eq!(Syntax::detect_from_text("[TOOL_CALLS]f[ARGS]{}"), Some(Syntax::Mistral));
    assert_eq!(Syntax::detect_from_text("<｜tool▁calls▁begin｜>"), Some(Syntax::DeepSeekV3));
    assert_eq!(Syntax::detect_from_text(" {\"name\": \"f\", \"parameters\": {}}"), Some(Syntax::Llama3));
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
