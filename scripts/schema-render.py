#!/usr/bin/env python3
"""Reference chat-template renders for the schema tests (issue 4).

Renders a request with Python jinja2 configured as transformers' `apply_chat_template`
(transformers 4.5x, src/transformers/utils/chat_template_utils.py: ImmutableSandboxedEnvironment,
trim_blocks, lstrip_blocks, loopcontrols, a `tojson` filter with ensure_ascii=False,
`raise_exception` and `strftime_now` globals).

Usage:
  schema-render.py TEMPLATE.jinja REQUEST.json            render one request to stdout
  schema-render.py --stdin TEMPLATE.jinja                 read the request JSON from stdin
  schema-render.py --corpus DIR REQUEST.json OUTDIR       render every DIR/*.jinja into
                                                          OUTDIR/<name>.txt (errors into
                                                          OUTDIR/<name>.error)

The request is an OpenAI chat-completions body: `messages`, `tools`, optional
`add_generation_prompt` (default true), `bos_token`, `eos_token`, `chat_template_kwargs`.
In --corpus mode a template that rejects the system message is rendered again without it.
`strftime_now` is pinned to 2026-01-01 so renders are reproducible.

The fixtures under tests/data/schema/ were produced by:
  python3 scripts/schema-render.py --corpus "$TOOLSCOPE_CORPUS" \
      tests/data/schema/corpus-request.json tests/data/schema/corpus
  python3 scripts/schema-render.py "$TOOLSCOPE_CORPUS/google-gemma-4-31B-it.jinja" \
      <(jq .inputs.request tests/cases/01-gemma4-anyof-type-lost/case.json) > tests/data/schema/case01.gemma4.txt
  (same for case 02 → case02.gemma4.txt)
"""
import json
import os
import sys
from datetime import datetime

import jinja2
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


class GenerationTag(Extension):
    """`{% generation %}…{% endgeneration %}` as a plain block (transformers' AssistantTracker)."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.Scope(body, lineno=lineno)


def make_env():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime(2026, 1, 1, 12, 0, 0).strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols, GenerationTag])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render(template_src, request):
    env = make_env()
    tmpl = env.from_string(template_src)
    kwargs = dict(request.get("chat_template_kwargs") or {})
    return tmpl.render(
        messages=request.get("messages", []),
        tools=request.get("tools"),
        add_generation_prompt=request.get("add_generation_prompt", True),
        bos_token=request.get("bos_token", ""),
        eos_token=request.get("eos_token", ""),
        **kwargs,
    )


def main(argv):
    if len(argv) == 5 and argv[1] == "--corpus":
        src_dir, req_path, out_dir = argv[2], argv[3], argv[4]
        with open(req_path, encoding="utf-8") as f:
            request = json.load(f)
        os.makedirs(out_dir, exist_ok=True)
        for name in sorted(os.listdir(src_dir)):
            if not name.endswith(".jinja"):
                continue
            stem = name[: -len(".jinja")]
            with open(os.path.join(src_dir, name), encoding="utf-8") as f:
                src = f.read()
            for ext in (".txt", ".error"):
                p = os.path.join(out_dir, stem + ext)
                if os.path.exists(p):
                    os.remove(p)
            try:
                try:
                    out = render(src, request)
                except jinja2.exceptions.TemplateError as e:
                    # Templates that reject a system message: retry without it.
                    if "system" not in str(e).lower():
                        raise
                    req2 = dict(request)
                    req2["messages"] = [m for m in request.get("messages", []) if m.get("role") != "system"]
                    out = render(src, req2)
                with open(os.path.join(out_dir, stem + ".txt"), "w", encoding="utf-8") as f:
                    f.write(out)
            except Exception as e:  # noqa: BLE001 - record every failure kind
                with open(os.path.join(out_dir, stem + ".error"), "w", encoding="utf-8") as f:
                    f.write(f"{type(e).__name__}: {e}\n")
        return 0
    if len(argv) == 3 and argv[1] == "--stdin":
        with open(argv[2], encoding="utf-8") as f:
            src = f.read()
        request = json.load(sys.stdin)
    elif len(argv) == 3:
        with open(argv[1], encoding="utf-8") as f:
            src = f.read()
        with open(argv[2], encoding="utf-8") as f:
            request = json.load(f)
    else:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        sys.stdout.write(render(src, request))
    except Exception as e:  # noqa: BLE001
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
