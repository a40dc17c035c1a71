"""Drive the official openai Python SDK's Responses API against a base URL (toolscope's proxy
or `toolscope serve`), for the Responses end-to-end tests (issue #22).

  python responses_sdk.py BASE_URL HISTORY.json CASE [CASE ...]

HISTORY.json is a chat request (scripts/record-requests/a-two-tools-stream.json); it is turned
into Responses input items as llama-server b11434 reads them (tools/server/server-chat.cpp
`server_chat_convert_responses_to_chatcmpl`): the system message becomes `instructions`, user
messages `{"role": "user", "content"}`, assistant calls `function_call` items, tool results
`function_call_output` items, assistant text an output `message` item.

Cases (one JSON line printed per case):
  plain    responses.create(..., tools=[...])
  stream   the same with stream=True
  dropped  plain, plus a `custom` tool (Codex's freeform apply_patch) and a `namespace` tool
  cut      plain with max_output_tokens=6 (cuts the call)
  zstd     the plain request sent by httpx with `Content-Encoding: zstd` (Python zstandard)
  bomb     a zstd body that decodes to 1 GiB of spaces, sent by httpx

Line: {"case", "status", "calls": [{"name", "arguments", "call_id"}], "text",
       "response_status", "sent_b64" (zstd/bomb: the bytes sent), "received_b64"}
where calls/text/response_status are what the SDK parsed (its own objects).
"""

import base64
import json
import sys

import openai

try:  # openai 3.x is built on httpx2
    import httpx2 as httpx
except ImportError:
    import httpx


def to_responses(chat):
    instructions = None
    items = []
    for m in chat["messages"]:
        role = m["role"]
        if role == "system":
            instructions = m["content"]
        elif role == "user":
            items.append({"role": "user", "content": m["content"]})
        elif role == "assistant" and m.get("tool_calls"):
            for c in m["tool_calls"]:
                items.append({"type": "function_call", "call_id": c["id"], "name": c["function"]["name"],
                              "arguments": c["function"]["arguments"]})
        elif role == "assistant":
            items.append({"type": "message", "role": "assistant",
                          "content": [{"type": "output_text", "text": m["content"]}]})
        elif role == "tool":
            items.append({"type": "function_call_output", "call_id": m["tool_call_id"], "output": m["content"]})
    tools = [dict({"type": "function"}, **t["function"]) for t in chat["tools"]]
    return instructions, items, tools


def tee_transport():
    class Tee(httpx.HTTPTransport):
        def __init__(self):
            super().__init__()
            self.received = []

        def handle_request(self, request):
            response = super().handle_request(request)
            buf = bytearray()
            self.received.append(buf)
            inner = response.stream

            class Stream(httpx.SyncByteStream):
                def __iter__(self):
                    for chunk in inner:
                        buf.extend(chunk)
                        yield chunk

                def close(self):
                    inner.close()

            response.stream = Stream()
            return response

    return Tee()


def calls_of(resp):
    out = []
    for item in resp.output:
        if item.type == "function_call":
            out.append({"name": item.name, "arguments": item.arguments, "call_id": item.call_id})
    return out


def text_of(resp):
    parts = []
    for item in resp.output:
        if item.type == "message":
            for c in item.content:
                if getattr(c, "type", None) == "output_text":
                    parts.append(c.text)
    return "".join(parts)


def main():
    base, history, cases = sys.argv[1], sys.argv[2], sys.argv[3:]
    chat = json.load(open(history))
    instructions, items, tools = to_responses(chat)
    params = dict(model="smollm2", instructions=instructions, input=items, tools=tools,
                  temperature=0, max_output_tokens=96)
    for case in cases:
        tee = tee_transport()
        client = openai.OpenAI(base_url=base.rstrip("/") + "/v1", api_key="sk-test",
                               http_client=httpx.Client(transport=tee), max_retries=0)
        line = {"case": case}
        if case in ("plain", "dropped", "cut"):
            p = dict(params)
            if case == "dropped":
                p["tools"] = tools + [
                    {"type": "custom", "name": "apply_patch", "description": "Apply a patch",
                     "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}},
                    {"type": "namespace", "name": "multi_agent_v1", "description": "Agents",
                     "tools": [{"type": "function", "name": "spawn_agent",
                                "parameters": {"type": "object", "properties": {}}}]},
                ]
            if case == "cut":
                p["max_output_tokens"] = 6
            resp = client.responses.create(**p)
            line.update(status=200, calls=calls_of(resp), text=text_of(resp), response_status=resp.status)
        elif case == "stream":
            final = None
            events = 0
            with client.responses.create(stream=True, **params) as stream:
                for ev in stream:
                    events += 1
                    if ev.type in ("response.completed", "response.incomplete", "response.failed"):
                        final = ev.response
            line.update(status=200, calls=calls_of(final), text=text_of(final),
                        response_status=final.status, events=events)
        elif case in ("zstd", "bomb"):
            import zstandard
            if case == "zstd":
                raw = json.dumps(dict(params, stream=False)).encode()
                body = zstandard.ZstdCompressor(level=3).compress(raw)
            else:
                # 1 GiB of spaces inside a JSON string, streamed into the compressor
                cctx = zstandard.ZstdCompressor(level=3)
                chunk = b" " * (1 << 20)
                obj = cctx.compressobj()
                parts = [obj.compress(b'{"model":"smollm2","input":"')]
                for _ in range(1024):
                    parts.append(obj.compress(chunk))
                parts.append(obj.compress(b'"}'))
                parts.append(obj.flush())
                body = b"".join(parts)
            http = httpx.Client(transport=tee)
            r = http.post(base.rstrip("/") + "/v1/responses", content=body,
                          headers={"content-type": "application/json", "content-encoding": "zstd"})
            line.update(status=r.status_code, sent_b64=base64.b64encode(body).decode())
        line["received_b64"] = [base64.b64encode(bytes(b)).decode() for b in tee.received]
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
