#!/usr/bin/env python3
"""Builds tests/data/replay/ollama-docs.jsonl: a toolscope session of Ollama native API exchanges
taken from Ollama's documentation (ollama/ollama at fb30760: docs/api.md, docs/capabilities/
thinking.mdx), with the request bodies exactly as the official `ollama` Python client (0.6.3)
sends them.

How: a loopback HTTP server answers each request with the documented NDJSON lines / JSON
object and keeps the request the client sent; the official client makes the documented calls
and its parsed objects are checked against the documentation; then the session is written
(one chunk per NDJSON line; receive offsets are made up, 1 ms apart).

Exchanges:
  1. POST /api/chat  stream, tools   docs/api.md "Chat request (Streaming with tools)", both lines verbatim
  2. POST /api/chat  stream, think   docs/capabilities/thinking.mdx "Stream the reasoning trace":
                                     the documented request; `message.thinking` lines, then
                                     `message.content` lines, then the done line (texts ours)
  3. POST /api/generate raw          docs/api.md "Request (Raw Mode)": the documented request;
                                     the docs show no response, so a generate response object
                                     with the documented fields (no `context`: "raw mode will not
                                     return a context")
  4. POST /api/chat  stream, tools   the field failure: the model wrote its call as text
                                     (`<tool_call>…</tool_call>` in content), Ollama's parser
                                     did not take it, and the stream ends `done_reason: "stop"`
                                     with no tool_calls
  5. POST /api/show                  docs/api.md "Show Model Information" (template field)

Annotations: exchanges 1 and 4 (the tool chats) carry an `ollama_show` annotation, as
`toolscope proxy` records one per Ollama exchange (trimmed as src/record/recorder.rs
trim_ollama_show trims it). docs/api.md's /api/show example has a template without `.Tools`
(Ollama refuses a tools request for such a model: "does not support tools"), so the
annotation's `template` is the tools template of Ollama's docs/template.mdx ("Example Tools",
Mistral v0.3), with `capabilities` ["completion", "tools"] and the documented `details`.

Run: $TOOLSCOPE_PYTHON scripts/ollama-docs-session.py [OUT]
"""
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import ollama

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the weather in a given city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city to get the weather for"}},
            "required": ["city"],
        },
    },
}

# docs/api.md "Chat request (Streaming with tools)", verbatim.
TOOLS_LINES = [
    {"model": "llama3.2", "created_at": "2025-07-07T20:22:19.184789Z",
     "message": {"role": "assistant", "content": "",
                 "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Tokyo"}}}]},
     "done": False},
    {"model": "llama3.2", "created_at": "2025-07-07T20:22:19.19314Z",
     "message": {"role": "assistant", "content": ""}, "done_reason": "stop", "done": True,
     "total_duration": 182242375, "load_duration": 41295167, "prompt_eval_count": 169,
     "prompt_eval_duration": 24573166, "eval_count": 15, "eval_duration": 115959084},
]

THINK_PIECES = ["The user asks", " how many r's", " are in strawberry: s-t-r-a-w-b-e-r-r-y."]
ANSWER_PIECES = ["There are ", "**3**", " letter r's in strawberry."]
THINK_LINES = (
    [{"model": "qwen3", "created_at": "2025-08-01T10:00:00.%06dZ" % i,
      "message": {"role": "assistant", "content": "", "thinking": t}, "done": False}
     for i, t in enumerate(THINK_PIECES)]
    + [{"model": "qwen3", "created_at": "2025-08-01T10:00:01.%06dZ" % i,
        "message": {"role": "assistant", "content": c}, "done": False}
       for i, c in enumerate(ANSWER_PIECES)]
    + [{"model": "qwen3", "created_at": "2025-08-01T10:00:02.000000Z",
        "message": {"role": "assistant", "content": ""}, "done_reason": "stop", "done": True,
        "total_duration": 912000000, "load_duration": 1000000, "prompt_eval_count": 18,
        "prompt_eval_duration": 20000000, "eval_count": 41, "eval_duration": 880000000}]
)

RAW_RESPONSE = {"model": "mistral", "created_at": "2023-11-03T15:36:02.583064Z",
                "response": " The sky appears blue because of a phenomenon called Rayleigh scattering.",
                "done": True, "done_reason": "stop", "total_duration": 8493852375,
                "load_duration": 6589624375, "prompt_eval_count": 14,
                "prompt_eval_duration": 119039000, "eval_count": 110, "eval_duration": 1779061000}

LEAKED_PIECES = ["<tool_call>", "\n{\"name\": \"get_weather\",", " \"arguments\": {\"city\": \"Tokyo\"}}", "\n</tool_call>"]
LEAKED_LINES = (
    [{"model": "llama3.2", "created_at": "2025-07-07T20:23:00.%06dZ" % i,
      "message": {"role": "assistant", "content": c}, "done": False}
     for i, c in enumerate(LEAKED_PIECES)]
    + [{"model": "llama3.2", "created_at": "2025-07-07T20:23:01.000000Z",
        "message": {"role": "assistant", "content": ""}, "done_reason": "stop", "done": True,
        "total_duration": 201000000, "load_duration": 1000000, "prompt_eval_count": 169,
        "prompt_eval_duration": 24000000, "eval_count": 22, "eval_duration": 170000000}]
)

SHOW_RESPONSE = {
    "modelfile": "# Modelfile generated by \"ollama show\"\n# To build a new Modelfile based on this one, replace the FROM line with:\n# FROM llava:latest\n\nFROM /Users/matt/.ollama/models/blobs/sha256:200765e1283640ffbd013184bf496e261032fa75b99498a9613be4e94d63ad52\nTEMPLATE \"\"\"{{ .System }}\nUSER: {{ .Prompt }}\nASSISTANT: \"\"\"\nPARAMETER num_ctx 4096\nPARAMETER stop \"\u003c/s\u003e\"\nPARAMETER stop \"USER:\"\nPARAMETER stop \"ASSISTANT:\"",
    "parameters": "num_keep                       24\nstop                           \"<|start_header_id|>\"\nstop                           \"<|end_header_id|>\"\nstop                           \"<|eot_id|>\"",
    "template": "{{ if .System }}<|start_header_id|>system<|end_header_id|>\n\n{{ .System }}<|eot_id|>{{ end }}{{ if .Prompt }}<|start_header_id|>user<|end_header_id|>\n\n{{ .Prompt }}<|eot_id|>{{ end }}<|start_header_id|>assistant<|end_header_id|>\n\n{{ .Response }}<|eot_id|>",
    "details": {"parent_model": "", "format": "gguf", "family": "llama", "families": ["llama"],
                "parameter_size": "8.0B", "quantization_level": "Q4_0"},
    "model_info": {
        "general.architecture": "llama", "general.file_type": 2, "general.parameter_count": 8030261248,
        "general.quantization_version": 2, "llama.attention.head_count": 32,
        "llama.attention.head_count_kv": 8, "llama.attention.layer_norm_rms_epsilon": 0.00001,
        "llama.block_count": 32, "llama.context_length": 8192, "llama.embedding_length": 4096,
        "llama.feed_forward_length": 14336, "llama.rope.dimension_count": 128,
        "llama.rope.freq_base": 500000, "llama.vocab_size": 128256,
        "tokenizer.ggml.bos_token_id": 128000, "tokenizer.ggml.eos_token_id": 128009,
        "tokenizer.ggml.merges": [], "tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "llama-bpe",
        "tokenizer.ggml.token_type": [], "tokenizer.ggml.tokens": [],
    },
    "capabilities": ["completion", "vision"],
}

# docs/template.mdx "Example Tools" / "Mistral", verbatim.
MISTRAL_TOOLS_TEMPLATE = """{{- range $index, $_ := .Messages }}
{{- if eq .Role "user" }}
{{- if and (le (len (slice $.Messages $index)) 2) $.Tools }}[AVAILABLE_TOOLS] {{ json $.Tools }}[/AVAILABLE_TOOLS]
{{- end }}[INST] {{ if and (eq (len (slice $.Messages $index)) 1) $.System }}{{ $.System }}

{{ end }}{{ .Content }}[/INST]
{{- else if eq .Role "assistant" }}
{{- if .Content }} {{ .Content }}</s>
{{- else if .ToolCalls }}[TOOL_CALLS] [
{{- range .ToolCalls }}{"name": "{{ .Function.Name }}", "arguments": {{ json .Function.Arguments }}}
{{- end }}]</s>
{{- end }}
{{- else if eq .Role "tool" }}[TOOL_RESULTS] {"content": {{ .Content }}}[/TOOL_RESULTS]
{{- end }}
{{- end }}"""

# (path, response: list of lines = NDJSON stream | dict = one JSON object)
ANSWERS = [
    ("/api/chat", TOOLS_LINES),
    ("/api/chat", THINK_LINES),
    ("/api/generate", RAW_RESPONSE),
    ("/api/chat", LEAKED_LINES),
    ("/api/show", SHOW_RESPONSE),
]

seen = []


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        path, answer = ANSWERS[len(seen)]
        assert self.path == path, (self.path, path)
        seen.append((self.command, self.path, [(k.lower(), v) for k, v in self.headers.items()], body))
        if isinstance(answer, list):
            payload = [json.dumps(l, separators=(",", ":")).encode() + b"\n" for l in answer]
            ctype = "application/x-ndjson"
        else:
            payload = [json.dumps(answer, separators=(",", ":")).encode()]
            ctype = "application/json; charset=utf-8"
        self.send_response(200)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(sum(map(len, payload))))
        self.end_headers()
        for p in payload:
            self.wfile.write(p)
        seen[-1] = seen[-1] + (ctype, payload)

    def log_message(self, *a):
        pass


def drive(host):
    """The documented calls, through the official client; returns what it parsed."""
    c = ollama.Client(host=host)
    out = {}
    chunks = list(c.chat(model="llama3.2", messages=[{"role": "user", "content": "what is the weather in tokyo?"}],
                         tools=[WEATHER_TOOL], stream=True))
    out["tools"] = [ch.model_dump(exclude_none=True) for ch in chunks]
    chunks = list(c.chat(model="qwen3", messages=[{"role": "user", "content": "How many letter r are in strawberry?"}],
                         think=True, stream=True))
    out["think"] = [ch.model_dump(exclude_none=True) for ch in chunks]
    out["raw"] = c.generate(model="mistral", prompt="[INST] why is the sky blue? [/INST]", raw=True,
                            stream=False).model_dump(exclude_none=True)
    chunks = list(c.chat(model="llama3.2", messages=[{"role": "user", "content": "what is the weather in tokyo?"}],
                         tools=[WEATHER_TOOL], stream=True))
    out["leaked"] = [ch.model_dump(exclude_none=True) for ch in chunks]
    out["show"] = c.show("llava").model_dump(exclude_none=True)
    return out


def check(out):
    """The documented objects, as the client exposes them."""
    tc = out["tools"][0]["message"]["tool_calls"][0]["function"]
    assert (tc["name"], dict(tc["arguments"])) == ("get_weather", {"city": "Tokyo"}), tc
    assert out["tools"][-1]["done"] is True and out["tools"][-1]["done_reason"] == "stop"
    assert "".join(c["message"].get("thinking", "") for c in out["think"]) == "".join(THINK_PIECES)
    assert "".join(c["message"].get("content", "") for c in out["think"]) == "".join(ANSWER_PIECES)
    assert out["raw"]["response"] == RAW_RESPONSE["response"] and out["raw"]["done_reason"] == "stop"
    assert "".join(c["message"].get("content", "") for c in out["leaked"]) == "".join(LEAKED_PIECES)
    assert all(not c["message"].get("tool_calls") for c in out["leaked"])
    assert out["show"]["template"] == SHOW_RESPONSE["template"]


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else "tests/data/replay/ollama-docs.jsonl"
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        check(drive("http://127.0.0.1:%d" % srv.server_address[1]))
    finally:
        srv.shutdown()
    lines = [{"type": "header", "format": "toolscope-session/1", "created": "2025-07-07T20:22:19.000000Z",
              "tool": "scripts/ollama-docs-session.py (ollama Python client %s)" % getattr(ollama, "__version__", "0.6.3"),
              "upstream": "http://127.0.0.1:11434", "engine": {"kind": "ollama"},
              "source": "ollama/ollama docs/api.md + docs/capabilities/thinking.mdx (fb30760)"}]
    for i, (method, path, headers, body, ctype, payload) in enumerate(seen):
        headers = [(k, "127.0.0.1:11434" if k == "host" else v) for k, v in headers]
        resp = {"status": 200, "headers": [["content-type", ctype]]}
        if ctype == "application/x-ndjson":
            resp["chunks"] = [{"t_us": 1000 * (j + 1), "text": p.decode()} for j, p in enumerate(payload)]
            total = 1000 * (len(payload) + 1)
        else:
            resp["body"] = {"text": b"".join(payload).decode()}
            total = 2000
        lines.append({"type": "exchange", "id": i + 1, "started": "2025-07-07T20:22:%02d.000000Z" % (20 + i),
                      "request": {"method": method, "path": path, "headers": [list(h) for h in headers],
                                  "body": {"text": body.decode()}},
                      "response": resp, "timings": {"ttfb_us": 1000, "total_us": total}, "outcome": "complete"})
    # the recorder's trim of an /api/show answer (src/record/recorder.rs trim_ollama_show)
    show = {"template": MISTRAL_TOOLS_TEMPLATE, "capabilities": ["completion", "tools"],
            "details": SHOW_RESPONSE["details"]}
    for ex in (1, 4):
        model = json.loads(lines[ex]["request"]["body"]["text"])["model"]
        lines.append({"type": "annotation", "kind": "ollama_show", "exchange": ex, "model": model,
                      "show": show})
    with open(out_path, "w") as f:
        for l in lines:
            f.write(json.dumps(l, ensure_ascii=False, separators=(",", ":")) + "\n")
    print("wrote %s (%d exchanges)" % (out_path, len(seen)))


if __name__ == "__main__":
    main()
