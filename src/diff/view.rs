//! A side-by-side view model of two prompts, for the TUI's diff view (it draws the rows; this
//! computes them). Pure.

use serde::{Deserialize, Serialize};
use similar::{Algorithm, DiffTag, capture_diff_slices};

use super::split::{DiffToken, split_markers};

/// How a row differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RowKind {
    /// Same line on both sides.
    Equal,
    /// A line of A replaced by a line of B; segments mark what changed inside.
    Changed,
    /// A line only in A (right side empty).
    Deleted,
    /// A line only in B (left side empty).
    Inserted,
    /// `hidden` equal lines folded away (both sides `None`).
    Fold,
}

/// A piece of a line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Segment {
    pub text: String,
    /// Differs from the other side (draw emphasised).
    pub changed: bool,
    /// A special token / control marker (draw in the marker style).
    pub special: bool,
}

/// One side of a row: the 1-based line number in its prompt and the line's segments (without
/// the trailing newline).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SideLine {
    pub number: usize,
    pub segments: Vec<Segment>,
}

/// One row of the side-by-side view.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Row {
    pub kind: RowKind,
    pub left: Option<SideLine>,
    pub right: Option<SideLine>,
    /// For [`RowKind::Fold`]: how many equal lines are hidden.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub hidden: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Options of [`side_by_side`].
#[derive(Debug, Clone, Copy, Default)]
pub struct ViewOptions {
    /// Keep this many equal lines around each change and fold the rest into
    /// [`RowKind::Fold`] rows; `None` shows every line.
    pub context: Option<usize>,
}

fn segments_plain(toks: &[DiffToken]) -> Vec<Segment> {
    merge(
        toks.iter()
            .map(|t| Segment {
                text: t.text.clone(),
                changed: false,
                special: t.special,
            })
            .collect(),
    )
}

/// Joins adjacent segments with the same flags.
fn merge(segs: Vec<Segment>) -> Vec<Segment> {
    let mut out: Vec<Segment> = Vec::with_capacity(segs.len());
    for s in segs {
        match out.last_mut() {
            Some(l) if l.changed == s.changed && !l.special && !s.special => {
                l.text.push_str(&s.text)
            }
            _ => out.push(s),
        }
    }
    out
}

fn inline(a: &str, b: &str) -> (Vec<Segment>, Vec<Segment>) {
    let ta = split_markers(a, &[]);
    let tb = split_markers(b, &[]);
    let ka: Vec<(&str, bool)> = ta.iter().map(|t| (t.text.as_str(), t.special)).collect();
    let kb: Vec<(&str, bool)> = tb.iter().map(|t| (t.text.as_str(), t.special)).collect();
    let mut sa = Vec::new();
    let mut sb = Vec::new();
    for op in capture_diff_slices(Algorithm::Myers, &ka, &kb) {
        let (tag, ra, rb) = op.as_tag_tuple();
        let changed = tag != DiffTag::Equal;
        sa.extend(ta[ra].iter().map(|t| Segment {
            text: t.text.clone(),
            changed,
            special: t.special,
        }));
        sb.extend(tb[rb].iter().map(|t| Segment {
            text: t.text.clone(),
            changed,
            special: t.special,
        }));
    }
    (merge(sa), merge(sb))
}

fn lines(s: &str) -> Vec<&str> {
    if s.is_empty() {
        return Vec::new();
    }
    s.split('\n').collect()
}

/// Side-by-side rows of prompts `a` (left) and `b` (right): a line diff (Myers, `similar`),
/// then within each replaced pair of lines a token diff with markers kept whole.
///
/// Shapes: every line of `a` appears once as a `left` and every line of `b` once as a `right`,
/// in order, unless folded (`ViewOptions::context`). Line numbers are 1-based.
pub fn side_by_side(a: &str, b: &str, opts: ViewOptions) -> Vec<Row> {
    let la = lines(a);
    let lb = lines(b);
    let mut rows = Vec::new();
    for op in capture_diff_slices(Algorithm::Myers, &la, &lb) {
        let (tag, ra, rb) = op.as_tag_tuple();
        match tag {
            DiffTag::Equal => {
                for (i, j) in ra.zip(rb) {
                    let segs = segments_plain(&split_markers(la[i], &[]));
                    rows.push(Row {
                        kind: RowKind::Equal,
                        left: Some(SideLine {
                            number: i + 1,
                            segments: segs.clone(),
                        }),
                        right: Some(SideLine {
                            number: j + 1,
                            segments: segs,
                        }),
                        hidden: 0,
                    });
                }
            }
            DiffTag::Delete => rows.extend(ra.map(|i| deleted(&la, i))),
            DiffTag::Insert => rows.extend(rb.map(|j| inserted(&lb, j))),
            DiffTag::Replace => {
                let n = ra.len().min(rb.len());
                for k in 0..n {
                    let (i, j) = (ra.start + k, rb.start + k);
                    let (sa, sb) = inline(la[i], lb[j]);
                    rows.push(Row {
                        kind: RowKind::Changed,
                        left: Some(SideLine {
                            number: i + 1,
                            segments: sa,
                        }),
                        right: Some(SideLine {
                            number: j + 1,
                            segments: sb,
                        }),
                        hidden: 0,
                    });
                }
                rows.extend((ra.start + n..ra.end).map(|i| deleted(&la, i)));
                rows.extend((rb.start + n..rb.end).map(|j| inserted(&lb, j)));
            }
        }
    }
    match opts.context {
        Some(c) => fold(rows, c),
        None => rows,
    }
}

fn deleted(la: &[&str], i: usize) -> Row {
    let segs = split_markers(la[i], &[])
        .into_iter()
        .map(|t| Segment {
            text: t.text,
            changed: true,
            special: t.special,
        })
        .collect();
    Row {
        kind: RowKind::Deleted,
        left: Some(SideLine {
            number: i + 1,
            segments: merge(segs),
        }),
        right: None,
        hidden: 0,
    }
}

fn inserted(lb: &[&str], j: usize) -> Row {
    let segs = split_markers(lb[j], &[])
        .into_iter()
        .map(|t| Segment {
            text: t.text,
            changed: true,
            special: t.special,
        })
        .collect();
    Row {
        kind: RowKind::Inserted,
        left: None,
        right: Some(SideLine {
            number: j + 1,
            segments: merge(segs),
        }),
        hidden: 0,
    }
}

fn fold(rows: Vec<Row>, context: usize) -> Vec<Row> {
    let n = rows.len();
    let mut keep = vec![false; n];
    for (i, r) in rows.iter().enumerate() {
        if r.kind != RowKind::Equal {
            let lo = i.saturating_sub(context);
            let hi = (i + context).min(n.saturating_sub(1));
            keep[lo..=hi].iter_mut().for_each(|k| *k = true);
        }
    }
    let mut out = Vec::new();
    let mut hidden = 0;
    for (r, k) in rows.into_iter().zip(keep) {
        if k {
            if hidden > 0 {
                out.push(Row {
                    kind: RowKind::Fold,
                    left: None,
                    right: None,
                    hidden,
                });
                hidden = 0;
            }
            out.push(r);
        } else {
            hidden += 1;
        }
    }
    if hidden > 0 {
        out.push(Row {
            kind: RowKind::Fold,
            left: None,
            right: None,
            hidden,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(l: &Option<SideLine>) -> String {
        l.as_ref()
            .map(|l| l.segments.iter().map(|s| s.text.as_str()).collect())
            .unwrap_or_default()
    }

    #[test]
    fn rows_cover_both_prompts() {
        let a = "<|im_start|>system\nsame\nold line\n<|im_end|>";
        let b = "<|im_start|>system\nsame\nnew line\nextra\n<|im_end|>";
        let rows = side_by_side(a, b, ViewOptions::default());
        let kinds: Vec<_> = rows.iter().map(|r| r.kind).collect();
        assert_eq!(
            kinds,
            [
                RowKind::Equal,
                RowKind::Equal,
                RowKind::Changed,
                RowKind::Inserted,
                RowKind::Equal
            ]
        );
        assert_eq!(text(&rows[2].left), "old line");
        assert_eq!(text(&rows[2].right), "new line");
        let changed: Vec<_> = rows[2]
            .left
            .as_ref()
            .unwrap()
            .segments
            .iter()
            .filter(|s| s.changed)
            .map(|s| s.text.clone())
            .collect();
        assert_eq!(changed, ["old"]);
        assert!(rows[0].left.as_ref().unwrap().segments[0].special);
        assert_eq!(rows[3].right.as_ref().unwrap().number, 4);
    }

    #[test]
    fn folding() {
        let a = "1\n2\n3\n4\n5\n6\nx\n8";
        let b = "1\n2\n3\n4\n5\n6\ny\n8";
        let rows = side_by_side(a, b, ViewOptions { context: Some(1) });
        assert_eq!(rows[0].kind, RowKind::Fold);
        assert_eq!(rows[0].hidden, 5);
        assert_eq!(rows.len(), 4);
    }
}
