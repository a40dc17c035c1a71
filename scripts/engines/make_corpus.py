#!/usr/bin/env python3
"""Write tests/data/engine_corpus.json: raw model texts per family × kind, for comparing
toolscope's engine predictions with the engines' own parser code (issue 23).

    python3 scripts/engines/make_corpus.py > tests/data/engine_corpus.json

Each text names its `kind` (what it exercises) and `source`: "written (kind)" for texts written
here from the family's documented form (the renderers mirror tests/parser_props.rs), or the
engine test it is taken from (repository, file and line; see ENGINE_TESTS). `families` holds,
per toolscope family, the parser name each release registers (vLLM 0.33.0
vllm/tool_parsers/__init__.py `_TOOL_PARSERS_TO_REGISTER`; SGLang 0.5.23
function_call_parser.py `ToolCallParserEnum`; null = none) and the family's special tokens
(the stand-in tokenizer's vocabulary).
"""

import json
import sys

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
     "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                    "units": {"type": "string", "enum": ["c", "f"]}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "get_time", "description": "Time in a zone",
     "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "search", "description": "Search",
     "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "integer"},
                    "exact": {"type": "boolean"}, "filters": {"type": "object"}, "tags": {"type": "array", "items": {"type": "string"}}}}}},
]

THINK = ["<think>", "</think>"]
FAMILIES = {
    "hermes": ("hermes", "hermes", ["<tool_call>", "</tool_call>"] + THINK),
    "qwen3-coder": ("qwen3_coder", "qwen3_coder", ["<tool_call>", "</tool_call>"] + THINK),
    "glm4.5": ("glm45", "glm45", ["<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"] + THINK),
    "seed-oss": ("seed_oss", None, ["<seed:tool_call>", "</seed:tool_call>", "<seed:think>", "</seed:think>"]),
    "gemma4": ("gemma4", "gemma4", ["<|tool_call>", "<tool_call|>", "<|\"|>", "<|channel>", "<channel|>", "<|tool_response>", "<tool_response|>"]),
    "functiongemma": ("functiongemma", None, ["<start_function_call>", "<end_function_call>", "<escape>", "<start_function_response>"]),
    "llama3": ("llama3_json", "llama3", ["<|python_tag|>", "<|eom_id|>", "<|eot_id|>"]),
    "pythonic": ("pythonic", "pythonic", ["<|python_start|>", "<|python_end|>"]),
    "lfm2": ("lfm2", "lfm2", ["<|tool_call_start|>", "<|tool_call_end|>"] + THINK),
    "mistral": ("mistral", "mistral", ["[TOOL_CALLS]", "[ARGS]", "[CALL_ID]", "[THINK]", "[/THINK]"]),
    "deepseek-v3": ("deepseek_v3", "deepseekv3", ["<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"] + THINK),
    "deepseek-v3.2": ("deepseek_v32", "deepseekv32", THINK),
    "kimi-k2": ("kimi_k2", "kimi_k2", ["<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>", "<|tool_call_end|>", "<|tool_call_argument_begin|>"] + THINK),
    "kimi-k3": ("kimi_k3", "kimi_k3", ["<|open|>", "<|close|>", "<|sep|>"]),
    "gpt-oss": ("openai", "gpt-oss", ["<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|call|>", "<|constrain|>", "<|return|>"]),
    "anthropic-xml": ("minimax_m2", "minimax-m2", ["<minimax:tool_call>", "</minimax:tool_call>"] + THINK),
    # MiniMax M3's `]<]minimax[>[` is a non-special added token (vllm/parser/minimax_m3.py
    # adjust_request: "The M3 markers are non-special added tokens"): plain text here
    "minimax-m3": ("minimax_m3", "minimax-m3", ["<mm:think>", "</mm:think>"]),
    "command-r7b": ("cohere_command4", "cohere_command4", ["<|START_ACTION|>", "<|END_ACTION|>", "<|START_THINKING|>", "<|END_THINKING|>", "<|START_RESPONSE|>", "<|END_RESPONSE|>", "<|START_TEXT|>", "<|END_TEXT|>"]),
    "apertus": ("apertus", "apertus2509", ["<|tools_prefix|>", "<|tools_suffix|>", "<|inner_prefix|>", "<|inner_suffix|>"]),
    "granite": ("granite", None, ["<|tool_call|>"] + THINK),
    "gigachat3": ("gigachat3", "gigachat3", ["<|message_sep|>", "<|role_sep|>", "<|function_call|>"]),
    "minicpm5": ("minicpm5", "minicpm5", ["<function", "</function>"] + THINK),
    "muse-glimmer": ("muse_glimmer", "muse", ["<|message|>", "<|end|>"]),
    "hy3": ("hy_v3", "hunyuan", ["<tool_calls:opensource>", "</tool_calls:opensource>", "<tool_call:opensource>", "</tool_call:opensource>", "<tool_sep:opensource>", "<arg_key:opensource>", "</arg_key:opensource>", "<arg_value:opensource>", "</arg_value:opensource>", "<think:opensource>", "</think:opensource>"]),
    "nemotron-v2": (None, None, ["<TOOLCALL>", "</TOOLCALL>"] + THINK),
    "minimax-m1": (None, None, ["<tool_calls>", "</tool_calls>"] + THINK),
    "solar-open": (None, None, []),
}


def jd(v):
    return json.dumps(v, ensure_ascii=False)


def xml_value(v):
    return v if isinstance(v, str) else jd(v)


def py_value(v):
    if isinstance(v, str):
        return repr(v)
    if isinstance(v, bool):
        return "True" if v else "False"
    if v is None:
        return "None"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k!r}: {py_value(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(py_value(x) for x in v) + "]"
    return jd(v)


def pythonic(calls):
    return ", ".join(f"{n}(" + ", ".join(f"{k}={py_value(v)}" for k, v in a.items()) + ")" for n, a in calls)


def gemma_value(v, q):
    if isinstance(v, str):
        return f"{q}{v}{q}"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, dict):
        return "{" + ",".join(f"{k}:{gemma_value(x, q)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ",".join(gemma_value(x, q) for x in v) + "]"
    return jd(v)


def render(fam, calls, key="arguments"):
    """The family's exact form for a list of (name, args) calls."""
    if fam == "hermes":
        return "\n".join(f"<tool_call>\n{{\"name\": \"{n}\", \"{key}\": {jd(a)}}}\n</tool_call>" for n, a in calls)
    if fam == "qwen3-coder":
        return "\n".join("<tool_call>\n<function=" + n + ">\n" + "".join(f"<parameter={k}>\n{xml_value(v)}\n</parameter>\n" for k, v in a.items()) + "</function>\n</tool_call>" for n, a in calls)
    if fam == "glm4.5":
        return "\n".join(f"<tool_call>{n}\n" + "".join(f"<arg_key>{k}</arg_key>\n<arg_value>{xml_value(v)}</arg_value>\n" for k, v in a.items()) + "</tool_call>" for n, a in calls)
    if fam == "seed-oss":
        return "\n".join(f"<seed:tool_call>\n<function={n}>\n" + "".join(f"<parameter={k}>{xml_value(v)}</parameter>\n" for k, v in a.items()) + "</function>\n</seed:tool_call>" for n, a in calls)
    if fam == "gemma4":
        q = '<|"|>'
        return "".join(f"<|tool_call>call:{n}" + gemma_value(a, q) + "<tool_call|>" for n, a in calls)
    if fam == "functiongemma":
        return "".join(f"<start_function_call>call:{n}" + gemma_value(a, "<escape>") + "<end_function_call>" for n, a in calls)
    if fam == "llama3":
        return "; ".join(f"{{\"name\": \"{n}\", \"{'parameters' if key == 'arguments' else key}\": {jd(a)}}}" for n, a in calls)
    if fam == "pythonic":
        return f"[{pythonic(calls)}]"
    if fam == "lfm2":
        return f"<|tool_call_start|>[{pythonic(calls)}]<|tool_call_end|>"
    if fam == "mistral":
        return "[TOOL_CALLS][" + ", ".join(f"{{\"name\": \"{n}\", \"{key}\": {jd(a)}}}" for n, a in calls) + "]"
    if fam == "deepseek-v3":
        return "<｜tool▁calls▁begin｜>" + "\n".join(f"<｜tool▁call▁begin｜>function<｜tool▁sep｜>{n}\n```json\n{jd(a)}\n```<｜tool▁call▁end｜>" for n, a in calls) + "<｜tool▁calls▁end｜>"
    if fam == "deepseek-v3.2":
        s = "<｜DSML｜function_calls>\n"
        for n, a in calls:
            s += f"<｜DSML｜invoke name=\"{n}\">\n"
            for k, v in a.items():
                st = "true" if isinstance(v, str) else "false"
                s += f"<｜DSML｜parameter name=\"{k}\" string=\"{st}\">{xml_value(v)}</｜DSML｜parameter>\n"
            s += "</｜DSML｜invoke>\n"
        return s + "</｜DSML｜function_calls>"
    if fam == "kimi-k2":
        return "<|tool_calls_section_begin|>" + "".join(f"<|tool_call_begin|>functions.{n}:{i}<|tool_call_argument_begin|>{jd(a)}<|tool_call_end|>" for i, (n, a) in enumerate(calls)) + "<|tool_calls_section_end|>"
    if fam == "kimi-k3":
        s = "<|open|>tools<|sep|>"
        for i, (n, a) in enumerate(calls):
            s += f"<|open|>call tool=\"{n}\" index=\"{i + 1}\"<|sep|>"
            for k, v in a.items():
                ty = "string" if isinstance(v, str) else ("number" if isinstance(v, (int, float)) and not isinstance(v, bool) else "json")
                s += f"<|open|>argument key=\"{k}\" type=\"{ty}\"<|sep|>{xml_value(v)}<|close|>argument<|sep|>"
            s += "<|close|>call<|sep|>"
        return s + "<|close|>tools<|sep|>"
    if fam == "gpt-oss":
        return "".join(f"<|start|>assistant<|channel|>commentary to=functions.{n} <|constrain|>json<|message|>{jd(a)}<|call|>" for n, a in calls)
    if fam == "anthropic-xml":
        return "<minimax:tool_call>\n" + "".join(f"<invoke name=\"{n}\">\n" + "".join(f"<parameter name=\"{k}\">{xml_value(v)}</parameter>\n" for k, v in a.items()) + "</invoke>\n" for n, a in calls) + "</minimax:tool_call>"
    if fam == "minimax-m3":
        sep = "]<]minimax[>["
        s = f"{sep}<tool_call>\n"
        for n, a in calls:
            s += f"{sep}<invoke name=\"{n}\">" + "".join(f"{sep}<{k}>{xml_value(v)}{sep}</{k}>" for k, v in a.items()) + f"{sep}</invoke>\n"
        return s + f"{sep}</tool_call>"
    if fam == "command-r7b":
        return "<|START_ACTION|>[\n" + ",\n".join(f"    {{\"tool_call_id\": \"{i}\", \"tool_name\": \"{n}\", \"parameters\": {jd(a)}}}" for i, (n, a) in enumerate(calls)) + "\n]<|END_ACTION|>"
    if fam == "apertus":
        return "<|tools_prefix|>[" + ", ".join(f"{{\"{n}\": {jd(a)}}}" for n, a in calls) + "]<|tools_suffix|>"
    if fam == "granite":
        return "<|tool_call|>[" + ", ".join(f"{{\"name\": \"{n}\", \"{key}\": {jd(a)}}}" for n, a in calls) + "]"
    if fam == "gigachat3":
        n, a = calls[0]
        return f"<|message_sep|>\n\nfunction call<|role_sep|>\n{{\"name\": \"{n}\", \"{key}\": {jd(a)}}}"
    if fam == "minicpm5":
        return "".join(f"<function name=\"{n}\">" + "".join(f"<param name=\"{k}\">{xml_value(v)}</param>" for k, v in a.items()) + "</function>" for n, a in calls)
    if fam == "muse-glimmer":
        n0 = calls[0][0]
        s = f" to={n0}<|message|><atem:function_calls>\n"
        for n, a in calls:
            s += f"<atem:invoke name=\"{n}\">\n" + "".join(f"<atem:parameter name=\"{k}\">{xml_value(v)}</atem:parameter>\n" for k, v in a.items()) + "</atem:invoke>\n"
        return s + "</atem:function_calls>"
    if fam == "hy3":
        s = "<tool_calls:opensource>"
        for n, a in calls:
            s += f"<tool_call:opensource>{n}<tool_sep:opensource>\n" + "".join(f"<arg_key:opensource>{k}</arg_key:opensource>\n<arg_value:opensource>{xml_value(v)}</arg_value:opensource>\n" for k, v in a.items()) + "</tool_call:opensource>\n"
        return s + "</tool_calls:opensource>"
    if fam == "nemotron-v2":
        return "<TOOLCALL>[" + ", ".join(f"{{\"name\": \"{n}\", \"{key}\": {jd(a)}}}" for n, a in calls) + "]</TOOLCALL>"
    if fam == "minimax-m1":
        return "<tool_calls>\n" + "\n".join(f"{{\"name\": \"{n}\", \"{key}\": {jd(a)}}}" for n, a in calls) + "\n</tool_calls>"
    if fam == "solar-open":
        return "".join(f"<|tool_call:begin|>call_{i}<|tool_call:name|>{n}<|tool_call:args|>{jd(a)}<|tool_call:end|>" for i, (n, a) in enumerate(calls))
    raise KeyError(fam)


def think(fam, text):
    return {"seed-oss": f"<seed:think>{text}</seed:think>", "minimax-m3": f"<mm:think>{text}</mm:think>",
            "hy3": f"<think:opensource>{text}</think:opensource>", "command-r7b": f"<|START_THINKING|>{text}<|END_THINKING|>",
            "mistral": f"[THINK]{text}[/THINK]", "gpt-oss": f"<|channel|>analysis<|message|>{text}<|end|>",
            "gemma4": f"<|channel>thought\n{text}<channel|>", "kimi-k3": f"<|open|>think<|sep|>{text}<|close|>think<|sep|>",
            "apertus": f"<|inner_prefix|>{text}<|inner_suffix|>"}.get(fam, f"<think>{text}</think>")


W = ("get_weather", {"city": "Paris"})
W2 = ("get_weather", {"city": "Paris", "days": 3})
T = ("get_time", {"tz": "Europe/Paris"})
S_NESTED = ("search", {"query": "rust \"serde\"", "limit": 5, "exact": True, "filters": {"lang": "en", "year": 2024}, "tags": ["a", "b"]})
S_UNI = ("search", {"query": "café ☕ 東京 \\ path\nline"})


def near_miss(fam, text):
    """One marker character changed: not the family's marker any more."""
    swaps = [("<tool_call>", "<tool_cal>"), ("<|tool_call>", "<|tool_cal>"), ("<start_function_call>", "<start_function_cal>"),
             ("<|tool_call_start|>", "<|tool_call_star|>"), ("[TOOL_CALLS]", "[TOOL_CALL]"), ("<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜><｜tool▁calls▁begin｜"),
             ("<｜DSML｜function_calls>", "<｜DSML｜function_call>"), ("<|tool_calls_section_begin|>", "<|tool_call_section_begin|>"),
             ("<|open|>tools", "<|open|>tool"), ("commentary to=functions.", "commentary to=function."), ("<minimax:tool_call>", "<minimax:toolcall>"),
             ("]<]minimax[>[<tool_call>", "]<]minimax[><tool_call>"), ("<|START_ACTION|>", "<|START_ACTIONS|>"), ("<|tools_prefix|>", "<|tool_prefix|>"),
             ("<|tool_call|>", "<|toolcall|>"), ("function call<|role_sep|>", "function_call<|role_sep|>"), ("<function name=", "<functions name="),
             ("<atem:function_calls>", "<atem:function_call>"), ("<tool_calls:opensource>", "<tool_call:opensource><tool_calls:opensourc>"),
             ("<seed:tool_call>", "<seed:toolcall>"), ("<TOOLCALL>", "<TOOL_CALL>"), ("<tool_calls>", "<tool_call s>"), ("<|tool_call:begin|>", "<|tool_call:start|>")]
    for a, b in swaps:
        if a in text:
            return text.replace(a, b, 1)
    if fam == "llama3":
        return text.replace('"name"', '"nam"', 1)
    if fam == "pythonic":
        return text.replace("[", "(", 1).replace("]", ")", 1)
    return None


def end_markers(fam):
    return {"hermes": "</tool_call>", "qwen3-coder": "</tool_call>", "glm4.5": "</tool_call>", "seed-oss": "</seed:tool_call>",
            "gemma4": "<tool_call|>", "functiongemma": "<end_function_call>", "lfm2": "<|tool_call_end|>", "deepseek-v3": "<｜tool▁calls▁end｜>",
            "deepseek-v3.2": "</｜DSML｜function_calls>", "kimi-k2": "<|tool_calls_section_end|>", "kimi-k3": "<|close|>tools<|sep|>",
            "gpt-oss": "<|call|>", "anthropic-xml": "</minimax:tool_call>", "minimax-m3": "]<]minimax[>[</tool_call>",
            "command-r7b": "<|END_ACTION|>", "apertus": "<|tools_suffix|>", "minicpm5": "</function>",
            "muse-glimmer": "</atem:function_calls>", "hy3": "</tool_calls:opensource>", "nemotron-v2": "</TOOLCALL>",
            "minimax-m1": "</tool_calls>", "solar-open": "<|tool_call:end|>", "pythonic": "]"}.get(fam)


JSON_FAMILIES = {"hermes", "mistral", "granite", "gigachat3", "nemotron-v2", "minimax-m1"}


def texts_for(fam):
    out = []

    def add(kind, text, **extra):
        if text is None:
            return
        out.append({"family": fam, "kind": kind, "text": text, "source": f"written ({kind})", **extra})

    clean = render(fam, [W])
    add("clean", clean)
    add("clean_two_args", render(fam, [W2]))
    add("parallel", render(fam, [W, T]))
    add("nested_args", render(fam, [S_NESTED]))
    add("unicode_escapes", render(fam, [S_UNI]))
    add("empty_args", render(fam, [("get_time", {})]))
    add("content_before", "Let me check the weather.\n" + clean)
    add("content_after", clean + "\nI will report back.")
    add("content_before_and_after", "Checking.\n\n" + clean + "\n\nDone.")
    add("whitespace_around", "\n\n" + clean + "\n\n")
    add("whitespace_leading_space", " " + clean)
    add("no_call", "The weather in Paris is sunny today.")
    add("no_call_with_braces", "Use {\"name\": \"x\"} in your config; see [docs](http://x).")
    add("near_miss_marker", near_miss(fam, clean))
    add("undeclared_tool", render(fam, [("launch_rocket", {"target": "moon"})]))
    add("declared_and_undeclared", render(fam, [W, ("launch_rocket", {"target": "moon"})]))
    add("wrong_type_value", render(fam, [("get_weather", {"city": "Paris", "days": "five"})]))
    add("string_for_integer", render(fam, [("get_weather", {"city": "Paris", "days": "3"})]))
    add("integer_for_string", render(fam, [("get_weather", {"city": 75001})]))
    add("reasoning_then_call", think(fam, "The user wants the weather.") + clean)
    add("reasoning_then_content_and_call", think(fam, "Check it.") + "Sure.\n" + clean)
    e = end_markers(fam)
    if e and clean.endswith(e):
        add("missing_end_marker", clean[: -len(e)])
    two = render(fam, [W, T])
    if e and two.endswith(e):
        add("parallel_missing_end_marker", two[: -len(e)])
    # truncated in the middle of the arguments (the generation hit max_tokens)
    cut = clean.find("Paris")
    if cut > 0:
        add("truncated_mid_value", clean[: cut + 3])
    add("truncated_after_name", clean[: clean.find("get_weather") + len("get_weather")] if "get_weather" in clean else None)
    add("call_in_prose", "You could call " + clean + " if you want the weather.")
    if fam in JSON_FAMILIES or fam in ("llama3",):
        add("drift_parameters_key", render(fam, [W], key="parameters") if fam != "llama3" else render(fam, [W], key="arguments"))
        add("drift_input_key", render(fam, [W], key="input"))
        add("drift_stray_brace", clean.replace(jd(W[1]) + "}", jd(W[1]) + "}}", 1))
        add("drift_string_arguments", clean.replace(jd(W[1]), jd(jd(W[1])), 1))
    if fam == "hermes":
        add("drift_function_wrapper", "<tool_call>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}}\n</tool_call>")
        add("invalid_json", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {city: Paris}}\n</tool_call>")
        add("no_newlines", "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}</tool_call>")
    if fam == "llama3":
        add("python_tag", "<|python_tag|>" + clean)
        add("python_tag_eom", "<|python_tag|>" + clean + "<|eom_id|>")
        add("arguments_key", "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}")
    if fam == "pythonic":
        add("python_start_end", "<|python_start|>" + clean + "<|python_end|>")
        add("positional_argument", "[get_weather('Paris')]")
        add("list_after_prose", "Sure thing: " + clean)
    if fam == "mistral":
        add("v11_form", "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}")
        add("v11_call_id", "[TOOL_CALLS]get_weather[CALL_ID]a1b2c3d4e[ARGS]{\"city\": \"Paris\"}")
        add("space_form", "[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]")
        add("space_form_parallel", "[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}, {\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}}]")
        add("space_form_content_before", "Sure.[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]")
        add("v11_parallel", "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]get_time[ARGS]{\"tz\": \"UTC\"}")
    if fam == "kimi-k2":
        add("missing_section_end", clean.replace("<|tool_calls_section_end|>", ""))
        add("tool_call_end_missing", clean.replace("<|tool_call_end|>", ""))
    if fam == "qwen3-coder":
        add("missing_opening_wrapper", clean[len("<tool_call>\n"):])
        add("no_newlines_in_values", "<tool_call>\n<function=get_weather>\n<parameter=city>Paris</parameter>\n<parameter=days>3</parameter>\n</function>\n</tool_call>")
    if fam == "gpt-oss":
        add("channel_without_start", clean[len("<|start|>assistant"):])
        add("final_message", "<|channel|>final<|message|>It is sunny.<|return|>")
    if fam == "lfm2":
        add("json_list_form", "<|tool_call_start|>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]<|tool_call_end|>")
    if fam == "anthropic-xml":
        add("without_wrapper", "<invoke name=\"get_weather\">\n<parameter name=\"city\">Paris</parameter>\n</invoke>")
    if fam == "command-r7b":
        add("response_wrapper", "<|START_RESPONSE|>It is sunny.<|END_RESPONSE|>")
    if fam == "deepseek-v3":
        add("v31_form", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Paris\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>")
    if fam == "functiongemma":
        add("bare_value", "<start_function_call>call:get_weather{city:Paris}<end_function_call>")
    return out




def main():
    texts = []
    for fam in FAMILIES:
        texts.extend(texts_for(fam))
    engine_tests = json.load(open(sys.argv[1])) if len(sys.argv) > 1 else None
    for v in (engine_tests or {}).get("vectors", []):
        # tests/data/engine_vectors.json: cases transcribed from the engines' own tests
        fam = {"llama3": "llama3", "pythonic": "pythonic"}.get(v["syntax"])
        if fam:
            t = {"family": fam, "kind": "engine_test", "text": v["input"], "source": v["source"]}
            if "tools" in v:
                t["tools"] = [{"type": "function", "function": x} for x in v["tools"]]
            texts.append(t)
    for t in texts:
        # Mistral: the `[TOOL_CALLS][{…}]` list form is what models with a pre-v11 tokenizer
        # (no [ARGS] token) write; vLLM picks its reading by that (vllm/parser/mistral.py:113)
        if t["family"] == "mistral" and "[TOOL_CALLS][" in t["text"].replace("] [", "]["):
            t["markers"] = ["[TOOL_CALLS]", "[THINK]", "[/THINK]"]
    seen = {}
    for t in texts:
        base = f"{t['family']}/{t['kind']}"
        seen[base] = seen.get(base, 0) + 1
        t["id"] = base if seen[base] == 1 else f"{base}#{seen[base]}"
    fams = {f: {"vllm": v, "sglang": s, "markers": m} for f, (v, s, m) in FAMILIES.items()}
    # Hunyuan 3's tokenizer_config.json names the marker suffix (vllm hy_v3_tool_parser.py:273)
    # vLLM serves gpt-oss through HarmonyParser (serving.py:172 sets is_harmony for model_type
    # gpt_oss; parser_manager.py:179), which decodes the output token ids with openai_harmony's
    # o200k_harmony encoding: run.py tokenizes with that encoding (tokenizer.py HarmonyTokenizer;
    # its vocabulary file comes from scripts/engines/setup.sh)
    fams["gpt-oss"]["tokenizer"] = "harmony"
    fams["gpt-oss"]["model_type"] = "gpt_oss"
    fams["hy3"]["tokenizer_init_kwargs"] = {"token_suffix": ":opensource"}
    doc = {
        "about": __doc__.strip().splitlines()[0],
        "generator": "scripts/engines/make_corpus.py tests/data/engine_vectors.json",
        "tools": TOOLS,
        "families": fams,
        "texts": [{k: t[k] for k in ("id", "family", "kind", "text", "source", "tools", "markers") if k in t} for t in texts],
    }
    json.dump(doc, sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
