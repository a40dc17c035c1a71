"""The Responses API over WebSocket, both ends, for toolscope's proxy test (issue #22).

  python responses_ws.py server            # prints its port, then serves until killed
  python responses_ws.py client WS_URL N   # N response.create turns on one connection

The server answers each `response.create` message with the events a streamed Responses
call sends (the shapes llama-server b11434 writes, tools/server/server-task.cpp): a
function_call item calling `get_weather` with the city named at the end of the last user
input, its arguments in two `response.function_call_arguments.delta` events, then
`response.completed`. Both ends use the `websockets` package with its defaults, so
`permessage-deflate` is negotiated (RFC 7692).

The client prints one JSON line per turn: {"sent": the create message text, "received":
[every server message text, in order]}.
"""

import asyncio
import json
import sys

from websockets.asyncio.client import connect
from websockets.asyncio.server import serve


def events_for(create, turn):
    text = create["input"][-1]["content"] if isinstance(create["input"], list) else create["input"]
    city = text.rstrip("?.!").split()[-1]
    args = json.dumps({"city": city})
    half = len(args) // 2
    rid, iid, cid = f"resp_{turn}", f"fc_{turn}", f"call_{turn}"
    item = {"type": "function_call", "id": iid, "call_id": cid, "name": "get_weather", "arguments": "", "status": "in_progress"}
    done = dict(item, arguments=args, status="completed")
    seq = iter(range(100))
    return [
        {"type": "response.created", "sequence_number": next(seq), "response": {"id": rid, "object": "response", "status": "in_progress", "output": []}},
        {"type": "response.in_progress", "sequence_number": next(seq), "response": {"id": rid, "object": "response", "status": "in_progress", "output": []}},
        {"type": "response.output_item.added", "sequence_number": next(seq), "output_index": 0, "item": item},
        {"type": "response.function_call_arguments.delta", "sequence_number": next(seq), "output_index": 0, "item_id": iid, "delta": args[:half]},
        {"type": "response.function_call_arguments.delta", "sequence_number": next(seq), "output_index": 0, "item_id": iid, "delta": args[half:]},
        {"type": "response.function_call_arguments.done", "sequence_number": next(seq), "output_index": 0, "item_id": iid, "arguments": args},
        {"type": "response.output_item.done", "sequence_number": next(seq), "output_index": 0, "item": done},
        {"type": "response.completed", "sequence_number": next(seq), "response": {"id": rid, "object": "response", "status": "completed", "model": create.get("model"), "output": [done],
                                                                                  "usage": {"input_tokens": 10, "output_tokens": 9, "total_tokens": 19}}},
    ]


async def handler(ws):
    turn = 0
    async for message in ws:
        create = json.loads(message)
        if create.get("type") != "response.create":
            await ws.send(json.dumps({"type": "error", "error": {"message": "expected response.create"}}))
            continue
        turn += 1
        for ev in events_for(create, turn):
            await ws.send(json.dumps(ev))


async def server():
    async with serve(handler, "127.0.0.1", 0) as srv:
        port = srv.sockets[0].getsockname()[1]
        print(port, flush=True)
        await asyncio.Future()


async def client(url, n):
    cities = ["Lisbon", "Vienna", "Oslo"]
    async with connect(url) as ws:
        for i in range(n):
            create = {
                "type": "response.create",
                "model": "smollm2",
                "input": [{"role": "user", "content": f"What is the weather in {cities[i % 3]}?"}],
                "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}],
            }
            text = json.dumps(create)
            await ws.send(text)
            received = []
            while True:
                m = await ws.recv()
                received.append(m)
                if json.loads(m)["type"] in ("response.completed", "response.failed", "response.incomplete", "error"):
                    break
            print(json.dumps({"sent": text, "received": received}), flush=True)
            await ws.ping(b"between turns")


if __name__ == "__main__":
    if sys.argv[1] == "server":
        asyncio.run(server())
    else:
        asyncio.run(client(sys.argv[2], int(sys.argv[3])))
