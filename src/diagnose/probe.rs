//! Probe controls: small requests whose correct result differs from what a server that ignores
//! the control would return, and the verdict on each reply. Pure: builds request bodies and
//! judges responses; the network part is [`crate::record::probe`].
//!
//! Controls (each for the OpenAI chat and/or the Anthropic messages API):
//! * `baseline` — the weather question with `tool_choice` auto: shows whether the model calls a
//!   tool at all (needed to read `none`).
//! * `named_tool` — the weather question while forcing `get_time` by name.
//! * `none` — the weather question with `tool_choice` none.
//! * `required` — a greeting (no tool needed) with `tool_choice` required / `{"type":"any"}`.
//! * `stop_in_reasoning` — a reasoning block opened by an assistant prefill `<think>\n` and a
//!   stop string the model will think ("prime" for "Is 7 a prime number?").
//! * `stop_in_answer` — the answer must contain the stop string; checks that the reply stops
//!   before it and (Anthropic) that `stop_reason` is `stop_sequence`.
//!
//! To make a small model call a tool at all the weather requests carry a few-shot history: three
//! rounds of a question, the assistant's `get_weather` call, its result and the answer.

use serde::Serialize;
use serde_json::{Value, json};

use super::request::stop_strings;
use super::{ExchangeContext, check_exchange, markup};
use crate::finding::Rule;
use crate::session::Api;

/// One probe control.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Control {
    Baseline,
    NamedTool,
    None,
    Required,
    StopInReasoning,
    StopInAnswer,
}

impl Control {
    /// All controls, in the order the probe sends them (baseline first).
    pub const ALL: [Control; 6] = [
        Control::Baseline,
        Control::NamedTool,
        Control::None,
        Control::Required,
        Control::StopInReasoning,
        Control::StopInAnswer,
    ];

    /// Name used in labels (`probe:<name>`) and the report.
    pub fn name(self) -> &'static str {
        match self {
            Control::Baseline => "baseline",
            Control::NamedTool => "named_tool",
            Control::None => "none",
            Control::Required => "required",
            Control::StopInReasoning => "stop_in_reasoning",
            Control::StopInAnswer => "stop_in_answer",
        }
    }
}

/// The verdict on one control.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Verdict {
    /// The server did what the control asked.
    Honored,
    /// The server ignored the control.
    Ignored,
    /// The stop string was matched inside the reasoning (the answer is lost).
    MatchedInReasoning,
    /// The model did not do what makes the control observable (no call, no reasoning, never
    /// wrote the stop string): the probe proves nothing.
    Inconclusive,
    /// Informational line (the baseline).
    Info,
}

impl Verdict {
    /// `HONORED`, `IGNORED`, `MATCHED_IN_REASONING`, `INCONCLUSIVE`, `INFO`.
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Honored => "HONORED",
            Verdict::Ignored => "IGNORED",
            Verdict::MatchedInReasoning => "MATCHED_IN_REASONING",
            Verdict::Inconclusive => "INCONCLUSIVE",
            Verdict::Info => "INFO",
        }
    }

    /// True for a server fault.
    pub fn is_fault(self) -> bool {
        matches!(self, Verdict::Ignored | Verdict::MatchedInReasoning)
    }
}

/// One line of the probe report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProbeResult {
    pub control: Control,
    /// `openai` or `anthropic`.
    pub api: String,
    pub verdict: Verdict,
    /// What was observed, in words (calls, finish reason, stop fields).
    pub evidence: String,
    /// Exchange id in the probe's session, when recorded.
    pub exchange: Option<u64>,
}

/// Exit code of `probe`: 1 when any control is a fault, 2 when every non-baseline control is
/// inconclusive, else 0.
pub fn exit_code(results: &[ProbeResult]) -> u8 {
    if results.iter().any(|r| r.verdict.is_fault()) {
        return 1;
    }
    let judged: Vec<&ProbeResult> = results
        .iter()
        .filter(|r| r.verdict != Verdict::Info)
        .collect();
    if !judged.is_empty() && judged.iter().all(|r| r.verdict == Verdict::Inconclusive) {
        2
    } else {
        0
    }
}

/// Stop string of the `stop_in_reasoning` control.
pub const REASONING_STOP: &str = "prime";
/// Stop string of the `stop_in_answer` control.
pub const ANSWER_STOP: &str = "Vienna";

fn weather_tool_defs(api: Api) -> Value {
    let city = json!({"type": "object", "properties": {"city": {"type": "string", "description": "City name"}}, "required": ["city"]});
    let tools = [
        ("get_weather", "Get the current weather for a city"),
        ("get_time", "Get the current local time for a city"),
    ];
    match api {
        Api::Anthropic => Value::Array(tools.iter().map(|(n, d)| json!({"name": n, "description": d, "input_schema": city})).collect()),
        _ => Value::Array(tools.iter().map(|(n, d)| json!({"type": "function", "function": {"name": n, "description": d, "parameters": city}})).collect()),
    }
}

/// The few-shot examples: (city, temperature °C).
const SHOTS: [(&str, i64); 3] = [("Paris", 18), ("Berlin", 12), ("Rome", 24)];

/// System prompt of the weather requests.
const SYSTEM: &str =
    "You are a helpful assistant. Always answer weather questions by calling get_weather.";

/// Three rounds of question → `get_weather` call → result → answer, then `question`. (With one
/// round SmolLM2-135M answers with an invented `<tool_response>`; with three it calls the tool.)
fn weather_messages(api: Api, question: &str) -> Value {
    let mut msgs = Vec::new();
    if api != Api::Anthropic {
        msgs.push(json!({"role": "system", "content": SYSTEM}));
    }
    for (i, (city, t)) in SHOTS.iter().enumerate() {
        msgs.push(json!({"role": "user", "content": format!("What is the weather in {city}?")}));
        let result = json!({"temp_c": t}).to_string();
        if api == Api::Anthropic {
            let id = format!("toolu_0{i}");
            msgs.push(json!({"role": "assistant", "content": [{"type": "tool_use", "id": id, "name": "get_weather", "input": {"city": city}}]}));
            msgs.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": result}]}));
        } else {
            let id = format!("call_0{i}");
            let args = json!({"city": city}).to_string();
            msgs.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function", "function": {"name": "get_weather", "arguments": args}}]}));
            msgs.push(json!({"role": "tool", "tool_call_id": id, "content": result}));
        }
        msgs.push(json!({"role": "assistant", "content": format!("It is {t} C in {city}.")}));
    }
    msgs.push(json!({"role": "user", "content": question}));
    Value::Array(msgs)
}

/// The request body of `control` for `api` (`model` included when given). Deterministic:
/// temperature 0, fixed seed, small token limits.
pub fn request(control: Control, api: Api, model: Option<&str>) -> Value {
    let anthropic = api == Api::Anthropic;
    let mut body = match control {
        Control::Baseline | Control::NamedTool | Control::None | Control::Required => {
            let q = if control == Control::Required {
                "Hello! How are you today?"
            } else {
                "What is the weather in Lisbon?"
            };
            let mut b = json!({"messages": weather_messages(api, q), "tools": weather_tool_defs(api), "max_tokens": 64});
            let tc = match (control, anthropic) {
                (Control::Baseline, true) => json!({"type": "auto"}),
                (Control::Baseline, false) => json!("auto"),
                (Control::NamedTool, true) => json!({"type": "tool", "name": "get_time"}),
                (Control::NamedTool, false) => {
                    json!({"type": "function", "function": {"name": "get_time"}})
                }
                (Control::None, true) => json!({"type": "none"}),
                (Control::None, false) => json!("none"),
                (_, true) => json!({"type": "any"}),
                (_, false) => json!("required"),
            };
            b["tool_choice"] = tc;
            if anthropic {
                b["system"] = json!(SYSTEM);
            }
            b
        }
        Control::StopInReasoning => {
            let msgs = json!([
                {"role": "user", "content": "Is 7 a prime number? Think step by step, then answer yes or no."},
                {"role": "assistant", "content": "<think>\n"}
            ]);
            let mut b = json!({"messages": msgs, "max_tokens": 96});
            if anthropic {
                b["stop_sequences"] = json!([REASONING_STOP]);
                b["thinking"] = json!({"type": "enabled", "budget_tokens": 80});
            } else {
                b["stop"] = json!([REASONING_STOP]);
            }
            b
        }
        Control::StopInAnswer => {
            let msgs = json!([{"role": "user", "content": "Repeat exactly this sentence: The capital of Austria is Vienna and it is beautiful."}]);
            let mut b = json!({"messages": msgs, "max_tokens": 32});
            if anthropic {
                b["stop_sequences"] = json!([ANSWER_STOP]);
            } else {
                b["stop"] = json!([ANSWER_STOP]);
            }
            b
        }
    };
    body["temperature"] = json!(0);
    if !anthropic {
        body["seed"] = json!(42);
    }
    if let Some(m) = model {
        body["model"] = json!(m);
    } else if anthropic {
        body["model"] = json!("local");
    }
    body
}

fn calls_text(cx: &ExchangeContext) -> String {
    let Some(m) = &cx.message else {
        return "no reply".into();
    };
    let calls: Vec<String> = m
        .tool_calls
        .iter()
        .map(|c| format!("{}({})", c.name, super::report::one_line(&c.arguments, 60)))
        .collect();
    let finish = m.finish_reason.as_deref().unwrap_or("-");
    if calls.is_empty() {
        let content = super::report::one_line(m.content.trim(), 60);
        format!("no tool call, finish {finish}, content {content:?}")
    } else {
        format!("called {}, finish {finish}", calls.join(", "))
    }
}

/// Judges one control's reply. `baseline_called` says whether the baseline (same question,
/// `tool_choice` auto) produced a call: without one, a `none` control with no call proves
/// nothing.
pub fn judge(
    control: Control,
    cx: &ExchangeContext,
    baseline_called: Option<bool>,
) -> (Verdict, String) {
    if cx.failed() || cx.message.is_none() {
        let status = cx
            .status
            .map(|s| format!("HTTP {s}"))
            .unwrap_or_else(|| "no response".into());
        let body = cx
            .response_text
            .as_deref()
            .map(|t| super::report::one_line(t, 120))
            .unwrap_or_default();
        return (
            Verdict::Inconclusive,
            format!("{status} {body}").trim().to_owned(),
        );
    }
    let m = cx.message.as_ref().expect("checked");
    let seen = calls_text(cx);
    let findings = check_exchange(cx);
    let has = |r: Rule| findings.iter().any(|f| f.rule == r);
    match control {
        Control::Baseline => (Verdict::Info, format!("tool_choice auto: {seen}")),
        Control::NamedTool => {
            // No call at all says nothing about the name (check reports it as
            // tool_choice.required_ignored: the forced call did not happen; the `required`
            // control probes that). Only a call of another tool is IGNORED.
            if m.tool_calls.is_empty() {
                let auto = match baseline_called {
                    Some(true) => {
                        " (it does under auto: check reports tool_choice.required_ignored)"
                    }
                    Some(false) => " (nor under auto)",
                    None => "",
                };
                (
                    Verdict::Inconclusive,
                    format!("forced get_time; the model did not call a tool{auto}: {seen}"),
                )
            } else if has(Rule::ToolChoiceNamedIgnored) {
                (Verdict::Ignored, format!("forced get_time; {seen}"))
            } else {
                (Verdict::Honored, format!("forced get_time; {seen}"))
            }
        }
        Control::None => {
            if has(Rule::ToolChoiceNoneIgnored) {
                let how = if m.tool_calls.is_empty() {
                    " (call written into content)"
                } else {
                    ""
                };
                (Verdict::Ignored, format!("tool_choice none; {seen}{how}"))
            } else if baseline_called == Some(true) {
                (
                    Verdict::Honored,
                    format!("tool_choice none; {seen}; the baseline called a tool"),
                )
            } else {
                (
                    Verdict::Inconclusive,
                    format!(
                        "tool_choice none; {seen}; the model did not call a tool under auto either"
                    ),
                )
            }
        }
        Control::Required => {
            if !m.tool_calls.is_empty() {
                (
                    Verdict::Honored,
                    format!("tool_choice required on a greeting; {seen}"),
                )
            } else if matches!(m.finish_reason.as_deref(), Some("length" | "max_tokens"))
                && markup::find_call_markup(&m.content, &[]).is_empty()
            {
                (
                    Verdict::Inconclusive,
                    format!(
                        "tool_choice required; {seen}: ran to the token limit before any call (the grammar may allow leading text)"
                    ),
                )
            } else {
                (Verdict::Ignored, format!("tool_choice required; {seen}"))
            }
        }
        Control::StopInReasoning => stop_in_reasoning(cx, m, &findings, &seen),
        Control::StopInAnswer => stop_in_answer(cx, m, &findings),
    }
}

/// The `stop_in_reasoning` control's verdict: the stop string the request set matched inside
/// the reasoning (`stop.in_reasoning`), an answer followed it, or the model never reasoned or
/// never wrote it.
fn stop_in_reasoning(
    cx: &ExchangeContext,
    m: &crate::stream::AssistantMessage,
    findings: &[crate::finding::Finding],
    seen: &str,
) -> (Verdict, String) {
    let has = |r: Rule| findings.iter().any(|f| f.rule == r);
    let stops: Vec<String> = stop_strings(cx.request_or_null())
        .into_iter()
        .map(|(s, _)| s)
        .collect();
    let reasoning = if m.reasoning.is_empty() {
        m.content
            .trim_start()
            .strip_prefix("<think>")
            .filter(|_| !m.content.contains("</think>"))
            .unwrap_or("")
    } else {
        &m.reasoning
    };
    let tail = super::report::one_line(
        &reasoning[reasoning.len().saturating_sub(60)..]
            .chars()
            .collect::<String>(),
        60,
    );
    if has(Rule::StopInReasoning) {
        (
            Verdict::MatchedInReasoning,
            format!(
                "stop {stops:?}; reasoning ends \"…{tail}\" with no answer, finish {}",
                m.finish_reason.as_deref().unwrap_or("-")
            ),
        )
    } else if reasoning.trim().is_empty() {
        (
            Verdict::Inconclusive,
            format!("stop {stops:?}; the model did not reason: {seen}"),
        )
    } else if stops.iter().any(|s| reasoning.contains(s.as_str())) && !m.content.trim().is_empty() {
        (
            Verdict::Honored,
            format!("stop {stops:?} appears in the reasoning and an answer follows"),
        )
    } else {
        (
            Verdict::Inconclusive,
            format!("stop {stops:?} never appeared in the reasoning; {seen}"),
        )
    }
}

/// The `stop_in_answer` control's verdict: the stop string honoured (the answer ends before it,
/// the finish or stop fields say so) or ignored (it appears in the answer, or
/// `stop.reason_mismatch`).
fn stop_in_answer(
    cx: &ExchangeContext,
    m: &crate::stream::AssistantMessage,
    findings: &[crate::finding::Finding],
) -> (Verdict, String) {
    let has = |r: Rule| findings.iter().any(|f| f.rule == r);
    let stop = stop_strings(cx.request_or_null())
        .into_iter()
        .map(|(s, _)| s)
        .next()
        .unwrap_or_default();
    let fields = if cx.api == Api::Anthropic {
        format!(
            "stop_reason {:?}, stop_sequence {:?}",
            m.finish_reason.as_deref().unwrap_or("null"),
            m.stop_sequence.as_deref().unwrap_or("null")
        )
    } else {
        format!("finish {:?}", m.finish_reason.as_deref().unwrap_or("null"))
    };
    let content = super::report::one_line(m.content.trim(), 60);
    if !stop.is_empty() && m.content.contains(stop.as_str()) {
        (
            Verdict::Ignored,
            format!("stop {stop:?} appears in the answer {content:?}; {fields}"),
        )
    } else if has(Rule::StopReasonMismatch) {
        (
            Verdict::Ignored,
            format!("stopped before {stop:?} but {fields}"),
        )
    } else if cx.api == Api::Anthropic && m.stop_sequence.as_deref() == Some(stop.as_str()) {
        (Verdict::Honored, format!("answer {content:?}; {fields}"))
    } else if cx.api != Api::Anthropic
        && m.finish_reason.as_deref() == Some("stop")
        && !m.content.trim().is_empty()
        && cx.stopping_word.as_deref().is_none_or(|w| w == stop)
    {
        (
            Verdict::Honored,
            format!("answer {content:?} ends before {stop:?}; {fields}"),
        )
    } else {
        (
            Verdict::Inconclusive,
            format!("the model never wrote {stop:?}: {content:?}; {fields}"),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::rules::testutil::*;

    #[test]
    fn named_tool_verdicts() {
        let req = request(Control::NamedTool, Api::Openai, None);
        let ignored = openai(
            req.clone(),
            oa_resp(
                None,
                &[("get_weather", "{\"city\":\"Lisbon\"}")],
                "tool_calls",
            ),
        );
        assert_eq!(
            judge(Control::NamedTool, &ignored, None).0,
            Verdict::Ignored
        );
        let honored = openai(
            req.clone(),
            oa_resp(None, &[("get_time", "{\"city\":\"Lisbon\"}")], "tool_calls"),
        );
        assert_eq!(
            judge(Control::NamedTool, &honored, None).0,
            Verdict::Honored
        );
        let none = openai(req, oa_resp(Some("Sunny"), &[], "stop"));
        assert_eq!(
            judge(Control::NamedTool, &none, Some(false)).0,
            Verdict::Inconclusive
        );
        // Even when the baseline calls a tool: no call proves nothing about the name; check
        // agrees (required_ignored, not named_ignored).
        let (v, why) = judge(Control::NamedTool, &none, Some(true));
        assert_eq!(v, Verdict::Inconclusive);
        assert!(why.contains("tool_choice.required_ignored"), "{why}");
        let rules: Vec<Rule> = check_exchange(&none).iter().map(|f| f.rule).collect();
        assert!(
            rules.contains(&Rule::ToolChoiceRequiredIgnored),
            "{rules:?}"
        );
        assert!(!rules.contains(&Rule::ToolChoiceNamedIgnored), "{rules:?}");
    }

    #[test]
    fn none_needs_a_baseline_call() {
        let req = request(Control::None, Api::Anthropic, None);
        let called = anthropic(
            req.clone(),
            json!({"type": "message", "content": [{"type": "tool_use", "id": "t", "name": "get_weather", "input": {"city": "Lisbon"}}], "stop_reason": "tool_use"}),
        );
        assert_eq!(
            judge(Control::None, &called, Some(true)).0,
            Verdict::Ignored
        );
        let text = anthropic(
            req,
            json!({"type": "message", "content": [{"type": "text", "text": "Sunny"}], "stop_reason": "end_turn"}),
        );
        assert_eq!(judge(Control::None, &text, Some(true)).0, Verdict::Honored);
        assert_eq!(
            judge(Control::None, &text, Some(false)).0,
            Verdict::Inconclusive
        );
    }

    #[test]
    fn stop_verdicts() {
        let req = request(Control::StopInReasoning, Api::Anthropic, None);
        let cut = anthropic(
            req.clone(),
            json!({"type": "message", "content": [{"type": "thinking", "thinking": "Is 7 a "}], "stop_reason": "end_turn", "stop_sequence": "prime"}),
        );
        assert_eq!(
            judge(Control::StopInReasoning, &cut, None).0,
            Verdict::MatchedInReasoning
        );
        let fine = anthropic(
            req,
            json!({"type": "message", "content": [{"type": "thinking", "thinking": "7 is prime."}, {"type": "text", "text": "yes"}], "stop_reason": "end_turn"}),
        );
        assert_eq!(
            judge(Control::StopInReasoning, &fine, None).0,
            Verdict::Honored
        );
        let req = request(Control::StopInAnswer, Api::Anthropic, None);
        let mism = anthropic(
            req.clone(),
            json!({"type": "message", "content": [{"type": "text", "text": "The capital of Austria is "}], "stop_reason": "end_turn", "stop_sequence": "Vienna"}),
        );
        assert_eq!(
            judge(Control::StopInAnswer, &mism, None).0,
            Verdict::Ignored
        );
        let ok = anthropic(
            req,
            json!({"type": "message", "content": [{"type": "text", "text": "The capital of Austria is "}], "stop_reason": "stop_sequence", "stop_sequence": "Vienna"}),
        );
        assert_eq!(judge(Control::StopInAnswer, &ok, None).0, Verdict::Honored);
    }

    #[test]
    fn exit_codes() {
        let r = |v| ProbeResult {
            control: Control::None,
            api: "openai".into(),
            verdict: v,
            evidence: String::new(),
            exchange: None,
        };
        assert_eq!(exit_code(&[r(Verdict::Info), r(Verdict::Honored)]), 0);
        assert_eq!(
            exit_code(&[r(Verdict::Inconclusive), r(Verdict::Ignored)]),
            1
        );
        assert_eq!(exit_code(&[r(Verdict::Info), r(Verdict::Inconclusive)]), 2);
    }
}
