//! Local batches for hot keys: several instances on one Redis never admit more than the limit,
//! give back what they hold, and answer the headers a single instance would without batches.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use axum::{Router, routing::get};
use deadpool_redis::redis::AsyncCommands;
use plug_limit::{
    Config, Limit, Limiter, LocalBatches, Opt, PlugLimit, RateLimited, RuntimeLimit, Store, key,
};
use plug_limit_tests::{RedisServer, get as send_get, opts_text, stored_key, unique_prefix};
use serde_json::json;

/// A hot global limit: 1000 a minute, one key for everyone.
struct Hot;

impl Limit for Hot {
    const LIMITER: &'static str = "hot";
    const OPTS: &'static [Opt] = &[Opt::Int(1000), Opt::Int(60)];
}

/// The same on a token bucket: 100 a minute, all of them at once.
struct HotBucket;

impl Limit for HotBucket {
    const LIMITER: &'static str = "hot_bucket";
    const OPTS: &'static [Opt] = &[Opt::Int(100), Opt::Int(60), Opt::Int(100)];
}

async fn hot(limited: RateLimited<Hot>) -> (RateLimited<Hot>, &'static str) {
    (limited, "ok")
}

async fn bucket(limited: RateLimited<HotBucket>) -> (RateLimited<HotBucket>, &'static str) {
    (limited, "ok")
}

const MAX: u32 = 50;

fn instance(redis: &RedisServer, prefix: &str) -> Router {
    app(limits(redis, prefix))
}

fn limits(redis: &RedisServer, prefix: &str) -> PlugLimit {
    PlugLimit::builder(redis.pool())
        .prefix(prefix)
        .key(key::header("x-client"))
        .limiter(
            "hot",
            Limiter::fixed_window().local_batches(LocalBatches::new(MAX)),
        )
        .limiter(
            "hot_bucket",
            Limiter::token_bucket().local_batches(LocalBatches::new(10)),
        )
        .build()
        .unwrap()
}

/// The limiters of [`limits`], set by a configuration file instead of code.
fn limits_from_config(redis: &RedisServer, prefix: &str) -> PlugLimit {
    let config: Config = serde_json::from_value(json!({
        "prefix": prefix,
        "limiters": {
            "hot": { "builtin": "fixed_window", "local_batches": { "max": MAX } },
            "hot_bucket": {
                "builtin": "token_bucket",
                "local_batches": { "max": 10, "every_ms": 25 }
            }
        }
    }))
    .unwrap();
    PlugLimit::builder(redis.pool())
        .key(key::header("x-client"))
        .config(config)
        .build()
        .unwrap()
}

fn app(limits: PlugLimit) -> Router {
    Router::new()
        .route("/hot", get(hot))
        .route("/bucket", get(bucket))
        .with_state(limits)
}

/// Long enough for every batch to go idle and be given back.
async fn idle() {
    tokio::time::sleep(Duration::from_millis(300)).await;
}

async fn counted(redis: &RedisServer, prefix: &str, limiter: &str, route: &str) -> u32 {
    let mut conn = redis.connection().await;
    let opts = if limiter == "hot" {
        Hot::OPTS
    } else {
        HotBucket::OPTS
    };
    let key = stored_key(prefix, limiter, &opts_text(opts), route, "everyone");
    conn.get::<_, Option<u32>>(key).await.unwrap().unwrap_or(0)
}

/// `each` requests from each of 8 concurrent workers per instance; how many were admitted.
async fn flood(apps: &[Router], each: u32) -> u32 {
    let allowed = Arc::new(AtomicU32::new(0));
    let mut tasks = Vec::new();
    for app in apps {
        for _ in 0..8 {
            let (app, allowed) = (app.clone(), Arc::clone(&allowed));
            tasks.push(tokio::spawn(async move {
                for _ in 0..each {
                    let reply = send_get(&app, "/hot", "everyone").await;
                    match reply.status.as_u16() {
                        200 => _ = allowed.fetch_add(1, Ordering::Relaxed),
                        429 => {}
                        other => panic!("status {other}"),
                    }
                }
            }));
        }
    }
    for task in tasks {
        task.await.unwrap();
    }
    allowed.load(Ordering::Relaxed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_never_admit_past_the_limit_and_give_back_what_they_hold() {
    const INSTANCES: u32 = 4;
    let redis = RedisServer::start();
    let prefix = unique_prefix("batches");
    let apps: Vec<Router> = (0..INSTANCES).map(|_| instance(&redis, &prefix)).collect();
    // 800 requests: whatever the instances hold (at most 4 x 50), Redis has room for them.
    let first = flood(&apps, 25).await;
    assert_eq!(first, 800);
    let calls = redis.script_calls().await;
    assert!(calls < 800 / 4, "{calls} script calls for 800 requests");
    // Once the batches went idle, what they held is back: Redis counts what was admitted.
    idle().await;
    assert_eq!(counted(&redis, &prefix, "hot", "/hot").await, 800);
    // 2400 more, past the limit: never past it, short of it by at most what the other
    // instances held.
    let allowed = first + flood(&apps, 75).await;
    assert!(allowed <= 1000, "admitted {allowed} of a limit of 1000");
    assert!(
        allowed >= 1000 - (INSTANCES - 1) * MAX,
        "admitted only {allowed}"
    );
    idle().await;
    assert_eq!(counted(&redis, &prefix, "hot", "/hot").await, allowed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_file_gives_a_built_in_local_batches_as_code_does() {
    let redis = RedisServer::start();
    // Its answers are the code-built limiter's, header for header.
    let code = app(limits(&redis, &unique_prefix("batches_code")));
    let config = app(limits_from_config(&redis, &unique_prefix("batches_config")));
    for route in ["/hot", "/bucket"] {
        let (from_code, from_config) = (
            send_get(&code, route, "one").await,
            send_get(&config, route, "one").await,
        );
        assert_eq!(from_config.status, from_code.status, "{route}");
        assert_eq!(from_config.headers, from_code.headers, "{route}");
        assert!(from_code.headers.contains_key("x-ratelimit-remaining"));
    }
    let prefix = unique_prefix("batches_config_flood");
    let apps: Vec<Router> = (0..2)
        .map(|_| app(limits_from_config(&redis, &prefix)))
        .collect();
    let before = redis.script_calls().await;
    // 400 requests, each a script call without batches.
    assert_eq!(flood(&apps, 25).await, 400);
    let calls = redis.script_calls().await - before;
    assert!(calls < 400 / 4, "{calls} script calls for 400 requests");
    idle().await;
    assert_eq!(counted(&redis, &prefix, "hot", "/hot").await, 400);
}

#[test]
fn a_config_file_names_the_field_it_refuses() {
    let redis = RedisServer::start();
    let build = |limiter: serde_json::Value| {
        let config: Config =
            serde_json::from_value(json!({ "limiters": { "hot": limiter } })).unwrap();
        PlugLimit::builder(redis.pool())
            .config(config)
            .build()
            .unwrap_err()
            .to_string()
    };
    // Only the built-ins code runs under another name: the others are guarded by their own
    // names (a concurrency lease is never stacked, say), which a renamed one would slip past.
    for name in ["fixed_windows", "gcra", "concurrency"] {
        assert_eq!(
            build(json!({ "builtin": name })),
            format!(
                "invalid `limiters.hot.builtin`: must be `fixed_window` or `token_bucket` (the built-ins that run under another name), got `{name}`"
            )
        );
    }
    assert_eq!(
        build(json!({ "builtin": "gcra", "script": "return 1" })),
        "invalid `limiters.hot`: exactly one of `script`, `script_file`, `script_name` and `builtin` is required"
    );
    assert_eq!(
        build(json!({ "builtin": "fixed_window", "local_batches": { "max": 10, "every_ms": 0 } })),
        "invalid `limiters.hot.local_batches.every_ms`: must be 1..=1000 (milliseconds)"
    );
    assert_eq!(
        build(json!({ "builtin": "fixed_window", "local_batches": { "max": 0 } })),
        "invalid `limiters.hot.local_batches.max`: must be 1..=2147483647"
    );
    assert_eq!(
        build(json!({ "script": "return 1", "local_batches": { "max": 10 } })),
        "invalid `limiters.hot.local_batches`: only fixed_window and token_bucket limiters take local batches"
    );
    let without_max = serde_json::from_value::<Config>(json!({
        "limiters": { "hot": { "builtin": "fixed_window", "local_batches": {} } }
    }));
    assert_eq!(without_max.unwrap_err().to_string(), "missing field `max`");
    let own_redis: Config = serde_json::from_value(json!({
        "limiters": { "hot": { "builtin": "fixed_window", "redis_url": redis.url() } }
    }))
    .unwrap();
    assert_eq!(
        PlugLimit::builder(Store::memory())
            .config(own_redis)
            .build()
            .unwrap_err()
            .to_string(),
        "invalid `limiters.hot.redis_url`: a limiter's own Redis pool needs the Redis backend"
    );
}

#[tokio::test]
async fn one_instance_answers_the_headers_of_exact_mode() {
    let redis = RedisServer::start();
    let prefix = unique_prefix("batches");
    let limits = limits(&redis, &prefix);
    let app = app(limits.clone());
    for remaining in (970..1000).rev() {
        let reply = send_get(&app, "/hot", "everyone").await;
        assert_eq!(reply.status, 200);
        let remaining = remaining.to_string();
        assert_eq!(
            reply.rate_headers(),
            [Some("1000"), Some("60"), Some(remaining.as_str()), None]
        );
    }
    let calls = redis.script_calls().await;
    assert!(calls <= 15, "{calls} script calls for 30 requests");
    idle().await;
    assert_eq!(counted(&redis, &prefix, "hot", "/hot").await, 30);

    // A reset drops what the batch holds: the next request starts the new window.
    for _ in 0..10 {
        send_get(&app, "/hot", "everyone").await;
    }
    limits
        .reset(RuntimeLimit::from(Hot).scope("/hot"), "everyone")
        .await
        .unwrap();
    let after = send_get(&app, "/hot", "everyone").await;
    assert_eq!(after.header("x-ratelimit-remaining"), Some("999"));

    // A token bucket: remaining counts down as without batches, to the denial.
    for remaining in (0..100).rev() {
        let reply = send_get(&app, "/bucket", "everyone").await;
        assert_eq!(reply.status, 200, "{remaining}");
        assert_eq!(
            reply.header("x-ratelimit-remaining"),
            Some(remaining.to_string().as_str())
        );
    }
    let denied = send_get(&app, "/bucket", "everyone").await;
    assert_eq!(denied.status, 429);
    assert_eq!(
        denied.rate_headers(),
        [
            Some("100 100;w=60;burst=100;policy=token_bucket"),
            Some("60"),
            Some("0"),
            Some("60")
        ]
    );
}

#[test]
fn only_fixed_window_and_token_bucket_on_redis_take_local_batches() {
    let redis = RedisServer::start();
    let build = |limiter: Limiter| {
        PlugLimit::builder(redis.pool())
            .limiter("hot", limiter)
            .build()
            .unwrap_err()
            .to_string()
    };
    let batches = LocalBatches::new(10);
    assert_eq!(
        build(Limiter::script("return {'allow', {}}").local_batches(batches)),
        "invalid `limiters.hot.local_batches`: only fixed_window and token_bucket limiters take local batches"
    );
    assert_eq!(
        build(Limiter::fixed_window().local_batches(LocalBatches::new(0))),
        "invalid `limiters.hot.local_batches.max`: must be 1..=2147483647"
    );
    assert_eq!(
        build(Limiter::token_bucket().local_batches(batches.every(Duration::ZERO))),
        "invalid `limiters.hot.local_batches.every`: must be more than 0 and at most 1 second"
    );
    let in_memory = PlugLimit::builder(Store::memory())
        .limiter("hot", Limiter::fixed_window().local_batches(batches))
        .build()
        .unwrap_err();
    assert_eq!(
        in_memory.to_string(),
        "invalid `limiters.hot.local_batches`: local batches need the Redis backend: memory decides without a round trip"
    );
}
