#!/usr/bin/env bash
# The end-to-end suite: tests marked #[ignore = "e2e"] start a real llama-server (build 11434)
# on a free 127.0.0.1 port themselves, run against it and stop it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# shellcheck disable=SC1091
source "${TOOLSCOPE_CACHE:-$HOME/.cache/toolscope}/env"
export TOOLSCOPE_REQUIRE_SETUP=1
# Known to fail against the real engine, kept out of CI until fixed (each names its issue):
# - e2e_try::tool_choice_fix_calls_the_named_tool (#24): llama-server b11434 honours a named
#   tool_choice on neither API (server-common.cpp:1275, server-chat.cpp:575), and forcing a call
#   (`required` with only the named tool) lets SmolLM2 write text first: 0/10 valid calls. `try`
#   reports exactly that; the fix itself is what is wrong.
SKIP=(--skip e2e_try::tool_choice_fix_calls_the_named_tool)
cargo test -- --ignored --test-threads=1 "${SKIP[@]}" "$@"
