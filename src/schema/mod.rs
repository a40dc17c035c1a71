//! Tool schema flattening and schema-loss detection. Pure: data in, data out.
//!
//! * [`tools`] — where the tools are in a document (OpenAI, Anthropic, MCP shapes).
//! * [`flatten`] — rewrite schemas into shapes chat templates can print (`toolscope flatten`).
//! * [`loss`] — which schema facts never reached a rendered prompt (`schema.*` findings).
//! * [`types`] — JSON types of values and the types a schema allows.
//!
//! See docs/schema.md for the user-facing description.

pub mod flatten;
pub mod loss;
pub mod rank;
pub mod tools;
pub mod types;

pub use flatten::{Change, FlattenOptions, Flattened, Strategy, flatten_tools};
pub use loss::{LossReport, loss_report, schema_loss};
pub use rank::{Ranking, preflight, preflight_with, rank_strategies};
