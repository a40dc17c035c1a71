//! Sessions written out in other formats (`toolscope export`): HAR 1.2 ([`har`]; the reader
//! is [`crate::session::har`]) and OpenTelemetry OTLP/JSON traces ([`otel`]). Pure: each
//! function shapes data; the CLI reads the session and writes the file.

pub mod har;
pub mod otel;
