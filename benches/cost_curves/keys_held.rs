//! Keys held: the time of a check and the memory of a key as the number of keys with live
//! state grows, in memory (1k to 10M) and on Redis (1k to 1M).
//!
//! The limiter is `fixed_window` with a limit never reached and an hour's window, so every
//! key stays live and every check is a full allow. Each point adds keys up to its count (one
//! new key per check), then times checks of keys drawn at random from those held: the
//! lookups a busy service makes, whose cache misses grow with the table.

use std::sync::LazyLock;
use std::time::Instant;

use futures_util::future::join_all;

use plug_limit::{ManualClock, Opt, Outcome, PlugLimit, RuntimeLimit, Store};
use plug_limit_tests::RedisServer;
use tokio::runtime::Runtime;

use crate::curve::{Curve, MEMORY, Panel, REDIS, REDIS_CPU, Scale, Series, median, slices};
use crate::redis_stats::{Evalsha, connect, flushall, used_memory};
use crate::settings::Settings;
use crate::{BoxError, CHECK_TIMEOUT};

const LIMITER: &str = "fixed_window";
const OPTS: &[Opt] = &[Opt::Int(1_000_000_000), Opt::Int(3600)];
/// [`LIMITER`] with [`OPTS`], made once.
static LIMIT: LazyLock<RuntimeLimit> =
    LazyLock::new(|| RuntimeLimit::new(LIMITER, OPTS.iter().cloned()).expect("a valid limit"));
/// Checks in flight while Redis is filled: the fill is setup, not measured.
const FILL_BATCH: usize = 256;

struct Point {
    keys: usize,
    /// Time per check of a held key: ns in memory, µs on Redis (round trip, one at a time).
    check: f64,
    /// Memory: ns per check of a new key. Redis: `EVALSHA`'s µs inside Redis.
    other: f64,
    bytes_per_key: f64,
}

pub(crate) fn curve(
    settings: &Settings,
    runtime: &Runtime,
    redis: &RedisServer,
) -> Result<Curve, BoxError> {
    let memory = runtime.block_on(memory_points(settings))?;
    let redis = runtime.block_on(redis_points(settings, &redis.url()))?;
    let series = |label: &str, colour, dashed, expected, because, points: Vec<(f64, f64)>| Series {
        label: label.to_owned(),
        colour,
        dashed,
        expected,
        because,
        points,
    };
    #[allow(clippy::cast_precision_loss)]
    let xy = |points: &[Point], y: fn(&Point) -> f64| -> Vec<(f64, f64)> {
        points.iter().map(|p| (p.keys as f64, y(p))).collect()
    };
    let panels = vec![
        Panel {
            caption: "memory backend: time per check",
            y_desc: "ns",
            series: vec![
                series(
                    "memory, held key, ns/check",
                    MEMORY,
                    false,
                    "O(1)",
                    "one lookup in a hashed, sharded map",
                    xy(&memory, |p| p.check),
                ),
                series(
                    "memory, new key, ns/check",
                    MEMORY,
                    true,
                    "O(1) amortised",
                    "an insert; the table doubles now and then",
                    xy(&memory, |p| p.other),
                ),
            ],
        },
        Panel {
            caption: "Redis: time per check",
            y_desc: "µs",
            series: vec![
                series(
                    "Redis, round trip, µs/check",
                    REDIS,
                    false,
                    "O(1)",
                    "INCR and TTL on one key of Redis' hash table",
                    xy(&redis, |p| p.check),
                ),
                series(
                    "Redis, EVALSHA inside Redis, µs/call",
                    REDIS_CPU,
                    true,
                    "O(1)",
                    "the same two commands whatever the key count",
                    xy(&redis, |p| p.other),
                ),
            ],
        },
        Panel {
            caption: "memory per key",
            y_desc: "bytes per key",
            series: vec![
                series(
                    "memory, RSS bytes/key",
                    MEMORY,
                    false,
                    "O(1) per key",
                    "one entry per key: O(n) in all",
                    xy(&memory, |p| p.bytes_per_key),
                ),
                series(
                    "Redis, used_memory bytes/key",
                    REDIS,
                    false,
                    "O(1) per key",
                    "one string with a TTL per key",
                    xy(&redis, |p| p.bytes_per_key),
                ),
            ],
        },
    ];
    Ok(Curve {
        file: "keys_held",
        title: "Keys held: fixed_window, every key live".to_owned(),
        x_desc: "keys held",
        scale: Scale::Log10,
        notes: Curve::growth_notes(&panels),
        panels,
    })
}

fn allowed(outcome: &Outcome) -> Result<(), BoxError> {
    if outcome.is_allowed() {
        Ok(())
    } else {
        Err("a check that should allow was denied".into())
    }
}

/// `client-{i}` into `key`, reusing its buffer.
fn client_key(key: &mut String, i: usize) {
    use std::fmt::Write;
    key.clear();
    let _ = write!(key, "client-{i}");
}

/// A small, fast generator: which held key the next check hits.
pub(crate) struct XorShift(u64);

impl XorShift {
    pub(crate) fn new() -> Self {
        Self(0x9E37_79B9_7F4A_7C15)
    }

    #[allow(clippy::cast_possible_truncation)]
    pub(crate) fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// Resident memory in bytes (Linux `/proc/self/statm`).
fn resident() -> Result<u64, BoxError> {
    let statm = std::fs::read_to_string("/proc/self/statm")?;
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .ok_or("statm without a resident field")?
        .parse()?;
    Ok(pages * 4096)
}

#[allow(clippy::cast_precision_loss)]
async fn memory_points(settings: &Settings) -> Result<Vec<Point>, BoxError> {
    // A clock far from any expiry: every key stays live, and nothing is swept.
    let limits = PlugLimit::builder(Store::memory())
        .clock(ManualClock::starting_now())
        .memory_capacity(usize::MAX)
        .timeout(CHECK_TIMEOUT)
        .build()?;
    // The first check allocates what every later one reuses: not a key's memory.
    allowed(&limits.check(&*LIMIT, "warm-up").await?)?;
    let base = resident()?;
    let (mut held, mut key, mut rng) = (0, String::new(), XorShift::new());
    let mut points = Vec::new();
    for &keys in &settings.memory_keys {
        let started = Instant::now();
        for i in held..keys {
            client_key(&mut key, i);
            allowed(&limits.check(&*LIMIT, key.as_str()).await?)?;
        }
        let insert = started.elapsed().as_nanos() as f64 / (keys - held) as f64;
        held = keys;
        let grown = resident()?.saturating_sub(base);
        let mut times = Vec::new();
        for slice in slices(settings.memory_checks) {
            let started = Instant::now();
            for _ in 0..slice {
                client_key(&mut key, rng.below(keys));
                allowed(&limits.check(&*LIMIT, key.as_str()).await?)?;
            }
            times.push(started.elapsed().as_nanos() as f64 / slice as f64);
        }
        let check = median(times);
        let bytes_per_key = grown as f64 / keys as f64;
        eprintln!(
            "  keys held, memory: {keys:>9} keys  {check:>6.0} ns/check  {insert:>6.0} ns/new key  {bytes_per_key:>5.0} B/key"
        );
        points.push(Point {
            keys,
            check,
            other: insert,
            bytes_per_key,
        });
    }
    Ok(points)
}

#[allow(clippy::cast_precision_loss)]
async fn redis_points(settings: &Settings, url: &str) -> Result<Vec<Point>, BoxError> {
    let limits = PlugLimit::builder(plug_limit_tests::pool(url))
        .timeout(CHECK_TIMEOUT)
        .build()?;
    let mut conn = connect(url).await?;
    flushall(&mut conn).await?;
    // Loads the script and opens the library's connection before the baseline.
    allowed(&limits.check(&*LIMIT, "warm-up").await?)?;
    let base = used_memory(&mut conn).await?;
    let (mut held, mut key, mut rng) = (0, String::new(), XorShift::new());
    let mut points = Vec::new();
    for &keys in &settings.redis_keys {
        while held < keys {
            let batch: Vec<String> = (held..keys.min(held + FILL_BATCH))
                .map(|i| format!("client-{i}"))
                .collect();
            let checks = batch.iter().map(|k| limits.check(&*LIMIT, k.as_str()));
            for outcome in join_all(checks).await {
                allowed(&outcome?)?;
            }
            held += batch.len();
        }
        let grown = used_memory(&mut conn).await?.saturating_sub(base);
        let before = Evalsha::now(&mut conn).await?;
        let mut times = Vec::new();
        for slice in slices(settings.redis_checks) {
            let started = Instant::now();
            for _ in 0..slice {
                client_key(&mut key, rng.below(keys));
                allowed(&limits.check(&*LIMIT, key.as_str()).await?)?;
            }
            times.push(started.elapsed().as_nanos() as f64 / 1e3 / slice as f64);
        }
        let check = median(times);
        let inside = before.usec_per_call_until(Evalsha::now(&mut conn).await?);
        let bytes_per_key = grown as f64 / keys as f64;
        eprintln!(
            "  keys held, Redis:  {keys:>9} keys  {check:>6.1} µs/check  {inside:>5.2} µs in Redis  {bytes_per_key:>5.0} B/key"
        );
        points.push(Point {
            keys,
            check,
            other: inside,
            bytes_per_key,
        });
    }
    flushall(&mut conn).await?;
    Ok(points)
}
