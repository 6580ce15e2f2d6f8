#!/usr/bin/env bash
# Cost of the limiter scripts relative to an empty `return 1` script.
#
# Starts a private redis-server on a free loopback port, so results neither
# depend on nor disturb any shared instance, and prints a markdown table:
# ops/s under pipelined load, the ratio to `return 1`, server CPU per call,
# and memory per key.
#
# After the built-ins come the floors of benches/floors/: the contract's reply
# alone, and for fixed_window, token_bucket, gcra and calendar_quota their Redis commands with
# that reply and no logic. A built-in cannot beat its floor, so the floor's
# ratio to `return 1` is what the script contract and the commands allow, and
# the built-in's ratio to its floor is what its own logic costs.
#
# Every throughput run starts from an empty keyspace: with -r 100000 and the
# default N, about 43% of calls open a new key, the expensive case. Runs go
# round-robin over the scripts and the best of RUNS is kept, so a burst of
# load from elsewhere on the host skews every script alike. Server CPU per
# call (from INFO cpu) is the steadier figure when the host is busy.
#
# Environment:
#   N             requests per throughput run            (default 200000)
#   RUNS          throughput runs per script             (default 3)
#   MEM_KEYS      distinct keys for the memory figure    (default 100000)
#   SCRIPTS       space-separated script files           (default lua/*.lua but
#                 lua/stack.lua)
#   FLOORS        space-separated floor scripts  (default benches/floors/*.lua;
#                 empty for none)
#   OPTS_<name>   ARGV for lua/<name>.lua, e.g. OPTS_fixed_window="10 60"; a
#                 floor <name>_floor.lua takes <name>'s
#   STEP_TIMEOUT  seconds before any single step is abandoned (default 120)
set -euo pipefail

die() { echo "script_cost: $*" >&2; exit 1; }

for bin in redis-server redis-cli redis-benchmark timeout awk; do
  command -v "$bin" >/dev/null 2>&1 || die "$bin not found in PATH (redis-server, redis-cli and redis-benchmark 7.x are needed)"
done

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
N=${N:-200000}
RUNS=${RUNS:-3}
MEM_KEYS=${MEM_KEYS:-100000}
STEP_TIMEOUT=${STEP_TIMEOUT:-120}
# lua/stack.lua is no script of its own (it drives the others; its cost per stacked limit is
# the `stacked` curve of `cargo bench -p plug_limit_bench --bench cost_curves`).
SCRIPTS=${SCRIPTS:-$(cd "$root" && ls lua/*.lua | grep -v '^lua/stack\.lua$' | tr '\n' ' ')}
FLOORS=${FLOORS-$(cd "$root" && echo benches/floors/*.lua)}
# shellcheck source=benches/script_bench.sh
source "$root/benches/script_bench.sh"
for v in N RUNS MEM_KEYS STEP_TIMEOUT; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer, got '${!v}'"
done

start_private_redis

cli() { timeout "$STEP_TIMEOUT" redis-cli -h 127.0.0.1 -p "$port" "$@"; }
info() { cli INFO "$1" | tr -d '\r'; }
cpu_seconds() { info cpu | awk -F: '/^used_cpu_(user|sys):/ { s += $2 } END { printf "%.6f", s }'; }

names=("return 1")
bodies=("return 1")
opts=("")
for f in $SCRIPTS $FLOORS; do
  [[ $f = /* ]] || f="$root/$f"
  [[ -r $f ]] || die "cannot read $f"
  name=$(basename "$f" .lua)
  ov="OPTS_${name%_floor}"
  [[ -n ${!ov:-} ]] || die "no opts for $name; set $ov"
  names+=("$name")
  bodies+=("$(cat "$f")")
  opts+=("${!ov}")
done

declare -a shas ops cpu bytes keycount
for i in "${!names[@]}"; do
  shas[i]=$(cli SCRIPT LOAD "${bodies[i]}")
  [[ ${shas[i]} =~ ^[0-9a-f]{40}$ ]] || die "SCRIPT LOAD failed for ${names[i]}: ${shas[i]}"
  # redis-benchmark counts error replies as successes, so fail on one up front.
  # shellcheck disable=SC2086
  reply=$(cli EVALSHA "${shas[i]}" 1 "smoke:${names[i]}" ${opts[i]} 2>&1)
  [[ $reply != *ERR* ]] || die "${names[i]} with opts '${opts[i]}' fails: $reply"
  ops[i]=0
  cpu[i]=
done

for _ in $(seq "$RUNS"); do
  for i in "${!names[@]}"; do
    cli FLUSHALL SYNC >/dev/null
    c0=$(cpu_seconds)
    # shellcheck disable=SC2086
    rps=$(timeout "$STEP_TIMEOUT" redis-benchmark -h 127.0.0.1 -p "$port" -P 16 -n "$N" -r 100000 --csv \
      EVALSHA "${shas[i]}" 1 "key:__rand_int__" ${opts[i]} |
      awk -F'","' 'NR > 1 { printf "%.0f\n", $2 }' | tail -n 1)
    c1=$(cpu_seconds)
    [[ $rps =~ ^[0-9.]+$ ]] || die "no ops/s parsed for ${names[i]}"
    ops[i]=$(awk -v a="${ops[i]}" -v b="$rps" 'BEGIN { print (b > a) ? b : a }')
    cpu[i]=$(awk -v a="${cpu[i]}" -v c0="$c0" -v c1="$c1" -v n="$N" \
      'BEGIN { u = (c1 - c0) * 1e6 / n; print (a == "" || u < a) ? u : a }')
  done
done

for i in "${!names[@]}"; do
  # One call per distinct key, fed as RESP through --pipe: -r would repeat keys.
  cli FLUSHALL SYNC >/dev/null
  before=$(info memory | sed -n 's/^used_memory://p')
  awk -v n="$MEM_KEYS" -v sha="${shas[i]}" -v o="${opts[i]}" 'BEGIN {
    k = split(o, a, " ")
    for (j = 0; j < n; j++) {
      key = "mem:" j
      printf "*%d\r\n$7\r\nEVALSHA\r\n$%d\r\n%s\r\n$1\r\n1\r\n$%d\r\n%s\r\n", 4 + k, length(sha), sha, length(key), key
      for (m = 1; m <= k; m++) printf "$%d\r\n%s\r\n", length(a[m]), a[m]
    }
  }' | cli --pipe >"$tmp/pipe.out" 2>&1 || die "--pipe failed for ${names[i]}: $(tail -n 3 "$tmp/pipe.out")"
  grep -q 'errors: 0,' "$tmp/pipe.out" || die "${names[i]} replied with errors: $(tail -n 3 "$tmp/pipe.out")"
  after=$(info memory | sed -n 's/^used_memory://p')
  keyspace=$(info keyspace | sed -n 's/^db0://p')
  keys=$(sed -n 's/.*keys=\([0-9]*\).*/\1/p' <<<"$keyspace")
  expires=$(sed -n 's/.*expires=\([0-9]*\).*/\1/p' <<<"$keyspace")
  [[ ${keys:-0} == "${expires:-0}" ]] || die "${names[i]} left keys without a TTL ($keyspace)"
  bytes[i]=$(awk -v a="$before" -v b="$after" -v n="$MEM_KEYS" 'BEGIN { printf "%.1f", (b - a) / n }')
  keycount[i]=${keys:-0}
done

echo "redis $(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p'), $(nproc 2>/dev/null || echo '?') CPUs;" \
  "redis-benchmark -P 16 -n $N -r 100000, best of $RUNS from an empty keyspace; memory over $MEM_KEYS distinct keys"
echo
echo "| script | opts | ops/s | ratio to return 1 | ratio to its floor | server CPU µs/call | CPU ratio | bytes/key | keys (all with TTL) |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|"
for i in "${!names[@]}"; do
  floor=-
  for j in "${!names[@]}"; do
    if [[ ${names[j]} == "${names[i]}_floor" ]]; then
      floor=$(awk -v a="${ops[i]}" -v b="${ops[j]}" 'BEGIN { printf "%.2f", a / b }')
    fi
  done
  printf '| %s | %s | %.0f | %s | %s | %.2f | %s | %s | %s |\n' "${names[i]}" "${opts[i]:--}" "${ops[i]}" \
    "$(awk -v a="${ops[i]}" -v b="${ops[0]}" 'BEGIN { printf "%.2f", a / b }')" "$floor" "${cpu[i]}" \
    "$(awk -v a="${cpu[i]}" -v b="${cpu[0]}" 'BEGIN { printf "%.2f", b / a }')" "${bytes[i]}" "${keycount[i]}"
done
