//! The inspector's areas, one file each (television's `screen/`, slumber's one pane per file):
//! each holds its own state, its keys and its drawing; [`super::draw`] composes them and
//! [`super::state`] dispatches keys to them.
//!
//! * [`browser`] — the session browser.
//! * [`list`] — the exchange list and its filter.
//! * [`tools`] — the Tools pane's keys (its document: [`super::doc::tools`]); the Schema pane is
//!   a plain document ([`super::doc::schema`]) drawn by [`widgets::draw_doc`].
//! * [`template`] — the Template pane's diff view.
//! * [`stream`] — the Stream pane.
//! * [`replay`] — the Replay pane; [`engines`] — its engines view; [`side`] — its right half.
//! * [`findings`] — the Findings pane.
//! * [`loop_view`] — the loop view (`L`): conversations, turns, calls and their results.
//! * [`whatif`] — the what-if view (`x` on a finding with a fix): `toolscope try`'s runs of the
//!   fix against the engine, filling in as they finish.
//! * [`help`] — the `?` overlay; [`status`] — header and footer.
//! * [`widgets`] — pieces they share.

pub mod browser;
pub mod engines;
pub mod findings;
pub mod help;
pub mod list;
pub mod loop_view;
pub mod replay;
pub mod side;
pub mod status;
pub mod stream;
pub mod template;
pub mod tools;
pub mod whatif;
pub mod widgets;
