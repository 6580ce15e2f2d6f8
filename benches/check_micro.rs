//! One check of the memory backend against one check of `governor`'s keyed limiter, in
//! nanoseconds, with criterion.
//!
//! ```text
//! cargo bench -p plug_limit_bench --bench check_micro
//! ```
//!
//! The library is measured through its public API, `PlugLimit::check` on
//! `PlugLimit::builder(Store::memory())` with the default settings, which is the whole of a
//! programmatic check: the limiter's lookup, its span, the namespaced key (its hash tag and the
//! composed string), the memory backend's shard, the native twin of the Lua script, and the
//! `Outcome` with its header values. With `--features metrics`, its metrics too (no recorder
//! installed). `governor`'s peer is a
//! `DefaultKeyedRateLimiter<String>`: a `DashMap` of one atomic GCRA state per key, with
//! std's SipHash (the hasher the memory backend uses too) and the `quanta` clock, checked with
//! `check_key`. Both allow every request (a limit of 10^9), so every check is a full allow.
//!
//! Three cases, each a criterion group of three functions (`governor`, `fixed_window`, `gcra`)
//! run one after the other:
//!
//! - `hit`: one key, already counted, checked again and again;
//! - `new_key`: a key never seen, each time. A fresh limiter takes over every
//!   [`FRESH_KEYS`] keys (outside the timing), so every check inserts into a map of
//!   0..[`FRESH_KEYS`] keys whatever the sample size;
//! - `1m_keys`: a key among [`MANY_KEYS`] already counted, in a shuffled order, so that most
//!   checks miss the CPU caches. The library's `memory_capacity` is raised above its default
//!   (one million) for this case, so that no shard evicts, and `gcra` takes options under which
//!   every key's state outlives the run ([`GCRA_HELD`]).
//!
//! Keys are made before the timing. After criterion's own report, a table prints each
//! function's median time per check and its ratio to `governor`'s in the same case, read back
//! from criterion's `estimates.json` of this run; a function filtered out reads `n/a`.
//! Criterion's arguments work as usual (`cargo bench -p plug_limit_bench --bench check_micro -- hit`,
//! `--measurement-time 10`, ...).

#[path = "criterion_results.rs"]
mod criterion_results;

use std::cell::OnceCell;
use std::future::Future as _;
use std::hint::black_box;
use std::num::NonZeroU32;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use criterion::Criterion;
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use plug_limit::{Opt, PlugLimit, RuntimeLimit, Store};

/// Never reached: every check is an allow.
const LIMIT: u32 = 1_000_000_000;
const WINDOW: i64 = 3600;
/// The keys a limiter of the `new_key` case takes before a fresh one replaces it.
const FRESH_KEYS: usize = 100_000;
/// The library's default `memory_capacity`.
const DEFAULT_CAPACITY: usize = 1_000_000;
/// The keys of the `1m_keys` case.
const MANY_KEYS: usize = 1_000_000;

const FIXED_WINDOW: &[Opt] = &[Opt::Int(LIMIT as i64), Opt::Int(WINDOW)];
const GCRA: &[Opt] = &[
    Opt::Int(LIMIT as i64),
    Opt::Int(WINDOW),
    Opt::Int(LIMIT as i64),
];

/// `gcra` for the `1m_keys` case: one emission every 10 s, with a burst of 3,600, so that each
/// key's state outlives the run (a few checks of each key a second, thousands allowed). Under
/// [`GCRA`]'s one emission every 3.6 µs, a key's state expires a millisecond after its check, as
/// it should: a key held there would be a new key again on its next check, and the case would
/// time a small map.
const GCRA_HELD: &[Opt] = &[Opt::Int(3_600), Opt::Int(36_000), Opt::Int(3_600)];

/// The functions of a case, in the order they run and print.
const FUNCTIONS: [&str; 3] = ["governor", "fixed_window", "gcra"];
const CASES: [&str; 3] = ["hit", "new_key", "1m_keys"];

/// One of the two sides: how to make an empty limiter, and one check of a key.
#[derive(Debug, Clone, Copy)]
enum Side {
    Governor,
    Memory(&'static str, &'static [Opt]),
}

enum Limiter {
    Governor(DefaultKeyedRateLimiter<String>),
    Memory(PlugLimit, RuntimeLimit),
}

impl Side {
    fn of(function: &str) -> Self {
        match function {
            "fixed_window" => Self::Memory("fixed_window", FIXED_WINDOW),
            "gcra" => Self::Memory("gcra", GCRA),
            _ => Self::Governor,
        }
    }

    fn limiter(self, memory_capacity: usize) -> Limiter {
        match self {
            // One cell a nanosecond with a burst of LIMIT, as `http_load`'s `tower_governor`.
            Self::Governor => Limiter::Governor(RateLimiter::keyed(
                Quota::with_period(Duration::from_nanos(1))
                    .expect("a non-zero period")
                    .allow_burst(NonZeroU32::new(LIMIT).expect("a non-zero burst")),
            )),
            Self::Memory(name, opts) => Limiter::Memory(
                PlugLimit::builder(Store::memory())
                    .memory_capacity(memory_capacity)
                    .build()
                    .expect("a memory limiter"),
                RuntimeLimit::new(name, opts.iter().cloned()).expect("a valid limit"),
            ),
        }
    }
}

impl Limiter {
    /// One check of `key`, which must be allowed.
    #[inline]
    fn check(&self, key: &String) {
        match self {
            Self::Governor(limiter) => {
                let allowed = limiter.check_key(key).is_ok();
                assert!(black_box(allowed), "governor denied {key}");
            }
            Self::Memory(limits, limit) => {
                // A memory check never waits: one poll decides it, with no runtime around it.
                let future = pin!(limits.check(limit, key.as_str()));
                let Poll::Ready(result) = future.poll(&mut Context::from_waker(Waker::noop()))
                else {
                    panic!("a memory check waited");
                };
                let outcome = result.expect("a memory check");
                assert!(
                    black_box(&outcome).is_allowed(),
                    "{} denied {key}",
                    limit.limiter()
                );
            }
        }
    }
}

fn keys(prefix: &str, count: usize) -> Vec<String> {
    (0..count).map(|i| format!("{prefix}-{i}")).collect()
}

/// `0..n` shuffled by a fixed xorshift, the same order for every function.
fn shuffled(n: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in (1..n).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        // The remainder is below n, which is a usize.
        #[allow(clippy::cast_possible_truncation)]
        let j = (state % (i as u64 + 1)) as usize;
        order.swap(i, j);
    }
    order
}

/// Times `iters` checks, each of the next key of `order`, from `cursor` on (wrapping).
fn time_keys(
    limiter: &Limiter,
    keys: &[String],
    order: &[usize],
    cursor: &mut usize,
    iters: u64,
) -> Duration {
    let start = Instant::now();
    for _ in 0..iters {
        limiter.check(&keys[order[*cursor]]);
        *cursor += 1;
        if *cursor == order.len() {
            *cursor = 0;
        }
    }
    start.elapsed()
}

/// Times `iters` checks of keys never seen, from `cursor` on; once `keys` are spent, a fresh
/// limiter takes over, made (and the old one dropped) outside the timing.
fn time_fresh_keys(
    side: Side,
    limiter: &mut Limiter,
    keys: &[String],
    cursor: &mut usize,
    iters: u64,
) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        if *cursor == keys.len() {
            *limiter = side.limiter(DEFAULT_CAPACITY);
            *cursor = 0;
        }
        let batch = (keys.len() - *cursor).min(usize::try_from(left).unwrap_or(usize::MAX));
        let start = Instant::now();
        for key in &keys[*cursor..*cursor + batch] {
            limiter.check(key);
        }
        total += start.elapsed();
        *cursor += batch;
        left -= batch as u64;
    }
    total
}

// Criterion calls a function's closure once per sample: every limiter is made and filled on
// the first call, and kept across the others; a function filtered out makes none.
fn benches(c: &mut Criterion) {
    let mut group = c.benchmark_group("hit");
    for function in FUNCTIONS {
        let key = "client-0".to_owned();
        let limiter = OnceCell::new();
        group.bench_function(function, |b| {
            let limiter = limiter.get_or_init(|| {
                let limiter = Side::of(function).limiter(DEFAULT_CAPACITY);
                limiter.check(&key);
                limiter
            });
            b.iter(|| limiter.check(black_box(&key)));
        });
    }
    group.finish();

    let fresh = OnceCell::new();
    let mut group = c.benchmark_group("new_key");
    for function in FUNCTIONS {
        let side = Side::of(function);
        let mut state = None;
        group.bench_function(function, |b| {
            let fresh = fresh.get_or_init(|| keys("fresh", FRESH_KEYS));
            let (limiter, cursor) =
                state.get_or_insert_with(|| (side.limiter(DEFAULT_CAPACITY), 0));
            b.iter_custom(|iters| time_fresh_keys(side, limiter, fresh, cursor, iters));
        });
    }
    group.finish();

    let many = OnceCell::new();
    let mut group = c.benchmark_group("1m_keys");
    for function in FUNCTIONS {
        let mut state = None;
        group.bench_function(function, |b| {
            let (keys, order) =
                many.get_or_init(|| (keys("client", MANY_KEYS), shuffled(MANY_KEYS)));
            let (limiter, cursor) = state.get_or_insert_with(|| {
                let side = match Side::of(function) {
                    Side::Memory("gcra", _) => Side::Memory("gcra", GCRA_HELD),
                    side => side,
                };
                let limiter = side.limiter(4 * MANY_KEYS);
                for key in keys {
                    limiter.check(key);
                }
                (limiter, 0)
            });
            b.iter_custom(|iters| time_keys(limiter, keys, order, cursor, iters));
        });
    }
    group.finish();
}

/// `--count <function> <checks>`: that many `hit` checks of one function outside criterion, in
/// [`measured`], for callgrind to count their instructions (`valgrind --tool=callgrind
/// --collect-atstart=no --toggle-collect='check_micro::measured*'`): a figure that does not
/// move with the machine's load.
fn count(function: &str, checks: usize) {
    assert!(FUNCTIONS.contains(&function), "unknown function {function}");
    let key = "client-0".to_owned();
    let limiter = Side::of(function).limiter(DEFAULT_CAPACITY);
    // The key's first count, and `governor`'s clock calibrating itself, fall outside the count.
    for _ in 0..1_000 {
        limiter.check(&key);
    }
    measured(&limiter, &key, checks);
}

/// The checks `--count` counts the instructions of: nothing else runs inside.
#[inline(never)]
fn measured(limiter: &Limiter, key: &String, checks: usize) {
    for _ in 0..checks {
        limiter.check(black_box(key));
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let [_, flag, function, checks] = args.as_slice()
        && flag == "--count"
    {
        count(function, checks.parse().expect("a number of checks"));
        return;
    }
    let Some(run) = criterion_results::run(benches) else {
        return;
    };
    println!();
    println!(
        "| case | governor ns/check | fixed_window ns/check | ratio | gcra ns/check | ratio |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for case in CASES {
        let [governor, fixed_window, gcra] =
            FUNCTIONS.map(|function| run.median_ns(case, function));
        let ns =
            |value: Option<f64>| value.map_or_else(|| "n/a".to_owned(), |ns| format!("{ns:.0}"));
        let ratio = |value: Option<f64>| match (value, governor) {
            (Some(ours), Some(peer)) => format!("{:.2}x", ours / peer),
            _ => "n/a".to_owned(),
        };
        println!(
            "| {case} | {} | {} | {} | {} | {} |",
            ns(governor),
            ns(fixed_window),
            ratio(fixed_window),
            ns(gcra),
            ratio(gcra),
        );
    }
    println!(
        "ratio: the library's ns per check over governor's (lower is faster; benches/README.md gives each case's target and what bounds it)"
    );
    criterion_results::print_conditions();
}
