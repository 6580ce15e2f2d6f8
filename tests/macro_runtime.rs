//! `#[rate_limit]` handlers against a real Redis: the headers they send, the budgets they
//! count against, their keys, and the start-up check of the limiters they name.
//!
//! Every annotated handler of this binary is checked by every `PlugLimit` it builds, so each
//! one is built by `limits`, which registers the custom limiters `echo` and `audit`, except in
//! the two tests about leaving one out.

use axum::body::Body;
use axum::extract::{FromRef, Path, State};
use axum::http::{HeaderMap, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, put};
use axum::{Json, Router};
use plug_limit::{Limiter, PlugLimit, key, rate_limit};
use plug_limit_tests::{Logs, RedisServer, dead_url, pool, stored_key, unique_prefix};
use serde::{Deserialize, Serialize};
use tower::ServiceExt;

#[derive(Clone, FromRef)]
struct AppState {
    limits: PlugLimit,
    greeting: Greeting,
}

#[derive(Clone)]
struct Greeting(&'static str);

#[rate_limit(opts = [3, 60])]
async fn hello() -> &'static str {
    "hello"
}

#[rate_limit(opts = [1, 60])]
async fn first() -> &'static str {
    "first"
}

#[rate_limit(opts = [1, 60])]
async fn second() -> &'static str {
    "second"
}

/// `hourly` is `Limiter::fixed_window()` under a name of its own: a built-in, which takes a
/// cost (a custom script's would be refused when the handle is built).
#[rate_limit(limiter = "hourly", opts = [100, 3600], cost = 2)]
async fn renamed_costly() -> &'static str {
    "costly"
}

#[rate_limit(opts = [1, 60], scope = "shared")]
async fn shared_a() -> &'static str {
    "a"
}

#[rate_limit(opts = [1, 60], scope = "shared")]
async fn shared_b() -> &'static str {
    "b"
}

#[rate_limit(opts = [1, 60], key = key::header("x-api-key"))]
async fn by_api_key() -> &'static str {
    "api"
}

fn odd(n: u32) -> Result<u32, (StatusCode, &'static str)> {
    if n % 2 == 1 {
        Ok(n)
    } else {
        Err((StatusCode::UNPROCESSABLE_ENTITY, "even"))
    }
}

#[rate_limit(opts = [5, 60])]
async fn fallible(Path(n): Path<u32>) -> Result<String, (StatusCode, &'static str)> {
    let n = odd(n)?;
    if n > 100 {
        return Err((StatusCode::BAD_REQUEST, "too big"));
    }
    Ok(format!("{n} is odd"))
}

#[derive(Debug, Deserialize, Serialize, PartialEq)]
struct Item {
    name: String,
}

#[rate_limit(limiter = "token_bucket", opts = [20, 600, 5])]
async fn update(
    State(Greeting(greeting)): State<Greeting>,
    Path(id): Path<u32>,
    Json(item): Json<Item>,
) -> Json<Item> {
    Json(Item {
        name: format!("{greeting} {id} {}", item.name),
    })
}

#[rate_limit(opts = [2, 60])]
#[axum::debug_handler]
async fn debugged(State(state): State<AppState>) -> impl IntoResponse {
    let Greeting(greeting) = state.greeting;
    (StatusCode::CREATED, [("x-handler", "debugged")], greeting)
}

#[rate_limit(limiter = "gcra", opts = [10, 60, 3])]
async fn paced() -> &'static str {
    "paced"
}

#[rate_limit(opts = [10, 60], cost = 3)]
async fn costly() -> &'static str {
    "costly"
}

#[rate_limit(limiter = "multi_window", opts = ["2/60", "5/3600"])]
async fn windowed() -> &'static str {
    "windowed"
}

#[rate_limit(limiter = "echo", opts = [7, "strict"])]
async fn echoed() -> &'static str {
    "echoed"
}

#[rate_limit(limiter = "audit", opts = [])]
async fn audited() -> &'static str {
    "audited"
}

/// A limiter registered under a name of its own, stacked with a built-in.
#[rate_limit(limiter = "hourly", opts = [2, 3600])]
#[rate_limit(opts = [5, 60])]
async fn stacked_custom() -> &'static str {
    "stacked"
}

/// Answers `allow` with its two options as header values.
const ECHO: &str = "return {'allow', {ARGV[1], ARGV[2]}}";
const UNREGISTERED: &str = "invalid `limiters.audit`: handler `macro_runtime::audited` uses \
                            limiter `audit`, which is not registered";

fn limits(server: &RedisServer, test: &str) -> PlugLimit {
    limits_under(server, &unique_prefix(test))
}

fn limits_under(server: &RedisServer, prefix: &str) -> PlugLimit {
    PlugLimit::builder(server.pool())
        .prefix(prefix)
        .key(key::header("x-client"))
        .limiter(
            "echo",
            Limiter::script(ECHO).headers(["x-echo-limit", "x-echo-mode"]),
        )
        .limiter("audit", Limiter::script("return {'allow'}"))
        .limiter("hourly", Limiter::fixed_window())
        .build()
        .expect("a valid configuration")
}

fn app(limits: PlugLimit) -> Router {
    Router::new()
        .route("/hello", get(hello))
        .route("/first", get(first))
        .route("/first/{again}", get(first))
        .route("/second", get(second))
        .route("/renamed", get(renamed_costly))
        .route("/shared/a", get(shared_a))
        .route("/shared/b", get(shared_b))
        .route("/api", get(by_api_key))
        .route("/odd/{n}", get(fallible))
        .route("/items/{id}", put(update))
        .route("/debugged", get(debugged))
        .route("/paced", get(paced))
        .route("/costly", get(costly))
        .route("/windowed", get(windowed))
        .route("/echo", get(echoed))
        .route("/audit", get(audited))
        .route("/stacked", get(stacked_custom))
        .with_state(AppState {
            limits,
            greeting: Greeting("hi"),
        })
}

async fn send(app: &Router, request: http::request::Builder, body: Body) -> Response {
    app.clone()
        .oneshot(request.body(body).expect("a valid request"))
        .await
        .expect("infallible")
}

async fn get_as(app: &Router, uri: &str, client: &str) -> Response {
    send(
        app,
        Request::get(uri).header("x-client", client),
        Body::empty(),
    )
    .await
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|value| value.to_str().ok())
}

async fn text(response: Response) -> String {
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 16)
        .await
        .expect("a readable body");
    String::from_utf8(bytes.to_vec()).expect("a utf-8 body")
}

#[tokio::test]
async fn allowed_responses_carry_the_limiter_headers() {
    let server = RedisServer::start();
    let app = app(limits(&server, "allowed_headers"));

    let response = get_as(&app, "/hello", "alice").await;
    assert_eq!(response.status(), StatusCode::OK);
    let headers = response.headers();
    assert_eq!(header(headers, "x-ratelimit-limit"), Some("3"));
    assert_eq!(header(headers, "x-ratelimit-reset"), Some("60"));
    assert_eq!(header(headers, "x-ratelimit-remaining"), Some("2"));
    assert_eq!(text(response).await, "hello");

    for remaining in ["1", "0"] {
        let response = get_as(&app, "/hello", "alice").await;
        assert_eq!(response.status(), StatusCode::OK);
        let headers = response.headers();
        assert_eq!(header(headers, "x-ratelimit-limit"), Some("3"));
        let reset: u32 = header(headers, "x-ratelimit-reset")
            .and_then(|reset| reset.parse().ok())
            .expect("a numeric reset");
        assert!((58..=60).contains(&reset), "reset {reset}");
        assert_eq!(header(headers, "x-ratelimit-remaining"), Some(remaining));
    }
}

#[tokio::test]
async fn requests_over_the_limit_get_429_with_headers() {
    let server = RedisServer::start();
    let app = app(limits(&server, "over_limit"));
    for _ in 0..3 {
        assert_eq!(get_as(&app, "/hello", "bob").await.status(), StatusCode::OK);
    }

    let response = get_as(&app, "/hello", "bob").await;
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(header(response.headers(), "x-ratelimit-limit"), Some("3"));
    assert_eq!(
        header(response.headers(), "x-ratelimit-remaining"),
        Some("0")
    );
    assert!(header(response.headers(), "x-ratelimit-reset").is_some());

    // Another client has a budget of its own.
    assert_eq!(
        get_as(&app, "/hello", "carol").await.status(),
        StatusCode::OK
    );
}

#[tokio::test]
async fn each_handler_has_its_own_budget() {
    let server = RedisServer::start();
    let app = app(limits(&server, "own_budget"));
    assert_eq!(
        get_as(&app, "/first", "dave").await.status(),
        StatusCode::OK
    );
    assert_eq!(
        get_as(&app, "/first", "dave").await.status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(
        get_as(&app, "/second", "dave").await.status(),
        StatusCode::OK
    );
}

/// Without a `scope`, a handler's budget is its matched route's, as `RateLimited<L>`'s and
/// the layer's are: one handler on two routes counts each apart, and the key names the
/// route's pattern, not the handler's module path (which a move or a rename would change).
#[tokio::test]
async fn a_handlers_budget_is_its_matched_routes() {
    let server = RedisServer::start();
    let prefix = unique_prefix("matched_route");
    let app = app(limits_under(&server, &prefix));
    for uri in ["/first", "/first/1"] {
        assert_eq!(
            get_as(&app, uri, "fran").await.status(),
            StatusCode::OK,
            "{uri}"
        );
    }
    for uri in ["/first", "/first/2"] {
        let denied = get_as(&app, uri, "fran").await.status();
        assert_eq!(denied, StatusCode::TOO_MANY_REQUESTS, "{uri}");
    }
    let mut conn = server.connection().await;
    for scope in ["/first", "/first/{again}"] {
        let key = stored_key(&prefix, "fixed_window", "1,60", scope, "fran");
        let exists: i64 = plug_limit::redis::cmd("EXISTS")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(exists, 1, "{key}");
    }
}

#[tokio::test]
async fn a_renamed_built_in_takes_the_attributes_cost() {
    let server = RedisServer::start();
    let app = app(limits(&server, "renamed_cost"));
    let response = get_as(&app, "/renamed", "gus").await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        header(response.headers(), "x-ratelimit-remaining"),
        Some("98")
    );
}

#[tokio::test]
async fn handlers_with_the_same_scope_share_a_budget() {
    let server = RedisServer::start();
    let app = app(limits(&server, "shared_scope"));
    assert_eq!(
        get_as(&app, "/shared/a", "erin").await.status(),
        StatusCode::OK
    );
    assert_eq!(
        get_as(&app, "/shared/b", "erin").await.status(),
        StatusCode::TOO_MANY_REQUESTS
    );
}

#[tokio::test]
async fn the_key_argument_replaces_the_default_key() {
    let server = RedisServer::start();
    let app = app(limits(&server, "key_argument"));
    let with_api_key = |client: &str| {
        Request::get("/api")
            .header("x-client", client)
            .header("x-api-key", "k-1")
    };
    let response = send(&app, with_api_key("frank"), Body::empty()).await;
    assert_eq!(response.status(), StatusCode::OK);
    // Another client with the same API key counts against the same budget.
    let response = send(&app, with_api_key("grace"), Body::empty()).await;
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);

    // No API key, and no peer address to fall back on: refused, never let through unlimited.
    let response = get_as(&app, "/api", "frank").await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert!(header(response.headers(), "x-ratelimit-limit").is_none());
}

#[tokio::test]
async fn errors_returned_by_the_handler_carry_the_headers_too() {
    let server = RedisServer::start();
    let app = app(limits(&server, "error_headers"));

    let response = get_as(&app, "/odd/7", "heidi").await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        header(response.headers(), "x-ratelimit-remaining"),
        Some("4")
    );
    assert_eq!(text(response).await, "7 is odd");

    // `?` in the body
    let response = get_as(&app, "/odd/8", "heidi").await;
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(header(response.headers(), "x-ratelimit-limit"), Some("5"));
    assert_eq!(
        header(response.headers(), "x-ratelimit-remaining"),
        Some("3")
    );
    assert_eq!(text(response).await, "even");

    // `return` in the body
    let response = get_as(&app, "/odd/101", "heidi").await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert_eq!(
        header(response.headers(), "x-ratelimit-remaining"),
        Some("2")
    );
    assert_eq!(text(response).await, "too big");
}

#[tokio::test]
async fn state_path_and_json_extractors_follow_the_rate_limit() {
    let server = RedisServer::start();
    let app = app(limits(&server, "extractors"));
    let request = Request::put("/items/42")
        .header("x-client", "ivan")
        .header("content-type", "application/json");

    let response = send(&app, request, Body::from(r#"{"name":"lamp"}"#)).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        header(response.headers(), "x-ratelimit-limit"),
        Some("20 20;w=600;burst=5;policy=token_bucket")
    );
    assert_eq!(header(response.headers(), "x-ratelimit-reset"), Some("600"));
    assert_eq!(
        header(response.headers(), "x-ratelimit-remaining"),
        Some("19")
    );
    assert_eq!(text(response).await, r#"{"name":"hi 42 lamp"}"#);

    // A body the `Json` extractor refuses is still refused by it.
    let request = Request::put("/items/42")
        .header("x-client", "ivan")
        .header("content-type", "application/json");
    let response = send(&app, request, Body::from("not json")).await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn debug_handler_composes_at_run_time() {
    let server = RedisServer::start();
    let app = app(limits(&server, "debug_handler"));

    let response = get_as(&app, "/debugged", "judy").await;
    assert_eq!(response.status(), StatusCode::CREATED);
    assert_eq!(header(response.headers(), "x-handler"), Some("debugged"));
    assert_eq!(header(response.headers(), "x-ratelimit-limit"), Some("2"));
    assert_eq!(
        header(response.headers(), "x-ratelimit-remaining"),
        Some("1")
    );
    assert_eq!(text(response).await, "hi");

    get_as(&app, "/debugged", "judy").await;
    let response = get_as(&app, "/debugged", "judy").await;
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
}

fn seconds(headers: &HeaderMap, name: &str) -> u32 {
    header(headers, name)
        .and_then(|value| value.parse().ok())
        .unwrap_or_else(|| panic!("a numeric `{name}`"))
}

#[tokio::test]
async fn gcra_counts_down_the_burst() {
    let server = RedisServer::start();
    let app = app(limits(&server, "gcra"));

    // One request every 6 s, bursts of 3: `x-ratelimit-limit` is the burst.
    for remaining in ["2", "1", "0"] {
        let response = get_as(&app, "/paced", "nina").await;
        assert_eq!(response.status(), StatusCode::OK);
        let headers = response.headers();
        assert_eq!(header(headers, "x-ratelimit-limit"), Some("3"));
        assert_eq!(header(headers, "x-ratelimit-remaining"), Some(remaining));
        assert!(header(headers, "retry-after").is_none());
        assert_eq!(text(response).await, "paced");
    }

    let response = get_as(&app, "/paced", "nina").await;
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    let headers = response.headers();
    assert_eq!(header(headers, "x-ratelimit-limit"), Some("3"));
    assert_eq!(header(headers, "x-ratelimit-remaining"), Some("0"));
    let retry_after = seconds(headers, "retry-after");
    assert!((1..=6).contains(&retry_after), "retry-after {retry_after}");
}

#[tokio::test]
async fn cost_takes_that_many_units_per_request() {
    let server = RedisServer::start();
    let app = app(limits(&server, "cost"));

    for remaining in ["7", "4", "1"] {
        let response = get_as(&app, "/costly", "oscar").await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(header(response.headers(), "x-ratelimit-limit"), Some("10"));
        assert_eq!(
            header(response.headers(), "x-ratelimit-remaining"),
            Some(remaining)
        );
    }

    // One unit is left, three are needed: refused, and nothing is taken.
    let response = get_as(&app, "/costly", "oscar").await;
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        header(response.headers(), "x-ratelimit-remaining"),
        Some("1")
    );
}

#[tokio::test]
async fn multi_window_denies_once_any_window_is_full() {
    let server = RedisServer::start();
    let app = app(limits(&server, "multi_window"));

    // The headers describe the most restrictive window, 2 per minute.
    for remaining in ["1", "0"] {
        let response = get_as(&app, "/windowed", "peggy").await;
        assert_eq!(response.status(), StatusCode::OK);
        let headers = response.headers();
        assert_eq!(header(headers, "x-ratelimit-limit"), Some("2"));
        assert_eq!(header(headers, "x-ratelimit-remaining"), Some(remaining));
        let reset = seconds(headers, "x-ratelimit-reset");
        assert!((59..=60).contains(&reset), "reset {reset}");
    }

    let response = get_as(&app, "/windowed", "peggy").await;
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    let headers = response.headers();
    assert_eq!(header(headers, "x-ratelimit-limit"), Some("2"));
    assert_eq!(header(headers, "x-ratelimit-remaining"), Some("0"));
    let retry_after = seconds(headers, "retry-after");
    assert!(
        (59..=60).contains(&retry_after),
        "retry-after {retry_after}"
    );
}

#[tokio::test]
async fn custom_limiters_get_integer_and_string_options() {
    let server = RedisServer::start();
    let app = app(limits(&server, "custom_opts"));
    let response = get_as(&app, "/echo", "mallory").await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(header(response.headers(), "x-echo-limit"), Some("7"));
    assert_eq!(header(response.headers(), "x-echo-mode"), Some("strict"));
    assert_eq!(text(response).await, "echoed");
}

#[test]
fn build_refuses_a_limiter_that_a_handler_uses_but_nobody_registered() {
    let error = PlugLimit::builder(pool(&dead_url()))
        .limiter("echo", Limiter::script(ECHO))
        .build()
        .expect_err("`audit` is not registered");
    assert_eq!(error.to_string(), UNREGISTERED);
}

#[test]
fn redis_warns_at_start_up_when_a_handler_uses_a_custom_limiter() {
    let (logs, _guard) = Logs::capture();
    let _limits = PlugLimit::redis(pool(&dead_url()));
    let text = logs.text();
    assert!(
        text.contains(&format!(" WARN plug_limit: {UNREGISTERED}: a PlugLimit made with the default settings knows only the built-in limiters")),
        "{text}"
    );
}

#[tokio::test]
async fn a_plug_limit_told_not_to_check_the_handlers_builds_and_serves_its_own() {
    let server = RedisServer::start();
    let limits = PlugLimit::builder(server.pool())
        .prefix(unique_prefix("unchecked"))
        .key(key::header("x-client"))
        .check_handlers(false)
        .build()
        .expect("`echo` and `audit` are not this PlugLimit's to check");
    let app = app(limits);
    let hello = get_as(&app, "/hello", "ann").await;
    assert_eq!(hello.status(), StatusCode::OK);
    assert_eq!(header(hello.headers(), "x-ratelimit-remaining"), Some("2"));
    // A handler whose limiter it does not know fails by the failure policy (open: served,
    // without headers), as any check that cannot decide.
    let echoed = get_as(&app, "/echo", "ann").await;
    assert_eq!(echoed.status(), StatusCode::OK);
    assert_eq!(header(echoed.headers(), "x-ratelimit-limit"), None);
}

#[tokio::test]
async fn stacked_attributes_with_a_registered_limiter_decide_as_one() {
    let server = RedisServer::start();
    let app = app(limits(&server, "stacked"));
    let mut seen = Vec::new();
    for _ in 0..3 {
        let response = get_as(&app, "/stacked", "ann").await;
        seen.push(format!(
            "{} {} {}",
            response.status().as_u16(),
            header(response.headers(), "x-ratelimit-limit").unwrap_or("-"),
            header(response.headers(), "x-ratelimit-remaining").unwrap_or("-"),
        ));
    }
    assert_eq!(seen, ["200 2 1", "200 2 0", "429 2 0"]);
}

#[test]
fn build_refuses_a_stacked_limiter_that_cannot_stack() {
    let error = PlugLimit::builder(pool(&dead_url()))
        .limiter("echo", Limiter::script(ECHO))
        .limiter("audit", Limiter::script("return {'allow'}"))
        .limiter("hourly", Limiter::script("return {'allow'}"))
        .build()
        .expect_err("`hourly` runs a custom script");
    assert_eq!(
        error.to_string(),
        "invalid `limiters.hourly`: handler `macro_runtime::stacked_custom` stacks limiter \
         `hourly`, which runs a custom script: only built-in limiters stack"
    );
}
