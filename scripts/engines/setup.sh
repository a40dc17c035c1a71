#!/usr/bin/env bash
# The engines' released parser code as a test reference (issue 23). Idempotent; cached in
# ${TOOLSCOPE_CACHE:-~/.cache/toolscope}/engines/ (never committed):
#   dl/           vllm-0.33.0 and sglang-0.5.23 wheels (`pip download --no-deps`, never installed)
#   src/vllm-0.33.0/, src/sglang-0.5.23/   the parser folders only, unpacked from the wheels
#   venv/         a small venv with the parser code's pure-Python dependencies, pinned below
#   dynamo-parse  scripts/engines/dynamo's driver (dynamo-parsers 11.0.1), built in dynamo-target/
#   tiktoken/o200k_base.tiktoken  OpenAI's o200k BPE ranks, the vocabulary of the harmony
#                 encoding (gpt-oss) that openai_harmony (vLLM's HarmonyParser) and Dynamo's
#                 `harmony` parser load; rebuilt from the npm package tiktoken (below)
# The stand-ins for everything else the parser code imports are committed in
# scripts/engines/stubs/ (each names what it replaces). Run by scripts/setup.sh; alone:
#   scripts/engines/setup.sh
set -euo pipefail
CACHE="${TOOLSCOPE_CACHE:-$HOME/.cache/toolscope}"
E="$CACHE/engines"
VLLM=0.33.0
SGLANG=0.5.23
# openai: vLLM 0.33.0 needs >=2.25 (openai.types.responses.NamespaceTool); SGLang pins 2.8.0 but
# reads only types that 2.25 still has. prometheus_client: vllm/parser/metrics.py. cohere-melody:
# the Command parser of vLLM (vllm/parser/cohere_command.py parses with it).
PINS="pydantic==2.12.5 partial-json-parser==0.2.1.1.post7 orjson==3.13.0 regex==2026.11.19 msgspec==0.23.0 openai-harmony==0.0.4 mistral-common==1.13.1 openai==2.25.0 ijson==3.6.0 jinja2==3.1.6 prometheus_client==0.23.1 cohere-melody==0.15.3"
log() { echo "[setup engines] $*" >&2; }
mkdir -p "$E/dl" "$E/src"

whl() { ls "$E"/dl/"$1"-"$2"-*.whl 2>/dev/null | head -1; }
for spec in "vllm $VLLM" "sglang $SGLANG"; do
  set -- $spec
  if [ -z "$(whl "$1" "$2")" ]; then
    log "downloading $1==$2 (wheel only, --no-deps)"
    python3 -m pip download -q --no-deps "$1==$2" -d "$E/dl"
  fi
done

# Only the parser folders, plus the modules they import that are plain Python (protocol models,
# envs, exceptions, collection helpers) and the two server files the driver takes one method
# each from (serving_chat.py: SGLang's _process_tool_calls; message_assembly.py: vLLM's
# assemble_chat_message_fields). Stand-ins (scripts/engines/stubs) replace the rest.
unpack() { # name version dest patterns...
  local name=$1 ver=$2 dest=$3; shift 3
  if [ ! -f "$dest/.complete" ]; then
    log "unpacking the parser folders of $name $ver"
    rm -rf "$dest.tmp" && mkdir -p "$dest.tmp"
    python3 - "$(whl "$name" "$ver")" "$dest.tmp" "$@" <<'PY'
import fnmatch, sys, zipfile
whl, dest, pats = sys.argv[1], sys.argv[2], sys.argv[3:]
z = zipfile.ZipFile(whl)
n = 0
for name in z.namelist():
    if name.endswith(".py") and any(fnmatch.fnmatch(name, p) for p in pats):
        z.extract(name, dest); n += 1
print(f"{n} files", file=sys.stderr)
PY
    rm -rf "$dest" && mv "$dest.tmp" "$dest" && touch "$dest/.complete"
  fi
}
unpack vllm $VLLM "$E/src/vllm-$VLLM" \
  'vllm/tool_parsers/*' 'vllm/parser/*' 'vllm/reasoning/*' \
  'vllm/envs.py' 'vllm/exceptions.py' 'vllm/utils/collection_utils.py' \
  'vllm/entrypoints/generate/base/protocol.py' 'vllm/entrypoints/serve/engine/protocol.py' \
  'vllm/entrypoints/serve/utils/tool_calls_utils.py' \
  'vllm/entrypoints/openai/chat_completion/protocol.py' \
  'vllm/entrypoints/openai/chat_completion/message_assembly.py' \
  'vllm/entrypoints/openai/parser/harmony_utils.py' \
  'vllm/renderers/chat_utils/tool_call.py' 'vllm/renderers/cohere.py' \
  'vllm/entrypoints/cohere/cohere_chat_message.py'
unpack sglang $SGLANG "$E/src/sglang-$SGLANG" \
  'sglang/srt/function_call/*' 'sglang/srt/parser/*' \
  'sglang/srt/environ.py' 'sglang/srt/entrypoints/openai/protocol.py' \
  'sglang/srt/entrypoints/openai/serving_chat.py' 'sglang/utils.py'

if [ ! -x "$E/venv/bin/python" ] || [ "$(cat "$E/venv/pins" 2>/dev/null)" != "$PINS" ]; then
  log "creating $E/venv ($PINS)"
  rm -rf "$E/venv" && python3 -m venv "$E/venv"
  # shellcheck disable=SC2086
  "$E/venv/bin/python" -m pip install -q $PINS
  echo "$PINS" >"$E/venv/pins"
fi
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# o200k_base.tiktoken: openai_harmony (the venv's openai-harmony 0.0.4 and Dynamo's
# openai-harmony 0.0.8, src/tiktoken_ext/public_encodings.rs `Encoding::load`) reads
# $TIKTOKEN_ENCODINGS_BASE/o200k_base.tiktoken when that variable is set, and checks its
# SHA-256 (else it downloads the file from OpenAI's blob store, which is not reachable here).
# The same ranks ship in the npm package tiktoken (dqbd's WASM build), encoders/o200k_base.json
# `bpe_ranks`: "! RANK TOKEN TOKEN …" runs of base64 tokens with consecutive ranks. The
# .tiktoken text is one "base64 rank" line per token, by rank. run.py and the Dynamo test set
# TIKTOKEN_ENCODINGS_BASE to this folder.
TIKTOKEN_NPM=tiktoken@1.0.22
O200K_SHA256=446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d
o200k="$E/tiktoken/o200k_base.tiktoken"
if [ ! -f "$o200k" ] || [ "$(sha256sum "$o200k" | cut -d' ' -f1)" != "$O200K_SHA256" ]; then
  command -v npm >/dev/null 2>&1 \
    || { log "npm not found: cannot fetch $TIKTOKEN_NPM for the o200k vocabulary"; exit 1; }
  log "rebuilding $o200k from $TIKTOKEN_NPM (encoders/o200k_base.json)"
  tmp="$(mktemp -d)"
  (cd "$tmp" && npm pack --silent "$TIKTOKEN_NPM" >/dev/null) \
    || { log "npm pack $TIKTOKEN_NPM failed"; rm -rf "$tmp"; exit 1; }
  tar -xzf "$tmp"/tiktoken-*.tgz -C "$tmp" package/encoders/o200k_base.json
  mkdir -p "$E/tiktoken"
  python3 - "$tmp/package/encoders/o200k_base.json" "$o200k.tmp" <<'PY'
import json, sys
ranks = {}
for run in json.load(open(sys.argv[1], encoding="utf-8"))["bpe_ranks"].split("!"):
    parts = run.split()
    for i, tok in enumerate(parts[1:]):
        ranks[int(parts[0]) + i] = tok
assert sorted(ranks) == list(range(len(ranks))), "o200k ranks are not 0..n-1"
with open(sys.argv[2], "w", encoding="ascii", newline="\n") as f:
    f.writelines(f"{ranks[r]} {r}\n" for r in range(len(ranks)))
PY
  rm -rf "$tmp"
  got="$(sha256sum "$o200k.tmp" | cut -d' ' -f1)"
  if [ "$got" != "$O200K_SHA256" ]; then
    log "o200k_base.tiktoken from $TIKTOKEN_NPM has sha256 $got, not $O200K_SHA256 (what openai_harmony checks)"
    rm -f "$o200k.tmp"
    exit 1
  fi
  mv "$o200k.tmp" "$o200k"
fi
"$E/venv/bin/python" "$HERE/run.py" --check >/dev/null \
  || { log "the engines' parser code does not import (scripts/engines/run.py --check)"; exit 1; }
# llama.cpp's own parser code: a small driver linked with the libllama-common of each release
# scripts/setup.sh built (cached; rebuilt only when parse.cpp changes)
"$HERE/llama/build.sh"
# the Dynamo frontend's own parser code (dynamo-parsers from crates.io, linked in-process): a
# small Rust driver built into $E/dynamo-parse at nice 19 (cached; skipped without cargo)
"$HERE/dynamo/build.sh"
log "ready: $E"
