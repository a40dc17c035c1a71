"""Stand-in tokenizer (replaces the model's Hugging Face tokenizer, which needs the model files):
its vocabulary holds the family's marker strings as special tokens (ids from 100, in the order
given), every other character is its own token (id 1,000,000 + code point). `encode` splits the
text at the markers (longest first), so the token ids the parsers scan agree with the text, as
they do for a model whose markers are single special tokens. Implements the methods the parser
code calls: get_vocab, encode, decode, convert_tokens_to_ids, convert_ids_to_tokens, tokenize,
all_special_tokens, all_special_ids, vocab."""

from __future__ import annotations

CHAR_BASE = 1_000_000


class MarkerTokenizer:
    def __init__(self, markers: list[str], name: str = "stand-in", init_kwargs: dict | None = None):
        self.name_or_path = name
        # tokenizer_config.json keys some parsers read (Hunyuan 3: token_suffix)
        self.init_kwargs = dict(init_kwargs or {})
        self._vocab = {}
        for m in markers:
            if m and m not in self._vocab:
                self._vocab[m] = 100 + len(self._vocab)
        self._inv = {v: k for k, v in self._vocab.items()}
        self._sorted = sorted(self._vocab, key=len, reverse=True)
        self.all_special_tokens = list(self._vocab)
        self.all_special_ids = list(self._vocab.values())
        self.eos_token = None
        self.eos_token_id = None
        self.bos_token = None
        self.bos_token_id = None
        self.chat_template = None

    # -- vocabulary -------------------------------------------------------------------------
    def get_vocab(self) -> dict[str, int]:
        return dict(self._vocab)

    @property
    def vocab(self) -> dict[str, int]:
        return dict(self._vocab)

    def __len__(self):
        return len(self._vocab)

    @property
    def vocab_size(self):
        return len(self._vocab)

    def convert_tokens_to_ids(self, tokens):
        if isinstance(tokens, str):
            return self._vocab.get(tokens, self._char_id(tokens))
        return [self.convert_tokens_to_ids(t) for t in tokens]

    def convert_ids_to_tokens(self, ids, skip_special_tokens=False):
        if isinstance(ids, int):
            return self._piece(ids)
        return [self._piece(i) for i in ids]

    def _char_id(self, tok: str):
        return CHAR_BASE + ord(tok) if len(tok) == 1 else None

    def _piece(self, i: int) -> str:
        if i in self._inv:
            return self._inv[i]
        return chr(i - CHAR_BASE) if i >= CHAR_BASE else ""

    # -- text ---------------------------------------------------------------------------------
    def tokenize(self, text: str, **kwargs) -> list[str]:
        return [self._piece(i) for i in self.encode(text)]

    def encode(self, text: str, add_special_tokens: bool = False, **kwargs) -> list[int]:
        out, i = [], 0
        while i < len(text):
            for m in self._sorted:
                if text.startswith(m, i):
                    out.append(self._vocab[m])
                    i += len(m)
                    break
            else:
                out.append(CHAR_BASE + ord(text[i]))
                i += 1
        return out

    def __call__(self, text, **kwargs):
        return {"input_ids": self.encode(text)}

    def decode(self, ids, skip_special_tokens: bool = False, **kwargs) -> str:
        if isinstance(ids, int):
            ids = [ids]
        return "".join(
            "" if (skip_special_tokens and i in self._inv) else self._piece(i) for i in ids
        )

    def batch_decode(self, seqs, **kwargs):
        return [self.decode(s, **kwargs) for s in seqs]
