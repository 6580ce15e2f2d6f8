//! Reserve, then settle, over HTTP on real Redis and in memory: a request admitted on its
//! estimated cost is charged what its handler reported once its body ends, and a limit that
//! counts by status gives back the cost of the responses that do not count.

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Extension, FromRef};
use axum::http::{self, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use plug_limit::{
    Limit, ManualClock, Opt, PlugLimit, RateLimitLayer, RateLimited, Usage, rate_limit,
};
use plug_limit_tests::{RedisServer, backends, with_peer};
use tower::ServiceExt;

use crate::streaming_bodies::{Gates, configured, eventually, finish, start};
use plug_limit_tests::limit;

/// 2084-03-01T04:59:54Z: a time whose expiries are never in a real Redis' past.
const START: i64 = 3_602_725_194_000;
const TOKENS: [Opt; 2] = [Opt::Int(1000), Opt::Int(3600)];
const LOGINS: [Opt; 2] = [Opt::Int(3), Opt::Int(900)];
const ATTEMPTS: [Opt; 2] = [Opt::Int(10), Opt::Int(900)];
const TEAM_TOKENS: [Opt; 2] = [Opt::Int(5000), Opt::Int(3600)];

/// Reports the `x-used` header's units, if any.
fn used(headers: &HeaderMap, usage: &Usage) {
    if let Some(units) = headers.get("x-used") {
        usage.set(units.to_str().unwrap().parse().unwrap());
    }
}

/// 1,000 tokens an hour per client; each request reserves 300.
#[rate_limit(opts = [1000, 3600], cost = 300, scope = "chat", settle)]
async fn chat(
    Extension(usage): Extension<Usage>,
    Extension(gates): Extension<Gates>,
    headers: HeaderMap,
) -> Response {
    used(&headers, &usage);
    Response::new(gates.body())
}

/// The same limit as a type, for the layer and the extractor.
struct Tokens;

impl Limit for Tokens {
    const LIMITER: &'static str = "fixed_window";
    const OPTS: &'static [Opt] = &TOKENS;
    const COST: u32 = 300;
    const SCOPE: Option<&'static str> = Some("chat");
    const SETTLE: bool = true;
}

async fn layered_chat(
    Extension(usage): Extension<Usage>,
    Extension(gates): Extension<Gates>,
    headers: HeaderMap,
) -> Response {
    used(&headers, &usage);
    Response::new(gates.body())
}

async fn extracted_chat(
    limited: RateLimited<Tokens>,
    Extension(gates): Extension<Gates>,
    headers: HeaderMap,
) -> Response {
    used(&headers, &limited.usage().unwrap());
    limited.respond(gates.body())
}

fn failed_login(status: StatusCode) -> bool {
    status == StatusCode::UNAUTHORIZED
}

/// The right password gets in; anything else is a 401.
fn log_in(headers: &HeaderMap, gates: &Gates) -> Response {
    let status = match headers.get("x-password") {
        Some(password) if password == "right" => StatusCode::OK,
        _ => StatusCode::UNAUTHORIZED,
    };
    (status, gates.body()).into_response()
}

/// Three failed logins per 15 minutes per client; a successful one costs nothing.
#[rate_limit(opts = [3, 900], scope = "login", count_if = failed_login)]
async fn login(Extension(gates): Extension<Gates>, headers: HeaderMap) -> Response {
    log_in(&headers, &gates)
}

struct Logins;

impl Limit for Logins {
    const LIMITER: &'static str = "fixed_window";
    const OPTS: &'static [Opt] = &LOGINS;
    const SCOPE: Option<&'static str> = Some("login");
    const COUNT_IF: Option<fn(StatusCode) -> bool> = Some(failed_login);
}

async fn layered_login(Extension(gates): Extension<Gates>, headers: HeaderMap) -> Response {
    log_in(&headers, &gates)
}

/// [`login`]'s failed logins, stacked with every attempt (ten per 15 minutes per client).
#[rate_limit(opts = [3, 900], scope = "login", count_if = failed_login)]
#[rate_limit(opts = [10, 900], scope = "attempts")]
async fn stacked_login(Extension(gates): Extension<Gates>, headers: HeaderMap) -> Response {
    log_in(&headers, &gates)
}

/// Every attempt, as a type, for the layer's stack.
struct Attempts;

impl Limit for Attempts {
    const LIMITER: &'static str = "fixed_window";
    const OPTS: &'static [Opt] = &ATTEMPTS;
    const SCOPE: Option<&'static str> = Some("attempts");
}

/// [`chat`]'s tokens, stacked with a second budget that settles too: one report settles both.
#[rate_limit(opts = [1000, 3600], cost = 300, scope = "chat", settle)]
#[rate_limit(opts = [5000, 3600], cost = 300, scope = "team-chat", settle)]
async fn stacked_chat(
    Extension(usage): Extension<Usage>,
    Extension(gates): Extension<Gates>,
    headers: HeaderMap,
) -> Response {
    used(&headers, &usage);
    Response::new(gates.body())
}

#[derive(Clone, FromRef)]
struct State {
    limits: PlugLimit,
}

/// `/chat` and `/login` by the macro, `/layer/..` by the layer, `/extractor/chat` by the
/// extractor's `respond`.
fn app(limits: PlugLimit, gates: &Gates) -> Router {
    let layered = Router::new()
        .route("/layer/chat", get(layered_chat))
        .route_layer(RateLimitLayer::<Tokens>::new(limits.clone()))
        .merge(
            Router::new()
                .route("/layer/login", get(layered_login))
                .route_layer(RateLimitLayer::<Logins>::new(limits.clone())),
        );
    let layered_stack = Router::new()
        .route("/layer/stacked/login", get(layered_login))
        .route_layer(RateLimitLayer::<(Logins, Attempts)>::new(limits.clone()));
    Router::new()
        .route("/chat", get(chat))
        .route("/extractor/chat", get(extracted_chat))
        .route("/login", get(login))
        .route("/stacked/login", get(stacked_login))
        .route("/stacked/chat", get(stacked_chat))
        .with_state(State { limits })
        .merge(layered_stack)
        .merge(layered)
        .layer(Extension(gates.clone()))
}

/// `status remaining` of a response.
fn seen(response: &Response) -> String {
    let remaining = response
        .headers()
        .get("x-ratelimit-remaining")
        .map_or("-", |value| value.to_str().unwrap());
    format!("{} {remaining}", response.status().as_u16())
}

/// Waits until `limiter`'s count for client `a` in `scope` is `count`, as a peek reads it
/// (`limit - count - 1` remaining, or a denial at the limit).
async fn settles_to(limits: &PlugLimit, scope: &str, opts: &[Opt], count: i64) {
    let Opt::Int(most) = opts[0] else {
        unreachable!()
    };
    let expected = (count < most, (most - count - 1).max(0).to_string());
    eventually(&format!("{scope} settles to {count}"), async || {
        let peek = limits
            .peek(limit("fixed_window", opts).scope(scope), "a")
            .await
            .unwrap();
        let remaining = peek.header("x-ratelimit-remaining").unwrap();
        (peek.is_allowed(), remaining.to_str().unwrap().to_owned()) == expected
    })
    .await;
}

#[tokio::test]
async fn an_estimate_is_settled_to_the_usage_reported_once_the_body_ends() {
    let redis = RedisServer::start();
    let clock = ManualClock::new(START);
    for (backend, limits) in backends(&redis, configured(&clock, "settle")) {
        for path in ["/chat", "/layer/chat", "/extractor/chat"] {
            let gates = Gates::default();
            let app = app(limits.clone(), &gates);
            let at = format!("{backend} {path}");
            // Admitted on 300; its handler reports 120, but the body is still streaming.
            let gate = gates.next();
            let first = start(&app, path, "a", &[("x-used", "120")]).await;
            assert_eq!(seen(&first), "200 700", "{at}");
            settles_to(&limits, "chat", &TOKENS, 300).await;
            finish(first, Some(gate)).await;
            settles_to(&limits, "chat", &TOKENS, 120).await;
            // Admitted on 300 with 880 left; it used 900: 600 more are taken, past the limit.
            let second = start(&app, path, "a", &[("x-used", "900")]).await;
            assert_eq!(seen(&second), "200 580", "{at}");
            finish(second, None).await;
            settles_to(&limits, "chat", &TOKENS, 1020).await;
            let denied = start(&app, path, "a", &[]).await;
            assert_eq!(seen(&denied), "429 0", "{at}");
            // A new window; a request that reports nothing keeps its estimate.
            clock.advance(Duration::from_secs(3600));
            let silent = start(&app, path, "a", &[]).await;
            assert_eq!(seen(&silent), "200 700", "{at}");
            finish(silent, None).await;
            settles_to(&limits, "chat", &TOKENS, 300).await;
            clock.advance(Duration::from_secs(3600));
        }
    }
}

#[tokio::test]
async fn only_the_responses_that_count_keep_their_cost() {
    let redis = RedisServer::start();
    let clock = ManualClock::new(START);
    for (backend, limits) in backends(&redis, configured(&clock, "settle")) {
        for path in ["/login", "/layer/login"] {
            let gates = Gates::default();
            let app = app(limits.clone(), &gates);
            let at = format!("{backend} {path}");
            // Successes are charged while they run, and given back once answered.
            for _ in 0..5 {
                let success = start(&app, path, "a", &[("x-password", "right")]).await;
                assert_eq!(seen(&success), "200 2", "{at}");
                finish(success, None).await;
                settles_to(&limits, "login", &LOGINS, 0).await;
            }
            for remaining in ["2", "1", "0"] {
                let failure = start(&app, path, "a", &[("x-password", "wrong")]).await;
                assert_eq!(seen(&failure), format!("401 {remaining}"), "{at}");
                finish(failure, None).await;
            }
            // Three failures: locked out, even with the right password.
            let locked = start(&app, path, "a", &[("x-password", "right")]).await;
            assert_eq!(seen(&locked), "429 0", "{at}");
            clock.advance(Duration::from_secs(900));
        }
    }
}

#[tokio::test]
async fn a_stacked_limit_that_counts_by_status_settles_on_its_own() {
    let redis = RedisServer::start();
    let clock = ManualClock::new(START);
    for (backend, limits) in backends(&redis, configured(&clock, "settle")) {
        for path in ["/stacked/login", "/layer/stacked/login"] {
            let gates = Gates::default();
            let app = app(limits.clone(), &gates);
            let at = format!("{backend} {path}");
            // Successes: every attempt counts, the failed logins get theirs back.
            for attempts in 1..=5 {
                let success = start(&app, path, "a", &[("x-password", "right")]).await;
                assert_eq!(success.status(), StatusCode::OK, "{at}");
                finish(success, None).await;
                settles_to(&limits, "login", &LOGINS, 0).await;
                settles_to(&limits, "attempts", &ATTEMPTS, attempts).await;
            }
            for failures in 1..=3 {
                let failure = start(&app, path, "a", &[("x-password", "wrong")]).await;
                assert_eq!(failure.status(), StatusCode::UNAUTHORIZED, "{at}");
                finish(failure, None).await;
                settles_to(&limits, "login", &LOGINS, failures).await;
            }
            settles_to(&limits, "attempts", &ATTEMPTS, 8).await;
            // Locked out by the failed logins, with attempts to spare: the stack's denial
            // takes nothing from the other limit.
            let locked = start(&app, path, "a", &[("x-password", "right")]).await;
            assert_eq!(seen(&locked), "429 0", "{at}");
            settles_to(&limits, "attempts", &ATTEMPTS, 8).await;
            clock.advance(Duration::from_secs(900));
        }
    }
}

#[tokio::test]
async fn stacked_estimates_settle_to_one_report() {
    let redis = RedisServer::start();
    let clock = ManualClock::new(START);
    for (backend, limits) in backends(&redis, configured(&clock, "settle")) {
        let gates = Gates::default();
        let app = app(limits.clone(), &gates);
        let gate = gates.next();
        let first = start(&app, "/stacked/chat", "a", &[("x-used", "120")]).await;
        assert_eq!(first.status(), StatusCode::OK, "{backend}");
        // Both reserved 300 while the body streams; both settle to 120 once it ends.
        settles_to(&limits, "chat", &TOKENS, 300).await;
        settles_to(&limits, "team-chat", &TEAM_TOKENS, 300).await;
        finish(first, Some(gate)).await;
        settles_to(&limits, "chat", &TOKENS, 120).await;
        settles_to(&limits, "team-chat", &TEAM_TOKENS, 120).await;
        // 900 used on a 300 estimate: 600 more on each.
        let second = start(&app, "/stacked/chat", "a", &[("x-used", "900")]).await;
        finish(second, None).await;
        settles_to(&limits, "chat", &TOKENS, 1020).await;
        settles_to(&limits, "team-chat", &TEAM_TOKENS, 1020).await;
    }
}

#[tokio::test]
async fn a_burst_is_limited_while_it_runs_whatever_its_answers() {
    let redis = RedisServer::start();
    let clock = ManualClock::new(START);
    for (backend, limits) in backends(&redis, configured(&clock, "settle")) {
        let gates = Gates::default();
        let app = app(limits.clone(), &gates);
        // Three guesses in flight at once are each charged on admission: a fourth is
        // refused before any answer is known.
        let mut running = Vec::new();
        for remaining in ["2", "1", "0"] {
            let gate = gates.next();
            let guess = start(&app, "/login", "a", &[("x-password", "right")]).await;
            assert_eq!(seen(&guess), format!("200 {remaining}"), "{backend}");
            running.push((guess, gate));
        }
        let fourth = start(&app, "/login", "a", &[("x-password", "right")]).await;
        assert_eq!(seen(&fourth), "429 0", "{backend}");
        // They were successes: once answered, every unit comes back.
        for (guess, gate) in running {
            finish(guess, Some(gate)).await;
        }
        settles_to(&limits, "login", &LOGINS, 0).await;
    }
}

#[tokio::test]
async fn a_handler_finds_its_usage_when_nothing_was_counted() {
    let redis = RedisServer::start();
    let clock = ManualClock::new(START);
    let disabled =
        |builder: plug_limit::Builder| configured(&clock, "settle")(builder).enabled(false);
    for (backend, limits) in backends(&redis, disabled) {
        let gates = Gates::default();
        let app = app(limits, &gates);
        for path in ["/chat", "/layer/chat", "/extractor/chat"] {
            let response = start(&app, path, "a", &[("x-used", "5")]).await;
            assert_eq!(seen(&response), "200 -", "{backend} {path}");
        }
    }
}

#[tokio::test]
async fn settling_is_refused_where_it_cannot_happen() {
    // A custom script takes no refund: refused when the limit meets the handle that knows it.
    let redis = plug_limit_tests::RedisServer::start();
    let custom = PlugLimit::builder(redis.pool())
        .limiter("quota", plug_limit::Limiter::script("return {'allow', {}}"))
        .build()
        .unwrap();
    let settling = plug_limit::RuntimeLimit::new("quota", [Opt::Int(5)])
        .unwrap()
        .settle()
        .unwrap();
    let error = plug_limit::RateLimitLayer::runtime(custom, settling).unwrap_err();
    assert_eq!(
        error.to_string(),
        "invalid `settle`: needs a built-in limiter: a custom script takes no cost and no refund"
    );
    // A limit that does not settle has no usage to report.
    let limits = PlugLimit::memory();
    let app = Router::new()
        .route(
            "/",
            get(
                |limited: RateLimited<plug_limit::FixedWindow<5, 60>>| async move {
                    limited.usage().is_none().to_string()
                },
            ),
        )
        .with_state(State { limits });
    let request = with_peer(
        http::Request::get("/").body(Body::empty()).unwrap(),
        ([192, 0, 2, 1], 4000),
    );
    let response = app.oneshot(request).await.unwrap();
    let body = axum::body::to_bytes(response.into_body(), 64)
        .await
        .unwrap();
    assert_eq!(body, "true");
}
