//! Vocabularies and tokens: splitting a rendered prompt into pieces, special tokens, BOS count,
//! pseudo-special markers. Pure.
