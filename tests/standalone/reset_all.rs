//! `PlugLimit::reset_all`: every key of a prefix forgotten, and nothing else.

use deadpool_redis::redis::AsyncCommands;
use plug_limit::{FailurePolicy, Limiter, Opt, PlugLimit};
use plug_limit_tests::RedisServer;
use plug_limit_tests::limit;

const ONE_A_MINUTE: [Opt; 2] = [Opt::Int(1), Opt::Int(60)];

async fn stored_keys(redis: &RedisServer) -> Vec<String> {
    let mut conn = redis.pool().get().await.unwrap();
    let mut keys: Vec<String> = conn.keys("*").await.unwrap();
    keys.sort();
    keys
}

async fn allowed(limits: &PlugLimit, limiter: &str, client: &str) -> bool {
    limits
        .check(limit(limiter, &ONE_A_MINUTE), client)
        .await
        .unwrap()
        .is_allowed()
}

#[tokio::test]
async fn only_the_prefixs_keys_go_even_beside_prefixes_that_extend_it_or_glob() {
    let redis = RedisServer::start();
    let build = |prefix: &str| {
        PlugLimit::builder(redis.pool())
            .prefix(prefix)
            .build()
            .unwrap()
    };
    let (app, app_v2, glob) = (build("app"), build("app:v2"), build("ap*"));
    for client in ["a", "b", "c"] {
        assert!(allowed(&app, "fixed_window", client).await);
    }
    assert!(allowed(&app, "sliding_window", "a").await);
    assert!(allowed(&app_v2, "fixed_window", "a").await);
    assert!(allowed(&glob, "fixed_window", "a").await);
    {
        let mut conn = redis.pool().get().await.unwrap();
        let () = conn.set("app:unrelated", "kept").await.unwrap();
    }
    assert_eq!(stored_keys(&redis).await.len(), 7);

    assert_eq!(app.reset_all().await.unwrap(), 4);
    let left = stored_keys(&redis).await;
    assert_eq!(left.len(), 3, "{left:?}");
    assert!(left.contains(&"app:unrelated".to_owned()));
    assert!(left.iter().any(|key| key.starts_with("app:v2:{")));
    assert!(left.iter().any(|key| key.starts_with("ap*:{")));
    assert!(allowed(&app, "fixed_window", "a").await);
    assert!(!allowed(&app_v2, "fixed_window", "a").await);
    assert!(!allowed(&glob, "fixed_window", "a").await);
    // `ap*` is matched literally: `app`'s key stays.
    assert_eq!(glob.reset_all().await.unwrap(), 1);
    assert!(!allowed(&app, "fixed_window", "a").await);
    assert_eq!(app.reset_all().await.unwrap(), 1);
}

#[tokio::test]
async fn limiters_own_pools_the_memory_fallback_and_the_deny_cache_are_cleared() {
    let (main, other) = (RedisServer::start(), RedisServer::start());
    let limits = PlugLimit::builder(main.pool())
        .deny_cache(true)
        .limiter("elsewhere", Limiter::fixed_window().pool(other.pool()))
        .build()
        .unwrap();
    assert!(allowed(&limits, "fixed_window", "a").await);
    assert!(allowed(&limits, "elsewhere", "a").await);
    assert!(!allowed(&limits, "elsewhere", "a").await);
    assert_eq!(limits.reset_all().await.unwrap(), 2);
    assert_eq!(stored_keys(&main).await, Vec::<String>::new());
    assert_eq!(stored_keys(&other).await, Vec::<String>::new());
    assert!(allowed(&limits, "elsewhere", "a").await);

    // The memory fallback, made when Redis first failed, is emptied too.
    let mut gone = RedisServer::start();
    let limits = PlugLimit::builder(gone.pool())
        .on_failure(FailurePolicy::Memory)
        .key(plug_limit::key::header("x-client"))
        .build()
        .unwrap();
    gone.stop();
    let app = axum::Router::new()
        .route("/", axum::routing::get(|| async { "ok" }))
        .route_layer(
            plug_limit::RateLimitLayer::<plug_limit::FixedWindow<1, 60>>::new(limits.clone()),
        );
    assert_eq!(plug_limit_tests::get(&app, "/", "z").await.status, 200);
    assert_eq!(plug_limit_tests::get(&app, "/", "z").await.status, 429);
    // Redis is down: its part fails, and the memory fallback is emptied all the same.
    assert!(matches!(
        limits.reset_all().await,
        Err(plug_limit::Error::Pool(_) | plug_limit::Error::Redis(_))
    ));
    assert_eq!(plug_limit_tests::get(&app, "/", "z").await.status, 200);
    assert_eq!(plug_limit_tests::get(&app, "/", "z").await.status, 429);
}

#[tokio::test]
async fn memory_forgets_every_key() {
    let limits = PlugLimit::memory();
    for client in ["a", "b"] {
        assert!(allowed(&limits, "sliding_window", client).await);
        assert!(!allowed(&limits, "sliding_window", client).await);
    }
    assert_eq!(limits.memory_keys(), Some(2));
    assert_eq!(limits.reset_all().await.unwrap(), 2);
    assert_eq!(limits.memory_keys(), Some(0));
    assert!(allowed(&limits, "sliding_window", "a").await);
}

/// A denial cached while the keys go does not outlive the reset.
#[tokio::test]
async fn no_denial_cached_during_the_reset_outlives_it() {
    let redis = RedisServer::start();
    let limits = PlugLimit::builder(redis.pool())
        .key(plug_limit::key::header("x-client"))
        .deny_cache(true)
        .build()
        .unwrap();
    let app = axum::Router::new()
        .route("/", axum::routing::get(|| async { "ok" }))
        .route_layer(
            plug_limit::RateLimitLayer::<plug_limit::FixedWindow<1, 60>>::new(limits.clone()),
        );
    assert_eq!(plug_limit_tests::get(&app, "/", "c").await.status, 200);
    assert_eq!(plug_limit_tests::get(&app, "/", "c").await.status, 429);
    let (reset, during) = tokio::join!(limits.reset_all(), plug_limit_tests::get(&app, "/", "c"));
    assert_eq!(reset.unwrap(), 1);
    assert_eq!(during.status, 429);
    assert_eq!(plug_limit_tests::get(&app, "/", "c").await.status, 200);
}
