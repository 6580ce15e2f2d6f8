//! `sliding_log` entries per key: the time of a decision on one key whose window holds 1 to
//! 10k entries, in memory and on Redis.
//!
//! A key of `n` entries is kept at `n` by a manual clock that steps `window / n` between
//! checks, with a limit of `n`: each check drops the one entry that left the window and logs
//! its own, so every timed check is an allow on a full log. On Redis the clock's time goes to
//! the script as its `now`, as with any clock set on the builder.

use std::time::{Duration, Instant};

use plug_limit::{ManualClock, Opt, PlugLimit, RuntimeLimit, Store};
use plug_limit_tests::RedisServer;
use tokio::runtime::Runtime;

use crate::curve::{Curve, MEMORY, Panel, REDIS, REDIS_CPU, Scale, Series, median, slices};
use crate::redis_stats::{Evalsha, connect, flushall, only_key};
use crate::settings::Settings;
use crate::{BoxError, CHECK_TIMEOUT};

const LIMITER: &str = "sliding_log";
const WINDOW_MS: usize = 10_000;
/// Checks past the first `n` before the timed ones: a log that has turned over once.
const SETTLE: usize = 100;

struct Point {
    entries: usize,
    /// ns per decision in memory, µs per round trip on Redis.
    decision: f64,
    /// Redis only: `EVALSHA`'s µs inside Redis.
    inside: f64,
    /// Redis only: `MEMORY USAGE` of the key over its entries.
    bytes_per_entry: f64,
    encoding: String,
}

pub(crate) fn curve(
    settings: &Settings,
    runtime: &Runtime,
    redis: &RedisServer,
) -> Result<Curve, BoxError> {
    let memory_checks = (settings.memory_checks / 5).max(1);
    let redis_checks = (settings.redis_checks / 2).max(1);
    let mut memory = Vec::new();
    let mut on_redis = Vec::new();
    for &entries in &settings.log_entries {
        memory.push(runtime.block_on(point(None, entries, memory_checks))?);
        on_redis.push(runtime.block_on(point(Some(&redis.url()), entries, redis_checks))?);
    }
    #[allow(clippy::cast_precision_loss)]
    let xy = |points: &[Point], y: fn(&Point) -> f64| -> Vec<(f64, f64)> {
        points.iter().map(|p| (p.entries as f64, y(p))).collect()
    };
    let panels = vec![
        Panel {
            caption: "memory backend: time per decision",
            y_desc: "ns",
            series: vec![Series {
                label: "memory, ns/decision".to_owned(),
                colour: MEMORY,
                dashed: false,
                expected: "O(1) amortised",
                because: "a ring buffer: the oldest entry leaves, the new one joins",
                points: xy(&memory, |p| p.decision),
            }],
        },
        Panel {
            caption: "Redis: time per decision",
            y_desc: "µs",
            series: vec![
                Series {
                    label: "Redis, round trip, µs/decision".to_owned(),
                    colour: REDIS,
                    dashed: false,
                    expected: "O(log n)",
                    because: "the network round trip, then the script below",
                    points: xy(&on_redis, |p| p.decision),
                },
                Series {
                    label: "Redis, EVALSHA inside Redis, µs/call".to_owned(),
                    colour: REDIS_CPU,
                    dashed: false,
                    expected: "O(log n)",
                    because: "ZREMRANGEBYSCORE of one entry and ZADD, each O(log n)",
                    points: xy(&on_redis, |p| p.inside),
                },
            ],
        },
        Panel {
            caption: "Redis: memory per entry",
            y_desc: "bytes per entry",
            series: vec![Series {
                label: "Redis, MEMORY USAGE bytes/entry".to_owned(),
                colour: REDIS,
                dashed: false,
                expected: "O(1) per entry",
                because: "the key's own overhead spread over its entries, then about 30 B \
                          per entry as a listpack (up to 128), about 100 B as a skiplist",
                points: xy(&on_redis, |p| p.bytes_per_entry),
            }],
        },
    ];
    let mut notes = Curve::growth_notes(&panels);
    let encodings: Vec<String> = on_redis
        .iter()
        .map(|p| format!("{} at {}", p.encoding, p.entries))
        .collect();
    notes.push(format!(
        "Redis encoding of the key: {}",
        encodings.join(", ")
    ));
    Ok(Curve {
        file: "sliding_log",
        title: "sliding_log: entries in one key's window".to_owned(),
        x_desc: "entries per key",
        scale: Scale::Log10,
        panels,
        notes,
    })
}

/// One key at `entries` entries, timed over `checks` decisions; on Redis when `url` is given.
#[allow(clippy::cast_precision_loss)]
async fn point(url: Option<&str>, entries: usize, checks: usize) -> Result<Point, BoxError> {
    let step = Duration::from_millis(u64::try_from((WINDOW_MS / entries).max(1))?);
    let opts = [
        Opt::Int(i64::try_from(entries)?),
        Opt::Int(i64::try_from(WINDOW_MS / 1000)?),
    ];
    let clock = ManualClock::starting_now();
    let (limits, mut conn) = match url {
        Some(url) => {
            let mut conn = connect(url).await?;
            flushall(&mut conn).await?;
            let limits = PlugLimit::builder(plug_limit_tests::pool(url))
                .clock(clock.clone())
                .timeout(CHECK_TIMEOUT)
                .build()?;
            (limits, Some(conn))
        }
        None => (
            PlugLimit::builder(Store::memory())
                .clock(clock.clone())
                .timeout(CHECK_TIMEOUT)
                .build()?,
            None,
        ),
    };
    let key = format!("log-{entries}");
    let decide = Decide {
        limits: &limits,
        clock: &clock,
        step,
        key: &key,
        limit: &RuntimeLimit::new(LIMITER, opts)?,
    };
    for _ in 0..entries + SETTLE {
        decide.once().await?;
    }
    let before = match conn.as_mut() {
        Some(conn) => Some(Evalsha::now(conn).await?),
        None => None,
    };
    let mut times = Vec::new();
    for slice in slices(checks) {
        let started = Instant::now();
        for _ in 0..slice {
            decide.once().await?;
        }
        times.push(started.elapsed().as_nanos() as f64 / slice as f64);
    }
    let elapsed = median(times);
    let mut point = Point {
        entries,
        decision: elapsed,
        inside: 0.0,
        bytes_per_entry: 0.0,
        encoding: String::new(),
    };
    if let (Some(conn), Some(before)) = (conn.as_mut(), before) {
        point.decision /= 1e3;
        point.inside = before.usec_per_call_until(Evalsha::now(conn).await?);
        let (_, bytes, encoding) = only_key(conn).await?;
        point.bytes_per_entry = bytes as f64 / entries as f64;
        point.encoding = encoding;
        flushall(conn).await?;
        eprintln!(
            "  sliding_log, Redis:  {entries:>6} entries  {:>6.1} µs/decision  {:>5.2} µs in Redis  {:>5.0} B/entry ({})",
            point.decision, point.inside, point.bytes_per_entry, point.encoding
        );
    } else {
        eprintln!(
            "  sliding_log, memory: {entries:>6} entries  {:>6.0} ns/decision",
            point.decision
        );
    }
    Ok(point)
}

/// One decision on the log's key, a step of the clock after the last.
struct Decide<'a> {
    limits: &'a PlugLimit,
    clock: &'a ManualClock,
    step: Duration,
    key: &'a str,
    limit: &'a RuntimeLimit,
}

impl Decide<'_> {
    async fn once(&self) -> Result<(), BoxError> {
        self.clock.advance(self.step);
        let outcome = self.limits.check(self.limit, self.key).await?;
        if outcome.is_allowed() {
            Ok(())
        } else {
            Err(format!("{LIMITER} on {}: denied", self.key).into())
        }
    }
}
