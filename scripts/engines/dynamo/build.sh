#!/usr/bin/env bash
# Builds scripts/engines/dynamo (a small driver linking the Dynamo frontend's tool-call parser
# crate, dynamo-parsers 11.0.1 from crates.io, in-process) into
# ${TOOLSCOPE_CACHE:-~/.cache/toolscope}/engines/dynamo-parse. Idempotent: a driver newer than
# src/main.rs, Cargo.toml and Cargo.lock is kept. At nice 19, into its own target folder
# (engines/dynamo-target, never committed); the driver's Cargo.toml has an empty [workspace], so
# it is its own root and never part of the toolscope crate's build. A cold build is about
# 3.5 min on 2 cores (about 370 crates); skipped with a message when cargo is missing.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${TOOLSCOPE_CACHE:-$HOME/.cache/toolscope}"
out="$cache/engines/dynamo-parse"
# a fresh non-login shell may not have rustup's bin folder on PATH
if ! command -v cargo >/dev/null 2>&1 && [ -x "${CARGO_HOME:-$HOME/.cargo}/bin/cargo" ]; then
    export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
fi
if ! command -v cargo >/dev/null 2>&1; then
    echo "[dynamo-parse] skip: cargo is not available" >&2
    exit 0
fi
if [ -x "$out" ] && [ "$out" -nt "$here/src/main.rs" ] && [ "$out" -nt "$here/Cargo.toml" ] \
    && [ "$out" -nt "$here/Cargo.lock" ]; then
    echo "[dynamo-parse] cached: $out"
    exit 0
fi
mkdir -p "$cache/engines"
echo "[dynamo-parse] building $out (nice 19)"
t0=$SECONDS
(cd "$here" && CARGO_TARGET_DIR="$cache/engines/dynamo-target" nice -n 19 \
    cargo build --release --locked --quiet)
cp "$cache/engines/dynamo-target/release/dynamo-parse" "$out.tmp"
mv "$out.tmp" "$out"
echo "[dynamo-parse] built $out in $((SECONDS - t0)) s"
