"""The official openai and anthropic SDKs as an agent uses them; run against a live server
(through `toolscope proxy`) and against `toolscope serve`, their parsed objects must be equal.

usage: python sdk_clients.py BASE_URL run|mismatch   (prints JSON)
"""
import json
import os
import sys

import anthropic
import openai

base, mode = sys.argv[1], sys.argv[2]
oa = openai.OpenAI(base_url=base + "/v1", api_key="sk-test-secret", max_retries=0)
an = anthropic.Anthropic(base_url=base, api_key="sk-ant-test-secret", max_retries=0)
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Current weather for a city",
     "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "get_time", "description": "Current time in a timezone",
     "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]}}},
]
A_TOOLS = [{"name": "get_weather", "description": "Current weather for a city",
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]
MSGS = [{"role": "user", "content": "What is the weather in Vienna?"}]
COMMON = dict(model="smollm2", max_tokens=24, temperature=0)
# anthropic 2.10's messages.stream() takes no temperature; the server default is used
A_COMMON = dict(model="smollm2", max_tokens=24)

if mode == "run":
    out = {}
    # the few-shot request of sessions/a-two-tools-stream.jsonl: with the Qwen3 template this
    # 135M model calls get_weather, streamed as tool-call deltas
    few_shot = json.load(open(os.path.join(os.path.dirname(__file__), "../../../scripts/record-requests/a-two-tools-stream.json")))
    stream = oa.chat.completions.create(**few_shot)
    out["openai_stream"] = [c.model_dump() for c in stream]
    out["openai"] = oa.chat.completions.create(messages=MSGS, tools=TOOLS, tool_choice="required", seed=1, **COMMON).model_dump()
    out["openai_text"] = oa.chat.completions.create(messages=[{"role": "user", "content": "Say hi."}], **COMMON).model_dump()
    with an.messages.stream(messages=MSGS, tools=A_TOOLS, tool_choice={"type": "any"}, **A_COMMON) as s:
        out["anthropic_stream"] = [e.model_dump() for e in s]
        out["anthropic_stream_final"] = s.get_final_message().model_dump()
    out["anthropic"] = an.messages.create(messages=MSGS, tools=A_TOOLS, **A_COMMON).model_dump()
    print(json.dumps(out))
else:
    res = {}
    try:
        oa.chat.completions.create(messages=[{"role": "user", "content": "What is the weather in Graz?"}], tools=TOOLS,
                                   tool_choice="required", stream=True, seed=1, **COMMON)
        res["openai"] = "no error"
    except openai.NotFoundError as e:
        res["openai"] = {"status": e.status_code, "message": e.message, "body": e.body}
    try:
        an.messages.create(messages=[{"role": "user", "content": "Weather in Graz?"}], tools=A_TOOLS, **A_COMMON)
        res["anthropic"] = "no error"
    except anthropic.NotFoundError as e:
        res["anthropic"] = {"status": e.status_code, "message": e.message, "body": e.body}
    print(json.dumps(res))
