"""Stand-in for `vllm/renderers/__init__.py` (chat template rendering, multimodal processing):
empty; `vllm.renderers.chat_utils` is stood in separately."""
