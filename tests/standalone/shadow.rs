//! Shadow (dry-run) mode: decided and counted as usual, never refused, would-be denials logged.

use axum::{Router, routing::get};
use plug_limit::{
    FailurePolicy, FixedWindow, Limit, Limiter, Opt, PlugLimit, RateLimited, Store, key,
};
use plug_limit_tests::{Logs, RedisServer, dead_url, get as send_get, pool};

type Two = RateLimited<FixedWindow<2, 60>>;

async fn two(limited: Two) -> (Two, &'static str) {
    (limited, "ok")
}

#[tokio::test]
async fn a_shadow_limit_counts_but_never_refuses() {
    let redis = RedisServer::start();
    let builders = [
        ("redis", PlugLimit::builder(redis.pool())),
        ("memory", PlugLimit::builder(Store::memory())),
    ];
    for (backend, builder) in builders {
        let limits = builder
            .key(key::header("x-client"))
            .shadow(true)
            .deny_cache(true)
            .build()
            .unwrap();
        let app = Router::new().route("/", get(two)).with_state(limits);
        let (logs, _guard) = Logs::capture();
        let mut seen = Vec::new();
        for _ in 0..5 {
            let reply = send_get(&app, "/", "c").await;
            seen.push((
                reply.status.as_u16(),
                reply.header("x-ratelimit-remaining").map(str::to_owned),
            ));
        }
        let remaining = |n: &str| (200, Some(n.to_owned()));
        assert_eq!(
            seen,
            [
                remaining("1"),
                remaining("0"),
                remaining("0"),
                remaining("0"),
                remaining("0")
            ],
            "{backend}"
        );
        // Three would-be denials within a second: one line.
        let text = logs.text();
        assert_eq!(
            text.matches("INFO plug_limit: request would be denied (shadow mode) limiter=fixed_window suppressed=0")
                .count(),
            1,
            "{backend}: {text}"
        );
    }
}

struct Trial;

impl Limit for Trial {
    const LIMITER: &'static str = "trial";
    const OPTS: &'static [Opt] = &[Opt::Int(1), Opt::Int(60)];
}

async fn trial(limited: RateLimited<Trial>) -> (RateLimited<Trial>, &'static str) {
    (limited, "trial")
}

type One = RateLimited<FixedWindow<1, 60>>;

async fn one(limited: One) -> (One, &'static str) {
    (limited, "one")
}

#[tokio::test]
async fn one_limiter_can_be_in_shadow_while_the_others_enforce() {
    let limits = PlugLimit::builder(Store::memory())
        .key(key::header("x-client"))
        .limiter("trial", Limiter::fixed_window().shadow(true))
        .build()
        .unwrap();
    let app = Router::new()
        .route("/trial", get(trial))
        .route("/enforced", get(one))
        .with_state(limits);
    let mut statuses = Vec::new();
    for path in ["/trial", "/trial", "/enforced", "/enforced"] {
        statuses.push(send_get(&app, path, "c").await.status.as_u16());
    }
    assert_eq!(statuses, [200, 200, 200, 429]);
}

#[tokio::test]
async fn a_shadow_limit_never_refuses_in_the_memory_fallback_either() {
    let limits = PlugLimit::builder(pool(&dead_url()))
        .key(key::header("x-client"))
        .on_failure(FailurePolicy::Memory)
        .shadow(true)
        .build()
        .unwrap();
    let app = Router::new().route("/", get(two)).with_state(limits);
    let mut seen = Vec::new();
    for _ in 0..4 {
        let reply = send_get(&app, "/", "c").await;
        seen.push((
            reply.status.as_u16(),
            reply.header("x-ratelimit-remaining").map(str::to_owned),
        ));
    }
    let remaining = |n: &str| (200, Some(n.to_owned()));
    assert_eq!(
        seen,
        [
            remaining("1"),
            remaining("0"),
            remaining("0"),
            remaining("0")
        ]
    );
}
