//! Token-level diff of two prompts with the `similar` crate (Myers), special tokens whole. Pure.

use serde::{Deserialize, Serialize};
use similar::{Algorithm, DiffTag, capture_diff_slices};

use super::split::DiffToken;

/// Kind of one diff operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpTag {
    Equal,
    Delete,
    Insert,
    Replace,
}

/// One operation: token ranges `[start, end)` in A and in B (0-based token indices), and the
/// text of the changed side(s). `a_text`/`b_text` are omitted for `equal` ops.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenOp {
    pub tag: OpTag,
    /// `[start, end)` token indices in A.
    pub a: [usize; 2],
    /// `[start, end)` token indices in B.
    pub b: [usize; 2],
    /// Byte offset in prompt A where the op starts.
    pub a_offset: usize,
    /// Byte offset in prompt B where the op starts.
    pub b_offset: usize,
    /// A's tokens in this op, concatenated (`delete`, `replace`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub a_text: Option<String>,
    /// B's tokens in this op, concatenated (`insert`, `replace`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub b_text: Option<String>,
    /// Special tokens among the changed tokens of A.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub a_special: Vec<String>,
    /// Special tokens among the changed tokens of B.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub b_special: Vec<String>,
}

/// The token-level diff of two prompts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenDiff {
    /// `vocab` (tokenized with a vocabulary) or `markers` (marker-aware splitter).
    pub tokenizer: String,
    /// Token count of A.
    pub a_tokens: usize,
    /// Token count of B.
    pub b_tokens: usize,
    /// Tokens in equal runs.
    pub equal: usize,
    /// Tokens of A not in B.
    pub deleted: usize,
    /// Tokens of B not in A.
    pub inserted: usize,
    /// All operations in order (equal runs included, without text).
    pub ops: Vec<TokenOp>,
}

impl TokenDiff {
    /// True when both prompts tokenize identically.
    pub fn is_identical(&self) -> bool {
        self.deleted == 0 && self.inserted == 0
    }
}

fn key(t: &DiffToken) -> (&str, bool, Option<u32>) {
    (t.text.as_str(), t.special, t.id)
}

/// Diffs two token sequences. Tokens compare by text, special flag and id.
pub fn token_diff(a: &[DiffToken], b: &[DiffToken], tokenizer: &str) -> TokenDiff {
    let ka: Vec<_> = a.iter().map(key).collect();
    let kb: Vec<_> = b.iter().map(key).collect();
    let raw = capture_diff_slices(Algorithm::Myers, &ka, &kb);
    let offsets = |toks: &[DiffToken]| {
        let mut v = Vec::with_capacity(toks.len() + 1);
        let mut o = 0;
        v.push(0);
        for t in toks {
            o += t.text.len();
            v.push(o);
        }
        v
    };
    let (oa, ob) = (offsets(a), offsets(b));
    let mut ops = Vec::with_capacity(raw.len());
    let (mut equal, mut deleted, mut inserted) = (0, 0, 0);
    for op in raw {
        let (tag, ra, rb) = op.as_tag_tuple();
        let tag = match tag {
            DiffTag::Equal => OpTag::Equal,
            DiffTag::Delete => OpTag::Delete,
            DiffTag::Insert => OpTag::Insert,
            DiffTag::Replace => OpTag::Replace,
        };
        let join = |toks: &[DiffToken]| toks.iter().map(|t| t.text.as_str()).collect::<String>();
        let specials = |toks: &[DiffToken]| {
            toks.iter()
                .filter(|t| t.special)
                .map(|t| t.text.clone())
                .collect::<Vec<_>>()
        };
        let (a_text, b_text, a_special, b_special) = match tag {
            OpTag::Equal => {
                equal += ra.len();
                (None, None, vec![], vec![])
            }
            _ => {
                deleted += ra.len();
                inserted += rb.len();
                let at = (!ra.is_empty()).then(|| join(&a[ra.clone()]));
                let bt = (!rb.is_empty()).then(|| join(&b[rb.clone()]));
                (at, bt, specials(&a[ra.clone()]), specials(&b[rb.clone()]))
            }
        };
        ops.push(TokenOp {
            tag,
            a: [ra.start, ra.end],
            b: [rb.start, rb.end],
            a_offset: oa[ra.start],
            b_offset: ob[rb.start],
            a_text,
            b_text,
            a_special,
            b_special,
        });
    }
    TokenDiff {
        tokenizer: tokenizer.to_owned(),
        a_tokens: a.len(),
        b_tokens: b.len(),
        equal,
        deleted,
        inserted,
        ops,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diff::split::split_markers;

    #[test]
    fn marker_replaced_whole() {
        let a = split_markers("<|im_start|>user\nhi<|im_end|>", &[]);
        let b = split_markers("<|turn>user\nhi<turn|>", &[]);
        let d = token_diff(&a, &b, "markers");
        assert_eq!(d.deleted, 2);
        assert_eq!(d.inserted, 2);
        let changed: Vec<_> = d.ops.iter().filter(|o| o.tag != OpTag::Equal).collect();
        assert_eq!(changed.len(), 2);
        assert_eq!(changed[0].a_special, ["<|im_start|>"]);
        assert_eq!(changed[0].b_special, ["<|turn>"]);
        assert_eq!(changed[1].a_offset, "<|im_start|>user\nhi".len());
        assert_eq!(changed[1].b_offset, "<|turn>user\nhi".len());
    }

    #[test]
    fn identical() {
        let a = split_markers("same <s> text", &[]);
        let d = token_diff(&a, &a, "markers");
        assert!(d.is_identical());
        assert_eq!(d.ops.len(), 1);
        assert_eq!(d.equal, a.len());
    }
}
