//! Limits resolved per request: `RateLimitLayer::resolve` and `resolve_async`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::request::Parts;
use axum::{Router, routing::get};
use plug_limit::key::KeyError;
use plug_limit::{FailurePolicy, PlugLimit, RateLimitLayer, RuntimeLimit, Store, key};
use plug_limit_tests::{RedisServer, Reply, backends, send};

/// `GET uri` from `ip`, with `x-api-key` and `authorization` when given.
async fn call(app: &Router, uri: &str, ip: [u8; 4], headers: &[(&str, &str)]) -> Reply {
    let mut request = http::Request::get(uri).extension(ConnectInfo(SocketAddr::from((ip, 4000))));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    send(app, request.body(Body::empty()).unwrap()).await
}

/// Status and `x-ratelimit-limit` / `x-ratelimit-remaining`.
fn seen(reply: &Reply) -> (u16, Option<String>, Option<String>) {
    (
        reply.status.as_u16(),
        reply.header("x-ratelimit-limit").map(str::to_owned),
        reply.header("x-ratelimit-remaining").map(str::to_owned),
    )
}

fn s(value: &str) -> Option<String> {
    Some(value.to_owned())
}

/// Per-plan tiers looked up asynchronously: a known key counts against its own budget from
/// any address; an unknown key is its address's budget, never a fresh one per key sent.
#[tokio::test]
async fn async_plan_tiers_key_only_known_api_keys() {
    let redis = RedisServer::start();
    for (backend, limits) in backends(&redis, |builder| builder) {
        let pro = RuntimeLimit::new("fixed_window", [3, 60])
            .unwrap()
            .key(key::header("x-api-key"));
        let plans = Arc::new(tokio::sync::RwLock::new(HashMap::from([(
            "key-pro".to_owned(),
            pro,
        )])));
        let anonymous = RuntimeLimit::new("fixed_window", [1, 60]).unwrap();
        let layer = RateLimitLayer::resolve_async(limits, move |parts| {
            let api_key = parts
                .headers
                .get("x-api-key")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let (plans, anonymous) = (Arc::clone(&plans), anonymous.clone());
            async move {
                tokio::task::yield_now().await;
                let plans = plans.read().await;
                let known = api_key.and_then(|k| plans.get(&k).cloned());
                Some(known.unwrap_or(anonymous))
            }
        });
        let app = Router::new()
            .route("/api", get(|| async { "api" }))
            .route_layer(layer);
        let a = [10, 0, 0, 1];
        let b = [10, 0, 0, 2];
        let replies = [
            call(&app, "/api", a, &[("x-api-key", "made-up-1")]).await,
            call(&app, "/api", a, &[("x-api-key", "made-up-2")]).await,
            call(&app, "/api", a, &[]).await,
            call(&app, "/api", b, &[("x-api-key", "made-up-3")]).await,
            call(&app, "/api", a, &[("x-api-key", "key-pro")]).await,
            call(&app, "/api", b, &[("x-api-key", "key-pro")]).await,
        ];
        assert_eq!(
            replies.iter().map(seen).collect::<Vec<_>>(),
            [
                (200, s("1"), s("0")),
                (429, s("1"), s("0")),
                (429, s("1"), s("0")),
                (200, s("1"), s("0")),
                (200, s("3"), s("2")),
                (200, s("3"), s("1")),
            ],
            "{backend}"
        );
        assert_eq!(replies[0].body, "api");
        assert_eq!(replies[1].header("retry-after"), Some("60"), "{backend}");
    }
}

/// Session token -> user id: what a session store would answer.
type Sessions = Arc<HashMap<String, String>>;

/// The session token a request carries.
fn token(parts: &Parts) -> Option<&str> {
    parts
        .headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
}

/// The user's budget if the session is known, else the client IP's; nothing on `/health`.
fn by_user(limits: PlugLimit) -> RateLimitLayer<RuntimeLimit> {
    let sessions: Sessions = Arc::new(HashMap::from([
        ("t-ann".to_owned(), "ann".to_owned()),
        ("t-ann-2".to_owned(), "ann".to_owned()),
        ("t-bob".to_owned(), "bob".to_owned()),
    ]));
    let known = Arc::clone(&sessions);
    let user_key = move |parts: &Parts| {
        token(parts)
            .and_then(|token| known.get(token).cloned())
            .ok_or_else(|| KeyError::new("not signed in"))
    };
    let user = RuntimeLimit::new("token_bucket", [2, 60, 2])
        .unwrap()
        .key(user_key);
    let anonymous = RuntimeLimit::new("fixed_window", [1, 60]).unwrap();
    RateLimitLayer::resolve_async(limits, move |parts| {
        let signed_in = token(parts).is_some_and(|token| sessions.contains_key(token));
        let health = parts.uri.path() == "/health";
        let (user, anonymous) = (user.clone(), anonymous.clone());
        async move {
            tokio::task::yield_now().await;
            match (health, signed_in) {
                (true, _) => None,
                (false, true) => Some(user),
                (false, false) => Some(anonymous),
            }
        }
    })
}

/// The token bucket's `x-ratelimit-limit`.
const USER: &str = "2 2;w=60;burst=2;policy=token_bucket";

#[tokio::test]
async fn a_resolver_limits_a_signed_in_user_by_id_and_others_by_ip() {
    let redis = RedisServer::start();
    for (backend, limits) in backends(&redis, |builder| builder) {
        let app = Router::new()
            .route("/me", get(|| async { "me" }))
            .route("/health", get(|| async { "up" }))
            .route_layer(by_user(limits));
        let a = [10, 0, 0, 1];
        let b = [10, 0, 0, 2];
        let ann = [("authorization", "Bearer t-ann")];
        let replies = [
            call(&app, "/me", a, &ann).await,
            // Another session of the same user, from another address: one budget.
            call(&app, "/me", b, &[("authorization", "Bearer t-ann-2")]).await,
            call(&app, "/me", a, &ann).await,
            call(&app, "/me", a, &[("authorization", "Bearer t-bob")]).await,
            // Anonymous, and an unknown token: the address's budget.
            call(&app, "/me", a, &[]).await,
            call(&app, "/me", a, &[("authorization", "Bearer forged")]).await,
            call(&app, "/health", a, &[]).await,
            call(&app, "/health", a, &[]).await,
        ];
        assert_eq!(
            replies.iter().map(seen).collect::<Vec<_>>(),
            [
                (200, s(USER), s("1")),
                (200, s(USER), s("0")),
                (429, s(USER), s("0")),
                (200, s(USER), s("1")),
                (200, s("1"), s("0")),
                (429, s("1"), s("0")),
                (200, None, None),
                (200, None, None),
            ],
            "{backend}"
        );
        assert_eq!(replies[0].body, "me");
        assert_eq!(replies[6].body, "up");
        assert_eq!(replies[6].rate_headers(), [None, None, None, None]);
    }
}

fn failing_app(limits: PlugLimit) -> Router {
    let slow_layer = RateLimitLayer::resolve_async(limits.clone(), |_parts| async {
        tokio::time::sleep(Duration::from_secs(30)).await;
        Some(RuntimeLimit::new("fixed_window", [1, 60]).unwrap())
    });
    let unknown_layer = RateLimitLayer::resolve_async(limits.clone(), |_parts| async {
        Some(RuntimeLimit::new("no_such_limiter", [1, 60]).unwrap())
    });
    let unknown_sync = RateLimitLayer::resolve(limits, |_parts| {
        Some(RuntimeLimit::new("no_such_limiter", [1, 60]).unwrap())
    });
    Router::new()
        .route("/stalled", get(|| async { "ok" }).route_layer(slow_layer))
        .route(
            "/unknown",
            get(|| async { "ok" }).route_layer(unknown_layer),
        )
        .route(
            "/unknown_sync",
            get(|| async { "ok" }).route_layer(unknown_sync),
        )
}

/// What the guide promises: a resolver slower than the timeout, or one naming a limiter the
/// handle does not know, fails by the handle's policy: `Open` and `Memory` pass the request
/// without headers (with no limit known, memory has nothing to decide), `Closed` answers 503.
#[tokio::test]
async fn unknown_limiters_and_slow_resolvers_follow_the_failure_policy() {
    let redis = RedisServer::start();
    for policy in [
        FailurePolicy::Open,
        FailurePolicy::Closed,
        FailurePolicy::Memory,
    ] {
        let configure = |builder: plug_limit::Builder| {
            builder
                .on_failure(policy)
                .timeout(Duration::from_millis(100))
        };
        for (backend, limits) in backends(&redis, configure) {
            let app = failing_app(limits);
            for uri in ["/stalled", "/unknown", "/unknown_sync"] {
                let started = Instant::now();
                let first = call(&app, uri, [10, 0, 0, 1], &[]).await;
                let second = call(&app, uri, [10, 0, 0, 1], &[]).await;
                // Bounded by the timeout: never the resolver's 30 s.
                assert!(
                    started.elapsed() < Duration::from_secs(5),
                    "{backend} {uri}: {:?}",
                    started.elapsed()
                );
                for reply in [&first, &second] {
                    assert_eq!(
                        reply.rate_headers(),
                        [None, None, None, None],
                        "{backend} {uri}"
                    );
                    let expected = match policy {
                        FailurePolicy::Closed => (503, "Rate limiter unavailable"),
                        _ => (200, "ok"),
                    };
                    assert_eq!(
                        (reply.status.as_u16(), reply.body.as_str()),
                        expected,
                        "{backend} {policy:?} {uri}"
                    );
                }
            }
        }
    }
}

/// A resolver within the timeout is waited for, not cut short.
#[tokio::test]
async fn a_resolver_within_the_timeout_decides() {
    let limits = PlugLimit::builder(Store::memory())
        .timeout(Duration::from_millis(500))
        .on_failure(FailurePolicy::Closed)
        .build()
        .unwrap();
    let layer = RateLimitLayer::resolve_async(limits, |_parts| async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        Some(RuntimeLimit::new("fixed_window", [1, 60]).unwrap())
    });
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .route_layer(layer);
    let first = call(&app, "/", [10, 0, 0, 1], &[]).await;
    assert_eq!(
        first.rate_headers(),
        [Some("1"), Some("60"), Some("0"), None]
    );
    let second = call(&app, "/", [10, 0, 0, 1], &[]).await;
    assert_eq!(second.status, 429);
    assert_eq!(
        second.rate_headers(),
        [Some("1"), Some("60"), Some("0"), Some("60")]
    );
}
