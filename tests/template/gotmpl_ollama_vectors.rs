//! toolscope's Go-template renderer against Ollama's own test vectors: every template Ollama
//! ships (`template/*.gotmpl`) rendered for the three conversations of `TestTemplate`
//! (ollama/ollama template/template_test.go) must equal the file Go's text/template produced
//! for it (`template/testdata/<name>.gotmpl/<case>`). The data is transcribed by
//! scripts/ollama-template-vectors.py into tests/data/ollama_template_vectors.json.

use serde_json::{Value, json};
use toolscope::gotmpl;
use toolscope::template::ollama::{self, OllamaTemplate};

fn vectors() -> Value {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/ollama_template_vectors.json"
    ))
    .unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn every_shipped_template_renders_as_ollama_testdata() {
    let v = vectors();
    let trimmed: Vec<&str> = v["trailing_space_trimmed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    let mut checked = 0;
    let mut failures = Vec::new();
    for t in v["templates"].as_array().unwrap() {
        let name = t["name"].as_str().unwrap();
        let tmpl = t["template"].as_str().unwrap();
        for (case, expected) in t["expected"].as_object().unwrap() {
            let req = json!({"model": "m", "messages": v["cases"][case]});
            let mut got = match ollama::render_ollama(tmpl, &req) {
                Ok(s) => s,
                Err(e) => {
                    failures.push(format!("{name}/{case}: {e}"));
                    continue;
                }
            };
            // TestTemplate drops one trailing space for these templates
            if trimmed.contains(&format!("{name}.gotmpl").as_str()) && got.ends_with(' ') {
                got.pop();
            }
            if got != expected.as_str().unwrap() {
                failures.push(format!(
                    "{name}/{case}:\n got  {got:?}\n want {:?}",
                    expected.as_str().unwrap()
                ));
            }
            checked += 1;
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(checked, 60, "20 templates × 3 conversations");
}

/// template_test.go:157 TestParse — `Vars` of each template.
#[test]
fn vars_as_ollama_parse() {
    let cases: &[(&str, &[&str])] = &[
        ("{{ .Prompt }}", &["prompt", "response"]),
        (
            "{{ .System }} {{ .Prompt }}",
            &["prompt", "response", "system"],
        ),
        (
            "{{ .System }} {{ .Prompt }} {{ .Response }}",
            &["prompt", "response", "system"],
        ),
        (
            "{{ with .Tools }}{{ . }}{{ end }} {{ .System }} {{ .Prompt }}",
            &["prompt", "response", "system", "tools"],
        ),
        (
            "{{ range .Messages }}{{ .Role }} {{ .Content }}{{ end }}",
            &["content", "messages", "role"],
        ),
        (
            "{{ range .Messages }}{{ if eq .Role \"tool\" }}Tool Result: {{ .ToolName }} {{ .Content }}{{ end }}{{ end }}",
            &["content", "messages", "role", "toolname"],
        ),
        (
            "{{- range .Messages }}\n{{- if eq .Role \"system\" }}SYSTEM:\n{{- else if eq .Role \"user\" }}USER:\n{{- else if eq .Role \"assistant\" }}ASSISTANT:\n{{- else if eq .Role \"tool\" }}TOOL:\n{{- end }} {{ .Content }}\n{{- end }}",
            &["content", "messages", "role"],
        ),
        (
            "{{- if .Messages }}\n{{- range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>\n{{ end }}<|im_start|>assistant\n{{ else -}}\n{{ if .System }}<|im_start|>system\n{{ .System }}<|im_end|>\n{{ end }}{{ if .Prompt }}<|im_start|>user\n{{ .Prompt }}<|im_end|>\n{{ end }}<|im_start|>assistant\n{{ .Response }}<|im_end|>\n{{- end -}}",
            &[
                "content", "messages", "prompt", "response", "role", "system",
            ],
        ),
    ];
    for (t, want) in cases {
        let p = OllamaTemplate::parse(t).unwrap();
        assert_eq!(p.vars(), *want, "{t}");
    }
}

/// template_test.go:251 TestParseError.
#[test]
fn parse_errors_as_ollama() {
    let e = OllamaTemplate::parse("{{ .Prompt ").unwrap_err();
    assert!(e.to_string().contains("unclosed action"), "{e}");
    let e = OllamaTemplate::parse(r#"{{define "x"}}{{template "x"}}{{end}}{{template "x"}}"#)
        .unwrap_err();
    assert!(
        e.to_string().contains("undefined template specified"),
        "{e}"
    );
    // Ollama's error has no position; toolscope adds the line of the `{{template}}`
    // (hand-counted: the second line)
    let e = OllamaTemplate::parse("{{ .Messages }}\n  {{template \"x\"}}").unwrap_err();
    assert_eq!(e.to_string(), "template: :2: undefined template specified");
}

/// template_test.go:283 TestExecuteWithMessages: the legacy (`.Prompt`/`.Response`) and the
/// `.Messages` form of a template render the same conversation identically.
#[test]
fn execute_with_messages_as_ollama() {
    let mistral_msgs = json!([
        {"role": "user", "content": "Hello friend!"},
        {"role": "assistant", "content": "Hello human!"},
        {"role": "user", "content": "What is your name?"}
    ]);
    let m_no_resp = "[INST] {{ if .System }}{{ .System }}\n\n{{ end }}{{ .Prompt }}[/INST] ";
    let m_resp =
        "[INST] {{ if .System }}{{ .System }}\n\n{{ end }}{{ .Prompt }}[/INST] {{ .Response }}";
    let m_msgs = "[INST] {{ if .System }}{{ .System }}\n\n{{ end }}\n{{- range .Messages }}\n{{- if eq .Role \"user\" }}{{ .Content }}[/INST] {{ else if eq .Role \"assistant\" }}{{ .Content }}[INST] {{ end }}\n{{- end }}";
    for t in [m_no_resp, m_resp, m_msgs] {
        let got = ollama::render_ollama(t, &json!({"messages": mistral_msgs})).unwrap();
        assert_eq!(
            got, "[INST] Hello friend![/INST] Hello human![INST] What is your name?[/INST] ",
            "{t}"
        );
    }
    let mut with_system =
        vec![json!({"role": "system", "content": "You are a helpful assistant!"})];
    with_system.extend(mistral_msgs.as_array().unwrap().iter().cloned());
    for t in [m_no_resp, m_resp, m_msgs] {
        let got = ollama::render_ollama(t, &json!({"messages": with_system})).unwrap();
        assert_eq!(
            got,
            "[INST] You are a helpful assistant!\n\nHello friend![/INST] Hello human![INST] What is your name?[/INST] ",
            "{t}"
        );
    }
    let assistant_last = json!([
        {"role": "user", "content": "Hello friend!"},
        {"role": "assistant", "content": "Hello human!"},
        {"role": "user", "content": "What is your name?"},
        {"role": "assistant", "content": "My name is Ollama and I"}
    ]);
    for t in [
        "[INST] {{ .Prompt }}[/INST] ",
        "[INST] {{ .Prompt }}[/INST] {{ .Response }}",
        "\n{{- range $i, $m := .Messages }}\n{{- if eq .Role \"user\" }}[INST] {{ .Content }}[/INST] {{ else if eq .Role \"assistant\" }}{{ .Content }}{{ end }}\n{{- end }}",
    ] {
        let got = ollama::render_ollama(t, &json!({"messages": assistant_last})).unwrap();
        assert_eq!(
            got,
            "[INST] Hello friend![/INST] Hello human![INST] What is your name?[/INST] My name is Ollama and I",
            "{t}"
        );
    }
    let chatml_resp = "{{ if .System }}<|im_start|>system\n{{ .System }}<|im_end|>\n{{ end }}{{ if .Prompt }}<|im_start|>user\n{{ .Prompt }}<|im_end|>\n{{ end }}<|im_start|>assistant\n{{ .Response }}<|im_end|>\n";
    let chatml_msgs = "\n{{- range $index, $_ := .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>\n{{ end }}<|im_start|>assistant\n";
    for t in [chatml_resp, chatml_msgs] {
        let got = ollama::render_ollama(t, &json!({"messages": with_system})).unwrap();
        assert_eq!(
            got,
            "<|im_start|>system\nYou are a helpful assistant!<|im_end|>\n<|im_start|>user\nHello friend!<|im_end|>\n<|im_start|>assistant\nHello human!<|im_end|>\n<|im_start|>user\nWhat is your name?<|im_end|>\n<|im_start|>assistant\n",
            "{t}"
        );
    }
}

/// template_test.go:428 TestExecuteWithSuffix.
#[test]
fn execute_with_suffix_as_ollama() {
    let t = "{{- if .Suffix }}<PRE> {{ .Prompt }} <SUF>{{ .Suffix }} <MID>\n{{- else }}{{ .Prompt }}\n{{- end }}";
    let got = ollama::render_ollama(
        t,
        &json!({"messages": [{"role": "user", "content": "hello"}]}),
    )
    .unwrap();
    assert_eq!(got, "hello");
    let got =
        ollama::render_ollama(t, &json!({"prompt": "def add(", "suffix": "return x"})).unwrap();
    assert_eq!(got, "<PRE> def add( <SUF>return x <MID>");
}

/// template_test.go:625-771: tool-call arguments and tool properties print as JSON and range
/// as maps.
#[test]
fn arguments_and_properties_as_ollama() {
    let call = json!({"messages": [{"role": "assistant", "content": "", "tool_calls": [
        {"function": {"name": "get_weather", "arguments": {"location": "Tokyo", "unit": "celsius"}}}]}]});
    let got = ollama::render_ollama(
        "{{- range .Messages }}{{- range .ToolCalls }}{{ .Function.Arguments }}{{- end }}{{- end }}",
        &call,
    )
    .unwrap();
    assert_eq!(got, r#"{"location":"Tokyo","unit":"celsius"}"#);
    let city = json!({"messages": [{"role": "assistant", "tool_calls": [
        {"function": {"name": "get_weather", "arguments": {"city": "Tokyo"}}}]}]});
    let got = ollama::render_ollama(
        "{{- range .Messages }}{{- range .ToolCalls }}{{- range $k, $v := .Function.Arguments }}{{ $k }}={{ $v }};{{- end }}{{- end }}{{- end }}",
        &city,
    )
    .unwrap();
    assert_eq!(got, "city=Tokyo;");
    let tools = json!({"messages": [{"role": "user", "content": "test"}], "tools": [{"type": "function", "function": {
        "name": "get_weather", "description": "Get weather",
        "parameters": {"type": "object", "properties": {"location": {"type": "string", "description": "City name"}}}}}]});
    let got = ollama::render_ollama(
        "{{- range .Messages }}{{- end }}{{- range .Tools }}{{ .Function.Parameters.Properties }}{{- end }}",
        &tools,
    )
    .unwrap();
    assert_eq!(
        got,
        r#"{"location":{"type":"string","description":"City name"}}"#
    );
    let got = ollama::render_ollama(
        "{{- range .Messages }}{{- end }}{{- range .Tools }}{{- range $name, $prop := .Function.Parameters.Properties }}{{ $name }}:{{ $prop.Type }};{{- end }}{{- end }}",
        &tools,
    )
    .unwrap();
    assert_eq!(got, "location:string;");
}

/// template_test.go:529 TestCollate through a template: consecutive same-role messages merge
/// with a blank line, tool messages do not.
#[test]
fn collate_as_ollama() {
    let t = "{{ range .Messages }}[{{ .Role }}|{{ .Content }}|{{ .ToolName }}]{{ end }}";
    let got = ollama::render_ollama(
        t,
        &json!({"messages": [
            {"role": "user", "content": "Hello"}, {"role": "user", "content": "How are you?"},
            {"role": "tool", "content": "sunny", "tool_name": "get_weather"},
            {"role": "tool", "content": "72F", "tool_name": "get_temperature"}]}),
    )
    .unwrap();
    assert_eq!(
        got,
        "[user|Hello\n\nHow are you?|][tool|sunny|get_weather][tool|72F|get_temperature]"
    );
}

/// server/routes_debug_test.go:280-370 (TestChatDebugRenderOnly) and :83-165
/// (TestGenerateDebugRenderOnly): the prompts Ollama's handlers render with `debug_render_only`.
#[test]
fn debug_render_only_as_ollama_handlers() {
    let chat = "{{ if .Tools }}{{ .Tools }}{{ end }}{{ range .Messages }}{{ .Role }}: {{ .Content }}\n{{ end }}";
    let r = |t: &str, req: Value| ollama::render_ollama(t, &req).unwrap();
    assert_eq!(
        r(
            chat,
            json!({"model": "test-model", "messages": [
            {"role": "system", "content": "You are a helpful assistant"}, {"role": "user", "content": "Hello"}]})
        ),
        "system: You are a helpful assistant\nuser: Hello\n"
    );
    assert_eq!(
        r(
            chat,
            json!({"model": "test-model", "messages": [
            {"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi there!"},
            {"role": "user", "content": "How are you?"}]})
        ),
        "user: Hello\nassistant: Hi there!\nuser: How are you?\n"
    );
    assert_eq!(
        r(
            chat,
            json!({"model": "test-model", "messages": [
            {"role": "user", "content": "What's in this image?", "images": ["ZmFrZS1pbWFnZS1kYXRh"]}]})
        ),
        "user: [img-0]What's in this image?\n"
    );
    assert_eq!(
        r(
            chat,
            json!({"model": "test-model", "messages": [{"role": "user", "content": "Get the weather"}],
            "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Get weather information"}}]})
        ),
        "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Get weather information\",\"parameters\":{\"type\":\"\",\"properties\":null}}}]user: Get the weather\n"
    );
    let generate = "{{ .Prompt }}";
    assert_eq!(
        r(
            generate,
            json!({"model": "test-model", "prompt": "Hello, world!"})
        ),
        "Hello, world!"
    );
    assert_eq!(
        r(
            generate,
            json!({"model": "test-model", "prompt": "User question", "system": "You are a helpful assistant"})
        ),
        "User question"
    );
    assert_eq!(
        r(
            generate,
            json!({"model": "test-model", "prompt": "Hello", "template": "PROMPT: {{ .Prompt }}"})
        ),
        "PROMPT: Hello"
    );
    assert_eq!(
        r(
            generate,
            json!({"model": "test-model", "prompt": "Describe this image", "images": ["ZmFrZS1pbWFnZS1kYXRh"]})
        ),
        "[img-0]Describe this image"
    );
}

/// Ollama's tool-calling templates (command-r-plus, firefunction, llama3-groq-tool-use,
/// llama3.2, mistral, nemotron, qwen2.5, qwen3, xlam) rendered for tools/testdata's
/// messages.json + tools.json must equal the `.out` files Go produced
/// (tools/tools_test.go `TestParseToolCalls`, subtest "template", at 6b04cad, before
/// v0.14.0: rendered as that Ollama version renders, `{{ .Function }}` as JSON).
#[test]
fn tool_templates_render_as_ollama_testdata() {
    let v = vectors();
    let t = &v["tools"];
    let req = json!({"model": "m", "messages": t["messages"], "tools": t["tools"]});
    let mut model = ollama::OllamaModel::default();
    model.set_version("0.9.1");
    assert!(model.function_json);
    let mut failures = Vec::new();
    let templates = t["templates"].as_array().unwrap();
    for tt in templates {
        let name = tt["name"].as_str().unwrap();
        let opts = gotmpl::ExecOptions::default();
        match ollama::render_ollama_with(tt["template"].as_str().unwrap(), &req, &model, &opts) {
            Ok(got) if got == tt["expected"].as_str().unwrap() => {}
            Ok(got) => failures.push(format!(
                "{name}:\n got  {got:?}\n want {:?}",
                tt["expected"].as_str().unwrap()
            )),
            Err(e) => failures.push(format!("{name}: {e}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(templates.len(), 9);
}

/// From Ollama v0.14.0 (e51dead63) to fb3076099, `{{ .Function }}` prints Go struct syntax,
/// as reported with a Go reproduction in ollama issue #14601 / PR #18391 ("{get_weather Get
/// current weather for a city {object <nil> <nil> [city] {…}}}"); toolscope renders what
/// that Ollama sends the model.
#[test]
fn function_prints_as_a_go_struct_from_v0_14() {
    let t = "{{- range .Messages }}{{ end }}{{- range .Tools }}{\"type\": \"function\", \"function\": {{ .Function }}}{{ end }}";
    let req = json!({"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", "function": {
        "name": "get_weather", "description": "Get current weather for a city",
        "parameters": {"type": "object", "required": ["city"], "properties": {"city": {"type": "string", "description": "City name"}}}}}]});
    assert_eq!(
        ollama::render_ollama(t, &req).unwrap(),
        r#"{"type": "function", "function": {get_weather Get current weather for a city {object <nil> <nil> [city] {"city":{"type":"string","description":"City name"}}}}}"#
    );
    let mut old = ollama::OllamaModel::default();
    old.set_version("0.13.5");
    assert_eq!(
        ollama::render_ollama_with(t, &req, &old, &gotmpl::ExecOptions::default()).unwrap(),
        r#"{"type": "function", "function": {"name":"get_weather","description":"Get current weather for a city","parameters":{"type":"object","required":["city"],"properties":{"city":{"type":"string","description":"City name"}}}}}"#
    );
}
