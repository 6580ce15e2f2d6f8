//! HTTP load harness: the throughput of rate-limited Axum routes, each as a ratio to a bare
//! handler measured in the same run on the same machine.
//!
//! ```text
//! cargo bench --bench http_load
//! ```
//!
//! Variants, each served alone on `GET /`:
//!
//! | variant | handler |
//! |---|---|
//! | `bare` | `"ok"` |
//! | `fixed_window` | `RateLimited<FixedWindow<1_000_000_000, 3600>>`, keyed by `x-client` |
//! | `token_bucket` | `RateLimited<TokenBucket<1_000_000_000, 3600, 1_000_000_000>>`, likewise |
//! | `evalsha_multiplexed` | one `EVALSHA` of `lua/fixed_window.lua` on one shared `MultiplexedConnection` |
//! | `evalsha_pool_get` | the same after `pool.get().await` on every request |
//!
//! The limits are never reached, so every request is a full allow decision. The two `evalsha_*`
//! handlers frame the library: the first is the irreducible cost of one decision, the second
//! what a naive integration costs.
//!
//! Each server runs on its own thread with a current-thread Tokio runtime, so it uses at most
//! one core whatever the machine. The load generator runs on the main thread, also on a
//! current-thread runtime, and Redis is a private `redis-server` on a free loopback port. A
//! request counts when it is sent and answered inside the measured window, with a `2xx` (and,
//! for the limiting variants, `x-ratelimit-remaining`, so a check that failed open cannot pass
//! for a fast one). Latencies are those of the counted requests.
//!
//! Output: the throughput table, then the CPU each party used during the window (server
//! thread, load generator thread, Redis, and everything else on the machine) with the CPU time
//! per request. Throughput moves with whatever else runs on the machine; CPU per request much
//! less. On a busy machine, raise `HTTP_LOAD_ROUNDS`.
//!
//! Environment (all optional):
//!
//! | variable | default | meaning |
//! |---|---|---|
//! | `HTTP_LOAD_SECS` | `5` | measured seconds per variant |
//! | `HTTP_LOAD_WARMUP_SECS` | `1` | unmeasured seconds before them |
//! | `HTTP_LOAD_CONNECTIONS` | `64` | concurrent keep-alive connections |
//! | `HTTP_LOAD_CLIENTS` | `10000` | distinct `x-client` values, spread round-robin |
//! | `HTTP_LOAD_ROUNDS` | `1` | passes over the variants; each keeps its best pass |
//! | `HTTP_LOAD_VARIANTS` | all | comma-separated subset; `bare` is always added |
//! | `REDIS_SERVER` | `redis-server` | the Redis binary |

use std::error::Error;
use std::fmt::Write as _;
use std::future::IntoFuture;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;
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
use plug_limit::{FailurePolicy, FixedWindow, PlugLimit, RateLimited, TokenBucket};
use plug_limit_tests::RedisServer;
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

type BoxError = Box<dyn Error + Send + Sync>;

const CLIENT_HEADER: &str = "x-client";
const LIMIT: u32 = 1_000_000_000;
const WINDOW: u32 = 3600;
/// How long a request may outlive the measured window before its connection is abandoned.
const GRACE: Duration = Duration::from_secs(2);
/// A response head larger than this is a broken server, not a slow one.
const MAX_HEAD: usize = 64 * 1024;

type FixedWindowLimited = RateLimited<FixedWindow<LIMIT, WINDOW>>;
type TokenBucketLimited = RateLimited<TokenBucket<LIMIT, WINDOW, LIMIT>>;

static FIXED_WINDOW_SCRIPT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/fixed_window.lua")));

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    Bare,
    FixedWindow,
    TokenBucket,
    EvalshaMultiplexed,
    EvalshaPoolGet,
}

impl Variant {
    const ALL: [Self; 5] = [
        Self::Bare,
        Self::FixedWindow,
        Self::TokenBucket,
        Self::EvalshaMultiplexed,
        Self::EvalshaPoolGet,
    ];

    fn name(self) -> &'static str {
        match self {
            Self::Bare => "bare",
            Self::FixedWindow => "fixed_window",
            Self::TokenBucket => "token_bucket",
            Self::EvalshaMultiplexed => "evalsha_multiplexed",
            Self::EvalshaPoolGet => "evalsha_pool_get",
        }
    }

    fn sends_rate_headers(self) -> bool {
        self != Self::Bare
    }

    fn is_library(self) -> bool {
        matches!(self, Self::FixedWindow | Self::TokenBucket)
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
                variants
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
    let requests = requests(settings.clients);

    eprintln!(
        "http_load: {} variant(s) x {} round(s), {:?} warm-up + {:?} measured each",
        settings.variants.len(),
        settings.rounds,
        settings.warmup,
        settings.measure,
    );
    let mut best: Vec<Option<Measurement>> = settings.variants.iter().map(|_| None).collect();
    for round in 1..=settings.rounds {
        for (slot, &variant) in best.iter_mut().zip(&settings.variants) {
            client.block_on(async {
                redis::cmd("FLUSHALL")
                    .query_async::<()>(&mut redis_conn)
                    .await
            })?;
            let server = Server::start(variant, redis_server.url())?;
            let run = Run {
                variant,
                addr: server.addr,
                requests: Arc::clone(&requests),
                connections: settings.connections,
                warmup: settings.warmup,
                measure: settings.measure,
            };
            let measured = client.block_on(run.execute(&server.cpu, redis_conn.clone()));
            server.stop();
            let measured = measured?;
            eprintln!(
                "  round {round} {:<20} {:>9.0} req/s",
                variant.name(),
                measured.rps()
            );
            if slot.as_ref().is_none_or(|kept| measured.rps() > kept.rps()) {
                *slot = Some(measured);
            }
        }
    }
    let results: Vec<Measurement> = best.into_iter().flatten().collect();
    let redis_version = client.block_on(redis_version(&mut redis_conn));
    println!("{}", report(&settings, &results, &redis_version));
    Ok(())
}

/// One request per client id, serialized once so the load generator only copies bytes.
fn requests(clients: usize) -> Arc<[Box<[u8]>]> {
    (0..clients)
        .map(|id| {
            format!("GET / HTTP/1.1\r\nhost: 127.0.0.1\r\n{CLIENT_HEADER}: client-{id}\r\n\r\n")
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

async fn fixed_window(limited: FixedWindowLimited) -> (FixedWindowLimited, &'static str) {
    (limited, "ok")
}

async fn token_bucket(limited: TokenBucketLimited) -> (TokenBucketLimited, &'static str) {
    (limited, "ok")
}

async fn evalsha_multiplexed(
    State(mut conn): State<MultiplexedConnection>,
    request: Request,
) -> Response {
    match key_of(&request) {
        Some(key) => evalsha(&mut conn, key).await,
        None => StatusCode::BAD_REQUEST.into_response(),
    }
}

async fn evalsha_pool_get(State(pool): State<Pool>, request: Request) -> Response {
    let Some(key) = key_of(&request) else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    match pool.get().await {
        Ok(mut conn) => evalsha(&mut conn, key).await,
        Err(_) => StatusCode::SERVICE_UNAVAILABLE.into_response(),
    }
}

/// The Redis key the library would use for this request: `{prefix}:{limiter}:{route}:{client}`.
fn key_of(request: &Request) -> Option<String> {
    let client = request.headers().get(CLIENT_HEADER)?.to_str().ok()?;
    Some(format!("plug_limit:fixed_window:/:{client}"))
}

/// The fixed-window decision written by hand: the same key, script, options and headers as the
/// library's, with nothing around them.
async fn evalsha(conn: &mut impl ConnectionLike, key: String) -> Response {
    let reply: redis::RedisResult<(String, (String, String, String))> = FIXED_WINDOW_SCRIPT
        .key(key)
        .arg(LIMIT)
        .arg(WINDOW)
        .invoke_async(conn)
        .await;
    let Ok((decision, (limit, reset, remaining))) = reply else {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    };
    let headers = [
        ("x-ratelimit-limit", limit),
        ("x-ratelimit-reset", reset),
        ("x-ratelimit-remaining", remaining),
    ];
    let mut response = if decision == "allow" {
        "ok".into_response()
    } else {
        StatusCode::TOO_MANY_REQUESTS.into_response()
    };
    for (name, value) in headers {
        let Ok(value) = HeaderValue::try_from(value) else {
            return StatusCode::INTERNAL_SERVER_ERROR.into_response();
        };
        response
            .headers_mut()
            .insert(HeaderName::from_static(name), value);
    }
    response
}

async fn app(variant: Variant, redis_url: &str) -> Result<Router, BoxError> {
    let limits = || {
        PlugLimit::builder(plug_limit_tests::pool(redis_url))
            .key(plug_limit::key::header(CLIENT_HEADER))
            // A failed check answers 503, which is not counted, instead of a fast 200.
            .on_failure(FailurePolicy::Closed)
            .build()
    };
    Ok(match variant {
        Variant::Bare => Router::new().route("/", get(bare)),
        Variant::FixedWindow => Router::new()
            .route("/", get(fixed_window))
            .with_state(limits()?),
        Variant::TokenBucket => Router::new()
            .route("/", get(token_bucket))
            .with_state(limits()?),
        Variant::EvalshaMultiplexed => {
            let pool = plug_limit_tests::pool(redis_url);
            let conn = Connection::take(pool.get().await?);
            Router::new()
                .route("/", get(evalsha_multiplexed))
                .with_state(conn)
        }
        Variant::EvalshaPoolGet => Router::new()
            .route("/", get(evalsha_pool_get))
            .with_state(plug_limit_tests::pool(redis_url)),
    })
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

async fn redis_cpu(conn: &mut MultiplexedConnection) -> Option<Duration> {
    let info: String = redis::cmd("INFO").arg("cpu").query_async(conn).await.ok()?;
    let seconds = |field: &str| -> Option<f64> {
        info.lines()
            .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))?
            .trim()
            .parse()
            .ok()
    };
    Some(Duration::from_secs_f64(
        seconds("used_cpu_user")? + seconds("used_cpu_sys")?,
    ))
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
    non_2xx: u64,
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
        self.non_2xx += other.non_2xx;
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

/// CPU clocks read at one instant. Taken on the load generator's thread, so `/proc/thread-self`
/// is the client.
struct Snapshot {
    at: Instant,
    server: Option<Duration>,
    client: Option<Duration>,
    redis: Option<Duration>,
    machine: Option<Duration>,
}

impl Snapshot {
    async fn take(server: &Path, redis: &mut MultiplexedConnection) -> Self {
        Self {
            at: Instant::now(),
            server: cpu_time(server),
            client: cpu_time(Path::new("/proc/thread-self/schedstat")),
            redis: redis_cpu(redis).await,
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
        let redis = share(self.redis, after.redis);
        let others = share(self.machine, after.machine)
            .and_then(|machine| Some((machine - server? - client? - redis?).max(0.0)));
        CpuShare {
            server,
            client,
            redis,
            others,
        }
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

    /// Server, client and Redis CPU microseconds per served request.
    fn cost(&self) -> Option<f64> {
        Some(
            self.per_request(self.cpu.server)?
                + self.per_request(self.cpu.client)?
                + self.per_request(self.cpu.redis)?,
        )
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
        })
    }

    /// One request checked before any load: a server that answers wrongly fails the run.
    async fn preflight(&self) -> Result<(), BoxError> {
        let check = async {
            let stream = TcpStream::connect(self.addr).await?;
            let mut buf = Vec::with_capacity(4096);
            exchange(&stream, &self.requests[0], &mut buf).await
        };
        let response = tokio::time::timeout(Duration::from_secs(5), check)
            .await
            .map_err(|_| format!("{}: no answer within 5 s", self.variant.name()))??;
        if response.status != 200 {
            return Err(format!(
                "{}: first request got {}",
                self.variant.name(),
                response.status
            )
            .into());
        }
        if self.variant.sends_rate_headers() && !response.rate_headers {
            return Err(format!("{}: no x-ratelimit-remaining header", self.variant.name()).into());
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
                Ok(Ok(response)) if !(200..300).contains(&response.status) => {
                    if counted {
                        tally.non_2xx += 1;
                    }
                    tally.problem(|| format!("status {}", response.status));
                }
                Ok(Ok(response)) if self.variant.sends_rate_headers() && !response.rate_headers => {
                    if counted {
                        tally.missing_headers += 1;
                    }
                    tally.problem(|| "2xx without x-ratelimit-remaining".to_owned());
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

fn report(settings: &Settings, results: &[Measurement], redis_version: &str) -> String {
    let rps_of = |variant: Variant| {
        results
            .iter()
            .find(|m| m.variant == variant)
            .map(Measurement::rps)
    };
    let bare = rps_of(Variant::Bare).unwrap_or(f64::NAN);
    let mut out = String::new();
    let _ = writeln!(out, "| variant | req/s | p50 | p99 | ratio to bare |");
    let _ = writeln!(out, "|---|---:|---:|---:|---:|");
    for m in results {
        let _ = writeln!(
            out,
            "| {} | {:.0} | {} | {} | {:.2}x |",
            m.variant.name(),
            m.rps(),
            millis(m.p50),
            millis(m.p99),
            m.rps() / bare,
        );
    }

    let _ = writeln!(out);
    if let Some(direct) = rps_of(Variant::EvalshaMultiplexed) {
        for m in results.iter().filter(|m| m.variant.is_library()) {
            let _ = writeln!(
                out,
                "{} / evalsha_multiplexed: {:.2}x",
                m.variant.name(),
                m.rps() / direct
            );
        }
        let _ = writeln!(out);
    }

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
    let bare_cost = results
        .iter()
        .find(|m| m.variant == Variant::Bare)
        .and_then(Measurement::cost);
    for m in results {
        let micros = |share: Option<f64>| {
            m.per_request(share)
                .map_or_else(|| "n/a".to_owned(), |us| format!("{us:.1}"))
        };
        let ratio = bare_cost.zip(m.cost()).map_or_else(
            || "n/a".to_owned(),
            |(bare, cost)| format!("{:.2}x", bare / cost),
        );
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {ratio} |",
            m.variant.name(),
            percent(m.cpu.server),
            percent(m.cpu.client),
            percent(m.cpu.redis),
            percent(m.cpu.others),
            micros(m.cpu.server),
            micros(m.cpu.client),
            micros(m.cpu.redis),
        );
    }

    let problems: Vec<&Measurement> = results
        .iter()
        .filter(|m| m.tally.non_2xx + m.tally.missing_headers + m.tally.errors > 0)
        .collect();
    if !problems.is_empty() {
        let _ = writeln!(out);
        for m in problems {
            let _ = writeln!(
                out,
                "{}: not counted: {} non-2xx, {} without rate headers, {} errors (first: {})",
                m.variant.name(),
                m.tally.non_2xx,
                m.tally.missing_headers,
                m.tally.errors,
                m.tally.first_problem.as_deref().unwrap_or("?"),
            );
        }
    }

    let _ = writeln!(out);
    let _ = write!(
        out,
        "machine: nproc {}, CPU {}, redis {redis_version}; {} connections, {} client ids, \
         {:?} warm-up + {:?} measured per variant, best of {} round(s)",
        std::thread::available_parallelism().map_or(0, usize::from),
        cpu_model(),
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
