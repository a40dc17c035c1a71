"""Record llama-server's Responses replies and what the official openai SDK parses from them.

Usage: python capture-responses-sdk.py BASE_URL REQUEST.json OUT_DIR NAME

Sends REQUEST.json through the official `openai` SDK's `client.responses.create`, plain and with
`stream=True`, against BASE_URL (e.g. a llama-server b11434). Writes
  OUT_DIR/NAME.json      the non-streamed body, exactly as the SDK read it off the socket
  OUT_DIR/NAME.sse       the streamed body, exactly as the SDK read it off the socket
  OUT_DIR/NAME.sdk.json  what the SDK itself made of them:
    {"plain":  {"status", "output_text", "calls": [{"call_id", "name", "arguments"}],
                "usage": {"input_tokens", "output_tokens"}},
     "stream": {"event_types": [...], "status", "output_text", "calls": [...]}}
For the stream, `output_text` and `calls` are built from the SDK's typed event objects (the
`response.output_text.delta` events' `delta`, and per call item id the
`response.function_call_arguments.delta` events; name and call_id from
`response.output_item.added`), and `status` is the terminal event's `response.status`.
"""

import json
import sys

try:  # openai 3.x is built on httpx2
    import httpx2 as httpx
except ImportError:
    import httpx
import openai


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


def calls_of(output):
    return [{"call_id": o.call_id, "name": o.name, "arguments": o.arguments}
            for o in output if o.type == "function_call"]


def main():
    base, req_path, out_dir, name = sys.argv[1:5]
    body = json.load(open(req_path))
    body.pop("stream", None)
    tee = Tee()
    client = openai.OpenAI(base_url=base + "/v1", api_key="none", http_client=httpx.Client(transport=tee))
    plain = client.responses.create(**body)
    with open(f"{out_dir}/{name}.json", "wb") as f:
        f.write(bytes(tee.received[-1]))
    out = {"plain": {
        "status": plain.status,
        "output_text": plain.output_text,
        "calls": calls_of(plain.output),
        "usage": {"input_tokens": plain.usage.input_tokens, "output_tokens": plain.usage.output_tokens},
    }}
    types, text, items, order, status = [], "", {}, [], None
    for ev in client.responses.create(stream=True, **body):
        types.append(ev.type)
        if ev.type == "response.output_text.delta":
            text += ev.delta
        elif ev.type == "response.output_item.added" and ev.item.type == "function_call":
            items[ev.item.id] = {"call_id": ev.item.call_id, "name": ev.item.name, "arguments": ""}
            order.append(ev.item.id)
        elif ev.type == "response.function_call_arguments.delta":
            items[ev.item_id]["arguments"] += ev.delta
        elif ev.type in ("response.completed", "response.incomplete", "response.failed"):
            status = ev.response.status
    with open(f"{out_dir}/{name}.sse", "wb") as f:
        f.write(bytes(tee.received[-1]))
    out["stream"] = {"event_types": types, "status": status, "output_text": text,
                     "calls": [items[i] for i in order]}
    with open(f"{out_dir}/{name}.sdk.json", "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
