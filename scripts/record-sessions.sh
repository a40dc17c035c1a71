#!/usr/bin/env bash
# Re-records the shipped sessions in sessions/ from a real llama-server (build 11434) with
# toolscope's own recorder: `toolscope proxy` (+ curl) for (a), `toolscope send` for the rest.
# Every server runs on 127.0.0.1 with --jinja --seed 42 --temp 0 and every request sets
# temperature 0, so re-recording gives the same text on the same build (timings differ).
# Servers run as users run them: without -v (no __verbose in responses), with
# LLAMA_SERVER_SLOTS_DEBUG=1 so toolscope reads each exchange's raw text from GET /slots.
#
#   bash scripts/record-sessions.sh            # all sessions
#   bash scripts/record-sessions.sh a c        # only some (letters as below)
#
# Needs scripts/setup.sh to have run (llama-server, SmolLM2, Gemma 3, template corpus).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck disable=SC1091
source "${TOOLSCOPE_CACHE:-$HOME/.cache/toolscope}/env"
TS="${TOOLSCOPE_BIN:-target/debug/toolscope}"
[ -x "$TS" ] || cargo build --bin toolscope
REQ=scripts/record-requests
OUT=sessions
mkdir -p "$OUT"
WANT="${*:-a b c d e f g h}"
want() { [[ " $WANT " == *" $1 "* ]]; }

SERVER_PID=""; PORT=""; LOG=""
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
# start_server MODEL [TEMPLATE|-] [-v]   (-v only on request; the shipped sessions use none)
start_server() {
  local model="$1" template="${2:--}" verbose="${3:-}"
  PORT=$(free_port); LOG=$(mktemp /tmp/toolscope-record-llama.XXXXXX.log)
  local args=(-m "$model" --jinja -c 4096 --host 127.0.0.1 --port "$PORT" --seed 42 --temp 0 --no-webui)
  [ "$template" != "-" ] && args+=(--chat-template-file "$template")
  [ -n "$verbose" ] && args+=(-v)
  echo "+ LLAMA_SERVER_SLOTS_DEBUG=1 llama-server ${args[*]}" >&2
  LLAMA_SERVER_SLOTS_DEBUG=1 "$TOOLSCOPE_LLAMA_SERVER" "${args[@]}" >"$LOG" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 1 600); do
    curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && return 0
    kill -0 "$SERVER_PID" 2>/dev/null || { tail -20 "$LOG"; return 1; }
    sleep 0.1
  done
  tail -20 "$LOG"; return 1
}
stop_server() { [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null; SERVER_PID=""; rm -f "$LOG"; }
trap stop_server EXIT
# send SESSION REQUEST [toolscope send options…]
send() { local s="$1" r="$2"; shift 2; echo "+ toolscope send $r --url http://127.0.0.1:$PORT --session $s $*" >&2
  "$TS" send "$r" --url "http://127.0.0.1:$PORT" --session "$s" "$@" >/dev/null || true; }
fresh() { rm -f "$1"; }

if want a; then  # (a) two tools, /v1/chat/completions, streaming; through the proxy
  S=$OUT/a-two-tools-stream.jsonl; fresh $S
  start_server "$TOOLSCOPE_SMOLLM2" "$TOOLSCOPE_CORPUS/Qwen-Qwen3-0.6B.jinja"
  PP=$(free_port)
  "$TS" proxy --headless --upstream "http://127.0.0.1:$PORT" --listen "127.0.0.1:$PP" --session $S &
  PROXY=$!
  # Wait until the proxy listens (a TCP connect, so no probe request is recorded).
  for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/127.0.0.1/$PP") 2>/dev/null && break; sleep 0.1; done
  curl -sN "http://127.0.0.1:$PP/v1/chat/completions" -H 'content-type: application/json' -H 'authorization: Bearer sk-local-demo' \
    --data-binary @$REQ/a-two-tools-stream.json >/dev/null
  kill -INT $PROXY; wait $PROXY || true
  stop_server
fi
if want b; then  # (b) /v1/messages, tool_choice {"type":"tool","name":"get_time"} for a weather question
  S=$OUT/b-anthropic-named-tool-choice.jsonl; fresh $S
  start_server "$TOOLSCOPE_SMOLLM2" "$TOOLSCOPE_CORPUS/Qwen-Qwen3-0.6B.jinja"
  send $S $REQ/b-anthropic-named-tool-choice.json --api anthropic
  stop_server
fi
if want c; then  # (c) Gemma 4 corpus template forced on Gemma 3 270M; a parameter with anyOf (and a type list)
  S=$OUT/c-gemma4-template-anyof.jsonl; fresh $S
  start_server "$TOOLSCOPE_GEMMA3" "$TOOLSCOPE_CORPUS/google-gemma-4-31B-it.jinja"
  send $S $REQ/c-gemma4-anyof.json --api openai
  stop_server
fi
if want d; then  # (d) stop string that shows up in the output (OpenAI stop, Anthropic stop_sequences)
  S=$OUT/d-stop-string.jsonl; fresh $S
  start_server "$TOOLSCOPE_SMOLLM2" -
  send $S $REQ/d-stop-openai.json --api openai
  send $S $REQ/d-stop-anthropic.json --api anthropic
  stop_server
fi
if want e; then  # (e) HTTP 500: Qwen3 template + assistant prefill "<tool_call>\n{\"name\": \""
  S=$OUT/e-http500-peg-native.jsonl; fresh $S
  start_server "$TOOLSCOPE_SMOLLM2" "$TOOLSCOPE_CORPUS/Qwen-Qwen3-0.6B.jinja"
  send $S $REQ/e-http500-prefill.json --api openai
  stop_server
fi
if want f; then  # tool_choice "none" (OpenAI) and {"type":"none"} (Anthropic, dropped by build 11434)
  S=$OUT/f-tool-choice-none.jsonl; fresh $S
  start_server "$TOOLSCOPE_SMOLLM2" "$TOOLSCOPE_CORPUS/Qwen-Qwen2.5-7B-Instruct.jinja"
  send $S $REQ/f-tool-choice-none-openai.json --api openai
  send $S $REQ/f-tool-choice-none-anthropic.json --api anthropic
  stop_server
fi
if want g; then  # stop string inside reasoning: Qwen3 template, prefill "<think>\n", stop ["The"]
  S=$OUT/g-stop-in-reasoning.jsonl; fresh $S
  start_server "$TOOLSCOPE_SMOLLM2" "$TOOLSCOPE_CORPUS/Qwen-Qwen3-0.6B.jinja"
  send $S $REQ/g-stop-in-reasoning.json --api openai
  stop_server
fi
if want h; then  # the probe: every control on both APIs, few-shot history so the tiny model calls tools
  S=$OUT/h-probe-qwen3.jsonl; fresh $S
  start_server "$TOOLSCOPE_SMOLLM2" "$TOOLSCOPE_CORPUS/Qwen-Qwen3-0.6B.jinja"
  echo "+ toolscope probe http://127.0.0.1:$PORT --api both --session $S" >&2
  "$TS" probe "http://127.0.0.1:$PORT" --api both --session $S || true
  stop_server
fi
ls -la $OUT/*.jsonl
