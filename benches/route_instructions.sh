#!/usr/bin/env bash
# Instructions per request of route_micro's functions, counted by callgrind: repeatable on any
# machine, whatever else it runs, where route_micro's nanoseconds move with the load.
#
# Each function serves N requests after a warm-up (every client counted once, `governor`'s
# clock calibrated); callgrind counts only the function that serves them (`measured`), so
# what happens once stays out. Building each request is counted alike for every function. The
# counts repeat to within a few instructions a request for one toolchain and lockfile (the
# maps' hash keys are drawn at random per run). Run from the workspace root:
#
#   bash benches/route_instructions.sh            # N=20000
#   N=50000 bash benches/route_instructions.sh
#   N=2000 bash benches/route_instructions.sh --check
#
# Prints a markdown table: instructions per request, and what each limiter adds to `bare`.
# With `--check` (what CI runs), it also reads each row's ceiling from
# benches/route_instructions.ceilings and fails when a row adds more than 5% over its ceiling:
# instruction counts, not times, so a loaded machine cannot fail it and a slower hot path
# cannot pass it.
set -euo pipefail
cd "$(dirname "$0")/.."
N="${N:-20000}"
check=false
[ "${1:-}" = "--check" ] && check=true
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
ceilings=benches/route_instructions.ceilings
if $check; then
  echo "| function | instructions/request | over bare | ceiling | within 5% |"
  echo "|---|---:|---:|---:|---|"
else
  echo "| function | instructions/request | over bare |"
  echo "|---|---:|---:|"
fi
bare=""
failed=0
for function in bare tower_governor_no_headers memory_no_headers; do
  valgrind --tool=callgrind --collect-atstart=no --toggle-collect='route_micro::measured*' \
    --callgrind-out-file="$out/cg" "$bin" --count "$function" "$N" >/dev/null 2>"$out/log" \
    || { cat "$out/log" >&2; exit 1; }
  total="$(sed -n 's/^summary: //p' "$out/cg")"
  [ "${total:-0}" -gt 0 ] || { echo "callgrind counted nothing in route_micro::measured" >&2; exit 1; }
  per=$((total / N))
  [ -z "$bare" ] && bare=$per
  over=$((per - bare))
  if ! $check; then
    echo "| $function | $per | $(printf '%+d' "$over") |"
    continue
  fi
  ceiling="$(awk -v f="$function" '$1 == f { print $2 }' "$ceilings")"
  if [ -z "$ceiling" ]; then
    echo "| $function | $per | $(printf '%+d' "$over") | none | |"
    continue
  fi
  # Within 5%: 100 * over <= 105 * ceiling.
  if [ $((100 * over)) -le $((105 * ceiling)) ]; then verdict=yes; else verdict=NO; failed=1; fi
  echo "| $function | $per | $(printf '%+d' "$over") | +$ceiling | $verdict |"
done
if [ "$failed" -ne 0 ]; then
  echo "a row adds more than 5% over its ceiling in $ceilings: a hot path got slower" >&2
  exit 1
fi
