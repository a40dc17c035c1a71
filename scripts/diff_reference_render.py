#!/usr/bin/env python3
"""Reference renderer for the diff tests: Python jinja2 configured as transformers'
apply_chat_template (trim_blocks, lstrip_blocks, loopcontrols, tojson with ensure_ascii=False,
raise_exception, strftime_now).

usage: diff_reference_render.py TEMPLATE.jinja REQUEST.json [--bos TOKEN] [--eos TOKEN] [--now ISO] [--object-args]
Prints the rendered prompt to stdout, exactly (no trailing newline added).
REQUEST.json is an OpenAI chat body: messages, tools, add_generation_prompt (default true),
chat_template_kwargs (merged into the context). With --object-args, tool-call `arguments`
strings holding a JSON object are parsed into objects first, as llama-server does for templates
that iterate arguments (workaround::func_args_not_string, llama.cpp common/chat.cpp, build 11434).
"""
import json
import sys
from datetime import datetime

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment


def main(argv):
    args = list(argv[1:])
    opts = {"bos": "", "eos": "", "now": None, "object_args": False}
    pos = []
    while args:
        a = args.pop(0)
        if a == "--object-args":
            opts["object_args"] = True
        elif a in ("--bos", "--eos", "--now"):
            opts[a[2:]] = args.pop(0)
        else:
            pos.append(a)
    template_path, request_path = pos
    with open(template_path, encoding="utf-8") as f:
        source = f.read()
    with open(request_path, encoding="utf-8") as f:
        req = json.load(f)

    if opts["object_args"]:
        for m in req.get("messages", []):
            for c in m.get("tool_calls") or []:
                f = c.get("function") or {}
                if isinstance(f.get("arguments"), str):
                    try:
                        v = json.loads(f["arguments"])
                    except ValueError:
                        continue
                    if isinstance(v, dict):
                        f["arguments"] = v

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    now = datetime.fromisoformat(opts["now"]) if opts["now"] else datetime(2026, 1, 2, 3, 4, 5)

    def strftime_now(fmt):
        return now.strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    tpl = env.from_string(source)
    ctx = {
        "messages": req.get("messages", []),
        "add_generation_prompt": req.get("add_generation_prompt", True),
        "bos_token": opts["bos"],
        "eos_token": opts["eos"],
    }
    if req.get("tools"):
        ctx["tools"] = req["tools"]
    ctx.update(req.get("chat_template_kwargs") or {})
    sys.stdout.write(tpl.render(**ctx))


if __name__ == "__main__":
    main(sys.argv)
