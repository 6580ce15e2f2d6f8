//! Local batches under a flood past their limit, sent open-loop (on a clock, not one request
//! after another: a closed-loop client waits for its answers, so it never builds the queue a
//! flood does), through a relay that adds a one-way delay to every Redis call. The promise:
//! a batch never fails open by itself. Every request is answered by the limit (allowed with
//! its headers, or a 429), none is passed by the failure policy while Redis answers, none
//! waits past the timeout, and Redis counts exactly what was admitted.

use std::time::Duration;

use axum::{Router, routing::get};
use deadpool_redis::redis::AsyncCommands;
use plug_limit::{FailurePolicy, Limit, Limiter, LocalBatches, Opt, PlugLimit, RateLimited, key};
use plug_limit_tests::{
    Fault, FaultProxy, RedisServer, Sent, get as send_get, open_loop, opts_text, pool, stored_key,
    unique_prefix,
};

/// 200 a minute, one key for everyone.
struct Window;

impl Limit for Window {
    const LIMITER: &'static str = "flood";
    const OPTS: &'static [Opt] = &[Opt::Int(200), Opt::Int(60)];
}

/// A burst of 150, then 10 a second (600 a minute, 150 of them at once).
struct Bucket;

impl Limit for Bucket {
    const LIMITER: &'static str = "flood_bucket";
    const OPTS: &'static [Opt] = &[Opt::Int(750), Opt::Int(60), Opt::Int(150)];
}

async fn window(limited: RateLimited<Window>) -> (RateLimited<Window>, &'static str) {
    (limited, "ok")
}

async fn bucket(limited: RateLimited<Bucket>) -> (RateLimited<Bucket>, &'static str) {
    (limited, "ok")
}

const TIMEOUT: Duration = Duration::from_millis(500);

/// Scheduling slack over the timeout on a loaded two-core machine, as the other timeout tests
/// allow.
const SLACK: Duration = Duration::from_millis(100);

/// The load: 400 requests a second for 1.5 s, over two instances.
const PER_SECOND: u32 = 400;
const FOR: Duration = Duration::from_millis(1_500);

fn instance(proxy: &FaultProxy, prefix: &str, deny_cache: bool) -> Router {
    let batched = |limiter: Limiter| {
        limiter
            .local_batches(LocalBatches::new(100))
            .deny_cache(deny_cache)
    };
    let limits = PlugLimit::builder(pool(&proxy.url()))
        .prefix(prefix)
        .key(key::header("x-client"))
        .timeout(TIMEOUT)
        // A request passed by the policy answers 200 without rate-limit headers: seen below.
        .on_failure(FailurePolicy::Open)
        .limiter("flood", batched(Limiter::fixed_window()))
        .limiter("flood_bucket", batched(Limiter::token_bucket()))
        .build()
        .unwrap();
    Router::new()
        .route("/window", get(window))
        .route("/bucket", get(bucket))
        .with_state(limits)
}

/// The one-way delays the relay adds: none (the relay's own hop), a nearby zone, a far region.
const DELAYS: [Duration; 3] = [
    Duration::ZERO,
    Duration::from_millis(5),
    Duration::from_millis(50),
];

/// What a run came to.
#[derive(Debug, PartialEq, Eq)]
struct Tally {
    admitted: usize,
    denied: usize,
    passed_by_policy: usize,
    other: usize,
}

fn tally(sent: &[Sent]) -> Tally {
    let count = |pick: fn(&Sent) -> bool| sent.iter().filter(|sent| pick(sent)).count();
    Tally {
        admitted: count(|sent| sent.status == 200 && sent.limited),
        denied: count(|sent| sent.status == 429 && sent.limited),
        passed_by_policy: count(|sent| sent.status == 200 && !sent.limited),
        other: count(|sent| !matches!(sent.status.as_u16(), 200 | 429) || !sent.limited),
    }
}

/// Floods `uri` of two instances through a relay adding `delay` each way; the requests sent
/// and what Redis counts once the batches went idle, by `counted`.
async fn flood(
    redis: &RedisServer,
    uri: &str,
    delay: Duration,
    deny_cache: bool,
) -> (Vec<Sent>, String) {
    let proxy = FaultProxy::start(redis.addr());
    if !delay.is_zero() {
        proxy.set(Fault::Latency(delay));
    }
    let prefix = unique_prefix("flood");
    let apps = [
        instance(&proxy, &prefix, deny_cache),
        instance(&proxy, &prefix, deny_cache),
    ];
    let sent = open_loop(&apps, uri, "everyone", PER_SECOND, FOR).await;
    // Every batch idle and given back.
    tokio::time::sleep(Duration::from_millis(500)).await;
    (sent, prefix)
}

/// Every request of `run` answered within the timeout (and the slack a loaded machine needs).
fn answered_in_time(sent: &[Sent], run: &str) {
    let slowest = sent.iter().map(|sent| sent.latency).max().unwrap();
    assert!(slowest <= TIMEOUT + SLACK, "{run}: {slowest:?}");
}

async fn fixed_window_holds(deny_cache: bool) {
    let redis = RedisServer::start();
    for delay in DELAYS {
        let (sent, prefix) = flood(&redis, "/window", delay, deny_cache).await;
        let run = format!("fixed_window, deny cache {deny_cache}, {delay:?} each way");
        // Every unit of the window admitted (the flood spends what each instance holds), and
        // every other request denied by the limit.
        assert_eq!(
            tally(&sent),
            Tally {
                admitted: 200,
                denied: sent.len() - 200,
                passed_by_policy: 0,
                other: 0
            },
            "{run}"
        );
        answered_in_time(&sent, &run);
        let key = stored_key(
            &prefix,
            Window::LIMITER,
            &opts_text(Window::OPTS),
            "/window",
            "everyone",
        );
        let counted: u32 = redis.connection().await.get(key).await.unwrap();
        assert_eq!(counted, 200, "{run}");
    }
}

async fn token_bucket_holds(deny_cache: bool) {
    let redis = RedisServer::start();
    for delay in DELAYS {
        let (sent, prefix) = flood(&redis, "/bucket", delay, deny_cache).await;
        let run = format!("token_bucket, deny cache {deny_cache}, {delay:?} each way");
        let tally = tally(&sent);
        assert_eq!(
            (
                tally.passed_by_policy,
                tally.other,
                tally.admitted + tally.denied
            ),
            (0, 0, sent.len()),
            "{run}: {tally:?}"
        );
        // The burst, and 10 a second while the flood lasts and its slowest answer comes: never
        // more; and at least the burst.
        assert!(
            (150..=150 + 10 * 3).contains(&tally.admitted),
            "{run}: {tally:?}"
        );
        answered_in_time(&sent, &run);
        // Redis's count of the window is what was admitted: what the batches held went back.
        let key = stored_key(
            &prefix,
            Bucket::LIMITER,
            &opts_text(Bucket::OPTS),
            "/bucket",
            "everyone",
        );
        let remaining: u32 = redis.connection().await.hget(key, "r").await.unwrap();
        assert_eq!(750 - remaining as usize, tally.admitted, "{run}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_window_flood_is_answered_by_the_limit() {
    fixed_window_holds(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_window_flood_is_answered_by_the_limit_with_the_deny_cache() {
    fixed_window_holds(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_bucket_flood_is_answered_by_the_limit() {
    token_bucket_holds(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_bucket_flood_is_answered_by_the_limit_with_the_deny_cache() {
    token_bucket_holds(true).await;
}

/// The requests of one key waiting at an instance are bounded (`LocalBatches::queue`): past
/// the bound a request is denied at once (nothing is known of the limit before the first
/// reservation lands, so its 429 says only `retry-after: 0`), never queued into a wait that
/// ends in the failure policy; those within it are served by the one reservation.
#[tokio::test]
async fn the_requests_waiting_on_a_key_are_bounded() {
    let redis = RedisServer::start();
    let proxy = FaultProxy::start(redis.addr());
    let prefix = unique_prefix("flood_queue");
    let limits = PlugLimit::builder(pool(&proxy.url()))
        .prefix(&prefix)
        .key(key::header("x-client"))
        .timeout(TIMEOUT)
        .on_failure(FailurePolicy::Open)
        .limiter(
            "flood",
            Limiter::fixed_window().local_batches(LocalBatches::new(100).queue(4)),
        )
        .build()
        .unwrap();
    let app = Router::new()
        .route("/window", get(window))
        .with_state(limits);
    // Connections open and the script loaded, on another key.
    assert_eq!(send_get(&app, "/window", "warmup").await.status, 200);
    proxy.set(Fault::Latency(Duration::from_millis(50)));
    let requests: Vec<_> = (0..50)
        .map(|_| {
            let app = app.clone();
            tokio::spawn(async move {
                let started = std::time::Instant::now();
                let reply = send_get(&app, "/window", "everyone").await;
                (reply, started.elapsed())
            })
        })
        .collect();
    let (mut admitted, mut refused) = (0, 0);
    for request in requests {
        let (reply, took) = request.await.unwrap();
        match reply.status.as_u16() {
            200 => {
                admitted += 1;
                assert_eq!(reply.header("x-ratelimit-limit"), Some("200"));
            }
            429 => {
                refused += 1;
                assert_eq!(reply.rate_headers(), [None, None, None, Some("0")]);
                // At once: not after the reservation's round trip of 100 ms.
                assert!(took < Duration::from_millis(60), "refused after {took:?}");
            }
            other => panic!("status {other}"),
        }
    }
    assert_eq!((admitted, refused), (4, 46));
    proxy.set(Fault::Forward);
    // The reservation brought more than the four (the 50 requests seen): the rest went back.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let key = stored_key(
        &prefix,
        "flood",
        &opts_text(Window::OPTS),
        "/window",
        "everyone",
    );
    let counted: u32 = redis.connection().await.get(key).await.unwrap();
    assert_eq!(counted, 4);
}

/// Across a slow link, a hot key's next batch is reserved ahead, by the rate the instance sees
/// and the round trip it measures: in steady state no request waits on the store. 200
/// requests a second, well within the limit, through a relay adding 50 ms each way (a
/// reservation takes 100 ms): once the batches have grown to the rate, every request is
/// answered from a batch at once, where a batch reserved only once spent makes the requests
/// of each round trip wait for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_reserved_ahead_keeps_requests_off_a_slow_link() {
    let redis = RedisServer::start();
    let proxy = FaultProxy::start(redis.addr());
    proxy.set(Fault::Latency(Duration::from_millis(50)));
    let prefix = unique_prefix("flood_ahead");
    let limits = PlugLimit::builder(pool(&proxy.url()))
        .prefix(&prefix)
        .key(key::header("x-client"))
        .timeout(TIMEOUT)
        .limiter(
            "flood",
            Limiter::fixed_window().local_batches(LocalBatches::new(1_000)),
        )
        .build()
        .unwrap();
    let app = Router::new().route("/ahead", get(ahead)).with_state(limits);
    let sent = open_loop(&[app], "/ahead", "everyone", 200, Duration::from_secs(3)).await;
    assert!(sent.iter().all(|sent| sent.status == 200 && sent.limited));
    // Past the first second the batches follow the rate.
    let steady: Vec<Duration> = sent
        .iter()
        .filter(|sent| sent.at >= Duration::from_secs(1))
        .map(|sent| sent.latency)
        .collect();
    let waited = steady
        .iter()
        .filter(|latency| **latency >= Duration::from_millis(40))
        .count();
    assert_eq!(
        waited,
        0,
        "{waited} of {} requests waited on the link",
        steady.len()
    );
}

/// A limit of plenty: 100,000 a minute.
struct Plenty;

impl Limit for Plenty {
    const LIMITER: &'static str = "flood";
    const OPTS: &'static [Opt] = &[Opt::Int(100_000), Opt::Int(60)];
}

async fn ahead(limited: RateLimited<Plenty>) -> (RateLimited<Plenty>, &'static str) {
    (limited, "ok")
}
