//! The recorder: reverse proxy, direct sends, and the llama-server API client. Network I/O
//! lives here (and in the TUI), never in the analysis modules.
//!
//! * [`proxy`] — the recording reverse proxy (`toolscope proxy`).
//! * [`send`] — one direct request, recorded the same way (`toolscope send`).
//! * [`recorder`] — exchange bookkeeping, the session writer thread, live [`RecordEvent`]s.
//! * [`llama`] — start/stop a real llama-server (end-to-end tests, recordings).
//! * [`client`] — llama-server's inspection endpoints (`/props`, `/apply-template`, `/tokenize`).
//! * [`anthropic`] — llama-server's Anthropic → OpenAI body conversion, for `/apply-template`.
//! * [`spill`] — bounded memory for recorded bodies (temporary file beyond 1 MiB).
//! * [`summary`] — one-line exchange summaries (`--headless`).
//! * [`serve`] — answers requests from a recorded session (`toolscope serve`).
//! * [`websocket`] — WebSocket pass-through and recording (the Responses API's WebSocket mode).

pub mod anthropic;
pub mod client;
pub mod llama;
pub mod probe;
pub mod proxy;
pub mod recorder;
pub mod resend;
pub mod send;
pub mod serve;
pub mod spill;
pub mod summary;
pub mod websocket;

pub use recorder::RecordEvent;
pub mod regenerate;
