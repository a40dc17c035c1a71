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
    assert_eq!(list.len(), 4);
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
fn a_drifted_call_is_a_500_in_llama_cpp_content_in_vllm_and_read_by_sglang() {
    // `parameters` for `arguments`: toolscope repairs it; llama.cpp's PEG parser rejects it,
    // vLLM 0.33.0's hermes parser fails on the missing "arguments" key (hermes_tool_parser.py
    // KeyError) and returns the text, SGLang 0.5.23's parse_base_json reads `parameters`
    // (base_format_detector.py: `act.get("parameters") or act.get("arguments")`). Checked
    // against both wheels by tests/e2e/engines_real.rs (corpus id hermes/drift_parameters_key).
    let text = "<tool_call>\n{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}\n</tool_call>";
    let (ours, list) = expected(Syntax::Hermes, text, None);
    assert_eq!(ours.tool_calls.len(), 1, "toolscope reads it");
    assert_eq!(ours.repairs[0].kind, "parameters_for_arguments");
    let by = |e: Engine| list.iter().find(|x| x.engine == e).unwrap();
    assert!(matches!(
        by(Engine::LlamaCpp).outcome,
        Outcome::Error { status: 500, .. }
    ));
    assert_eq!(
        by(Engine::Vllm).outcome,
        Outcome::Content {
            content: text.to_string()
        }
    );
    match &by(Engine::Sglang).outcome {
        Outcome::Calls { tool_calls, .. } => {
            assert_eq!(tool_calls[0].arguments, json!({"city": "Paris"}))
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(by(Engine::Vllm).release, "0.33.0");
    assert_eq!(by(Engine::Sglang).release, "0.5.23");
}

fn tools() -> serde_json::Value {
    json!([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}])
}

fn outcome(family: Syntax, text: &str, engine: Engine) -> Outcome {
    let t = tools();
    let (_, list) = expected(family, text, Some(&t));
    list.into_iter()
        .find(|e| e.engine == engine)
        .unwrap()
        .outcome
}

fn calls(o: &Outcome) -> Vec<(String, serde_json::Value)> {
    match o {
        Outcome::Calls { tool_calls, .. } => tool_calls
            .iter()
            .map(|c| (c.name.clone(), c.arguments.clone()))
            .collect(),
        _ => Vec::new(),
    }
}

/// Values recorded from the wheels' code (tests/e2e/engines_real.rs corpus ids in comments).
#[test]
fn engine_specific_behaviours_as_their_code_returns_them() {
    // hermes/undeclared_tool: SGLang drops calls to undeclared tools with their markup, vLLM keeps
    let t = "<tool_call>\n{\"name\": \"launch_rocket\", \"arguments\": {\"target\": \"moon\"}}\n</tool_call>";
    assert_eq!(calls(&outcome(Syntax::Hermes, t, Engine::Sglang)), vec![]);
    assert_eq!(
        outcome(Syntax::Hermes, t, Engine::Sglang),
        Outcome::Calls {
            content: String::new(),
            reasoning: String::new(),
            tool_calls: vec![]
        }
    );
    assert_eq!(
        calls(&outcome(Syntax::Hermes, t, Engine::Vllm))[0].0,
        "launch_rocket"
    );
    // kimi-k2/string_for_integer: vLLM retypes by the schema ("3" -> 3), SGLang keeps "3"
    let t = "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{\"city\": \"Paris\", \"days\": \"3\"}<|tool_call_end|><|tool_calls_section_end|>";
    assert_eq!(
        calls(&outcome(Syntax::KimiK2, t, Engine::Vllm))[0].1,
        json!({"city": "Paris", "days": 3})
    );
    assert_eq!(
        calls(&outcome(Syntax::KimiK2, t, Engine::Sglang))[0].1,
        json!({"city": "Paris", "days": "3"})
    );
    // qwen3-coder/wrong_type_value: every engine returns the call with the string
    let t = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\nfive\n</parameter>\n</function>\n</tool_call>";
    for e in [Engine::Vllm, Engine::Sglang] {
        assert_eq!(
            calls(&outcome(Syntax::Qwen3Coder, t, e))[0].1,
            json!({"city": "Paris", "days": "five"}),
            "{e:?}"
        );
    }
    // hermes/content_after: both drop the text after the call
    let t = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\nI will report back.";
    for e in [Engine::Vllm, Engine::Sglang] {
        match outcome(Syntax::Hermes, t, e) {
            Outcome::Calls { content, .. } => assert_eq!(content, "", "{e:?}"),
            o => panic!("{e:?}: {o:?}"),
        }
    }
    // glm4.5/truncated_mid_value: vLLM closes the cut call, SGLang drops it
    let t = "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Par";
    assert_eq!(
        calls(&outcome(Syntax::Glm45, t, Engine::Vllm)),
        vec![("get_weather".to_string(), json!({}))]
    );
    assert_eq!(calls(&outcome(Syntax::Glm45, t, Engine::Sglang)), vec![]);
    // llama3/call_in_prose (vLLM test_llama3_json_tool_parser.py:26): vLLM finds the JSON in
    // prose; SGLang needs the reply to start with `{`
    let t = "Here is the result: {\"name\": \"get_weather\", \"parameters\": {}} Would you like to know more?";
    assert_eq!(calls(&outcome(Syntax::Llama3, t, Engine::Vllm)).len(), 1);
    assert_eq!(
        outcome(Syntax::Llama3, t, Engine::Sglang),
        Outcome::Content {
            content: t.to_string()
        }
    );
}

#[test]
fn engine_defects_are_predicted_and_labelled() {
    let t = tools();
    // mistral/v11_call_id: vLLM glues the [CALL_ID] into the name
    let text = "[TOOL_CALLS]get_weather[CALL_ID]a1b2c3d4e[ARGS]{\"city\": \"Paris\"}";
    let (_, list) = expected(Syntax::Mistral, text, Some(&t));
    let v = list.iter().find(|e| e.engine == Engine::Vllm).unwrap();
    assert_eq!(calls(&v.outcome)[0].0, "get_weathera1b2c3d4e");
    assert!(v.defect.is_some_and(|d| d.contains("CALL_ID")), "{v:?}");
    // functiongemma/bare_value: vLLM drops the unquoted value
    let text = "<start_function_call>call:get_weather{city:Paris}<end_function_call>";
    let (ours, list) = expected(Syntax::FunctionGemma, text, Some(&t));
    assert_eq!(ours.tool_calls[0].arguments, json!({"city": "Paris"}));
    let v = list.iter().find(|e| e.engine == Engine::Vllm).unwrap();
    assert_eq!(calls(&v.outcome)[0].1, json!({}));
    assert!(v.defect.is_some(), "{v:?}");
}

#[test]
fn the_table_names_only_parsers_the_releases_register() {
    use toolscope::parser::engines::parsers;
    // vLLM 0.33.0 registers none of these names (vllm/tool_parsers/__init__.py)
    for s in Syntax::ALL {
        let p = parsers(*s);
        for gone in [
            "cohere_command",
            "minicpm5xml",
            "nemotron_json",
            "minimax",
            "solar_open2",
        ] {
            assert_ne!(p[1], Some(gone), "{s}");
        }
    }
    for s in [Syntax::NemotronV2, Syntax::MiniMaxM1, Syntax::SolarOpen] {
        assert_eq!(parsers(s)[1], None, "{s}");
    }
    assert_eq!(parsers(Syntax::CommandR7b)[1], Some("cohere_command4"));
    assert_eq!(parsers(Syntax::MiniCpm5)[1], Some("minicpm5"));
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
            assert_eq!(p, [None, None, None, None]);
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
    // Dynamo's hermes reads `parameters` (config.rs:95 arguments keys); dynamo-parse gives
    // the call f({}) with empty content for this text
    assert!(
        out.contains("Dynamo     dynamo-parsers 11.0.1 hermes"),
        "{out}"
    );
    assert!(
        out.contains("vLLM and Dynamo differ: calls none vs f"),
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
    let d = &v["engines"]["outcomes"][3];
    assert_eq!(d["engine"], "dynamo");
    assert_eq!(d["release"], "dynamo-parsers 11.0.1");
    assert_eq!(d["parser"], "hermes");
    assert_eq!(d["outcome"]["kind"], "calls");
    assert_eq!(d["outcome"]["tool_calls"][0]["name"], "f");
    assert_eq!(d["outcome"]["tool_calls"][0]["arguments"], json!({}));
    assert_eq!(d["outcome"]["content"], "");
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

/// Dynamo (dynamo-parsers 11.0.1): values written by hand and checked against the crate's own
/// output (scripts/engines/dynamo's `dynamo-parse`, frontend mode, the text as one delta, these
/// tools): the jail emits the text after `</tool_call>` as content, EOF recovery closes a cut
/// hermes call, GLM-4.7 keeps a call to an undeclared tool, `;`-joined llama3 calls stay text.
#[test]
fn dynamo_keeps_trailing_text_closes_cut_json_and_keeps_undeclared_tools() {
    let t = tools();
    let dynamo = |family: Syntax, text: &str| {
        let (_, list) = expected(family, text, Some(&t));
        let d = list
            .into_iter()
            .find(|e| e.engine == Engine::Dynamo)
            .unwrap();
        assert_eq!(d.release, "dynamo-parsers 11.0.1");
        assert!(d.why.contains("one delta"), "{}", d.why);
        d
    };
    let text = "Sure.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>\nBack soon.";
    let d = dynamo(Syntax::Hermes, text);
    assert_eq!(d.parser, Some("hermes"));
    assert_eq!(
        calls(&d.outcome),
        vec![("get_weather".to_string(), json!({"city": "Oslo"}))]
    );
    match &d.outcome {
        Outcome::Calls { content, .. } => assert_eq!(content, "Sure.\n\nBack soon."),
        other => panic!("{other:?}"),
    }
    // vLLM and SGLang drop the text after the call
    let (_, list) = expected(Syntax::Hermes, text, Some(&t));
    let differ = toolscope::parser::engines::disagreements(&list);
    assert!(
        differ.contains(&"vLLM and Dynamo differ: different content".to_string()),
        "{differ:?}"
    );

    let d = dynamo(
        Syntax::Hermes,
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Os",
    );
    assert_eq!(
        calls(&d.outcome),
        vec![("get_weather".to_string(), json!({"city": "Os"}))]
    );

    let d = dynamo(
        Syntax::Glm45,
        "<tool_call>launch_rocket\n<arg_key>target</arg_key>\n<arg_value>mars</arg_value>\n</tool_call>",
    );
    assert_eq!(d.parser, Some("glm47"));
    assert_eq!(
        calls(&d.outcome),
        vec![("launch_rocket".to_string(), json!({"target": "mars"}))]
    );

    let text = "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}; {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\"}}";
    let d = dynamo(Syntax::Llama3, text);
    assert_eq!(
        d.outcome,
        Outcome::Content {
            content: text.to_string()
        }
    );
}

#[test]
fn dynamo_names_only_registered_parsers_and_says_which_path() {
    use toolscope::parser::engines::parsers;
    // dynamo-parsers 11.0.1 get_tool_parser_map registers none for these
    for s in [
        Syntax::SeedOss,
        Syntax::Lfm2,
        Syntax::CommandR7b,
        Syntax::MuseGlimmer,
        Syntax::MiniMaxM1,
    ] {
        assert_eq!(parsers(s)[3], None, "{s}");
    }
    assert_eq!(parsers(Syntax::NemotronV2)[3], Some("nemotron_deci"));
    assert_eq!(parsers(Syntax::AnthropicXml)[3], Some("minimax_m2"));
    let text = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>";
    let (_, list) = expected(Syntax::Qwen3Coder, text, None);
    let d = list.iter().find(|e| e.engine == Engine::Dynamo).unwrap();
    assert!(d.why.contains("DYN_PARSER_VERSION=v1"), "{}", d.why);
    let (_, list) = expected(Syntax::MuseGlimmer, "hello", None);
    let d = list.iter().find(|e| e.engine == Engine::Dynamo).unwrap();
    assert!(d.why.contains("dynamo-parsers-v2"), "{}", d.why);
    // harmony is named and modelled by openai-harmony's parser (no longer "not measured")
    let (_, list) = expected(Syntax::GptOss, "hello", None);
    let d = list.iter().find(|e| e.engine == Engine::Dynamo).unwrap();
    assert_eq!(d.parser, Some("harmony"));
    assert!(d.why.contains("StreamableParser"), "{}", d.why);
}

/// vLLM's HarmonyParser and Dynamo's harmony parser read the token stream with openai-harmony's
/// parser started inside the assistant header (src/parser/engines/harmony.rs). Measured on the
/// corpus by tests/e2e/engines_real.rs and engines_dynamo.rs (ids gpt-oss/parallel,
/// gpt-oss/channel_without_start, gpt-oss/reasoning_then_content_and_call).
#[test]
fn harmony_texts_read_as_vllm_and_dynamo_tokenize_them() {
    let tools = json!([{"type": "function", "function": {"name": "get_weather", "parameters": {}}},
                       {"type": "function", "function": {"name": "get_time", "parameters": {}}}]);
    let calls_of = |text: &str, engine: Engine| {
        let (_, list) = expected(Syntax::GptOss, text, Some(&tools));
        match &list.iter().find(|e| e.engine == engine).unwrap().outcome {
            Outcome::Calls {
                content,
                tool_calls,
                ..
            } => (
                tool_calls
                    .iter()
                    .map(|c| c.name.clone())
                    .collect::<Vec<_>>(),
                content.clone(),
            ),
            other => panic!("{other:?}"),
        }
    };
    let w = "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}<|call|>";
    let t = "<|start|>assistant<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>{}<|call|>";
    // a leading `<|start|>assistant` breaks vLLM's first header: only the second call is read
    let parallel = format!("{w}{t}");
    assert_eq!(
        calls_of(&parallel, Engine::Vllm),
        (vec!["get_time".into()], String::new())
    );
    // Dynamo's regex fallback reads both
    assert_eq!(
        calls_of(&parallel, Engine::Dynamo).0,
        vec!["get_weather".to_string(), "get_time".to_string()]
    );
    // the model's own output starts at `<|channel|>`: both read the call
    let own = w.trim_start_matches("<|start|>assistant");
    assert_eq!(
        calls_of(own, Engine::Vllm).0,
        vec!["get_weather".to_string()]
    );
    assert_eq!(
        calls_of(own, Engine::Dynamo).0,
        vec!["get_weather".to_string()]
    );
    // reasoning, then prose outside any message, then a call: Dynamo keeps the prose
    let text = format!("<|channel|>analysis<|message|>Check it.<|end|>Sure.\n{w}");
    assert_eq!(
        calls_of(&text, Engine::Dynamo),
        (vec!["get_weather".into()], "Sure.".to_string())
    );
    // a `final` message is content for both
    let fin = "<|channel|>final<|message|>It is sunny.<|return|>";
    assert_eq!(calls_of(fin, Engine::Vllm).1, "It is sunny.");
    assert_eq!(calls_of(fin, Engine::Dynamo).1, "It is sunny.");
}

/// The Qwen3 prefill case (sessions/h-probe-qwen3.jsonl #5, g-stop-in-reasoning.jsonl #1): the
/// request ends with the assistant prefill `<think>\n`; llama-server continues it, and the
/// Qwen3 template closes an empty reasoning block before the prefilled content, so the
/// generation prompt llama.cpp parses in front of the reply is
/// `<|im_start|>assistant\n<think>\n\n</think>\n\n<think>\n` and the prefill and the reply are
/// content. Expected value read by hand from llama.cpp's own code: scripts/engines/llama/parse.cpp
/// (b11434) with Qwen-Qwen3-0.6B.jinja, messages `[user "Is 7 a prime?", assistant
/// "<think>\n"]`, a get_weather tool and the generated text below printed
/// `"generation_prompt": "<|im_start|>assistant\n<think>\n\n</think>\n\n<think>\n"` and
/// `{"content": "<think>\n\nIs 7 a prime? Yes.\n</think>\n\nYes, 7 is prime.",
/// "reasoning_content": "", "tool_calls": []}`.
#[test]
fn llama_cpp_parses_the_exchanges_own_generation_prompt_with_its_prefill() {
    use toolscope::parser::engines::{LlamaPrompt, expected_with};
    let tools = json!([{"type": "function", "function": {"name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
        "required": ["city"]}}}]);
    let generated = "\nIs 7 a prime? Yes.\n</think>\n\nYes, 7 is prime.";
    // the raw text the inspector replays: the prefill, then what the model generated
    let text = format!("<think>\n{generated}");
    let prompt = LlamaPrompt {
        text: "<|im_start|>assistant\n<think>\n\n</think>\n\n<think>\n".into(),
        prefill: "<think>\n".into(),
        source: "llama-server /slots".into(),
    };
    let llama = |p: Option<&LlamaPrompt>| {
        let (_, list) = expected_with(Syntax::Hermes, &text, Some(&tools), p);
        list.into_iter()
            .find(|o| o.engine == Engine::LlamaCpp)
            .unwrap()
    };
    let e = llama(Some(&prompt));
    assert_eq!(
        e.outcome,
        Outcome::Content {
            content: "<think>\n\nIs 7 a prime? Yes.\n</think>\n\nYes, 7 is prime.".into()
        },
        "{}",
        e.why
    );
    assert!(
        e.why.contains("after the exchange's generation prompt"),
        "{}",
        e.why
    );
    assert!(e.why.contains("llama-server /slots"), "{}", e.why);
    // without it, the family's (`<|im_start|>assistant\n`) + prefill + reply: the prefill
    // opens reasoning, which the reply closes
    match llama(None).outcome {
        Outcome::Calls {
            content, reasoning, ..
        } => {
            assert_eq!(content, "Yes, 7 is prime.");
            assert_eq!(reasoning, "Is 7 a prime? Yes.");
        }
        other => panic!("{other:?}"),
    }
    // the family's own prompt + the prefill is today's verdict, and says nothing more
    let plain = LlamaPrompt {
        text: "<|im_start|>assistant\n<think>\n".into(),
        ..prompt.clone()
    };
    let e = llama(Some(&plain));
    assert_eq!(e.outcome, llama(None).outcome);
    assert!(!e.why.contains("generation prompt"), "{}", e.why);
    // a prompt of another template (not starting with the family's), or a text without the
    // prefill, is not used
    for p in [
        LlamaPrompt {
            text: "<|assistant|>\n<think>\n\n</think>\n\n<think>\n".into(),
            ..prompt.clone()
        },
        LlamaPrompt {
            prefill: "<think>\nX".into(),
            ..prompt.clone()
        },
    ] {
        assert_eq!(llama(Some(&p)).outcome, llama(None).outcome, "{p:?}");
    }
    // the other engines read the raw text either way
    let (_, with) = expected_with(Syntax::Hermes, &text, Some(&tools), Some(&prompt));
    let (_, without) = expected(Syntax::Hermes, &text, Some(&tools));
    for (a, b) in with.iter().zip(&without).skip(1) {
        assert_eq!(a.outcome, b.outcome, "{:?}", a.engine);
    }
}

/// `parse --engines` with `--template` and a `--tools` request ending with an assistant
/// prefill: llama.cpp's verdict is for the generation prompt rendered from both under the
/// llama.cpp profile (the Qwen3 template of sessions/h-probe-qwen3.jsonl, recorded from
/// llama-server b11434; the same case and driver output as above).
#[test]
fn parse_engines_renders_the_requests_generation_prompt() {
    let dir = tempfile::tempdir().unwrap();
    let session = support::root().join("sessions/h-probe-qwen3.jsonl");
    let s = toolscope::session::read_session(&session).unwrap();
    let template = s.header.props.as_ref().unwrap()["chat_template"]
        .as_str()
        .unwrap()
        .to_owned();
    let tpath = dir.path().join("qwen3.jinja");
    std::fs::write(&tpath, template).unwrap();
    let req = dir.path().join("request.json");
    std::fs::write(
        &req,
        json!({"messages": [{"role": "user", "content": "Is 7 a prime?"},
            {"role": "assistant", "content": "<think>\n"}],
            "tools": [{"type": "function", "function": {"name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
            "required": ["city"]}}}]})
        .to_string(),
    )
    .unwrap();
    let raw = dir.path().join("raw.txt");
    std::fs::write(
        &raw,
        "<think>\n\nIs 7 a prime? Yes.\n</think>\n\nYes, 7 is prime.",
    )
    .unwrap();
    let o = Command::new(support::bin())
        .args(["parse", "--engines", "--format", "json", "--template"])
        .arg(&tpath)
        .arg("--tools")
        .arg(&req)
        .arg(&raw)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let l = &v["engines"]["outcomes"][0];
    assert_eq!(l["engine"], "llama-cpp");
    assert_eq!(l["outcome"]["kind"], "content", "{l}");
    assert_eq!(
        l["outcome"]["content"],
        "<think>\n\nIs 7 a prime? Yes.\n</think>\n\nYes, 7 is prime."
    );
    assert!(
        l["why"]
            .as_str()
            .unwrap()
            .contains("local render (llama.cpp@11434)"),
        "{l}"
    );
}
