//! `RuntimeLimit` and `RateLimitLayer::{runtime, resolve}`: limits made at run time, fixed or per request.

use axum::{Router, routing::get};
use plug_limit::{Limit, Opt, RateLimitLayer, RuntimeLimit, key};
use plug_limit_tests::{RedisServer, backends, get as send_get, send};

fn client_key(builder: plug_limit::Builder) -> plug_limit::Builder {
    builder.key(key::header("x-client"))
}

/// A limit read from a file naming a limiter the handle does not know is refused when the
/// layer is built, naming the limiter, rather than failing every request.
#[tokio::test]
async fn an_unknown_limiter_is_refused_when_the_layer_is_built() {
    let limits = plug_limit::PlugLimit::memory();
    let limit: RuntimeLimit =
        serde_json::from_str(r#"{ "limiter": "fixed_windw", "opts": [2, 60] }"#).unwrap();
    let error = RateLimitLayer::runtime(limits.clone(), limit).unwrap_err();
    assert_eq!(
        error.to_string(),
        "invalid `limiter`: `fixed_windw` is not registered with this PlugLimit; did you mean `fixed_window`?"
    );
    let known = RuntimeLimit::new("fixed_window", [2, 60]).unwrap();
    assert!(RateLimitLayer::runtime(limits, known).is_ok());
}

/// The refusal suggests the registered name nearest to an unknown one, custom limiters
/// included, and none when no name is a few edits away.
#[test]
fn an_unknown_limiter_is_refused_with_the_nearest_name() {
    let limits = plug_limit::PlugLimit::builder(plug_limit::Store::memory())
        .limiter("login", plug_limit::Limiter::fixed_window())
        .build()
        .unwrap();
    let refusal = |name: &str| {
        let limit = RuntimeLimit::new(name, [2, 60]).unwrap();
        RateLimitLayer::runtime(limits.clone(), limit)
            .unwrap_err()
            .to_string()
    };
    let unknown = "invalid `limiter`: `{}` is not registered with this PlugLimit";
    let suggested = |name: &str, known: &str| {
        format!("{}; did you mean `{known}`?", unknown.replace("{}", name))
    };
    assert_eq!(
        refusal("tokn_bucket"),
        suggested("tokn_bucket", "token_bucket")
    );
    assert_eq!(refusal("gcar"), suggested("gcar", "gcra"));
    assert_eq!(refusal("logn"), suggested("logn", "login"));
    assert_eq!(
        refusal("Sliding_Log"),
        suggested("Sliding_Log", "sliding_log")
    );
    assert_eq!(refusal("quota"), unknown.replace("{}", "quota"));
    assert_eq!(refusal("bucket"), unknown.replace("{}", "bucket"));
}

#[tokio::test]
async fn a_fixed_runtime_limit_counts_per_route_like_a_typed_one() {
    let redis = RedisServer::start();
    for (backend, limits) in backends(&redis, client_key) {
        let limit = RuntimeLimit::new("fixed_window", [2, 60]).unwrap();
        let app = Router::new()
            .route("/a", get(|| async { "a" }))
            .route("/b", get(|| async { "b" }))
            .route_layer(RateLimitLayer::runtime(limits, limit).unwrap());
        for remaining in ["1", "0"] {
            let reply = send_get(&app, "/a", "z").await;
            assert_eq!(reply.status, 200, "{backend}");
            assert_eq!(reply.body, "a");
            assert_eq!(
                reply.rate_headers(),
                [Some("2"), Some("60"), Some(remaining), None],
                "{backend}"
            );
        }
        let denied = send_get(&app, "/a", "z").await;
        assert_eq!(denied.status, 429, "{backend}");
        assert_eq!(
            denied.rate_headers(),
            [Some("2"), Some("60"), Some("0"), Some("60")],
            "{backend}"
        );
        let other_route = send_get(&app, "/b", "z").await;
        assert_eq!(other_route.header("x-ratelimit-remaining"), Some("1"));
        let other_client = send_get(&app, "/a", "y").await;
        assert_eq!(other_client.header("x-ratelimit-remaining"), Some("1"));
    }
}

/// The same limiter, options and scope as a type and as a value: one budget, one key.
#[tokio::test]
async fn a_runtime_limit_and_a_limit_type_of_one_scope_share_a_budget() {
    struct Shared;
    impl Limit for Shared {
        const LIMITER: &'static str = "fixed_window";
        const OPTS: &'static [Opt] = &[Opt::Int(3), Opt::Int(60)];
        const SCOPE: Option<&'static str> = Some("shared");
    }
    let redis = RedisServer::start();
    for (backend, limits) in backends(&redis, client_key) {
        let limit = RuntimeLimit::new("fixed_window", [3, 60])
            .unwrap()
            .scope("shared");
        let app = Router::new()
            .route(
                "/typed",
                get(|| async { "typed" })
                    .route_layer(RateLimitLayer::<Shared>::new(limits.clone())),
            )
            .route(
                "/runtime",
                get(|| async { "runtime" })
                    .route_layer(RateLimitLayer::runtime(limits, limit).unwrap()),
            );
        let mut remaining = Vec::new();
        for uri in ["/typed", "/runtime", "/typed", "/runtime"] {
            let reply = send_get(&app, uri, "z").await;
            remaining.push((
                reply.status.as_u16(),
                reply.header("x-ratelimit-remaining").map(str::to_owned),
            ));
        }
        assert_eq!(
            remaining,
            [
                (200, Some("2".to_owned())),
                (200, Some("1".to_owned())),
                (200, Some("0".to_owned())),
                (429, Some("0".to_owned())),
            ],
            "{backend}"
        );
    }
}

#[tokio::test]
async fn a_resolver_picks_each_requests_limit_and_none_leaves_it_unlimited() {
    let redis = RedisServer::start();
    for (backend, limits) in backends(&redis, |builder| builder) {
        let api_key = key::header("x-api-key");
        let pro = RuntimeLimit::new("fixed_window", [3, 60])
            .unwrap()
            .key(api_key);
        let free = RuntimeLimit::new("fixed_window", [1, 60])
            .unwrap()
            .key(api_key);
        let layer = RateLimitLayer::resolve(limits, move |parts| {
            if parts.uri.path() == "/health" {
                return None;
            }
            let plan = parts.headers.get("x-api-key")?.to_str().ok()?;
            Some(if plan.starts_with("pro_") {
                pro.clone()
            } else {
                free.clone()
            })
        });
        let app = Router::new()
            .route("/api", get(|| async { "api" }))
            .route("/health", get(|| async { "up" }))
            .route_layer(layer);
        let call = |uri: &'static str, api_key: &'static str| {
            let app = app.clone();
            async move {
                let request = http::Request::get(uri)
                    .header("x-api-key", api_key)
                    .body(axum::body::Body::empty())
                    .unwrap();
                let reply = send(&app, request).await;
                (
                    reply.status.as_u16(),
                    reply.header("x-ratelimit-limit").map(str::to_owned),
                )
            }
        };
        let mut seen = Vec::new();
        for _ in 0..4 {
            seen.push(call("/api", "pro_1").await);
        }
        for _ in 0..2 {
            seen.push(call("/api", "free_1").await);
        }
        seen.push(call("/health", "free_1").await);
        let three = || Some("3".to_owned());
        let one = || Some("1".to_owned());
        assert_eq!(
            seen,
            [
                (200, three()),
                (200, three()),
                (200, three()),
                (429, three()),
                (200, one()),
                (429, one()),
                (200, None),
            ],
            "{backend}"
        );
    }
}

/// Owned string options reach the script as they reach the memory twin.
#[tokio::test]
async fn owned_string_options_decide_on_both_backends() {
    let redis = RedisServer::start();
    for (backend, limits) in backends(&redis, client_key) {
        let windows = vec!["1/60".to_owned(), "5/3600".to_owned()];
        let limit = RuntimeLimit::new("multi_window", windows).unwrap();
        let app = Router::new()
            .route("/", get(|| async { "ok" }))
            .route_layer(RateLimitLayer::runtime(limits, limit).unwrap());
        let first = send_get(&app, "/", "z").await;
        assert_eq!(first.status, 200, "{backend}");
        assert_eq!(
            first.rate_headers(),
            [Some("1"), Some("60"), Some("0"), None]
        );
        let second = send_get(&app, "/", "z").await;
        assert_eq!(second.status, 429, "{backend}");
        assert_eq!(
            second.rate_headers(),
            [Some("1"), Some("60"), Some("0"), Some("60")]
        );
    }
}

#[test]
fn limits_read_from_toml_are_checked_with_the_field_and_the_rule() {
    #[derive(serde::Deserialize)]
    struct Routes {
        search: RuntimeLimit,
    }
    let routes: Routes = toml::from_str(
        "[search]\nlimiter = \"token_bucket\"\nopts = [20, 600, 5]\ncost = 2\nscope = \"s\"\n",
    )
    .unwrap();
    assert_eq!(routes.search.limiter(), "token_bucket");
    assert_eq!(
        routes.search.opts(),
        [Opt::Int(20), Opt::Int(600), Opt::Int(5)]
    );

    let error =
        toml::from_str::<Routes>("[search]\nlimiter = \"token_bucket\"\nopts = [20, 600]\n")
            .err()
            .unwrap();
    assert_eq!(
        error.message(),
        "invalid `opts`: token_bucket: takes 3 options, found 2"
    );
    let error =
        toml::from_str::<Routes>("[search]\nlimiter = \"gcra\"\nopts = [5, 1, 2]\nburst = 3\n")
            .err()
            .unwrap();
    assert!(
        error
            .message()
            .starts_with("unknown field `burst`, expected one of"),
        "{}",
        error.message()
    );
}

/// What only the handle knows of a limit is checked when the layer is built: a built-in
/// registered under a name of its own takes a cost, and refuses options as its script would
/// (a number as text included); a custom script takes no cost.
#[tokio::test]
async fn a_renamed_built_in_takes_a_cost_and_has_its_options_checked() {
    let redis = RedisServer::start();
    let limits = plug_limit::PlugLimit::builder(redis.pool())
        .limiter("hot", plug_limit::Limiter::fixed_window())
        .limiter(
            "custom",
            plug_limit::Limiter::script("return {'allow', {}}"),
        )
        .build()
        .unwrap();
    let hot = RuntimeLimit::new("hot", [10, 60]).unwrap().cost(3).unwrap();
    let outcome = limits.check(hot.clone(), "k").await.unwrap();
    assert_eq!(outcome.remaining(), Some(7));
    assert!(RateLimitLayer::runtime(limits.clone(), hot).is_ok());
    let refused = |limit: RuntimeLimit| {
        RateLimitLayer::runtime(limits.clone(), limit)
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        refused(RuntimeLimit::new("hot", [Opt::from(20), Opt::from("600")]).unwrap()),
        "invalid `opts`: fixed_window: window must be an integer, not a string, got '600'"
    );
    let hostile = format!("\u{202e}{}", "A".repeat(100_000));
    assert_eq!(
        refused(RuntimeLimit::new("hot", [Opt::from(hostile), Opt::from(60)]).unwrap()),
        format!(
            "invalid `opts`: fixed_window: limit must be a positive integer, got '\\u{{202e}}{}… (100003 bytes)'",
            "A".repeat(63)
        )
    );
    assert_eq!(
        refused(
            RuntimeLimit::new("custom", Vec::<Opt>::new())
                .unwrap()
                .cost(2)
                .unwrap()
        ),
        "invalid `cost`: needs a built-in limiter: a custom script takes no cost and no refund"
    );
}
