"""Drive the official openai and anthropic Python SDKs against a base URL (toolscope's proxy).

Usage: python sdk_clients.py BASE_URL OPENAI_REQUEST.json ANTHROPIC_REQUEST.json [openai|openai-stream|anthropic]

For each of four calls (openai non-streamed, openai streamed, anthropic non-streamed,
anthropic streamed) prints one JSON line:
  {"name", "api", "stream", "calls": [{"name", "arguments"}], "content", "finish",
   "received_b64"}
where `calls`/`content`/`finish` are what the SDK itself parsed (its own objects), and
`received_b64` is every response body byte the SDK read from the socket, in order (a tee on the
httpx transport), so the test can compare it with what toolscope recorded.
"""

import base64
import json
import sys

import anthropic
import httpx
import openai

try:  # anthropic 2.x is built on httpx2
    import httpx2
except ImportError:
    httpx2 = None


def tee_transport(httpx_mod):
    """An httpx (or httpx2, which anthropic 2.x uses) transport that keeps a copy of every
    response body byte read through it."""

    class Tee(httpx_mod.HTTPTransport):
        def __init__(self):
            super().__init__()
            self.received = []

        def handle_request(self, request):
            response = super().handle_request(request)
            buf = bytearray()
            self.received.append(buf)
            inner = response.stream

            class Stream(httpx_mod.SyncByteStream):
                def __iter__(self):
                    for chunk in inner:
                        buf.extend(chunk)
                        yield chunk

                def close(self):
                    inner.close()

            response.stream = Stream()
            return response

    return Tee()


def emit(name, api, stream, calls, content, finish, tee):
    print(
        json.dumps(
            {
                "name": name,
                "api": api,
                "stream": stream,
                "calls": calls,
                "content": content,
                "finish": finish,
                "received_b64": base64.b64encode(bytes(tee.received[-1])).decode(),
            }
        ),
        flush=True,
    )


def run_openai(base, req, stream):
    tee = tee_transport(httpx)
    client = openai.OpenAI(
        base_url=base + "/v1", api_key="sk-local", http_client=httpx.Client(transport=tee), max_retries=0
    )
    body = {k: v for k, v in req.items() if k != "stream"}
    if not stream:
        r = client.chat.completions.create(**body)
        m = r.choices[0].message
        calls = [
            {"name": c.function.name, "arguments": json.loads(c.function.arguments or "{}")}
            for c in (m.tool_calls or [])
        ]
        emit("openai", "openai", False, calls, m.content or "", r.choices[0].finish_reason, tee)
        return
    calls = {}
    content = ""
    finish = None
    # The SDK reads up to `data: [DONE]` and closes the connection.
    for chunk in client.chat.completions.create(stream=True, **body):
        if not chunk.choices:
            continue
        ch = chunk.choices[0]
        if ch.delta.content:
            content += ch.delta.content
        for tc in ch.delta.tool_calls or []:
            c = calls.setdefault(tc.index, {"name": "", "arguments": ""})
            if tc.function and tc.function.name:
                c["name"] += tc.function.name
            if tc.function and tc.function.arguments:
                c["arguments"] += tc.function.arguments
        if ch.finish_reason:
            finish = ch.finish_reason
    out = [
        {"name": c["name"], "arguments": json.loads(c["arguments"] or "{}")}
        for _, c in sorted(calls.items())
    ]
    emit("openai-stream", "openai", True, out, content, finish, tee)


def run_anthropic(base, req, stream):
    httpx_mod = httpx2 if httpx2 is not None else httpx
    tee = tee_transport(httpx_mod)
    client = anthropic.Anthropic(
        base_url=base, api_key="sk-local", http_client=httpx_mod.Client(transport=tee), max_retries=0
    )
    body = {k: v for k, v in req.items() if k != "stream"}
    # Fields this SDK version has no parameter for (anthropic 2.x dropped `temperature`) go in
    # `extra_body`, as a user of the SDK would send them.
    import inspect

    known = inspect.signature(client.messages.create).parameters
    extra = {k: body.pop(k) for k in list(body) if k not in known}
    if extra:
        body["extra_body"] = extra
    if stream:
        with client.messages.stream(**body) as s:
            for _ in s:
                pass
            m = s.get_final_message()
    else:
        m = client.messages.create(**body)
    calls = [{"name": b.name, "arguments": b.input} for b in m.content if b.type == "tool_use"]
    content = "".join(b.text for b in m.content if b.type == "text")
    emit("anthropic-stream" if stream else "anthropic", "anthropic", stream, calls, content, m.stop_reason, tee)


def main():
    base, oreq, areq = sys.argv[1], sys.argv[2], sys.argv[3]
    only = sys.argv[4] if len(sys.argv) > 4 else None
    oreq = json.load(open(oreq))
    areq = json.load(open(areq))
    if only in (None, "openai"):
        run_openai(base, oreq, False)
    if only in (None, "openai", "openai-stream"):
        run_openai(base, oreq, True)
    if only in (None, "anthropic"):
        run_anthropic(base, areq, False)
        run_anthropic(base, areq, True)


if __name__ == "__main__":
    main()
