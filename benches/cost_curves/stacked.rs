//! Limits per request: the time of deciding one request against 1 to 5 limits (per minute,
//! ten minutes, hour, day, week), in memory and on Redis, two ways: stacked
//! (`PlugLimit::check_all`, one `EVALSHA` for all), and one check per limit, one after
//! another (`n` round trips), for comparison.

use std::time::Instant;

use plug_limit::{Opt, PlugLimit, RuntimeLimit, Store};
use plug_limit_tests::RedisServer;
use tokio::runtime::Runtime;

use crate::curve::{Curve, MEMORY, Panel, REDIS, REDIS_CPU, Scale, Series, median, slices, value};
use crate::redis_stats::{Evalsha, connect, flushall};
use crate::settings::Settings;
use crate::{BoxError, CHECK_TIMEOUT};

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
/// denies. `stacked`: all at once, in one call; else one check per limit, one after another.
async fn decide(limits: &PlugLimit, n: usize, client: &str, stacked: bool) -> Result<(), BoxError> {
    if stacked {
        let opts: Vec<[Opt; 2]> = LIMITS[..n]
            .iter()
            .map(|&(_, window)| [Opt::Int(LIMIT), Opt::Int(window)])
            .collect();
        let stack: Vec<(RuntimeLimit, &str)> = opts
            .iter()
            .map(|opts| Ok((RuntimeLimit::new(LIMITER, opts.iter().cloned())?, client)))
            .collect::<Result<_, BoxError>>()?;
        if !limits.check_all(&stack).await?.is_allowed() {
            return Err(format!("{client}: denied by a stack of {n}").into());
        }
        return Ok(());
    }
    for &(scope, window) in &LIMITS[..n] {
        let opts = [Opt::Int(LIMIT), Opt::Int(window)];
        let outcome = limits
            .check(RuntimeLimit::new(LIMITER, opts)?.scope(scope), client)
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
    let (mut memory, mut on_redis) = (Vec::new(), Vec::new());
    let (mut memory_apart, mut on_redis_apart) = (Vec::new(), Vec::new());
    for n in 1..=max {
        let url = redis.url();
        memory.push(runtime.block_on(point(None, n, &clients, memory_requests, true))?);
        memory_apart.push(runtime.block_on(point(None, n, &clients, memory_requests, false))?);
        on_redis.push(runtime.block_on(point(Some(&url), n, &clients, redis_requests, true))?);
        on_redis_apart.push(runtime.block_on(point(
            Some(&url),
            n,
            &clients,
            redis_requests,
            false,
        ))?);
    }
    #[allow(clippy::cast_precision_loss)]
    let xy = |points: &[Point], y: fn(&Point) -> f64| -> Vec<(f64, f64)> {
        points.iter().map(|p| (p.limits as f64, y(p))).collect()
    };
    let panels = vec![
        Panel {
            caption: "memory backend: time per request",
            y_desc: "ns",
            series: vec![
                Series {
                    label: "memory, stacked, ns/request".to_owned(),
                    colour: MEMORY,
                    dashed: false,
                    expected: "O(n)",
                    because: "one twin per limit, under one lock of every key's shard",
                    points: xy(&memory, |p| p.request),
                },
                Series {
                    label: "memory, one check per limit, ns/request".to_owned(),
                    colour: MEMORY,
                    dashed: true,
                    expected: "O(n)",
                    because: "one check per limit",
                    points: xy(&memory_apart, |p| p.request),
                },
            ],
        },
        Panel {
            caption: "Redis: time per request",
            y_desc: "µs",
            series: vec![
                Series {
                    label: "Redis, stacked, µs/request".to_owned(),
                    colour: REDIS,
                    dashed: false,
                    expected: "O(n)",
                    because: "one round trip; n scripts inside it",
                    points: xy(&on_redis, |p| p.request),
                },
                Series {
                    label: "Redis, one check per limit, µs/request".to_owned(),
                    colour: REDIS,
                    dashed: true,
                    expected: "O(n)",
                    because: "one EVALSHA round trip per limit",
                    points: xy(&on_redis_apart, |p| p.request),
                },
                Series {
                    label: "Redis, stacked, EVALSHA inside Redis, µs/request".to_owned(),
                    colour: REDIS_CPU,
                    dashed: false,
                    expected: "O(n)",
                    because: "one script run per limit, and the driver",
                    points: xy(&on_redis, |p| p.inside),
                },
                Series {
                    label: "Redis, one check per limit, EVALSHA inside Redis, µs/request"
                        .to_owned(),
                    colour: REDIS_CPU,
                    dashed: true,
                    expected: "O(n)",
                    because: "one script run per limit",
                    points: xy(&on_redis_apart, |p| p.inside),
                },
            ],
        },
    ];
    let mut notes = Curve::growth_notes(&panels);
    for (how, points) in [
        ("stacked", &on_redis),
        ("one check per limit", &on_redis_apart),
    ] {
        let calls: Vec<String> = points.iter().map(|p| value(p.calls)).collect();
        notes.push(format!(
            "EVALSHA calls per request, {how}, 1 to {max} limits: {}",
            calls.join(", ")
        ));
    }
    Ok(Curve {
        file: "stacked_limits",
        title: "Limits per request: fixed_window, stacked and one by one".to_owned(),
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
    stacked: bool,
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
            PlugLimit::builder(Store::memory())
                .timeout(CHECK_TIMEOUT)
                .build()?,
            None,
        ),
    };
    // Every key of the run exists before the timed requests: each is a held key's check.
    for client in clients {
        decide(&limits, n, client, stacked).await?;
    }
    let before = match conn.as_mut() {
        Some(conn) => Some(Evalsha::now(conn).await?),
        None => None,
    };
    let (mut times, mut next) = (Vec::new(), 0);
    for slice in slices(requests) {
        let started = Instant::now();
        for _ in 0..slice {
            decide(&limits, n, &clients[next % clients.len()], stacked).await?;
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
            "  limits, Redis, stacked {stacked}:  {n} limits  {:>6.1} µs/request  {:>5.2} µs in Redis  {:.2} EVALSHA/request",
            point.request, point.inside, point.calls
        );
    } else {
        eprintln!(
            "  limits, memory, stacked {stacked}: {n} limits  {:>6.0} ns/request",
            point.request
        );
    }
    Ok(point)
}
