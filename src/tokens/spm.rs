//! SentencePiece-style tokenization by bigram merges ranked by score, with byte fallback, as
//! llama.cpp's `llm_tokenizer_spm` (src/llama-vocab.cpp, build 11434).

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

use super::TokenType;

pub(super) struct Spm {
    index: HashMap<String, u32>,
    scores: Vec<f32>,
    bytes: [Option<u32>; 256],
    unk: Option<u32>,
    add_space_prefix: bool,
}

#[derive(PartialEq)]
struct Bigram {
    score: f32,
    left: usize,
    size: usize,
}

impl Eq for Bigram {}
impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Bigram {
    // Highest score first; on ties the leftmost.
    fn cmp(&self, other: &Self) -> Ordering {
        self.score.partial_cmp(&other.score).unwrap_or(Ordering::Equal).then_with(|| other.left.cmp(&self.left))
    }
}

#[derive(Clone, Copy)]
struct Sym {
    prev: Option<usize>,
    next: Option<usize>,
    start: usize,
    len: usize,
}

impl Spm {
    pub(super) fn new(pieces: &[String], types: &[TokenType], scores: Vec<f32>, add_space_prefix: bool) -> Spm {
        let mut index = HashMap::with_capacity(pieces.len());
        let mut bytes = [None; 256];
        let mut unk = None;
        for (i, p) in pieces.iter().enumerate() {
            index.entry(p.clone()).or_insert(i as u32);
            match types.get(i) {
                Some(TokenType::Byte) => {
                    if let Some(h) = p.strip_prefix("<0x").and_then(|r| r.strip_suffix('>'))
                        && let Ok(b) = u8::from_str_radix(h, 16)
                    {
                        bytes[b as usize] = Some(i as u32);
                    }
                }
                Some(TokenType::Unknown) if unk.is_none() => unk = Some(i as u32),
                _ => {}
            }
        }
        Spm { index, scores, bytes, unk, add_space_prefix }
    }

    /// Returns `(id, start, end)` with byte offsets into `seg` (a token made of part of a
    /// multi-byte character covers the whole character; its siblings are empty).
    pub(super) fn encode(&self, seg: &str, _first: bool) -> Vec<(u32, usize, usize)> {
        // Transformed text and, per transformed byte, the original byte offset.
        let mut text = String::with_capacity(seg.len() + 4);
        let mut orig: Vec<usize> = Vec::with_capacity(seg.len() + 4);
        if self.add_space_prefix {
            text.push('▁');
            orig.extend([0, 0, 0]);
        }
        for (i, c) in seg.char_indices() {
            if c == ' ' {
                text.push('▁');
                orig.extend([i, i, i]);
            } else {
                text.push(c);
                orig.extend(std::iter::repeat_n(i, c.len_utf8()));
            }
        }
        orig.push(seg.len());
        let map = |t: usize| orig.get(t).copied().unwrap_or(seg.len());

        let mut syms: Vec<Sym> = Vec::new();
        for (i, c) in text.char_indices() {
            let n = syms.len();
            syms.push(Sym { prev: n.checked_sub(1), next: None, start: i, len: c.len_utf8() });
            if n > 0 {
                syms[n - 1].next = Some(n);
            }
        }
        let mut heap = BinaryHeap::new();
        let mut rev: HashMap<String, (usize, usize)> = HashMap::new();
        let try_add = |l: usize, r: usize, syms: &[Sym], heap: &mut BinaryHeap<Bigram>, rev: &mut HashMap<String, (usize, usize)>| {
            let (a, b) = (syms[l], syms[r]);
            let s = &text[a.start..b.start + b.len];
            if let Some(&id) = self.index.get(s) {
                heap.push(Bigram { score: self.scores.get(id as usize).copied().unwrap_or(0.0), left: l, size: s.len() });
                rev.insert(s.to_owned(), (l, r));
            }
        };
        for i in 1..syms.len() {
            try_add(i - 1, i, &syms, &mut heap, &mut rev);
        }
        while let Some(bg) = heap.pop() {
            let l = bg.left;
            let Some(r) = syms[l].next else { continue };
            if syms[l].len == 0 || syms[r].len == 0 || syms[l].len + syms[r].len != bg.size {
                continue;
            }
            syms[l].len += syms[r].len;
            syms[r].len = 0;
            syms[l].next = syms[r].next;
            if let Some(n) = syms[r].next {
                syms[n].prev = Some(l);
            }
            if let Some(p) = syms[l].prev {
                try_add(p, l, &syms, &mut heap, &mut rev);
            }
            if let Some(n) = syms[l].next {
                try_add(l, n, &syms, &mut heap, &mut rev);
            }
        }
        let mut out = Vec::new();
        let mut cur = if syms.is_empty() { None } else { Some(0) };
        while let Some(i) = cur {
            let s = syms[i];
            self.resegment(&text, s.start, s.start + s.len, &mut out, &map);
            cur = s.next;
        }
        out
    }

    fn resegment(&self, text: &str, a: usize, b: usize, out: &mut Vec<(u32, usize, usize)>, map: &dyn Fn(usize) -> usize) {
        let piece = &text[a..b];
        if let Some(&id) = self.index.get(piece) {
            out.push((id, map(a), map(b)));
            return;
        }
        // Not a token: split where it was merged from, else fall back to bytes.
        for (k, c) in piece.char_indices().skip(1) {
            let _ = c;
            let (l, r) = (&piece[..k], &piece[k..]);
            if self.index.contains_key(l) && self.index.contains_key(r) {
                self.resegment(text, a, a + k, out, map);
                self.resegment(text, a + k, b, out, map);
                return;
            }
        }
        for (k, byte) in piece.bytes().enumerate() {
            let id = self.bytes[byte as usize].or(self.unk).unwrap_or(u32::MAX);
            let (s, e) = if k == 0 { (map(a), map(b)) } else { (map(b), map(b)) };
            out.push((id, s, e));
        }
    }
}
