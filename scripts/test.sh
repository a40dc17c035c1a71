#!/usr/bin/env bash
# The test command (README): set up what the tests need, then run every test that does not
# need a running llama-server. Setup is cached in ~/.cache/toolscope; the first run builds
# llama-server (~17 min on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# shellcheck disable=SC1091
source "${TOOLSCOPE_CACHE:-$HOME/.cache/toolscope}/env"
export TOOLSCOPE_REQUIRE_SETUP=1
cargo test "$@"
