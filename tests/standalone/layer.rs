//! `RateLimitLayer`: the same limits as middleware.

use axum::{Router, routing::get};
use plug_limit::{FixedWindow, PlugLimit, RateLimitLayer, key};
use plug_limit_tests::{RedisServer, get as send_get};

#[tokio::test]
async fn route_layer_limits_each_route_and_adds_headers() {
    let redis = RedisServer::start();
    let limits = PlugLimit::builder(redis.pool())
        .key(key::header("x-client"))
        .build()
        .unwrap();
    let app = Router::new()
        .route("/a", get(|| async { "a" }))
        .route("/b", get(|| async { "b" }))
        .route_layer(RateLimitLayer::<FixedWindow<2, 60>>::new(limits));

    for remaining in ["1", "0"] {
        let reply = send_get(&app, "/a", "z").await;
        assert_eq!(reply.status, 200);
        assert_eq!(reply.body, "a");
        assert_eq!(
            reply.rate_headers(),
            [Some("2"), Some("60"), Some(remaining), None]
        );
    }
    let denied = send_get(&app, "/a", "z").await;
    assert_eq!(denied.status, 429);
    assert_eq!(denied.body, "Too Many Requests");
    assert_eq!(
        denied.rate_headers(),
        [Some("2"), Some("60"), Some("0"), Some("60")]
    );

    let b = send_get(&app, "/b", "z").await;
    assert_eq!(b.status, 200);
    assert_eq!(b.header("x-ratelimit-remaining"), Some("1"));
}
