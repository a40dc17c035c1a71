#!/usr/bin/env bash
# The longest functions in src/ (rustfmt-formatted code: a function runs from its `fn` line to
# the `}` at the same indentation). Prints the TOP longest (default 10) and fails when one is
# over LIMIT lines (default 150), unless listed in ALLOW below with the reason.
# Usage: scripts/long-fns.sh [TOP] [LIMIT]. Run by .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."
top=${1:-10}
limit=${2:-150}
# file:function pairs allowed over the limit, each with why. Only a table may stay; the rest
# are debts with an owner (issue #26): remove a line when its function is cut.
ALLOW=(
  "src/tui/keymap.rs:default"          # a table: one line per default key binding
  "src/parser/engines/profile.rs:vllm"    # a table: one profile per family (vLLM 0.33.0)
  "src/parser/engines/profile.rs:sglang"  # a table: one profile per family (SGLang 0.5.23)
)
report=$(find src -name '*.rs' -print0 | sort -z | xargs -0 awk '
  FNR == 1 { depth = 0 }
  {
    if (match($0, /^[ \t]*(pub(\([^)]*\))?[ \t]+)?(const[ \t]+)?(async[ \t]+)?(unsafe[ \t]+)?fn[ \t]+[A-Za-z0-9_]+/)) {
      if ($0 ~ /[;}][ \t]*$/ && $0 !~ /\{[ \t]*$/) next   # a one-line fn or a declaration
      line = substr($0, RSTART, RLENGTH)
      sub(/^.*fn[ \t]+/, "", line)
      indent = $0; sub(/[^ \t].*$/, "", indent)
      depth++; name[depth] = line; start[depth] = FNR; ind[depth] = indent
      next
    }
    if (depth > 0 && $0 == ind[depth] "}") {
      printf "%d %s:%d %s\n", FNR - start[depth] + 1, FILENAME, start[depth], name[depth]
      depth--
    }
  }' | sort -rn)
echo "longest functions (lines, file:line, name):"
sed -n "1,${top}p" <<< "$report"
over=0
while read -r n loc fn; do
  [ "$n" -gt "$limit" ] || break
  file=${loc%%:*}
  allowed=no
  for a in "${ALLOW[@]}"; do [ "$a" = "$file:$fn" ] && allowed=yes; done
  if [ $allowed = no ]; then
    echo "over $limit lines: $loc $fn ($n)" >&2
    over=$((over + 1))
  fi
done <<< "$report"
[ $over -eq 0 ] || { echo "$over function(s) over $limit lines: cut them along their seams" >&2; exit 1; }
