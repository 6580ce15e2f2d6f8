//! Limits resolved per request: `RateLimitLayer::resolve_async` and the extractor
//! `RateLimited<Resolved<R>>` with a `ResolveLimit` reading the router state.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{ConnectInfo, FromRef};
use axum::http::request::Parts;
use axum::{Router, routing::get};
use plug_limit::{
    FailurePolicy, KeyError, PlugLimit, RateLimitLayer, RateLimited, ResolveLimit, Resolved,
    RuntimeLimit, key,
};
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

#[derive(Clone, FromRef)]
struct AppState {
    limits: PlugLimit,
    /// Session token -> user id: what a session store would answer.
    sessions: Arc<HashMap<String, String>>,
    #[from_ref(skip)]
    user: RuntimeLimit,
    #[from_ref(skip)]
    anonymous: RuntimeLimit,
}

/// The signed-in user a resolver found, for the user limit's key.
#[derive(Clone)]
struct UserId(String);

fn user_key(parts: &Parts) -> Result<String, KeyError> {
    parts
        .extensions
        .get::<UserId>()
        .map(|user| user.0.clone())
        .ok_or_else(|| KeyError::new("not signed in"))
}

/// The user's budget if the session is known, else the client IP's.
struct UserElseIp;

impl ResolveLimit<AppState> for UserElseIp {
    async fn resolve(parts: &mut Parts, state: &AppState) -> Option<RuntimeLimit> {
        tokio::task::yield_now().await;
        let token = parts
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        match token.and_then(|token| state.sessions.get(token)) {
            Some(user) => {
                parts.extensions.insert(UserId(user.clone()));
                Some(state.user.clone())
            }
            None => Some(state.anonymous.clone()),
        }
    }
}

/// Nothing limits the health check.
struct HealthUnlimited;

impl ResolveLimit<AppState> for HealthUnlimited {
    async fn resolve(_parts: &mut Parts, _state: &AppState) -> Option<RuntimeLimit> {
        None
    }
}

type ByUser = RateLimited<Resolved<UserElseIp>>;

async fn whoami(limited: ByUser) -> (ByUser, &'static str) {
    (limited, "me")
}

async fn health(limited: RateLimited<Resolved<HealthUnlimited>>) -> &'static str {
    assert!(limited.outcome().is_none());
    "up"
}

fn state(limits: PlugLimit) -> AppState {
    AppState {
        limits,
        sessions: Arc::new(HashMap::from([
            ("t-ann".to_owned(), "ann".to_owned()),
            ("t-ann-2".to_owned(), "ann".to_owned()),
            ("t-bob".to_owned(), "bob".to_owned()),
        ])),
        user: RuntimeLimit::new("token_bucket", [2, 60, 2])
            .unwrap()
            .key(user_key),
        anonymous: RuntimeLimit::new("fixed_window", [1, 60]).unwrap(),
    }
}

/// The token bucket's `x-ratelimit-limit`.
const USER: &str = "2 2;w=60;burst=2;policy=token_bucket";

#[tokio::test]
async fn the_extractor_limits_a_signed_in_user_by_id_and_others_by_ip() {
    let redis = RedisServer::start();
    for (backend, limits) in backends(&redis, |builder| builder) {
        let app = Router::new()
            .route("/me", get(whoami))
            .route("/health", get(health))
            .with_state(state(limits));
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

/// A resolver naming a limiter nothing registers fails by the handle's failure policy.
struct Unknown;

impl ResolveLimit<PlugLimit> for Unknown {
    async fn resolve(_parts: &mut Parts, _state: &PlugLimit) -> Option<RuntimeLimit> {
        Some(RuntimeLimit::new("no_such_limiter", [1, 60]).unwrap())
    }
}

/// A resolver slower than the check's timeout (a database that stopped answering).
struct Stalled;

impl ResolveLimit<PlugLimit> for Stalled {
    async fn resolve(_parts: &mut Parts, _state: &PlugLimit) -> Option<RuntimeLimit> {
        tokio::time::sleep(Duration::from_secs(30)).await;
        Some(RuntimeLimit::new("fixed_window", [1, 60]).unwrap())
    }
}

async fn unknown(_limited: RateLimited<Resolved<Unknown>>) -> &'static str {
    "unknown"
}

async fn stalled(_limited: RateLimited<Resolved<Stalled>>) -> &'static str {
    "stalled"
}

fn failing_app(limits: PlugLimit) -> Router {
    let slow_layer = RateLimitLayer::resolve_async(limits.clone(), |_parts| async {
        tokio::time::sleep(Duration::from_secs(30)).await;
        Some(RuntimeLimit::new("fixed_window", [1, 60]).unwrap())
    });
    let unknown_layer = RateLimitLayer::resolve_async(limits.clone(), |_parts| async {
        Some(RuntimeLimit::new("no_such_limiter", [1, 60]).unwrap())
    });
    Router::new()
        .route("/unknown", get(unknown))
        .route("/stalled", get(stalled))
        .route(
            "/layer/stalled",
            get(|| async { "layer" }).route_layer(slow_layer),
        )
        .route(
            "/layer/unknown",
            get(|| async { "layer" }).route_layer(unknown_layer),
        )
        .with_state(limits)
}

#[tokio::test]
async fn unknown_limiters_and_slow_resolvers_follow_the_failure_policy() {
    let redis = RedisServer::start();
    for policy in [FailurePolicy::Open, FailurePolicy::Closed] {
        let configure = |builder: plug_limit::Builder| {
            builder
                .on_failure(policy)
                .timeout(Duration::from_millis(100))
        };
        for (backend, limits) in backends(&redis, configure) {
            let app = failing_app(limits);
            for uri in ["/unknown", "/stalled", "/layer/stalled", "/layer/unknown"] {
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
                    if policy == FailurePolicy::Closed {
                        assert_eq!(reply.status, 503, "{backend} {uri}");
                    } else {
                        assert_eq!(reply.status, 200, "{backend} {uri}");
                        let expected = uri.rsplit('/').next().unwrap();
                        let expected = if uri.starts_with("/layer") {
                            "layer"
                        } else {
                            expected
                        };
                        assert_eq!(reply.body, expected, "{backend} {uri}");
                    }
                }
            }
        }
    }
}

/// A resolver within the timeout is waited for, not cut short.
#[tokio::test]
async fn a_resolver_within_the_timeout_decides() {
    let limits = PlugLimit::memory_builder()
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
