//! Stacked limits on real Redis and in memory: one decision over several limits, consumed
//! from all only if all allow, with exact header values, and one Redis command a request.

use std::time::Duration;

use axum::Router;
use axum::extract::FromRef;
use axum::response::IntoResponse;
use axum::routing::get;
use plug_limit::key::KeyExtractor;
use plug_limit::{
    FixedWindow, HeaderStyle, Limit, ManualClock, Opt, PlugLimit, RateLimitLayer, RateLimited,
    Rules, key,
};
use plug_limit_tests::limit;
use plug_limit_tests::{RedisServer, backends, get as request, unique_prefix};

/// 2084-03-01T04:59:54Z: a time whose expiries are never in a real Redis' past.
const START: i64 = 3_602_725_194_000;

/// Two requests per client per 10 minutes.
struct PerClient;

impl Limit for PerClient {
    const LIMITER: &'static str = "fixed_window";
    const OPTS: &'static [Opt] = &[Opt::Int(2), Opt::Int(600)];
    const KEY: Option<&'static dyn KeyExtractor> = Some(&key::header("x-client"));
}

/// Three requests a minute for everyone together.
struct Global;

impl Limit for Global {
    const LIMITER: &'static str = "fixed_window";
    const OPTS: &'static [Opt] = &[Opt::Int(3), Opt::Int(60)];
    const SCOPE: Option<&'static str> = Some("global");
    const KEY: Option<&'static dyn KeyExtractor> = Some(&key::global());
}

#[derive(Clone, FromRef)]
struct State {
    limits: PlugLimit,
}

async fn stacked(
    limited: RateLimited<(PerClient, Global)>,
) -> (RateLimited<(PerClient, Global)>, &'static str) {
    (limited, "ok")
}

fn app(limits: PlugLimit) -> Router {
    Router::new()
        .route("/", get(stacked))
        .with_state(State { limits })
}

fn configured(
    clock: &ManualClock,
    style: HeaderStyle,
) -> impl Fn(plug_limit::Builder) -> plug_limit::Builder {
    let clock = clock.clone();
    move |builder| {
        builder
            .prefix(unique_prefix("stacked"))
            .key(key::header("x-client"))
            .clock(clock.clone())
            .header_style(style)
            .partition_key_secret(*b"a secret of sixteen bytes or more")
    }
}

/// `status limit,reset,remaining,retry-after` of a reply.
fn seen(reply: &plug_limit_tests::Reply) -> String {
    let values: Vec<&str> = reply
        .rate_headers()
        .iter()
        .map(|value| value.unwrap_or("-"))
        .collect();
    format!("{} {}", reply.status.as_u16(), values.join(","))
}

/// What `PerClient` and `Global` stacked answer to requests from a, a, a, b and c.
const PER_CLIENT_THEN_GLOBAL: [&str; 5] = [
    // a, a: the client's own limit is the tightest.
    "200 2,600,1,-",
    "200 2,600,0,-",
    // a again: its own limit denies; the global limit is not charged.
    "429 2,600,0,600",
    // b: the global limit's last unit, and now the tightest.
    "200 3,60,0,-",
    // c: its own limit allows, the global one denies: c is not charged.
    "429 3,60,0,60",
];

/// Requests from a, a, a, b and c to `path` of `app`, as [`seen`].
async fn per_client_then_global(app: &Router, path: &str) -> Vec<String> {
    let mut replies = Vec::new();
    for client in ["a", "a", "a", "b", "c"] {
        replies.push(seen(&request(app, path, client).await));
    }
    replies
}

#[tokio::test]
async fn a_denial_by_one_limit_costs_the_others_nothing() {
    let redis = RedisServer::start();
    let clock = ManualClock::new(START);
    for (backend, limits) in backends(&redis, configured(&clock, HeaderStyle::Legacy)) {
        let app = app(limits);
        assert_eq!(
            per_client_then_global(&app, "/").await,
            PER_CLIENT_THEN_GLOBAL,
            "{backend}"
        );
        // The global window ends. c's denied request left nothing behind: its window starts
        // now, with both of its units; b's started a minute ago, with one left.
        clock.advance(Duration::from_secs(60));
        assert_eq!(
            seen(&request(&app, "/", "c").await),
            "200 2,600,1,-",
            "{backend}"
        );
        assert_eq!(
            seen(&request(&app, "/", "c").await),
            "200 2,600,0,-",
            "{backend}"
        );
        assert_eq!(
            seen(&request(&app, "/", "b").await),
            "200 2,540,0,-",
            "{backend}"
        );
        assert_eq!(
            seen(&request(&app, "/", "d").await),
            "429 3,60,0,60",
            "{backend}"
        );
    }
}

/// What 2 a second and 3 a day, stacked, answer to three requests, then two a second later.
const SECOND_THEN_DAY: [&str; 5] = [
    // The second's window is the tightest (1 left against 2, then 0 against 1).
    "200 2,1,1,-",
    "200 2,1,0,-",
    "429 2,1,0,1",
    // A new second: the day's window is now the tightest, then it denies.
    "200 3,86399,0,-",
    "429 3,86399,0,86399",
];

/// Three requests of client a to `path`, then two more once `clock` moved a second, as
/// [`seen`].
async fn second_then_day(app: &Router, path: &str, clock: &ManualClock) -> Vec<String> {
    let mut replies = Vec::new();
    for _ in 0..3 {
        replies.push(seen(&request(app, path, "a").await));
    }
    clock.advance(Duration::from_secs(1));
    for _ in 0..2 {
        replies.push(seen(&request(app, path, "a").await));
    }
    replies
}

/// Ten a second and a hundred a day of one limiter, on one route and one key.
struct PerSecond;

impl Limit for PerSecond {
    const LIMITER: &'static str = "fixed_window";
    const OPTS: &'static [Opt] = &[Opt::Int(2), Opt::Int(1)];
}

#[tokio::test]
async fn two_windows_of_one_limiter_count_apart() {
    type Windows = RateLimited<(PerSecond, FixedWindow<3, 86_400>)>;
    async fn windows(limited: Windows) -> (Windows, &'static str) {
        (limited, "ok")
    }
    let redis = RedisServer::start();
    let clock = ManualClock::new(START);
    for (backend, limits) in backends(&redis, configured(&clock, HeaderStyle::Legacy)) {
        let app = Router::new().route("/w", get(windows)).with_state(State {
            limits: limits.clone(),
        });
        assert_eq!(
            second_then_day(&app, "/w", &clock).await,
            SECOND_THEN_DAY,
            "{backend}"
        );
    }
}

#[tokio::test]
async fn draft10_headers_list_every_limit() {
    let redis = RedisServer::start();
    let clock = ManualClock::new(START);
    for (backend, limits) in backends(&redis, configured(&clock, HeaderStyle::Draft10)) {
        let app = app(limits);
        let first = request(&app, "/", "a").await;
        let policy = first.header("ratelimit-policy").unwrap();
        let items: Vec<&str> = policy.split(", ").collect();
        assert_eq!(items.len(), 2, "{backend}: {policy}");
        assert!(
            items[0].starts_with(r#""fixed_window";q=2;w=600;pk=:"#),
            "{backend}: {policy}"
        );
        assert!(
            items[1].starts_with(r#""fixed_window";q=3;w=60;pk=:"#),
            "{backend}: {policy}"
        );
        let current = first.header("ratelimit").unwrap();
        let items: Vec<&str> = current.split(", ").collect();
        assert_eq!(items.len(), 2, "{backend}: {current}");
        assert!(
            items[0].starts_with(r#""fixed_window";r=1;t=600;pk=:"#),
            "{backend}: {current}"
        );
        assert!(
            items[1].starts_with(r#""fixed_window";r=2;t=60;pk=:"#),
            "{backend}: {current}"
        );
        // A denial names the limit that denied, alone.
        request(&app, "/", "a").await;
        let denied = request(&app, "/", "a").await;
        assert_eq!(denied.status, 429, "{backend}");
        let current = denied.header("ratelimit").unwrap();
        assert!(
            current.starts_with(r#""fixed_window";r=0;t=600;pk=:"#),
            "{backend}: {current}"
        );
        assert!(!current.contains(", "), "{backend}: {current}");
        assert_eq!(denied.header("retry-after"), Some("600"), "{backend}");
    }
}

#[tokio::test]
async fn a_stack_is_one_redis_command_a_request() {
    let redis = RedisServer::start();
    let limits = PlugLimit::builder(redis.pool())
        .prefix(unique_prefix("stacked"))
        .build()
        .unwrap();
    let app = app(limits);
    // The first call loads the script (`EVAL` after `NOSCRIPT`).
    request(&app, "/", "warm").await;
    let before = (redis.calls("evalsha").await, redis.calls("eval").await);
    for client in ["a", "b", "c", "d", "e"] {
        request(&app, "/", client).await;
    }
    let after = (redis.calls("evalsha").await, redis.calls("eval").await);
    // Five requests, two of them denied (the global limit is 3 a minute): five calls.
    assert_eq!((after.0 - before.0, after.1 - before.1), (5, 0));
}

#[tokio::test]
async fn a_layer_stacks_too_and_a_skip_of_the_rules_exempts_the_whole_stack() {
    let redis = RedisServer::start();
    let clock = ManualClock::new(START);
    let configure = |builder| {
        configured(&clock, HeaderStyle::Legacy)(builder)
            .rules(Rules::new().skip(|parts| parts.uri.path() == "/api/health"))
    };
    for (backend, limits) in backends(&redis, configure) {
        let app = Router::new()
            .route("/api", get(|| async { "api" }))
            .route("/api/health", get(|| async { "ok" }))
            .route_layer(RateLimitLayer::<(PerClient, Global)>::new(limits));
        assert_eq!(
            per_client_then_global(&app, "/api").await,
            PER_CLIENT_THEN_GLOBAL,
            "{backend}"
        );
        assert_eq!(
            seen(&request(&app, "/api/health", "c").await),
            "200 -,-,-,-",
            "{backend}"
        );
    }
}

#[tokio::test]
async fn check_all_stacks_programmatic_checks() {
    let redis = RedisServer::start();
    let clock = ManualClock::new(START);
    for (backend, limits) in backends(&redis, configured(&clock, HeaderStyle::Legacy)) {
        let user = [Opt::Int(2), Opt::Int(3600)];
        let team = [Opt::Int(3), Opt::Int(3600), Opt::Int(3)];
        let render = |outcome: plug_limit::Outcome| {
            let values: Vec<String> = outcome
                .headers()
                .iter()
                .map(|(_, value)| value.to_str().unwrap().to_owned())
                .collect();
            format!("{} {}", outcome.is_allowed(), values.join(","))
        };
        let mut seen = Vec::new();
        for user_key in ["ann", "ann", "ann", "bob", "cy"] {
            let stack = [
                (limit("fixed_window", &user[..]), user_key),
                (limit("token_bucket", &team[..]), "team"),
            ];
            seen.push(render(limits.check_all(&stack).await.unwrap()));
        }
        assert_eq!(
            seen,
            [
                "true 2,3600,1",
                // Ann has 0 left, the team 1.
                "true 2,3600,0",
                "false 2,3600,0,3600",
                "true 3 3;w=3600;burst=3;policy=token_bucket,3600,0,3600",
                "false 3 3;w=3600;burst=3;policy=token_bucket,3600,0,3600",
            ],
            "{backend}"
        );
    }
}

/// Two attributes, one check: 2 a second and 3 a day per client, stacked by the macro.
#[plug_limit::rate_limit(opts = [2, 1], key = key::header("x-client"))]
#[plug_limit::rate_limit(opts = [3, 86_400], key = key::header("x-client"))]
async fn twice_limited() -> &'static str {
    "ok"
}

#[tokio::test]
async fn stacked_attributes_are_one_stack() {
    let redis = RedisServer::start();
    let clock = ManualClock::new(START);
    for (backend, limits) in backends(&redis, configured(&clock, HeaderStyle::Legacy)) {
        let app = Router::new()
            .route("/t", get(twice_limited))
            .with_state(State { limits });
        assert_eq!(
            second_then_day(&app, "/t", &clock).await,
            SECOND_THEN_DAY,
            "{backend}"
        );
    }
}

/// Two a minute per client, on a limiter registered as `watched`.
struct Watched;

impl Limit for Watched {
    const LIMITER: &'static str = "watched";
    const OPTS: &'static [Opt] = &[Opt::Int(2), Opt::Int(60)];
}

/// Three a minute per client, on a limiter registered as `strict`.
struct Strict;

impl Limit for Strict {
    const LIMITER: &'static str = "strict";
    const OPTS: &'static [Opt] = &[Opt::Int(3), Opt::Int(60)];
}

async fn watched_and_strict(
    limited: RateLimited<(Watched, Strict)>,
) -> (RateLimited<(Watched, Strict)>, &'static str) {
    (limited, "ok")
}

#[tokio::test]
async fn a_shadow_limit_in_a_stack_denies_nothing_and_the_others_still_count() {
    let redis = RedisServer::start();
    let clock = ManualClock::new(START);
    let configure = configured(&clock, HeaderStyle::Legacy);
    for (backend, limits) in backends(&redis, |builder| {
        configure(builder)
            .limiter("watched", plug_limit::Limiter::fixed_window().shadow(true))
            .limiter("strict", plug_limit::Limiter::fixed_window())
            // A hook answering every denial: a shadow limit's would-be denial is none.
            .hook(|_: &str, check: plug_limit::Check<'_>| match check {
                plug_limit::Check::Denied(_) => plug_limit::Action::Respond(
                    (http::StatusCode::IM_A_TEAPOT, "denied").into_response(),
                ),
                _ => plug_limit::Action::Default,
            })
    }) {
        let app = Router::new()
            .route("/s", get(watched_and_strict))
            .with_state(State { limits });
        let mut replies = Vec::new();
        for _ in 0..4 {
            replies.push(seen(&request(&app, "/s", "a").await));
        }
        assert_eq!(
            replies,
            [
                "200 2,60,1,-",
                "200 2,60,0,-",
                // The shadow limit would deny: the request passes, counted by `strict` (its
                // third), whose headers it gets.
                "200 3,60,0,-",
                // `strict` denies, answered by the hook.
                "418 -,-,-,-",
            ],
            "{backend}"
        );
    }
}

#[tokio::test]
async fn a_failing_stack_follows_the_strictest_policy_of_its_limits() {
    let limits = PlugLimit::builder(plug_limit_tests::pool(&plug_limit_tests::dead_url()))
        .key(key::header("x-client"))
        .timeout(Duration::from_millis(200))
        .limiter(
            "watched",
            plug_limit::Limiter::fixed_window().on_failure(plug_limit::FailurePolicy::Open),
        )
        .limiter(
            "strict",
            plug_limit::Limiter::fixed_window().on_failure(plug_limit::FailurePolicy::Closed),
        )
        .build()
        .unwrap();
    let app = Router::new()
        .route("/s", get(watched_and_strict))
        .with_state(State { limits });
    let reply = request(&app, "/s", "a").await;
    assert_eq!(reply.status, 503);
}

#[tokio::test]
async fn a_stack_falls_back_to_memory_as_a_whole() {
    let limits = PlugLimit::builder(plug_limit_tests::pool(&plug_limit_tests::dead_url()))
        .key(key::header("x-client"))
        .timeout(Duration::from_millis(200))
        .on_failure(plug_limit::FailurePolicy::Memory)
        .limiter("watched", plug_limit::Limiter::fixed_window())
        .limiter("strict", plug_limit::Limiter::fixed_window())
        .build()
        .unwrap();
    let app = Router::new()
        .route("/s", get(watched_and_strict))
        .with_state(State { limits });
    let mut replies = Vec::new();
    for _ in 0..3 {
        replies.push(seen(&request(&app, "/s", "a").await));
    }
    assert_eq!(replies, ["200 2,60,1,-", "200 2,60,0,-", "429 2,60,0,60"]);
}

#[tokio::test]
async fn a_cached_denial_of_any_limit_answers_the_stack_without_redis() {
    let redis = RedisServer::start();
    let clock = ManualClock::new(START);
    let configure = configured(&clock, HeaderStyle::Legacy);
    let limits = configure(PlugLimit::builder(redis.pool()))
        .deny_cache(true)
        .build()
        .unwrap();
    let app = app(limits);
    request(&app, "/", "a").await;
    request(&app, "/", "a").await;
    assert_eq!(seen(&request(&app, "/", "a").await), "429 2,600,0,600");
    let before = redis.calls("evalsha").await;
    clock.advance(Duration::from_secs(10));
    assert_eq!(seen(&request(&app, "/", "a").await), "429 2,590,0,590");
    assert_eq!(redis.calls("evalsha").await, before);
}

/// A day's quota per tenant, in a scope meant to be shared.
struct TenantDaily;

impl Limit for TenantDaily {
    const LIMITER: &'static str = "fixed_window";
    const OPTS: &'static [Opt] = &[Opt::Int(3), Opt::Int(86_400)];
    const SCOPE: Option<&'static str> = Some("tenant");
}

/// Two a second per tenant, in the same scope.
struct TenantBurst;

impl Limit for TenantBurst {
    const LIMITER: &'static str = "fixed_window";
    const OPTS: &'static [Opt] = &[Opt::Int(2), Opt::Int(1)];
    const SCOPE: Option<&'static str> = Some("tenant");
}

#[tokio::test]
async fn a_limit_counts_in_its_own_key_alone_and_in_any_stack() {
    type Both = RateLimited<(TenantBurst, TenantDaily)>;
    type Swapped = RateLimited<(TenantDaily, TenantBurst)>;
    async fn daily(limited: RateLimited<TenantDaily>) -> (RateLimited<TenantDaily>, &'static str) {
        (limited, "a")
    }
    async fn both(limited: Both) -> (Both, &'static str) {
        (limited, "b")
    }
    async fn swapped(limited: Swapped) -> (Swapped, &'static str) {
        (limited, "c")
    }
    let redis = RedisServer::start();
    let clock = ManualClock::new(START);
    for (backend, limits) in backends(&redis, configured(&clock, HeaderStyle::Legacy)) {
        let app = Router::new()
            .route("/a", get(daily))
            .route("/b", get(both))
            .route("/c", get(swapped))
            .with_state(State { limits });
        let mut replies = Vec::new();
        for path in ["/a", "/b", "/c", "/b", "/a"] {
            replies.push(format!("{path} {}", seen(&request(&app, path, "t1").await)));
        }
        assert_eq!(
            replies,
            [
                // The daily limit has one key, alone or stacked in either order; the burst
                // limit of the same scope, other options, has its own.
                "/a 200 3,86400,2,-",
                // Both have one left: the longer reset speaks.
                "/b 200 3,86400,1,-",
                "/c 200 3,86400,0,-",
                // The burst's second unit in the second went to `/c`: it denies first.
                "/b 429 2,1,0,1",
                // The day's three went to `/a`, `/b` and `/c`.
                "/a 429 3,86400,0,86400",
            ],
            "{backend}"
        );
    }
}

#[tokio::test]
async fn check_all_counts_two_windows_of_one_key_apart() {
    let redis = RedisServer::start();
    let clock = ManualClock::new(START);
    for (backend, limits) in backends(&redis, configured(&clock, HeaderStyle::Legacy)) {
        let second = [Opt::Int(2), Opt::Int(1)];
        let day = [Opt::Int(3), Opt::Int(86_400)];
        let stack = [
            (limit("fixed_window", &second[..]), "ann"),
            (limit("fixed_window", &day[..]), "ann"),
        ];
        let mut seen = Vec::new();
        for advance in [0, 0, 1, 0] {
            clock.advance(Duration::from_secs(advance));
            let outcome = limits.check_all(&stack).await.unwrap();
            let values: Vec<&str> = outcome
                .headers()
                .iter()
                .map(|(_, value)| value.to_str().unwrap())
                .collect();
            seen.push(format!("{} {}", outcome.is_allowed(), values.join(",")));
        }
        assert_eq!(
            seen,
            [
                "true 2,1,1",
                "true 2,1,0",
                // A new second: the day's window has 0 left after this one.
                "true 3,86399,0",
                "false 3,86399,0,86399",
            ],
            "{backend}"
        );
    }
}

#[tokio::test]
async fn a_command_error_mid_stack_gives_back_what_the_limits_before_it_took() {
    let redis = RedisServer::start();
    let clock = ManualClock::new(START);
    let limits = configured(&clock, HeaderStyle::Legacy)(PlugLimit::builder(redis.pool()))
        .prefix("wrongtype")
        .build()
        .unwrap();
    // Something else's list where the fixed window's counter goes: its INCRBY fails.
    let mut conn = redis.connection().await;
    let stored = plug_limit_tests::stored_key("wrongtype", "fixed_window", "5,60", "", "ann");
    let _: () = deadpool_redis::redis::cmd("RPUSH")
        .arg(&stored)
        .arg("x")
        .query_async(&mut conn)
        .await
        .unwrap();
    let bucket = [Opt::Int(3), Opt::Int(60), Opt::Int(3)];
    let window = [Opt::Int(5), Opt::Int(60)];
    let stack = [
        (limit("token_bucket", &bucket[..]), "ann"),
        (limit("fixed_window", &window[..]), "ann"),
    ];
    for _ in 0..3 {
        let error = limits.check_all(&stack).await.unwrap_err();
        assert!(error.to_string().contains("WRONGTYPE"), "{error}");
    }
    // The bucket the first call made was given back in full at the same `now`: no key.
    let bucket_key = plug_limit_tests::stored_key("wrongtype", "token_bucket", "3,60,3", "", "ann");
    let exists: i64 = deadpool_redis::redis::cmd("EXISTS")
        .arg(&bucket_key)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(exists, 0);
    // The bucket took nothing: a peek answers as its first request would.
    let peek = limits
        .peek(limit("token_bucket", &bucket), "ann")
        .await
        .unwrap();
    assert_eq!(
        peek.header("x-ratelimit-remaining")
            .unwrap()
            .to_str()
            .unwrap(),
        "2"
    );
}
