//! Local batches at their edges: a window that moves under a batch (a set clock, a reset seen
//! by another instance), a reservation whose reply never comes, two limits on one key. Each
//! test states a bound the README promises for batches.

use std::time::Duration;

use axum::{Router, routing::get};
use deadpool_redis::redis::AsyncCommands;
use plug_limit::{
    FailurePolicy, Limit, Limiter, LocalBatches, ManualClock, Opt, PlugLimit, RateLimited,
    RuntimeLimit, key,
};
use plug_limit_tests::{
    Fault, FaultProxy, RedisServer, get as send_get, opts_text, pool, send, stored_key,
    unique_prefix,
};

/// 20 a minute, one key for everyone.
struct Small;

impl Limit for Small {
    const LIMITER: &'static str = "small";
    const OPTS: &'static [Opt] = &[Opt::Int(20), Opt::Int(60)];
}

/// Another limit of the same limiter on the same route: the same key, other options.
struct Smaller;

impl Limit for Smaller {
    const LIMITER: &'static str = "small";
    const OPTS: &'static [Opt] = &[Opt::Int(15), Opt::Int(60)];
}

async fn small(limited: RateLimited<Small>) -> (RateLimited<Small>, &'static str) {
    (limited, "ok")
}

async fn smaller(limited: RateLimited<Smaller>) -> (RateLimited<Smaller>, &'static str) {
    (limited, "ok")
}

fn app(limits: PlugLimit) -> Router {
    Router::new()
        .route("/small", get(small).post(smaller))
        .with_state(limits)
}

fn batched(every: Duration) -> Limiter {
    Limiter::fixed_window().local_batches(LocalBatches::new(50).every(every))
}

fn instance(redis: &RedisServer, prefix: &str, every: Duration) -> PlugLimit {
    PlugLimit::builder(redis.pool())
        .prefix(prefix)
        .key(key::header("x-client"))
        .limiter("small", batched(every))
        .build()
        .unwrap()
}

/// What Redis counts for everyone under `Small`.
async fn counted(redis: &RedisServer, prefix: &str) -> u32 {
    counted_under(redis, prefix, Small::OPTS).await
}

/// What Redis counts for everyone under the limit of `small` with `opts`.
async fn counted_under(redis: &RedisServer, prefix: &str, opts: &[Opt]) -> u32 {
    let mut conn = redis.connection().await;
    let key = stored_key(prefix, "small", &opts_text(opts), "/small", "everyone");
    conn.get::<_, Option<u32>>(key).await.unwrap().unwrap_or(0)
}

/// Sends `n` requests one after another; how many were admitted.
async fn admitted(app: &Router, n: u32) -> u32 {
    let mut allowed = 0;
    for _ in 0..n {
        let reply = send_get(app, "/small", "everyone").await;
        match reply.status.as_u16() {
            200 => allowed += 1,
            429 => {}
            other => panic!("status {other}"),
        }
    }
    allowed
}

/// Ten quick requests: the batch grows to 8, and the instance is left holding units.
async fn warm(app: &Router) {
    assert_eq!(admitted(app, 10).await, 10);
}

/// Builder::clock moves windows by itself, while a batch's units are spent by this process's
/// monotonic clock: the two cannot go together, or units of an old window would be spent in
/// the next.
#[tokio::test]
async fn local_batches_refuse_a_set_clock() {
    let redis = RedisServer::start();
    let refused = PlugLimit::builder(redis.pool())
        .clock(ManualClock::starting_now())
        .limiter("small", batched(Duration::from_secs(1)))
        .build()
        .unwrap_err();
    assert_eq!(
        refused.to_string(),
        "invalid `limiters.small.local_batches`: local batches time their units by the process's own clock: they cannot be used with `Builder::clock`"
    );
}

/// A reservation Redis ran but whose reply was lost: its units are counted and neither spent
/// nor given back (the README's bound: a lost or timed-out reservation costs at most its own
/// units), and never more.
#[tokio::test]
async fn a_reservation_whose_reply_is_lost_costs_its_units_and_no_more() {
    let redis = RedisServer::start();
    let proxy = FaultProxy::start(redis.addr());
    let prefix = unique_prefix("batch_lost");
    let limits = PlugLimit::builder(pool(&proxy.url()))
        .prefix(&prefix)
        .key(key::header("x-client"))
        .timeout(Duration::from_millis(300))
        .on_failure(FailurePolicy::Closed)
        .limiter("small", batched(Duration::from_secs(1)))
        .build()
        .unwrap();
    let app = app(limits);
    // 1, then a batch of 2 spent, then a batch of 4 whose reply is lost.
    assert_eq!(admitted(&app, 3).await, 3);
    proxy.set(Fault::DropReplies);
    let lost = send_get(&app, "/small", "everyone").await;
    assert_eq!(lost.status, 503);
    proxy.set(Fault::Forward);
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let rest = admitted(&app, 40).await;
    // The lost batch's 4 units are gone: 16 admitted, 20 counted.
    assert_eq!(3 + rest, 16);
    assert_eq!(counted(&redis, &prefix).await, 20);
}

/// Two limits of one limiter on one route with other options count under keys of their own,
/// each with its own batches: neither spends nor drops what the other's batch holds, and
/// Redis counts exactly what was admitted, each limit's apart.
#[tokio::test]
async fn two_limits_of_one_limiter_and_route_count_apart() {
    let redis = RedisServer::start();
    let prefix = unique_prefix("batch_opts");
    let app = app(instance(&redis, &prefix, Duration::from_millis(25)));
    let mut allowed = 0;
    for _ in 0..6 {
        allowed += admitted(&app, 1).await;
        let post = http::Request::post("/small")
            .header("x-client", "everyone")
            .body(axum::body::Body::empty())
            .unwrap();
        let status = send(&app, post).await.status;
        assert_eq!(
            status,
            200,
            "denied after {allowed} admitted of limits of 20 and 15; Redis counts {}",
            counted(&redis, &prefix).await
        );
        allowed += 1;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (small, smaller) = (
        counted(&redis, &prefix).await,
        counted_under(&redis, &prefix, Smaller::OPTS).await,
    );
    assert_eq!(
        (small + smaller, smaller),
        (allowed, 6),
        "Redis counts other than was admitted, with every batch idle"
    );
}

/// An instance of `small` through `proxy`, with `timeout`.
fn proxied(proxy: &FaultProxy, prefix: &str, timeout: Duration) -> PlugLimit {
    PlugLimit::builder(pool(&proxy.url()))
        .prefix(prefix)
        .key(key::header("x-client"))
        .timeout(timeout)
        .on_failure(FailurePolicy::Closed)
        .limiter("small", batched(Duration::from_secs(1)))
        .build()
        .unwrap()
}

/// `Builder::timeout` is "the most a check may take": a request waiting behind its key's
/// reservation for units is answered within one timeout, and by the limit (a 429 with the
/// limit's numbers), never by the failure policy, when the store answers every call in time
/// but its turn does not come within it.
#[tokio::test]
async fn a_request_behind_a_reservation_takes_at_most_the_timeout() {
    let redis = RedisServer::start();
    let proxy = FaultProxy::start(redis.addr());
    let prefix = unique_prefix("batch_turn");
    let timeout = Duration::from_millis(300);
    let app = app(proxied(&proxy, &prefix, timeout));
    // Connections open and the script loaded, on another key.
    let warmups: Vec<_> = (0..4)
        .map(|_| {
            let app = app.clone();
            tokio::spawn(async move { send_get(&app, "/small", "warmup").await.status })
        })
        .collect();
    for warmup in warmups {
        assert_eq!(warmup.await.unwrap(), 200);
    }
    proxy.set(Fault::Delay(Duration::from_millis(250)));
    let first = tokio::spawn({
        let app = app.clone();
        async move { send_get(&app, "/small", "everyone").await.status }
    });
    // The first request's reservation (a batch of one) is in flight.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let started = std::time::Instant::now();
    let second = send_get(&app, "/small", "everyone").await;
    let took = started.elapsed();
    assert_eq!(first.await.unwrap(), 200);
    // The first reservation (a batch of one, for the first request) lands at about 250 ms; the
    // next, for the second, would land at about 500 ms, past its timeout (350 ms): it is
    // denied at its timeout by the limit's numbers (the store answered every call), where it
    // waited for its turn, then failed closed. The 100 ms over the timeout is scheduling
    // slack on a loaded two-core machine (CI saw 361 ms once).
    assert_eq!(second.status, 429);
    assert_eq!(
        second.rate_headers(),
        [Some("20"), Some("60"), Some("0"), Some("0")]
    );
    assert!(
        took <= timeout + Duration::from_millis(100),
        "a check took {took:?} with a timeout of {timeout:?}"
    );
}

/// A reset while a reservation is in flight: what it brings is of the window the reset ended,
/// so the requests waiting for it each take one unit of the new window exactly, and the new
/// window counts them and nothing more.
#[tokio::test]
async fn requests_waiting_through_a_reset_leave_the_new_window_whole() {
    let redis = RedisServer::start();
    let proxy = FaultProxy::start(redis.addr());
    let prefix = unique_prefix("batch_reset_waiters");
    let limits = proxied(&proxy, &prefix, Duration::from_secs(2));
    let app = app(limits.clone());
    warm(&app).await;
    let held = counted(&redis, &prefix).await - 10;
    proxy.set(Fault::Delay(Duration::from_millis(200)));
    let requests: Vec<_> = (0..held + 3)
        .map(|_| {
            let app = app.clone();
            tokio::spawn(async move { send_get(&app, "/small", "everyone").await.status })
        })
        .collect();
    // What the batch held is spent; one reservation is in flight, three requests wait for it.
    tokio::time::sleep(Duration::from_millis(50)).await;
    limits
        .reset(RuntimeLimit::from(Small).scope("/small"), "everyone")
        .await
        .unwrap();
    for request in requests {
        assert_eq!(request.await.unwrap(), 200);
    }
    proxy.set(Fault::Forward);
    // The three waiters' calls ran after the reset: the new window counted them.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(
        counted(&redis, &prefix).await,
        3,
        "the new window counts other than the 3 requests it admitted, with the batch idle"
    );
}

/// 100 a second.
struct PerSecond;

impl Limit for PerSecond {
    const LIMITER: &'static str = "small";
    const OPTS: &'static [Opt] = &[Opt::Int(100), Opt::Int(1)];
}

async fn per_second(limited: RateLimited<PerSecond>) -> (RateLimited<PerSecond>, &'static str) {
    (limited, "ok")
}

/// A window of one second is batched: a reservation's reply says to the millisecond how long
/// its window has left, so its units are spent until just before it ends (where a reset in
/// whole seconds left none), and one instance admits the whole limit in a few calls.
#[tokio::test]
async fn a_one_second_window_admits_its_limit_from_one_instance() {
    let redis = RedisServer::start();
    let prefix = unique_prefix("batch_second");
    let limits = instance(&redis, &prefix, Duration::from_millis(25));
    let app = Router::new()
        .route("/second", get(per_second))
        .with_state(limits);
    let before = redis.script_calls().await;
    let mut allowed = 0;
    for _ in 0..100 {
        if send_get(&app, "/second", "everyone").await.status == 200 {
            allowed += 1;
        }
    }
    let calls = redis.script_calls().await - before;
    // 100 quick requests fit in one or two windows of 100, in batches that double: 1, 2, 4 ...
    assert_eq!(
        allowed, 100,
        "one instance admitted {allowed} of 100 a second"
    );
    assert!(calls <= 20, "{calls} script calls for 100 requests");
}

/// An instance of `small` through `proxy`, with `timeout`, under `policy`, its deny cache as
/// `deny_cache`, and a queue of `queue`.
fn guarded(
    proxy: &FaultProxy,
    prefix: &str,
    timeout: Duration,
    deny_cache: bool,
    queue: u32,
) -> PlugLimit {
    PlugLimit::builder(pool(&proxy.url()))
        .prefix(prefix)
        .key(key::header("x-client"))
        .timeout(timeout)
        .on_failure(FailurePolicy::Open)
        .limiter(
            "small",
            Limiter::fixed_window()
                .local_batches(LocalBatches::new(50).queue(queue))
                .deny_cache(deny_cache),
        )
        .build()
        .unwrap()
}

/// `n` requests sent at once; each one's status and whether it carried the limit's headers.
async fn burst(app: &Router, client: &'static str, n: usize) -> Vec<(u16, bool)> {
    let requests: Vec<_> = (0..n)
        .map(|_| {
            let app = app.clone();
            tokio::spawn(async move {
                let reply = send_get(&app, "/small", client).await;
                (
                    reply.status.as_u16(),
                    reply.header("x-ratelimit-limit").is_some(),
                )
            })
        })
        .collect();
    let mut replies = Vec::new();
    for request in requests {
        replies.push(request.await.unwrap());
    }
    replies
}

/// A reservation whose task is dropped mid-call (its runtime shut down) answers for itself:
/// the key is not left waiting on a call nobody makes (every request then passed by the
/// policy after its timeout, for good), and the next requests are decided by Redis.
#[test]
fn a_reservation_whose_runtime_ends_leaves_its_key_decidable() {
    let main = tokio::runtime::Runtime::new().unwrap();
    let redis = RedisServer::start();
    let (proxy, app) = main.block_on(async {
        let proxy = FaultProxy::start(redis.addr());
        let limits = guarded(
            &proxy,
            &unique_prefix("batch_dropped"),
            Duration::from_millis(300),
            false,
            1_024,
        );
        let app = app(limits);
        // The shared connection, and its driver, made on this runtime.
        assert_eq!(send_get(&app, "/small", "warmup").await.status, 200);
        proxy.set(Fault::Latency(Duration::from_millis(100)));
        (proxy, app)
    });
    // A runtime of its own starts the key's reservation, then ends with it on its way.
    let doomed = app.clone();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let cut_short = tokio::time::timeout(
                Duration::from_millis(50),
                send_get(&doomed, "/small", "everyone"),
            );
            assert!(
                cut_short.await.is_err(),
                "answered before its runtime ended"
            );
        });
    })
    .join()
    .unwrap();
    main.block_on(async {
        proxy.set(Fault::Forward);
        // Past the failure's timeout: the key is reserved afresh, and decided.
        tokio::time::sleep(Duration::from_millis(400)).await;
        for (status, limited) in burst(&app, "everyone", 3).await {
            assert_eq!((status, limited), (200, true));
        }
    });
}

/// A reservation that failed once, long ago, does not make the next one a probe: the
/// requests waiting on a reservation sent while the store answers are decided by it, where
/// they were answered by the old failure (and passed by the policy) while it was on its way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_failure_does_not_pass_the_requests_of_the_next_reservation() {
    let redis = RedisServer::start();
    let proxy = FaultProxy::start(redis.addr());
    let app = app(guarded(
        &proxy,
        &unique_prefix("batch_blip"),
        Duration::from_millis(300),
        false,
        1_024,
    ));
    assert_eq!(send_get(&app, "/small", "warmup").await.status, 200);
    // One reservation of the key fails: a blip.
    proxy.set(Fault::Blackhole);
    let blip = send_get(&app, "/small", "everyone").await;
    assert_eq!(
        (blip.status.as_u16(), blip.header("x-ratelimit-limit")),
        (200, None)
    );
    proxy.set(Fault::Latency(Duration::from_millis(50)));
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let replies = burst(&app, "everyone", 20).await;
    let passed = replies.iter().filter(|(_, limited)| !limited).count();
    assert_eq!(passed, 0, "{replies:?}");
}

/// A request refused because its key's queue was full is not held by the deny cache: a burst
/// on a shared key must not deny it to every client of the instance for a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_is_not_remembered_by_the_deny_cache() {
    let redis = RedisServer::start();
    let proxy = FaultProxy::start(redis.addr());
    let app = app(guarded(
        &proxy,
        &unique_prefix("batch_queue_cache"),
        Duration::from_millis(500),
        true,
        2,
    ));
    assert_eq!(send_get(&app, "/small", "warmup").await.status, 200);
    proxy.set(Fault::Latency(Duration::from_millis(50)));
    let replies = burst(&app, "everyone", 10).await;
    assert!(replies.iter().any(|(status, _)| *status == 429));
    // Then one request every 50 ms: the limit (20 a minute) has room for each.
    for i in 0..12 {
        let reply = send_get(&app, "/small", "everyone").await;
        assert_eq!(
            reply.status, 200,
            "request {i} after the burst {replies:?}: {:?}",
            reply.headers
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
