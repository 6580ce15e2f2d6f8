#!/usr/bin/env bash
# Instructions per request of each way to limit a route, counted by callgrind: repeatable on
# any machine, whatever else it runs, where nanoseconds move with the load.
#
# Two harnesses serve the requests, each calling the router in process:
# - route_micro (`--count`): one poll a request, no runtime: `bare`, `tower_governor_no_headers`
#   and `memory_no_headers`, what each adds to `bare`;
# - http_load (`--count`): a current-thread Tokio runtime, and a private redis-server for the
#   rows on Redis (its instructions, another process, are not counted): each row against the
#   baseline that frames it (`bare_headers` sends the same three headers; the hand-written
#   `EVALSHA` of the same script).
# Each function serves N requests after a warm-up (every client counted once); callgrind counts
# only the function that serves them (`measured`). The counts repeat to within a few
# instructions a request for one toolchain and lockfile. Run from the workspace root:
#
#   bash benches/route_instructions.sh            # N=20000
#   N=2000 bash benches/route_instructions.sh --check
#
# Prints a markdown table: each row, its baseline, and what it adds to it. With `--check` (what
# CI runs) it also reads each row's ceiling from benches/route_instructions.ceilings and fails
# when a row adds more than 5% over its ceiling: instruction counts, not times, so a loaded
# machine cannot fail it and a slower hot path cannot pass it.
set -euo pipefail
cd "$(dirname "$0")/.."
N="${N:-20000}"
check=false
[ "${1:-}" = "--check" ] && check=true
command -v valgrind >/dev/null || { echo "valgrind is needed (apt-get install valgrind)" >&2; exit 1; }
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

# The executable of bench target $1, built once.
executable() {
  local bin
  bin="$(cargo bench -p plug_limit_bench --bench "$1" --no-run --message-format=json 2>"$out/build.log" \
    | python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == sys.argv[1] and m.get("executable"):
        print(m["executable"])' "$1")" || true
  [ -x "$bin" ] || { cat "$out/build.log" >&2; echo "$1 did not build" >&2; exit 1; }
  echo "$bin"
}
micro="$(executable route_micro)"
load="$(executable http_load)"

# Instructions a request of function $2 of harness $1 (route_micro or http_load).
declare -A counted
per_request() {
  local key="$1/$2" bin pattern total
  if [ -z "${counted[$key]:-}" ]; then
    if [ "$1" = route_micro ]; then bin="$micro"; pattern='route_micro::measured*'
    else bin="$load"; pattern='http_load::count::measured*'; fi
    valgrind --tool=callgrind --collect-atstart=no --toggle-collect="$pattern" \
      --callgrind-out-file="$out/cg" "$bin" --count "$2" "$N" >/dev/null 2>"$out/log" \
      || { cat "$out/log" >&2; exit 1; }
    total="$(sed -n 's/^summary: //p' "$out/cg")"
    [ "${total:-0}" -gt 0 ] || { echo "callgrind counted nothing in $pattern" >&2; exit 1; }
    counted[$key]=$((total / N))
  fi
  echo "${counted[$key]}"
}

ceilings=benches/route_instructions.ceilings
echo "| row | instructions/request | baseline | its instructions | added | ceiling | within 5% |"
echo "|---|---:|---|---:|---:|---:|---|"
failed=0
# row, its harness, its baseline (same harness).
while read -r row harness baseline; do
  per="$(per_request "$harness" "$row")"
  base="$(per_request "$harness" "$baseline")"
  added=$((per - base))
  ceiling="$(awk -v r="$row" '$1 == r { print $2 }' "$ceilings")"
  verdict=""
  if $check && [ -n "$ceiling" ]; then
    # Within 5%: 100 * added <= 105 * ceiling.
    if [ $((100 * added)) -le $((105 * ceiling)) ]; then verdict=yes; else verdict=NO; failed=1; fi
  fi
  echo "| $row | $per | $baseline | $base | $(printf '%+d' "$added") | ${ceiling:+$(printf '%+d' "$ceiling")} | $verdict |"
done <<'ROWS'
tower_governor_no_headers route_micro bare
memory_no_headers route_micro bare
memory http_load bare_headers
memory_stacked_3 http_load bare_headers
memory_apart_3 http_load bare_headers
deny_flood http_load bare_headers
global_batched http_load bare_headers
fixed_window http_load evalsha_multiplexed
ROWS
if [ "$failed" -ne 0 ]; then
  echo "a row adds more than 5% over its ceiling in $ceilings: a hot path got slower" >&2
  exit 1
fi
