//! The recorder: reverse proxy, direct sends, and the llama-server API client. Network I/O
//! lives here (and in the TUI), never in the analysis modules.
//!
//! * [`proxy`] — the recording reverse proxy (`toolscope proxy`).
//! * [`send`] — one direct request, recorded the same way (`toolscope send`).
//! * [`recorder`] — exchange bookkeeping, the session writer thread, live [`RecordEvent`]s.
//! * [`annotate`] — what is fetched after an exchange ends: server render, slots, Ollama
//!   `/api/show`, engine learning, regenerations.
//! * [`llama`] — start/stop a real llama-server (end-to-end tests, recordings).
//! * [`client`] — llama-server's inspection endpoints (`/props`, `/apply-template`, `/tokenize`).
//! * [`anthropic`] — llama-server's Anthropic → OpenAI body conversion, for `/apply-template`.
//! * [`spill`] — bounded memory for recorded bodies (temporary file beyond 1 MiB).
//! * [`summary`] — one-line exchange summaries (`--headless`).
//! * [`serve`] — answers requests from a recorded session (`toolscope serve`).
//! * [`otlp`] — live traces (`proxy --otlp`): OTLP/HTTP spans sent as exchanges end.
//! * [`websocket`] — WebSocket pass-through and recording (the Responses API's WebSocket mode).

pub mod annotate;
pub mod anthropic;
pub mod client;
pub mod llama;
pub mod otlp;
pub mod probe;
pub mod proxy;
pub mod recorder;
pub mod resend;
pub mod send;
pub mod serve;
pub mod spill;
pub mod summary;
pub mod websocket;
pub mod whatif;

pub use recorder::RecordEvent;
pub mod regenerate;

/// The current UTC time as RFC 3339 with microseconds (`2026-11-29T18:32:18.123456Z`).
pub fn now_rfc3339() -> String {
    let fmt = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:6]Z"
    );
    time::OffsetDateTime::now_utc()
        .format(&fmt)
        .unwrap_or_default()
}
