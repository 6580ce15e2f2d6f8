//! Failure behaviour: every way a check can fail ends within the timeout, is logged at the
//! configured level, and follows the failure policy. Nothing panics.

use std::time::{Duration, Instant};

use axum::{Router, routing::get};
use plug_limit::{
    Enabled, FailurePolicy, FixedWindow, KeyFailure, Limit, Limiter, LogLevel, Opt, PlugLimit,
    RateLimited, key,
};
use plug_limit_tests::{Logs, RedisServer, dead_url, get as send_get, pool, send};

type Limited = RateLimited<FixedWindow<3, 60>>;

async fn limited(limited: Limited) -> (Limited, &'static str) {
    (limited, "ok")
}

struct Custom;

impl Limit for Custom {
    const LIMITER: &'static str = "custom";
    const OPTS: &'static [Opt] = &[];
}

async fn custom(limited: RateLimited<Custom>) -> (RateLimited<Custom>, &'static str) {
    (limited, "ok")
}

fn app(limits: PlugLimit) -> Router {
    Router::new()
        .route("/", get(limited))
        .route("/custom", get(custom))
        .with_state(limits)
}

/// A PlugLimit whose `custom` limiter runs `lua`, failing open.
fn with_script(redis: &RedisServer, lua: &str) -> PlugLimit {
    PlugLimit::builder(redis.pool())
        .key(key::header("x-client"))
        .limiter("custom", Limiter::script(lua))
        .build()
        .unwrap()
}

#[tokio::test]
async fn lua_error_passes_the_request_without_headers_and_logs_it() {
    let redis = RedisServer::start();
    let app = app(with_script(&redis, "error('boom')"));
    let (logs, _guard) = Logs::capture();
    let reply = send_get(&app, "/custom", "a").await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body, "ok");
    assert_eq!(reply.rate_headers(), [None, None, None, None]);
    let text = logs.text();
    assert!(
        text.contains("ERROR plug_limit: rate limit check failed limiter=custom"),
        "{text}"
    );
    assert!(text.contains("boom"), "{text}");
}

#[tokio::test]
async fn malformed_reply_is_an_error_not_a_decision() {
    let redis = RedisServer::start();
    for (lua, message) in [
        ("return 5", "reply must be an array"),
        ("return {'maybe', {}}", "unknown decision `maybe`"),
        (
            "return {'allow', {'1', '2'}}",
            "header value 0 has no declared name (0 declared)",
        ),
    ] {
        let app = app(with_script(&redis, lua));
        let (logs, _guard) = Logs::capture();
        let reply = send_get(&app, "/custom", "a").await;
        assert_eq!(reply.status, 200, "{lua}");
        assert_eq!(reply.rate_headers(), [None, None, None, None]);
        assert!(logs.text().contains(message), "{lua}: {}", logs.text());
    }
}

#[tokio::test]
async fn redis_down_passes_the_request_quickly() {
    let limits = PlugLimit::builder(pool(&dead_url()))
        .key(key::header("x-client"))
        .log_level(LogLevel::Warn)
        .build()
        .unwrap();
    let app = app(limits);
    let (logs, _guard) = Logs::capture();
    let started = Instant::now();
    let reply = send_get(&app, "/", "a").await;
    assert!(started.elapsed() < Duration::from_millis(500));
    assert_eq!(reply.status, 200);
    assert_eq!(reply.rate_headers(), [None, None, None, None]);
    let text = logs.text();
    assert!(
        text.contains("WARN plug_limit: rate limit check failed limiter=fixed_window"),
        "{text}"
    );
    assert!(text.contains("redis pool"), "{text}");
}

#[tokio::test]
async fn closed_policy_answers_503() {
    let limits = PlugLimit::builder(pool(&dead_url()))
        .key(key::header("x-client"))
        .on_failure(FailurePolicy::Closed)
        .log_level(LogLevel::Off)
        .build()
        .unwrap();
    let app = app(limits);
    let (logs, _guard) = Logs::capture();
    let reply = send_get(&app, "/", "a").await;
    assert_eq!(reply.status, 503);
    assert_eq!(reply.body, "Rate limiter unavailable");
    assert_eq!(logs.text(), "");
}

#[tokio::test]
async fn a_script_that_never_returns_is_bounded_by_the_timeout() {
    // Redis answers BUSY to others after 50 ms, so the script can be killed afterwards.
    let redis = RedisServer::start_with(&["--busy-reply-threshold", "50"]);
    let limits = PlugLimit::builder(redis.pool())
        .key(key::header("x-client"))
        .timeout(Duration::from_millis(200))
        .limiter("custom", Limiter::script("while true do end"))
        .build()
        .unwrap();
    let app = app(limits);
    let (logs, _guard) = Logs::capture();
    let started = Instant::now();
    let reply = send_get(&app, "/custom", "a").await;
    let elapsed = started.elapsed();
    assert!(elapsed >= Duration::from_millis(200), "{elapsed:?}");
    assert!(elapsed < Duration::from_millis(600), "{elapsed:?}");
    assert_eq!(reply.status, 200);
    assert_eq!(reply.rate_headers(), [None, None, None, None]);
    assert!(
        logs.text().contains("timed out after 200ms"),
        "{}",
        logs.text()
    );

    let mut conn = redis.connection().await;
    let killed: String = plug_limit::redis::cmd("SCRIPT")
        .arg("KILL")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(killed, "OK");
}

#[tokio::test]
async fn a_withheld_key_is_not_a_free_pass() {
    let redis = RedisServer::start();
    let limits = |policy| {
        PlugLimit::builder(redis.pool())
            .key(key::header("x-api-key"))
            .on_key_failure(policy)
            .build()
            .unwrap()
    };
    // No peer address to fall back on (no ConnectInfo): refused, never let through unlimited.
    let reply = send_get(&app(limits(KeyFailure::PeerIp)), "/", "a").await;
    assert_eq!(
        (reply.status.as_u16(), reply.body.as_str()),
        (400, "Bad Request")
    );
    let reply = send_get(&app(limits(KeyFailure::Reject)), "/", "a").await;
    assert_eq!(reply.status, 400);
    // Passing is an explicit choice.
    let reply = send_get(&app(limits(KeyFailure::Pass)), "/", "a").await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.rate_headers(), [None, None, None, None]);
}

#[tokio::test]
async fn a_withheld_key_falls_back_to_the_peer_address_in_a_budget_of_its_own() {
    let redis = RedisServer::start();
    let limits = PlugLimit::builder(redis.pool())
        .key(key::header("x-api-key"))
        .build()
        .unwrap();
    let app = app(limits);
    let from =
        |api_key: Option<&str>| {
            let mut request = http::Request::get("/");
            if let Some(api_key) = api_key {
                request = request.header("x-api-key", api_key);
            }
            let mut request = request.body(axum::body::Body::empty()).unwrap();
            request.extensions_mut().insert(axum::extract::ConnectInfo(
                std::net::SocketAddr::from(([192, 0, 2, 7], 4000)),
            ));
            request
        };
    let mut remaining = Vec::new();
    for api_key in [None, None, Some("192.0.2.7"), None] {
        let reply = send(&app, from(api_key)).await;
        remaining.push((
            reply.status.as_u16(),
            reply.header("x-ratelimit-remaining").map(str::to_owned),
        ));
    }
    // Limited<3, 60>: the key-less requests share the peer's budget; a client sending the
    // peer's address as its key gets a budget of its own.
    assert_eq!(
        remaining,
        [
            (200, Some("2".to_owned())),
            (200, Some("1".to_owned())),
            (200, Some("2".to_owned())),
            (200, Some("0".to_owned())),
        ]
    );
}

#[tokio::test]
async fn the_default_key_needs_connect_info() {
    let redis = RedisServer::start();
    let app = app(PlugLimit::redis(redis.pool()));
    let (logs, _guard) = Logs::capture();
    for _ in 0..3 {
        let reply = send_get(&app, "/", "a").await;
        assert_eq!(reply.status, 400);
    }
    // Said once, loudly, with the fix: the 400s alone would leave it unexplained.
    let text = logs.text();
    let warned: Vec<&str> = text
        .lines()
        .filter(|line| line.contains("WARN") && line.contains("peer address"))
        .collect();
    assert_eq!(warned.len(), 1, "{text}");
    assert!(
        warned[0].contains("into_make_service_with_connect_info")
            && warned[0].contains("MockConnectInfo"),
        "{}",
        warned[0]
    );
}

/// The fix the warning names for tests works: axum's `MockConnectInfo` layer gives the
/// default key its peer, as axum's own `ConnectInfo` extractor reads it, where the key
/// read `ConnectInfo` alone and every such request got 400.
#[tokio::test]
async fn mock_connect_info_gives_the_default_key_its_peer() {
    use axum::extract::connect_info::MockConnectInfo;
    let peer = std::net::SocketAddr::from(([203, 0, 113, 7], 4000));
    let app = app(PlugLimit::memory()).layer(MockConnectInfo(peer));
    let statuses = [
        send_get(&app, "/", "a").await.status,
        send_get(&app, "/", "b").await.status,
    ];
    // One budget for the one peer, whatever the `x-client` header says.
    let third = send_get(&app, "/", "c").await;
    assert_eq!(statuses, [200, 200]);
    assert_eq!(third.status, 200);
    assert_eq!(third.header("x-ratelimit-remaining"), Some("0"));
    assert_eq!(send_get(&app, "/", "d").await.status, 429);
}

#[tokio::test]
async fn scripts_survive_script_flush() {
    let redis = RedisServer::start();
    let limits = PlugLimit::builder(redis.pool())
        .key(key::header("x-client"))
        .build()
        .unwrap();
    let app = app(limits);
    assert_eq!(
        send_get(&app, "/", "a")
            .await
            .header("x-ratelimit-remaining"),
        Some("2")
    );
    let mut conn = redis.connection().await;
    let _: () = plug_limit::redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut conn)
        .await
        .unwrap();
    let reply = send_get(&app, "/", "a").await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("x-ratelimit-remaining"), Some("1"));
}

#[tokio::test]
async fn the_first_request_after_a_redis_restart_is_decided() {
    let mut redis = RedisServer::start();
    let limits = PlugLimit::builder(redis.pool())
        .key(key::header("x-client"))
        .build()
        .unwrap();
    let app = app(limits);
    assert_eq!(
        send_get(&app, "/", "a")
            .await
            .header("x-ratelimit-remaining"),
        Some("2")
    );
    assert_eq!(
        send_get(&app, "/", "a")
            .await
            .header("x-ratelimit-remaining"),
        Some("1")
    );
    redis.restart();
    // A moment passes before the next request, as in production: the shared connection's
    // driver reads the old server's close. The connection then refuses the request on the
    // spot (provably unsent), the backend sends it on a fresh connection, and the new, empty
    // server (no scripts, no counters) starts a fresh window.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let reply = send_get(&app, "/", "a").await;
    assert_eq!(reply.status, 200);
    assert_eq!(
        reply.rate_headers(),
        [Some("3"), Some("60"), Some("2"), None]
    );
}

#[tokio::test]
async fn disabled_makes_no_redis_call_and_adds_no_headers() {
    // A closed policy on a dead port: any Redis call would answer 503.
    let limits = PlugLimit::builder(pool(&dead_url()))
        .key(key::header("x-client"))
        .enabled(false)
        .on_failure(FailurePolicy::Closed)
        .build()
        .unwrap();
    assert!(!limits.is_enabled());
    let app = app(limits);
    for _ in 0..5 {
        let reply = send_get(&app, "/", "a").await;
        assert_eq!(reply.status, 200);
        assert_eq!(reply.rate_headers(), [None, None, None, None]);
    }
}

#[tokio::test]
async fn an_unset_enabled_variable_uses_its_default() {
    let var = "PLUG_LIMIT_TEST_NEVER_SET_4F1C";
    let limits = PlugLimit::builder(pool(&dead_url()))
        .key(key::header("x-client"))
        .enabled(Enabled::env(var, false))
        .on_failure(FailurePolicy::Closed)
        .build()
        .unwrap();
    let reply = send_get(&app(limits), "/", "a").await;
    assert_eq!(reply.status, 200);
    let on = PlugLimit::builder(pool(&dead_url()))
        .key(key::header("x-client"))
        .enabled(Enabled::env(var, true))
        .on_failure(FailurePolicy::Closed)
        .log_level(LogLevel::Off)
        .build()
        .unwrap();
    assert_eq!(send_get(&app(on), "/", "a").await.status, 503);
}

#[tokio::test]
async fn an_unknown_limiter_follows_the_policy() {
    let redis = RedisServer::start();
    let limits = PlugLimit::builder(redis.pool())
        .key(key::header("x-client"))
        .build()
        .unwrap();
    let (logs, _guard) = Logs::capture();
    let reply = send_get(&app(limits), "/custom", "a").await;
    assert_eq!(reply.status, 200);
    assert!(
        logs.text()
            .contains("unknown limiter `custom`; register it with `Builder::limiter`"),
        "{}",
        logs.text()
    );
}
