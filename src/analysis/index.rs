//! The analysis side of a session index ([`crate::session::index::SessionSource`]): the list
//! row of an exchange read without decoding its stream, and the session facts an exchange's
//! analysis needs. Pure: the index reads the file; these only shape what it read.

use super::{Context, Summary, damaged_summary, quick_summary};
use crate::session::index::SessionSource;
use crate::session::{Annotation, Exchange};

/// The list row of an exchange from the index's light read
/// ([`SessionSource::light_load`]): method, path, model (from the request body), status,
/// duration, stream/partial marks. Tool calls and findings are left for the background analysis
/// ([`Summary::analyzed`] is false). A damaged line (`Err`, `"line N column C: …"`) gives a
/// damaged row for exchange `id` (the id the index peeked, if any).
pub fn row_summary(id: Option<u64>, light: Result<Exchange, String>) -> Summary {
    match light {
        Ok(ex) => quick_summary(&ex),
        Err(e) => damaged_summary(id, e),
    }
}

/// The session facts an exchange's analysis needs: the index's header and `annotations` (the
/// exchange's annotations, from [`SessionSource::annotations_of`]).
pub fn context<'a>(src: &'a SessionSource, annotations: &'a [Annotation]) -> Context<'a> {
    Context {
        header: &src.header,
        annotations,
    }
}
