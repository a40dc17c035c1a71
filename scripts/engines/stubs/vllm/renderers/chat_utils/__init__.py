"""Stand-in for `vllm/renderers/chat_utils/__init__.py` (chat message and template handling):
the parser code imports `make_tool_call_id` and `get_tool_call_id_type`, executed verbatim from
the wheel's `vllm/renderers/chat_utils/tool_call.py`; `ChatCompletionMessageParam` is a type."""

from typing import Any

from vllm.config import ModelConfig
from vllm.utils import random_uuid

import loader

loader.extract(
    "vllm/renderers/chat_utils/tool_call.py",
    ["make_tool_call_id", "get_tool_call_id_type"],
    globals(),
)

ChatCompletionMessageParam = dict[str, Any]
