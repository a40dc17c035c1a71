//! SSE decoding and reassembly of OpenAI `chat.completion.chunk` and Anthropic message
//! streams, and of Ollama's native NDJSON streams ([`ollama`]). Pure.
//!
//! Pipeline: recorded chunks → [`sse::SseDecoder`] (events with byte offsets, chunk index and
//! receive time) → [`reassemble`] (the final [`AssistantMessage`] plus stream-contract
//! findings). The server's tool calls are compared with toolscope's own parse of the raw text
//! in [`crate::diagnose::compare`].

pub mod message;
pub mod ollama;
pub mod raw;
pub mod reassemble;
pub mod responses;
pub mod sse;

pub use message::{AssistantMessage, CallRecord};
pub use reassemble::{
    EventDelta, EventMark, Reassembled, decode_exchange, is_event_stream, is_sse,
};
pub use sse::{SseDecoder, SseEvent};
