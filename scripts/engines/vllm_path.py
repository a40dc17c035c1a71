"""vLLM 0.33.0's non-streaming chat path for tool calls, run from the released wheel.

As `OpenAIServingChat` (vllm/entrypoints/openai/chat_completion/serving.py:166, :217, :1015)
does: `ParserManager.get_parser(tool_parser_name=NAME, reasoning_parser_name=None,
enable_auto_tools=True, tokenizer=…)` composes the parser class (and validates it against the
tokenizer, as at server start), one instance is made per choice with `(tokenizer,
request.tools, chat_template_kwargs=…, model_config=None)`, then
`parser.parse(text, request, enable_auto_tools=True, model_output_token_ids=ids)`, and
`assemble_chat_message_fields` (message_assembly.py, verbatim from the wheel) picks the message
fields. The request is `tool_choice: "auto"` with the corpus tools; no reasoning parser
(`--tool-call-parser NAME` only); the text is the detokenized output with special tokens kept.
"""

from __future__ import annotations

import json

import loader


def load():
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    from vllm.parser.parser_manager import ParserManager
    from vllm.entrypoints.openai.chat_completion.message_assembly import (
        assemble_chat_message_fields,
    )
    from vllm.tool_parsers.abstract_tool_parser import ToolParserManager

    return ChatCompletionRequest, ParserManager, assemble_chat_message_fields, ToolParserManager


_loaded = None


def _get():
    global _loaded
    if _loaded is None:
        _loaded = load()
    return _loaded


def registered() -> list[str]:
    tpm = _get()[3]
    names = set(getattr(tpm, "lazy_parsers", {}) or {}) | set(getattr(tpm, "tool_parsers", {}) or {})
    return sorted(names)


def run(parser_name: str, text: str, tools: list[dict], tokenizer, model_type: str | None = None) -> dict:
    Req, PM, assemble, _ = _get()
    request = Req(
        messages=[{"role": "user", "content": "hi"}],
        model="stand-in",
        tools=tools,
        tool_choice="auto",
    )
    parser_cls = PM.get_parser(
        tool_parser_name=parser_name,
        # gpt-oss: the model's config fills in the reasoning parser the flags leave empty
        # (vllm/model_executor/models/config.py:546, GptOssForCausalLMConfig)
        reasoning_parser_name="openai_gptoss" if model_type == "gpt_oss" else None,
        enable_auto_tools=True,
        model_name="stand-in",
        # serving.py:172: `is_harmony=self.model_config.hf_config.model_type == "gpt_oss"`
        is_harmony=model_type == "gpt_oss",
        tokenizer=tokenizer,
    )
    parser = parser_cls(tokenizer, request.tools, chat_template_kwargs={}, model_config=None)
    ids = tokenizer.encode(text)
    reasoning, content, tool_calls = parser.parse(
        text, request, enable_auto_tools=True, model_output_token_ids=ids
    )
    fields = assemble(
        request, reasoning, content, tool_calls, enable_auto_tools=True, parser_cls=parser_cls
    )
    calls = [{"name": tc.function.name, "arguments": tc.function.arguments} for tc in fields.tool_calls]
    return {
        "calls": calls,
        "content": fields.content if fields.content is not None else "",
        "reasoning": fields.reasoning or "",
    }
