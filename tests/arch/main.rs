//! Integration tests: architectural rules as tests: the purity gate.
//!
//! One module per former test file; shared helpers in `tests/support`. Run one module with
//! `cargo test --test arch MODULE::`.

mod purity;
