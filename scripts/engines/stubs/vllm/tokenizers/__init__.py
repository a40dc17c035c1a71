"""Stand-in for `vllm/tokenizers/__init__.py` (loads Hugging Face / Mistral tokenizers):
`TokenizerLike` is a type annotation in the parser code; the driver's tokenizer is
scripts/engines/tokenizer.py."""


class TokenizerLike:
    pass
