//! Limits over a connection the application already holds, globally and per limiter.

use std::time::{Duration, Instant};

use deadpool_redis::redis::{self, AsyncCommands, aio::MultiplexedConnection};
use plug_limit::{Error, Limiter, Opt, PlugLimit, Store};
use plug_limit_tests::limit;
use plug_limit_tests::{Fault, FaultProxy, RedisServer};

const TWO_A_MINUTE: [Opt; 2] = [Opt::Int(2), Opt::Int(60)];

async fn connect(url: &str) -> MultiplexedConnection {
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

async fn remaining(limits: &PlugLimit, limiter: &str, client: &str) -> (bool, String) {
    let outcome = limits
        .check(limit(limiter, &TWO_A_MINUTE), client)
        .await
        .unwrap();
    let remaining = outcome.header("x-ratelimit-remaining").unwrap();
    (outcome.is_allowed(), remaining.to_str().unwrap().to_owned())
}

#[tokio::test]
async fn an_own_connection_decides_and_survives_a_script_flush() {
    let redis = RedisServer::start();
    let limits = PlugLimit::builder(Store::connection(connect(&redis.url()).await))
        .prefix("own")
        .build()
        .unwrap();
    assert_eq!(
        remaining(&limits, "fixed_window", "a").await,
        (true, "1".to_owned())
    );
    let mut admin = redis.pool().get().await.unwrap();
    let () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut admin)
        .await
        .unwrap();
    assert_eq!(
        remaining(&limits, "fixed_window", "a").await,
        (true, "0".to_owned())
    );
    assert_eq!(
        remaining(&limits, "fixed_window", "a").await,
        (false, "0".to_owned())
    );
    let keys: Vec<String> = admin.keys("own:*").await.unwrap();
    assert_eq!(keys.len(), 1, "{keys:?}");
}

#[tokio::test]
async fn a_limiters_own_connection_keeps_its_keys_on_its_server() {
    let (main, other) = (RedisServer::start(), RedisServer::start());
    let limits = PlugLimit::builder(main.pool())
        .limiter(
            "elsewhere",
            Limiter::fixed_window().connection(connect(&other.url()).await),
        )
        .build()
        .unwrap();
    assert_eq!(
        remaining(&limits, "elsewhere", "a").await,
        (true, "1".to_owned())
    );
    assert_eq!(
        remaining(&limits, "fixed_window", "a").await,
        (true, "1".to_owned())
    );
    assert_eq!(
        remaining(&limits, "elsewhere", "a").await,
        (true, "0".to_owned())
    );
    let count = |server: &RedisServer| {
        let pool = server.pool();
        async move {
            let mut conn = pool.get().await.unwrap();
            let keys: Vec<String> = conn.keys("plug_limit:*").await.unwrap();
            keys.into_iter()
                .map(|key| key.split(':').nth(2).unwrap().to_owned())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(count(&main).await, ["fixed_window"]);
    assert_eq!(count(&other).await, ["elsewhere"]);
}

/// A silent server costs a check its timeout and no more, then the breaker answers at once.
#[tokio::test]
async fn a_silent_own_connection_is_bounded_by_the_timeout() {
    let redis = RedisServer::start();
    let proxy = FaultProxy::start(redis.addr());
    let limits = PlugLimit::builder(Store::connection(connect(&proxy.url()).await))
        .timeout(Duration::from_millis(200))
        .circuit_breaker(plug_limit::CircuitBreaker::new(2, Duration::from_secs(30)))
        .build()
        .unwrap();
    assert_eq!(
        remaining(&limits, "fixed_window", "a").await,
        (true, "1".to_owned())
    );
    proxy.set(Fault::Blackhole);
    for _ in 0..2 {
        let started = Instant::now();
        let result = limits
            .check(limit("fixed_window", &TWO_A_MINUTE), "a")
            .await;
        assert!(
            matches!(result, Err(Error::Timeout(t)) if t == Duration::from_millis(200)),
            "{result:?}"
        );
        let took = started.elapsed();
        assert!(took < Duration::from_millis(1000), "took {took:?}");
    }
    let result = limits
        .check(limit("fixed_window", &TWO_A_MINUTE), "a")
        .await;
    assert!(matches!(result, Err(Error::CircuitOpen(_))), "{result:?}");
}
