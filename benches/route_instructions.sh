#!/usr/bin/env bash
# Instructions per request of route_micro's three functions, counted by callgrind: repeatable
# on any machine, whatever else it runs, where route_micro's nanoseconds move with the load.
#
# Each function serves N requests after a warm-up (every client counted once, `governor`'s
# clock calibrated); callgrind counts only the function that serves them (`measured`), so
# what happens once stays out. Building each request is counted alike for the three. The
# counts repeat to within a few instructions a request for one toolchain and lockfile (the
# maps' hash keys are drawn at random per run). Run from the workspace root:
#
#   bash benches/route_instructions.sh            # N=20000
#   N=50000 bash benches/route_instructions.sh
#
# Prints a markdown table: instructions per request, and what each limiter adds to `bare`.
set -euo pipefail
cd "$(dirname "$0")/.."
N="${N:-20000}"
command -v valgrind >/dev/null || { echo "valgrind is needed (apt-get install valgrind)" >&2; exit 1; }
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
bin="$(cargo bench -p plug_limit_bench --bench route_micro --no-run --message-format=json 2>"$out/build.log" \
  | python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "route_micro" and m.get("executable"):
        print(m["executable"])')" || true
[ -x "$bin" ] || { cat "$out/build.log" >&2; echo "route_micro did not build" >&2; exit 1; }
echo "| function | instructions/request | over bare |"
echo "|---|---:|---:|"
bare=""
for function in bare tower_governor_no_headers memory_no_headers; do
  valgrind --tool=callgrind --collect-atstart=no --toggle-collect='route_micro::measured*' \
    --callgrind-out-file="$out/cg" "$bin" --count "$function" "$N" >/dev/null 2>"$out/log" \
    || { cat "$out/log" >&2; exit 1; }
  total="$(sed -n 's/^summary: //p' "$out/cg")"
  [ "${total:-0}" -gt 0 ] || { echo "callgrind counted nothing in route_micro::measured" >&2; exit 1; }
  per=$((total / N))
  [ -z "$bare" ] && bare=$per
  echo "| $function | $per | $(printf '%+d' $((per - bare))) |"
done
