//! Waiting instead of refusing: `PlugLimit::acquire` and `RateLimitLayer::wait_up_to`, on real
//! time (the waits are the subject), each test a few seconds at most.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::{Router, routing::get};
use futures_util::future::join_all;
use plug_limit::{Gcra, Opt, Outcome, PlugLimit, RateLimitLayer, SlidingLog, key};
use plug_limit_tests::{RedisServer, backends, get as send_get, limit, unique_prefix};
use tokio::time::Instant;

fn remaining(outcome: &Outcome) -> &str {
    outcome
        .header("x-ratelimit-remaining")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("<none>")
}

/// The issue's case: 5 workers on 2 instances (two handles on one Redis, as two processes
/// would be) share a third-party API's 20 calls a second for 3 s. Each loops `acquire` with a
/// wait as long as the run, and the run ends by dropping the calls still waiting. gcra with a
/// burst of 5, 4 of them spent as the clock starts: one call at once, then one every 50 ms (60
/// slots in [0, 3 s)), and a retry up to 200 ms late (a loaded machine) still finds its slot,
/// as the unspent burst keeps what a late one would lose.
/// 20 calls a second, 5 at once.
type Partner = Gcra<20, 1, 5>;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_workers_on_two_instances_share_twenty_a_second_without_a_refusal() {
    let redis = RedisServer::start();
    let prefix = unique_prefix("outbound");
    let instance = || {
        PlugLimit::builder(redis.pool())
            .prefix(&prefix)
            .build()
            .unwrap()
    };
    let instances = [instance(), instance()];
    // Connected and scripts loaded before the clock starts.
    for limits in &instances {
        limits.peek(Partner::default(), "warm-up").await.unwrap();
    }
    let run = Duration::from_secs(3);
    let spent = plug_limit::RuntimeLimit::from(Partner::default())
        .cost(4)
        .unwrap();
    assert!(
        instances[0]
            .check(&spent, "partner-api")
            .await
            .unwrap()
            .is_allowed()
    );
    let started = Instant::now();
    let admitted: Arc<Mutex<Vec<Duration>>> = Arc::default();
    let refused: Arc<Mutex<u32>> = Arc::default();
    let workers = (0..5).map(|worker| {
        let limits = instances[worker % 2].clone();
        let (admitted, refused) = (Arc::clone(&admitted), Arc::clone(&refused));
        tokio::spawn(async move {
            let calls = async {
                loop {
                    let outcome = limits
                        .acquire(Partner::default(), "partner-api", run)
                        .await
                        .unwrap();
                    if outcome.is_allowed() {
                        admitted.lock().unwrap().push(started.elapsed());
                    } else {
                        *refused.lock().unwrap() += 1;
                    }
                }
            };
            // The end of the run drops the call waiting then: it counts nothing further.
            let _ = tokio::time::timeout_at(started + run, calls).await;
        })
    });
    for worker in join_all(workers).await {
        worker.unwrap();
    }
    let admitted = admitted.lock().unwrap().clone();
    assert_eq!(*refused.lock().unwrap(), 0, "a call gave up waiting");
    assert!(
        (59..=61).contains(&admitted.len()),
        "{} calls admitted in 3 s",
        admitted.len()
    );
    // Spread over the run at the limit's pace: 10 calls each half second, never a second's
    // worth at once.
    let mut halves = [0; 6];
    for at in &admitted {
        let half = usize::try_from(at.as_millis() / 500).unwrap().min(5);
        halves[half] += 1;
    }
    assert!(
        halves.iter().all(|calls| (8..=12).contains(calls)),
        "calls per half second: {halves:?}"
    );
}

/// A waiter dropped while it waits takes nothing: the unit that frees during its wait is
/// still there after, on both backends.
#[tokio::test]
async fn a_dropped_waiter_counts_nothing() {
    let redis = RedisServer::start();
    // Two a second, two at once: one unit back each 500 ms.
    let opts = [Opt::Int(2), Opt::Int(1), Opt::Int(2)];
    for (backend, limits) in backends(&redis, |b| b) {
        let bucket = limit("gcra", &opts);
        for _ in 0..2 {
            assert!(limits.check(&bucket, "k").await.unwrap().is_allowed());
        }
        let waiter = limits.acquire(&bucket, "k", Duration::from_secs(3));
        // Dropped 100 ms into its wait, long before a unit comes back (at 500 ms).
        let dropped = tokio::time::timeout(Duration::from_millis(100), waiter).await;
        assert!(dropped.is_err(), "{backend}: the waiter ended early");
        tokio::time::sleep(Duration::from_millis(650)).await;
        // One unit came back and nobody took it: were the waiter still going, it would have
        // taken it at 500 ms.
        let after = limits.peek(&bucket, "k").await.unwrap();
        assert!(after.is_allowed(), "{backend}");
        assert_eq!(remaining(&after), "0", "{backend}: left after this one");
        let taken = limits.check(&bucket, "k").await.unwrap();
        assert!(taken.is_allowed(), "{backend}");
        assert!(
            !limits.check(&bucket, "k").await.unwrap().is_allowed(),
            "{backend}: exactly one unit was left"
        );
    }
}

/// A limit that cannot admit in time: answered at once when its denial says so, else at the
/// deadline (plus the last check), and nothing counted by the wait.
#[tokio::test]
async fn acquire_never_waits_past_its_deadline() {
    let redis = RedisServer::start();
    let slack = Duration::from_millis(250);
    for (backend, limits) in backends(&redis, |b| b) {
        // A minute's window: its denial says 60 s, past any deadline here. No wait at all.
        let hourly = limit("fixed_window", &[Opt::Int(1), Opt::Int(60)]);
        assert!(limits.check(&hourly, "k").await.unwrap().is_allowed());
        let started = Instant::now();
        let denied = limits
            .acquire(&hourly, "k", Duration::from_millis(800))
            .await
            .unwrap();
        assert!(!denied.is_allowed(), "{backend}");
        assert!(
            started.elapsed() < slack,
            "{backend}: {:?}",
            started.elapsed()
        );
        assert_eq!(remaining(&denied), "0", "{backend}");

        // Two entries that leave 2 s after they came: a denial of 2 s may end within the
        // second after its first, so the waiter waits, and gives up at its deadline of 1.5 s.
        let log = limit("sliding_log", &[Opt::Int(2), Opt::Int(2)]);
        for _ in 0..2 {
            assert!(limits.check(&log, "k").await.unwrap().is_allowed());
        }
        let started = Instant::now();
        let deadline = Duration::from_millis(1500);
        let denied = limits.acquire(&log, "k", deadline).await.unwrap();
        let waited = started.elapsed();
        assert!(!denied.is_allowed(), "{backend}");
        assert!(
            waited >= deadline && waited < deadline + slack,
            "{backend}: waited {waited:?}"
        );
        // The entries left at 2 s: both units are back, none taken by the wait.
        tokio::time::sleep(Duration::from_millis(600)).await;
        for left in ["1", "0"] {
            let outcome = limits.check(&log, "k").await.unwrap();
            assert!(outcome.is_allowed(), "{backend}");
            assert_eq!(remaining(&outcome), left, "{backend}");
        }
    }
}

fn burst_app(redis: &RedisServer, wait: Option<Duration>) -> Router {
    let limits = PlugLimit::builder(redis.pool())
        .key(key::header("x-client"))
        .prefix(unique_prefix("burst"))
        .build()
        .unwrap();
    let layer = RateLimitLayer::<SlidingLog<3, 1>>::new(limits);
    let layer = match wait {
        Some(bound) => layer.wait_up_to(bound),
        None => layer,
    };
    Router::new()
        .route("/burst", get(|| async { "ok" }))
        .route_layer(layer)
}

/// A burst of 8 on a limit of 3 a second: without waiting, 3 pass and 5 get 429. Waiting up
/// to 1.5 s, the 3 units that come back at 1 s admit 3 more, each with its own admission's
/// headers, and the last 2, which would need 2 s, get their 429 at the bound.
#[tokio::test]
async fn the_layer_queues_a_burst_within_its_bound() {
    let redis = RedisServer::start();
    for (wait, late, refused) in [(None, 0, 5), (Some(Duration::from_millis(1500)), 3, 2)] {
        let app = burst_app(&redis, wait);
        // Connected and the script loaded before the burst.
        assert_eq!(send_get(&app, "/burst", "warm-up").await.status, 200);
        let started = Instant::now();
        let burst = (0..8).map(|_| {
            let app = app.clone();
            async move {
                let reply = send_get(&app, "/burst", "z").await;
                (reply, started.elapsed())
            }
        });
        let mut replies = join_all(burst).await;
        replies.sort_by_key(|(_, at)| *at);
        let (ok, too_many): (Vec<_>, Vec<_>) =
            replies.iter().partition(|(reply, _)| reply.status == 200);
        assert!(too_many.iter().all(|(reply, _)| reply.status == 429));
        assert_eq!((ok.len(), too_many.len()), (3 + late, refused), "{wait:?}");
        // The three admitted at once, then the late ones: admitted once the units came back
        // at 1 s, with their admission's headers (no retry-after).
        let at_once: Vec<_> = ok[..3]
            .iter()
            .map(|(reply, _)| reply.header("x-ratelimit-remaining"))
            .collect();
        assert_eq!(at_once, [Some("2"), Some("1"), Some("0")], "{wait:?}");
        for (reply, at) in &ok[3..] {
            assert!(
                *at >= Duration::from_millis(990),
                "{wait:?}: admitted after {at:?}"
            );
            assert_eq!(reply.header("retry-after"), None);
            assert!(reply.header("x-ratelimit-remaining").is_some());
        }
        let bound = wait.unwrap_or_default();
        for (reply, at) in &too_many {
            assert!(
                *at >= bound && *at < bound + Duration::from_millis(300),
                "{wait:?}: a 429 after {at:?}"
            );
            assert!(reply.header("retry-after").is_some());
        }
    }
}

/// Ten waiters on one key of 10 a second (bursts of 2): all admitted within the second, one
/// slot each 100 ms, and their retries paced, not a busy loop on Redis: only the head of the
/// key's line checks, so the calls follow the slots, not the waiters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_waiters_of_one_key_pace_their_retries() {
    let redis = RedisServer::start();
    let limits = PlugLimit::builder(redis.pool()).build().unwrap();
    limits.peek(Gcra::<10, 1, 2>, "warm-up").await.unwrap();
    let before = redis.script_calls().await;
    let run = Duration::from_secs(1);
    let started = Instant::now();
    let waiters = (0..10).map(|_| {
        let limits = limits.clone();
        tokio::spawn(async move {
            let call = limits.acquire(Gcra::<10, 1, 2>, "hot", run);
            tokio::time::timeout_at(started + run, call)
                .await
                .is_ok_and(|outcome| outcome.unwrap().is_allowed())
        })
    });
    let admitted = join_all(waiters)
        .await
        .into_iter()
        .filter(|admitted| *admitted.as_ref().unwrap())
        .count();
    let calls = redis.script_calls().await - before;
    // Two slots at once, then one each 100 ms: the tenth at 800 ms.
    assert_eq!(admitted, 10);
    // A call admits each (a waiter is counted once, by the check that admits it); the head
    // retries at most twice a slot. Each waiter retrying on its own made 20 or more; a busy
    // loop makes thousands.
    assert!(
        (10..=10 * 2).contains(&calls),
        "{calls} script calls for 10 waiters"
    );
}

/// A layer of a run-time limit waits as a typed one does: the second request of a limit of
/// one each 100 ms is admitted about 100 ms later instead of refused.
#[tokio::test]
async fn a_runtime_layer_waits_too() {
    let limits = PlugLimit::builder(plug_limit::Store::memory())
        .key(key::header("x-client"))
        .build()
        .unwrap();
    let every_100_ms = plug_limit::RuntimeLimit::new("gcra", [10, 1, 1]).unwrap();
    for (wait, second) in [(None, 429), (Some(Duration::from_millis(500)), 200)] {
        let layer = RateLimitLayer::runtime(limits.clone(), every_100_ms.clone()).unwrap();
        let layer = match wait {
            Some(bound) => layer.wait_up_to(bound),
            None => layer,
        };
        let app = Router::new()
            .route("/r", get(|| async { "ok" }))
            .route_layer(layer);
        let client = format!("{wait:?}");
        let started = Instant::now();
        assert_eq!(send_get(&app, "/r", &client).await.status, 200);
        assert_eq!(
            send_get(&app, "/r", &client).await.status,
            second,
            "{wait:?}"
        );
        if wait.is_some() {
            let waited = started.elapsed();
            assert!(waited >= Duration::from_millis(90), "{waited:?}");
        }
    }
}

/// A custom limiter waits by its own `retry-after` (retried at a 50 ms pace within its last
/// second); one whose denial says nothing of when it ends is answered at once.
#[tokio::test]
async fn a_custom_limiter_waits_by_its_retry_after_or_not_at_all() {
    let redis = RedisServer::start();
    let says_when = "if redis.call('INCR', KEYS[1]) == 1 then return {'deny', {'1'}} end \
                     return {'allow', {'0'}}";
    let limits = PlugLimit::builder(redis.pool())
        .limiter(
            "says_when",
            plug_limit::Limiter::script(says_when).headers(["retry-after"]),
        )
        .limiter("silent", plug_limit::Limiter::script("return {'deny', {}}"))
        .build()
        .unwrap();
    let started = Instant::now();
    let admitted = limits
        .acquire(limit("says_when", &[]), "k", Duration::from_secs(2))
        .await
        .unwrap();
    let waited = started.elapsed();
    assert!(admitted.is_allowed());
    assert!(
        waited >= Duration::from_millis(25) && waited < Duration::from_millis(300),
        "waited {waited:?}"
    );

    let before = redis.script_calls().await;
    let started = Instant::now();
    let denied = limits
        .acquire(limit("silent", &[]), "k", Duration::from_secs(2))
        .await
        .unwrap();
    assert!(!denied.is_allowed());
    assert!(started.elapsed() < Duration::from_millis(250));
    // One check (the script's first call is an EVALSHA that fails, then its EVAL).
    assert_eq!(redis.script_calls().await - before, 2);
}

/// The waiters of one key at an instance take their turns in the order they came, and only
/// the line's head checks the store: ten waiters sent 5 ms apart on 20 a second (one at a
/// time) are admitted in that order, about 50 ms apart, in about one call each where each
/// retrying on its own made several.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_of_one_key_take_turns_in_the_order_they_came() {
    let redis = RedisServer::start();
    let limits = PlugLimit::builder(redis.pool()).build().unwrap();
    let one_at_a_time = Gcra::<20, 1, 1>;
    limits.peek(one_at_a_time, "warm-up").await.unwrap();
    let before = redis.script_calls().await;
    let started = Instant::now();
    let order: Arc<Mutex<Vec<usize>>> = Arc::default();
    let waiters = (0..10).map(|waiter| {
        let (limits, order) = (limits.clone(), Arc::clone(&order));
        async move {
            tokio::time::sleep_until(started + Duration::from_millis(5) * waiter as u32).await;
            let outcome = limits
                .acquire(one_at_a_time, "in-line", Duration::from_secs(2))
                .await
                .unwrap();
            assert!(outcome.is_allowed(), "waiter {waiter}");
            order.lock().unwrap().push(waiter);
        }
    });
    join_all(waiters.map(tokio::spawn)).await;
    let calls = redis.script_calls().await - before;
    assert_eq!(*order.lock().unwrap(), (0..10).collect::<Vec<_>>());
    // One check a slot for the head, and a retry now and then when its pause came early.
    assert!(calls <= 20, "{calls} script calls for 10 waiters");
    assert!(
        started.elapsed() >= Duration::from_millis(400),
        "ten slots 50 ms apart in {:?}",
        started.elapsed()
    );
}

/// The requests of one key waiting at an instance are bounded (`Builder::wait_queue`): past
/// the bound a request is answered at once with the denial its line last met.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_line_answers_at_once() {
    let redis = RedisServer::start();
    let limits = PlugLimit::builder(redis.pool())
        .wait_queue(2)
        .build()
        .unwrap();
    let one_a_second = Gcra::<1, 1, 1>;
    assert!(
        limits
            .check(one_a_second, "full")
            .await
            .unwrap()
            .is_allowed()
    );
    // The line's head checks (denied) and waits; one more waits behind it.
    let waiting: Vec<_> = (0..2)
        .map(|_| {
            let limits = limits.clone();
            tokio::spawn(async move {
                limits
                    .acquire(one_a_second, "full", Duration::from_millis(600))
                    .await
                    .unwrap()
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let before = redis.script_calls().await;
    for _ in 0..3 {
        let started = Instant::now();
        let answered = limits
            .acquire(one_a_second, "full", Duration::from_millis(600))
            .await
            .unwrap();
        assert!(!answered.is_allowed());
        assert!(
            started.elapsed() < Duration::from_millis(50),
            "answered after {:?}",
            started.elapsed()
        );
    }
    assert_eq!(
        redis.script_calls().await - before,
        0,
        "the full line's answers made calls"
    );
    for waiter in waiting {
        // Within 600 ms neither is admitted: the next slot is at 1 s.
        assert!(!waiter.await.unwrap().is_allowed());
    }
}

/// A request its limit's rules let through uncounted is not held in its key's line: it passes
/// at once, however many wait on the key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_the_rules_skip_does_not_wait_in_line() {
    let limits = PlugLimit::builder(plug_limit::Store::memory())
        .key(key::header("x-client"))
        .wait_queue(1)
        .limiter(
            "slow",
            plug_limit::Limiter::token_bucket().rules(
                plug_limit::Rules::new().skip(|parts| parts.headers.contains_key("x-health")),
            ),
        )
        .build()
        .unwrap();
    // Two a second, one at a time, spent: the next waits in the key's line.
    let slow = limit("slow", &[Opt::Int(3), Opt::Int(1), Opt::Int(1)]);
    let layer = RateLimitLayer::runtime(limits, slow)
        .unwrap()
        .wait_up_to(Duration::from_secs(2));
    let app = Router::new()
        .route("/r", get(|| async { "ok" }))
        .route_layer(layer);
    assert_eq!(send_get(&app, "/r", "c").await.status, 200);
    let waiting = tokio::spawn({
        let app = app.clone();
        async move { send_get(&app, "/r", "c").await.status }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let started = Instant::now();
    let health = http::Request::get("/r")
        .header("x-client", "c")
        .header("x-health", "1")
        .body(axum::body::Body::empty())
        .unwrap();
    let reply = plug_limit_tests::send(&app, health).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("x-ratelimit-limit"), None, "counted");
    assert!(
        started.elapsed() < Duration::from_millis(100),
        "a skipped request waited {:?}",
        started.elapsed()
    );
    assert_eq!(waiting.await.unwrap(), 200);
}
