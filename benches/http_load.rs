//! HTTP load harness: the throughput and CPU cost of rate-limited Axum routes, each against a
//! bare handler, a hand-written Redis check of the same script and a peer library, all measured
//! in the same run on the same machine.
//!
//! ```text
//! cargo bench --bench http_load
//! ```
//!
//! Variants, each served alone on `GET /`, in the order a round runs them (see
//! `benches/README.md` for how to read the output):
//!
//! | variant | handler | counted answer |
//! |---|---|---|
//! | `bare` | `"ok"` | `2xx` |
//! | `bare_headers` | `"ok"` with `x-ratelimit-limit`, `-reset` and `-remaining` from a per-server counter | `2xx` + headers |
//! | `memory` | `RateLimited<FixedWindow<1_000_000_000, 3600>>` on the memory backend, keyed by `x-client` | `2xx` + headers |
//! | `deny_flood` | `RateLimited<FixedWindow<1, 3600>>` on Redis with `deny_cache(true)`, one client already denied | `429` + headers |
//! | `tower_governor` | `"ok"` behind the `tower_governor` layer (in-process GCRA), keyed by `x-client` | `2xx` + headers |
//! | `evalsha_multiplexed` | one `EVALSHA` of `lua/fixed_window.lua` on one shared `MultiplexedConnection` | `2xx` + headers |
//! | `fixed_window` | `RateLimited<FixedWindow<1_000_000_000, 3600>>` on Redis, keyed by `x-client` | `2xx` + headers |
//! | `evalsha_token_bucket` | the same as `evalsha_multiplexed` with `lua/token_bucket.lua` | `2xx` + headers |
//! | `token_bucket` | `RateLimited<TokenBucket<1_000_000_000, 3600, 1_000_000_000>>`, likewise | `2xx` + headers |
//! | `evalsha_gcra` | the same as `evalsha_multiplexed` with `lua/gcra.lua` | `2xx` + headers |
//! | `gcra` | `RateLimited<Gcra<1_000_000_000, 3600, 1_000_000_000>>`, likewise | `2xx` + headers |
//! | `evalsha_pool_get` | the same as `evalsha_multiplexed` after `pool.get().await` on every request | `2xx` + headers |
//!
//! The limits of the allowing variants are never reached, so every request is a full allow
//! decision. The hand-written `evalsha_*` handlers frame the library: the three on a shared
//! connection are the irreducible cost of one decision on Redis with the key, script and
//! options the library would use, one per script, so each Redis limiter is measured against
//! its own script; `evalsha_pool_get` is what a naive integration costs. `bare_headers` adds
//! to `bare` what a limiter's headers cost, whatever decides them: the floor of any limiter
//! that sends them. `tower_governor` is the usual in-process choice, and `memory` is the
//! library's answer to it. `deny_flood` is one client hammering a route it is already denied
//! on: with the deny cache, every answer is the limiter's `429` made locally, and the Redis
//! commands it costs are counted from `INFO commandstats` (they should be none).
//!
//! Each server runs on its own thread with a current-thread Tokio runtime, so it uses at most
//! one core whatever the machine. The load generator runs on the main thread, also on a
//! current-thread runtime, and Redis is a private `redis-server` on a free loopback port. A
//! request counts when it is sent and answered inside the measured window with the variant's
//! expected status and, for every variant but `bare`, an `x-ratelimit-remaining` header, so a
//! check that failed open cannot pass for a fast one. Latencies are those of the counted
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
//! | `HTTP_LOAD_VARIANTS` | all | comma-separated subset; `bare` is always added |
//! | `REDIS_SERVER` | `redis-server` | the Redis binary |

use std::error::Error;
use std::fmt::Write as _;
use std::future::IntoFuture;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::thread::JoinHandle;
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::serve::ListenerExt;
use deadpool_redis::redis::aio::{ConnectionLike, MultiplexedConnection};
use deadpool_redis::redis::{self, Script};
use deadpool_redis::{Connection, Pool};
use http::{HeaderName, HeaderValue, StatusCode};
use plug_limit::{FailurePolicy, FixedWindow, Gcra, PlugLimit, RateLimited, TokenBucket};
use plug_limit_tests::RedisServer;
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;
use tower_governor::GovernorLayer;
use tower_governor::governor::GovernorConfigBuilder;

type BoxError = Box<dyn Error + Send + Sync>;

const CLIENT_HEADER: &str = "x-client";
const LIMIT: u32 = 1_000_000_000;
const WINDOW: u32 = 3600;
/// How long a request may outlive the measured window before its connection is abandoned.
const GRACE: Duration = Duration::from_secs(2);
/// A response head larger than this is a broken server, not a slow one.
const MAX_HEAD: usize = 64 * 1024;
/// The one client of `deny_flood`: denied from its second request on.
const FLOOD_CLIENT: &str = "flood";

type FixedWindowLimited = RateLimited<FixedWindow<LIMIT, WINDOW>>;
type TokenBucketLimited = RateLimited<TokenBucket<LIMIT, WINDOW, LIMIT>>;
type GcraLimited = RateLimited<Gcra<LIMIT, WINDOW, LIMIT>>;
/// One request an hour: after the first, the window's remaining hour is spent denied.
type FloodLimited = RateLimited<FixedWindow<1, WINDOW>>;

/// A built-in script called by hand, with what the library sends for the same limiter: one
/// per script a Redis limiter variant runs, so each is measured against its own script.
#[derive(Debug)]
struct Check {
    /// The limiter's name, the second part of its keys.
    limiter: &'static str,
    script: Script,
    /// `ARGV`: the limiter's options, as its `Limit::OPTS` lists them. Cost 1 and Redis' own
    /// clock are the scripts' defaults, so the library sends nothing more.
    opts: &'static [u32],
}

static FIXED_WINDOW_CHECK: LazyLock<Check> = LazyLock::new(|| Check {
    limiter: "fixed_window",
    script: Script::new(include_str!("../lua/fixed_window.lua")),
    opts: &[LIMIT, WINDOW],
});

static TOKEN_BUCKET_CHECK: LazyLock<Check> = LazyLock::new(|| Check {
    limiter: "token_bucket",
    script: Script::new(include_str!("../lua/token_bucket.lua")),
    opts: &[LIMIT, WINDOW, LIMIT],
});

static GCRA_CHECK: LazyLock<Check> = LazyLock::new(|| Check {
    limiter: "gcra",
    script: Script::new(include_str!("../lua/gcra.lua")),
    opts: &[LIMIT, WINDOW, LIMIT],
});

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    Bare,
    BareHeaders,
    FixedWindow,
    TokenBucket,
    Gcra,
    EvalshaMultiplexed,
    EvalshaTokenBucket,
    EvalshaGcra,
    EvalshaPoolGet,
    TowerGovernor,
    Memory,
    DenyFlood,
}

impl Variant {
    /// In the order of a round: each variant runs next to what it is compared with, so a
    /// machine whose speed drifts over a round skews the comparisons least. The in-process
    /// variants follow `bare` and `bare_headers`; each Redis limiter follows the hand-written
    /// check of its own script.
    const ALL: [Self; 12] = [
        Self::Bare,
        Self::BareHeaders,
        Self::Memory,
        Self::DenyFlood,
        Self::TowerGovernor,
        Self::EvalshaMultiplexed,
        Self::FixedWindow,
        Self::EvalshaTokenBucket,
        Self::TokenBucket,
        Self::EvalshaGcra,
        Self::Gcra,
        Self::EvalshaPoolGet,
    ];

    fn name(self) -> &'static str {
        match self {
            Self::Bare => "bare",
            Self::BareHeaders => "bare_headers",
            Self::FixedWindow => "fixed_window",
            Self::TokenBucket => "token_bucket",
            Self::Gcra => "gcra",
            Self::EvalshaMultiplexed => "evalsha_multiplexed",
            Self::EvalshaTokenBucket => "evalsha_token_bucket",
            Self::EvalshaGcra => "evalsha_gcra",
            Self::EvalshaPoolGet => "evalsha_pool_get",
            Self::TowerGovernor => "tower_governor",
            Self::Memory => "memory",
            Self::DenyFlood => "deny_flood",
        }
    }

    /// The answers that count: the flood's local `429`s, every other variant's `2xx`.
    fn expected(self) -> &'static str {
        if self == Self::DenyFlood {
            "429"
        } else {
            "2xx"
        }
    }

    fn counts(self, status: u16) -> bool {
        if self == Self::DenyFlood {
            status == 429
        } else {
            (200..300).contains(&status)
        }
    }

    fn sends_rate_headers(self) -> bool {
        self != Self::Bare
    }

    /// For the library deciding on Redis, the hand-written check of the same script: what
    /// frames its own overhead. `None` for every other variant.
    fn handwritten(self) -> Option<Self> {
        match self {
            Self::FixedWindow => Some(Self::EvalshaMultiplexed),
            Self::TokenBucket => Some(Self::EvalshaTokenBucket),
            Self::Gcra => Some(Self::EvalshaGcra),
            _ => None,
        }
    }
}

#[derive(Debug)]
struct Settings {
    measure: Duration,
    warmup: Duration,
    connections: usize,
    clients: usize,
    rounds: usize,
    variants: Vec<Variant>,
}

impl Settings {
    fn from_env() -> Result<Self, BoxError> {
        let secs = |name: &str, default: f64| -> Result<Duration, BoxError> {
            let secs: f64 = env_or(name, default)?;
            if !(0.1..=600.0).contains(&secs) {
                return Err(
                    format!("{name} must be between 0.1 and 600 seconds, got {secs}").into(),
                );
            }
            Ok(Duration::from_secs_f64(secs))
        };
        let count = |name: &str, default: usize, max: usize| -> Result<usize, BoxError> {
            let n: usize = env_or(name, default)?;
            if !(1..=max).contains(&n) {
                return Err(format!("{name} must be between 1 and {max}, got {n}").into());
            }
            Ok(n)
        };
        let variants = match std::env::var("HTTP_LOAD_VARIANTS") {
            Ok(list) => {
                let mut variants = vec![Variant::Bare];
                for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
                    let variant = Variant::ALL
                        .into_iter()
                        .find(|v| v.name() == name)
                        .ok_or_else(|| format!("HTTP_LOAD_VARIANTS: unknown variant `{name}`"))?;
                    if !variants.contains(&variant) {
                        variants.push(variant);
                    }
                }
                Variant::ALL
                    .into_iter()
                    .filter(|v| variants.contains(v))
                    .collect()
            }
            Err(_) => Variant::ALL.to_vec(),
        };
        Ok(Self {
            measure: secs("HTTP_LOAD_SECS", 5.0)?,
            warmup: secs("HTTP_LOAD_WARMUP_SECS", 1.0)?,
            connections: count("HTTP_LOAD_CONNECTIONS", 64, 4096)?,
            clients: count("HTTP_LOAD_CLIENTS", 10_000, 1_000_000)?,
            rounds: count("HTTP_LOAD_ROUNDS", 1, 20)?,
            variants,
        })
    }
}

fn env_or<T>(name: &str, default: T) -> Result<T, BoxError>
where
    T: FromStr,
    T::Err: std::fmt::Display,
{
    match std::env::var(name) {
        Ok(value) => value
            .trim()
            .parse()
            .map_err(|err| format!("{name}={value}: {err}").into()),
        Err(_) => Ok(default),
    }
}

fn main() -> Result<(), BoxError> {
    let settings = Settings::from_env()?;
    let load_at_start = load_average();
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
            let server = Server::start(variant, redis_server.url())?;
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

// ---------------------------------------------------------------------------------------------
// Servers

async fn bare() -> &'static str {
    "ok"
}

/// `bare` plus the three rate-limit headers, made per request as cheaply as honestly possible:
/// the floor of any limiter that sends them, where `bare` is the floor of one that does not.
async fn bare_headers(State(served): State<Arc<AtomicU64>>) -> impl IntoResponse {
    let n = served.fetch_add(1, Ordering::Relaxed) + 1;
    let limit = u64::from(LIMIT);
    (
        [
            ("x-ratelimit-limit", HeaderValue::from(limit)),
            ("x-ratelimit-reset", HeaderValue::from(u64::from(WINDOW))),
            (
                "x-ratelimit-remaining",
                HeaderValue::from(limit.saturating_sub(n)),
            ),
        ],
        "ok",
    )
}

async fn fixed_window(limited: FixedWindowLimited) -> (FixedWindowLimited, &'static str) {
    (limited, "ok")
}

async fn token_bucket(limited: TokenBucketLimited) -> (TokenBucketLimited, &'static str) {
    (limited, "ok")
}

async fn gcra(limited: GcraLimited) -> (GcraLimited, &'static str) {
    (limited, "ok")
}

async fn deny_flood(limited: FloodLimited) -> (FloodLimited, &'static str) {
    (limited, "ok")
}

/// The state of a hand-written check: one connection shared by every request, and the script
/// it runs.
#[derive(Clone)]
struct Handwritten {
    conn: MultiplexedConnection,
    check: &'static Check,
}

async fn evalsha_shared(
    State(Handwritten { mut conn, check }): State<Handwritten>,
    request: Request,
) -> Response {
    match key_of(&request, check) {
        Some(key) => evalsha(&mut conn, check, key).await,
        None => StatusCode::BAD_REQUEST.into_response(),
    }
}

async fn evalsha_pool_get(State(pool): State<Pool>, request: Request) -> Response {
    let check = &*FIXED_WINDOW_CHECK;
    let Some(key) = key_of(&request, check) else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    match pool.get().await {
        Ok(mut conn) => evalsha(&mut conn, check, key).await,
        Err(_) => StatusCode::SERVICE_UNAVAILABLE.into_response(),
    }
}

/// The Redis key the library would use for this request: `{prefix}:{limiter}:{scope}:{client}`,
/// with the default prefix and the matched route as the scope.
fn key_of(request: &Request, check: &Check) -> Option<String> {
    let client = request.headers().get(CLIENT_HEADER)?.to_str().ok()?;
    Some(format!("plug_limit:{}:/:{client}", check.limiter))
}

/// The built-ins' headers, in the order of their reply's values.
const REPLY_HEADERS: [&str; 4] = [
    "x-ratelimit-limit",
    "x-ratelimit-reset",
    "x-ratelimit-remaining",
    "retry-after",
];

/// A decision written by hand: the same key, script, options and headers as the library's,
/// with nothing around them. The values are read as a list, since `fixed_window.lua` answers
/// three and the others a fourth (`retry-after`) when it applies.
async fn evalsha(conn: &mut impl ConnectionLike, check: &Check, key: String) -> Response {
    let mut invocation = check.script.key(key);
    for &opt in check.opts {
        invocation.arg(opt);
    }
    let reply: redis::RedisResult<(String, Vec<String>)> = invocation.invoke_async(conn).await;
    let Ok((decision, values)) = reply else {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    };
    // More values than headers is a script this handler does not know: not an answer to count.
    if values.len() > REPLY_HEADERS.len() {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    }
    let mut response = if decision == "allow" {
        "ok".into_response()
    } else {
        StatusCode::TOO_MANY_REQUESTS.into_response()
    };
    for (name, value) in REPLY_HEADERS.into_iter().zip(values) {
        let Ok(value) = HeaderValue::try_from(value) else {
            return StatusCode::INTERNAL_SERVER_ERROR.into_response();
        };
        response
            .headers_mut()
            .insert(HeaderName::from_static(name), value);
    }
    response
}

/// `tower_governor`'s key: the `x-client` header, as the library's `key::header` reads it.
#[derive(Debug, Clone, Copy)]
struct ClientHeader;

impl tower_governor::key_extractor::KeyExtractor for ClientHeader {
    type Key = String;

    fn extract<T>(&self, req: &http::Request<T>) -> Result<String, tower_governor::GovernorError> {
        req.headers()
            .get(CLIENT_HEADER)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
            .ok_or(tower_governor::GovernorError::UnableToExtractKey)
    }
}

async fn app(variant: Variant, redis_url: &str) -> Result<Router, BoxError> {
    let limits = || {
        PlugLimit::builder(plug_limit_tests::pool(redis_url))
            .key(plug_limit::key::header(CLIENT_HEADER))
            // A failed check answers 503, which is not counted, instead of a fast 200.
            .on_failure(FailurePolicy::Closed)
    };
    Ok(match variant {
        Variant::Bare => Router::new().route("/", get(bare)),
        Variant::BareHeaders => Router::new()
            .route("/", get(bare_headers))
            .with_state(Arc::new(AtomicU64::new(0))),
        Variant::FixedWindow => Router::new()
            .route("/", get(fixed_window))
            .with_state(limits().build()?),
        Variant::TokenBucket => Router::new()
            .route("/", get(token_bucket))
            .with_state(limits().build()?),
        Variant::Gcra => Router::new()
            .route("/", get(gcra))
            .with_state(limits().build()?),
        Variant::EvalshaMultiplexed => handwritten(redis_url, &FIXED_WINDOW_CHECK).await?,
        Variant::EvalshaTokenBucket => handwritten(redis_url, &TOKEN_BUCKET_CHECK).await?,
        Variant::EvalshaGcra => handwritten(redis_url, &GCRA_CHECK).await?,
        Variant::EvalshaPoolGet => Router::new()
            .route("/", get(evalsha_pool_get))
            .with_state(plug_limit_tests::pool(redis_url)),
        Variant::TowerGovernor => {
            // One cell a nanosecond with a burst of LIMIT: never reached, like the others.
            let config = GovernorConfigBuilder::default()
                .per_nanosecond(1)
                .burst_size(LIMIT)
                .key_extractor(ClientHeader)
                .use_headers()
                .finish()
                .ok_or("tower_governor: invalid quota")?;
            Router::new()
                .route("/", get(bare))
                .layer(GovernorLayer::new(config))
        }
        Variant::Memory => {
            let limits = PlugLimit::memory_builder()
                .key(plug_limit::key::header(CLIENT_HEADER))
                .on_failure(FailurePolicy::Closed)
                .build()?;
            Router::new()
                .route("/", get(fixed_window))
                .with_state(limits)
        }
        Variant::DenyFlood => Router::new()
            .route("/", get(deny_flood))
            .with_state(limits().deny_cache(true).build()?),
    })
}

/// A hand-written check of `check`'s script on one connection taken out of a pool, as the
/// library's own shared connection is.
async fn handwritten(redis_url: &str, check: &'static Check) -> Result<Router, BoxError> {
    let pool = plug_limit_tests::pool(redis_url);
    let conn = Connection::take(pool.get().await?);
    Ok(Router::new()
        .route("/", get(evalsha_shared))
        .with_state(Handwritten { conn, check }))
}

/// A variant served on its own thread by a current-thread runtime: one core at most, and
/// every task it spawns (the Redis connection's driver included) runs on that core.
struct Server {
    addr: SocketAddr,
    /// The server thread's `schedstat`, to tell its CPU time apart from the load generator's.
    cpu: PathBuf,
    stop: tokio::sync::oneshot::Sender<()>,
    thread: JoinHandle<()>,
}

impl Server {
    fn start(variant: Variant, redis_url: String) -> Result<Self, BoxError> {
        let (ready_tx, ready_rx) =
            std::sync::mpsc::channel::<Result<(SocketAddr, PathBuf), String>>();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(format!("server-{}", variant.name()))
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(err) => {
                        let _ = ready_tx.send(Err(format!("server runtime: {err}")));
                        return;
                    }
                };
                runtime.block_on(async move {
                    let setup = async {
                        let app = app(variant, &redis_url).await?;
                        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
                        let addr = listener.local_addr()?;
                        Ok::<_, BoxError>((app, listener, addr, thread_schedstat()?))
                    };
                    let (app, listener, addr, cpu) = match setup.await {
                        Ok(ready) => ready,
                        Err(err) => {
                            let _ = ready_tx.send(Err(format!("{} server: {err}", variant.name())));
                            return;
                        }
                    };
                    let _ = ready_tx.send(Ok((addr, cpu)));
                    let listener = listener.tap_io(|tcp| {
                        let _ = tcp.set_nodelay(true);
                    });
                    tokio::select! {
                        served = axum::serve(listener, app).into_future() => {
                            if let Err(err) = served {
                                eprintln!("{} server stopped: {err}", variant.name());
                            }
                        }
                        _ = stopped => {}
                    }
                });
                runtime.shutdown_timeout(Duration::from_secs(1));
            })?;
        let (addr, cpu) = ready_rx
            .recv_timeout(Duration::from_secs(15))
            .map_err(|err| format!("server thread did not start: {err}"))??;
        Ok(Self {
            addr,
            cpu,
            stop,
            thread,
        })
    }

    fn stop(self) {
        let _ = self.stop.send(());
        if self.thread.join().is_err() {
            eprintln!("a server thread panicked");
        }
    }
}

/// The calling thread's `/proc/.../task/<tid>/schedstat`, readable from any thread.
fn thread_schedstat() -> io::Result<PathBuf> {
    Ok(std::fs::canonicalize("/proc/thread-self")?.join("schedstat"))
}

/// CPU time a thread has run, from its `schedstat` (nanoseconds on CPU, first field).
fn cpu_time(schedstat: &Path) -> Option<Duration> {
    let text = std::fs::read_to_string(schedstat).ok()?;
    let nanos = text.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(nanos))
}

/// What Redis has done so far, from one `INFO cpu commandstats`.
#[derive(Debug, Clone, Copy, Default)]
struct RedisCounters {
    cpu: Option<Duration>,
    /// Commands executed, those run inside scripts included; the harness's own `INFO` calls
    /// are left out.
    commands: Option<u64>,
}

async fn redis_counters(conn: &mut MultiplexedConnection) -> RedisCounters {
    let Ok(info) = redis::cmd("INFO")
        .arg("cpu")
        .arg("commandstats")
        .query_async::<String>(conn)
        .await
    else {
        return RedisCounters::default();
    };
    let seconds = |field: &str| -> Option<f64> {
        info.lines()
            .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))?
            .trim()
            .parse()
            .ok()
    };
    let cpu = seconds("used_cpu_user")
        .zip(seconds("used_cpu_sys"))
        .map(|(user, sys)| Duration::from_secs_f64(user + sys));
    // cmdstat_<name>:calls=<n>,usec=...
    let commands = info
        .lines()
        .filter_map(|line| line.strip_prefix("cmdstat_"))
        .filter_map(|line| line.split_once(':'))
        .filter(|(name, _)| *name != "info")
        .map(|(_, stats)| {
            stats
                .split(',')
                .find_map(|field| field.strip_prefix("calls="))
                .and_then(|calls| calls.trim().parse::<u64>().ok())
        })
        .sum::<Option<u64>>();
    RedisCounters { cpu, commands }
}

async fn redis_version(conn: &mut MultiplexedConnection) -> String {
    let info: Option<String> = redis::cmd("INFO")
        .arg("server")
        .query_async(conn)
        .await
        .ok();
    info.as_deref()
        .and_then(|info| {
            info.lines()
                .find_map(|line| line.strip_prefix("redis_version:"))
        })
        .map_or_else(|| "unknown".to_owned(), |v| v.trim().to_owned())
}

// ---------------------------------------------------------------------------------------------
// Load generator
//
// A minimal HTTP/1.1 client over keep-alive sockets, rather than hyper's client or `wrk`. On two
// cores the load generator shares the CPU with the server and Redis, and `bare` is the variant a
// costly client would cap first, which would flatter every ratio. Sending a pre-serialized
// request and reading a `content-length` response leaves little but the syscalls: profiled, about
// 80% of this client's CPU is the kernel's loopback TCP path. hyper's client would add user-space
// work per request of the order of the server's own hyper stack (request building, a dispatch
// channel to the connection task, body polling). `wrk` is as cheap, but it is an external binary,
// varying `x-client` per request and checking each response's rate-limit headers both take its
// Lua hooks, and its statistics would come from another process; here every figure covers the
// same window. The client's own CPU share is printed, so a saturated load generator shows in the
// output instead of hiding in the numbers.

struct Run {
    variant: Variant,
    addr: SocketAddr,
    requests: Arc<[Box<[u8]>]>,
    connections: usize,
    warmup: Duration,
    measure: Duration,
}

#[derive(Debug, Default)]
struct Tally {
    latencies: Vec<Duration>,
    unexpected_status: u64,
    missing_headers: u64,
    errors: u64,
    first_problem: Option<String>,
}

impl Tally {
    fn problem(&mut self, problem: impl FnOnce() -> String) {
        if self.first_problem.is_none() {
            self.first_problem = Some(problem());
        }
    }

    fn merge(&mut self, other: Self) {
        self.latencies.extend(other.latencies);
        self.unexpected_status += other.unexpected_status;
        self.missing_headers += other.missing_headers;
        self.errors += other.errors;
        if self.first_problem.is_none() {
            self.first_problem = other.first_problem;
        }
    }
}

/// CPU used during the measured window, in cores (1.0 = one core busy all along).
#[derive(Debug, Clone, Copy, Default)]
struct CpuShare {
    server: Option<f64>,
    client: Option<f64>,
    redis: Option<f64>,
    /// Everything else on the machine: other processes make a run noisy.
    others: Option<f64>,
}

/// CPU clocks and Redis counters read at one instant. Taken on the load generator's thread,
/// so `/proc/thread-self` is the client.
struct Snapshot {
    at: Instant,
    server: Option<Duration>,
    client: Option<Duration>,
    redis: RedisCounters,
    machine: Option<Duration>,
}

impl Snapshot {
    async fn take(server: &Path, redis: &mut MultiplexedConnection) -> Self {
        Self {
            at: Instant::now(),
            server: cpu_time(server),
            client: cpu_time(Path::new("/proc/thread-self/schedstat")),
            redis: redis_counters(redis).await,
            machine: machine_busy(),
        }
    }

    fn share_until(&self, after: &Self) -> CpuShare {
        let elapsed = after.at.duration_since(self.at).as_secs_f64();
        let share = |a: Option<Duration>, b: Option<Duration>| {
            Some(b?.checked_sub(a?)?.as_secs_f64() / elapsed)
        };
        let server = share(self.server, after.server);
        let client = share(self.client, after.client);
        let redis = share(self.redis.cpu, after.redis.cpu);
        let others = share(self.machine, after.machine)
            .and_then(|machine| Some((machine - server? - client? - redis?).max(0.0)));
        CpuShare {
            server,
            client,
            redis,
            others,
        }
    }

    fn redis_commands_until(&self, after: &Self) -> Option<u64> {
        after.redis.commands?.checked_sub(self.redis.commands?)
    }
}

/// Busy time summed over every CPU, from the first line of `/proc/stat`.
fn machine_busy() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let ticks: Vec<u64> = stat
        .lines()
        .next()?
        .strip_prefix("cpu ")?
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    // user nice system idle iowait irq softirq steal: everything but idle and iowait is busy.
    let busy = ticks.iter().take(8).sum::<u64>() - ticks.get(3)? - ticks.get(4)?;
    // `/proc/stat` counts in USER_HZ, which Linux fixes at 100 for user space.
    Some(Duration::from_millis(busy.checked_mul(10)?))
}

#[derive(Debug)]
struct Measurement {
    variant: Variant,
    window: Duration,
    tally: Tally,
    p50: Duration,
    p99: Duration,
    cpu: CpuShare,
    /// Redis commands executed during the measured window.
    redis_commands: Option<u64>,
}

impl Measurement {
    fn served(&self) -> usize {
        self.tally.latencies.len()
    }

    fn rps(&self) -> f64 {
        self.served() as f64 / self.window.as_secs_f64()
    }

    /// CPU microseconds per served request, from a share of one core.
    fn per_request(&self, share: Option<f64>) -> Option<f64> {
        let rps = self.rps();
        (rps > 0.0).then_some(share? * 1e6 / rps)
    }

    fn micros(&self, share: Option<f64>) -> String {
        self.per_request(share)
            .map_or_else(|| "n/a".to_owned(), |us| format!("{us:.1}"))
    }

    /// Server, client and Redis CPU microseconds per served request.
    fn cost(&self) -> Option<f64> {
        Some(
            self.per_request(self.cpu.server)?
                + self.per_request(self.cpu.client)?
                + self.per_request(self.cpu.redis)?,
        )
    }

    /// Redis commands per counted request. Requests that were answered but not counted (the
    /// edges of the window) cost commands too, so an allow decision reads a hair above its
    /// true figure.
    fn redis_commands_per_request(&self) -> String {
        match (self.redis_commands, self.served()) {
            (Some(0), _) => "0".to_owned(),
            (Some(commands), served) if served > 0 => {
                format!("{:.2}", commands as f64 / served as f64)
            }
            (Some(commands), _) => format!("{commands} total"),
            (None, _) => "n/a".to_owned(),
        }
    }
}

struct Answer {
    status: u16,
    rate_headers: bool,
}

impl Run {
    async fn execute(
        self,
        server_cpu: &Path,
        mut redis_conn: MultiplexedConnection,
    ) -> Result<Measurement, BoxError> {
        self.preflight().await?;
        let start = Instant::now();
        let measure_from = start + self.warmup;
        let measure_until = measure_from + self.measure;
        let run = Arc::new(self);
        let tasks: Vec<_> = (0..run.connections)
            .map(|n| tokio::spawn(Arc::clone(&run).connection(n, measure_from, measure_until)))
            .collect();

        tokio::time::sleep_until(measure_from).await;
        let before = Snapshot::take(server_cpu, &mut redis_conn).await;
        tokio::time::sleep_until(measure_until).await;
        let after = Snapshot::take(server_cpu, &mut redis_conn).await;
        let cpu = before.share_until(&after);
        let redis_commands = before.redis_commands_until(&after);

        let mut tally = Tally::default();
        for task in tasks {
            tally.merge(task.await?);
        }
        tally.latencies.sort_unstable();
        let percentile = |p: f64| {
            let n = tally.latencies.len();
            if n == 0 {
                return Duration::ZERO;
            }
            let rank = ((p * n as f64).ceil() as usize).clamp(1, n);
            tally.latencies[rank - 1]
        };
        let (p50, p99) = (percentile(0.50), percentile(0.99));
        Ok(Measurement {
            variant: run.variant,
            window: run.measure,
            tally,
            p50,
            p99,
            cpu,
            redis_commands,
        })
    }

    /// Requests checked before any load: a server that answers wrongly fails the run. For
    /// `deny_flood` they also spend its client's budget, so the flood meets a denied client.
    async fn preflight(&self) -> Result<(), BoxError> {
        let name = self.variant.name();
        let check = async {
            let stream = TcpStream::connect(self.addr).await?;
            let mut buf = Vec::with_capacity(4096);
            let mut answers = Vec::new();
            // The flood's limit is 1: its second answer is the first denial.
            let requests = if self.variant == Variant::DenyFlood {
                2
            } else {
                1
            };
            for _ in 0..requests {
                answers.push(exchange(&stream, &self.requests[0], &mut buf).await?);
            }
            Ok::<_, io::Error>(answers)
        };
        let answers = tokio::time::timeout(Duration::from_secs(5), check)
            .await
            .map_err(|_| format!("{name}: no answer within 5 s"))??;
        let last = answers.last().ok_or("no preflight answer")?;
        if !self.variant.counts(last.status) {
            return Err(format!(
                "{name}: preflight got {}, expected {}",
                last.status,
                self.variant.expected()
            )
            .into());
        }
        if self.variant.sends_rate_headers() && !last.rate_headers {
            return Err(format!("{name}: no x-ratelimit-remaining header").into());
        }
        Ok(())
    }

    /// One keep-alive connection sending requests back to back until `until`, then at most
    /// [`GRACE`] for the last answer.
    async fn connection(self: Arc<Self>, n: usize, from: Instant, until: Instant) -> Tally {
        let mut tally = Tally::default();
        let mut next = n * self.requests.len() / self.connections;
        let mut stream: Option<TcpStream> = None;
        let mut buf = Vec::with_capacity(4096);
        while Instant::now() < until {
            let conn = match stream.as_mut() {
                Some(conn) => conn,
                None => match tokio::time::timeout_at(until, TcpStream::connect(self.addr)).await {
                    Ok(Ok(conn)) => {
                        let _ = conn.set_nodelay(true);
                        stream.insert(conn)
                    }
                    Ok(Err(err)) => {
                        tally.errors += 1;
                        tally.problem(|| format!("connect: {err}"));
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    }
                    Err(_) => break,
                },
            };
            let request = &self.requests[next % self.requests.len()];
            next += 1;
            let sent = Instant::now();
            let answer =
                tokio::time::timeout_at(until + GRACE, exchange(conn, request, &mut buf)).await;
            let done = Instant::now();
            let counted = sent >= from && done <= until;
            match answer {
                Ok(Ok(response)) if !self.variant.counts(response.status) => {
                    if counted {
                        tally.unexpected_status += 1;
                    }
                    tally.problem(|| format!("status {}", response.status));
                }
                Ok(Ok(response)) if self.variant.sends_rate_headers() && !response.rate_headers => {
                    if counted {
                        tally.missing_headers += 1;
                    }
                    tally.problem(|| {
                        format!("{} without x-ratelimit-remaining", self.variant.expected())
                    });
                }
                Ok(Ok(_)) => {
                    if counted {
                        tally.latencies.push(done - sent);
                    }
                }
                Ok(Err(err)) => {
                    if counted {
                        tally.errors += 1;
                    }
                    tally.problem(|| format!("exchange: {err}"));
                    stream = None;
                }
                Err(_) => {
                    tally.errors += 1;
                    tally.problem(|| format!("no answer within {GRACE:?} after the window"));
                    break;
                }
            }
        }
        tally
    }
}

/// Sends one request and reads its response: status line, headers, `content-length` body.
async fn exchange(stream: &TcpStream, request: &[u8], buf: &mut Vec<u8>) -> io::Result<Answer> {
    write_all(stream, request).await?;
    buf.clear();
    loop {
        if read_some(stream, buf).await? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let (response, length) = parse_head(&buf[..end])?;
            let total = end + 4 + length;
            while buf.len() < total {
                if read_some(stream, buf).await? == 0 {
                    return Err(io::ErrorKind::UnexpectedEof.into());
                }
            }
            if buf.len() > total {
                return Err(invalid("bytes after the response body"));
            }
            return Ok(response);
        }
        if buf.len() > MAX_HEAD {
            return Err(invalid("response head too large"));
        }
    }
}

// Readiness plus `try_*` instead of `AsyncReadExt`/`AsyncWriteExt`: the same syscalls, without
// the `io-util` feature of tokio.
async fn write_all(stream: &TcpStream, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        stream.writable().await?;
        match stream.try_write(bytes) {
            Ok(written) => bytes = &bytes[written..],
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
            Err(err) => return Err(err),
        }
    }
    Ok(())
}

async fn read_some(stream: &TcpStream, buf: &mut Vec<u8>) -> io::Result<usize> {
    loop {
        stream.readable().await?;
        let mut chunk = [0; 4096];
        match stream.try_read(&mut chunk) {
            Ok(read) => {
                buf.extend_from_slice(&chunk[..read]);
                return Ok(read);
            }
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
            Err(err) => return Err(err),
        }
    }
}

fn parse_head(head: &[u8]) -> io::Result<(Answer, usize)> {
    let mut lines = head
        .split(|&b| b == b'\n')
        .map(|line| line.strip_suffix(b"\r").unwrap_or(line));
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .strip_prefix(b"HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|code| std::str::from_utf8(code).ok()?.parse().ok())
        .ok_or_else(|| invalid("bad status line"))?;
    let mut length = None;
    let mut rate_headers = false;
    for line in lines {
        let colon = line
            .iter()
            .position(|&b| b == b':')
            .ok_or_else(|| invalid("header line without a colon"))?;
        let (name, value) = (&line[..colon], line[colon + 1..].trim_ascii());
        if name.eq_ignore_ascii_case(b"content-length") {
            length = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok());
        } else if name.eq_ignore_ascii_case(b"x-ratelimit-remaining") {
            rate_headers = true;
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            return Err(invalid("chunked responses are not supported"));
        }
    }
    let length = length.ok_or_else(|| invalid("response without content-length"))?;
    Ok((
        Answer {
            status,
            rate_headers,
        },
        length,
    ))
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

// ---------------------------------------------------------------------------------------------
// Report

/// One pass of one variant, for the comparisons within a round.
#[derive(Debug, Clone, Copy)]
struct Pass {
    rps: f64,
    /// Server CPU microseconds per counted request.
    server: Option<f64>,
}

/// A variant's best pass (by req/s), and every pass in round order.
struct Measured {
    best: Measurement,
    passes: Vec<Pass>,
}

struct Results(Vec<Measured>);

impl Results {
    fn get(&self, variant: Variant) -> Option<&Measured> {
        self.0.iter().find(|m| m.best.variant == variant)
    }

    /// `compare` of `a`'s and `b`'s passes of the same round, the median over the rounds. A
    /// ratio of two best passes would pair two moments of a machine whose speed drifts; two
    /// passes of one round ran a few seconds apart.
    fn paired(
        &self,
        a: Variant,
        b: Variant,
        compare: impl Fn(&Pass, &Pass) -> Option<f64>,
    ) -> Option<f64> {
        let (a, b) = (self.get(a)?, self.get(b)?);
        let mut values: Vec<f64> = a
            .passes
            .iter()
            .zip(&b.passes)
            .filter_map(|(a, b)| compare(a, b))
            .filter(|v| v.is_finite())
            .collect();
        values.sort_by(f64::total_cmp);
        let n = values.len();
        match n {
            0 => None,
            _ if n % 2 == 1 => Some(values[n / 2]),
            _ => Some((values[n / 2 - 1] + values[n / 2]) / 2.0),
        }
    }

    /// `a`'s req/s over `b`'s.
    fn rps_ratio(&self, a: Variant, b: Variant) -> Option<f64> {
        self.paired(a, b, |a, b| (b.rps > 0.0).then(|| a.rps / b.rps))
    }

    /// The server CPU per request `a` adds over `b`, in microseconds.
    fn server_added(&self, a: Variant, b: Variant) -> Option<f64> {
        self.paired(a, b, |a, b| Some(a.server? - b.server?))
    }

    /// The issue's targets, as (what, threshold, measured ratio) checks.
    fn targets(&self) -> Vec<(String, f64, Option<f64>)> {
        let mut checks = Vec::new();
        for m in &self.0 {
            let variant = m.best.variant;
            let Some(handwritten) = variant.handwritten() else {
                continue;
            };
            let name = variant.name();
            checks.push((
                format!("{name} req/s / bare"),
                0.45,
                self.rps_ratio(variant, Variant::Bare),
            ));
            if self.get(handwritten).is_some() {
                checks.push((
                    format!("{name} req/s / {}", handwritten.name()),
                    0.95,
                    self.rps_ratio(variant, handwritten),
                ));
            }
        }
        for (variant, threshold) in [(Variant::Memory, 0.95), (Variant::DenyFlood, 0.9)] {
            if self.get(variant).is_some() {
                checks.push((
                    format!("{} req/s / bare", variant.name()),
                    threshold,
                    self.rps_ratio(variant, Variant::Bare),
                ));
            }
        }
        checks
    }
}

struct Machine {
    redis_version: String,
    load_at_start: String,
    load_at_end: String,
}

fn ratio(r: Option<f64>) -> String {
    r.map_or_else(|| "n/a".to_owned(), |r| format!("{r:.2}x"))
}

fn report(settings: &Settings, results: &Results, machine: &Machine) -> String {
    let rounds = if settings.rounds == 1 {
        "this run".to_owned()
    } else {
        format!(
            "the median of {} rounds, each against its own round",
            settings.rounds
        )
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| variant | req/s | p50 | p99 | server µs/req | ratio to bare | Redis cmds/req |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|");
    for Measured { best: m, .. } in &results.0 {
        let _ = writeln!(
            out,
            "| {} | {:.0} | {} | {} | {} | {} | {} |",
            m.variant.name(),
            m.rps(),
            millis(m.p50),
            millis(m.p99),
            m.micros(m.cpu.server),
            ratio(results.rps_ratio(m.variant, Variant::Bare)),
            m.redis_commands_per_request(),
        );
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "req/s, latencies, CPU and commands: each variant's best pass. Ratios: {rounds}."
    );

    if results.get(Variant::BareHeaders).is_some() {
        let against: Vec<String> = [Variant::Memory, Variant::DenyFlood, Variant::TowerGovernor]
            .into_iter()
            .filter(|&variant| results.get(variant).is_some())
            .map(|variant| {
                format!(
                    "{} {}",
                    variant.name(),
                    ratio(results.rps_ratio(variant, Variant::BareHeaders))
                )
            })
            .collect();
        if !against.is_empty() {
            let _ = writeln!(out);
            let _ = writeln!(
                out,
                "Against `bare_headers` (bare plus the three headers, the floor of any limiter \
                 that sends them), req/s: {}.",
                against.join(", ")
            );
        }
    }

    // Each line needs one of its partners: its own script's check or `evalsha_multiplexed`.
    let against_handwritten: Vec<String> = results
        .0
        .iter()
        .filter_map(|m| {
            let variant = m.best.variant;
            let handwritten = variant.handwritten()?;
            let seed = Variant::EvalshaMultiplexed;
            if results.get(handwritten).is_none() && results.get(seed).is_none() {
                return None;
            }
            let added = results
                .server_added(variant, handwritten)
                .map_or_else(|| "n/a".to_owned(), |us| format!("{us:+.1}"));
            let mut line = format!(
                "- {} against `{}`: {} req/s, {added} µs server CPU per request",
                variant.name(),
                handwritten.name(),
                ratio(results.rps_ratio(variant, handwritten)),
            );
            if handwritten != seed {
                let _ = write!(
                    line,
                    "; against `{}`: {} req/s",
                    seed.name(),
                    ratio(results.rps_ratio(variant, seed)),
                );
            }
            Some(line)
        })
        .collect();
    if !against_handwritten.is_empty() {
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "Against the hand-written check of the same script (`evalsha_multiplexed` runs \
             fixed_window.lua, `evalsha_token_bucket` token_bucket.lua, `evalsha_gcra` gcra.lua): \
             throughput ratio, and the server CPU the library adds per request. Then, for the \
             heavier scripts, throughput against `evalsha_multiplexed`: the library and its \
             script together against the cheapest decision on Redis."
        );
        let _ = writeln!(out);
        for line in against_handwritten {
            let _ = writeln!(out, "{line}");
        }
    }

    let checks = results.targets();
    if !checks.is_empty() {
        let _ = writeln!(out);
        let _ = writeln!(out, "Targets:");
        let _ = writeln!(out);
        for (what, threshold, measured) in checks {
            let verdict = match measured {
                Some(r) if r >= threshold => "met",
                Some(_) => "NOT met",
                None => "n/a",
            };
            let _ = writeln!(
                out,
                "- {what} >= {threshold:.2}x: {} ({verdict})",
                ratio(measured),
            );
        }
        if let Some(Measured { best: flood, .. }) = results.get(Variant::DenyFlood) {
            let verdict = match flood.redis_commands {
                Some(0) => "met",
                Some(_) => "NOT met",
                None => "n/a",
            };
            let _ = writeln!(
                out,
                "- deny_flood Redis commands during the flood == 0: {} over {} answers ({verdict})",
                flood
                    .redis_commands
                    .map_or_else(|| "n/a".to_owned(), |c| c.to_string()),
                flood.served(),
            );
        }
    }

    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "CPU during the measured window (share of one core) and per served request. Throughput \
         swings with what else runs on the machine (`others`), CPU per request much less, so the \
         last column is the steadier ratio: bare's CPU per request (server + client + redis) \
         over the variant's."
    );
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "| variant | server | client | redis | others | server µs/req | client µs/req | \
         redis µs/req | CPU ratio to bare |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    let bare_cost = results.get(Variant::Bare).and_then(|bare| bare.best.cost());
    for Measured { best: m, .. } in &results.0 {
        let cpu_ratio = bare_cost.zip(m.cost()).map(|(bare, cost)| bare / cost);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            m.variant.name(),
            percent(m.cpu.server),
            percent(m.cpu.client),
            percent(m.cpu.redis),
            percent(m.cpu.others),
            m.micros(m.cpu.server),
            m.micros(m.cpu.client),
            m.micros(m.cpu.redis),
            ratio(cpu_ratio),
        );
    }

    let problems: Vec<&Measurement> = results
        .0
        .iter()
        .map(|m| &m.best)
        .filter(|m| m.tally.unexpected_status + m.tally.missing_headers + m.tally.errors > 0)
        .collect();
    if !problems.is_empty() {
        let _ = writeln!(out);
        for m in problems {
            let _ = writeln!(
                out,
                "{}: not counted: {} with another status than {}, {} without rate headers, {} \
                 errors (first: {})",
                m.variant.name(),
                m.tally.unexpected_status,
                m.variant.expected(),
                m.tally.missing_headers,
                m.tally.errors,
                m.tally.first_problem.as_deref().unwrap_or("?"),
            );
        }
    }

    let _ = writeln!(out);
    let _ = write!(
        out,
        "machine: nproc {}, CPU {}, redis {}, load average {} at start and {} at end; {} \
         connections, {} client ids, {:?} warm-up + {:?} measured per variant, best of {} round(s)",
        std::thread::available_parallelism().map_or(0, usize::from),
        cpu_model(),
        machine.redis_version,
        machine.load_at_start,
        machine.load_at_end,
        settings.connections,
        settings.clients,
        settings.warmup,
        settings.measure,
        settings.rounds,
    );
    out
}

fn millis(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn percent(share: Option<f64>) -> String {
    share.map_or_else(|| "n/a".to_owned(), |s| format!("{:.0}%", s * 100.0))
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|line| line.starts_with("model name"))
                .and_then(|line| line.split_once(':'))
                .map(|(_, model)| model.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".to_owned())
}

/// The 1-minute load average: whether something else was running.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".to_owned())
}
