//! HTTP load harness: the throughput and CPU cost of rate-limited Axum routes, each against a
//! bare handler, a hand-written Redis check of the same script and a peer library, all measured
//! in the same run on the same machine.
//!
//! ```text
//! cargo bench -p plug_limit_bench --bench http_load
//! ```
//!
//! With `--count <variant> <requests>` it serves one variant's requests in process instead,
//! for `route_instructions.sh` to count their instructions (see `count.rs`).
//!
//! Variants, each served alone on `GET /`, in the order a round runs them (see
//! `benches/README.md` for how to read the output):
//!
//! | variant | handler | counted answer |
//! |---|---|---|
//! | `bare` | `"ok"` | `2xx` |
//! | `bare_headers` | `"ok"` with `x-ratelimit-limit`, `-reset` and `-remaining` from a per-server counter | `2xx` + headers |
//! | `memory` | `RateLimited<FixedWindow<1_000_000_000, 3600>>` on the memory backend, keyed by `x-client` | `2xx` + headers |
//! | `memory_stacked_3` | `stacked_3`'s three limits on the memory backend | `2xx` + headers |
//! | `memory_apart_3` | the same three limits checked one after another, each by its own `RateLimited` (the first one's headers sent) | `2xx` + headers |
//! | `deny_flood` | `RateLimited<FixedWindow<1, 3600>>` on Redis with `deny_cache(true)`, one client already denied | `429` + headers |
//! | `tower_governor` | `"ok"` behind the `tower_governor` layer (in-process GCRA), keyed by `x-client` | `2xx` + headers |
//! | `tower_governor_no_headers` | `tower_governor` without its headers (no `use_headers`) | `2xx` |
//! | `memory_no_headers` | `memory` whose handler drops its `RateLimited`: checked, no header sent | `2xx` |
//! | `evalsha_multiplexed` | one `EVALSHA` of `lua/fixed_window.lua` on one shared `MultiplexedConnection` | `2xx` + headers |
//! | `fixed_window` | `RateLimited<FixedWindow<1_000_000_000, 3600>>` on Redis, keyed by `x-client` | `2xx` + headers |
//! | `global_fixed_window` | `fixed_window` with one key for every request (`key::global()`): a hot key, each request a Redis call | `2xx` + headers |
//! | `global_batched` | `global_fixed_window` with `local_batches(LocalBatches::new(1_000))`: the hot key's units reserved in batches | `2xx` + headers |
//! | `evalsha_token_bucket` | the same as `evalsha_multiplexed` with `lua/token_bucket.lua` | `2xx` + headers |
//! | `token_bucket` | `RateLimited<TokenBucket<1_000_000_000, 3600, 1_000_000_000>>`, likewise | `2xx` + headers |
//! | `evalsha_gcra` | the same as `evalsha_multiplexed` with `lua/gcra.lua` | `2xx` + headers |
//! | `gcra` | `RateLimited<Gcra<1_000_000_000, 3600, 1_000_000_000>>`, likewise | `2xx` + headers |
//! | `evalsha_pool_get` | the same as `evalsha_multiplexed` after `pool.get().await` on every request | `2xx` + headers |
//!
//! The limits of the allowing variants are never reached, so every request is a full allow
//! decision. The hand-written `evalsha_*` handlers frame the library: the three on a shared
//! connection are the irreducible cost of one decision on Redis with the script and options
//! the library would use, one per script, so each Redis limiter is measured against its own
//! script; `evalsha_pool_get` is what a naive integration costs. `bare_headers` adds
//! to `bare` what a limiter's headers cost, whatever decides them: the floor of any limiter
//! that sends them. `tower_governor` is the usual in-process choice, and `memory` is the
//! library's answer to it; `tower_governor` sends two headers and `memory` three, so the pair
//! `tower_governor_no_headers` and `memory_no_headers` compares the two with none on either
//! side. `deny_flood` is one client hammering a route it is already denied
//! on: with the deny cache, every answer is the limiter's `429` made locally, and the Redis
//! commands it costs are counted from `INFO commandstats` (they should be none).
//!
//! Each server runs on its own thread with a current-thread Tokio runtime, so it uses at most
//! one core whatever the machine. The load generator runs on the main thread, also on a
//! current-thread runtime, and Redis is a private `redis-server` on a free loopback port. A
//! request counts when it is sent and answered inside the measured window with the variant's
//! expected status and, for every variant but `bare` and the pair without headers, an
//! `x-ratelimit-remaining` header, so a check that failed open cannot pass for a fast one (the
//! library's variants fail closed, with a `503` that is not counted, so `memory_no_headers`
//! cannot either). Latencies are those of the counted
//! requests.
//!
//! Output: the main table (throughput, latency, server CPU per request, ratio to bare, Redis
//! commands per request), `memory`, `deny_flood` and `tower_governor` against `bare_headers`,
//! each Redis limiter against the hand-written check of its own script and against
//! `evalsha_multiplexed`, the targets with whether this run met them, then the CPU each party
//! used during the window (server thread, load generator thread, Redis, and everything else on
//! the machine). Absolute figures are each variant's best pass; ratios pair the passes of one
//! round and take the median over rounds. Throughput moves with whatever else runs on the
//! machine; CPU per request much less. On a busy machine, raise `HTTP_LOAD_ROUNDS`.
//!
//! Environment (all optional):
//!
//! | variable | default | meaning |
//! |---|---|---|
//! | `HTTP_LOAD_SECS` | `5` | measured seconds per variant |
//! | `HTTP_LOAD_WARMUP_SECS` | `1` | unmeasured seconds before them |
//! | `HTTP_LOAD_CONNECTIONS` | `64` | concurrent keep-alive connections |
//! | `HTTP_LOAD_CLIENTS` | `10000` | distinct `x-client` values, spread round-robin |
//! | `HTTP_LOAD_ROUNDS` | `1` | passes over the variants; each keeps its best pass, ratios their median |
//! | `HTTP_LOAD_PIN` | unset | `1`: the server thread alone on CPU 0, the load generator and Redis on CPU 1 (`taskset`), so the server's CPU per request is its own work, not caches and wake-ups shared with a busier Redis |
//! | `HTTP_LOAD_RATE` | none: back to back | requests a second offered over all connections: below every variant's capacity, each serves the same rate, so CPU per request compares work at one load, not batching at different ones |
//! | `HTTP_LOAD_VARIANTS` | all | comma-separated subset; `bare` is always added |
//! | `REDIS_SERVER` | `redis-server` | the Redis binary |

mod client;
#[path = "../client_header.rs"]
mod client_header;
mod count;
mod cpu;
mod evalsha;
mod load;
mod machine;
mod measurement;
mod redis_stats;
mod report;
mod results;
mod routes;
mod server;
mod settings;
mod variants;

use std::error::Error;
use std::sync::Arc;

use deadpool_redis::redis;
use plug_limit_tests::RedisServer;

use crate::client_header::CLIENT_HEADER;
use crate::load::Run;
use crate::machine::{Machine, OTHERS_CPU, load_average, pin, thread_id};
use crate::measurement::Measurement;
use crate::redis_stats::redis_version;
use crate::report::report;
use crate::results::{Measured, Pass, Results};
use crate::server::Server;
use crate::settings::Settings;
use crate::variants::Variant;

type BoxError = Box<dyn Error + Send + Sync>;

const LIMIT: u32 = 1_000_000_000;
const WINDOW: u32 = 3600;
/// The one client of `deny_flood`: denied from its second request on.
const FLOOD_CLIENT: &str = "flood";

fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().collect();
    if let [_, flag, variant, requests] = args.as_slice()
        && flag == "--count"
    {
        return count::count(variant, requests.parse()?);
    }
    let settings = Settings::from_env()?;
    let load_at_start = load_average();
    // Read before any pinning narrows this thread's CPUs.
    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    let redis_server = RedisServer::start();
    assert_ne!(
        redis_server.port(),
        6379,
        "the shared Redis on 6379 is off limits"
    );
    let client = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut redis_conn = client.block_on(redis_server.connection());
    if settings.pin {
        pin_others(&client, &mut redis_conn)?;
    }
    let spread = requests((0..settings.clients).map(|id| format!("client-{id}")));
    let flood = requests(std::iter::once(FLOOD_CLIENT.to_owned()));

    eprintln!(
        "http_load: {} variant(s) x {} round(s), {:?} warm-up + {:?} measured each",
        settings.variants.len(),
        settings.rounds,
        settings.warmup,
        settings.measure,
    );
    let mut best: Vec<Option<Measurement>> = settings.variants.iter().map(|_| None).collect();
    let mut passes: Vec<Vec<Pass>> = settings.variants.iter().map(|_| Vec::new()).collect();
    for round in 1..=settings.rounds {
        let variants = best.iter_mut().zip(&mut passes).zip(&settings.variants);
        for ((slot, history), &variant) in variants {
            client.block_on(async {
                redis::cmd("FLUSHALL")
                    .query_async::<()>(&mut redis_conn)
                    .await
            })?;
            let server = Server::start(variant, redis_server.url(), settings.pin)?;
            let requests = if variant == Variant::DenyFlood {
                &flood
            } else {
                &spread
            };
            let run = Run {
                variant,
                addr: server.addr,
                requests: Arc::clone(requests),
                connections: settings.connections,
                rate: settings.rate,
                warmup: settings.warmup,
                measure: settings.measure,
            };
            let measured = client.block_on(run.execute(&server.cpu, redis_conn.clone()));
            server.stop();
            let measured = measured?;
            eprintln!(
                "  round {round} {:<20} {:>9.0} req/s  server {:>5} µs/req  redis cmds/req {}",
                variant.name(),
                measured.rps(),
                measured.micros(measured.cpu.server),
                measured.redis_commands_per_request(),
            );
            history.push(Pass {
                rps: measured.rps(),
                server: measured.per_request(measured.cpu.server),
            });
            if slot.as_ref().is_none_or(|kept| measured.rps() > kept.rps()) {
                *slot = Some(measured);
            }
        }
    }
    let results = Results(
        best.into_iter()
            .zip(passes)
            .filter_map(|(best, passes)| {
                Some(Measured {
                    best: best?,
                    passes,
                })
            })
            .collect(),
    );
    let redis_version = client.block_on(redis_version(&mut redis_conn));
    let machine = Machine {
        cpus,
        redis_version,
        load_at_start,
        load_at_end: load_average(),
    };
    println!("{}", report(&settings, &results, &machine));
    Ok(())
}

/// One request per client id, serialized once so the load generator only copies bytes.
fn requests(clients: impl Iterator<Item = String>) -> Arc<[Box<[u8]>]> {
    clients
        .map(|client| {
            format!("GET / HTTP/1.1\r\nhost: 127.0.0.1\r\n{CLIENT_HEADER}: {client}\r\n\r\n")
                .into_bytes()
                .into_boxed_slice()
        })
        .collect()
}

/// Pins Redis (every thread of it) and the calling thread, the load generator's, to
/// [`OTHERS_CPU`], leaving the server's CPU to the server.
fn pin_others(
    client: &tokio::runtime::Runtime,
    redis_conn: &mut redis::aio::MultiplexedConnection,
) -> Result<(), BoxError> {
    if std::thread::available_parallelism().map_or(1, usize::from) < 2 {
        return Err("HTTP_LOAD_PIN needs two CPUs".into());
    }
    let info: String = client.block_on(redis::cmd("INFO").arg("server").query_async(redis_conn))?;
    let redis_pid = info
        .lines()
        .find_map(|line| line.trim().strip_prefix("process_id:")?.parse().ok())
        .ok_or("INFO server: no process_id")?;
    pin(redis_pid, OTHERS_CPU, true)?;
    pin(thread_id()?, OTHERS_CPU, false)?;
    Ok(())
}
