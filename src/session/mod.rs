//! Session files: what toolscope records and reopens.
//!
//! A session is an append-only JSON Lines file (`.jsonl`). Every line is one
//! JSON object with a `"type"` tag:
//!
//! * `header` — exactly one, first: format tag [`FORMAT`], creation time, upstream URL,
//!   detected engine, and for llama-server a verbatim snapshot of `GET /props`.
//! * `exchange` — one per HTTP request/response pair, written whole when the exchange ends
//!   (complete, cancelled by the client, or failed upstream). A crash loses at most the
//!   exchanges still in flight.
//! * `annotation` — facts fetched after an exchange, off the client's path, that refer to it by
//!   id: the server-rendered prompt (`POST /apply-template`) and its token pieces
//!   (`POST /tokenize` with `with_pieces`).
//!
//! Writes are flushed per line ([`write::SessionWriter`]). A reader ([`read::read_session`])
//! skips a malformed or truncated line, reports it with its 1-based line number, and keeps
//! every other line. The format is documented in `docs/session-format.md`.

mod de;
pub mod encoding;
pub mod har;
pub mod index;
pub mod model;
pub mod read;
pub mod redact;
pub mod replay;
pub mod write;

pub use model::*;
pub use read::{ReadWarning, read_session, read_session_bytes};
pub use write::SessionWriter;

/// Format tag of the header line. Bumped on incompatible change; readers refuse unknown majors.
pub const FORMAT: &str = "toolscope-session/1";
