# Shared by benches/script_cost.sh and benches/script_profile.sh (sourced, not run): the
# scripts' default options, and a private redis-server on a free loopback port.
#
# The sourcing script defines `die` first.

# The default ARGV of each lua/<name>.lua, unless OPTS_<name> is set; a floor
# <name>_floor.lua takes <name>'s.
OPTS_fixed_window=${OPTS_fixed_window:-10 60}
OPTS_token_bucket=${OPTS_token_bucket:-20 600 5}
OPTS_sliding_window=${OPTS_sliding_window:-10 60}
OPTS_sliding_log=${OPTS_sliding_log:-10 60}
OPTS_leaky_bucket=${OPTS_leaky_bucket:-10 60}
OPTS_gcra=${OPTS_gcra:-20 600 5}
OPTS_multi_window=${OPTS_multi_window:-10/60 100/3600}
OPTS_calendar_quota=${OPTS_calendar_quota:-10000 month -300}
# cost 1, a fixed `now` (an empty ARGV would not survive word splitting) and one lease id:
# each key holds one lease, renewed by every call after its first.
OPTS_concurrency=${OPTS_concurrency:-100 60 1 3602725194000 bench}
OPTS_contract_reply=${OPTS_contract_reply:-10 60}

# Starts redis-server on a free loopback port: sets `port`, and `tmp`, a directory that holds
# its files and the caller's, both removed on exit with the server. Probes random high ports;
# a port is ours only once *our* process answers on it, which also settles a race with anyone
# else binding it. 6379 is never tried.
start_private_redis() {
  tmp=$(mktemp -d)
  pid=
  trap stop_private_redis EXIT
  trap 'exit 130' INT TERM
  port=
  local p
  for _ in $(seq 20); do
    p=$((20000 + RANDOM % 40000))
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && continue
    redis-server --port "$p" --bind 127.0.0.1 --save "" --appendonly no \
      --dir "$tmp" --logfile "$tmp/redis.log" &
    pid=$!
    for _ in $(seq 50); do
      kill -0 "$pid" 2>/dev/null || break
      if [[ $(redis-cli -h 127.0.0.1 -p "$p" INFO server 2>/dev/null | tr -d '\r' | sed -n 's/^process_id://p') == "$pid" ]]; then
        port=$p
        return 0
      fi
      sleep 0.1
    done
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    pid=
  done
  die "could not start redis-server on a free loopback port: $(tail -n 3 "$tmp/redis.log" 2>/dev/null)"
}

stop_private_redis() {
  if [[ -n $pid ]]; then
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
