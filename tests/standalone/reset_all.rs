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

/// `PlugLimit::reset_key`: a client's keys of one limiter under every options and scope are
/// forgotten, on Redis and in memory, with this instance's cached denials and batches; other
/// clients' (one whose key only ends like it included), other limiters' and other prefixes'
/// stay.
#[tokio::test]
async fn reset_key_forgets_a_clients_every_option_and_scope_of_one_limiter() {
    use plug_limit::RuntimeLimit;
    let redis = RedisServer::start();
    let long = "l".repeat(100);
    for (backend, limits) in plug_limit_tests::backends(&redis, |b| b.deny_cache(true)) {
        let once = RuntimeLimit::new("fixed_window", [1, 60])
            .unwrap()
            .scope("/a");
        let five = RuntimeLimit::new("fixed_window", [5, 60])
            .unwrap()
            .scope("/b:c");
        let bucket = RuntimeLimit::new("token_bucket", [2, 60, 2]).unwrap();
        let remaining = |outcome: plug_limit::Outcome| outcome.remaining();
        for client in ["x:y", "z:x:y", long.as_str()] {
            limits.check(once.clone(), client).await.unwrap();
            // Denied, and cached so.
            assert!(
                !limits
                    .check(once.clone(), client)
                    .await
                    .unwrap()
                    .is_allowed()
            );
            limits.check(five.clone(), client).await.unwrap();
            limits.check(bucket.clone(), client).await.unwrap();
        }
        for client in ["x:y", long.as_str()] {
            let deleted = limits.reset_key("fixed_window", client).await.unwrap();
            assert_eq!(deleted, 2, "{backend} {client}");
            let again = limits.check(once.clone(), client).await.unwrap();
            assert_eq!(remaining(again), Some(0), "{backend} {client}");
            let again = limits.check(five.clone(), client).await.unwrap();
            assert_eq!(remaining(again), Some(4), "{backend} {client}");
            let kept = limits.check(bucket.clone(), client).await.unwrap();
            assert_eq!(remaining(kept), Some(0), "{backend}: another limiter's");
        }
        let other = limits.check(once.clone(), "z:x:y").await.unwrap();
        assert!(!other.is_allowed(), "{backend}: another client's");
        assert_eq!(
            limits
                .check(five.clone(), "z:x:y")
                .await
                .unwrap()
                .remaining(),
            Some(3),
            "{backend}: another client's"
        );
        assert_eq!(limits.reset_key("fixed_window", "nobody").await.unwrap(), 0);
        let unknown = limits.reset_key("fixed_windw", "x:y").await.unwrap_err();
        assert!(
            matches!(unknown, plug_limit::Error::UnknownLimiter(_)),
            "{unknown}"
        );
    }
}

/// Local batches hold units of a key at an instance: `reset_key` drops them with the key, so
/// the client's next request reserves afresh from a window that starts anew.
#[tokio::test]
async fn reset_key_drops_a_clients_local_batches() {
    use plug_limit::{LocalBatches, RuntimeLimit};
    let redis = RedisServer::start();
    let limits = PlugLimit::builder(redis.pool())
        .limiter(
            "hot",
            Limiter::fixed_window().local_batches(LocalBatches::new(10)),
        )
        .build()
        .unwrap();
    let hot = RuntimeLimit::new("hot", [20, 60]).unwrap();
    for _ in 0..20 {
        assert!(limits.check(hot.clone(), "k").await.unwrap().is_allowed());
    }
    assert!(!limits.check(hot.clone(), "k").await.unwrap().is_allowed());
    assert_eq!(limits.reset_key("hot", "k").await.unwrap(), 1);
    assert!(limits.check(hot.clone(), "k").await.unwrap().is_allowed());
    assert!(
        stored_keys(&redis)
            .await
            .iter()
            .any(|key| key.ends_with(":k"))
    );
}
