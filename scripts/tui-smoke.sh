#!/usr/bin/env bash
# Smoke test of the inspector in a real terminal (tmux): starts `toolscope` (the session
# browser over ./sessions/), opens the first session, presses 1–6, the Template pane's
# s (local render) and d (side-by-side diff, q back), ?, G and Esc in the help, / with Ctrl-U,
# then q until the quit prompt and y; fails on a panic, a missing pane, or a process that does
# not quit.
#
# Usage: scripts/tui-smoke.sh [path/to/toolscope]   (default: builds target/debug/toolscope)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${1:-}"
if [[ -z "$bin" ]]; then
  (cd "$root" && cargo build --quiet --bin toolscope)
  bin="${CARGO_TARGET_DIR:-$root/target}/debug/toolscope"
fi
bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
command -v tmux >/dev/null || { echo "tui-smoke: tmux is not installed" >&2; exit 2; }

work="$(mktemp -d)"
sock="tui-smoke-$$"
cleanup() { tmux -L "$sock" kill-server 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

# Use the shipped recordings when there are any, else the test fixture.
mkdir -p "$work/sessions"
if compgen -G "$root/sessions/*.jsonl" >/dev/null; then
  cp "$root"/sessions/*.jsonl "$work/sessions/"
else
  cp "$root/tests/data/session-smollm2.jsonl" "$work/sessions/"
fi

log="$work/stderr.log"
tmux -L "$sock" new-session -d -s smoke -x 140 -y 40 \
  "cd '$work' && RUST_BACKTRACE=1 '$bin' 2>'$log'; echo \"EXIT:\$?\" > '$work/exit'; sleep 30"

fail() {
  echo "tui-smoke: FAIL: $*" >&2
  echo "---- screen ----" >&2
  tmux -L "$sock" capture-pane -p -t smoke >&2 || true
  echo "---- stderr ----" >&2
  cat "$log" >&2 2>/dev/null || true
  exit 1
}
screen() { tmux -L "$sock" capture-pane -p -t smoke; }
press() { tmux -L "$sock" send-keys -t smoke "$@"; sleep 0.4; }
expect() { # expect TEXT WHAT
  for _ in $(seq 1 25); do
    if screen | grep -qF -- "$1"; then return 0; fi
    if screen | grep -q "panicked"; then fail "panic while waiting for $2"; fi
    sleep 0.2
  done
  fail "missing $2 (expected \"$1\" on screen)"
}

expect "Sessions" "session browser"
press Enter
expect "Exchanges" "exchanges list"
i=0
for pane in "Tools" "Schema" "Template" "Stream" "Replay" "Findings"; do
  i=$((i + 1))
  press "$i"
  expect "$pane ·" "pane $i ($pane)"
done
press 3
press s
expect "local render" "Template pane, local render (s)"
press d
expect "Template · diff: local ⟷ server" "side-by-side diff view (d)"
press q
expect "Template · local" "back from the diff view to the Template pane (q)"
press "?"
expect "Help" "help overlay"
press G
expect "keymap.toml" "end of the help (G keeps it open)"
press Escape
press "/"
expect "█" "search prompt"
press x y z C-u P O S T
expect "/POST█" "Ctrl-U clears the search prompt"
press Enter
# q steps back: search → list → browser → "quit toolscope? y/n".
for _ in $(seq 1 6); do
  screen | grep -qF "quit toolscope?" && break
  press q
done
expect "quit toolscope?" "quit confirmation"
[[ -f "$work/exit" ]] && fail "quit without confirmation"
press y
for _ in $(seq 1 25); do [[ -f "$work/exit" ]] && break; sleep 0.2; done
[[ -f "$work/exit" ]] || fail "toolscope did not quit on q, y"
grep -q "panicked" "$log" 2>/dev/null && fail "panic in stderr"
code="$(sed 's/EXIT://' "$work/exit")"
[[ "$code" == "0" ]] || fail "exit code $code"
echo "tui-smoke: ok (browser, 6 panes, template local/diff, help G, search Ctrl-U, quit y/n)"
