//! The built-in token bucket limiter, call for call, on real Redis and in memory.

use std::time::Duration;

use axum::{Router, routing::get};
use plug_limit::{Opt, Outcome, PlugLimit, RateLimited, TokenBucket, key};
use plug_limit_tests::limit;
use plug_limit_tests::{RedisServer, backends, get as send_get};

fn render(outcome: &Outcome) -> (bool, Vec<String>) {
    let values = outcome
        .headers()
        .iter()
        .map(|(_, v)| v.to_str().unwrap().to_owned())
        .collect();
    (outcome.is_allowed(), values)
}

async fn calls(limits: &PlugLimit, opts: &[Opt], n: usize) -> Vec<(bool, Vec<String>)> {
    let mut seen = Vec::new();
    for _ in 0..n {
        seen.push(render(
            &limits
                .check(limit("token_bucket", opts), "k")
                .await
                .unwrap(),
        ));
    }
    seen
}

fn expect(allow: bool, values: &[&str]) -> (bool, Vec<String>) {
    (allow, values.iter().map(|v| (*v).to_owned()).collect())
}

const P532: &str = "5 5;w=2;burst=3;policy=token_bucket";
const P422: &str = "4 4;w=2;burst=2;policy=token_bucket";

#[tokio::test]
async fn burst_then_refill_matches_the_reference_after_window_elapses() {
    let redis = RedisServer::start();
    let both = backends(&redis, |b| b);
    let opts = [Opt::Int(5), Opt::Int(2), Opt::Int(3)];
    for (backend, limits) in &both {
        assert_eq!(
            calls(limits, &opts, 5).await,
            [
                expect(true, &[P532, "2", "4"]),
                expect(true, &[P532, "2", "3"]),
                expect(true, &[P532, "2", "2", "1"]),
                expect(false, &[P532, "2", "2", "1"]),
                expect(false, &[P532, "2", "2", "1"]),
            ],
            "{backend}"
        );
    }
    // (5 - 3) / 2 = one token a second.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    for (backend, limits) in &both {
        assert_eq!(
            calls(limits, &opts, 3).await,
            [
                expect(true, &[P532, "1", "1", "1"]),
                expect(false, &[P532, "1", "1", "1"]),
                expect(false, &[P532, "1", "1", "1"]),
            ],
            "{backend}"
        );
    }
}

#[tokio::test]
async fn bucket_resets_after_window_elapses() {
    let redis = RedisServer::start();
    let both = backends(&redis, |b| b);
    let opts = [Opt::Int(4), Opt::Int(2), Opt::Int(2)];
    for (backend, limits) in &both {
        assert_eq!(
            calls(limits, &opts, 4).await,
            [
                expect(true, &[P422, "2", "3"]),
                expect(true, &[P422, "2", "2", "1"]),
                expect(false, &[P422, "2", "2", "1"]),
                expect(false, &[P422, "2", "2", "1"]),
            ],
            "{backend}"
        );
    }
    tokio::time::sleep(Duration::from_millis(1000)).await;
    for (backend, limits) in &both {
        assert_eq!(
            calls(limits, &opts, 2).await,
            [
                expect(true, &[P422, "1", "1", "1"]),
                expect(false, &[P422, "1", "1", "1"]),
            ],
            "{backend}"
        );
    }
    tokio::time::sleep(Duration::from_millis(1100)).await;
    for (backend, limits) in &both {
        assert_eq!(
            calls(limits, &opts, 1).await,
            [expect(true, &[P422, "2", "3"])],
            "{backend}"
        );
    }
}

#[tokio::test]
async fn burst_equal_to_limit_never_refills_and_retry_after_is_the_reset() {
    let redis = RedisServer::start();
    let opts = [Opt::Int(2), Opt::Int(60), Opt::Int(2)];
    let p = "2 2;w=60;burst=2;policy=token_bucket";
    for (backend, limits) in backends(&redis, |b| b) {
        assert_eq!(
            calls(&limits, &opts, 3).await,
            [
                expect(true, &[p, "60", "1"]),
                expect(true, &[p, "60", "0", "60"]),
                expect(false, &[p, "60", "0", "60"]),
            ],
            "{backend}"
        );
    }
}

#[tokio::test]
async fn invalid_opts_are_refused_by_the_script_with_the_rule() {
    let redis = RedisServer::start();
    let cases = [
        ([5, 2, 0], "burst must be >= 1, got '0'"),
        ([2, 2, 3], "burst must be <= limit, got '3'"),
        ([5, 0, 3], "window must be a positive integer, got '0'"),
    ];
    for (backend, limits) in backends(&redis, |b| b) {
        for (opts, rule) in cases {
            let opts = opts.map(Opt::Int);
            let text = limits
                .check(limit("token_bucket", &opts), "bad")
                .await
                .unwrap_err()
                .to_string();
            assert!(
                text.contains(&format!("token_bucket: {rule}")),
                "{backend}: {text}"
            );
        }
    }
}

type Export = RateLimited<TokenBucket<5, 2, 3>>;

async fn export(limited: Export) -> (Export, &'static str) {
    (limited, "exported")
}

#[tokio::test]
async fn extractor_sends_retry_after_once_the_bucket_is_empty() {
    let redis = RedisServer::start();
    let limits = PlugLimit::builder(redis.pool())
        .key(key::header("x-client"))
        .build()
        .unwrap();
    let app = Router::new()
        .route("/export", get(export))
        .with_state(limits);
    let first = send_get(&app, "/export", "c").await;
    assert_eq!(first.status, 200);
    assert_eq!(
        first.rate_headers(),
        [Some(P532), Some("2"), Some("4"), None]
    );
    send_get(&app, "/export", "c").await;
    let last = send_get(&app, "/export", "c").await;
    assert_eq!(last.status, 200);
    assert_eq!(
        last.rate_headers(),
        [Some(P532), Some("2"), Some("2"), Some("1")]
    );
    let denied = send_get(&app, "/export", "c").await;
    assert_eq!(denied.status, 429);
    assert_eq!(
        denied.rate_headers(),
        [Some(P532), Some("2"), Some("2"), Some("1")]
    );
}
