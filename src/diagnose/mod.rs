//! Diagnostics: findings over one exchange (request, response, stream, raw text, render,
//! tokens). Pure: takes data, returns [`crate::Finding`]s.
//!
//! The unit is an [`ExchangeContext`]: everything known about one request/response pair,
//! however it was obtained (a session line, a HAR entry, a bare pair of files, a probe).
//! [`check_exchange`] runs every rule that has the data it needs and returns the findings in
//! pipeline order (tokens, server, stream, stop, tool_choice, tool calls, finish).
//! The context is assembled by [`crate::analysis::facts`], its only writer; diagnose only
//! judges it. [`input`] judges the input itself (damaged lines, unreadable bodies, stream
//! error events); [`report`] shapes `toolscope check` output; [`probe`] holds the probe
//! controls and their verdicts.

use serde_json::Value;

use crate::finding::{Evidence, Finding, Pane};
use crate::session::{Api, TokenPiece};
use crate::stream::AssistantMessage;

pub mod compare;
pub mod fix;
pub mod history;
pub mod input;
pub mod markup;
pub mod probe;
pub mod report;
pub mod request;
pub mod rules;

/// Everything known about one exchange: the rules' only input. Assembled by
/// [`crate::analysis::facts`], its only writer (which table says where each field comes from);
/// the rules read it. Only `api` is required; each rule uses what is set.
#[derive(Debug, Clone)]
pub struct ExchangeContext {
    /// Exchange id within its session (1-based; 1 for `check`'s bare input).
    pub id: Option<u64>,
    /// API the exchange speaks.
    pub api: Api,
    /// The server behind the exchange (the session header's `engine.kind`: llama-server,
    /// vLLM, Ollama, SGLang, `unknown`), `None` when not known (a bare pair).
    pub engine: Option<crate::session::ServerKind>,
    /// Request body (JSON).
    pub request: Option<Value>,
    /// HTTP status of the response, when there was one.
    pub status: Option<u16>,
    /// A request that was never sent (`check --template T --request R` with no response):
    /// the schema pre-flight lint judges it. Not set for a partial exchange without response.
    pub preflight: bool,
    /// Non-streamed response body, when it is JSON.
    pub response_json: Option<Value>,
    /// Response body as text (error bodies, or a stream's concatenated chunks).
    pub response_text: Option<String>,
    /// The assistant message, reassembled from a stream or read from the JSON body.
    pub message: Option<AssistantMessage>,
    /// True when the response was a stream (evidence then names SSE events).
    pub streamed: bool,
    /// 0-based SSE event that carried `finish_reason` / `stop_reason`, for streams.
    pub finish_event: Option<usize>,
    /// Stream contract findings (`stream.*`, `server.parse_error`) from reassembly, passed
    /// through.
    pub stream_findings: Vec<Finding>,
    /// The stream's error events (OpenAI-style `data: {"error": …}`, Anthropic `event: error`,
    /// an Ollama `{"error": …}` line), judged by [`input::error_events`].
    pub stream_errors: Vec<crate::stream::reassemble::StreamProblem>,
    /// For streams: per entry of `message.tool_calls`, the SSE events that contributed to it.
    pub call_events: Vec<Vec<usize>>,
    /// For streams: per entry of `message.tool_calls`, the last SSE event that added to its
    /// arguments (the evidence of `tool_call.args_invalid_json`).
    pub args_events: Vec<Option<usize>>,
    /// For OpenAI streams: tool-call deltas whose arguments are not a string
    /// ([`crate::stream::Reassembled::args_not_string`]).
    pub args_not_string: Vec<crate::stream::reassemble::ArgsNotString>,
    /// Raw generated text before the server's parser (llama-server `-v` `__verbose.content`).
    /// For session exchanges: the model's own text per [`crate::stream::raw::raw_output`]
    /// (assistant prefill + generated text), see `raw`.
    pub raw_text: Option<String>,
    /// For session exchanges: what [`crate::stream::raw::raw_output`] says about the raw text
    /// (its source, or why it is missing and how to get it). `None` for bare pairs.
    pub raw: Option<crate::stream::raw::RawOutput>,
    /// The generation prompt llama.cpp parses in front of the raw text's generated part (the
    /// assistant prefill included), when known ([`crate::analysis::template::llama_prompt`]).
    pub llama_prompt: Option<crate::parser::engines::LlamaPrompt>,
    /// llama-server `__verbose.stopping_word`, when known.
    pub stopping_word: Option<String>,
    /// The server's render of the request (`/apply-template`).
    pub server_prompt: Option<String>,
    /// The server's tokenization of the prompt (`/tokenize` with pieces).
    pub server_tokens: Option<Vec<TokenPiece>>,
    /// Chat template source text, when given (`--template`, `/props`).
    pub template: Option<String>,
    /// The marker inventory of `template` (BOS `bos_token`), classified by role.
    pub template_markers: Option<std::sync::Arc<crate::tokens::markers::MarkerInventory>>,
    /// BOS token text (`/props` `bos_token`, tokenizer_config.json), when known.
    pub bos_token: Option<String>,
    /// BOS token id, when known (GGUF `tokenizer.ggml.bos_token_id`).
    pub bos_id: Option<u32>,
    /// toolscope's own render of the request, split by a vocabulary (`check --vocab`). When set,
    /// the token rules judge it instead of the server's render.
    pub vocab_render: Option<VocabRender>,
    /// For streams: the generated text as the SSE events delivered it, one entry per event that
    /// carried text (OpenAI `delta.content`, Anthropic `text_delta`, `/completion` `content`).
    pub stream_chunks: Vec<StreamChunk>,
    /// For streams whose events list the sampled tokens (llama-server `/completion`
    /// `completion_probabilities[].token`): the token pieces in order.
    pub stream_pieces: Option<Vec<String>>,
}

/// The prompt toolscope rendered for an exchange's request and its tokenization by a
/// vocabulary (`check --template … --vocab …`).
#[derive(Debug, Clone, PartialEq)]
pub struct VocabRender {
    /// The rendered prompt.
    pub prompt: String,
    /// Its tokens (a zero-width BOS first when the engine adds one).
    pub tokens: Vec<crate::tokens::Token>,
    /// BOS id of the vocabulary, when known.
    pub bos_id: Option<u32>,
    /// BOS text of the vocabulary (or the template's `bos_token` for a server vocabulary).
    pub bos_text: Option<String>,
    /// The template text the prompt was rendered with (its markers imply the call syntax that
    /// `token.special_split` checks), when it was a template.
    pub template: Option<String>,
}

/// The text toolscope's parser replays for an exchange (`parser.chunking_divergence`, the
/// inspector's Replay pane), chosen by [`ExchangeContext::replay_text`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReplayText {
    /// The text.
    pub text: String,
    /// What it is, for messages: `raw output`, `streamed content`, `returned content`.
    pub what: &'static str,
    /// Where it came from and what is missing, for the pane's title line, e.g.
    /// `raw output: llama-server __verbose.content` or `streamed content (the model's raw
    /// output was not recorded: …)`.
    pub source: String,
    /// The recorded chunks: end byte offset in `text` and the SSE event that delivered the
    /// chunk, when known. One chunk `(text.len(), None)` when the text arrived whole.
    pub recorded: Vec<(usize, Option<usize>)>,
    /// Sampled token pieces that spell `text`, when the stream lists them.
    pub pieces: Option<Vec<String>>,
}

impl ReplayText {
    /// The recorded chunks as strings.
    pub fn chunks(&self) -> Vec<String> {
        let mut at = 0;
        self.recorded
            .iter()
            .map(|&(end, _)| {
                let c = self.text.get(at..end).unwrap_or("").to_owned();
                at = end;
                c
            })
            .collect()
    }
}

/// One text-carrying SSE event of a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamChunk {
    /// 0-based SSE event number.
    pub event: usize,
    /// The text it added.
    pub text: String,
}

impl ExchangeContext {
    /// An empty context for `api`.
    pub fn new(api: Api) -> ExchangeContext {
        ExchangeContext {
            id: None,
            api,
            engine: None,
            request: None,
            status: None,
            preflight: false,
            response_json: None,
            response_text: None,
            message: None,
            streamed: false,
            finish_event: None,
            stream_findings: Vec::new(),
            stream_errors: Vec::new(),
            call_events: Vec::new(),
            args_events: Vec::new(),
            args_not_string: Vec::new(),
            raw_text: None,
            raw: None,
            llama_prompt: None,
            stopping_word: None,
            server_prompt: None,
            server_tokens: None,
            template: None,
            template_markers: None,
            bos_token: None,
            bos_id: None,
            vocab_render: None,
            stream_chunks: Vec::new(),
            stream_pieces: None,
        }
    }

    /// The request body, or `null`.
    pub fn request_or_null(&self) -> &Value {
        static NULL: Value = Value::Null;
        self.request.as_ref().unwrap_or(&NULL)
    }

    /// Evidence pointing at the response's visible text.
    pub fn content_evidence(&self, offset: Option<usize>, excerpt: Option<String>) -> Evidence {
        let pointer = match (self.streamed, self.api) {
            (true, _) => None,
            (false, Api::Anthropic) => Some(
                self.block_pointer("text")
                    .unwrap_or_else(|| "/content".into()),
            ),
            (false, Api::Responses) => Some(
                self.output_pointer("message")
                    .map(|p| format!("{p}/content"))
                    .unwrap_or_else(|| "/output".into()),
            ),
            (false, _) => Some("/choices/0/message/content".into()),
        };
        Evidence {
            pane: Some(Pane::Stream),
            pointer,
            offset,
            excerpt,
            ..Default::default()
        }
    }

    /// Evidence pointing at the response's reasoning text.
    pub fn reasoning_evidence(&self, offset: Option<usize>, excerpt: Option<String>) -> Evidence {
        let pointer = match (self.streamed, self.api) {
            (true, _) => None,
            (false, Api::Anthropic) => Some(
                self.block_pointer("thinking")
                    .map(|p| format!("{p}/thinking"))
                    .unwrap_or_else(|| "/content".into()),
            ),
            (false, Api::Responses) => Some(
                self.output_pointer("reasoning")
                    .map(|p| format!("{p}/content"))
                    .unwrap_or_else(|| "/output".into()),
            ),
            (false, _) => {
                let has_rc = self
                    .response_json
                    .as_ref()
                    .and_then(|b| b.pointer("/choices/0/message/reasoning_content"))
                    .is_some();
                Some(if has_rc {
                    "/choices/0/message/reasoning_content".into()
                } else {
                    "/choices/0/message/reasoning".into()
                })
            }
        };
        Evidence {
            pane: Some(Pane::Stream),
            pointer,
            offset,
            excerpt,
            ..Default::default()
        }
    }

    /// Evidence pointing at the finish / stop reason.
    pub fn finish_evidence(&self) -> Evidence {
        let pointer = match (self.streamed, self.api) {
            (true, _) => None,
            (false, Api::Anthropic) => Some("/stop_reason".into()),
            (false, Api::Responses) => Some("/status".into()),
            (false, _) => Some("/choices/0/finish_reason".into()),
        };
        Evidence {
            pane: Some(Pane::Stream),
            pointer,
            event: self.finish_event,
            ..Default::default()
        }
    }

    /// Evidence pointing at tool call `i` (position in `message.tool_calls`).
    pub fn call_evidence(&self, i: usize, arguments: bool) -> Evidence {
        let m = self.message.as_ref();
        let call = m.and_then(|m| m.tool_calls.get(i));
        let pointer = match (self.streamed, self.api) {
            (true, _) => None,
            (false, Api::Anthropic) => {
                let block = call.and_then(|c| c.index).unwrap_or(i as u64);
                Some(if arguments {
                    format!("/content/{block}/input")
                } else {
                    format!("/content/{block}/name")
                })
            }
            (false, Api::Responses) => {
                // the call's position in `output` (function_call: arguments, custom: input)
                let item = call.and_then(|c| c.index).unwrap_or(i as u64);
                let custom = self
                    .response_json
                    .as_ref()
                    .and_then(|b| b.pointer(&format!("/output/{item}/type")))
                    .and_then(Value::as_str)
                    == Some("custom_tool_call");
                Some(match (arguments, custom) {
                    (true, false) => format!("/output/{item}/arguments"),
                    (true, true) => format!("/output/{item}/input"),
                    (false, _) => format!("/output/{item}/name"),
                })
            }
            (false, _) => Some(if arguments {
                format!("/choices/0/message/tool_calls/{i}/function/arguments")
            } else {
                format!("/choices/0/message/tool_calls/{i}/function/name")
            }),
        };
        let last_args = self.args_events.get(i).copied().flatten();
        let event = self
            .call_events
            .get(i)
            .and_then(|e| if arguments { e.last() } else { e.first() })
            .copied()
            .map(|e| if arguments { last_args.unwrap_or(e) } else { e });
        Evidence {
            pane: Some(Pane::Stream),
            pointer,
            event,
            tool: call.map(|c| c.name.clone()),
            ..Default::default()
        }
    }

    /// Pointer of the first Responses output item of type `ty` (`/output/2`).
    fn output_pointer(&self, ty: &str) -> Option<String> {
        let items = self.response_json.as_ref()?.get("output")?.as_array()?;
        let i = items
            .iter()
            .position(|b| b.get("type").and_then(Value::as_str) == Some(ty))?;
        Some(format!("/output/{i}"))
    }

    /// Pointer of the first Anthropic content block of type `ty`.
    fn block_pointer(&self, ty: &str) -> Option<String> {
        let blocks = self.response_json.as_ref()?.get("content")?.as_array()?;
        let i = blocks
            .iter()
            .position(|b| b.get("type").and_then(Value::as_str) == Some(ty))?;
        Some(format!("/content/{i}"))
    }

    /// Names of the tools the request offers.
    pub fn tool_names(&self) -> Vec<String> {
        request::tools(self.request_or_null())
            .into_iter()
            .map(|t| t.name)
            .collect()
    }

    /// True when the response is a failed HTTP status.
    pub fn failed(&self) -> bool {
        self.status.is_some_and(|s| s >= 400)
    }

    /// The text toolscope's parser replays: the model's raw output when recorded
    /// (`raw_text`; its recorded chunks are the stream's when the streamed content spells it,
    /// else one chunk), else the streamed content as the SSE events delivered it
    /// (`stream_chunks`), else the returned message's content (one chunk). Token pieces
    /// (`stream_pieces`) are kept when they spell the text (or, for streamed content, always:
    /// the re-cut moves them to character boundaries). Empty text when there is none.
    pub fn replay_text(&self) -> ReplayText {
        let streamed: String = self.stream_chunks.iter().map(|c| c.text.as_str()).collect();
        let per_event = || {
            let mut at = 0;
            self.stream_chunks
                .iter()
                .map(|c| {
                    at += c.text.len();
                    (at, Some(c.event))
                })
                .collect::<Vec<_>>()
        };
        let described = self
            .raw
            .as_ref()
            .map(crate::stream::raw::RawOutput::describe);
        let missing = described
            .as_deref()
            .unwrap_or("the model's raw output is missing");
        if let Some(raw) = self.raw_text.as_ref().filter(|r| !r.is_empty()) {
            let spelled = self
                .stream_pieces
                .as_ref()
                .filter(|p| p.concat() == *raw)
                .cloned();
            return ReplayText {
                recorded: if !streamed.is_empty() && streamed == *raw {
                    per_event()
                } else {
                    vec![(raw.len(), None)]
                },
                text: raw.clone(),
                what: "raw output",
                source: described
                    .clone()
                    .unwrap_or_else(|| "raw output: __verbose.content".into()),
                pieces: spelled,
            };
        }
        if !self.stream_chunks.is_empty() {
            return ReplayText {
                recorded: per_event(),
                text: streamed,
                what: "streamed content",
                source: format!("streamed content ({missing})"),
                pieces: self.stream_pieces.clone(),
            };
        }
        match self.message.as_ref().filter(|m| !m.content.is_empty()) {
            Some(m) if !self.failed() => ReplayText {
                recorded: vec![(m.content.len(), None)],
                text: m.content.clone(),
                what: "returned content",
                source: format!("returned content ({missing})"),
                pieces: None,
            },
            _ => ReplayText::default(),
        }
    }
}

/// Runs every rule on one exchange. Findings carry `exchange = cx.id`, in pipeline order:
/// schema loss in the server's render (`schema.*`), what the engine's Responses conversion drops
/// (`input.tool_dropped`), tokens (`bos.duplicate`, `token.special_split`, `token.pseudo_special`),
/// `server.parse_error`, passed-through `stream.*` (and `stream.error_event`),
/// `parser.chunking_divergence`, `stop.*`, `tool_choice.*`, `tool_call.*`,
/// `server.call_mismatch`, `finish.mismatch`. Each finding whose rule has a fix for this
/// exchange carries it ([`fix::attach`]).
pub fn check_exchange(cx: &ExchangeContext) -> Vec<Finding> {
    check_exchange_with(cx, &rules::replay::real_parser)
}

/// [`check_exchange`] with the streaming parser that `parser.chunking_divergence` replays the
/// stream through given by `record` (the seam tests use to inject a faulty parser).
pub fn check_exchange_with(cx: &ExchangeContext, record: &rules::replay::Recorder) -> Vec<Finding> {
    check_exchange_traced(cx, record).0
}

/// [`check_exchange_with`], also returning the parser traces `parser.chunking_divergence`
/// judged ([`rules::replay::traces_with`]; `None` without a text to replay), for the
/// inspector's Replay pane.
pub fn check_exchange_traced(
    cx: &ExchangeContext,
    record: &rules::replay::Recorder,
) -> (Vec<Finding>, Option<rules::replay::ReplayTraces>) {
    let traces = rules::replay::traces_with(cx, record);
    let mut out = Vec::new();
    out.extend(rules::input::dropped_tools(cx));
    out.extend(rules::schema::loss(cx));
    out.extend(rules::responses::tool_dropped(cx));
    out.extend(rules::responses::request_refused(cx));
    out.extend(rules::input::dropped_messages(cx));
    out.extend(rules::tokens::bos_duplicate(cx));
    out.extend(rules::tokens::markers(cx));
    out.extend(rules::server::parse_error(cx));
    out.extend(cx.stream_findings.iter().cloned());
    out.extend(input::error_events(&cx.stream_errors, &cx.stream_findings));
    if let Some(t) = &traces {
        out.extend(rules::replay::divergences(cx, t, record));
    }
    if cx.message.is_some() && !cx.failed() {
        out.extend(rules::stop::in_reasoning(cx));
        out.extend(rules::stop::reason_mismatch(cx));
    }
    // A raw completion has no tool-call contract (the text is the model's, unparsed).
    if cx.message.is_some() && !cx.failed() && cx.api != Api::Completion {
        out.extend(rules::choice::named_ignored(cx));
        out.extend(rules::choice::none_ignored(cx));
        out.extend(rules::choice::required_ignored(cx));
        out.extend(rules::calls::leaked_as_text(cx));
        out.extend(rules::calls::args(cx));
        out.extend(rules::calls::args_not_string(cx));
        out.extend(rules::calls::unknown_tool(cx));
        out.extend(rules::calls::hallucinated_result(cx));
        out.extend(rules::protocol::protocol_marker(cx));
        out.extend(rules::server::call_mismatch(cx));
        out.extend(rules::finish::mismatch(cx));
    }
    for f in &mut out {
        if f.exchange.is_none() {
            f.exchange = cx.id;
        }
    }
    fix::attach(cx, &mut out);
    // A request never sent, judged against the template it will be rendered with (the
    // schema pre-flight lint; its findings carry no fix, as when `check` ran it on its own).
    if cx.preflight
        && let (Some(request), Some(template)) = (&cx.request, &cx.template)
    {
        out.extend(
            crate::schema::preflight(request, template)
                .into_iter()
                .map(|f| {
                    let id = f.exchange.or(cx.id);
                    f.in_exchange(id)
                }),
        );
    }
    (out, traces)
}

/// The modelled tool-call parser of a recorded server ([`crate::parser::engines`]): the one
/// mapping from a server kind to the parser engine it runs.
pub trait ServerParser {
    /// llama-server → llama.cpp's parser, vLLM → vLLM's, SGLang → SGLang's; `None` for a server
    /// whose parser is not modelled (Ollama, others).
    fn parser_engine(&self) -> Option<crate::parser::engines::Engine>;
}

impl ServerParser for crate::session::ServerKind {
    fn parser_engine(&self) -> Option<crate::parser::engines::Engine> {
        use crate::parser::engines::Engine;
        use crate::session::ServerKind;
        match self {
            ServerKind::LlamaServer => Some(Engine::LlamaCpp),
            ServerKind::Vllm => Some(Engine::Vllm),
            ServerKind::Sglang => Some(Engine::Sglang),
            ServerKind::Ollama | ServerKind::Other(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::Rule;

    /// An OpenAI stream whose Hermes call marker arrives split over three chunks, and the
    /// server (tool calling off) passed it through as content.
    const SPLIT_STREAM: &str = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Checking. <to\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ol_c\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"all>{\\\"name\\\": \\\"get_time\\\", \\\"arguments\\\": {}}</tool_call>\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
        "data: [DONE]\n\n"
    );

    #[test]
    fn check_replays_streams_through_the_parser() {
        let mut cx = ExchangeContext::new(Api::Openai);
        crate::analysis::facts::set_stream(&mut cx, SPLIT_STREAM);
        assert_eq!(cx.stream_chunks.len(), 3, "{:?}", cx.stream_chunks);
        assert_eq!(cx.stream_chunks[2].event, 2);
        let rules_of = |f: &[Finding]| f.iter().map(|f| f.rule).collect::<Vec<_>>();
        // toolscope's parser holds `<to`: the re-cuts agree with the one-shot parse.
        let real = check_exchange(&cx);
        assert!(
            !rules_of(&real).contains(&Rule::ParserChunkingDivergence),
            "{real:?}"
        );
        // A parser that loses the split marker: check reports the divergence, with the SSE
        // event of the first differing step for the recorded cut (step 1 = event 1: "ol_c"
        // is released as content the one-shot parse never has).
        let bad = check_exchange_with(&cx, &rules::replay::tests::naive_parser);
        let rec = bad
            .iter()
            .find(|f| {
                f.rule == Rule::ParserChunkingDivergence && f.message.contains("per recorded chunk")
            })
            .unwrap_or_else(|| panic!("{bad:?}"));
        assert_eq!(
            (rec.evidence.step, rec.evidence.event),
            (Some(1), Some(1)),
            "{rec:?}"
        );
    }

    #[test]
    fn error_event_that_is_not_a_parse_failure() {
        let body = concat!(
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n",
            "data: {\"error\":{\"code\":500,\"message\":\"Context size has been exceeded.\",\"type\":\"exceed_context_size_error\"}}\n\n"
        );
        let mut cx = ExchangeContext::new(Api::Openai);
        crate::analysis::facts::set_stream(&mut cx, body);
        let f: Vec<Finding> = check_exchange(&cx)
            .into_iter()
            .filter(|f| f.rule == Rule::StreamErrorEvent)
            .collect();
        assert_eq!(f.len(), 1, "{:?}", check_exchange(&cx));
        assert_eq!(f[0].evidence.event, Some(1));
        assert_eq!(f[0].severity, crate::finding::Severity::Error);
        assert!(
            f[0].message.contains("Context size has been exceeded"),
            "{}",
            f[0].message
        );
        // A parse failure is server.parse_error, not also stream.error_event.
        let body = body.replace(
            "Context size has been exceeded.",
            "The model produced output that does not match the expected peg-native format",
        );
        let mut cx = ExchangeContext::new(Api::Openai);
        crate::analysis::facts::set_stream(&mut cx, &body);
        let rules: Vec<Rule> = check_exchange(&cx).iter().map(|f| f.rule).collect();
        assert!(rules.contains(&Rule::ServerParseError), "{rules:?}");
        assert!(!rules.contains(&Rule::StreamErrorEvent), "{rules:?}");
    }

    #[test]
    fn completion_stream_reassembles_as_completion() {
        // llama-server /completion stream shape (tools/server/server-task.cpp, build 11434).
        let body = concat!(
            "data: {\"index\":0,\"content\":\"Hello\",\"tokens\":[19556],\"stop\":false,\"id_slot\":-1,\"tokens_predicted\":1,\"tokens_evaluated\":5}\n\n",
            "data: {\"index\":0,\"content\":\" there\",\"tokens\":[665],\"stop\":false,\"id_slot\":-1,\"tokens_predicted\":2,\"tokens_evaluated\":5}\n\n",
            "data: {\"index\":0,\"content\":\"\",\"tokens\":[],\"stop\":true,\"stop_type\":\"eos\",\"stopping_word\":\"\",\"tokens_predicted\":3,\"tokens_evaluated\":5}\n\n"
        );
        let mut cx = ExchangeContext::new(Api::Completion);
        crate::analysis::facts::set_stream(&mut cx, body);
        let m = cx.message.as_ref().unwrap();
        assert_eq!(m.content, "Hello there");
        assert_eq!(m.finish_reason.as_deref(), Some("eos"));
        assert_eq!(cx.finish_event, Some(2));
        assert_eq!(cx.stream_chunks.len(), 2);
        assert!(check_exchange(&cx).is_empty(), "{:?}", check_exchange(&cx));
    }
}
