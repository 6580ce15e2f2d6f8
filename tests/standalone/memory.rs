//! The memory backend's own rules: built-ins only, bounded memory, and the fallback policy.

use std::time::Duration;

use axum::{Router, routing::get};
use plug_limit::{
    FailurePolicy, FixedWindow, Limiter, LogLevel, ManualClock, Opt, PlugLimit, RateLimited, Store,
    key,
};
use plug_limit_tests::limit;
use plug_limit_tests::{Logs, dead_url, get as send_get, pool};

#[test]
fn custom_lua_and_own_pools_are_refused_by_build() {
    let lua = PlugLimit::builder(Store::memory())
        .limiter("quota", Limiter::script("return {'allow', {}}"))
        .build()
        .unwrap_err();
    assert_eq!(
        lua.to_string(),
        "invalid `limiters.quota`: custom Lua scripts need Redis: the memory backend runs built-in limiters"
    );
    let own_pool = PlugLimit::builder(Store::memory())
        .limiter("strict", Limiter::fixed_window().pool(pool(&dead_url())))
        .build()
        .unwrap_err();
    assert_eq!(
        own_pool.to_string(),
        "invalid `limiters.strict.pool`: a limiter's own Redis pool or connection needs the Redis backend"
    );
    // A built-in script under another name runs in memory.
    let renamed = PlugLimit::builder(Store::memory())
        .limiter("strict", Limiter::token_bucket())
        .build();
    assert!(renamed.is_ok());
}

#[test]
fn memory_fallback_needs_a_built_in() {
    let error = PlugLimit::builder(pool(&dead_url()))
        .limiter(
            "quota",
            Limiter::script("return {'allow', {}}").on_failure(FailurePolicy::Memory),
        )
        .build()
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "invalid `limiters.quota`: `on_failure: memory` needs a built-in limiter: memory cannot run custom Lua scripts"
    );
}

#[tokio::test]
async fn expired_state_is_evicted_without_a_background_task() {
    let clock = ManualClock::starting_now();
    let limits = PlugLimit::builder(Store::memory())
        .clock(clock.clone())
        .build()
        .unwrap();
    let opts = [Opt::Int(5), Opt::Int(1)];
    for i in 0..20_000 {
        limits
            .check(limit("fixed_window", &opts), &format!("a{i}"))
            .await
            .unwrap();
    }
    assert_eq!(limits.memory_keys(), Some(20_000));
    // Every window has ended; new traffic sweeps the old keys as it goes.
    clock.advance(Duration::from_secs(2));
    for i in 0..20_000 {
        limits
            .check(limit("fixed_window", &opts), &format!("b{i}"))
            .await
            .unwrap();
    }
    let held = limits.memory_keys().unwrap();
    assert!(
        (20_000..30_000).contains(&held),
        "{held} keys held for 20000 live ones"
    );
    // A key that expired and was not swept yet starts afresh, like an expired Redis key.
    let again = limits
        .check(limit("fixed_window", &opts), "b0")
        .await
        .unwrap();
    assert_eq!(again.header("x-ratelimit-remaining").unwrap(), "3");
    clock.advance(Duration::from_secs(2));
    let fresh = limits
        .check(limit("fixed_window", &opts), "b0")
        .await
        .unwrap();
    assert_eq!(fresh.header("x-ratelimit-remaining").unwrap(), "4");
}

type Three = RateLimited<FixedWindow<3, 60>>;

async fn three(limited: Three) -> (Three, &'static str) {
    (limited, "ok")
}

#[tokio::test]
async fn memory_policy_decides_in_process_while_redis_is_down() {
    let limits = PlugLimit::builder(pool(&dead_url()))
        .key(key::header("x-client"))
        .on_failure(FailurePolicy::Memory)
        .log_level(LogLevel::Warn)
        .build()
        .unwrap();
    let app = Router::new().route("/", get(three)).with_state(limits);
    let (logs, _guard) = Logs::capture();
    for remaining in ["2", "1", "0"] {
        let reply = send_get(&app, "/", "a").await;
        assert_eq!(reply.status, 200);
        assert_eq!(
            reply.rate_headers(),
            [Some("3"), Some("60"), Some(remaining), None]
        );
    }
    assert_eq!(send_get(&app, "/", "a").await.status, 429);
    // One line a second per limiter, however many checks fail: an outage cannot flood logs.
    let text = logs.text();
    assert_eq!(
        text.matches("WARN plug_limit: rate limit check failed limiter=fixed_window")
            .count(),
        1,
        "{text}"
    );
}

/// A built-in registered with header names of its own answers its values under them, in
/// memory as on Redis; fewer names than values is the reply error Redis gives, never a header
/// left out.
#[tokio::test]
async fn a_built_in_answers_under_the_header_names_it_was_given() {
    let limits = PlugLimit::builder(Store::memory())
        .limiter(
            "named",
            Limiter::fixed_window().headers(["x-quota", "x-reset", "x-left"]),
        )
        .limiter("short", Limiter::fixed_window().headers(["x-quota"]))
        .build()
        .unwrap();
    let opts = [Opt::Int(5), Opt::Int(60)];
    let named = limits.check(limit("named", &opts), "k").await.unwrap();
    let headers: Vec<(String, String)> = named
        .headers()
        .iter()
        .map(|(name, value)| (name.to_string(), value.to_str().unwrap().to_owned()))
        .collect();
    assert_eq!(
        headers,
        [
            ("x-quota".to_owned(), "5".to_owned()),
            ("x-reset".to_owned(), "60".to_owned()),
            ("x-left".to_owned(), "4".to_owned()),
        ]
    );
    let short = limits.check(limit("short", &opts), "k").await.unwrap_err();
    assert!(
        matches!(
            short,
            plug_limit::Error::Reply(plug_limit::ReplyError::UndeclaredHeader {
                position: 1,
                declared: 1
            })
        ),
        "{short:?}"
    );
}
