//! Waiting that does not multiply the load: instances whose layer waits up to 300 ms before
//! its 429 (`RateLimitLayer::runtime(..).wait_up_to(..)`) on one `token_bucket` of 1,000 a
//! second (options `[10001, 10, 1]`, one key for everyone), each on its own pool straight to
//! one Redis on loopback, under an open-loop load of 3,000 requests a second (sent on a clock,
//! not one after another) for 10 s; with one instance and with six.
//!
//! Run: `cargo bench -p plug_limit_bench --bench waiting` (about 30 seconds). It prints, for
//! each, the script calls a request, what the failure policy passed, the slowest answer
//! against the bound and the timeout, the admitted per second against the limit, and how many
//! requests of an instance were admitted before one that came a millisecond or more earlier
//! (overtakes; closer than that, the runtime's polling orders them).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::{Router, routing::get};
use plug_limit::{PlugLimit, RateLimitLayer, RuntimeLimit, key};
use plug_limit_tests::{RedisServer, unique_prefix};
use tokio::time::Instant;
use tower_service::Service;

const PER_SECOND: u32 = 3_000;
const FOR: Duration = Duration::from_secs(10);
const BOUND: Duration = Duration::from_millis(300);
const TIMEOUT: Duration = Duration::from_millis(500);
const LIMIT: f64 = 1_000.0;

/// One request: which instance, when it was due and when it was answered, and what it got.
#[derive(Debug, Clone, Copy)]
struct Record {
    instance: usize,
    at: Duration,
    answered: Duration,
    admitted: bool,
    /// A 200 without rate-limit headers: let through by a failure policy.
    passed: bool,
    /// An admitted one's `x-ratelimit-remaining`: the limit counts down one by one, so it
    /// orders the admissions as Redis made them.
    remaining: i64,
}

fn instance(redis: &RedisServer, prefix: &str) -> Router {
    let limits = PlugLimit::builder(redis.pool())
        .prefix(prefix)
        .key(key::global())
        .timeout(TIMEOUT)
        .build()
        .expect("the benchmark's limits");
    let limit = RuntimeLimit::new("token_bucket", [10_001, 10, 1]).expect("a limit");
    let layer = RateLimitLayer::runtime(limits, limit)
        .expect("a layer")
        .wait_up_to(BOUND);
    Router::new()
        .route("/", get(|| async { "ok" }))
        .route_layer(layer)
}

async fn run(redis: &RedisServer, instances: usize) -> (Vec<Record>, u64) {
    let prefix = unique_prefix("waiting");
    let apps: Vec<Router> = (0..instances).map(|_| instance(redis, &prefix)).collect();
    let before = redis.script_calls().await;
    let records = Arc::new(Mutex::new(Vec::new()));
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0_u32.. {
        let at = Duration::from_secs(1) * i / PER_SECOND;
        if at >= FOR {
            break;
        }
        let instance = i as usize % instances;
        tokio::time::sleep_until(start + at).await;
        let mut app = apps[instance].clone();
        let records = Arc::clone(&records);
        tasks.spawn(async move {
            let request = http::Request::get("/")
                .body(axum::body::Body::empty())
                .expect("a request");
            let response = app.call(request).await.expect("an infallible router");
            let answered = start.elapsed();
            let limited = response.headers().contains_key("x-ratelimit-limit");
            let remaining = response
                .headers()
                .get("x-ratelimit-remaining")
                .and_then(|value| value.to_str().ok()?.parse().ok())
                .unwrap_or(i64::MIN);
            let status = response.status();
            records.lock().expect("records").push(Record {
                instance,
                at,
                answered,
                admitted: status == 200 && limited,
                passed: status == 200 && !limited,
                remaining,
            });
        });
        while tasks.try_join_next().is_some() {}
    }
    while tasks.join_next().await.is_some() {}
    let calls = redis.script_calls().await - before;
    let mut records = std::mem::take(&mut *records.lock().expect("records"));
    records.sort_by_key(|record| record.at);
    (records, calls)
}

/// Admitted requests of one instance admitted before one that came at least `apart` earlier,
/// in the order Redis admitted them (each admission's `remaining` is one less than the one
/// before): requests a few hundred microseconds apart reach the limiter in the order the
/// runtime polls their tasks, which is not always the order they were sent in.
fn overtakes(records: &[Record], instance: usize, apart: Duration) -> usize {
    // The limit's window is 10 s, begun by the first request: its remaining starts again in
    // the next, where the run ends; the first 9 s are within one window.
    let admitted: Vec<&Record> = records
        .iter()
        .filter(|record| record.instance == instance && record.admitted)
        .filter(|record| record.at < Duration::from_secs(9))
        .collect();
    let (mut overtaken, mut earlier, mut last_admitted) = (0, 0, i64::MAX);
    for record in &admitted {
        // The last admitted (the least remaining) of those that came `apart` or more before
        // this one: admitted after this one when it left more remaining.
        while earlier < admitted.len() && admitted[earlier].at + apart <= record.at {
            last_admitted = last_admitted.min(admitted[earlier].remaining);
            earlier += 1;
        }
        if record.remaining > last_admitted {
            overtaken += 1;
        }
    }
    overtaken
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let redis = RedisServer::start();
    println!(
        "| instances | requests | script calls a request | passed by the policy | slowest answer | admitted a second (min, mean, max; seconds 1-9) | overtakes by 5 ms or more (by 1 ms or more) |"
    );
    println!("|---:|---:|---:|---:|---:|---|---|");
    for instances in [1, 6] {
        let (records, calls) = run(&redis, instances).await;
        #[allow(clippy::cast_precision_loss)]
        let per_request = calls as f64 / records.len() as f64;
        let passed = records.iter().filter(|record| record.passed).count();
        let slowest = records
            .iter()
            .map(|record| record.answered - record.at)
            .max()
            .unwrap_or_default();
        let mut seconds = [0_usize; 10];
        for record in records.iter().filter(|record| record.admitted) {
            let second = usize::try_from(record.answered.as_secs()).expect("a second");
            if let Some(count) = seconds.get_mut(second) {
                *count += 1;
            }
        }
        let steady = &seconds[1..9];
        #[allow(clippy::cast_precision_loss)]
        let mean = steady.iter().sum::<usize>() as f64 / steady.len() as f64;
        let overtaken = |apart| -> usize {
            (0..instances)
                .map(|i| overtakes(&records, i, Duration::from_millis(apart)))
                .sum()
        };
        println!(
            "| {instances} | {} | {per_request:.2} | {passed} | {:.0} ms (bound {} ms, timeout {} ms) | {}, {mean:.0} ({:+.1}% of the limit), {} | {} ({}) |",
            records.len(),
            slowest.as_secs_f64() * 1e3,
            BOUND.as_millis(),
            TIMEOUT.as_millis(),
            steady.iter().min().copied().unwrap_or(0),
            (mean / LIMIT - 1.0) * 100.0,
            steady.iter().max().copied().unwrap_or(0),
            overtaken(5),
            overtaken(1),
        );
    }
}
