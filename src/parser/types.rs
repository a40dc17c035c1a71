//! Output types of the tool-call parser (shape of `toolscope parse --format json`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One recognised tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParsedCall {
    pub name: String,
    /// Arguments as a JSON value (object for every known syntax).
    pub arguments: Value,
    /// Syntax name the call was written in (e.g. `hermes`, `gemma4`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub syntax: Option<String>,
    /// Byte range `[start, end)` of the call markup in the raw text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span: Option<(usize, usize)>,
    /// Call id written by the model (Mistral `[CALL_ID]`, Kimi `functions.N:IDX`, JSON `"id"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

/// A drift the parser accepted, made visible.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Repair {
    /// Stable kind, e.g. `stray_closer`, `parameters_for_arguments`, `input_for_arguments`,
    /// `top_level_arguments`, `function_wrapper`, `bare_json`, `degenerated_to_string`.
    pub kind: String,
    /// What was done, in words.
    pub message: String,
    /// Byte offset in the raw text.
    pub offset: usize,
}

/// Call-like markup that did not parse (kept as text).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Malformed {
    /// Syntax it looked like.
    pub syntax: String,
    pub message: String,
    /// Byte offset in the raw text.
    pub offset: usize,
    /// The text that failed.
    pub text: String,
}

/// Result of parsing a whole raw text.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ParseOutput {
    pub content: String,
    pub reasoning: String,
    pub tool_calls: Vec<ParsedCall>,
    pub malformed: Vec<Malformed>,
    pub repairs: Vec<Repair>,
}
