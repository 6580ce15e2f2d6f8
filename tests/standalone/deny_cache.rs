//! The local deny cache: a flood from one denied key costs Redis nothing.

use std::time::Duration;

use axum::{Router, routing::get};
use plug_limit::{FixedWindow, PlugLimit, RateLimited, RuntimeLimit, TokenBucket, key};
use plug_limit_tests::{RedisServer, get as send_get};

type Two = RateLimited<FixedWindow<2, 1>>;

async fn two(limited: Two) -> (Two, &'static str) {
    (limited, "ok")
}

type Bucket = RateLimited<TokenBucket<10, 60, 1>>;

async fn bucket(limited: Bucket) -> (Bucket, &'static str) {
    (limited, "ok")
}

fn app(redis: &RedisServer, deny_cache: bool) -> Router {
    let limits = PlugLimit::builder(redis.pool())
        .key(key::header("x-client"))
        .deny_cache(deny_cache)
        .build()
        .unwrap();
    Router::new()
        .route("/two", get(two))
        .route("/bucket", get(bucket))
        .with_state(limits)
}

#[tokio::test]
async fn a_flood_from_a_denied_key_makes_no_redis_call_until_the_window_ends() {
    let redis = RedisServer::start();
    let app = app(&redis, true);
    assert_eq!(send_get(&app, "/two", "flood").await.status, 200);
    assert_eq!(send_get(&app, "/two", "flood").await.status, 200);
    let first_denial = send_get(&app, "/two", "flood").await;
    assert_eq!(first_denial.status, 429);
    assert_eq!(redis.script_calls().await, 1 + 3);

    for _ in 0..500 {
        let reply = send_get(&app, "/two", "flood").await;
        assert_eq!(reply.status, 429);
        // fixed_window's denials carry their reset as `retry-after`.
        assert_eq!(
            reply.rate_headers(),
            [Some("2"), Some("1"), Some("0"), Some("1")]
        );
    }
    assert_eq!(redis.script_calls().await, 1 + 3, "the flood reached Redis");

    // Other clients are not affected.
    assert_eq!(send_get(&app, "/two", "calm").await.status, 200);
    assert_eq!(redis.script_calls().await, 1 + 4);

    // The denial lasts as long as the limiter said: the window's reset, one second.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let after = send_get(&app, "/two", "flood").await;
    assert_eq!(after.status, 200);
    assert_eq!(
        after.rate_headers(),
        [Some("2"), Some("1"), Some("1"), None]
    );
    assert_eq!(redis.script_calls().await, 1 + 5);
}

#[tokio::test]
async fn without_the_cache_every_denial_asks_redis() {
    let redis = RedisServer::start();
    let app = app(&redis, false);
    for _ in 0..12 {
        send_get(&app, "/two", "flood").await;
    }
    assert_eq!(redis.script_calls().await, 1 + 12);
}

#[tokio::test]
async fn cached_denials_count_their_retry_after_down() {
    let redis = RedisServer::start();
    let app = app(&redis, true);
    // Burst 1, then one token every 60 / 9 s, so retry-after is 7.
    assert_eq!(send_get(&app, "/bucket", "b").await.status, 200);
    let denied = send_get(&app, "/bucket", "b").await;
    assert_eq!(denied.status, 429);
    assert_eq!(denied.header("retry-after"), Some("7"));
    tokio::time::sleep(Duration::from_millis(1050)).await;
    let cached = send_get(&app, "/bucket", "b").await;
    assert_eq!(cached.status, 429);
    assert_eq!(cached.header("retry-after"), Some("6"));
    assert_eq!(cached.header("x-ratelimit-reset"), Some("59"));
    assert_eq!(redis.script_calls().await, 1 + 2);
}

#[tokio::test]
async fn reset_clears_the_local_denial() {
    let redis = RedisServer::start();
    let limits = PlugLimit::builder(redis.pool())
        .key(key::header("x-client"))
        .deny_cache(true)
        .build()
        .unwrap();
    let app = Router::new()
        .route("/two", get(two))
        .with_state(limits.clone());
    for _ in 0..3 {
        send_get(&app, "/two", "r").await;
    }
    assert_eq!(send_get(&app, "/two", "r").await.status, 429);
    limits
        .reset(RuntimeLimit::from(FixedWindow::<2, 1>).scope("/two"), "r")
        .await
        .unwrap();
    assert_eq!(send_get(&app, "/two", "r").await.status, 200);
}
