"""Stand-in for `vllm/entrypoints/mcp/tool_server.py` (MCP client sessions for built-in tools):
`ToolServer` is a type annotation in vllm/reasoning/abs_reasoning_parsers.py."""


class ToolServer:
    pass
