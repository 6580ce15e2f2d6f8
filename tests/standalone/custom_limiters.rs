//! Custom limiters: their own scripts, header names, overrides, extra outputs, pools, keys
//! and hooks.

use axum::response::{IntoResponse, Response};
use axum::{Router, routing::get};
use http::StatusCode;
use http::request::Parts;
use plug_limit::key::KeyError;
use plug_limit::key::KeyExtractor;
use plug_limit::redis::Value;
use plug_limit::{
    Action, Check, FixedWindow, Hook, Limit, Limiter, Opt, Outcome, PlugLimit, RateLimited, key,
};
use plug_limit_tests::limit;
use plug_limit_tests::{RedisServer, get as send_get, stored_key, unique_prefix};

/// Echoes its options into two declared headers, and its keys into a third.
const ECHO: &str = "return {'allow', {ARGV[1], ARGV[2], KEYS[1]}}";

struct Echo;

impl Limit for Echo {
    const LIMITER: &'static str = "echo";
    const OPTS: &'static [Opt] = &[Opt::Str("hello"), Opt::Int(7)];
}

async fn echo(limited: RateLimited<Echo>) -> (RateLimited<Echo>, &'static str) {
    (limited, "echoed")
}

#[tokio::test]
async fn custom_script_echoes_opts_into_declared_headers() {
    let redis = RedisServer::start();
    let limits = PlugLimit::builder(redis.pool())
        .prefix("app")
        .key(key::header("x-client"))
        .limiter(
            "echo",
            Limiter::script(ECHO).headers(["x-first", "x-second", "x-key"]),
        )
        .build()
        .unwrap();
    let app = Router::new()
        .route("/echo/{id}", get(echo))
        .with_state(limits);
    let reply = send_get(&app, "/echo/9", "carol").await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body, "echoed");
    assert_eq!(reply.header("x-first"), Some("hello"));
    assert_eq!(reply.header("x-second"), Some("7"));
    // {prefix}:{tag}:{limiter}:{options}:{scope length}:{matched route}:{client}
    let key = stored_key("app", "echo", "hello,7", "/echo/{id}", "carol");
    assert_eq!(key, "app:{e2fd}:echo:hello,7:10:/echo/{id}:carol");
    assert_eq!(reply.header("x-key"), Some(key.as_str()));
}

struct Override;

impl Limit for Override {
    const LIMITER: &'static str = "override";
    const OPTS: &'static [Opt] = &[];
}

async fn overridden(limited: RateLimited<Override>) -> (RateLimited<Override>, &'static str) {
    (limited, "ok")
}

#[tokio::test]
async fn a_name_value_pair_overrides_the_header_name_at_its_position() {
    let redis = RedisServer::start();
    let limits = PlugLimit::builder(redis.pool())
        .key(key::global())
        .limiter(
            "override",
            Limiter::script("return {'allow', {'10', {'x-acme-header', '60'}, '9'}}").headers([
                "x-ratelimit-limit",
                "x-ratelimit-reset",
                "x-ratelimit-remaining",
            ]),
        )
        .build()
        .unwrap();
    let app = Router::new().route("/", get(overridden)).with_state(limits);
    let reply = send_get(&app, "/", "x").await;
    assert_eq!(reply.header("x-ratelimit-limit"), Some("10"));
    assert_eq!(reply.header("x-acme-header"), Some("60"));
    assert_eq!(reply.header("x-ratelimit-remaining"), Some("9"));
    assert_eq!(reply.header("x-ratelimit-reset"), None);
}

struct Banned;

impl Limit for Banned {
    const LIMITER: &'static str = "banned";
    const OPTS: &'static [Opt] = &[];
}

async fn never(_limited: RateLimited<Banned>) -> &'static str {
    "unreachable: the script always denies"
}

fn forbidden(outcome: &Outcome) -> Response {
    let extra: Vec<String> = outcome
        .extra()
        .iter()
        .map(|value| match value {
            Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into_owned(),
            Value::Int(n) => n.to_string(),
            other => format!("{other:?}"),
        })
        .collect();
    (StatusCode::FORBIDDEN, outcome.clone(), extra.join(" ")).into_response()
}

/// A hook answering a denied request with `respond`'s response, and leaving the rest as they go.
fn on_denial(respond: fn(&Outcome) -> axum::response::Response) -> impl Hook {
    move |_: &str, check: Check<'_>| match check {
        Check::Denied(outcome) => Action::Respond(respond(outcome)),
        _ => Action::Default,
    }
}

#[tokio::test]
async fn extra_outputs_reach_a_hook_and_block_denies() {
    let redis = RedisServer::start();
    let limits = PlugLimit::builder(redis.pool())
        .key(key::global())
        .limiter(
            "banned",
            Limiter::script("return {'block', {'0'}, 'banned', 42}")
                .headers(["x-ratelimit-remaining"])
                .hook(on_denial(forbidden)),
        )
        .build()
        .unwrap();
    let app = Router::new().route("/", get(never)).with_state(limits);
    let reply = send_get(&app, "/", "x").await;
    assert_eq!(reply.status, 403);
    assert_eq!(reply.body, "banned 42");
    assert_eq!(reply.header("x-ratelimit-remaining"), Some("0"));
}

struct OnOther;

impl Limit for OnOther {
    const LIMITER: &'static str = "other";
    const OPTS: &'static [Opt] = &[Opt::Int(5), Opt::Int(60)];
    const SCOPE: Option<&'static str> = Some("shared");
}

async fn other(limited: RateLimited<OnOther>) -> (RateLimited<OnOther>, &'static str) {
    (limited, "ok")
}

#[tokio::test]
async fn a_limiter_with_its_own_pool_counts_on_its_own_redis() {
    let main = RedisServer::start();
    let own = RedisServer::start();
    let limits = PlugLimit::builder(main.pool())
        .key(key::header("x-client"))
        .limiter("other", Limiter::fixed_window().pool(own.pool()))
        .build()
        .unwrap();
    let app = Router::new().route("/", get(other)).with_state(limits);
    let reply = send_get(&app, "/", "dave").await;
    assert_eq!(
        reply.rate_headers(),
        [Some("5"), Some("60"), Some("4"), None]
    );

    let key = stored_key("plug_limit", "other", "5,60", "shared", "dave");
    let exists = |conn| async {
        let mut conn = conn;
        plug_limit::redis::cmd("EXISTS")
            .arg(&key)
            .query_async::<i64>(&mut conn)
            .await
            .unwrap()
    };
    assert_eq!(exists(own.connection().await).await, 1);
    assert_eq!(exists(main.connection().await).await, 0);
}

fn tenant(parts: &Parts) -> Result<String, KeyError> {
    parts
        .headers
        .get("x-tenant")
        .and_then(|v| v.to_str().ok())
        .map(|t| format!("tenant-{t}"))
        .ok_or_else(|| KeyError::new("no tenant"))
}

struct PerTenant;

impl Limit for PerTenant {
    const LIMITER: &'static str = "fixed_window";
    const OPTS: &'static [Opt] = &[Opt::Int(2), Opt::Int(60)];
    const KEY: Option<&'static dyn KeyExtractor> = Some(&tenant);
}

async fn per_tenant(limited: RateLimited<PerTenant>) -> (RateLimited<PerTenant>, &'static str) {
    (limited, "ok")
}

#[tokio::test]
async fn a_limit_may_bring_its_own_key_and_limiters_their_own() {
    let redis = RedisServer::start();
    let limits = PlugLimit::builder(redis.pool())
        .prefix(unique_prefix("keys"))
        .key(key::header("x-client"))
        .build()
        .unwrap();
    let app = Router::new().route("/", get(per_tenant)).with_state(limits);
    let request = |client: &str| {
        http::Request::get("/")
            .header("x-client", client)
            .header("x-tenant", "acme")
            .body(axum::body::Body::empty())
            .unwrap()
    };
    // Two clients, one tenant: the limit's own key counts them together.
    let a = plug_limit_tests::send(&app, request("a")).await;
    let b = plug_limit_tests::send(&app, request("b")).await;
    assert_eq!(a.header("x-ratelimit-remaining"), Some("1"));
    assert_eq!(b.header("x-ratelimit-remaining"), Some("0"));
    assert_eq!(plug_limit_tests::send(&app, request("c")).await.status, 429);
}

type Ten = RateLimited<FixedWindow<10, 60>>;

async fn ten(limited: Ten) -> (Ten, &'static str) {
    (limited, "ok")
}

#[tokio::test]
async fn routes_have_separate_budgets_by_default() {
    let redis = RedisServer::start();
    let limits = PlugLimit::builder(redis.pool())
        .key(key::header("x-client"))
        .build()
        .unwrap();
    let app = Router::new()
        .route("/a", get(ten))
        .route("/b/{id}", get(ten))
        .with_state(limits);
    assert_eq!(
        send_get(&app, "/a", "e")
            .await
            .header("x-ratelimit-remaining"),
        Some("9")
    );
    assert_eq!(
        send_get(&app, "/a", "e")
            .await
            .header("x-ratelimit-remaining"),
        Some("8")
    );
    // `/b/1` and `/b/2` are one route: one budget, separate from `/a`.
    assert_eq!(
        send_get(&app, "/b/1", "e")
            .await
            .header("x-ratelimit-remaining"),
        Some("9")
    );
    assert_eq!(
        send_get(&app, "/b/2", "e")
            .await
            .header("x-ratelimit-remaining"),
        Some("8")
    );
}

#[tokio::test]
async fn a_builtin_script_under_another_name_keeps_its_headers() {
    let redis = RedisServer::start();
    let limits = PlugLimit::builder(redis.pool())
        .limiter("strict", Limiter::token_bucket())
        .build()
        .unwrap();
    let outcome = limits
        .check(
            limit("strict", &[Opt::Int(2), Opt::Int(60), Opt::Int(1)]),
            "k",
        )
        .await
        .unwrap();
    let names: Vec<&str> = outcome.headers().iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "x-ratelimit-limit",
            "x-ratelimit-reset",
            "x-ratelimit-remaining",
            "retry-after"
        ]
    );
    assert_eq!(outcome.header("retry-after").unwrap(), "60");
}

#[tokio::test]
async fn a_custom_script_keeps_its_own_time_when_a_clock_is_set() {
    let redis = RedisServer::start();
    let limits = PlugLimit::builder(redis.pool())
        .clock(plug_limit::ManualClock::starting_now())
        .limiter(
            "quota",
            Limiter::script("return {'allow', {tostring(#ARGV)}}").headers(["x-args"]),
        )
        .build()
        .unwrap();
    // The clock is the built-ins' business: the script gets exactly its options.
    let outcome = limits
        .check(limit("quota", &[Opt::Int(5)]), "k")
        .await
        .unwrap();
    assert!(outcome.is_allowed());
    assert_eq!(outcome.header("x-args").unwrap(), "1");
}

/// examples/custom_limiter.rs's script: its own headers, a named pair, and an extra value.
#[tokio::test]
async fn the_daily_quota_example_script_answers_by_its_contract() {
    struct Daily;
    impl Limit for Daily {
        const LIMITER: &'static str = "daily_quota";
        const OPTS: &'static [Opt] = &[Opt::Int(2), Opt::Int(86_400)];
    }
    async fn report(limited: RateLimited<Daily>) -> (RateLimited<Daily>, &'static str) {
        (limited, "report")
    }
    fn used_up(outcome: &Outcome) -> Response {
        let used = match outcome.extra() {
            [Value::Int(used)] => *used,
            other => panic!("extra: {other:?}"),
        };
        (
            StatusCode::TOO_MANY_REQUESTS,
            outcome.clone(),
            format!("used {used}"),
        )
            .into_response()
    }
    let redis = RedisServer::start();
    let limits = PlugLimit::builder(redis.pool())
        .limiter(
            "daily_quota",
            Limiter::script(include_str!("../../examples/lua/daily_quota.lua"))
                .headers(["x-quota-limit", "x-quota-remaining"])
                .key(key::header("x-client"))
                .hook(on_denial(used_up)),
        )
        .build()
        .unwrap();
    let app = Router::new().route("/r", get(report)).with_state(limits);
    let mut seen = Vec::new();
    for _ in 0..4 {
        let reply = send_get(&app, "/r", "k1").await;
        seen.push(format!(
            "{} {} {:?} {:?} {:?}",
            reply.status.as_u16(),
            reply.body,
            reply.header("x-quota-limit"),
            reply.header("x-quota-remaining"),
            reply.header("x-quota-period"),
        ));
    }
    assert_eq!(
        seen,
        [
            "200 report Some(\"2\") Some(\"1\") Some(\"86400\")",
            "200 report Some(\"2\") Some(\"0\") Some(\"86400\")",
            "429 used 2 Some(\"2\") Some(\"0\") Some(\"86400\")",
            "429 used 2 Some(\"2\") Some(\"0\") Some(\"86400\")",
        ]
    );
}

/// One script, registered once in a config file, run by two limiters with their own keys and
/// header names: the seed's `:luascripts`.
#[tokio::test]
async fn a_shared_script_runs_under_each_limiters_own_settings() {
    const COUNTER: &str = "local n = redis.call('INCR', KEYS[1]) \
        redis.call('EXPIRE', KEYS[1], 60) \
        return {n <= tonumber(ARGV[1]) and 'allow' or 'deny', {ARGV[1], tostring(n)}}";
    let config: plug_limit::Config = serde_json::from_value(serde_json::json!({
        "scripts": { "counter": { "script": COUNTER, "headers": ["x-limit", "x-count"] } },
        "limiters": {
            "by_user": { "script_name": "counter" },
            "by_team": { "script_name": "counter", "headers": ["x-team-limit", "x-team-count"] }
        }
    }))
    .unwrap();
    struct ByUser;
    impl Limit for ByUser {
        const LIMITER: &'static str = "by_user";
        const OPTS: &'static [Opt] = &[Opt::Int(2)];
        const KEY: Option<&'static dyn KeyExtractor> = Some(&key::header("x-user"));
    }
    struct ByTeam;
    impl Limit for ByTeam {
        const LIMITER: &'static str = "by_team";
        const OPTS: &'static [Opt] = &[Opt::Int(3)];
        const KEY: Option<&'static dyn KeyExtractor> = Some(&key::header("x-team"));
    }
    let redis = RedisServer::start();
    let limits = PlugLimit::builder(redis.pool())
        .config(config)
        .build()
        .unwrap();
    let app =
        Router::new()
            .route(
                "/",
                get(
                    |user: RateLimited<ByUser>, team: RateLimited<ByTeam>| async move {
                        (user, team, "ok")
                    },
                ),
            )
            .with_state(limits);
    let mut seen = Vec::new();
    for user in ["ann", "ann", "bob", "ann"] {
        let request = http::Request::get("/")
            .header("x-user", user)
            .header("x-team", "red")
            .body(axum::body::Body::empty())
            .unwrap();
        let reply = plug_limit_tests::send(&app, request).await;
        seen.push(format!(
            "{} {:?} {:?} {:?} {:?}",
            reply.status.as_u16(),
            reply.header("x-limit"),
            reply.header("x-count"),
            reply.header("x-team-limit"),
            reply.header("x-team-count"),
        ));
    }
    assert_eq!(
        seen,
        [
            "200 Some(\"2\") Some(\"1\") Some(\"3\") Some(\"1\")",
            "200 Some(\"2\") Some(\"2\") Some(\"3\") Some(\"2\")",
            "200 Some(\"2\") Some(\"1\") Some(\"3\") Some(\"3\")",
            "429 Some(\"2\") Some(\"3\") None None",
        ]
    );
}
