#!/usr/bin/env python3
"""Run the engines' released tool-call parser code over a corpus of raw model texts.

    $TOOLSCOPE_CACHE/engines/venv/bin/python scripts/engines/run.py CORPUS.json OUT.json
    … run.py --check        # import both engines' parser code, list their parser names

CORPUS.json (tests/data/engine_corpus.json): `tools` (OpenAI tools array, the request's),
`families` ({family: {"vllm": NAME|null, "sglang": NAME|null, "markers": [special tokens],
"tokenizer_init_kwargs"?: {…}, "tokenizer"?: "harmony", "model_type"?: "gpt_oss"}});
`tokenizer: "harmony"` tokenizes with openai_harmony's own encoding (the model's real ids) in
place of the marker stand-in, `model_type` is the model's hf_config.model_type vLLM's server
reads (gpt_oss: HarmonyParser),
`texts` ([{"id", "family", "kind", "text", "tools"?, "markers"?}]; `markers` replaces the
family's vocabulary for that text).
OUT.json: {"versions": {...}, "results": {id: {"vllm": R|null, "sglang": R|null}}} where R is
{"calls": [{"name", "arguments"}], "content", "reasoning"} or {"error": "Type: message"};
`arguments` is the JSON value when the engine's argument string parses as JSON, else
{"$unparsed": string}. `null`: the engine registers no parser for the family.

vLLM: vllm_path.py (ParserManager.get_parser → parse → assemble_chat_message_fields).
SGLang: sglang_path.py (OpenAIServingChat._process_tool_calls → FunctionCallParser).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "stubs"))

import loader  # noqa: E402

CACHE = os.environ.get("TOOLSCOPE_CACHE", os.path.expanduser("~/.cache/toolscope"))
# openai_harmony (vLLM's HarmonyParser, gpt-oss) loads o200k_base.tiktoken from this folder and
# checks its SHA-256 (scripts/engines/setup.sh rebuilds it from an npm package); without the
# variable it would download the file
os.environ.setdefault("TIKTOKEN_ENCODINGS_BASE", os.path.join(CACHE, "engines", "tiktoken"))
VERSIONS = {"vllm": "0.33.0", "sglang": "0.5.23"}
ROOTS = [
    os.path.join(CACHE, "engines", "src", f"vllm-{VERSIONS['vllm']}"),
    os.path.join(CACHE, "engines", "src", f"sglang-{VERSIONS['sglang']}"),
]
loader.install(ROOTS, {"vllm", "sglang", "xgrammar", "transformers", "cohere_melody", "tml_renderers"})
logging.basicConfig(level=logging.CRITICAL)

import sglang_path  # noqa: E402
import tokenizer as tok  # noqa: E402
import vllm_path  # noqa: E402


def _args(a):
    if isinstance(a, (dict, list)):
        return a
    try:
        return json.loads(a)
    except Exception:
        return {"$unparsed": a}


def run_one(engine: str, parser: str, text: str, tools: list, fam: dict) -> dict:
    try:
        if fam.get("tokenizer") == "harmony":  # gpt-oss: the model's real token ids
            t = tok.HarmonyTokenizer(init_kwargs=fam.get("tokenizer_init_kwargs"))
        else:
            t = tok.MarkerTokenizer(fam.get("markers", []), init_kwargs=fam.get("tokenizer_init_kwargs"))
        if engine == "vllm":
            r = vllm_path.run(parser, text, tools, t, fam.get("model_type"))
        else:
            r = sglang_path.run(parser, text, tools, t)
    except Exception as e:  # the server answers 500 / the parser raised
        tb = traceback.extract_tb(e.__traceback__)
        where = next((f"{f.filename.split('/src/')[-1]}:{f.lineno}" for f in reversed(tb) if "/src/" in f.filename), "")
        return {"error": f"{type(e).__name__}: {e}", "at": where}
    return {
        "calls": [{"name": c["name"], "arguments": _args(c["arguments"])} for c in r["calls"]],
        "content": r["content"],
        "reasoning": r["reasoning"],
    }


def main(argv):
    if argv[1:2] == ["--check"]:
        print(json.dumps({"vllm": vllm_path.registered(), "sglang": sglang_path.registered()}))
        return 0
    corpus = json.load(open(argv[1], encoding="utf-8"))
    only = set(argv[3:])
    results = {}
    for t in corpus["texts"]:
        if only and t["id"] not in only:
            continue
        fam = corpus["families"][t["family"]]
        tools = t.get("tools", corpus["tools"])
        results[t["id"]] = {
            e: (
                {"skipped": fam["skip"][e]}
                if e in fam.get("skip", {})
                else run_one(e, fam[e], t["text"], tools, {**fam, **({"markers": t["markers"]} if "markers" in t else {})})
                if fam.get(e)
                else None
            )
            for e in ("vllm", "sglang")
        }
    out = {"versions": VERSIONS, "results": results}
    with open(argv[2], "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
