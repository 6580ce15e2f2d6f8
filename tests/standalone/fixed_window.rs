//! The built-in fixed window limiter, call for call, on real Redis and in memory.

use std::time::Duration;

use axum::{Router, routing::get};
use plug_limit::{FixedWindow, Opt, PlugLimit, RateLimited, key};
use plug_limit_tests::limit;
use plug_limit_tests::{RedisServer, backends, get as send_get, stored_key};

type Three = RateLimited<FixedWindow<3, 60>>;

async fn three(limited: Three) -> (Three, &'static str) {
    (limited, "ok")
}

fn app(limits: PlugLimit) -> Router {
    Router::new().route("/three", get(three)).with_state(limits)
}

#[tokio::test]
async fn counts_down_then_denies_with_429_and_headers() {
    let redis = RedisServer::start();
    let limits = PlugLimit::builder(redis.pool())
        .key(key::header("x-client"))
        .build()
        .unwrap();
    let app = app(limits);

    for remaining in ["2", "1", "0"] {
        let reply = send_get(&app, "/three", "alice").await;
        assert_eq!(reply.status, 200);
        assert_eq!(reply.body, "ok");
        assert_eq!(
            reply.rate_headers(),
            [Some("3"), Some("60"), Some(remaining), None]
        );
    }
    let denied = send_get(&app, "/three", "alice").await;
    assert_eq!(denied.status, 429);
    assert_eq!(denied.body, "Too Many Requests");
    assert_eq!(
        denied.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    // The script answers no retry-after; the library adds its reset as one.
    assert_eq!(
        denied.rate_headers(),
        [Some("3"), Some("60"), Some("0"), Some("60")]
    );

    // Another client has its own budget.
    let bob = send_get(&app, "/three", "bob").await;
    assert_eq!(bob.rate_headers(), [Some("3"), Some("60"), Some("2"), None]);
}

#[tokio::test]
async fn script_reply_matches_the_reference_sequence() {
    let redis = RedisServer::start();
    for (backend, limits) in backends(&redis, |b| b) {
        let opts = [Opt::Int(3), Opt::Int(60)];
        let mut seen = Vec::new();
        for _ in 0..5 {
            let outcome = limits
                .check(limit("fixed_window", &opts), "k")
                .await
                .unwrap();
            let values: Vec<String> = outcome
                .headers()
                .iter()
                .map(|(_, v)| v.to_str().unwrap().to_owned())
                .collect();
            seen.push((outcome.is_allowed(), values.join(",")));
        }
        assert_eq!(
            seen,
            [
                (true, "3,60,2".to_owned()),
                (true, "3,60,1".to_owned()),
                (true, "3,60,0".to_owned()),
                // The script's values, and its reset as `retry-after`.
                (false, "3,60,0,60".to_owned()),
                (false, "3,60,0,60".to_owned()),
            ],
            "{backend}"
        );
    }
}

#[tokio::test]
async fn window_restarts_after_window_elapses() {
    let redis = RedisServer::start();
    let both = backends(&redis, |b| b);
    let opts = [Opt::Int(1), Opt::Int(1)];
    for (backend, limits) in &both {
        assert!(
            limits
                .check(limit("fixed_window", &opts), "w")
                .await
                .unwrap()
                .is_allowed()
        );
        let denied = limits
            .check(limit("fixed_window", &opts), "w")
            .await
            .unwrap();
        assert!(!denied.is_allowed(), "{backend}");
        assert_eq!(
            denied.header("x-ratelimit-reset").unwrap(),
            "1",
            "{backend}"
        );
    }

    tokio::time::sleep(Duration::from_millis(1100)).await;
    for (backend, limits) in &both {
        let fresh = limits
            .check(limit("fixed_window", &opts), "w")
            .await
            .unwrap();
        assert!(fresh.is_allowed(), "{backend}");
        assert_eq!(fresh.header("x-ratelimit-remaining").unwrap(), "0");
        assert_eq!(fresh.header("x-ratelimit-reset").unwrap(), "1");
    }
}

#[tokio::test]
async fn every_key_gets_a_ttl() {
    let redis = RedisServer::start();
    let limits = PlugLimit::builder(redis.pool())
        .prefix("ttl")
        .build()
        .unwrap();
    limits
        .check(limit("fixed_window", &[Opt::Int(5), Opt::Int(60)]), "k")
        .await
        .unwrap();
    let mut conn = redis.connection().await;
    let ttl: i64 = plug_limit::redis::cmd("TTL")
        .arg(stored_key("ttl", "fixed_window", "5,60", "", "k"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(ttl, 60);
}

#[tokio::test]
async fn invalid_opts_are_refused_by_the_script_with_the_rule() {
    let redis = RedisServer::start();
    let cases = [
        (
            vec![Opt::Int(0), Opt::Int(60)],
            "limit must be a positive integer, got '0'",
        ),
        (
            vec![Opt::Int(3), Opt::Int(-1)],
            "window must be a positive integer, got '-1'",
        ),
        (
            vec![Opt::Str("1.5"), Opt::Int(60)],
            "limit must be a positive integer, got '1.5'",
        ),
        (vec![Opt::Int(3)], "takes 2 options, found 1"),
    ];
    for (backend, limits) in backends(&redis, |b| b) {
        for (opts, rule) in &cases {
            let error = limits
                .check(limit("fixed_window", opts), "bad")
                .await
                .unwrap_err();
            let text = error.to_string();
            assert!(
                text.contains(&format!("fixed_window: {rule}")),
                "{backend}: {text}"
            );
        }
    }
}
