//! The fix attached to each finding that has one ([`crate::finding::Fix`]): what to change so
//! the call works, as data. Pure: the exchange's context and its findings in, the findings with
//! `fix` set out. `toolscope try` applies a fix against the engine
//! ([`crate::analysis::whatif::fixed_request`] builds the changed request;
//! `crate::record::whatif` sends it).
//!
//! Per rule (docs/check.md, "Fixes"):
//! * `schema.*`: the tool schemas flattened for this template — every
//!   [`crate::schema::flatten::Strategy`] rendered with the exchange's chat template and ranked
//!   by the schema facts the prompt keeps ([`crate::schema::rank::rank_strategies`]); the fix
//!   exists when the winner loses less than the tools as sent. Applied by re-sending.
//! * `token.special_split`, `token.pseudo_special`: another chat template (named by the user),
//!   applied by the `regenerate` path. `bos.duplicate`: the same template without the BOS text
//!   it prints at its start.
//! * `stop.in_reasoning`, `stop.reason_mismatch`: the stop strings removed from the request and
//!   applied by the client to the answer (llama-server build 11434 searches them in the whole
//!   generated text, reasoning included: tools/server/server-context.cpp).
//! * `tool_choice.named_ignored` (and `tool_choice.required_ignored` for a named choice): only
//!   the named tool offered, with a call forced (`"required"` / `{"type":"any"}`) and, for a
//!   template whose call opener toolscope knows (Hermes `<tool_call>\n`), that opener
//!   prefilled as a final assistant message: llama-server build 11434 reads a named
//!   tool_choice on no API — `/v1/chat/completions` reads `tool_choice` as a string only
//!   (tools/server/server-common.cpp `oaicompat_chat_params_parse`: an object falls back to
//!   `"auto"`), `/v1/messages` maps `{"type":"tool"}` to `"required"` and drops the name
//!   (tools/server/server-chat.cpp). `"required"` alone does not put the call first: its
//!   grammar is `reasoning? content-until(<tool_call>)? tool-call` (common/
//!   chat-auto-parser-generator.cpp `build_tool_parser_json_native`), so the model may write
//!   text up to the token limit. With the opener prefilled, the server continues the final
//!   assistant message (`prefill_assistant`, server-common.cpp), and the non-lazy tool-call
//!   grammar is fed the generation prompt including the prefill (common/sampling.cpp,
//!   `common_grammar_needs_prefill`), so the next tokens can only complete a call to the one
//!   tool offered.
//! * `tool_choice.none_ignored`: on `/v1/messages` the same request through
//!   `/v1/chat/completions` (build 11434's conversion drops `{"type":"none"}`), on the OpenAI
//!   API the tools removed.
//! * a reply cut by the token limit (finish `length`/`max_tokens`, usage at the limit, or
//!   arguments ending mid-JSON) — on `tool_call.args_invalid_json`, `tool_call.leaked_as_text`,
//!   `finish.mismatch`, `tool_choice.required_ignored`: a larger token limit.
//! * `server.parse_error`: the engine (vLLM, SGLang) or toolscope's tolerant parser that reads a
//!   call from the recorded raw text ([`crate::parser::engines::expected`]), when one does.

use serde_json::Value;

use crate::diagnose::ExchangeContext;
use crate::diagnose::request::{self, ToolChoice};
use crate::finding::{Edit, Finding, Fix, Rule};
use crate::session::Api;

/// Sets `fix` on every finding of `findings` (one exchange's, judged on `cx`) whose rule has a
/// fix applicable to this exchange. A finding that already has one keeps it.
pub fn attach(cx: &ExchangeContext, findings: &mut [Finding]) {
    let mut flatten: Option<Option<Fix>> = None; // computed once, on the first schema finding
    let cut = cut_by_limit(cx);
    for f in findings.iter_mut().filter(|f| f.fix.is_none()) {
        f.fix = match f.rule {
            Rule::SchemaTypeLost | Rule::SchemaAlternativeDropped | Rule::SchemaRefUnresolved => {
                flatten.get_or_insert_with(|| flatten_fix(cx)).clone()
            }
            Rule::TokenSpecialSplit | Rule::TokenPseudoSpecial => Some(Fix::new(
                Edit::Template {
                    template: None,
                    drop_bos: false,
                },
                "another chat template whose markers are single special tokens in this vocabulary (a corpus file or one you name: toolscope try --template SRC), rendered locally under the engine's profile and generated through its raw completion endpoint",
            )),
            Rule::BosDuplicate if cx.template.is_some() => Some(Fix::new(
                Edit::Template {
                    template: None,
                    drop_bos: true,
                },
                "the chat template without the BOS it prints at its start (the engine adds BOS itself), rendered locally and generated through the engine's raw completion endpoint",
            )),
            Rule::StopInReasoning | Rule::StopReasonMismatch => stop_fix(cx),
            Rule::ToolChoiceNamedIgnored => named_fix(cx),
            Rule::ToolChoiceRequiredIgnored => cut
                .then(|| limit_fix(cx))
                .flatten()
                .or_else(|| named_fix(cx)),
            Rule::ToolChoiceNoneIgnored => none_fix(cx),
            Rule::ToolCallArgsInvalidJson | Rule::ToolCallLeakedAsText | Rule::FinishMismatch
                if cut =>
            {
                limit_fix(cx)
            }
            Rule::ServerParseError => parser_fix(cx),
            _ => None,
        };
    }
}

/// Fix `id` built from the request alone, for `toolscope try --fix ID` on an exchange whose
/// findings do not carry it: `template` (the user names the template), `stop_client_side`
/// (when the request has stop strings), `force_named_tool` (a named tool_choice), `other_api`
/// (an Anthropic request), `drop_tools` (a request with tools), `max_tokens` (4× the request's
/// limit, at least 256; 4096 without one). `None` when it does not apply (or needs the
/// exchange's render or raw text: `flatten_schemas`, `other_parser`). `template`: the
/// session's chat template source, which gives the call opener of `force_named_tool` and
/// `other_api` ([`call_opener`]).
pub fn by_id(id: &str, api: Api, request: &Value, template: Option<&str>) -> Option<Fix> {
    let cx = ExchangeContext {
        request: Some(request.clone()),
        template: template.map(str::to_owned),
        ..ExchangeContext::new(api)
    };
    match id {
        "template" => Some(Fix::new(
            Edit::Template {
                template: None,
                drop_bos: false,
            },
            "another chat template (named with --template), rendered locally under the engine's profile and generated through its raw completion endpoint",
        )),
        "stop_client_side" => stop_fix(&cx),
        "force_named_tool" => named_fix(&cx),
        "other_api" if api == Api::Anthropic => Some(other_api_fix(&cx)),
        "drop_tools" if request.get("tools").is_some() => Some(Fix::new(
            Edit::DropTools,
            "the request's `tools` (and `tool_choice`) removed",
        )),
        "max_tokens" => limit_fix(&cx),
        _ => None,
    }
}

/// True when the reply was cut by the token limit: finish reason `length` / `max_tokens` /
/// `max_output_tokens`, or a reply reported otherwise whose usage reached the request's limit
/// or whose arguments end mid-JSON.
pub fn cut_by_limit(cx: &ExchangeContext) -> bool {
    let Some(m) = &cx.message else {
        return false;
    };
    matches!(
        m.finish_reason.as_deref(),
        Some("length" | "max_tokens" | "max_output_tokens")
    ) || crate::diagnose::rules::finish::truncated(cx, m)
}

/// The Responses API's request (`max_output_tokens`, `input`), recognised by its fields.
fn is_responses(req: &Value) -> bool {
    req.get("input").is_some() && req.get("messages").is_none()
}

/// `schema.*`: the flattener's ranked rewrite for the exchange's template, when it keeps more
/// of the schema than the tools as sent.
fn flatten_fix(cx: &ExchangeContext) -> Option<Fix> {
    let req = cx.request.as_ref()?;
    let template = cx.template.as_deref()?;
    let bos = cx.bos_token.as_deref();
    let render = |doc: &Value| {
        crate::schema::rank::render_template(
            template,
            &crate::schema::rank::as_request(doc),
            bos,
            None,
        )
    };
    let (ranking, _) = crate::schema::rank::rank_strategies(
        req,
        &crate::schema::flatten::FlattenOptions::default(),
        render,
    )
    .ok()?;
    let best = ranking.ranked.first()?;
    let (Some(after), Some(strategy)) = (best.score, best.strategy) else {
        return None;
    };
    let before = ranking.baseline.score;
    if before.is_some_and(|b| after >= b) {
        return None;
    }
    Some(Fix::new(
        Edit::FlattenSchemas {
            strategy: strategy.name().to_owned(),
            loss_as_sent: before,
            loss_flattened: Some(after),
        },
        format!(
            "the tool schemas flattened with strategy {strategy} ({}), ranked best on this template: weighted loss {} → {after}; the request re-sent",
            strategy.summary(),
            before.map_or_else(|| "render error".to_owned(), |b| b.to_string()),
        ),
    ))
}

/// `stop.*`: the request's stop strings moved to the client.
fn stop_fix(cx: &ExchangeContext) -> Option<Fix> {
    let stop: Vec<String> = request::stop_strings(cx.request_or_null())
        .into_iter()
        .map(|(s, _)| s)
        .collect();
    if stop.is_empty() {
        return None;
    }
    let field = if cx.api == Api::Anthropic {
        "stop_sequences"
    } else {
        "stop"
    };
    Some(Fix::new(
        Edit::StopClientSide { stop: stop.clone() },
        format!(
            "`{field}` {stop:?} removed from the request (the engine searches it in the reasoning too); the client cuts the answer at it, after the reasoning"
        ),
    ))
}

/// The text that opens a tool call in `template`'s call format, as llama-server b11434's
/// tool-call grammar for it accepts it (common/chat-auto-parser-generator.cpp: the section
/// literal, then optional whitespace, then the call's JSON): Hermes `<tool_call>\n`. `None` for
/// the other formats (their grammars are not checked here).
pub fn call_opener(template: Option<&str>) -> Option<&'static str> {
    match crate::parser::Syntax::detect_from_template(template?)? {
        crate::parser::Syntax::Hermes => Some("<tool_call>\n"),
        _ => None,
    }
}

/// The call opener to prefill for `cx`'s request ([`call_opener`] of its template), or why
/// none: only a `messages` array whose last entry is not already an assistant message can take
/// a final assistant message (a request that ends with one is already a prefill, and the
/// engine continues that text instead; a Responses `input` carries none).
fn prefill_for(cx: &ExchangeContext) -> Result<&'static str, &'static str> {
    let opener = call_opener(cx.template.as_deref())
        .ok_or(", no call opener known for this template (text may come before the forced call)")?;
    let messages = cx
        .request_or_null()
        .get("messages")
        .and_then(serde_json::Value::as_array)
        .ok_or(", no call opener prefilled (the request has no `messages` to end with one; text may come before the forced call)")?;
    if messages
        .last()
        .and_then(|m| m.get("role"))
        .and_then(serde_json::Value::as_str)
        == Some("assistant")
    {
        return Err(
            ", no call opener prefilled (the request already ends with an assistant message, which the engine continues; text may come before the forced call)",
        );
    }
    Ok(opener)
}

/// What the prefill adds to a fix's description.
fn prefill_note(prefill: Result<&str, &str>) -> String {
    match prefill {
        Ok(p) => format!(
            ", and the call opener {p:?} prefilled as a final assistant message, so the engine's non-lazy tool-call grammar (fed the prefill) can only complete a call"
        ),
        Err(why) => why.to_owned(),
    }
}

/// A named tool_choice the engine did not honour: only that tool, a call forced, its opener
/// prefilled.
fn named_fix(cx: &ExchangeContext) -> Option<Fix> {
    let ToolChoice::Named(tool) = ToolChoice::from_request(cx.api, cx.request_or_null()) else {
        return None;
    };
    if !cx.tool_names().contains(&tool) {
        return None;
    }
    let forced = match cx.api {
        Api::Anthropic => "tool_choice {\"type\":\"any\"}",
        _ => "tool_choice \"required\"",
    };
    let prefill = prefill_for(cx);
    Some(Fix::new(
        Edit::ForceNamedTool {
            tool: tool.clone(),
            prefill: prefill.ok().map(str::to_owned),
        },
        format!(
            "only {tool:?} offered in `tools`, with {forced}{} (llama-server b11434 reads no named tool_choice on either API)",
            prefill_note(prefill)
        ),
    ))
}

/// An Anthropic request through `/v1/chat/completions`; a named choice as only that tool,
/// `"required"` and the call opener prefilled (b11434's chat endpoint reads no object).
fn other_api_fix(cx: &ExchangeContext) -> Fix {
    let choice = ToolChoice::from_request(cx.api, cx.request_or_null());
    let (tool, prefill, how) = match &choice {
        ToolChoice::Named(t) if cx.tool_names().contains(t) => {
            let prefill = prefill_for(cx);
            (
                Some(t.clone()),
                prefill.ok(),
                format!(
                    "only {t:?} offered, tool_choice \"required\"{} (llama-server b11434's /v1/chat/completions reads tool_choice as a string only)",
                    prefill_note(prefill)
                ),
            )
        }
        _ => (
            None,
            None,
            format!(
                "tool_choice {} in OpenAI form",
                ToolChoice::describe(cx.request_or_null())
            ),
        ),
    };
    Fix::new(
        Edit::OtherApi {
            path: "/v1/chat/completions".into(),
            tool,
            prefill: prefill.map(str::to_owned),
        },
        format!(
            "the same request through /v1/chat/completions (converted as the engine converts it), {how}"
        ),
    )
}

/// `tool_choice: none` the engine did not honour.
fn none_fix(cx: &ExchangeContext) -> Option<Fix> {
    match cx.api {
        Api::Anthropic => Some(Fix::new(
            Edit::OtherApi {
                path: "/v1/chat/completions".into(),
                tool: None,
                prefill: None,
            },
            "the same request through /v1/chat/completions (converted), where tool_choice \"none\" is read (llama-server b11434's /v1/messages conversion drops {\"type\":\"none\"})",
        )),
        Api::Openai | Api::Ollama => Some(Fix::new(
            Edit::DropTools,
            "the request's `tools` removed: with tool_choice none no tool may be called, so none is printed in the prompt",
        )),
        _ => None,
    }
}

/// A larger token limit for a reply the limit cut.
fn limit_fix(cx: &ExchangeContext) -> Option<Fix> {
    let req = cx.request.as_ref()?;
    let (field, from) = limit_field(cx.api, req);
    let to = from.map_or(4096, |n| (n.saturating_mul(4)).max(256));
    Some(Fix::new(
        Edit::MaxTokens {
            field: field.to_owned(),
            from,
            to,
        },
        match from {
            Some(n) => {
                format!("`{field}` raised from {n} to {to}: the reply was cut by the token limit")
            }
            None => {
                format!("`{field}` set to {to}: the reply was cut by the engine's own token limit")
            }
        },
    ))
}

/// The request's token-limit field for `api` and its value: OpenAI `max_completion_tokens`
/// when the request uses it, else `max_tokens`; Anthropic `max_tokens`; Responses
/// `max_output_tokens`; Ollama `options.num_predict`; raw completions `n_predict` /
/// `max_tokens`.
pub fn limit_field(api: Api, req: &Value) -> (&'static str, Option<u64>) {
    let get = |k: &str| req.get(k).and_then(Value::as_u64);
    if is_responses(req) {
        return ("max_output_tokens", get("max_output_tokens"));
    }
    match api {
        Api::Ollama => (
            "options.num_predict",
            req.pointer("/options/num_predict").and_then(Value::as_u64),
        ),
        Api::Openai if req.get("max_completion_tokens").is_some() => {
            ("max_completion_tokens", get("max_completion_tokens"))
        }
        Api::Completion if req.get("n_predict").is_some() => ("n_predict", get("n_predict")),
        _ => ("max_tokens", request::max_tokens(req)),
    }
}

/// `server.parse_error`: who reads a call from the raw text the server's parser rejected.
fn parser_fix(cx: &ExchangeContext) -> Option<Fix> {
    use crate::parser::engines::{Outcome, expected_with, family_for};
    let text = cx.raw_text.as_deref().filter(|t| !t.trim().is_empty())?;
    let tools = cx.request.as_ref().and_then(|r| r.get("tools"));
    let chosen = cx
        .template
        .as_deref()
        .and_then(crate::parser::Syntax::detect_from_template);
    let read = crate::parser::parse(text, chosen, tools);
    let family = family_for(chosen, &read, text)?;
    let (ours, engines) = expected_with(family, text, tools, cx.llama_prompt.as_ref());
    // the recorded server's own parser rejected this text (that is the finding): another
    // engine's is the fix, even where the model of the server's parser reads a call
    let server = cx
        .engine
        .as_ref()
        .and_then(super::ServerParser::parser_engine);
    if let Some(e) = engines.iter().find(|e| {
        Some(e.engine) != server
            && matches!(&e.outcome, Outcome::Calls { tool_calls, .. } if !tool_calls.is_empty())
    }) {
        let parser = e.parser.unwrap_or("?");
        return Some(Fix::new(
            Edit::OtherParser {
                engine: e.engine.name().to_owned(),
                parser: parser.to_owned(),
            },
            format!(
                "the raw text read by {}'s {parser} parser: {}",
                e.engine.name(),
                e.outcome.summary()
            ),
        ));
    }
    if ours.tool_calls.is_empty() {
        return None;
    }
    Some(Fix::new(
        Edit::OtherParser {
            engine: "toolscope".into(),
            parser: family.name().to_owned(),
        },
        format!(
            "the raw text read client-side by toolscope's tolerant {} parser ({}{}): no engine's parser reads it",
            family.name(),
            crate::parser::engines::calls_summary(&ours.tool_calls),
            if ours.repairs.is_empty() {
                String::new()
            } else {
                format!(", {} repair(s)", ours.repairs.len())
            }
        ),
    ))
}
