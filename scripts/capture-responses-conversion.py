"""Capture llama-server's conversion of OpenAI Responses requests into chat requests.

Usage: python capture-responses-conversion.py BASE_URL SERVER_LOG OUT.json

llama-server (build 11434) started with `-v` logs every converted body
(`converted request: {...}`, tools/server/server-context.cpp:5347). For each request below this
POSTs it to BASE_URL/v1/responses (non-streamed, max_output_tokens 1 unless the case sets it),
then reads the new log lines: OUT.json gets one entry per case,
  {"name", "request", "status", "converted": <the logged body, verbatim text> | null,
   "error": <the 400 message> | null,
   "skipped_tool_types": [<type of each "unsupported Responses tool type '…' skipped" line>]}
which tests/data/responses/conversion.json keeps and toolscope's port
(template::responses::responses_to_chat) is tested against.
"""

import json
import sys
import time
import urllib.error
import urllib.request

TOOLS = [
    {"type": "function", "name": "get_weather", "description": "Get the current weather for a city",
     "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
    {"type": "custom", "name": "apply_patch", "description": "Apply a patch",
     "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}},
    {"type": "function", "name": "get_time", "strict": False,
     "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}},
    {"type": "namespace", "name": "multi_agent_v1", "description": "agents", "tools": []},
    {"type": "web_search"},
]

CASES = [
    ("instructions_string_input_all_tool_types", {
        "model": "smollm2", "instructions": "You are terse.", "input": "What is the weather in Paris?",
        "tools": TOOLS, "tool_choice": {"type": "function", "name": "get_weather"},
        "parallel_tool_calls": True, "reasoning": {"effort": "low", "summary": "auto"},
        "text": {"format": {"type": "json_schema", "name": "x", "schema": {"type": "object"}}},
        "temperature": 0, "store": False, "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "k1"}),
    ("case12_history", json.load(open(sys.argv[4]))) if len(sys.argv) > 4 else None,
    ("merges_into_previous_assistant", {
        "input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "dev rules"}]},
            {"role": "system", "content": "sys"},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}], "id": "u1", "status": "completed"},
            {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "first thought"}, {"type": "reasoning_text", "text": "second part"}]},
            {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed", "content": [{"type": "output_text", "text": "Let me check."}, {"type": "refusal", "refusal": "no"}]},
            {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "get_weather", "arguments": "{\"city\":\"Paris\"}", "status": "completed"},
            {"type": "function_call", "call_id": "c2", "name": "get_time", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": [{"type": "input_text", "text": "18 C"}]},
            {"type": "function_call_output", "call_id": "c2", "output": "noon"},
            {"type": "message", "role": "assistant", "content": "plain string content"},
            {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "later"}]},
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": "s"}], "content": [{"type": "reasoning_text", "text": "overwrites"}]},
            {"role": "user", "content": "next"},
        ],
        "tools": [TOOLS[0]], "max_tokens": 7, "max_output_tokens": 1, "reasoning": None}),
    ("assistant_short_form", {"input": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "short"}]}),
    ("custom_tool_call_item", {"input": [{"role": "user", "content": "hi"}, {"type": "custom_tool_call", "call_id": "c", "name": "apply_patch", "input": "*** Begin Patch"}]}),
    ("custom_tool_call_output_item", {"input": [{"type": "custom_tool_call_output", "call_id": "c", "output": "done"}]}),
    ("tool_output_as_output_text", {"input": [{"type": "function_call_output", "call_id": "c", "output": [{"type": "output_text", "text": "x"}]}]}),
    ("tool_output_part_without_type", {"input": [{"type": "function_call_output", "call_id": "c", "output": [{"text": "x"}]}]}),
    ("codex_reasoning_item", {"input": [{"role": "user", "content": "hi"}, {"type": "reasoning", "summary": [], "encrypted_content": "gAAA"}]}),
    ("reasoning_empty_content", {"input": [{"type": "reasoning", "summary": [], "content": []}]}),
    ("previous_response_id", {"input": "x", "previous_response_id": "resp_1"}),
    ("previous_response_id_not_a_string", {"input": "x", "previous_response_id": 3, "max_output_tokens": 1}),
    ("no_input", {"model": "m"}),
    ("input_number", {"input": 3}),
    ("input_null", {"input": None}),
    ("tools_object", {"input": "x", "tools": {}}),
    ("input_file", {"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]}),
    ("input_text_without_text", {"input": [{"role": "user", "content": [{"type": "input_text"}]}]}),
    ("input_part_other_type", {"input": [{"role": "user", "content": [{"type": "output_text", "text": "x"}]}]}),
    ("output_part_other_type", {"input": [{"type": "message", "role": "assistant", "content": [{"type": "reasoning_text", "text": "x"}]}]}),
    ("output_text_not_string", {"input": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": 3}]}]}),
    ("input_string_item", {"input": ["just a string"]}),
    ("instructions_array_and_all_tools_dropped", {"instructions": [{"role": "user", "content": "x"}], "input": "y", "tools": [{"type": "web_search"}, "not a tool"]}),
]


def post(base, body):
    req = urllib.request.Request(base + "/v1/responses", data=json.dumps(body).encode(),
                                 headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def main():
    base, log_path, out_path = sys.argv[1], sys.argv[2], sys.argv[3]
    out = []
    for case in CASES:
        if case is None:
            continue
        name, body = case
        body = dict(body)
        body.setdefault("max_output_tokens", 1)
        body["stream"] = False
        with open(log_path, "rb") as f:
            start = len(f.read())
        status, answer = post(base, body)
        time.sleep(0.2)
        with open(log_path, "rb") as f:
            new = f.read()[start:].decode("utf-8", "replace")
        converted = None
        skipped = []
        for line in new.splitlines():
            marker = "converted request: "
            if marker in line:
                converted = line.split(marker, 1)[1]
            w = "unsupported Responses tool type '"
            if w in line:
                skipped.append(line.split(w, 1)[1].split("' skipped", 1)[0])
        error = answer.get("error", {}).get("message") if status >= 400 else None
        out.append({"name": name, "request": body, "status": status,
                    "converted": converted, "error": error, "skipped_tool_types": skipped})
        print(name, status, error or "", file=sys.stderr)
    with open(out_path, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
