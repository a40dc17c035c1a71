//! The one message enum background work reports through, and the effects the state asks the
//! controller to run. The UI task owns the state; nothing else touches it.

use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use super::analysis::{ExchangeAnalysis, Summary};
use crate::session::index::SessionSource;

/// What background tasks (indexing, summaries, analysis, the live proxy) report.
#[derive(Debug)]
pub enum Message {
    /// Indexing progress: bytes scanned of total.
    IndexProgress { epoch: u64, done: u64, total: u64 },
    /// A session file was indexed (or failed: message names file and line).
    Opened {
        epoch: u64,
        result: Result<Arc<SessionSource>, String>,
    },
    /// List rows summarized (row, summary), in batches: first quick rows
    /// ([`Summary::analyzed`] false), later the analysed ones with findings counts. An analysed
    /// row is never replaced by a quick one.
    Summaries {
        epoch: u64,
        items: Vec<(usize, Summary)>,
    },
    /// One exchange analysed for the panes.
    Analyzed {
        epoch: u64,
        row: usize,
        analysis: Arc<ExchangeAnalysis>,
    },
    /// A session file of the browser was surveyed (exchange count, worst finding, label).
    Surveyed {
        path: PathBuf,
        survey: super::screen::browser::Survey,
    },
    /// A live recorder event from `toolscope proxy` (applied in place; bursts of chunks share
    /// one frame).
    Record(crate::record::recorder::RecordEvent),
    /// The session's loop, for the loop view.
    Looped {
        epoch: u64,
        data: Arc<super::screen::loop_view::LoopData>,
    },
    /// A what-if job ([`Effect::Try`]) reports: its plan, a finished run, its end, or the
    /// diff of its what-if session against the original.
    Try {
        epoch: u64,
        job: u64,
        report: super::screen::whatif::TryReport,
    },
}

/// Work the state asks the controller to start. Effects never block the UI task.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Index a session file.
    Open { epoch: u64, path: PathBuf },
    /// Read the list rows of the current session ([`crate::analysis::index::row_summary`]: heads
    /// only, no stream decode).
    Summarize { epoch: u64, rows: Range<usize> },
    /// Analyse rows of the current session in the background (stream decode, parser,
    /// diagnose) for their tool-call and findings counts. Reported in batches, at least every
    /// 100 ms; abandoned when another session is shown.
    Diagnose { epoch: u64, rows: Range<usize> },
    /// Analyse one row of the current session.
    Analyze { epoch: u64, row: usize },
    /// Put text on the clipboard (OSC 52).
    Copy(String),
    /// Survey the browser's session files in the background (index each, count its exchanges,
    /// analyse them for the worst finding), one file per slice.
    Survey { paths: Vec<PathBuf> },
    /// Compute the current session's loop ([`super::screen::loop_view::compute`]) for the loop
    /// view.
    Loop { epoch: u64 },
    /// Run a finding's fix against the engine in a background task
    /// ([`super::screen::whatif::run`]: `toolscope try`'s planning and runs), reporting each
    /// finished run; one at a time.
    Try(Box<super::screen::whatif::TryJob>),
    /// Stop the running what-if job after the runs that finished.
    CancelTry,
    /// Diff the what-if session against the original (`diff --against`) off the UI task.
    TryDiff(super::screen::whatif::DiffJob),
}
