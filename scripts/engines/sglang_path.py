"""SGLang 0.5.23's non-streaming tool-call path, run from the released wheel.

`OpenAIServingChat._process_tool_calls` (sglang/srt/entrypoints/openai/serving_chat.py) is
compiled verbatim from the wheel and called on a minimal `self` carrying what it reads
(`tool_call_parser`, `tokenizer_manager.tokenizer`, `_process_tool_call_id` — the latter also
verbatim from the wheel). It builds the real `FunctionCallParser` and calls
`has_tool_call` / `parse_non_stream` exactly as the server does for `tool_choice: "auto"`.
No reasoning parser is configured (`--tool-call-parser NAME` only): the text reaches the
tool parser whole, as serving_chat does when `self.reasoning_parser` is unset.
`SGLANG_FORWARD_UNKNOWN_TOOLS` keeps its default (off): sglang/srt/environ.py is the wheel's.
"""

from __future__ import annotations

import json
import logging
import types
import uuid
from typing import Any

import orjson

import loader


def load():
    from sglang.srt.entrypoints.openai import protocol
    from sglang.srt.function_call.core_types import ToolCallItem
    from sglang.srt.function_call.function_call_parser import FunctionCallParser

    ns: dict[str, Any] = {
        "Any": Any,
        "json": json,
        "orjson": orjson,
        "uuid": uuid,
        "logger": logging.getLogger("sglang.srt.entrypoints.openai.serving_chat"),
        "FunctionCallParser": FunctionCallParser,
        "ToolCallItem": ToolCallItem,
        "ToolCall": protocol.ToolCall,
        "FunctionResponse": protocol.FunctionResponse,
        "ToolChoice": protocol.ToolChoice,
        "ToolCallProcessingResult": protocol.ToolCallProcessingResult,
    }
    rel = "sglang/srt/entrypoints/openai/serving_chat.py"
    process = loader.extract_method(rel, "OpenAIServingChat", "_process_tool_calls", ns)
    call_id = loader.extract_method(rel, "OpenAIServingChat", "_process_tool_call_id", dict(ns))
    return protocol, FunctionCallParser, process, call_id


class _Self:
    """The attributes of an `OpenAIServingChat` that `_process_tool_calls` reads."""

    def __init__(self, parser_name: str, tokenizer, call_id):
        self.tool_call_parser = parser_name
        self.tokenizer_manager = types.SimpleNamespace(tokenizer=tokenizer)
        self._call_id = call_id

    def _process_tool_call_id(self, call_item, history_tool_calls_cnt):
        return self._call_id(self, call_item, history_tool_calls_cnt)


_loaded = None


def registered() -> list[str]:
    global _loaded
    if _loaded is None:
        _loaded = load()
    return sorted(_loaded[1].ToolCallParserEnum)


def run(parser_name: str, text: str, tools: list[dict], tokenizer=None) -> dict:
    """One text through SGLang's non-streaming `tool_choice: "auto"` path. Returns
    `{"calls": [{"name", "arguments"}], "content", "reasoning"}` as the response message holds
    them (`content = text if text else ""`, serving_chat.py)."""
    global _loaded
    if _loaded is None:
        _loaded = load()
    protocol, FunctionCallParser, process, call_id = _loaded
    if parser_name not in FunctionCallParser.ToolCallParserEnum:
        raise KeyError(f"SGLang 0.5.23 registers no tool-call parser {parser_name!r}")
    tool_objs = [protocol.Tool.model_validate(t) for t in tools]
    me = _Self(parser_name, tokenizer, call_id)
    finish_reason = {"type": "stop", "matched": None}
    tool_calls, out_text, finish_reason = process(me, text, tool_objs, finish_reason, "auto", 0)
    calls = []
    for tc in tool_calls or []:
        args = tc.function.arguments
        calls.append({"name": tc.function.name, "arguments": args})
    return {
        "calls": calls,
        "content": out_text if out_text else "",
        "reasoning": "",
        "finish_reason": finish_reason["type"],
    }
