#!/usr/bin/env bash
# Instructions per request of route_micro's three functions, counted by callgrind: repeatable
# on any machine, whatever else it runs, where route_micro's nanoseconds move with the load.
#
# Each function serves N and then 2N requests (after the same warm-up: every client counted
# once); the difference over N is what one request costs, with the set-up cancelled out. Run
# from the workspace root:
#
#   bash benches/route_instructions.sh            # N=20000
#   N=50000 bash benches/route_instructions.sh
#
# Prints a markdown table: instructions per request, and what each limiter adds to `bare`.
set -euo pipefail
cd "$(dirname "$0")/.."
N="${N:-20000}"
command -v valgrind >/dev/null || { echo "valgrind is needed (apt-get install valgrind)" >&2; exit 1; }
bin="$(cargo bench -p plug_limit_bench --bench route_micro --no-run --message-format=json 2>/dev/null \
  | python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "route_micro" and m.get("executable"):
        print(m["executable"])')"
[ -x "$bin" ] || { echo "route_micro did not build" >&2; exit 1; }
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
total() { # function requests
  valgrind --tool=callgrind --callgrind-out-file="$out/cg" "$bin" --count "$1" "$2" >/dev/null 2>"$out/log"
  sed -n 's/^summary: //p' "$out/cg"
}
echo "| function | instructions/request | over bare |"
echo "|---|---:|---:|"
bare=""
for function in bare tower_governor_no_headers memory_no_headers; do
  one="$(total "$function" "$N")"
  two="$(total "$function" $((2 * N)))"
  per=$(( (two - one) / N ))
  [ -z "$bare" ] && bare=$per
  echo "| $function | $per | $(printf '%+d' $((per - bare))) |"
done
