#!/usr/bin/env python3
"""Reference chat-template renderer: Python Jinja2 configured exactly as transformers'
`apply_chat_template` (transformers/utils/chat_template_utils.py, `_compile_jinja_template` and
`render_jinja_template`):

  ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                extensions=[AssistantTracker, jinja2.ext.loopcontrols])
  filters["tojson"]  = json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
  globals["raise_exception"] = raise TemplateError(message)
  globals["strftime_now"]    = <fixed clock>.strftime(format)
  {% generation %}...{% endgeneration %} renders its body (AssistantTracker)

The context is given ready-made (toolscope's RenderInput::context(): messages, tools, documents,
add_generation_prompt, bos_token, eos_token, chat_template_kwargs), so the comparison is between
template engines only.

Usage:
  reference_render.py < jobs.json            # render
  reference_render.py --bench N < jobs.json  # time compile and render (N renders per job)

jobs.json: {"jobs": [{"id": str, "template": str, "context": {...}, "now": "RFC3339"?}]}
Output (stdout, one JSON object per line, in job order):
  render: {"id", "prompt"} or {"id", "error"}
  bench:  {"id", "compile_s", "render_s", "renders"} (render_s is the mean per render)
Requires jinja2 >= 3.1 (pip install jinja2).
"""

import json
import sys
import time
from datetime import datetime, timezone

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment


class AssistantTracker(Extension):
    # transformers' extension, minus the assistant-mask bookkeeping (not used for rendering).
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_generation_support"), [], [], body).set_lineno(lineno)

    @jinja2.pass_eval_context
    def _generation_support(self, context, caller):
        return caller()


def make_env(now):
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return now.strftime(format)

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[AssistantTracker, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def parse_now(s):
    if not s:
        return datetime.fromtimestamp(0, tz=timezone.utc)
    return datetime.fromisoformat(s.replace("Z", "+00:00"))


def main():
    bench = None
    if len(sys.argv) >= 3 and sys.argv[1] == "--bench":
        bench = int(sys.argv[2])
    jobs = json.load(sys.stdin)["jobs"]
    out = sys.stdout
    envs = {}
    for job in jobs:
        now_s = job.get("now") or ""
        env = envs.get(now_s)
        if env is None:
            env = envs[now_s] = make_env(parse_now(now_s))
        ctx = job["context"]
        if bench is None:
            try:
                prompt = env.from_string(job["template"]).render(**ctx)
                out.write(json.dumps({"id": job["id"], "prompt": prompt}, ensure_ascii=False) + "\n")
            except Exception as e:  # noqa: BLE001 - any template failure is a result
                out.write(json.dumps({"id": job["id"], "error": f"{type(e).__name__}: {e}"}, ensure_ascii=False) + "\n")
        else:
            t0 = time.perf_counter()
            try:
                tmpl = env.from_string(job["template"])
            except Exception as e:  # noqa: BLE001
                out.write(json.dumps({"id": job["id"], "error": str(e)}) + "\n")
                continue
            t1 = time.perf_counter()
            ok = 0
            for _ in range(bench):
                try:
                    tmpl.render(**ctx)
                    ok += 1
                except Exception:  # noqa: BLE001
                    pass
            t2 = time.perf_counter()
            out.write(json.dumps({"id": job["id"], "compile_s": t1 - t0, "render_s": (t2 - t1) / max(bench, 1), "renders": ok}) + "\n")
    out.flush()


if __name__ == "__main__":
    main()
