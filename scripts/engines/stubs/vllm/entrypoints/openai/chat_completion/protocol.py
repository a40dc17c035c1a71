"""Stand-in for `vllm/entrypoints/openai/chat_completion/protocol.py` (1,269 lines; imports the
engine config, logprobs, outputs, renderers and sampling params). The request models the tool
parsers see are re-declared with the real fields they read, types and defaults as in 0.33.0
(`ChatCompletionRequest` at protocol.py:235): messages, model, tools, tool_choice,
response_format, include_reasoning, parallel_tool_calls, skip_special_tokens,
spaces_between_special_tokens, chat_template_kwargs, structured_outputs, and the private
`_grammar_from_parser`. `ChatCompletionToolsParam`, `ChatCompletionNamedFunction` and
`ChatCompletionNamedToolChoiceParam` (protocol.py:206-233) and `ChatMessage` (:76) are executed verbatim from the wheel.
`extract_structured_outputs` calls the wheel's `structured_outputs_from_response_format`
(generate/base/protocol.py:181), as the real method does."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, PrivateAttr, model_serializer, model_validator  # noqa: F401 (used by the extracted classes)

import loader
from vllm.entrypoints.generate.base.protocol import (
    AnyResponseFormat,
    FunctionDefinition,
    structured_outputs_from_response_format,
)
from vllm.entrypoints.serve.engine.protocol import OpenAIBaseModel
from vllm.sampling_params import StructuredOutputsParams

from openai.types.chat.chat_completion_audio import ChatCompletionAudio as OpenAIChatCompletionAudio  # noqa: E402,F401
from openai.types.chat.chat_completion_message import Annotation as OpenAIAnnotation  # noqa: E402,F401
from vllm.entrypoints.generate.base.protocol import FunctionCall, ToolCall  # noqa: E402,F401

loader.extract(
    "vllm/entrypoints/openai/chat_completion/protocol.py",
    ["ChatCompletionToolsParam", "ChatCompletionNamedFunction", "ChatCompletionNamedToolChoiceParam", "ChatMessage"],
    globals(),
)
for _m in (ChatCompletionToolsParam, ChatCompletionNamedFunction, ChatCompletionNamedToolChoiceParam, ChatMessage):  # noqa: F821
    _m.model_rebuild()


class ChatCompletionRequest(OpenAIBaseModel):
    messages: list[dict[str, Any]] = Field(default_factory=list)
    model: str | None = None
    response_format: AnyResponseFormat | None = None
    tools: list[ChatCompletionToolsParam] | None = None  # noqa: F821
    tool_choice: (
        Literal["none"]
        | Literal["auto"]
        | Literal["required"]
        | ChatCompletionNamedToolChoiceParam  # noqa: F821
        | None
    ) = "none"
    include_reasoning: bool = True
    parallel_tool_calls: bool | None = True
    skip_special_tokens: bool | None = None
    spaces_between_special_tokens: bool = True
    chat_template_kwargs: dict[str, Any] | None = None
    structured_outputs: StructuredOutputsParams | None = None

    _grammar_from_parser: bool = PrivateAttr(default=False)

    def extract_structured_outputs(self) -> StructuredOutputsParams | None:
        return structured_outputs_from_response_format(self.structured_outputs, self.response_format)


ChatCompletionRequest.model_rebuild()


from vllm.entrypoints.openai.responses.protocol import ResponsesRequest  # noqa: E402,F401


class ChatCompletionResponseStreamChoice:
    """Streaming response choice: only an `isinstance` target for the non-streaming path."""
