"""Stand-in for `vllm/config/__init__.py` (the engine configuration, imports torch): parsers
receive `model_config=None` from the driver, as vLLM passes none when no model config applies;
`ModelConfig` is only used in annotations."""


class ModelConfig:
    pass
