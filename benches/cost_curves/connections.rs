//! Concurrent connections: p50 and p99 latency and throughput of a limited Axum route as the
//! connections sending to it back to back grow from 1 to 256, memory-backed and Redis-backed.
//!
//! The route is `RateLimited<FixedWindow<1_000_000_000, 3600>>` keyed by `x-client` (10,000
//! clients, round robin), served by one thread with a current-thread runtime (one core at
//! most, as `http_load` serves its variants); the load comes from this thread over keep-alive
//! connections, with `http_load`'s HTTP/1.1 client. An answer counts when it is a `200` with
//! `x-ratelimit-remaining`; anything else fails the run.

use std::future::IntoFuture;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use axum::serve::ListenerExt;
use plug_limit::{FailurePolicy, FixedWindow, PlugLimit, RateLimited, Store};
use plug_limit_tests::RedisServer;
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Runtime;
use tokio::time::Instant;

use crate::client::exchange;
use crate::curve::{Curve, Growth, MEMORY, Panel, REDIS, Scale, Series, count, value};
use crate::settings::Settings;
use crate::{BoxError, CHECK_TIMEOUT};

type Limited = RateLimited<FixedWindow<1_000_000_000, 3600>>;

const CLIENT_HEADER: &str = "x-client";
const CLIENTS: usize = 10_000;
/// How long a request may outlive the measured window before the run fails.
const GRACE: Duration = Duration::from_secs(5);

async fn limited(limited: Limited) -> (Limited, &'static str) {
    (limited, "ok")
}

struct Point {
    connections: usize,
    rps: f64,
    p50_ms: f64,
    p99_ms: f64,
}

pub(crate) fn curve(
    settings: &Settings,
    runtime: &Runtime,
    redis: &RedisServer,
) -> Result<Curve, BoxError> {
    let requests: Arc<[Box<[u8]>]> = (0..CLIENTS)
        .map(|id| {
            format!("GET / HTTP/1.1\r\nhost: 127.0.0.1\r\n{CLIENT_HEADER}: client-{id}\r\n\r\n")
                .into_bytes()
                .into_boxed_slice()
        })
        .collect();
    let mut measured = Vec::new();
    for backend in [Backend::Memory, Backend::Redis] {
        let server = Server::start(backend, redis.url())?;
        let mut points = Vec::new();
        for &connections in &settings.connections {
            let point = runtime.block_on(load(
                server.addr,
                &requests,
                connections,
                settings.warmup,
                settings.measure,
            ));
            let point = match point {
                Ok(point) => point,
                Err(err) => {
                    server.stop();
                    return Err(err);
                }
            };
            eprintln!(
                "  connections, {:<6} {connections:>3}  {:>7.0} req/s  p50 {:>6.3} ms  p99 {:>6.3} ms",
                backend.name(),
                point.rps,
                point.p50_ms,
                point.p99_ms
            );
            points.push(point);
        }
        server.stop();
        measured.push((backend, points));
    }
    let mut latency = Vec::new();
    let mut throughput = Vec::new();
    let mut notes = Vec::new();
    for (backend, points) in &measured {
        let (name, colour) = (backend.name(), backend.colour());
        #[allow(clippy::cast_precision_loss)]
        let xy = |y: fn(&Point) -> f64| -> Vec<(f64, f64)> {
            points
                .iter()
                .map(|p| (p.connections as f64, y(p)))
                .collect()
        };
        let (p50, p99, rps) = (xy(|p| p.p50_ms), xy(|p| p.p99_ms), xy(|p| p.rps));
        notes.extend(saturation_notes(name, &p50, &p99, &rps));
        let series = |label: String, dashed, points| Series {
            label,
            colour,
            dashed,
            expected: "O(1), then O(n) once saturated",
            because: "latency = connections / throughput",
            points,
        };
        latency.push(series(format!("{name}, p50 ms"), false, p50));
        latency.push(series(format!("{name}, p99 ms"), true, p99));
        throughput.push(Series {
            label: format!("{name}, req/s"),
            colour,
            dashed: false,
            expected: "O(n), then O(1) once saturated",
            because: "one server core",
            points: rps,
        });
    }
    Ok(Curve {
        file: "connections",
        title: "Concurrent connections: a RateLimited<FixedWindow> route on one server core"
            .to_owned(),
        x_desc: "concurrent connections",
        scale: Scale::Log2,
        panels: vec![
            Panel {
                caption: "latency",
                y_desc: "ms",
                series: latency,
            },
            Panel {
                caption: "throughput",
                y_desc: "requests per second",
                series: throughput,
            },
        ],
        notes,
    })
}

/// How throughput and latency grow over the whole range, and Little's law at its end:
/// once the server's core is busy, each connection waits its turn, so latency is about
/// connections / throughput.
fn saturation_notes(
    name: &str,
    p50: &[(f64, f64)],
    p99: &[(f64, f64)],
    rps: &[(f64, f64)],
) -> Vec<String> {
    let describe = |points: &[(f64, f64)]| {
        Growth::of(points).map_or_else(
            || "one point".to_owned(),
            |g| {
                format!(
                    "{}: x{:.2} from {} to {} connections",
                    g.class(),
                    g.ratio,
                    count(g.from),
                    count(g.to)
                )
            },
        )
    };
    let (best_at, best) = rps
        .iter()
        .copied()
        .fold((0.0, 0.0), |kept, p| if p.1 > kept.1 { p } else { kept });
    let mut notes = vec![format!(
        "{name}, req/s: expected to grow until the server's core is busy, then flat; observed \
         {}, best {} req/s at {}",
        describe(rps),
        value(best),
        count(best_at),
    )];
    for (label, points) in [("p50", p50), ("p99", p99)] {
        notes.push(format!(
            "{name}, {label}: expected flat while the server has idle time, then O(n) \
             (latency = connections / throughput); observed {}",
            describe(points),
        ));
    }
    if let (Some(last), Some(p50)) = (rps.last(), p50.last()) {
        notes.push(format!(
            "{name}, Little's law at {} connections: connections / throughput = {} ms, p50 {} ms",
            count(last.0),
            value(last.0 / last.1 * 1e3),
            value(p50.1),
        ));
    }
    notes
}

/// `connections` keep-alive connections sending back to back for `warmup + measure`; the
/// answers sent and received inside the measured window count.
#[allow(clippy::cast_precision_loss)]
async fn load(
    addr: SocketAddr,
    requests: &Arc<[Box<[u8]>]>,
    connections: usize,
    warmup: Duration,
    measure: Duration,
) -> Result<Point, BoxError> {
    let from = Instant::now() + warmup;
    let until = from + measure;
    let tasks: Vec<_> = (0..connections)
        .map(|n| {
            let requests = Arc::clone(requests);
            tokio::spawn(connection(
                addr,
                requests,
                n * CLIENTS / connections,
                from,
                until,
            ))
        })
        .collect();
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await??);
    }
    latencies.sort_unstable();
    let percentile = |p: f64| -> f64 {
        let n = latencies.len();
        let rank = ((p * n as f64).ceil() as usize).clamp(1, n.max(1));
        latencies
            .get(rank - 1)
            .map_or(0.0, |d| d.as_secs_f64() * 1e3)
    };
    if latencies.is_empty() {
        return Err(format!("{connections} connections: no answer in the window").into());
    }
    Ok(Point {
        connections,
        rps: latencies.len() as f64 / measure.as_secs_f64(),
        p50_ms: percentile(0.50),
        p99_ms: percentile(0.99),
    })
}

/// One connection: requests back to back from client `first` on, until `until`.
async fn connection(
    addr: SocketAddr,
    requests: Arc<[Box<[u8]>]>,
    first: usize,
    from: Instant,
    until: Instant,
) -> Result<Vec<Duration>, BoxError> {
    let stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let mut buf = Vec::with_capacity(4096);
    let mut latencies = Vec::new();
    let mut next = first;
    while Instant::now() < until {
        let request = &requests[next % requests.len()];
        next += 1;
        let sent = Instant::now();
        let answer = tokio::time::timeout_at(until + GRACE, exchange(&stream, request, &mut buf))
            .await
            .map_err(|_| "no answer within the grace after the window")??;
        let done = Instant::now();
        if answer.status != 200 || !answer.rate_headers {
            return Err(format!(
                "status {}, x-ratelimit-remaining {}",
                answer.status,
                if answer.rate_headers {
                    "sent"
                } else {
                    "missing"
                }
            )
            .into());
        }
        if sent >= from && done <= until {
            latencies.push(done - sent);
        }
    }
    Ok(latencies)
}

#[derive(Debug, Clone, Copy)]
enum Backend {
    Memory,
    Redis,
}

impl Backend {
    fn name(self) -> &'static str {
        match self {
            Self::Memory => "memory",
            Self::Redis => "Redis",
        }
    }

    fn colour(self) -> plotters::style::RGBColor {
        match self {
            Self::Memory => MEMORY,
            Self::Redis => REDIS,
        }
    }

    fn limits(self, redis_url: &str) -> Result<PlugLimit, BoxError> {
        let builder = match self {
            Self::Memory => PlugLimit::builder(Store::memory()),
            Self::Redis => PlugLimit::builder(plug_limit_tests::pool(redis_url)),
        };
        Ok(builder
            .key(plug_limit::key::header(CLIENT_HEADER))
            // A failed check answers 503, which fails the run, instead of a fast 200.
            .on_failure(FailurePolicy::Closed)
            .timeout(CHECK_TIMEOUT)
            .build()?)
    }
}

/// The route served on its own thread by a current-thread runtime: one core at most.
struct Server {
    addr: SocketAddr,
    stop: tokio::sync::oneshot::Sender<()>,
    thread: JoinHandle<()>,
}

impl Server {
    fn start(backend: Backend, redis_url: String) -> Result<Self, BoxError> {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<SocketAddr, String>>();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(format!("server-{}", backend.name()))
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
                        let app = Router::new()
                            .route("/", get(limited))
                            .with_state(backend.limits(&redis_url)?);
                        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
                        let addr = listener.local_addr()?;
                        Ok::<_, BoxError>((app, listener, addr))
                    };
                    let (app, listener, addr) = match setup.await {
                        Ok(ready) => ready,
                        Err(err) => {
                            let _ = ready_tx.send(Err(format!("{} server: {err}", backend.name())));
                            return;
                        }
                    };
                    let _ = ready_tx.send(Ok(addr));
                    let listener = listener.tap_io(|tcp| {
                        let _ = tcp.set_nodelay(true);
                    });
                    tokio::select! {
                        served = axum::serve(listener, app).into_future() => {
                            if let Err(err) = served {
                                eprintln!("{} server stopped: {err}", backend.name());
                            }
                        }
                        _ = stopped => {}
                    }
                });
                runtime.shutdown_timeout(Duration::from_secs(1));
            })?;
        let addr = ready_rx
            .recv_timeout(Duration::from_secs(15))
            .map_err(|err| format!("server thread did not start: {err}"))??;
        Ok(Self { addr, stop, thread })
    }

    fn stop(self) {
        let _ = self.stop.send(());
        if self.thread.join().is_err() {
            eprintln!("a server thread panicked");
        }
    }
}
