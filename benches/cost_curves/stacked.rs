//! Limits per request: the time of deciding one request against 1 to 5 limits (per minute,
//! ten minutes, hour, day, week), in memory and on Redis.
//!
//! Measured today as the limits are checked without stacked limits: one check per limit, one
//! after another, so `n` round trips to Redis (`sequential, before stacking`). [`decide`] is
//! the one place that says how a request's limits are checked; once several limits can be
//! decided in one `EVALSHA`, it is the function to change, and [`HOW`] the label to change
//! with it.

use std::time::Instant;

use plug_limit::{Opt, PlugLimit, Subject};
use plug_limit_tests::RedisServer;
use tokio::runtime::Runtime;

use crate::curve::{Curve, MEMORY, Panel, REDIS, REDIS_CPU, Scale, Series, median, slices, value};
use crate::redis_stats::{Evalsha, connect, flushall};
use crate::settings::Settings;
use crate::{BoxError, CHECK_TIMEOUT};

/// How [`decide`] checks a request's limits, as the chart and the table name it.
const HOW: &str = "sequential, before stacking";
const LIMITER: &str = "fixed_window";
/// Never reached: every request is a full allow on every limit.
const LIMIT: i64 = 1_000_000_000;
/// Each limit's scope and window in seconds: a stored key of its own per client.
const LIMITS: [(&str, i64); 5] = [
    ("minute", 60),
    ("ten-minutes", 600),
    ("hour", 3600),
    ("day", 86_400),
    ("week", 604_800),
];
/// Clients the requests are spread over, round robin.
const CLIENTS: usize = 1_000;

/// Decides one request of `client` against the first `n` of [`LIMITS`]; an error when any
/// denies. Today: one check per limit, one after another.
async fn decide(limits: &PlugLimit, n: usize, client: &str) -> Result<(), BoxError> {
    for &(scope, window) in &LIMITS[..n] {
        let opts = [Opt::Int(LIMIT), Opt::Int(window)];
        let outcome = limits
            .check(LIMITER, Subject::scoped(scope, client), &opts)
            .await?;
        if !outcome.is_allowed() {
            return Err(format!("{client}: denied by the {scope} limit").into());
        }
    }
    Ok(())
}

struct Point {
    limits: usize,
    /// ns per request in memory, µs per request on Redis (round trip).
    request: f64,
    /// Redis only: `EVALSHA`'s µs inside Redis per request.
    inside: f64,
    /// Redis only: `EVALSHA` calls per request, the round trips.
    calls: f64,
}

pub(crate) fn curve(
    settings: &Settings,
    runtime: &Runtime,
    redis: &RedisServer,
) -> Result<Curve, BoxError> {
    let clients: Vec<String> = (0..CLIENTS).map(|i| format!("client-{i}")).collect();
    let memory_requests = (settings.memory_checks / 5).max(1);
    let redis_requests = (settings.redis_checks / 2).max(1);
    let max = settings.max_limits.min(LIMITS.len());
    let mut memory = Vec::new();
    let mut on_redis = Vec::new();
    for n in 1..=max {
        memory.push(runtime.block_on(point(None, n, &clients, memory_requests))?);
        on_redis.push(runtime.block_on(point(Some(&redis.url()), n, &clients, redis_requests))?);
    }
    #[allow(clippy::cast_precision_loss)]
    let xy = |points: &[Point], y: fn(&Point) -> f64| -> Vec<(f64, f64)> {
        points.iter().map(|p| (p.limits as f64, y(p))).collect()
    };
    let panels = vec![
        Panel {
            caption: "memory backend: time per request",
            y_desc: "ns",
            series: vec![Series {
                label: "memory, ns/request".to_owned(),
                colour: MEMORY,
                dashed: false,
                expected: "O(n)",
                because: "one check per limit",
                points: xy(&memory, |p| p.request),
            }],
        },
        Panel {
            caption: "Redis: time per request",
            y_desc: "µs",
            series: vec![
                Series {
                    label: "Redis, round trips, µs/request".to_owned(),
                    colour: REDIS,
                    dashed: false,
                    expected: "O(n)",
                    because: "one EVALSHA round trip per limit",
                    points: xy(&on_redis, |p| p.request),
                },
                Series {
                    label: "Redis, EVALSHA inside Redis, µs/request".to_owned(),
                    colour: REDIS_CPU,
                    dashed: true,
                    expected: "O(n)",
                    because: "one script run per limit",
                    points: xy(&on_redis, |p| p.inside),
                },
            ],
        },
    ];
    let mut notes = Curve::growth_notes(&panels);
    let calls: Vec<String> = on_redis.iter().map(|p| value(p.calls)).collect();
    notes.push(format!(
        "EVALSHA calls per request, 1 to {max} limits: {}",
        calls.join(", ")
    ));
    Ok(Curve {
        file: "stacked_limits",
        title: format!("Limits per request: fixed_window, {HOW}"),
        x_desc: "limits per request",
        scale: Scale::Linear,
        panels,
        notes,
    })
}

/// `requests` requests against `n` limits, spread over `clients`; on Redis when `url` is given.
#[allow(clippy::cast_precision_loss)]
async fn point(
    url: Option<&str>,
    n: usize,
    clients: &[String],
    requests: usize,
) -> Result<Point, BoxError> {
    let (limits, mut conn) = match url {
        Some(url) => {
            let mut conn = connect(url).await?;
            flushall(&mut conn).await?;
            (
                PlugLimit::builder(plug_limit_tests::pool(url))
                    .timeout(CHECK_TIMEOUT)
                    .build()?,
                Some(conn),
            )
        }
        None => (
            PlugLimit::memory_builder().timeout(CHECK_TIMEOUT).build()?,
            None,
        ),
    };
    // Every key of the run exists before the timed requests: each is a held key's check.
    for client in clients {
        decide(&limits, n, client).await?;
    }
    let before = match conn.as_mut() {
        Some(conn) => Some(Evalsha::now(conn).await?),
        None => None,
    };
    let (mut times, mut next) = (Vec::new(), 0);
    for slice in slices(requests) {
        let started = Instant::now();
        for _ in 0..slice {
            decide(&limits, n, &clients[next % clients.len()]).await?;
            next += 1;
        }
        times.push(started.elapsed().as_nanos() as f64 / slice as f64);
    }
    let per_request = median(times);
    let mut point = Point {
        limits: n,
        request: per_request,
        inside: 0.0,
        calls: 0.0,
    };
    if let (Some(conn), Some(before)) = (conn.as_mut(), before) {
        let after = Evalsha::now(conn).await?;
        let calls = before.calls_until(after) as f64;
        point.request /= 1e3;
        point.calls = calls / requests as f64;
        point.inside = before.usec_per_call_until(after) * point.calls;
        flushall(conn).await?;
        eprintln!(
            "  stacked, Redis:  {n} limits  {:>6.1} µs/request  {:>5.2} µs in Redis  {:.2} EVALSHA/request",
            point.request, point.inside, point.calls
        );
    } else {
        eprintln!(
            "  stacked, memory: {n} limits  {:>6.0} ns/request",
            point.request
        );
    }
    Ok(point)
}
