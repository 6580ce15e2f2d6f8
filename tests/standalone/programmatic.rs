//! Weighted costs, peeks and resets, on every built-in and both backends.

use axum::{Router, routing::get};
use plug_limit::{Limit, Opt, Outcome, RateLimited, key};
use plug_limit_tests::{RedisServer, backends, get as send_get};
use plug_limit_tests::{limit, limit_cost};

/// Every built-in with a limit of 4 per 60 s (bursts of 4 where there is a burst).
const FOUR: [(&str, &[Opt]); 7] = [
    ("fixed_window", &[Opt::Int(4), Opt::Int(60)]),
    ("token_bucket", &[Opt::Int(4), Opt::Int(60), Opt::Int(4)]),
    ("sliding_window", &[Opt::Int(4), Opt::Int(60)]),
    ("sliding_log", &[Opt::Int(4), Opt::Int(60)]),
    ("leaky_bucket", &[Opt::Int(4), Opt::Int(60)]),
    ("gcra", &[Opt::Int(4), Opt::Int(60), Opt::Int(4)]),
    ("multi_window", &[Opt::Str("4/60"), Opt::Str("10/3600")]),
];

fn remaining(outcome: &Outcome) -> &str {
    outcome
        .header("x-ratelimit-remaining")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("<none>")
}

#[tokio::test]
async fn cost_peek_and_reset_on_every_built_in() {
    let redis = RedisServer::start();
    for (backend, limits) in backends(&redis, |b| b) {
        for (limiter, opts) in FOUR {
            let at = format!("{backend}/{limiter}");
            // A peek answers as a request of cost 1 would be answered, and writes nothing.
            let peek = limits.peek(limit(limiter, opts), "k").await.unwrap();
            assert!(peek.is_allowed(), "{at}");
            assert_eq!(remaining(&peek), "3", "{at}");

            let three = limits
                .check(limit_cost(limiter, opts, 3), "k")
                .await
                .unwrap();
            assert!(three.is_allowed(), "{at}");
            assert_eq!(remaining(&three), "1", "{at}");

            // Two more units do not fit, and a denied request consumes nothing.
            let two = limits
                .check(limit_cost(limiter, opts, 2), "k")
                .await
                .unwrap();
            assert!(!two.is_allowed(), "{at}");
            let peek = limits.peek(limit(limiter, opts), "k").await.unwrap();
            assert!(peek.is_allowed(), "{at}");
            assert_eq!(remaining(&peek), "0", "{at}");
            let one = limits.check(limit(limiter, opts), "k").await.unwrap();
            assert!(one.is_allowed(), "{at}");
            assert_eq!(remaining(&one), "0", "{at}");
            assert!(
                !limits
                    .peek(limit(limiter, opts), "k")
                    .await
                    .unwrap()
                    .is_allowed(),
                "{at}"
            );

            limits.reset(limit(limiter, opts), "k").await.unwrap();
            let fresh = limits.check(limit(limiter, opts), "k").await.unwrap();
            assert!(fresh.is_allowed(), "{at}");
            assert_eq!(remaining(&fresh), "3", "{at}");
        }
    }
}

#[tokio::test]
async fn custom_scripts_take_no_cost_and_cannot_peek() {
    let redis = RedisServer::start();
    let limits = plug_limit::PlugLimit::builder(redis.pool())
        .limiter(
            "custom",
            plug_limit::Limiter::script("return {'allow', {}}"),
        )
        .build()
        .unwrap();
    assert!(
        limits
            .check(limit("custom", &[]), "k")
            .await
            .unwrap()
            .is_allowed()
    );
    let message = "limiter `custom` is a custom script: costs, peeks, clocks and the memory backend need a built-in";
    assert_eq!(
        limits
            .peek(limit("custom", &[]), "k")
            .await
            .unwrap_err()
            .to_string(),
        message
    );
    assert_eq!(
        limits
            .check(limit_cost("custom", &[], 2), "k")
            .await
            .unwrap_err()
            .to_string(),
        message
    );
}

struct Upload;

impl Limit for Upload {
    const LIMITER: &'static str = "fixed_window";
    const OPTS: &'static [Opt] = &[Opt::Int(10), Opt::Int(60)];
    const COST: u32 = 4;
}

async fn upload(limited: RateLimited<Upload>) -> (RateLimited<Upload>, &'static str) {
    (limited, "stored")
}

#[tokio::test]
async fn a_limit_can_cost_more_than_one() {
    let redis = RedisServer::start();
    for (backend, limits) in backends(&redis, |b| b.key(key::header("x-client"))) {
        let app = Router::new()
            .route("/upload", get(upload))
            .with_state(limits);
        let statuses: Vec<(u16, Option<String>)> = {
            let mut seen = Vec::new();
            for _ in 0..3 {
                let reply = send_get(&app, "/upload", "u").await;
                let remaining = reply.header("x-ratelimit-remaining").map(str::to_owned);
                seen.push((reply.status.as_u16(), remaining));
            }
            seen
        };
        assert_eq!(
            statuses,
            [
                (200, Some("6".to_owned())),
                (200, Some("2".to_owned())),
                // Denied: nothing consumed, two units left for a smaller request.
                (429, Some("2".to_owned())),
            ],
            "{backend}"
        );
    }
}

/// An outcome's numbers read without parsing headers, on both backends and in both header
/// styles, equal to what the headers say; a custom script's outcome has none.
#[tokio::test]
async fn an_outcomes_numbers_are_the_headers_numbers() {
    use std::time::Duration;

    use plug_limit::{HeaderStyle, RuntimeLimit};
    let redis = RedisServer::start();
    for style in [HeaderStyle::Legacy, HeaderStyle::Draft10] {
        for (backend, limits) in backends(&redis, |b| b.header_style(style)) {
            let at = format!("{backend} {style:?}");
            let key = at.as_str();
            let bucket = RuntimeLimit::new("token_bucket", [2, 60, 2]).unwrap();
            let first = limits.check(bucket.clone(), key).await.unwrap();
            assert_eq!(first.limit(), Some(2), "{at}");
            assert_eq!(first.remaining(), Some(1), "{at}");
            assert_eq!(first.reset(), Some(Duration::from_secs(60)), "{at}");
            assert_eq!(first.retry_after(), None, "{at}");
            assert_eq!(
                first.policy().as_deref(),
                Some("2 2;w=60;burst=2;policy=token_bucket"),
                "{at}"
            );
            limits.check(bucket.clone(), key).await.unwrap();
            let denied = limits.check(bucket, key).await.unwrap();
            assert!(!denied.is_allowed(), "{at}");
            assert_eq!(denied.remaining(), Some(0), "{at}");
            assert_eq!(denied.retry_after(), Some(Duration::from_secs(60)), "{at}");
            if style == HeaderStyle::Legacy {
                let header = |name| denied.header(name).unwrap().to_str().unwrap().to_owned();
                assert_eq!(header("retry-after"), "60", "{at}");
                assert_eq!(header("x-ratelimit-remaining"), "0", "{at}");
            }
            let rates = RuntimeLimit::new("multi_window", ["1/10", "5/3600"]).unwrap();
            limits.check(rates.clone(), key).await.unwrap();
            let by_the_short_window = limits.check(rates, key).await.unwrap();
            assert_eq!(by_the_short_window.limit(), Some(1), "{at}");
            assert_eq!(by_the_short_window.policy().as_deref(), Some("1"), "{at}");
            assert_eq!(
                by_the_short_window.retry_after(),
                Some(Duration::from_secs(10)),
                "{at}"
            );
        }
    }
    let custom = plug_limit::PlugLimit::builder(redis.pool())
        .limiter(
            "echo",
            plug_limit::Limiter::script("return {'allow', {'7', '6', '5'}}").headers([
                "x-ratelimit-limit",
                "x-ratelimit-reset",
                "x-ratelimit-remaining",
            ]),
        )
        .build()
        .unwrap();
    let echo = RuntimeLimit::new("echo", Vec::<Opt>::new()).unwrap();
    let outcome = custom.check(echo, "numbers").await.unwrap();
    assert_eq!(outcome.header("x-ratelimit-limit").unwrap(), "7");
    assert_eq!(
        (
            outcome.limit(),
            outcome.remaining(),
            outcome.reset(),
            outcome.policy()
        ),
        (None, None, None, None)
    );
}
