//! The memory backend against Redis: random sequences of keys, costs and time steps must get
//! the same decision and the same header values from both, call for call, for every built-in.
//!
//! `concurrency` has a sequence of its own: takes, releases (sent after a response, awaited on
//! Redis) and expiries.
//!
//! Both decide by one shared `ManualClock`: the Redis scripts take it as their trailing `now`
//! argument, so time moves as fast as the test wants and no test sleeps.

use std::time::Duration;

use plug_limit::{ManualClock, Opt, Outcome, PlugLimit, RuntimeLimit, Store};
use plug_limit_tests::{RedisServer, stored_key, unique_prefix};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

use crate::streaming_bodies::eventually;
use plug_limit_tests::{limit, limit_cost};

/// Every built-in, with small limits and windows so that sequences cross every boundary.
const LIMITERS: [(&str, &[Opt]); 8] = [
    ("fixed_window", &[Opt::Int(3), Opt::Int(2)]),
    ("token_bucket", &[Opt::Int(5), Opt::Int(2), Opt::Int(2)]),
    ("sliding_window", &[Opt::Int(4), Opt::Int(2)]),
    ("sliding_log", &[Opt::Int(4), Opt::Int(2)]),
    ("leaky_bucket", &[Opt::Int(4), Opt::Int(2)]),
    ("gcra", &[Opt::Int(4), Opt::Int(2), Opt::Int(2)]),
    ("multi_window", &[Opt::Str("2/1"), Opt::Str("5/4")]),
    (
        "calendar_quota",
        &[Opt::Int(4), Opt::Str("day"), Opt::Int(-300)],
    ),
];

/// Calendar quotas whose periods end 6 seconds into a sequence that starts at
/// [`CALENDAR_START`]: a day, and a leap February, at UTC-05:00.
const CALENDAR: [(&str, &[Opt]); 2] = [
    (
        "calendar_quota",
        &[Opt::Int(3), Opt::Str("day"), Opt::Int(-300)],
    ),
    (
        "calendar_quota",
        &[Opt::Int(5), Opt::Str("month"), Opt::Int(-300)],
    ),
];

/// 2084-03-01T04:59:54Z, in a year whose expiries are never in a real Redis' past.
const CALENDAR_START: i64 = 3_602_725_194_000;

/// One call: which limiter, which of three keys, what cost, and how far the clock moves
/// first.
#[derive(Debug, Clone)]
struct Call {
    limiter: usize,
    key: u8,
    cost: Cost,
    advance_ms: u64,
}

/// A check's cost (0 is a peek), or a settlement: units given back or forced.
#[derive(Debug, Clone, Copy)]
enum Cost {
    Take(u32),
    Refund(u32),
    Force(u32),
    /// A batch's `~n` (fixed_window and token_bucket; a take of n for the others).
    UpTo(u32),
}

fn cost() -> impl Strategy<Value = Cost> {
    prop_oneof![
        3 => Just(Cost::Take(1)),
        1 => Just(Cost::Take(0)),
        1 => (2u32..4).prop_map(Cost::Take),
        1 => (1u32..4).prop_map(Cost::Refund),
        1 => (1u32..5).prop_map(Cost::Force),
        2 => prop_oneof![Just(i32::MAX as u32), 1u32..8].prop_map(Cost::UpTo),
        // Past every bound: a count's cap, a bucket's debt, a log's length.
        1 => prop_oneof![Just(i32::MAX as u32), 5u32..40].prop_map(Cost::Force),
        1 => prop_oneof![Just(i32::MAX as u32), 5u32..40].prop_map(Cost::Refund),
    ]
}

/// `cost` on `limits`: a check, or a settlement of a request reserved at 0 or at `n`.
async fn charge(
    limits: &PlugLimit,
    (limiter, key, opts): (&str, &str, &[Opt]),
    cost: Cost,
) -> Result<Outcome, plug_limit::Error> {
    match cost {
        Cost::UpTo(n) if batches(limiter) => limits.take_up_to(limit(limiter, opts), key, n).await,
        // A batch on a limiter without batches: a take of as many.
        Cost::Take(n) | Cost::UpTo(n) => limits.check(limit_cost(limiter, opts, n), key).await,
        Cost::Refund(n) => limits.settle(limit(limiter, opts), key, n, 0).await,
        Cost::Force(n) => limits.settle(limit(limiter, opts), key, 0, n).await,
    }
}

/// Whether `limiter` takes a batch's `~n`.
fn batches(limiter: &str) -> bool {
    matches!(limiter, "fixed_window" | "token_bucket")
}

fn call(limiters: usize) -> impl Strategy<Value = Call> {
    (
        0..limiters,
        0u8..3,
        cost(),
        prop_oneof![2 => Just(0u64), 3 => 1u64..400, 1 => 400u64..2_500],
    )
        .prop_map(|(limiter, key, cost, advance_ms)| Call {
            limiter,
            key,
            cost,
            advance_ms,
        })
}

fn render(outcome: &Outcome) -> (bool, Vec<String>) {
    let headers = outcome
        .headers()
        .iter()
        .map(|(name, value)| format!("{name}: {}", value.to_str().unwrap_or("<bytes>")))
        // A batch's granted units.
        .chain(outcome.extra().iter().map(|value| format!("{value:?}")))
        .collect();
    (outcome.is_allowed(), headers)
}

#[test]
fn memory_backend_agrees_with_redis_call_for_call() {
    // Scripts see the clock as `now`; it starts at the real time and only moves forward, so
    // the TTLs Redis keeps are never in its past.
    agree(&LIMITERS, ManualClock::starting_now);
}

#[test]
fn calendar_quotas_agree_across_the_ends_of_their_periods() {
    agree(&CALENDAR, || ManualClock::new(CALENDAR_START));
}

/// A Redis of the test's own, a runtime to drive both backends, and a runner of
/// `default_cases` sequences (`DIFFERENTIAL_CASES` sets another number).
fn harness(default_cases: u32) -> (RedisServer, tokio::runtime::Runtime, TestRunner) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let cases = std::env::var("DIFFERENTIAL_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default_cases);
    let runner = TestRunner::new(Config {
        cases,
        ..Config::default()
    });
    (RedisServer::start(), runtime, runner)
}

/// The same limits on `redis` and in memory, timed by `clock`, under a fresh prefix (returned
/// first) named after `test`.
fn both(redis: &RedisServer, clock: &ManualClock, test: &str) -> (String, PlugLimit, PlugLimit) {
    let prefix = unique_prefix(test);
    let build = |builder: plug_limit::Builder| {
        builder
            .prefix(prefix.clone())
            .clock(clock.clone())
            .build()
            .unwrap()
    };
    let on_redis = build(PlugLimit::builder(redis.pool()));
    let in_memory = build(PlugLimit::builder(Store::memory()));
    (prefix, on_redis, in_memory)
}

/// Random call sequences on `limiters`, each on fresh keys and a fresh `clock`, must get the
/// same answers from both backends.
fn agree(limiters: &[(&str, &[Opt])], clock: impl Fn() -> ManualClock) {
    let (redis, runtime, mut runner) = harness(1000);
    let strategy = proptest::collection::vec(call(limiters.len()), 1..60);
    runner
        .run(&strategy, |calls| {
            runtime.block_on(async {
                let clock = clock();
                let (_, on_redis, in_memory) = both(&redis, &clock, "diff");
                for (i, call) in calls.iter().enumerate() {
                    clock.advance(Duration::from_millis(call.advance_ms));
                    let (limiter, opts) = limiters[call.limiter];
                    let key = format!("k{}", call.key);
                    let redis_says = charge(&on_redis, (limiter, &key, opts), call.cost).await;
                    let memory_says = charge(&in_memory, (limiter, &key, opts), call.cost).await;
                    let redis_says = render(
                        &redis_says
                            .map_err(|e| TestCaseError::fail(format!("call {i} on redis: {e}")))?,
                    );
                    let memory_says =
                        render(&memory_says.map_err(|e| {
                            TestCaseError::fail(format!("call {i} in memory: {e}"))
                        })?);
                    prop_assert_eq!(
                        &redis_says,
                        &memory_says,
                        "call {} ({:?}) disagrees: redis {:?}, memory {:?}",
                        i,
                        call,
                        redis_says,
                        memory_says
                    );
                }
                Ok(())
            })
        })
        .unwrap();
}

/// One stacked call: each part's limiter, key and cost, and how far the clock moves first.
#[derive(Debug, Clone)]
struct StackCall {
    parts: Vec<(usize, u8, u32)>,
    advance_ms: u64,
}

impl StackCall {
    /// The key of each part.
    fn keys(&self) -> Vec<String> {
        self.parts
            .iter()
            .map(|(_, key, _)| format!("k{key}"))
            .collect()
    }

    /// The stack `check_all` takes, with the parts' `keys`.
    fn stack<'a>(&self, keys: &'a [String]) -> Vec<(RuntimeLimit, &'a str)> {
        self.parts
            .iter()
            .zip(keys)
            .map(|(&(limiter, _, cost), key)| {
                let (name, opts) = LIMITERS[limiter];
                (limit_cost(name, opts, cost), key.as_str())
            })
            .collect()
    }
}

fn stack_call() -> impl Strategy<Value = StackCall> {
    let part = (
        0..LIMITERS.len(),
        0u8..2,
        prop_oneof![3 => Just(1u32), 1 => Just(0u32), 1 => 2u32..4],
    );
    (
        proptest::collection::vec(part, 1..5),
        prop_oneof![2 => Just(0u64), 3 => 1u64..400, 1 => 400u64..2_500],
    )
        .prop_map(|(parts, advance_ms)| StackCall { parts, advance_ms })
}

/// Random stacks of every built-in, on two keys each (so parts of one stack often share a
/// key, and stacks share keys with each other): the stack script and its twin must agree on
/// every answer, and so on what each stack consumed or gave back.
#[test]
fn stacked_limits_agree_call_for_call() {
    let (redis, runtime, mut runner) = harness(500);
    let strategy = proptest::collection::vec(stack_call(), 1..40);
    runner
        .run(&strategy, |calls| {
            runtime.block_on(async {
                let clock = ManualClock::starting_now();
                let (_, on_redis, in_memory) = both(&redis, &clock, "diff-stack");
                for (i, call) in calls.iter().enumerate() {
                    clock.advance(Duration::from_millis(call.advance_ms));
                    let keys = call.keys();
                    let stack = call.stack(&keys);
                    let redis_says = on_redis
                        .check_all(&stack)
                        .await
                        .map_err(|e| TestCaseError::fail(format!("call {i} on redis: {e}")))?;
                    let memory_says = in_memory
                        .check_all(&stack)
                        .await
                        .map_err(|e| TestCaseError::fail(format!("call {i} in memory: {e}")))?;
                    let (redis_says, memory_says) = (render(&redis_says), render(&memory_says));
                    prop_assert_eq!(
                        &redis_says,
                        &memory_says,
                        "call {} ({:?}) disagrees: redis {:?}, memory {:?}",
                        i,
                        call,
                        redis_says,
                        memory_says
                    );
                }
                Ok(())
            })
        })
        .unwrap();
}

/// A denied stack gives back what the limits before the denying one took, by their own
/// refunds: the limits must then decide every later call as if the denied one never came.
/// The same random stacks run on two prefixes of one Redis, the second skipping each call the
/// first denied; every call both make must get the same answer from both.
#[test]
fn a_denied_stack_leaves_its_limits_as_if_it_never_came() {
    let (redis, runtime, mut runner) = harness(500);
    let strategy = proptest::collection::vec(stack_call(), 1..40);
    runner
        .run(&strategy, |calls| {
            runtime.block_on(async {
                let clock = ManualClock::starting_now();
                let (_, denied_too, _) = both(&redis, &clock, "undo-all");
                let (_, allowed_only, _) = both(&redis, &clock, "undo-allowed");
                let mut denials = 0;
                for (i, call) in calls.iter().enumerate() {
                    clock.advance(Duration::from_millis(call.advance_ms));
                    let keys = call.keys();
                    let stack = call.stack(&keys);
                    let first = denied_too
                        .check_all(&stack)
                        .await
                        .map_err(|e| TestCaseError::fail(format!("call {i}: {e}")))?;
                    if !first.is_allowed() {
                        denials += 1;
                        continue;
                    }
                    let second = allowed_only
                        .check_all(&stack)
                        .await
                        .map_err(|e| TestCaseError::fail(format!("call {i}: {e}")))?;
                    prop_assert_eq!(
                        render(&first),
                        render(&second),
                        "call {} ({:?}) after {} denied stacks",
                        i,
                        call,
                        denials
                    );
                }
                Ok(())
            })
        })
        .unwrap();
}

/// One step of a lease sequence: take a lease (cost 0 peeks), give one back, or let time pass.
#[derive(Debug, Clone)]
enum Step {
    Take { key: u8, cost: u32 },
    Release { index: usize },
    Wait { ms: u64 },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0u8..2, prop_oneof![3 => Just(1u32), 1 => Just(0u32), 1 => 2u32..4])
            .prop_map(|(key, cost)| Step::Take { key, cost }),
        2 => (0usize..8).prop_map(|index| Step::Release { index }),
        // Whole seconds too, so that leases end exactly at a call's time.
        1 => prop_oneof![1..2_000u64, (1..4u64).prop_map(|s| s * 1_000), (27..32u64).prop_map(|s| s * 1_000)]
            .prop_map(|ms| Step::Wait { ms }),
    ]
}

/// Random sequences of takes, releases and waits must get the same answers from the script on
/// Redis and its native twin, call for call; a release's effect is awaited on Redis (it is sent
/// after the response, off the request's path) against a count kept by the test itself.
#[test]
fn memory_backend_agrees_with_redis_lease_for_lease() {
    const LEASE_OPTS: [Opt; 2] = [Opt::Int(3), Opt::Int(30)];
    let (redis, runtime, mut runner) = harness(200);
    let strategy = proptest::collection::vec(step(), 1..40);
    runner
        .run(&strategy, |steps| {
            runtime.block_on(async {
                let clock = ManualClock::new(CALENDAR_START);
                let (prefix, on_redis, in_memory) = both(&redis, &clock, "lease-diff");
                // The leases held: both backends' outcomes, the key, the cost, when taken.
                let mut held_leases = Vec::new();
                for (i, step) in steps.iter().enumerate() {
                    match *step {
                        Step::Take { key, cost } => {
                            let key = format!("k{key}");
                            let fail = |at: &str, e: plug_limit::Error| {
                                TestCaseError::fail(format!("step {i} on {at}: {e}"))
                            };
                            let redis_says = on_redis
                                .check(limit_cost("concurrency", &LEASE_OPTS, cost), &key)
                                .await
                                .map_err(|e| fail("redis", e))?;
                            let memory_says = in_memory
                                .check(limit_cost("concurrency", &LEASE_OPTS, cost), &key)
                                .await
                                .map_err(|e| fail("memory", e))?;
                            prop_assert_eq!(
                                render(&redis_says),
                                render(&memory_says),
                                "step {} ({:?})",
                                i,
                                step
                            );
                            if redis_says.is_allowed() && cost > 0 {
                                held_leases.push((
                                    redis_says,
                                    memory_says,
                                    key,
                                    cost,
                                    clock.now_ms(),
                                ));
                            }
                        }
                        Step::Release { index } if !held_leases.is_empty() => {
                            let (on_redis, in_memory, key, _, _) =
                                held_leases.remove(index % held_leases.len());
                            drop((on_redis, in_memory));
                            let now = clock.now_ms();
                            let live: i64 = held_leases
                                .iter()
                                .filter(|lease| lease.2 == key && lease.4 + 30_000 > now)
                                .map(|lease| i64::from(lease.3))
                                .sum();
                            let stored = stored_key(&prefix, "concurrency", "3,30", "", &key);
                            eventually("the release lands in Redis", async || {
                                let mut conn = redis.connection().await;
                                let count: i64 = plug_limit::redis::cmd("ZCOUNT")
                                    .arg(&stored)
                                    .arg(format!("({now}"))
                                    .arg("+inf")
                                    .query_async(&mut conn)
                                    .await
                                    .unwrap();
                                count == live
                            })
                            .await;
                        }
                        Step::Release { .. } => {}
                        Step::Wait { ms } => clock.advance(Duration::from_millis(ms)),
                    }
                }
                Ok(())
            })
        })
        .unwrap();
}
