//! What a client controls never buys a budget: key text cannot collide across routes or grow
//! Redis keys without bound, a script cannot set framing headers, the deny cache answers only
//! for the limit it saw deny, and a `SCRIPT FLUSH` storm fails no check.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::{Router, routing::get};
use futures_util::future::join_all;
use plug_limit::{
    FailurePolicy, FixedWindow, Limit, Limiter, ManualClock, Opt, PlugLimit, RateLimitLayer,
    RateLimited, RuntimeLimit, Store, key,
};
use plug_limit_tests::limit;
use plug_limit_tests::{RedisServer, backends, get as send_get};

type One = RateLimited<FixedWindow<1, 60>>;

async fn one(limited: One) -> (One, &'static str) {
    (limited, "ok")
}

type Two = RateLimited<FixedWindow<2, 60>>;

async fn two(limited: Two) -> (Two, &'static str) {
    (limited, "ok")
}

/// An extractor's `FixedWindow<2, 60>` under a layer's `FixedWindow<1000, 3600>` on one route:
/// one limiter, one scope, other options. Sharing a counter, each request would count twice
/// in both, and the extractor would deny the second request.
#[tokio::test]
async fn two_limits_of_other_options_on_one_route_never_share_a_counter() {
    let redis = RedisServer::start();
    for (backend, limits) in backends(&redis, |builder| builder.key(key::header("x-client"))) {
        let app = Router::new()
            .route("/r", get(two))
            .route_layer(RateLimitLayer::<FixedWindow<1000, 3600>>::new(
                limits.clone(),
            ))
            .with_state(limits.clone());
        let statuses = [
            send_get(&app, "/r", "ann").await.status,
            send_get(&app, "/r", "ann").await.status,
            send_get(&app, "/r", "ann").await.status,
        ];
        assert_eq!(statuses, [200, 200, 429], "{backend}");
        let remaining = |limit: RuntimeLimit| {
            let limits = limits.clone();
            async move {
                let peek = limits.peek(limit.scope("/r"), "ann").await.unwrap();
                peek.header("x-ratelimit-remaining")
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .to_owned()
            }
        };
        // The layer counted all three requests; the extractor the two it admitted.
        let wide = remaining(RuntimeLimit::from(FixedWindow::<1000, 3600>)).await;
        let narrow = remaining(RuntimeLimit::from(FixedWindow::<2, 60>)).await;
        assert_eq!((wide.as_str(), narrow.as_str()), ("996", "0"), "{backend}");
    }
}

#[tokio::test]
async fn a_colon_in_a_key_cannot_reach_another_routes_budget() {
    let redis = RedisServer::start();
    let limits = PlugLimit::builder(redis.pool())
        .key(key::header("x-client"))
        .build()
        .unwrap();
    let app = Router::new()
        .route("/v1/items", get(one))
        .route("/v1/items:batch", get(one))
        .with_state(limits);
    // Before keys were composed injectively, `/v1/items` + `batch:VICTIM` and
    // `/v1/items:batch` + `VICTIM` were one Redis key.
    assert_eq!(
        send_get(&app, "/v1/items", "batch:VICTIM").await.status,
        200
    );
    assert_eq!(
        send_get(&app, "/v1/items", "batch:VICTIM").await.status,
        429
    );
    assert_eq!(
        send_get(&app, "/v1/items:batch", "VICTIM").await.status,
        200
    );
    assert_eq!(
        send_get(&app, "/v1/items:batch", "VICTIM").await.status,
        429
    );
}

#[tokio::test]
async fn a_huge_key_is_stored_as_its_digest() {
    let redis = RedisServer::start();
    let limits = PlugLimit::builder(redis.pool())
        .key(key::header("x-client"))
        .build()
        .unwrap();
    let app = Router::new().route("/", get(one)).with_state(limits);
    let huge = "k".repeat(300_000);
    assert_eq!(send_get(&app, "/", &huge).await.status, 200);
    assert_eq!(send_get(&app, "/", &huge).await.status, 429);
    // One character more is another client.
    assert_eq!(send_get(&app, "/", &format!("{huge}k")).await.status, 200);
    let mut conn = redis.connection().await;
    let keys: Vec<String> = plug_limit::redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut conn)
        .await
        .unwrap();
    let mut lengths: Vec<usize> = keys.iter().map(String::len).collect();
    lengths.sort_unstable();
    // `plug_limit:{tag}:fixed_window:1,60:1:/:#` and 40 hex digits.
    assert_eq!(lengths, [81, 81]);
}

struct Framing;

impl Limit for Framing {
    const LIMITER: &'static str = "framing";
    const OPTS: &'static [Opt] = &[];
}

async fn framing(limited: RateLimited<Framing>) -> (RateLimited<Framing>, &'static str) {
    (limited, "body intact")
}

#[tokio::test]
async fn a_script_cannot_set_framing_headers() {
    let redis = RedisServer::start();
    for header in ["content-length", "Transfer-Encoding", "connection"] {
        let lua = format!("return {{'allow', {{'1', {{'{header}', '0'}}}}}}");
        let limits = PlugLimit::builder(redis.pool())
            .key(key::header("x-client"))
            .on_failure(FailurePolicy::Closed)
            .limiter("framing", Limiter::script(lua).headers(["x-n"]))
            .build()
            .unwrap();
        let app = Router::new().route("/", get(framing)).with_state(limits);
        let reply = send_get(&app, "/", "a").await;
        // Out of contract: the reply is refused (here closed: 503), never copied.
        assert_eq!(reply.status, 503, "{header}");
        assert_eq!(reply.header("x-n"), None, "{header}");
        assert_eq!(reply.header("transfer-encoding"), None, "{header}");
    }
}

struct Strict;

impl Limit for Strict {
    const LIMITER: &'static str = "fixed_window";
    const OPTS: &'static [Opt] = &[Opt::Int(1), Opt::Int(60)];
    const SCOPE: Option<&'static str> = Some("shared");
}

struct Lenient;

impl Limit for Lenient {
    const LIMITER: &'static str = "fixed_window";
    const OPTS: &'static [Opt] = &[Opt::Int(5), Opt::Int(60)];
    const SCOPE: Option<&'static str> = Some("shared");
}

async fn strict(limited: RateLimited<Strict>) -> (RateLimited<Strict>, &'static str) {
    (limited, "strict")
}

async fn lenient(limited: RateLimited<Lenient>) -> (RateLimited<Lenient>, &'static str) {
    (limited, "lenient")
}

#[tokio::test]
async fn a_cached_denial_holds_only_for_the_limit_that_denied() {
    let redis = RedisServer::start();
    let limits = PlugLimit::builder(redis.pool())
        .key(key::header("x-client"))
        .deny_cache(true)
        .build()
        .unwrap();
    let app = Router::new()
        .route("/strict", get(strict))
        .route("/lenient", get(lenient))
        .with_state(limits);
    let mut statuses = Vec::new();
    for path in ["/strict", "/strict", "/lenient"] {
        statuses.push(send_get(&app, path, "c").await.status.as_u16());
    }
    // Both count under scope `shared`; the lenient limit decides for itself.
    assert_eq!(statuses, [200, 429, 200]);
}

#[tokio::test]
async fn the_deny_cache_keeps_the_limiters_clock() {
    let clock = ManualClock::new(1_800_000_000_000);
    let limits = PlugLimit::builder(Store::memory())
        .key(key::header("x-client"))
        .clock(clock.clone())
        .deny_cache(true)
        .build()
        .unwrap();
    let app = Router::new().route("/", get(one)).with_state(limits);
    assert_eq!(send_get(&app, "/", "c").await.status, 200);
    let denied = send_get(&app, "/", "c").await;
    assert_eq!(denied.status, 429);
    assert_eq!(denied.header("x-ratelimit-reset"), Some("60"));
    clock.advance(Duration::from_secs(30));
    let cached = send_get(&app, "/", "c").await;
    assert_eq!(
        (cached.status.as_u16(), cached.header("x-ratelimit-reset")),
        (429, Some("30"))
    );
    // The window is over by the limiter's clock, however little real time passed.
    clock.advance(Duration::from_secs(30));
    assert_eq!(send_get(&app, "/", "c").await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_flush_storm_fails_no_check() {
    let redis = RedisServer::start();
    let limits = PlugLimit::builder(redis.pool()).build().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let mut conn = redis.connection().await;
    let storm = tokio::spawn({
        let stop = Arc::clone(&stop);
        async move {
            let mut flushes = 0_u32;
            while !stop.load(Ordering::Relaxed) && flushes < 4_000 {
                let _: () = plug_limit::redis::cmd("SCRIPT")
                    .arg("FLUSH")
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                flushes += 1;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            flushes
        }
    });
    let opts = [Opt::Int(1_000_000), Opt::Int(60)];
    let mut failed = Vec::new();
    for round in 0..40 {
        let checks = (0..50).map(|i| {
            let limits = limits.clone();
            let opts = &opts;
            async move {
                limits
                    .check(limit("fixed_window", opts), &format!("c{i}"))
                    .await
            }
        });
        for (i, result) in join_all(checks).await.into_iter().enumerate() {
            if let Err(error) = result {
                failed.push(format!("round {round} check {i}: {error}"));
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let flushes = storm.await.unwrap();
    assert!(flushes >= 10, "the storm ran {flushes} flushes");
    let first = &failed[..failed.len().min(3)];
    assert!(
        failed.is_empty(),
        "{} checks failed: {first:?}",
        failed.len()
    );
    let remaining = limits
        .check(limit("fixed_window", &opts), "c0")
        .await
        .unwrap();
    assert_eq!(
        remaining.header("x-ratelimit-remaining").unwrap(),
        &(1_000_000 - 41).to_string()
    );
}
