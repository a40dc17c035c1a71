#!/usr/bin/env bash
# The end-to-end suite: tests marked #[ignore = "e2e"] start a real llama-server (build 11434)
# on a free 127.0.0.1 port themselves, run against it and stop it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# shellcheck disable=SC1091
source "${TOOLSCOPE_CACHE:-$HOME/.cache/toolscope}/env"
export TOOLSCOPE_REQUIRE_SETUP=1
cargo test -- --ignored --test-threads=1 "$@"
