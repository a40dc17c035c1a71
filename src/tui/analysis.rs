//! The inspector's view of one exchange: the pure [`crate::analysis::AnalysedExchange`]
//! (computed once, off the UI task, at [`Depth::Panes`]) and the list row it belongs to; plus
//! the LRU of recent analyses. Panes only read these, so wiring a new analysis in changes
//! [`crate::analysis`], not the views.

use crate::analysis::{AnalysedExchange, Depth};
use crate::finding::Finding;
use crate::session::Exchange;

pub use crate::analysis::{
    Context, ReplayStep, ReplayView, SchemaRow, ServerView, StreamEvent, Summary, TemplateView,
    ToolEntry, damaged_summary, quick_summary,
};
pub use crate::finding::Chunking;

/// Everything the panes show about one exchange: its analysis and its list row.
#[derive(Debug, Clone, Default)]
pub struct ExchangeAnalysis {
    /// Row in the session's list (0-based, start order).
    pub row: usize,
    pub analysed: AnalysedExchange,
}

impl std::ops::Deref for ExchangeAnalysis {
    type Target = AnalysedExchange;
    fn deref(&self) -> &AnalysedExchange {
        &self.analysed
    }
}

/// Full analysis of one exchange for the panes (runs off the UI task).
pub fn analyze(row: usize, ex: Exchange, ctx: Context<'_>) -> ExchangeAnalysis {
    ExchangeAnalysis {
        row,
        analysed: crate::analysis::analyse(ex, ctx, Depth::Panes),
    }
}

/// The analysed list row of an exchange (findings and tool calls counted; the background
/// pass over every row).
pub fn summarize(ex: Exchange, ctx: Context<'_>) -> Summary {
    crate::analysis::analyse(ex, ctx, Depth::Findings).summary
}

/// The analysis of a row whose line could not be decoded: a damaged row and its
/// `session.damaged` finding ([`crate::diagnose::input::damaged_line`]).
pub fn damaged(
    row: usize,
    id: Option<u64>,
    file: &str,
    line: usize,
    error: String,
) -> ExchangeAnalysis {
    let w = crate::analysis::load_error_warning(line, &error);
    let findings: Vec<Finding> = vec![crate::diagnose::input::damaged_line(file, &w)];
    ExchangeAnalysis {
        row,
        analysed: AnalysedExchange {
            summary: damaged_summary(id, error),
            findings,
            ..Default::default()
        },
    }
}

/// Findings about the session file itself (lines the index skipped).
pub fn session_findings(file: &str, warnings: &[crate::session::ReadWarning]) -> Vec<Finding> {
    warnings
        .iter()
        .map(|w| crate::diagnose::input::damaged_line(file, w))
        .collect()
}

/// A small least-recently-used map from row to a decoded exchange's analysis, bounded by an
/// entry count and by a total weight (the bytes of the rows' session lines), so that selecting
/// rows one after another keeps memory near a few exchanges. The most recent entry is always
/// kept, however heavy.
#[derive(Debug, Clone)]
pub struct Lru<V> {
    /// `(row, weight, value)`, least recently used first.
    entries: std::collections::VecDeque<(usize, u64, V)>,
    max_entries: usize,
    max_weight: u64,
}

impl<V> Lru<V> {
    /// An empty cache holding at most `max_entries` values and `max_weight` total weight.
    pub fn new(max_entries: usize, max_weight: u64) -> Lru<V> {
        Lru {
            entries: Default::default(),
            max_entries: max_entries.max(1),
            max_weight,
        }
    }

    /// The value for `row`, marked most recently used.
    pub fn get(&mut self, row: &usize) -> Option<&V> {
        let i = self.entries.iter().position(|e| e.0 == *row)?;
        let e = self.entries.remove(i)?;
        self.entries.push_back(e);
        self.entries.back().map(|e| &e.2)
    }

    /// Inserts (or replaces) `row`'s value, then evicts the least recently used entries until
    /// both bounds hold.
    pub fn insert(&mut self, row: usize, value: V, weight: u64) {
        self.remove(&row);
        self.entries.push_back((row, weight, value));
        while self.entries.len() > 1
            && (self.entries.len() > self.max_entries || self.weight() > self.max_weight)
        {
            self.entries.pop_front();
        }
    }

    /// Drops `row`'s value (a live exchange changed).
    pub fn remove(&mut self, row: &usize) -> Option<V> {
        let i = self.entries.iter().position(|e| e.0 == *row)?;
        self.entries.remove(i).map(|e| e.2)
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Total weight of the entries.
    pub fn weight(&self) -> u64 {
        self.entries.iter().map(|e| e.1).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_evicts_least_recently_used_by_count_and_weight() {
        let mut c = Lru::new(3, 100);
        c.insert(1, "a", 10);
        c.insert(2, "b", 10);
        c.insert(3, "c", 10);
        assert_eq!(c.get(&1), Some(&"a")); // 1 is now the most recent
        c.insert(4, "d", 10); // count bound: evicts 2, the least recent
        assert_eq!(c.get(&2), None);
        assert_eq!((c.len(), c.weight()), (3, 30));
        c.insert(5, "e", 85); // count evicts 3; weight 10+10+85 > 100 then evicts 1
        assert_eq!(c.get(&3), None);
        assert_eq!(c.get(&1), None);
        assert_eq!((c.len(), c.weight()), (2, 95));
        assert_eq!(c.get(&4), Some(&"d"));
        c.insert(6, "f", 500); // heavier than the bound alone: kept, the rest evicted
        assert_eq!(c.len(), 1);
        assert_eq!(c.get(&6), Some(&"f"));
        c.insert(6, "g", 1); // replacing keeps one entry per row
        assert_eq!((c.len(), c.weight(), c.remove(&6)), (1, 1, Some("g")));
        assert!(c.is_empty());
    }
}
