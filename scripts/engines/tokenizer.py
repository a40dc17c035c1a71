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


class HarmonyTokenizer:
    """Stand-in for gpt-oss's tokenizer: openai_harmony's own `o200k_harmony` encoding (the one
    vLLM's HarmonyParser decodes with, vllm/entrypoints/openai/parser/harmony_utils.py
    `get_encoding`), so the token ids are the model's real ids for the text: its vocabulary file
    is o200k_base.tiktoken (scripts/engines/setup.sh), found through TIKTOKEN_ENCODINGS_BASE.
    `encode` keeps special tokens (`<|channel|>`, `<|call|>`, …) as their single ids, as the
    model emits them."""

    def __init__(self, name: str = "stand-in", init_kwargs: dict | None = None):
        from openai_harmony import HarmonyEncodingName, load_harmony_encoding

        self._enc = load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)
        self.name_or_path = name
        self.init_kwargs = dict(init_kwargs or {})
        self._special = {t: self._enc.encode(t, allowed_special="all")[0] for t in self._enc.special_tokens_set}
        self.all_special_tokens = sorted(self._special)
        self.all_special_ids = [self._special[t] for t in self.all_special_tokens]
        self.eos_token = "<|return|>"
        self.eos_token_id = self._special["<|return|>"]
        self.bos_token = "<|startoftext|>"
        self.bos_token_id = self._special["<|startoftext|>"]
        self.chat_template = None

    def get_vocab(self) -> dict[str, int]:
        return dict(self._special)

    @property
    def vocab(self) -> dict[str, int]:
        return dict(self._special)

    def __len__(self):
        return max(self.all_special_ids) + 1

    @property
    def vocab_size(self):
        return len(self)

    def convert_tokens_to_ids(self, tokens):
        if isinstance(tokens, str):
            ids = self._enc.encode(tokens, allowed_special="all")
            return ids[0] if len(ids) == 1 else None
        return [self.convert_tokens_to_ids(t) for t in tokens]

    def convert_ids_to_tokens(self, ids, skip_special_tokens=False):
        if isinstance(ids, int):
            return self._enc.decode([ids])
        return [self._enc.decode([i]) for i in ids]

    def tokenize(self, text: str, **kwargs) -> list[str]:
        return self.convert_ids_to_tokens(self.encode(text))

    def encode(self, text: str, add_special_tokens: bool = False, **kwargs) -> list[int]:
        return self._enc.encode(text, allowed_special="all")

    def __call__(self, text, **kwargs):
        return {"input_ids": self.encode(text)}

    def decode(self, ids, skip_special_tokens: bool = False, **kwargs) -> str:
        if isinstance(ids, int):
            ids = [ids]
        if skip_special_tokens:
            ids = [i for i in ids if not self._enc.is_special_token(i)]
        return self._enc.decode(ids)

    def batch_decode(self, seqs, **kwargs):
        return [self.decode(s, **kwargs) for s in seqs]
