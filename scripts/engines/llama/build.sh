#!/usr/bin/env bash
# Builds scripts/engines/llama/parse.cpp against each llama.cpp release's source and the shared
# libraries scripts/setup.sh already built, into ~/.cache/toolscope/engines/llama-parse (b11434)
# and ~/.cache/toolscope/engines/llama-parse-11312. Idempotent: a driver newer than parse.cpp is
# kept. One translation unit at -O1 (about 10 s per release on one core).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${TOOLSCOPE_CACHE:-$HOME/.cache/toolscope}"
mkdir -p "$cache/engines"
build() { # SRC LIBDIR OUT
    local src="$1" lib="$2" out="$3"
    if [ ! -f "$src/common/chat.h" ] || [ ! -f "$lib/libllama-common.so" ]; then
        echo "[llama-parse] skip $out: missing $src/common/chat.h or $lib/libllama-common.so" >&2
        return 0
    fi
    if [ -x "$out" ] && [ "$out" -nt "$here/parse.cpp" ]; then
        echo "[llama-parse] cached: $out"
        return 0
    fi
    echo "[llama-parse] building $out"
    local t0=$SECONDS
    nice -n 19 "${CXX:-c++}" -std=c++17 -O1 \
        -I"$src/common" -I"$src/include" -I"$src/ggml/include" -I"$src/vendor" \
        "$here/parse.cpp" -o "$out.tmp" \
        -L"$lib" -lllama-common -lllama -lggml -lggml-base -Wl,-rpath,"$lib"
    mv "$out.tmp" "$out"
    echo "[llama-parse] built $out in $((SECONDS - t0)) s"
}
build "$cache/src/llama.cpp" "$cache/bin" "$cache/engines/llama-parse"
build "$cache/src/llama.cpp-11312" "$cache/bin-0.3.36" "$cache/engines/llama-parse-11312"
