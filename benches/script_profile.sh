#!/usr/bin/env bash
# Where a built-in script's time inside Redis goes, next to its floor's: what
# `ratio to its floor` in benches/script_cost.sh is made of.
#
# Starts a private redis-server on a free loopback port and, for `return 1`,
# the contract's reply, each built-in and each floor of benches/floors/:
#
# 1. Measured, inside Redis: the same load as script_cost.sh (redis-benchmark
#    -P 16 -r 100000 from an empty keyspace, best of RUNS), then
#    INFO commandstats: EVALSHA's µs per call, and the µs and calls of the
#    Redis commands the script ran (their own time, inside call()).
# 2. Counted, outside Redis: Redis' sandbox has no `debug` library, so
#    benches/profile/lua_count.lua runs the script in lua5.1 (the Lua of Redis)
#    against a stand-in `redis` and counts VM instructions and C function calls
#    by part: option checks, command arguments, decision, reply and formatting.
#    Two calls on one key (a new key, then a held one), averaged.
# 3. Unit costs, inside Redis: benches/profile/unit_costs.lua times each
#    operation in Redis' own Lua (an instruction, find, tonumber, fmt, floor, a
#    reply table, one redis.call), best of three, and the alternatives the
#    built-ins do without (tostring, concatenation, a tostring round trip).
#
# Counts times unit costs give each part's µs; `rest` is EVALSHA's time less
# everything named: what every script pays whatever it does (finding the
# script, making KEYS and ARGV, turning the reply into RESP, Lua's garbage
# collector). Two tables follow: each script's µs by part, and each built-in's
# gap to its floor by part.
#
# Environment:
#   N             requests per run                      (default 200000)
#   RUNS          runs per script, the fastest kept     (default 3)
#   LUA           the Lua 5.1 interpreter (default lua5.1; without one the
#                 counted parts are left out: apt-get install lua5.1)
#   OPTS_<name>   ARGV, as in script_cost.sh
#   STEP_TIMEOUT  seconds before any single step is abandoned (default 120)
set -euo pipefail

die() { echo "script_profile: $*" >&2; exit 1; }

for bin in redis-server redis-cli redis-benchmark timeout awk; do
  command -v "$bin" >/dev/null 2>&1 || die "$bin not found in PATH (redis-server, redis-cli and redis-benchmark 7.x are needed)"
done

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
N=${N:-200000}
RUNS=${RUNS:-3}
STEP_TIMEOUT=${STEP_TIMEOUT:-120}
LUA=${LUA:-lua5.1}
# shellcheck source=benches/script_bench.sh
source "$root/benches/script_bench.sh"
for v in N RUNS STEP_TIMEOUT; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer, got '${!v}'"
done
have_lua=
if command -v "$LUA" >/dev/null 2>&1; then have_lua=1; fi

start_private_redis

cli() { timeout "$STEP_TIMEOUT" redis-cli -h 127.0.0.1 -p "$port" "$@"; }

# Unit costs, ns: the fastest of three passes of each.
for _ in 1 2 3; do
  cli EVAL "$(cat "$root/benches/profile/unit_costs.lua")" 0 200000 | paste - -
done | awk '{ if (!($1 in best) || $2 < best[$1]) best[$1] = $2 } END { for (k in best) print k, best[k] }' >"$tmp/units"
unit() { awk -v k="$1" '$1 == k { print $2 }' "$tmp/units"; }
[[ -n $(unit instruction) && -n $(unit redis.call) ]] || die "unit costs not measured: $(cat "$tmp/units")"
# What a redis.call costs besides the command's own time: the unit less TIME's own µs.
time_us=$(cli INFO commandstats | tr -d '\r' | sed -n 's/^cmdstat_time:.*usec_per_call=\([0-9.]*\).*/\1/p')
bridge=$(awk -v c="$(unit redis.call)" -v t="${time_us:-0}" 'BEGIN { printf "%.1f", c - t * 1000 }')

# name|file|opts, in the order printed: each built-in with a floor next to it.
entries=("return_1||" "contract_reply|benches/floors/contract_reply.lua|$OPTS_contract_reply")
for f in "$root"/lua/*.lua; do
  name=$(basename "$f" .lua)
  # No script of its own: it drives the others (see script_cost.sh).
  [[ $name != stack ]] || continue
  ov="OPTS_$name"
  [[ -n ${!ov:-} ]] || die "no opts for $name; set $ov"
  entries+=("$name|lua/$name.lua|${!ov}")
  if [[ -r $root/benches/floors/${name}_floor.lua ]]; then
    entries+=("${name}_floor|benches/floors/${name}_floor.lua|${!ov}")
  fi
done

# One line per script: name evalsha_us cmd_us cmd_calls_per_call commands_by_name
: >"$tmp/measured"
for entry in "${entries[@]}"; do
  IFS='|' read -r name file opts <<<"$entry"
  body="return 1"
  [[ -n $file ]] && body=$(cat "$root/$file")
  sha=$(cli SCRIPT LOAD "$body")
  [[ $sha =~ ^[0-9a-f]{40}$ ]] || die "SCRIPT LOAD failed for $name: $sha"
  # shellcheck disable=SC2086
  reply=$(cli EVALSHA "$sha" 1 "smoke:$name" $opts 2>&1)
  [[ $reply != *ERR* ]] || die "$name with opts '$opts' fails: $reply"
  best=
  for _ in $(seq "$RUNS"); do
    cli FLUSHALL SYNC >/dev/null
    cli CONFIG RESETSTAT >/dev/null
    # shellcheck disable=SC2086
    timeout "$STEP_TIMEOUT" redis-benchmark -h 127.0.0.1 -p "$port" -P 16 -n "$N" -r 100000 -q \
      EVALSHA "$sha" 1 "key:__rand_int__" $opts >/dev/null
    line=$(cli INFO commandstats | tr -d '\r' | awk -F'[:,=]' -v name="$name" '
      /^cmdstat_/ {
        cmd = substr($1, 9); calls = $3; usec = $5
        if (cmd == "evalsha") { ecalls = calls; eusec = usec; next }
        if (cmd ~ /^(config|info|flushall|ping|script|client|hello|command)/) next
        ccalls += calls; cusec += usec
        list = list (list == "" ? "" : ",") toupper(cmd) "=" calls
      }
      END {
        if (!ecalls) exit 1
        n = split(list, parts, ",")
        named = ""
        for (i = 1; i <= n; i++) { split(parts[i], kv, "="); named = named (named == "" ? "" : " ") kv[1] sprintf("×%.2f", kv[2] / ecalls) }
        printf "%s %.3f %.3f %.3f %s\n", name, eusec / ecalls, cusec / ecalls, ccalls / ecalls, (named == "" ? "-" : named)
      }') || die "no EVALSHA counted for $name"
    if [[ -z $best ]] || awk -v a="$(cut -d' ' -f2 <<<"$line")" -v b="$(cut -d' ' -f2 <<<"$best")" 'BEGIN { exit !(a < b) }'; then
      best=$line
    fi
  done
  echo "$best" >>"$tmp/measured"
done

# One line per script: name options_us args_us decision_us reply_us instructions c_calls
: >"$tmp/counted"
for entry in "${entries[@]}"; do
  IFS='|' read -r name file opts <<<"$entry"
  if [[ -z $have_lua || -z $file ]]; then
    echo "$name 0 0 0 0 0 0" >>"$tmp/counted"
    continue
  fi
  # shellcheck disable=SC2086
  (cd "$root" && "$LUA" benches/profile/lua_count.lua "$file" 2 $opts) >"$tmp/count" ||
    die "lua_count.lua failed on $name"
  awk -v name="$name" -v units="$tmp/units" '
    BEGIN { while ((getline l < units) > 0) { split(l, u, " "); cost[u[1]] = u[2] } }
    # ns of one C call by name: what unit_costs.lua timed, else a math call.
    function c(fn) { return (fn in cost) ? cost[fn] : (fn == "match" ? cost["find"] : cost["floor"]) }
    {
      for (i = 2; i <= NF; i++) {
        if ($i ~ /^calls:/) {
          n = split(substr($i, 7), kv, ",")
          for (j = 1; j <= n; j++) { split(kv[j], fc, "="); fns[fc[1]] += fc[2] }
          continue
        }
        split($i, kv, "="); split(kv[2], ic, "/")
        instr[kv[1]] += ic[1]; calls[kv[1]] += ic[2]; total_i += ic[1]; total_c += ic[2]
      }
      rows++
    }
    END {
      # C calls are priced by name over all parts, then shared out by each part’s call count.
      for (fn in fns) { ns += fns[fn] * c(fn) }
      per_call = total_c ? ns / total_c : 0
      split("options commands decision reply", order, " ")
      out = name
      for (k = 1; k <= 4; k++) {
        p = order[k]
        us = (instr[p] * cost["instruction"] + calls[p] * per_call) / rows / 1000
        if (p == "reply" && instr[p] > 0) us += cost["reply"] / 1000
        out = out sprintf(" %.3f", us)
      }
      printf "%s %.0f %.1f\n", out, total_i / rows, total_c / rows
    }' "$tmp/count" >>"$tmp/counted"
done

echo "redis $(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p'), $(nproc 2>/dev/null || echo '?') CPUs," \
  "load average $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?');" \
  "redis-benchmark -P 16 -n $N -r 100000, fastest of $RUNS from an empty keyspace"
echo
echo "Unit costs inside Redis' Lua, ns (fastest of 3):" \
  "$(sort "$tmp/units" | awk '{ printf "%s%s %s", (NR > 1 ? ", " : ""), $1, $2 }');" \
  "a redis.call's bridging, less the command's own time: $bridge"
[[ -n $have_lua ]] || echo "($LUA not found: the counted parts are 0; apt-get install lua5.1)"
echo
echo "| script | EVALSHA µs/call | commands run per call | commands' own µs | redis.call bridging µs | option checks µs | command arguments µs | decision µs | reply and formatting µs | rest µs | Lua instructions | C calls |"
echo "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
join <(sort "$tmp/measured") <(sort "$tmp/counted") >"$tmp/joined"
for entry in "${entries[@]}"; do
  IFS='|' read -r name _ _ <<<"$entry"
  awk -v name="$name" -v shown="${name/return_1/return 1}" -v bridge="$bridge" '
    $1 == name {
      # name evalsha cmd_us cmd_calls named... options args decision reply instr ccalls
      n = NF; ccalls = $n; instr = $(n-1); reply = $(n-2); decision = $(n-3); args = $(n-4); options = $(n-5)
      named = ""; for (i = 5; i <= n - 6; i++) named = named (named == "" ? "" : " ") $i
      bridging = $4 * bridge / 1000
      rest = $2 - $3 - bridging - options - args - decision - reply
      printf "| %s | %.2f | %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %s | %s |\n", shown, $2, named, $3, bridging, options, args, decision, reply, rest, instr, ccalls
    }' "$tmp/joined" >>"$tmp/table"
done
cat "$tmp/table"

echo
echo "Gap to the floor, µs per call (built-in less floor; ratio = floor's EVALSHA µs over the built-in's):"
echo
echo "| built-in | ratio to its floor (EVALSHA µs) | gap µs | commands' own µs | redis.call bridging µs | option checks µs | command arguments µs | decision µs | reply and formatting µs | rest µs |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
awk '
  {
    line = $0; sub(/^[|] /, "", line); sub(/ [|]$/, "", line)
    split(line, f, / [|] /); row[f[1]] = line; names[++n] = f[1]
  }
  END {
    for (i = 1; i <= n; i++) {
      s = names[i]; fl = s "_floor"
      if (!(fl in row)) continue
      split(row[s], a, / [|] /); split(row[fl], b, / [|] /)
      printf "| %s | %.2f | %.2f |", s, b[2] / a[2], a[2] - b[2]
      for (k = 4; k <= 10; k++) printf " %.2f |", a[k] - b[k]
      printf "\n"
    }
  }' "$tmp/table"
