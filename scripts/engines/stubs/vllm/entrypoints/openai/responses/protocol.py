"""Stand-in for `vllm/entrypoints/openai/responses/protocol.py` (the Responses API models;
imports the harmony tool server and the engine): the driver sends Chat Completions requests,
so the parser code only uses `ResponsesRequest` in `isinstance` checks, which are false."""


class ResponsesRequest:
    pass


ResponseInputOutputItem = object
