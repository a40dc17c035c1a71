//! Findings: what every analysis stage reports, in one shape.
//!
//! JSON shape (the `findings` array of `toolscope check --format json`):
//! `{"rule": "schema.type_lost", "severity": "warning", "exchange": 1, "message": "…",
//!   "evidence": {"pane": "schema", "pointer": "/properties/quantity", …}, "hint": "…"}`.

use serde::{Deserialize, Serialize};

/// How bad a finding is. `check` exits 1 when any finding is `warning` or `error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Info,
    Warning,
    Error,
}

/// Every rule toolscope knows, with its stable id (`Rule::id`) and default severity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Rule {
    #[serde(rename = "schema.type_lost")]
    SchemaTypeLost,
    #[serde(rename = "schema.alternative_dropped")]
    SchemaAlternativeDropped,
    #[serde(rename = "schema.ref_unresolved")]
    SchemaRefUnresolved,
    #[serde(rename = "template.render_error")]
    TemplateRenderError,
    #[serde(rename = "template.engine_divergence")]
    TemplateEngineDivergence,
    #[serde(rename = "token.pseudo_special")]
    TokenPseudoSpecial,
    #[serde(rename = "token.special_split")]
    TokenSpecialSplit,
    #[serde(rename = "bos.duplicate")]
    BosDuplicate,
    #[serde(rename = "stop.in_reasoning")]
    StopInReasoning,
    #[serde(rename = "stop.reason_mismatch")]
    StopReasonMismatch,
    #[serde(rename = "tool_choice.named_ignored")]
    ToolChoiceNamedIgnored,
    #[serde(rename = "tool_choice.none_ignored")]
    ToolChoiceNoneIgnored,
    #[serde(rename = "tool_choice.required_ignored")]
    ToolChoiceRequiredIgnored,
    #[serde(rename = "tool_call.leaked_as_text")]
    ToolCallLeakedAsText,
    #[serde(rename = "tool_call.args_invalid_json")]
    ToolCallArgsInvalidJson,
    #[serde(rename = "tool_call.args_schema_mismatch")]
    ToolCallArgsSchemaMismatch,
    #[serde(rename = "tool_call.args_not_string")]
    ToolCallArgsNotString,
    #[serde(rename = "tool_call.unknown_tool")]
    ToolCallUnknownTool,
    #[serde(rename = "tool_call.hallucinated_result")]
    ToolCallHallucinatedResult,
    #[serde(rename = "content.protocol_marker")]
    ContentProtocolMarker,
    #[serde(rename = "stream.missing_index")]
    StreamMissingIndex,
    #[serde(rename = "stream.missing_id")]
    StreamMissingId,
    #[serde(rename = "stream.name_repeated")]
    StreamNameRepeated,
    #[serde(rename = "stream.error_event")]
    StreamErrorEvent,
    #[serde(rename = "stream.sequence_gap")]
    StreamSequenceGap,
    #[serde(rename = "stream.no_terminal")]
    StreamNoTerminal,
    #[serde(rename = "stream.after_terminal")]
    StreamAfterTerminal,
    #[serde(rename = "stream.malformed_event")]
    StreamMalformedEvent,
    #[serde(rename = "stream.cut_event")]
    StreamCutEvent,
    #[serde(rename = "tool_call.args_done_mismatch")]
    ToolCallArgsDoneMismatch,
    #[serde(rename = "input.tool_dropped")]
    InputToolDropped,
    #[serde(rename = "input.request_refused")]
    InputRequestRefused,
    #[serde(rename = "finish.mismatch")]
    FinishMismatch,
    #[serde(rename = "parser.chunking_divergence")]
    ParserChunkingDivergence,
    #[serde(rename = "server.parse_error")]
    ServerParseError,
    #[serde(rename = "server.call_mismatch")]
    ServerCallMismatch,
    #[serde(rename = "loop.call_unanswered")]
    LoopCallUnanswered,
    #[serde(rename = "loop.result_unknown_id")]
    LoopResultUnknownId,
    #[serde(rename = "loop.repeated_call")]
    LoopRepeatedCall,
    #[serde(rename = "loop.result_unrendered")]
    LoopResultUnrendered,
    #[serde(rename = "input.message_dropped")]
    InputMessageDropped,
    #[serde(rename = "cache.prefix_changed")]
    CachePrefixChanged,
    #[serde(rename = "session.damaged")]
    SessionDamaged,
    #[serde(rename = "request.body_undecodable")]
    RequestBodyUndecodable,
}

impl Rule {
    /// All rules, in documentation order.
    pub const ALL: &'static [Rule] = &[
        Rule::SchemaTypeLost,
        Rule::SchemaAlternativeDropped,
        Rule::SchemaRefUnresolved,
        Rule::TemplateRenderError,
        Rule::TemplateEngineDivergence,
        Rule::TokenPseudoSpecial,
        Rule::TokenSpecialSplit,
        Rule::BosDuplicate,
        Rule::StopInReasoning,
        Rule::StopReasonMismatch,
        Rule::ToolChoiceNamedIgnored,
        Rule::ToolChoiceNoneIgnored,
        Rule::ToolChoiceRequiredIgnored,
        Rule::ToolCallLeakedAsText,
        Rule::ToolCallArgsInvalidJson,
        Rule::ToolCallArgsSchemaMismatch,
        Rule::ToolCallArgsNotString,
        Rule::ToolCallUnknownTool,
        Rule::ToolCallHallucinatedResult,
        Rule::ContentProtocolMarker,
        Rule::StreamMissingIndex,
        Rule::StreamMissingId,
        Rule::StreamNameRepeated,
        Rule::StreamErrorEvent,
        Rule::StreamSequenceGap,
        Rule::StreamNoTerminal,
        Rule::StreamAfterTerminal,
        Rule::StreamMalformedEvent,
        Rule::StreamCutEvent,
        Rule::ToolCallArgsDoneMismatch,
        Rule::InputToolDropped,
        Rule::InputRequestRefused,
        Rule::FinishMismatch,
        Rule::ParserChunkingDivergence,
        Rule::ServerParseError,
        Rule::ServerCallMismatch,
        Rule::LoopCallUnanswered,
        Rule::LoopResultUnknownId,
        Rule::LoopRepeatedCall,
        Rule::LoopResultUnrendered,
        Rule::InputMessageDropped,
        Rule::CachePrefixChanged,
        Rule::SessionDamaged,
        Rule::RequestBodyUndecodable,
    ];

    /// The stable id, e.g. `"schema.type_lost"`.
    pub fn id(self) -> &'static str {
        match self {
            Rule::SchemaTypeLost => "schema.type_lost",
            Rule::SchemaAlternativeDropped => "schema.alternative_dropped",
            Rule::SchemaRefUnresolved => "schema.ref_unresolved",
            Rule::TemplateRenderError => "template.render_error",
            Rule::TemplateEngineDivergence => "template.engine_divergence",
            Rule::TokenPseudoSpecial => "token.pseudo_special",
            Rule::TokenSpecialSplit => "token.special_split",
            Rule::BosDuplicate => "bos.duplicate",
            Rule::StopInReasoning => "stop.in_reasoning",
            Rule::StopReasonMismatch => "stop.reason_mismatch",
            Rule::ToolChoiceNamedIgnored => "tool_choice.named_ignored",
            Rule::ToolChoiceNoneIgnored => "tool_choice.none_ignored",
            Rule::ToolChoiceRequiredIgnored => "tool_choice.required_ignored",
            Rule::ToolCallLeakedAsText => "tool_call.leaked_as_text",
            Rule::ToolCallArgsInvalidJson => "tool_call.args_invalid_json",
            Rule::ToolCallArgsSchemaMismatch => "tool_call.args_schema_mismatch",
            Rule::ToolCallArgsNotString => "tool_call.args_not_string",
            Rule::ToolCallUnknownTool => "tool_call.unknown_tool",
            Rule::ToolCallHallucinatedResult => "tool_call.hallucinated_result",
            Rule::ContentProtocolMarker => "content.protocol_marker",
            Rule::StreamMissingIndex => "stream.missing_index",
            Rule::StreamMissingId => "stream.missing_id",
            Rule::StreamNameRepeated => "stream.name_repeated",
            Rule::StreamErrorEvent => "stream.error_event",
            Rule::StreamSequenceGap => "stream.sequence_gap",
            Rule::StreamNoTerminal => "stream.no_terminal",
            Rule::StreamAfterTerminal => "stream.after_terminal",
            Rule::StreamMalformedEvent => "stream.malformed_event",
            Rule::StreamCutEvent => "stream.cut_event",
            Rule::ToolCallArgsDoneMismatch => "tool_call.args_done_mismatch",
            Rule::InputToolDropped => "input.tool_dropped",
            Rule::InputRequestRefused => "input.request_refused",
            Rule::FinishMismatch => "finish.mismatch",
            Rule::ParserChunkingDivergence => "parser.chunking_divergence",
            Rule::ServerParseError => "server.parse_error",
            Rule::ServerCallMismatch => "server.call_mismatch",
            Rule::LoopCallUnanswered => "loop.call_unanswered",
            Rule::LoopResultUnknownId => "loop.result_unknown_id",
            Rule::LoopRepeatedCall => "loop.repeated_call",
            Rule::LoopResultUnrendered => "loop.result_unrendered",
            Rule::InputMessageDropped => "input.message_dropped",
            Rule::CachePrefixChanged => "cache.prefix_changed",
            Rule::SessionDamaged => "session.damaged",
            Rule::RequestBodyUndecodable => "request.body_undecodable",
        }
    }

    /// Looks a rule up by id.
    pub fn from_id(id: &str) -> Option<Rule> {
        Rule::ALL.iter().copied().find(|r| r.id() == id)
    }

    /// Default severity.
    pub fn severity(self) -> Severity {
        match self {
            Rule::TemplateEngineDivergence
            | Rule::TokenPseudoSpecial
            | Rule::ParserChunkingDivergence
            | Rule::SchemaAlternativeDropped
            | Rule::StreamNameRepeated
            | Rule::StreamAfterTerminal
            | Rule::InputToolDropped
            | Rule::CachePrefixChanged
            | Rule::LoopRepeatedCall => Severity::Warning,
            Rule::SessionDamaged | Rule::RequestBodyUndecodable => Severity::Warning,
            _ => Severity::Error,
        }
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.id())
    }
}

/// The inspector pane a piece of evidence lives in (Enter on a finding jumps there).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pane {
    Tools,
    Schema,
    Template,
    Stream,
    Replay,
    Findings,
}

impl Pane {
    /// The inspector's detail panes in tab order (keys `1`–`6`).
    pub const ALL: [Pane; 6] = [
        Pane::Tools,
        Pane::Schema,
        Pane::Template,
        Pane::Stream,
        Pane::Replay,
        Pane::Findings,
    ];

    /// 0-based tab position (index into [`Pane::ALL`] and the inspector's per-pane arrays).
    pub fn index(self) -> usize {
        Pane::ALL.iter().position(|&p| p == self).unwrap_or(0)
    }

    /// The next pane in tab order (after Findings: Tools).
    pub fn next(self) -> Pane {
        Pane::ALL[(self.index() + 1) % Pane::ALL.len()]
    }

    /// The previous pane in tab order (before Tools: Findings).
    pub fn prev(self) -> Pane {
        Pane::ALL[(self.index() + Pane::ALL.len() - 1) % Pane::ALL.len()]
    }
}

/// How the Replay pane and `parser.chunking_divergence` cut the replayed text into the chunks
/// fed to toolscope's streaming parser. One list for both, so a finding names the chunking its
/// step counts in and Enter opens that chunking.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Chunking {
    /// As the server streamed it (one chunk per SSE event that added text).
    Recorded,
    /// One chunk per sampled token piece, when the stream lists them (OpenAI `logprobs`:
    /// `choices[0].logprobs.content[].token`; llama-server `/completion` with `n_probs`:
    /// `completion_probabilities[].token`).
    PerPiece,
    /// One chunk per character.
    PerChar,
    /// Every 2 recorded chunks joined.
    Every2,
    /// Every 8 recorded chunks joined.
    Every8,
    /// The whole text at once (the one-shot parse every other chunking is compared with).
    Whole,
}

impl Chunking {
    /// All chunkings, in the Replay pane's `c` order.
    pub const ALL: [Chunking; 6] = [
        Chunking::Recorded,
        Chunking::PerPiece,
        Chunking::PerChar,
        Chunking::Every2,
        Chunking::Every8,
        Chunking::Whole,
    ];

    /// Position in [`Chunking::ALL`].
    pub fn index(self) -> usize {
        Chunking::ALL.iter().position(|c| *c == self).unwrap_or(0)
    }

    /// Words for messages and the pane title: `recorded chunks`, `per token piece`, …
    pub fn label(self) -> &'static str {
        match self {
            Chunking::Recorded => "recorded chunks",
            Chunking::PerPiece => "per token piece",
            Chunking::PerChar => "per character",
            Chunking::Every2 => "every 2 chunks",
            Chunking::Every8 => "every 8 chunks",
            Chunking::Whole => "whole text",
        }
    }
}

/// Where a finding's evidence is. All fields optional; set what applies.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Evidence {
    /// Pane to jump to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pane: Option<Pane>,
    /// Tool name concerned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// JSON Pointer (RFC 6901) into the request body, a tool's parameters, or a response body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pointer: Option<String>,
    /// 0-based SSE event number in the response stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<usize>,
    /// 0-based byte offset (into the rendered prompt, the raw text, or the body; see `message`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<usize>,
    /// 0-based token index in the prompt's tokenization.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<usize>,
    /// 0-based parser replay step, counted in `chunking`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<usize>,
    /// The chunking `step` counts in (Replay pane).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunking: Option<Chunking>,
    /// Short excerpt of the text involved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excerpt: Option<String>,
    /// Input file the exchange came from (`toolscope check FILES…`: exchange ids repeat across
    /// files, so `exchange` + `file` names one exchange).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
}

/// One diagnosis.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    pub rule: Rule,
    pub severity: Severity,
    /// Exchange id within the session (`null` for a bare request/template check).
    #[serde(default)]
    pub exchange: Option<u64>,
    pub message: String,
    #[serde(default)]
    pub evidence: Evidence,
    /// One line on how to fix or work around it.
    pub hint: String,
    /// The change that should make the call work, as data (`toolscope try --fix ID` applies it
    /// against the engine); absent when the rule has none (docs/check.md says per rule). Set by
    /// [`crate::diagnose::fix::attach`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fix: Option<Fix>,
}

/// How a [`Fix`] is applied against the engine (`toolscope try`, the inspector's `x`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Apply {
    /// The request is changed ([`crate::analysis::whatif::fixed_request`]) and sent again to the
    /// engine's chat endpoint (through the recording proxy, as `resend` does).
    Resend,
    /// The prompt is rendered locally from another template under the engine's render profile
    /// and generated through the engine's raw completion endpoint with the recorded sampling
    /// (the `regenerate` path), then parsed under the server's call format.
    Regenerate,
    /// Nothing is sent: the recorded raw text is read by another engine's tool-call parser
    /// ([`crate::parser::engines`]).
    Reparse,
}

impl Apply {
    /// `resend`, `regenerate`, `reparse` (the JSON name).
    pub fn as_str(self) -> &'static str {
        match self {
            Apply::Resend => "resend",
            Apply::Regenerate => "regenerate",
            Apply::Reparse => "reparse",
        }
    }
}

/// What a fix changes, as data. The `id` is the name `toolscope try --fix ID` takes.
///
/// JSON: `{"id": "flatten_schemas", "strategy": "first-type-with-note", …}` (the fields of the
/// variant beside `id`), inside [`Fix`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "id", rename_all = "snake_case")]
pub enum Edit {
    /// The request's tool schemas flattened with `strategy` (the flattener's ranked rewrite for
    /// this template: [`crate::schema::rank::rank_strategies`]); `loss_as_sent` /
    /// `loss_flattened` are the weighted losses of the schema facts in the template's render.
    FlattenSchemas {
        strategy: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        loss_as_sent: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        loss_flattened: Option<u32>,
    },
    /// Another chat template: `template` names one (a corpus file) when toolscope knows one,
    /// else the user names it (`try --template SRC`); `drop_bos`: the session's template with
    /// the BOS text it prints at its start removed (the engine adds BOS itself).
    Template {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        template: Option<String>,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        drop_bos: bool,
    },
    /// The stop strings removed from the request (the engine searches them in the reasoning
    /// too); the client cuts the answer at them, after the reasoning.
    StopClientSide { stop: Vec<String> },
    /// Only the named tool offered, and a call forced (`tool_choice: "required"`, Anthropic
    /// `{"type": "any"}`): the form of a named tool_choice the engine honours. `prefill`: an
    /// assistant message appended to the request holding the template's call opener (Hermes
    /// `<tool_call>\n`), so the call comes first — llama-server (b11434 `tools/server/
    /// server-common.cpp` `oaicompat_chat_params_parse`) continues a final assistant message,
    /// and under `"required"` its tool-call grammar is not lazy and is fed that prefill
    /// (`common/sampling.cpp`, `common/chat-auto-parser-generator.cpp`), so the next tokens
    /// can only complete a call.
    ForceNamedTool {
        tool: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        prefill: Option<String>,
    },
    /// The same request through another API of the engine (`path`), converted as the engine
    /// converts it. For a named tool_choice (`tool`): only that tool offered, `"required"` and
    /// the call-opener `prefill` as in [`Edit::ForceNamedTool`] (llama-server b11434's
    /// `/v1/chat/completions` reads `tool_choice` as a string only).
    OtherApi {
        path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        prefill: Option<String>,
    },
    /// The request's `tools` removed (for `tool_choice: "none"`: no tool in the prompt).
    DropTools,
    /// A larger token limit: `field` (`max_tokens`, `max_completion_tokens`,
    /// `max_output_tokens`, Ollama `options.num_predict`) from `from` to `to`.
    MaxTokens {
        field: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from: Option<u64>,
        to: u64,
    },
    /// The raw text read by another engine's tool-call parser (`engine`: `vLLM`, `SGLang`,
    /// `toolscope`; `parser`: its `--tool-call-parser` name or toolscope's syntax).
    OtherParser { engine: String, parser: String },
}

impl Edit {
    /// The fix id (`flatten_schemas`, `template`, `stop_client_side`, `force_named_tool`,
    /// `other_api`, `drop_tools`, `max_tokens`, `other_parser`).
    pub fn id(&self) -> &'static str {
        match self {
            Edit::FlattenSchemas { .. } => "flatten_schemas",
            Edit::Template { .. } => "template",
            Edit::StopClientSide { .. } => "stop_client_side",
            Edit::ForceNamedTool { .. } => "force_named_tool",
            Edit::OtherApi { .. } => "other_api",
            Edit::DropTools => "drop_tools",
            Edit::MaxTokens { .. } => "max_tokens",
            Edit::OtherParser { .. } => "other_parser",
        }
    }

    /// Every fix id, in documentation order.
    pub const IDS: &'static [&'static str] = &[
        "flatten_schemas",
        "template",
        "stop_client_side",
        "force_named_tool",
        "other_api",
        "drop_tools",
        "max_tokens",
        "other_parser",
    ];

    /// How this edit is applied.
    pub fn apply(&self) -> Apply {
        match self {
            Edit::Template { .. } => Apply::Regenerate,
            Edit::OtherParser { .. } => Apply::Reparse,
            _ => Apply::Resend,
        }
    }
}

/// A fix attached to a finding: what it changes (`change`, one line), how it is applied, and
/// the change as data. JSON (`check --format json`):
/// `"fix": {"id": "stop_client_side", "stop": ["The"], "apply": "resend", "change": "…"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fix {
    #[serde(flatten)]
    pub edit: Edit,
    pub apply: Apply,
    /// What it changes, in words.
    pub change: String,
}

impl Fix {
    /// A fix for `edit` described by `change`.
    pub fn new(edit: Edit, change: impl Into<String>) -> Fix {
        Fix {
            apply: edit.apply(),
            edit,
            change: change.into(),
        }
    }

    /// The fix id ([`Edit::id`]).
    pub fn id(&self) -> &'static str {
        self.edit.id()
    }
}

impl Finding {
    /// A finding with the rule's default severity and empty evidence.
    pub fn new(rule: Rule, message: impl Into<String>, hint: impl Into<String>) -> Finding {
        Finding {
            rule,
            severity: rule.severity(),
            exchange: None,
            message: message.into(),
            evidence: Evidence::default(),
            hint: hint.into(),
            fix: None,
        }
    }

    /// Sets the evidence.
    pub fn with_evidence(mut self, evidence: Evidence) -> Finding {
        self.evidence = evidence;
        self
    }

    /// Sets the exchange id.
    pub fn in_exchange(mut self, id: Option<u64>) -> Finding {
        self.exchange = id;
        self
    }
}
