//! Tolerant incremental tool-call parsing of raw model text, with a replayable trace. Pure.

pub mod types;

pub use types::{Malformed, ParseOutput, ParsedCall, Repair};
