//! The inspector TUI: exchange list and panes (Tools, Schema, Template, Stream, Replay,
//! Findings). A thin layer over the analysis modules.
