#!/usr/bin/env python3
"""Dynamo's own parser code (dynamo-parse) over the engine corpus, compared with vLLM/SGLang.

    compare.py CORPUS.json ENGINES_REAL.json TOOLSCOPE OUT.json [--dynamo BIN]

ENGINES_REAL.json: scripts/engines/run.py's output for CORPUS.json. TOOLSCOPE: a toolscope binary
(`parse --engines --format json` gives its vLLM/SGLang predictions). OUT.json: per text the
Dynamo results (frontend path with the text as one delta and one delta per character, and the
batch finalize call), the engines' real results, toolscope's predictions, and the agreements.
Verdicts compare as tests/e2e/engines_real.rs does: the calls (names, arguments as JSON when
they parse, else the text) and the content trimmed, or both an error. Prints a per-family table.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict

# toolscope family -> the Dynamo (dynamo-parsers 11.0.1) registry name that reads its format,
# or None (tool_calling/parsers.rs get_tool_parser_map registers no parser for it)
DYNAMO = {
    "hermes": "hermes",
    "qwen3-coder": "qwen3_coder",
    "glm4.5": "glm47",
    "seed-oss": None,
    "gemma4": "gemma4",
    "functiongemma": None,
    "llama3": "llama3_json",
    "pythonic": "pythonic",
    "lfm2": None,
    "mistral": "mistral",
    "deepseek-v3": "deepseek_v3",
    "deepseek-v3.2": "deepseek_v3_2",
    "kimi-k2": "kimi_k2",
    "kimi-k3": "kimi_k3",
    "gpt-oss": "harmony",
    "anthropic-xml": "minimax_m2",
    "minimax-m3": "minimax_m3",
    "command-r7b": None,
    "apertus": None,
    "granite": None,
    "gigachat3": None,
    "minicpm5": None,
    "muse-glimmer": None,
    "hy3": None,
    "nemotron-v2": "nemotron_deci",
    "minimax-m1": None,
    "solar-open": None,
}
# nearest registered parser for a family Dynamo has none for, measured as an aside
NEAREST = {"lfm2": "pythonic", "minimax-m1": "jamba", "seed-oss": "qwen3_coder"}
RUNS = {  # name -> (mode, chunking)
    "frontend": ("frontend", "whole"),
    "frontend_chars": ("frontend", "chars"),
    "batch": ("batch", "whole"),
}


def args_value(a):
    if isinstance(a, (dict, list)):
        return a
    try:
        return json.loads(a)
    except Exception:
        return a


def dynamo_verdict(r):
    if r.get("error"):
        return "error"
    return (
        [(c["name"], args_value(c["arguments"])) for c in r["tool_calls"]],
        (r["content"] or "").strip(),
    )


def real_verdict(r):
    if r is None or "skipped" in r:
        return None
    if "error" in r:
        return "error"
    calls = []
    for c in r["calls"]:
        a = c["arguments"]
        if isinstance(a, dict) and "$unparsed" in a:
            a = a["$unparsed"]
        calls.append((c["name"] or "", a))
    return (calls, (r["content"] or "").strip())


def predicted_verdict(o):
    if o["kind"] == "error":
        return "error"
    return (
        [(c["name"], c["arguments"]) for c in o.get("tool_calls", [])],
        (o.get("content") or "").strip(),
    )


def run_dynamo(binary, parser, tools, texts, mode, chunking):
    req = {"parser": parser, "tools": tools, "texts": texts, "mode": mode, "chunking": chunking}
    p = subprocess.run([binary], input=json.dumps(req), capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"dynamo-parse failed ({parser}): {p.stderr}")
    return json.loads(p.stdout)


def toolscope_predictions(binary, family, text, tools, tmp):
    tf, xf = os.path.join(tmp, "tools.json"), os.path.join(tmp, "text.txt")
    json.dump(tools, open(tf, "w"))
    open(xf, "w", encoding="utf-8").write(text)
    p = subprocess.run(
        [binary, "parse", "--engines", "--format", "json", "--syntax", family, "--tools", tf, xf],
        capture_output=True,
        text=True,
    )
    if p.returncode != 0:
        return {}
    out = json.loads(p.stdout)
    return {o["engine"]: o["outcome"] for o in (out.get("engines") or {}).get("outcomes", [])}


def main(argv):
    corpus_path, real_path, toolscope, out_path = argv[1:5]
    binary = os.path.expanduser("~/.cache/toolscope/engines/dynamo-parse")
    if "--dynamo" in argv:
        binary = argv[argv.index("--dynamo") + 1]
    corpus = json.load(open(corpus_path, encoding="utf-8"))
    real = json.load(open(real_path, encoding="utf-8"))["results"]
    by_fam = defaultdict(list)
    for t in corpus["texts"]:
        by_fam[t["family"]].append(t)
    out = {}
    for fam, texts in by_fam.items():
        parser = DYNAMO[fam] or NEAREST.get(fam)
        dyn = {}
        if parser:
            # one invocation per (tools, run): texts with their own tools go alone
            groups = defaultdict(list)
            for i, t in enumerate(texts):
                groups[json.dumps(t.get("tools", corpus["tools"]))].append(i)
            for run, (mode, chunking) in RUNS.items():
                res = [None] * len(texts)
                for tools_json, idx in groups.items():
                    rs = run_dynamo(binary, parser, json.loads(tools_json), [texts[i]["text"] for i in idx], mode, chunking)
                    for i, r in zip(idx, rs):
                        res[i] = r
                dyn[run] = res
        with tempfile.TemporaryDirectory() as tmp:
            for i, t in enumerate(texts):
                tools = t.get("tools", corpus["tools"])
                pred = toolscope_predictions(toolscope, fam, t["text"], tools, tmp)
                rv = {e: real_verdict(real[t["id"]][e]) for e in ("vllm", "sglang")}
                pv = {e: (predicted_verdict(pred[e]) if e in pred else None) for e in ("vllm", "sglang")}
                rec = {
                    "family": fam,
                    "kind": t["kind"],
                    "dynamo_parser": DYNAMO[fam],
                    "nearest_parser": None if DYNAMO[fam] else NEAREST.get(fam),
                    "dynamo": {run: dyn[run][i] for run in dyn} if dyn else None,
                    "vllm_real": real[t["id"]]["vllm"],
                    "sglang_real": real[t["id"]]["sglang"],
                    "toolscope_vllm": pred.get("vllm"),
                    "toolscope_sglang": pred.get("sglang"),
                }
                if dyn:
                    d = {run: dynamo_verdict(dyn[run][i]) for run in dyn}
                    rec["agree"] = {
                        "vllm_real": None if rv["vllm"] is None else d["frontend"] == rv["vllm"],
                        "sglang_real": None if rv["sglang"] is None else d["frontend"] == rv["sglang"],
                        "toolscope_vllm": None if pv["vllm"] is None else d["frontend"] == pv["vllm"],
                        "toolscope_sglang": None if pv["sglang"] is None else d["frontend"] == pv["sglang"],
                        "batch_same_as_frontend": d["batch"] == d["frontend"],
                        "chars_same_as_whole": d["frontend_chars"] == d["frontend"],
                    }
                out[t["id"]] = rec
    json.dump(
        {
            "about": "dynamo-parsers 11.0.1 (scripts/engines/dynamo) over tests/data/engine_corpus.json; "
            "dynamo.frontend is the verdict compared",
            "results": out,
        },
        open(out_path, "w", encoding="utf-8"),
        ensure_ascii=False,
        indent=1,
    )
    # table
    print(f"{'family':15} {'dynamo':14} {'n':>3} {'=vLLM':>6} {'=SGL':>6} {'=tsV':>5} {'=tsS':>5} {'batch=':>6} {'chars=':>6}")
    for fam in by_fam:
        recs = [r for r in out.values() if r["family"] == fam]
        name = DYNAMO[fam] or (f"({NEAREST[fam]})" if fam in NEAREST else "none")
        if not recs[0].get("agree"):
            print(f"{fam:15} {name:14} {len(recs):3}")
            continue

        def cnt(k):
            v = [r["agree"][k] for r in recs if r["agree"][k] is not None]
            return f"{sum(v)}/{len(v)}" if v else "-"

        print(
            f"{fam:15} {name:14} {len(recs):3} {cnt('vllm_real'):>6} {cnt('sglang_real'):>6} "
            f"{cnt('toolscope_vllm'):>5} {cnt('toolscope_sglang'):>5} {cnt('batch_same_as_frontend'):>6} {cnt('chars_same_as_whole'):>6}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
