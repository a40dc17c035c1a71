//! The recorder: reverse proxy, direct sends, and the llama-server API client. Network I/O
//! lives here (and in the TUI), never in the analysis modules.

pub mod client;
pub mod probe;
