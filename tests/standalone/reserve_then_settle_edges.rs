//! What a request owes after its response, at the edges: a settlement that ends after its
//! window, a shadow denial, a cached denial its refund must lift.

use std::time::Duration;

use axum::Router;
use axum::extract::{Extension, FromRef};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use plug_limit::{Limit, ManualClock, Opt, PlugLimit, RateLimitLayer, Store, Usage, rate_limit};
use plug_limit_tests::{RedisServer, backends};

use crate::streaming_bodies::{Gates, configured, finish, start};
use plug_limit_tests::limit;

/// 2084-03-01T04:59:54Z: a time whose expiries are never in a real Redis' past.
const START: i64 = 3_602_725_194_000;
/// How long a test gives a settlement sent after a response to land.
const SETTLING: Duration = Duration::from_secs(1);

#[derive(Clone, FromRef)]
struct State {
    limits: PlugLimit,
}

fn status_of(response: &Response) -> u16 {
    response.status().as_u16()
}

fn failed_login(status: StatusCode) -> bool {
    status == StatusCode::UNAUTHORIZED
}

/// Three failed logins per 15 minutes; a successful one gets its unit back.
struct Logins;

impl Limit for Logins {
    const LIMITER: &'static str = "fixed_window";
    const OPTS: &'static [Opt] = &[Opt::Int(3), Opt::Int(900)];
    const SCOPE: Option<&'static str> = Some("login");
    const COUNT_IF: Option<fn(StatusCode) -> bool> = Some(failed_login);
}

async fn log_in(Extension(gates): Extension<Gates>, headers: HeaderMap) -> Response {
    let status = match headers.get("x-password") {
        Some(password) if password == "right" => StatusCode::OK,
        _ => StatusCode::UNAUTHORIZED,
    };
    (status, gates.body()).into_response()
}

/// `/login` under [`Logins`].
fn login_app(limits: &PlugLimit, gates: &Gates) -> Router {
    Router::new()
        .route("/login", get(log_in))
        .route_layer(RateLimitLayer::<Logins>::new(limits.clone()))
        .layer(Extension(gates.clone()))
}

/// A request admitted in one window and settled in the next gives its unit back to the next
/// window, which never charged it: the client gets a fourth failed login in a window of 3.
#[tokio::test]
async fn a_refund_never_reaches_a_window_that_did_not_charge_it() {
    let redis = RedisServer::start();
    let clock = ManualClock::new(START);
    for (backend, limits) in backends(&redis, configured(&clock, "refund_window")) {
        let gates = Gates::default();
        let app = login_app(&limits, &gates);
        // A success admitted at the end of a window, its body still streaming.
        let gate = gates.next();
        let slow = start(&app, "/login", "a", &[("x-password", "right")]).await;
        assert_eq!(status_of(&slow), 200, "{backend}");
        clock.advance(Duration::from_secs(900));
        // The next window: three guesses, the whole budget.
        for _ in 0..3 {
            let guess = start(&app, "/login", "a", &[("x-password", "wrong")]).await;
            assert_eq!(status_of(&guess), 401, "{backend}");
            finish(guess, None).await;
        }
        // The old success ends: its refund must not lift the new window's count.
        finish(slow, Some(gate)).await;
        // A settlement is sent after the response: give it time to land.
        tokio::time::sleep(SETTLING).await;
        let fourth = start(&app, "/login", "a", &[("x-password", "wrong")]).await;
        assert_eq!(
            status_of(&fourth),
            429,
            "{backend}: a fourth failed login in a window of 3"
        );
        clock.advance(Duration::from_secs(900));
    }
}

/// A refund is sent after its deadline is read and may take the backend's timeout to land:
/// it goes back only while the window has a second plus twice the timeout left (here 2 s, the
/// timeout being 500 ms), so that it never lands in the next window.
#[tokio::test]
async fn a_refund_leaves_itself_the_time_to_land() {
    let redis = RedisServer::start();
    let clock = ManualClock::new(START);
    for (backend, limits) in backends(&redis, configured(&clock, "refund_margin")) {
        let gates = Gates::default();
        let app = login_app(&limits, &gates);
        for (left_ms, count) in [(2_100, 0), (1_500, 1)] {
            // A success, its body streaming until the window has `left_ms` left.
            let gate = gates.next();
            let slow = start(&app, "/login", "a", &[("x-password", "right")]).await;
            assert_eq!(status_of(&slow), 200, "{backend}");
            clock.advance(Duration::from_millis(900_000 - left_ms));
            finish(slow, Some(gate)).await;
            tokio::time::sleep(SETTLING).await;
            let peek = limits
                .peek(limit("fixed_window", Logins::OPTS).scope("login"), "a")
                .await
                .unwrap();
            let remaining = peek.header("x-ratelimit-remaining").unwrap();
            assert_eq!(
                remaining,
                &(3 - count - 1).to_string(),
                "{backend} {left_ms} ms left"
            );
            clock.advance(Duration::from_millis(left_ms));
        }
    }
}

/// The same for an estimate: reserved 300 in one window, reported 0 after the next began.
#[rate_limit(opts = [1000, 3600], cost = 300, scope = "chat", settle)]
async fn chat(
    Extension(usage): Extension<Usage>,
    Extension(gates): Extension<Gates>,
    headers: HeaderMap,
) -> Response {
    if let Some(units) = headers.get("x-used") {
        usage.set(units.to_str().unwrap().parse().unwrap());
    }
    Response::new(gates.body())
}

fn chat_app(limits: PlugLimit, gates: &Gates) -> Router {
    Router::new()
        .route("/chat", get(chat))
        .with_state(State { limits })
        .layer(Extension(gates.clone()))
}

#[tokio::test]
async fn an_estimate_settled_in_the_next_window_gives_no_free_units() {
    let redis = RedisServer::start();
    let clock = ManualClock::new(START);
    for (backend, limits) in backends(&redis, configured(&clock, "estimate_window")) {
        let gates = Gates::default();
        let app = chat_app(limits.clone(), &gates);
        let gate = gates.next();
        let slow = start(&app, "/chat", "a", &[("x-used", "0")]).await;
        assert_eq!(status_of(&slow), 200, "{backend}");
        clock.advance(Duration::from_secs(3600));
        // The new window: 900 of 1000 used, by requests that used what they reserved.
        for _ in 0..3 {
            let spent = start(&app, "/chat", "a", &[]).await;
            assert_eq!(status_of(&spent), 200, "{backend}");
            finish(spent, None).await;
        }
        finish(slow, Some(gate)).await;
        // A settlement is sent after the response: give it time to land.
        tokio::time::sleep(SETTLING).await;
        // 100 left: a 300 estimate must be refused.
        let over = start(&app, "/chat", "a", &[]).await;
        assert_eq!(
            status_of(&over),
            429,
            "{backend}: a 4th 300-unit request admitted in a window of 1000"
        );
        clock.advance(Duration::from_secs(3600));
    }
}

#[tokio::test]
async fn usage_is_there_on_a_shadow_denial() {
    let clock = ManualClock::new(START);
    let configure = configured(&clock, "usage_shadow");
    let limits = configure(PlugLimit::builder(Store::memory()))
        .shadow(true)
        .build()
        .unwrap();
    let gates = Gates::default();
    let app = chat_app(limits, &gates);
    for i in 0..4 {
        let response = start(&app, "/chat", "a", &[]).await;
        assert_eq!(
            status_of(&response),
            200,
            "request {i}: shadow mode must never refuse, yet the settle handler fails"
        );
        finish(response, None).await;
    }
}

/// Units a settlement gives back lift the denial they caused, as `PlugLimit::settle` and a
/// programmatic refund do: a deny cache must not keep refusing a client whose count is back
/// to 0 for the rest of the window.
#[tokio::test]
async fn a_settled_refund_lifts_a_cached_denial() {
    let redis = RedisServer::start();
    let clock = ManualClock::new(START);
    let configure = configured(&clock, "refund_deny_cache");
    for (backend, limits) in backends(&redis, |builder| configure(builder).deny_cache(true)) {
        let gates = Gates::default();
        let app = login_app(&limits, &gates);
        // Three successes in flight hold the whole budget; a fourth is refused (and cached).
        let mut running = Vec::new();
        for _ in 0..3 {
            let gate = gates.next();
            let success = start(&app, "/login", "a", &[("x-password", "right")]).await;
            assert_eq!(status_of(&success), 200, "{backend}");
            running.push((success, gate));
        }
        let fourth = start(&app, "/login", "a", &[("x-password", "right")]).await;
        assert_eq!(status_of(&fourth), 429, "{backend}");
        // They were successes: every unit comes back.
        for (success, gate) in running {
            finish(success, Some(gate)).await;
        }
        tokio::time::sleep(SETTLING).await;
        let peek = limits
            .peek(limit("fixed_window", Logins::OPTS).scope("login"), "a")
            .await
            .unwrap();
        assert!(peek.is_allowed(), "{backend}: the refunds did not land");
        let after = start(&app, "/login", "a", &[("x-password", "right")]).await;
        assert_eq!(
            status_of(&after),
            200,
            "{backend}: the count is back to 0, yet the deny cache still refuses"
        );
        finish(after, None).await;
        clock.advance(Duration::from_secs(900));
    }
}
