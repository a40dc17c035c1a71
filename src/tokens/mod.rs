//! Vocabularies and tokens: splitting a rendered prompt into pieces, special tokens, BOS count,
//! pseudo-special markers. Pure.
//!
//! A [`Vocab`] comes from GGUF metadata ([`Vocab::from_gguf`]: `tokenizer.ggml.tokens`,
//! `token_type`, `merges`/`scores`, bos/eos ids, `add_bos_token`), from a HF `tokenizer.json`
//! ([`Vocab::from_tokenizer_json`], via the `tokenizers` crate), and a prompt can also be taken
//! as llama-server split it ([`tokens_from_pieces`], `POST /tokenize` with `with_pieces`).
//!
//! [`tokenize`] follows llama.cpp's `llama_tokenize(…, parse_special = true)` (src/llama-vocab.cpp,
//! build 11434): control, user-defined and unknown tokens are matched in the text first (longest
//! first), the remaining text goes through the model: byte-level BPE with the pre-tokenizer
//! regexes of `tokenizer.ggml.pre` (gpt2, smollm, llama3, qwen2, …), or SentencePiece bigram
//! merging by score with byte fallback (`tokenizer.ggml.model = "llama"`).

use std::collections::HashMap;
use std::sync::Arc;

use serde::Serialize;

use crate::finding::{Evidence, Finding, Pane, Rule};
use crate::gguf::{GgufMetadata, GgufValue};
use crate::session::TokenPiece;

pub mod markers;
mod spm;

/// GGUF token types (llama.cpp `llama_token_type`, include/llama.h).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenType {
    Undefined,
    Normal,
    Unknown,
    Control,
    UserDefined,
    Unused,
    Byte,
}

impl TokenType {
    /// From the GGUF integer (0 undefined, 1 normal, 2 unknown, 3 control, 4 user-defined,
    /// 5 unused, 6 byte).
    pub fn from_gguf(n: i64) -> TokenType {
        match n {
            1 => TokenType::Normal,
            2 => TokenType::Unknown,
            3 => TokenType::Control,
            4 => TokenType::UserDefined,
            5 => TokenType::Unused,
            6 => TokenType::Byte,
            _ => TokenType::Undefined,
        }
    }

    /// Whether llama.cpp matches this token type as a whole in text with `parse_special`.
    pub fn is_special(self) -> bool {
        matches!(
            self,
            TokenType::Control | TokenType::UserDefined | TokenType::Unknown
        )
    }
}

/// The model a vocabulary splits ordinary text with (special tokens are matched first,
/// whichever it is).
#[derive(Clone)]
enum Splitter {
    /// Byte-level BPE or anything a HF tokenizer describes.
    Hf(Arc<tokenizers::Tokenizer>),
    /// SentencePiece-style bigram merges by score.
    Spm(Arc<spm::Spm>),
    /// No model: only special tokens can be found; ordinary text becomes one pseudo-token per
    /// segment with id `u32::MAX`.
    None,
}

/// A vocabulary that can split text into tokens.
#[derive(Clone)]
pub struct Vocab {
    /// Where it came from (file name or URL).
    pub origin: String,
    /// Token text by id, as the vocabulary stores it (byte-level BPE pieces use GPT-2's byte
    /// alphabet, e.g. `Ġ` for a space; SentencePiece pieces use `▁`).
    pub pieces: Vec<String>,
    /// Token type by id (all `Normal` when the source has none).
    pub types: Vec<TokenType>,
    /// BOS token id.
    pub bos_id: Option<u32>,
    /// EOS token id.
    pub eos_id: Option<u32>,
    /// Whether the engine adds BOS before the prompt (`tokenizer.ggml.add_bos_token`).
    pub add_bos: bool,
    /// Whether the engine adds EOS after the prompt (`tokenizer.ggml.add_eos_token`; for a
    /// tokenizer.json, whether encoding with special tokens ends with the EOS).
    pub add_eos: bool,
    /// `tokenizer.ggml.model` (`gpt2`, `llama`, …) or `tokenizer.json`.
    pub model: String,
    /// Special tokens (text, id), longest text first.
    specials: Vec<(String, u32)>,
    splitter: Splitter,
}

impl std::fmt::Debug for Vocab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vocab")
            .field("origin", &self.origin)
            .field("model", &self.model)
            .field("size", &self.pieces.len())
            .field("bos_id", &self.bos_id)
            .field("eos_id", &self.eos_id)
            .field("add_bos", &self.add_bos)
            .finish_non_exhaustive()
    }
}

impl PartialEq for Vocab {
    fn eq(&self, other: &Self) -> bool {
        self.origin == other.origin
            && self.pieces == other.pieces
            && self.types == other.types
            && self.bos_id == other.bos_id
    }
}

/// One token of a prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Token {
    /// Token id (`u32::MAX` when unknown: no model for ordinary text).
    pub id: u32,
    /// The prompt text this token covers (`prompt[start..end]`); for a BOS the engine adds,
    /// the BOS text with `start == end == 0`.
    pub piece: String,
    /// A special (control / user-defined) token.
    pub special: bool,
    /// Byte offset of the token's text in the prompt.
    pub start: usize,
    /// Byte offset after the token's text.
    pub end: usize,
}

/// A vocabulary that cannot be built, with the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{origin}: {message}")]
pub struct VocabError {
    pub origin: String,
    pub message: String,
}

/// llama.cpp pre-tokenizer regexes by `tokenizer.ggml.pre` (src/llama-vocab.cpp, build 11434).
fn pre_regexes(pre: &str) -> Vec<&'static str> {
    const GPT2: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)";
    const LLAMA3: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
    const QWEN2: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
    match pre {
        "smollm" | "codeshell" | "exaone" | "minerva-7b" | "mellum2" => vec![r"\p{N}", GPT2],
        "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "pixtral" | "tekken" => vec![LLAMA3],
        "qwen2" | "qwen35" | "deepseek-r1-qwen" | "stablelm2" | "hunyuan" | "megrez" => vec![QWEN2],
        _ => vec![GPT2],
    }
}

impl Vocab {
    /// From GGUF metadata. Needs `tokenizer.ggml.tokens`; uses `token_type`, `merges`
    /// (byte-level BPE, `model = gpt2`), `scores` (SentencePiece, `model = llama`),
    /// `bos_token_id`, `eos_token_id`, `add_bos_token` (default: true for `llama`, false
    /// otherwise, as llama.cpp). Errors: no token list, or a BPE that cannot be built.
    pub fn from_gguf(origin: &str, md: &GgufMetadata) -> Result<Vocab, VocabError> {
        let err = |m: String| VocabError {
            origin: origin.to_owned(),
            message: m,
        };
        let pieces: Vec<String> = md
            .get_str_array("tokenizer.ggml.tokens")
            .ok_or_else(|| err("GGUF metadata has no tokenizer.ggml.tokens".into()))?
            .into_iter()
            .map(str::to_owned)
            .collect();
        let types: Vec<TokenType> = match md
            .get("tokenizer.ggml.token_type")
            .and_then(GgufValue::as_array)
        {
            Some(a) => a
                .iter()
                .map(|v| TokenType::from_gguf(v.as_i64().unwrap_or(1)))
                .collect(),
            None => vec![TokenType::Normal; pieces.len()],
        };
        let model = md
            .get_str("tokenizer.ggml.model")
            .unwrap_or("gpt2")
            .to_owned();
        let id = |k: &str| {
            md.get(k)
                .and_then(GgufValue::as_i64)
                .and_then(|v| u32::try_from(v).ok())
        };
        let add_bos = md
            .get("tokenizer.ggml.add_bos_token")
            .and_then(GgufValue::as_bool)
            .unwrap_or(model == "llama");
        let mut v = Vocab {
            origin: origin.to_owned(),
            specials: Vec::new(),
            bos_id: id("tokenizer.ggml.bos_token_id"),
            eos_id: id("tokenizer.ggml.eos_token_id"),
            add_bos,
            add_eos: md
                .get("tokenizer.ggml.add_eos_token")
                .and_then(GgufValue::as_bool)
                .unwrap_or(false),
            model: model.clone(),
            splitter: Splitter::None,
            pieces,
            types,
        };
        v.index_specials();
        if let Some(merges) = md.get_str_array("tokenizer.ggml.merges") {
            let pre = md.get_str("tokenizer.ggml.pre").unwrap_or("default");
            v.splitter = Splitter::Hf(Arc::new(
                build_bpe(&v.pieces, &merges, &pre_regexes(pre)).map_err(err)?,
            ));
        } else if model == "llama" {
            let scores: Vec<f32> = md
                .get("tokenizer.ggml.scores")
                .and_then(GgufValue::as_array)
                .map(|a| a.iter().map(|s| s.as_f64().unwrap_or(0.0) as f32).collect())
                .unwrap_or_else(|| vec![0.0; v.pieces.len()]);
            let add_space_prefix = md
                .get("tokenizer.ggml.add_space_prefix")
                .and_then(GgufValue::as_bool)
                .unwrap_or(true);
            v.splitter = Splitter::Spm(Arc::new(spm::Spm::new(
                &v.pieces,
                &v.types,
                scores,
                add_space_prefix,
            )));
        }
        Ok(v)
    }

    /// From a HF `tokenizer.json` (bytes). BOS/EOS are guessed from the added tokens
    /// (`<s>`, `<bos>`, `<|begin_of_text|>`, … and `</s>`, `<eos>`, `<|endoftext|>`, …) unless
    /// a `tokenizer_config.json` later sets them; `add_bos` is true when the post-processor
    /// prepends a special token. Errors: not a tokenizer.json the `tokenizers` crate accepts.
    pub fn from_tokenizer_json(origin: &str, bytes: &[u8]) -> Result<Vocab, VocabError> {
        let err = |m: String| VocabError {
            origin: origin.to_owned(),
            message: m,
        };
        let tk = tokenizers::Tokenizer::from_bytes(bytes)
            .map_err(|e| err(format!("not a usable tokenizer.json: {e}")))?;
        let size = tk.get_vocab_size(true);
        let mut pieces = vec![String::new(); size];
        let mut types = vec![TokenType::Normal; size];
        for (text, id) in tk.get_vocab(true) {
            if let Some(p) = pieces.get_mut(id as usize) {
                *p = text;
            }
        }
        for (id, added) in tk.get_added_tokens_decoder() {
            if let Some(t) = types.get_mut(id as usize) {
                *t = if added.special {
                    TokenType::Control
                } else {
                    TokenType::UserDefined
                };
            }
        }
        let find = |names: &[&str]| names.iter().find_map(|n| tk.token_to_id(n));
        let bos_id = find(&[
            "<|begin_of_text|>",
            "<bos>",
            "<s>",
            "<|startoftext|>",
            "[BOS]",
        ]);
        let eos_id = find(&[
            "<|end_of_text|>",
            "<|endoftext|>",
            "<eos>",
            "</s>",
            "<|im_end|>",
            "[EOS]",
        ]);
        let add_bos = bos_id.is_some_and(|b| {
            tk.encode("a", true)
                .map(|e| e.get_ids().first() == Some(&b))
                .unwrap_or(false)
        });
        let add_eos = eos_id.is_some_and(|e| {
            tk.encode("a", true)
                .map(|x| x.get_ids().last() == Some(&e))
                .unwrap_or(false)
        });
        let mut v = Vocab {
            origin: origin.to_owned(),
            pieces,
            types,
            bos_id,
            eos_id,
            add_bos,
            add_eos,
            model: "tokenizer.json".into(),
            specials: Vec::new(),
            splitter: Splitter::Hf(Arc::new(tk)),
        };
        v.index_specials();
        Ok(v)
    }

    fn index_specials(&mut self) {
        let mut specials: Vec<(String, u32)> = self
            .types
            .iter()
            .enumerate()
            .filter(|(_, t)| t.is_special())
            .filter_map(|(i, _)| {
                let text = self.pieces.get(i)?;
                (!text.is_empty()).then(|| (text.clone(), i as u32))
            })
            .collect();
        specials.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.1.cmp(&b.1)));
        self.specials = specials;
    }

    /// Number of tokens.
    pub fn len(&self) -> usize {
        self.pieces.len()
    }

    /// True for an empty vocabulary.
    pub fn is_empty(&self) -> bool {
        self.pieces.is_empty()
    }

    /// The BOS text, when the vocabulary has a BOS.
    pub fn bos_text(&self) -> Option<&str> {
        self.bos_id
            .and_then(|i| self.pieces.get(i as usize))
            .map(String::as_str)
    }

    /// The EOS text, when the vocabulary has an EOS.
    pub fn eos_text(&self) -> Option<&str> {
        self.eos_id
            .and_then(|i| self.pieces.get(i as usize))
            .map(String::as_str)
    }

    /// Whether `id` is a special (control / user-defined / unknown) token.
    pub fn is_special(&self, id: u32) -> bool {
        self.types.get(id as usize).is_some_and(|t| t.is_special())
    }

    /// The id of the token whose text is exactly `text` and which is special, if any.
    pub fn special_id(&self, text: &str) -> Option<u32> {
        self.specials
            .iter()
            .find(|(t, _)| t == text)
            .map(|(_, id)| *id)
    }
}

fn build_bpe(
    pieces: &[String],
    merges: &[&str],
    regexes: &[&str],
) -> Result<tokenizers::Tokenizer, String> {
    use serde_json::{Map, Value, json};
    let mut vocab = Map::new();
    for (i, p) in pieces.iter().enumerate() {
        vocab.entry(p.clone()).or_insert(json!(i));
    }
    let merges: Vec<Value> = merges
        .iter()
        .map(|m| Value::String((*m).to_owned()))
        .collect();
    let mut pre: Vec<Value> = regexes
        .iter()
        .map(|r| json!({"type": "Split", "pattern": {"Regex": r}, "behavior": "Isolated", "invert": false}))
        .collect();
    pre.push(json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}));
    let spec = json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": [],
        "normalizer": null,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": pre},
        "post_processor": null,
        "decoder": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
        "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
                  "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
                  "vocab": vocab, "merges": merges}
    });
    let text = spec.to_string();
    text.parse::<tokenizers::Tokenizer>()
        .map_err(|e| format!("cannot build the BPE tokenizer from GGUF merges: {e}"))
}

/// Splits `text` into tokens as llama.cpp does with `parse_special = true` (see the module
/// docs). Does not add BOS: use [`tokenize_prompt`] for what the engine feeds the model.
/// Offsets are byte offsets into `text`; the tokens cover `text` without gaps or overlaps.
pub fn tokenize(vocab: &Vocab, text: &str) -> Vec<Token> {
    let mut out = Vec::new();
    let mut seg_start = 0;
    let mut i = 0;
    let bytes = text.as_bytes();
    while i < text.len() {
        if !text.is_char_boundary(i) {
            i += 1;
            continue;
        }
        let hit = vocab
            .specials
            .iter()
            .find(|(t, _)| bytes[i..].starts_with(t.as_bytes()));
        if let Some((t, id)) = hit {
            encode_ordinary(vocab, text, seg_start, i, &mut out);
            out.push(Token {
                id: *id,
                piece: t.clone(),
                special: true,
                start: i,
                end: i + t.len(),
            });
            i += t.len();
            seg_start = i;
        } else {
            i += 1;
        }
    }
    encode_ordinary(vocab, text, seg_start, text.len(), &mut out);
    out
}

fn encode_ordinary(vocab: &Vocab, text: &str, start: usize, end: usize, out: &mut Vec<Token>) {
    if start >= end {
        return;
    }
    let seg = &text[start..end];
    match &vocab.splitter {
        Splitter::Hf(tk) => match tk.encode(seg, false) {
            Ok(enc) => {
                let ids = enc.get_ids();
                let offs = enc.get_offsets();
                let mut last_end = 0usize;
                for (k, (&id, &(s, e))) in ids.iter().zip(offs).enumerate() {
                    // Byte-level pieces of one multi-byte character share its offsets; give the
                    // text to the first of them and keep the others empty.
                    let (s, e) = if s < last_end {
                        (last_end, last_end.max(e))
                    } else {
                        (s, e)
                    };
                    let e = if k + 1 == ids.len() { e.max(s) } else { e };
                    let s = s.min(seg.len());
                    let e = e.min(seg.len()).max(s);
                    out.push(Token {
                        id,
                        piece: seg[s..e].to_owned(),
                        special: vocab.is_special(id),
                        start: start + s,
                        end: start + e,
                    });
                    last_end = e;
                }
            }
            Err(_) => out.push(Token {
                id: u32::MAX,
                piece: seg.to_owned(),
                special: false,
                start,
                end,
            }),
        },
        Splitter::Spm(spm) => {
            for (id, s, e) in spm.encode(seg, start == 0) {
                let (s, e) = (s.min(seg.len()), e.min(seg.len()));
                out.push(Token {
                    id,
                    piece: seg[s..e.max(s)].to_owned(),
                    special: vocab.is_special(id),
                    start: start + s,
                    end: start + e.max(s),
                });
            }
        }
        Splitter::None => out.push(Token {
            id: u32::MAX,
            piece: seg.to_owned(),
            special: false,
            start,
            end,
        }),
    }
}

/// The tokens the engine feeds the model for `prompt`: [`tokenize`], preceded by a zero-width
/// BOS token when the vocabulary adds one (`add_bos`), as llama-server does for a completion.
pub fn tokenize_prompt(vocab: &Vocab, prompt: &str) -> Vec<Token> {
    let mut out = Vec::new();
    if vocab.add_bos
        && let Some(id) = vocab.bos_id
    {
        out.push(Token {
            id,
            piece: vocab.bos_text().unwrap_or("").to_owned(),
            special: true,
            start: 0,
            end: 0,
        });
    }
    out.extend(tokenize(vocab, prompt));
    out
}

/// Aligns llama-server `/tokenize` pieces with `prompt`: each piece's bytes are located at the
/// running offset; a piece that does not match there (a BOS the server added) gets zero width.
/// `special` is set for pieces that are one whole marker (`<|…|>`, `<…>`, `[…]`, `<｜…｜>`),
/// since the server does not say which tokens are special.
pub fn tokens_from_pieces(prompt: &str, pieces: &[TokenPiece]) -> Vec<Token> {
    let mut out = Vec::with_capacity(pieces.len());
    let mut off = 0usize;
    let pb = prompt.as_bytes();
    for p in pieces {
        let b = p.piece.as_bytes();
        let text = String::from_utf8_lossy(b).into_owned();
        // every marker starts with `<` or `[` (see find_markers): others are not looked at
        let special = matches!(b.first(), Some(b'<' | b'['))
            && find_markers(&text)
                .iter()
                .any(|&(s, e)| s == 0 && e == text.len());
        if !b.is_empty() && pb.get(off..off + b.len()) == Some(b) {
            out.push(Token {
                id: p.id,
                piece: text,
                special,
                start: off,
                end: off + b.len(),
            });
            off += b.len();
        } else {
            out.push(Token {
                id: p.id,
                piece: text,
                special,
                start: off,
                end: off,
            });
        }
    }
    out
}

/// Spans `(start, end)` of text in `s` that looks like a control marker: `<|…|>` and Gemma-4
/// style `<|…>` / `<…|>`, full-width `<｜…｜>`, tool-syntax tags `<name>` / `</name>` (name of
/// letters, digits, `_`, `-`, `:`, `.`, at least 2 characters, starting with a letter), and
/// bracketed upper-case tags such as `[TOOL_CALLS]`, `[INST]`, `[/INST]`.
pub fn find_markers(s: &str) -> Vec<(usize, usize)> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let rest = &s[i..];
        let found = if let Some(inner) = rest.strip_prefix("<｜") {
            inner
                .find("｜>")
                .filter(|&k| k <= 120 && !inner[..k].contains(['\n', ' ', '<']))
                .map(|k| 4 + k + 4)
        } else if let Some(after) = rest.strip_prefix('<') {
            let body_start = 1 + usize::from(after.starts_with(['|', '/']));
            let mut k = body_start;
            let rb = rest.as_bytes();
            while k < rb.len()
                && k < 64
                && (rb[k].is_ascii_alphanumeric() || matches!(rb[k], b'_' | b'-' | b':' | b'.'))
            {
                k += 1;
            }
            let name = &rest[body_start..k];
            let first_ok = name
                .as_bytes()
                .first()
                .is_some_and(|c| c.is_ascii_alphabetic());
            let pipe_open = after.starts_with('|');
            if first_ok && name.len() >= 2 && rest[k..].starts_with("|>") {
                Some(k + 2)
            } else if first_ok && (name.len() >= 2 || pipe_open) && rest[k..].starts_with('>') {
                Some(k + 1)
            } else {
                None
            }
        } else if let Some(after) = rest.strip_prefix('[') {
            let rb = rest.as_bytes();
            let mut k = 1 + usize::from(after.starts_with('/'));
            let body = k;
            while k < rb.len()
                && k < 40
                && (rb[k].is_ascii_uppercase() || rb[k] == b'_' || rb[k].is_ascii_digit())
            {
                k += 1;
            }
            (k - body >= 3 && rest[k..].starts_with(']') && rb[body].is_ascii_uppercase())
                .then_some(k + 1)
        } else {
            None
        };
        match found {
            Some(len) => {
                out.push((i, i + len));
                i += len;
            }
            None => {
                // Every marker starts with `<` or `[` (ASCII, so a character boundary).
                i += 1 + b[i + 1..]
                    .iter()
                    .position(|&c| c == b'<' || c == b'[')
                    .unwrap_or(b.len() - i - 1);
            }
        }
    }
    out
}

/// `token.pseudo_special` findings: marker-looking text ([`find_markers`]) in `prompt` that is
/// not one token in `tokens` (the prompt's tokenization, from [`tokenize`] or
/// [`tokens_from_pieces`], ordered by offset). One finding per distinct marker text, at its
/// first occurrence, naming the pieces it falls into. Example: the Qwen3 template's
/// `<tool_call>` on SmolLM2 is `<`,`tool`,`_`,`call`,`>`.
///
/// Prose placeholders are not markers ([`is_placeholder`]): Qwen3's tool instructions write
/// `{"name": <function-name>, "arguments": <args-json-object>}`, tags that no model emits.
/// Cost: O(markers · log tokens).
pub fn pseudo_special(prompt: &str, tokens: &[Token]) -> Vec<Finding> {
    let markers = find_markers(prompt);
    let texts: std::collections::HashSet<&str> =
        markers.iter().map(|&(s, e)| &prompt[s..e]).collect();
    let mut seen: HashMap<&str, usize> = HashMap::new();
    let mut firsts: Vec<(usize, usize, usize, Vec<String>)> = Vec::new();
    for &(s, e) in &markers {
        let text = &prompt[s..e];
        if is_placeholder(text, &texts) {
            continue;
        }
        // Tokens are ordered by offset: the first one ending after `s`, then all starting before `e`.
        let from = tokens.partition_point(|t| t.end <= s);
        let covering: Vec<&Token> = tokens[from..]
            .iter()
            .take_while(|t| t.start < e)
            .filter(|t| t.end > s && t.end > t.start)
            .collect();
        let whole = covering.len() == 1 && covering[0].start == s && covering[0].end == e;
        if whole || covering.is_empty() {
            continue;
        }
        if let Some(&k) = seen.get(text) {
            firsts[k].2 += 1;
            continue;
        }
        seen.insert(text, firsts.len());
        let pieces = covering.iter().map(|t| t.piece.clone()).collect();
        firsts.push((s, e, 1, pieces));
    }
    firsts
        .into_iter()
        .map(|(s, e, count, pieces)| {
            let text = &prompt[s..e];
            let from = tokens.partition_point(|t| t.end <= s);
            let token = tokens[from..].iter().position(|t| t.start < e && t.end > t.start).map(|k| from + k);
            let list = pieces.iter().map(|p| format!("`{}`", p.escape_debug())).collect::<Vec<_>>().join(",");
            let times = if count > 1 { format!(" ({count} occurrences)") } else { String::new() };
            Finding::new(
                Rule::TokenPseudoSpecial,
                format!("`{text}` looks like a control marker but is {} ordinary pieces in this vocabulary ({list}){times}", pieces.len()),
                "the template was written for another model's vocabulary: use the model's own template, or expect the model not to recognise this marker",
            )
            .with_evidence(Evidence { pane: Some(Pane::Template), offset: Some(s), token, excerpt: Some(text.to_owned()), ..Default::default() })
        })
        .collect()
}

/// Whether marker text `text` (one of [`find_markers`]' spans) is a prose placeholder rather
/// than a control marker: a plain angle tag (`<name>`, not `<|…|>`, `<｜…｜>` or `[…]`) whose
/// name has a `-` and whose partner tag (`</name>` for `<name>` and the reverse) is not among
/// `all` (every marker text of the same prompt). Qwen3's `<function-name>` and
/// `<args-json-object>` are placeholders; `<tool_call>`, `<think>` and `<end-of-turn>` paired
/// with `</end-of-turn>` are not.
pub fn is_placeholder(text: &str, all: &std::collections::HashSet<&str>) -> bool {
    let Some(inner) = text.strip_prefix('<').and_then(|t| t.strip_suffix('>')) else {
        return false;
    };
    if inner.starts_with('|') || inner.ends_with('|') || !inner.contains('-') {
        return false;
    }
    let partner = match inner.strip_prefix('/') {
        Some(name) => format!("<{name}>"),
        None => format!("</{inner}>"),
    };
    !all.contains(partner.as_str())
}

/// `bos.duplicate`: more than one BOS token at the start of `tokens`. A token is BOS when its id
/// equals `bos_id` and its piece equals `bos_text` (each check skipped when `None`). The message
/// lists the 0-based token positions; evidence points at the second one.
pub fn bos_duplicate(
    tokens: &[Token],
    bos_id: Option<u32>,
    bos_text: Option<&str>,
) -> Option<Finding> {
    if bos_id.is_none() && bos_text.is_none() {
        return None;
    }
    let is_bos =
        |t: &Token| bos_id.is_none_or(|b| t.id == b) && bos_text.is_none_or(|b| t.piece == b);
    let positions: Vec<usize> = tokens
        .iter()
        .take_while(|t| is_bos(t))
        .enumerate()
        .map(|(i, _)| i)
        .collect();
    if positions.len() < 2 {
        return None;
    }
    let list = positions
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    let what = bos_text
        .map(|t| format!("`{t}`"))
        .unwrap_or_else(|| format!("id {}", bos_id.unwrap_or_default()));
    Some(
        Finding::new(
            Rule::BosDuplicate,
            format!("{} BOS tokens ({what}) at the start of the prompt, at token positions {list}", positions.len()),
            "the template prints the BOS text and the engine adds BOS again: drop `{{ bos_token }}` from the template or disable add_bos_token",
        )
        .with_evidence(Evidence { pane: Some(Pane::Template), token: Some(positions[1]), offset: Some(tokens[positions[1]].start), excerpt: bos_text.map(str::to_owned), ..Default::default() }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers() {
        let s = "<|im_start|>x <tool_call>{}</tool_call> [TOOL_CALLS] <｜tool▁call▁begin｜> a < b <|tool_call>call:f{}<tool_call|> <br> [x]";
        let found: Vec<&str> = find_markers(s).into_iter().map(|(a, b)| &s[a..b]).collect();
        assert_eq!(
            found,
            [
                "<|im_start|>",
                "<tool_call>",
                "</tool_call>",
                "[TOOL_CALLS]",
                "<｜tool▁call▁begin｜>",
                "<|tool_call>",
                "<tool_call|>",
                "<br>"
            ]
        );
    }

    #[test]
    fn hf_tokenizer_json() {
        // A minimal byte-level BPE tokenizer.json: "ab" merges, "<s>" is a special added token,
        // "<x>" a non-special added token.
        let spec = serde_json::json!({
            "version": "1.0", "truncation": null, "padding": null,
            "added_tokens": [
                {"id": 3, "content": "<s>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
                {"id": 4, "content": "<x>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": false}],
            "normalizer": null,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": true},
            "post_processor": null, "decoder": null,
            "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
                      "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
                      "vocab": {"a": 0, "b": 1, "ab": 2, "<s>": 3, "<x>": 4, "Ġ": 5}, "merges": ["a b"]}
        });
        let v = Vocab::from_tokenizer_json("tokenizer.json", spec.to_string().as_bytes()).unwrap();
        assert_eq!(v.bos_id, Some(3));
        assert!(!v.add_bos);
        let toks = tokenize(&v, "<s>ab<x>a");
        let got: Vec<(u32, &str, bool)> = toks
            .iter()
            .map(|t| (t.id, t.piece.as_str(), t.special))
            .collect();
        assert_eq!(
            got,
            [
                (3, "<s>", true),
                (2, "ab", false),
                (4, "<x>", true),
                (0, "a", false)
            ]
        );
    }

    #[test]
    fn bos_positions() {
        let t = |id, p: &str| Token {
            id,
            piece: p.into(),
            special: true,
            start: 0,
            end: 0,
        };
        let toks = [t(1, "<s>"), t(1, "<s>"), t(1, "<|im_start|>"), t(5, "user")];
        let f = bos_duplicate(&toks, Some(1), Some("<s>")).unwrap();
        assert!(f.message.contains("positions 0, 1"), "{}", f.message);
        assert!(bos_duplicate(&toks[1..], Some(1), Some("<s>")).is_none());
    }

    /// One token per character: every marker is split.
    fn per_char(s: &str) -> Vec<Token> {
        s.char_indices()
            .map(|(i, c)| Token {
                id: 0,
                piece: c.to_string(),
                special: false,
                start: i,
                end: i + c.len_utf8(),
            })
            .collect()
    }

    #[test]
    fn placeholders_are_not_pseudo_special() {
        // Qwen3-0.6B's tool instructions (llama.cpp models/templates/Qwen-Qwen3-0.6B.jinja).
        let p = "<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call> <end-of-turn>x</end-of-turn>";
        let found: Vec<String> = pseudo_special(p, &per_char(p))
            .into_iter()
            .filter_map(|f| f.evidence.excerpt)
            .collect();
        assert_eq!(
            found,
            [
                "<tool_call>",
                "</tool_call>",
                "<end-of-turn>",
                "</end-of-turn>"
            ]
        );
        // A lone non-hyphenated tag (a `<think>` prefill) is still a marker.
        let q = "<|im_start|>assistant\n<think>\n";
        let found: Vec<String> = pseudo_special(q, &per_char(q))
            .into_iter()
            .filter_map(|f| f.evidence.excerpt)
            .collect();
        assert_eq!(found, ["<|im_start|>", "<think>"]);
    }
}
