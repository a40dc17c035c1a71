//! SSE decoding and reassembly of OpenAI `chat.completion.chunk` and Anthropic message
//! streams. Pure.

pub mod message;

pub use message::{AssistantMessage, CallRecord};
