//! Settling a request admitted on an estimate: refunds and forced charges through
//! `PlugLimit::settle`, on every built-in and both backends.

use plug_limit::{ManualClock, Opt, Outcome};
use plug_limit_tests::{RedisServer, backends};
use plug_limit_tests::{limit, limit_cost};

/// 2084-03-01T04:59:54Z: far from any window's end within a test, and never in a real
/// Redis' past.
const START: i64 = 3_602_725_194_000;

/// Every built-in with a limit of 4 per 60 s (or per month), nothing refilled within a test.
const FOUR: [(&str, &[Opt]); 8] = [
    ("fixed_window", &[Opt::Int(4), Opt::Int(60)]),
    ("token_bucket", &[Opt::Int(4), Opt::Int(60), Opt::Int(4)]),
    ("sliding_window", &[Opt::Int(4), Opt::Int(60)]),
    ("sliding_log", &[Opt::Int(4), Opt::Int(60)]),
    ("leaky_bucket", &[Opt::Int(4), Opt::Int(60)]),
    ("gcra", &[Opt::Int(4), Opt::Int(60), Opt::Int(4)]),
    ("multi_window", &[Opt::Str("4/60"), Opt::Str("10/3600")]),
    (
        "calendar_quota",
        &[Opt::Int(4), Opt::Str("month"), Opt::Int(0)],
    ),
];

fn seen(outcome: &Outcome) -> (bool, &str) {
    let remaining = outcome
        .header("x-ratelimit-remaining")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("<none>");
    (outcome.is_allowed(), remaining)
}

#[tokio::test]
async fn settle_gives_back_what_was_unused_and_forces_what_was_over() {
    let redis = RedisServer::start();
    for (backend, limits) in backends(&redis, |b| b.clock(ManualClock::new(START))) {
        for (limiter, opts) in FOUR {
            let at = format!("{backend}/{limiter}");
            let check = limits
                .check(limit_cost(limiter, opts, 3), "k")
                .await
                .unwrap();
            assert_eq!(seen(&check), (true, "1"), "{at}");
            // Reserved 3, used 1: two come back.
            let refund = limits
                .settle(limit(limiter, opts), "k", 3, 1)
                .await
                .unwrap();
            assert_eq!(seen(&refund), (true, "3"), "{at}");
            // Reserved 1, used 5: four more are taken although only three were left.
            let forced = limits
                .settle(limit(limiter, opts), "k", 1, 5)
                .await
                .unwrap();
            assert_eq!(seen(&forced), (false, "0"), "{at}");
            let next = limits.check(limit(limiter, opts), "k").await.unwrap();
            assert_eq!(seen(&next), (false, "0"), "{at}");
            // Equal: a peek, which writes nothing.
            let peek = limits
                .settle(limit(limiter, opts), "k", 2, 2)
                .await
                .unwrap();
            assert_eq!(seen(&peek), (false, "0"), "{at}");
            // More back than the key holds: an untouched key, no better.
            let refund = limits
                .settle(limit(limiter, opts), "k", 9, 0)
                .await
                .unwrap();
            assert_eq!(seen(&refund), (true, "4"), "{at}");
            let fresh = limits
                .check(limit_cost(limiter, opts, 4), "k")
                .await
                .unwrap();
            assert_eq!(seen(&fresh), (true, "0"), "{at}");
        }
    }
}

#[tokio::test]
async fn a_refund_of_a_key_that_holds_nothing_creates_no_key() {
    let redis = RedisServer::start();
    for (backend, limits) in backends(&redis, |b| b.clock(ManualClock::new(START))) {
        for (limiter, opts) in FOUR {
            let at = format!("{backend}/{limiter}");
            let refund = limits
                .settle(limit(limiter, opts), "empty", 5, 0)
                .await
                .unwrap();
            assert_eq!(seen(&refund), (true, "4"), "{at}");
        }
        // Nothing was written: there is nothing to delete.
        assert_eq!(limits.reset_all().await.unwrap(), 0, "{backend}");
    }
}

#[tokio::test]
async fn settled_headers_describe_the_state_after() {
    let redis = RedisServer::start();
    let opts = [Opt::Int(4), Opt::Int(60), Opt::Int(4)];
    for (backend, limits) in backends(&redis, |b| b.clock(ManualClock::new(START))) {
        limits
            .check(limit_cost("gcra", &opts, 2), "k")
            .await
            .unwrap();
        // One interval is 15 s: the TAT is 45 s ahead after 3 units, beyond the burst after 5.
        let forced = limits
            .settle(limit("gcra", &opts), "k", 2, 5)
            .await
            .unwrap();
        let headers: Vec<_> = forced
            .headers()
            .iter()
            .map(|(name, value)| format!("{name}: {}", value.to_str().unwrap()))
            .collect();
        assert!(!forced.is_allowed(), "{backend}");
        assert_eq!(
            headers,
            [
                "x-ratelimit-limit: 4",
                "x-ratelimit-reset: 75",
                "x-ratelimit-remaining: 0",
                "retry-after: 30",
            ],
            "{backend}"
        );
    }
}

#[tokio::test]
async fn a_custom_limiter_cannot_settle() {
    let redis = RedisServer::start();
    let limits = plug_limit::PlugLimit::builder(redis.pool())
        .limiter(
            "custom",
            plug_limit::Limiter::script("return {'allow', {}}"),
        )
        .build()
        .unwrap();
    for (reserved, actual) in [(3, 1), (1, 3), (2, 2)] {
        let error = limits
            .settle(limit("custom", &[]), "k", reserved, actual)
            .await
            .unwrap_err();
        assert!(
            matches!(error, plug_limit::Error::NotBuiltIn(ref name) if name == "custom"),
            "{error}"
        );
    }
}
