//! Hooks: one function sees every result (allowed, denied, failed) and shapes the response,
//! under the extractor, the layer and the macro.

use std::sync::{Arc, Mutex};

use axum::response::IntoResponse;
use axum::{Router, routing::get};
use http::{HeaderMap, HeaderValue, StatusCode};
use plug_limit::redis::Value;
use plug_limit::{
    Action, Check, FixedWindow, Limit, Limiter, Opt, PlugLimit, RateLimitLayer, RateLimited, Store,
    key, rate_limit,
};
use plug_limit_tests::{RedisServer, Reply, dead_url, get as send_get, pool};

/// Allows while the count is within ARGV[1], returns the credits left as an extra value, and
/// fails with `account frozen` for the client `frozen`.
const CREDITS: &str = "if KEYS[1]:sub(-6) == 'frozen' then return redis.error_reply('account frozen') end \
    local n = redis.call('INCR', KEYS[1]) redis.call('EXPIRE', KEYS[1], 60) \
    local left = tonumber(ARGV[1]) - n \
    return {left >= 0 and 'allow' or 'deny', {ARGV[1]}, math.max(left, 0)}";

struct Credits;

impl Limit for Credits {
    const LIMITER: &'static str = "credits";
    const OPTS: &'static [Opt] = &[Opt::Int(2)];
}

/// Credits left as a header on allowed responses; a frozen account answered with 402.
fn credits_hook(_limiter: &str, check: Check<'_>) -> Action {
    match check {
        Check::Allowed(outcome) => {
            let mut headers = outcome.header_map();
            if let [Value::Int(left)] = outcome.extra() {
                headers.insert("x-credits-left", HeaderValue::from(*left));
            }
            Action::Proceed(headers)
        }
        Check::Failed(error) if error.to_string().contains("frozen") => {
            Action::Respond((StatusCode::PAYMENT_REQUIRED, "account frozen").into_response())
        }
        _ => Action::Default,
    }
}

fn credits_app(limits: PlugLimit) -> Router {
    Router::new()
        .route(
            "/",
            get(|limited: RateLimited<Credits>| async move { (limited, "ok") }),
        )
        .with_state(limits)
}

fn summary(reply: &Reply) -> String {
    format!(
        "{} {} {:?} {:?}",
        reply.status.as_u16(),
        reply.body,
        reply.header("x-credits-left"),
        reply.header("x-ratelimit-limit"),
    )
}

#[tokio::test]
async fn an_extractors_hook_sees_allowed_denied_and_failed_checks() {
    let redis = RedisServer::start();
    let limits = PlugLimit::builder(redis.pool())
        .key(key::header("x-client"))
        .limiter(
            "credits",
            Limiter::script(CREDITS)
                .headers(["x-ratelimit-limit"])
                .hook(credits_hook),
        )
        .build()
        .unwrap();
    let app = credits_app(limits);
    let mut seen = Vec::new();
    for client in ["ann", "ann", "ann", "frozen"] {
        seen.push(summary(&send_get(&app, "/", client).await));
    }
    assert_eq!(
        seen,
        [
            "200 ok Some(\"1\") Some(\"2\")",
            "200 ok Some(\"0\") Some(\"2\")",
            // Denied: the hook leaves it to the default 429.
            "429 Too Many Requests None Some(\"2\")",
            "402 account frozen None None",
        ]
    );
}

#[tokio::test]
async fn a_failure_the_hook_leaves_alone_follows_the_policy() {
    let limits = PlugLimit::builder(pool(&dead_url()))
        .key(key::header("x-client"))
        .limiter("credits", Limiter::script(CREDITS).hook(credits_hook))
        .build()
        .unwrap();
    let app = credits_app(limits);
    assert_eq!(
        summary(&send_get(&app, "/", "ann").await),
        "200 ok None None"
    );
}

/// Every check the hook saw, as `limiter:kind`.
fn recorder() -> (Arc<Mutex<Vec<String>>>, impl plug_limit::Hook) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let hook = move |limiter: &str, check: Check<'_>| {
        let kind = match check {
            Check::Allowed(_) => "allowed",
            Check::Denied(_) => "denied",
            Check::Failed(_) => "failed",
            _ => "other",
        };
        log.lock().unwrap().push(format!("{limiter}:{kind}"));
        match check {
            Check::Denied(outcome) => {
                let mut response = (StatusCode::IM_A_TEAPOT, "brewing").into_response();
                response.headers_mut().extend(outcome.header_map());
                Action::Respond(response)
            }
            _ => Action::Default,
        }
    };
    (seen, hook)
}

/// A layer's denials, the deny cache's answers included, all go through the global hook.
#[tokio::test]
async fn a_layers_denials_and_deny_cache_answers_reach_the_global_hook() {
    let redis = RedisServer::start();
    let (seen, hook) = recorder();
    let limits = PlugLimit::builder(redis.pool())
        .key(key::header("x-client"))
        .deny_cache(true)
        .hook(hook)
        .build()
        .unwrap();
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .route_layer(RateLimitLayer::<FixedWindow<1, 60>>::new(limits));
    let replies: Vec<String> = [
        send_get(&app, "/", "z").await,
        send_get(&app, "/", "z").await,
        send_get(&app, "/", "z").await,
    ]
    .iter()
    .map(|reply| {
        format!(
            "{} {} {:?}",
            reply.status.as_u16(),
            reply.body,
            reply.header("x-ratelimit-remaining")
        )
    })
    .collect();
    assert_eq!(
        replies,
        [
            "200 ok Some(\"0\")",
            "418 brewing Some(\"0\")",
            "418 brewing Some(\"0\")",
        ]
    );
    assert_eq!(
        *seen.lock().unwrap(),
        [
            "fixed_window:allowed",
            "fixed_window:denied",
            "fixed_window:denied"
        ]
    );
    // The third was the deny cache's: two requests reached Redis (the first one's `EVALSHA`
    // failed with `NOSCRIPT` and ran as `EVAL`), not three.
    assert_eq!(redis.script_calls().await, 3);
}

#[rate_limit(opts = [1, 60])]
async fn by_macro() -> &'static str {
    "macro"
}

/// Under the macro, a hook's `Proceed` headers replace the outcome's; a limiter's own hook
/// replaces the global one; shadow denials reach the hook as denials, and pass even when it
/// answers them.
#[tokio::test]
async fn the_macro_uses_the_hook_and_a_limiters_own_hook_wins() {
    let (seen, global) = recorder();
    let own = |_: &str, check: Check<'_>| match check {
        Check::Allowed(_) => {
            let mut headers = HeaderMap::new();
            headers.insert("x-who", HeaderValue::from_static("own hook"));
            Action::Proceed(headers)
        }
        _ => Action::Default,
    };
    let limits = PlugLimit::builder(Store::memory())
        .key(key::header("x-client"))
        .hook(global)
        .limiter("quiet", Limiter::fixed_window().hook(own).shadow(true))
        .build()
        .unwrap();
    struct Quiet;
    impl Limit for Quiet {
        const LIMITER: &'static str = "quiet";
        const OPTS: &'static [Opt] = &[Opt::Int(1), Opt::Int(60)];
    }
    let app = Router::new()
        .route("/macro", get(by_macro))
        .route(
            "/quiet",
            get(|limited: RateLimited<Quiet>| async move { (limited, "quiet") }),
        )
        .with_state(limits);
    let describe = |reply: Reply| {
        format!(
            "{} {} {:?} {:?}",
            reply.status.as_u16(),
            reply.body,
            reply.header("x-who"),
            reply.header("x-ratelimit-remaining")
        )
    };
    let replies = [
        describe(send_get(&app, "/macro", "z").await),
        describe(send_get(&app, "/macro", "z").await),
        describe(send_get(&app, "/quiet", "z").await),
        // Shadow mode: denied by the limit, let through by default.
        describe(send_get(&app, "/quiet", "z").await),
    ];
    assert_eq!(
        replies,
        [
            "200 macro None Some(\"0\")",
            "418 brewing None Some(\"0\")",
            "200 quiet Some(\"own hook\") None",
            "200 quiet None Some(\"0\")",
        ]
    );
    assert_eq!(
        *seen.lock().unwrap(),
        ["fixed_window:allowed", "fixed_window:denied"]
    );
}

/// Shadow mode never refuses: a hook answering a would-be denial sees it, and it passes.
#[tokio::test]
async fn a_hook_cannot_refuse_under_shadow_mode() {
    let (seen, teapot) = recorder();
    let limits = PlugLimit::builder(Store::memory())
        .key(key::header("x-client"))
        .shadow(true)
        .hook(teapot)
        .build()
        .unwrap();
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .route_layer(RateLimitLayer::<FixedWindow<1, 60>>::new(limits));
    let mut statuses = Vec::new();
    for _ in 0..2 {
        statuses.push(send_get(&app, "/", "z").await.status.as_u16());
    }
    assert_eq!(statuses, [200, 200]);
    assert_eq!(
        *seen.lock().unwrap(),
        ["fixed_window:allowed", "fixed_window:denied"]
    );
}
