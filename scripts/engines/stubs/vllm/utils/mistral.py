"""Stand-in for `vllm/utils/mistral.py` (lazy-loads vLLM's mistral_common tokenizer wrapper):
the driver's tokenizers are never a `MistralTokenizer` (a Hugging Face-style tokenizer serves
`--tool-call-parser mistral` as for Mistral models with a `tokenizer_config.json`)."""


def is_mistral_tokenizer(tokenizer) -> bool:
    return False
