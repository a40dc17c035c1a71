//! Integration tests: architectural rules as tests: the purity gate (`purity`) and the
//! layering gate (`layering`: no import cycle between top-level modules, `lib.rs` and the
//! README's pipeline map bottom-up) and the printing gate (`printing`: no raw `println!`
//! outside `src/text.rs`, so every printed line goes through the one sanitiser).
//!
//! One module per former test file; shared helpers in `tests/support`. Run one module with
//! `cargo test --test arch MODULE::`.

mod layering;
mod printing;
mod purity;
