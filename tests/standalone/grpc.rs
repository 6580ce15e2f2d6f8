//! gRPC: `RateLimitLayer` around a real tonic server (tonic-health's `Health` service) on a
//! loopback port, called by a real tonic client, on Redis and in memory.

use std::net::SocketAddr;

use axum::{Router, body::Body, routing::get};
use plug_limit::key::KeyExtractor;
use plug_limit::{
    Action, Check, FailurePolicy, FixedWindow, Limit, LogLevel, Opt, PlugLimit, RateLimitLayer,
    RuntimeLimit, key,
};
use plug_limit_tests::{RedisServer, backends, dead_url, pool, send};
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Channel, Server};
use tonic::{Code, Request, Status};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

/// Serves tonic-health's `Health` service behind `layer` on a free loopback port, until the
/// test's runtime ends; returns a client connected to it.
async fn serve<L>(layer: L) -> HealthClient<Channel>
where
    L: tower::Layer<tonic::service::Routes> + Clone + Send + 'static,
    L::Service: tower::Service<
            http::Request<tonic::body::Body>,
            Response = http::Response<Body>,
            Error = std::convert::Infallible,
        > + Clone
        + Send
        + 'static,
    <L::Service as tower::Service<http::Request<tonic::body::Body>>>::Future: Send,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a loopback port");
    let addr: SocketAddr = listener.local_addr().expect("the bound address");
    let (_reporter, health) = tonic_health::server::health_reporter();
    let server = Server::builder()
        .layer(layer)
        .add_service(health)
        .serve_with_incoming(TcpIncoming::from(listener));
    tokio::spawn(server);
    let channel = Channel::from_shared(format!("http://{addr}"))
        .expect("a valid URI")
        .connect()
        .await
        .expect("connect to the tonic server");
    HealthClient::new(channel)
}

/// One `Check` call as client `client` (`x-client` metadata, unless `None`).
async fn check(
    client: &mut HealthClient<Channel>,
    who: Option<&'static str>,
) -> Result<tonic::Response<tonic_health::pb::HealthCheckResponse>, Status> {
    let mut request = Request::new(HealthCheckRequest {
        service: String::new(),
    });
    if let Some(who) = who {
        request
            .metadata_mut()
            .insert("x-client", who.parse().expect("ASCII metadata"));
    }
    client.check(request).await
}

fn value<'a>(metadata: &'a tonic::metadata::MetadataMap, name: &str) -> Option<&'a str> {
    metadata
        .get(name)
        .map(|v| v.to_str().expect("ASCII metadata"))
}

/// The `x-ratelimit-limit`, `x-ratelimit-reset`, `x-ratelimit-remaining` and `retry-after`
/// metadata, `None` where absent.
fn rate_metadata(metadata: &tonic::metadata::MetadataMap) -> [Option<&str>; 4] {
    [
        value(metadata, "x-ratelimit-limit"),
        value(metadata, "x-ratelimit-reset"),
        value(metadata, "x-ratelimit-remaining"),
        value(metadata, "retry-after"),
    ]
}

#[tokio::test]
async fn grpc_calls_are_limited_and_refused_with_resource_exhausted() {
    let redis = RedisServer::start();
    for (backend, limits) in backends(&redis, |b| b.key(key::header("x-client"))) {
        let mut client = serve(RateLimitLayer::<FixedWindow<2, 60>>::new(limits)).await;
        for remaining in ["1", "0"] {
            let allowed = check(&mut client, Some("ann")).await.expect(backend);
            assert_eq!(
                rate_metadata(allowed.metadata()),
                [Some("2"), Some("60"), Some(remaining), None],
                "{backend}"
            );
        }
        let denied = check(&mut client, Some("ann")).await.unwrap_err();
        assert_eq!(denied.code(), Code::ResourceExhausted, "{backend}");
        assert_eq!(denied.message(), "Too Many Requests", "{backend}");
        assert_eq!(
            rate_metadata(denied.metadata()),
            [Some("2"), Some("60"), Some("0"), Some("60")],
            "{backend}"
        );
        assert_eq!(
            value(denied.metadata(), "content-type"),
            Some("application/grpc"),
            "{backend}"
        );
        // Another client, its own budget.
        let bob = check(&mut client, Some("bob")).await.expect(backend);
        assert_eq!(value(bob.metadata(), "x-ratelimit-remaining"), Some("1"));
    }
}

/// Three a minute per client, on every route and method that names the scope `api`.
struct Api;

impl Limit for Api {
    const LIMITER: &'static str = "fixed_window";
    const OPTS: &'static [Opt] = &[Opt::Int(3), Opt::Int(60)];
    const SCOPE: Option<&'static str> = Some("api");
    const KEY: Option<&'static dyn KeyExtractor> = Some(&key::header("x-client"));
}

/// `GET /api` as client `ann`, written as a gRPC call when `grpc_typed`.
fn http_get(grpc_typed: bool) -> http::Request<Body> {
    let request = http::Request::get("/api").header("x-client", "ann");
    let request = if grpc_typed {
        request.header("content-type", "application/grpc")
    } else {
        request
    };
    request.body(Body::empty()).expect("request")
}

#[tokio::test]
async fn an_http_route_and_a_grpc_method_of_one_scope_share_one_budget() {
    let redis = RedisServer::start();
    for (backend, limits) in backends(&redis, |b| b) {
        let app = Router::new()
            .route("/api", get(|| async { "api" }))
            .route_layer(RateLimitLayer::<Api>::new(limits.clone()));
        // The same limit, made at run time: one budget all the same.
        let api = RuntimeLimit::from(Api);
        let mut client = serve(RateLimitLayer::runtime(limits, api).unwrap()).await;

        let first = send(&app, http_get(false)).await;
        assert_eq!((first.status.as_u16(), first.body.as_str()), (200, "api"));
        assert_eq!(
            first.header("x-ratelimit-remaining"),
            Some("2"),
            "{backend}"
        );
        // Calling itself gRPC buys no budget of its own: the same key, the same scope.
        let typed = send(&app, http_get(true)).await;
        assert_eq!((typed.status.as_u16(), typed.body.as_str()), (200, "api"));
        assert_eq!(
            typed.header("x-ratelimit-remaining"),
            Some("1"),
            "{backend}"
        );
        let call = check(&mut client, Some("ann")).await.expect(backend);
        assert_eq!(value(call.metadata(), "x-ratelimit-remaining"), Some("0"));

        let denied = check(&mut client, Some("ann")).await.unwrap_err();
        assert_eq!(denied.code(), Code::ResourceExhausted, "{backend}");
        let http_denied = send(&app, http_get(false)).await;
        assert_eq!(http_denied.status, 429, "{backend}");
        assert_eq!(http_denied.body, "Too Many Requests");
        assert_eq!(
            http_denied.rate_headers(),
            [Some("3"), Some("60"), Some("0"), Some("60")]
        );
        // A gRPC-typed request to the HTTP route is refused as gRPC: the same count, the same
        // values, another shape.
        let grpc_denied = send(&app, http_get(true)).await;
        assert_eq!(grpc_denied.status, 200, "{backend}");
        assert_eq!(grpc_denied.body, "");
        assert_eq!(grpc_denied.header("content-type"), Some("application/grpc"));
        assert_eq!(grpc_denied.header("grpc-status"), Some("8"));
        assert_eq!(
            grpc_denied.header("grpc-message"),
            Some("Too Many Requests")
        );
        assert_eq!(
            grpc_denied.rate_headers(),
            [Some("3"), Some("60"), Some("0"), Some("60")]
        );
    }
}

#[tokio::test]
async fn the_default_key_is_the_peer_address_tonic_gives() {
    let redis = RedisServer::start();
    for (backend, limits) in backends(&redis, |b| b) {
        let layer = RateLimitLayer::<FixedWindow<2, 60>>::new(limits.clone());
        let mut client = serve(layer).await;
        // Whatever the client writes, the budget is its address's.
        check(&mut client, Some("ann")).await.expect(backend);
        check(&mut client, Some("bob")).await.expect(backend);
        let denied = check(&mut client, None).await.unwrap_err();
        assert_eq!(denied.code(), Code::ResourceExhausted, "{backend}");
        // Counted for 127.0.0.1 in the scope of a request no router matched.
        let spent = RuntimeLimit::from(FixedWindow::<2, 60>).scope("*");
        let peeked = limits.peek(spent, "127.0.0.1").await.unwrap();
        assert!(!peeked.is_allowed(), "{backend}");
        assert_eq!(peeked.header("x-ratelimit-remaining").unwrap(), "0");

        // Without a peer address (no tonic server, no connect info) the key fails, and the
        // default `KeyFailure::PeerIp` finds no address either: refused as a bad request,
        // which a gRPC call reads as INVALID_ARGUMENT.
        let app = Router::new()
            .route("/api", get(|| async { "api" }))
            .route_layer(RateLimitLayer::<FixedWindow<2, 60>>::new(limits));
        let no_peer = send(&app, http_get(true)).await;
        assert_eq!(no_peer.status, 200, "{backend}");
        assert_eq!(no_peer.header("grpc-status"), Some("3"));
        assert_eq!(no_peer.header("grpc-message"), Some("Bad Request"));
    }
}

#[tokio::test]
async fn a_limiter_down_under_closed_answers_unavailable() {
    let limits = PlugLimit::builder(pool(&dead_url()))
        .key(key::header("x-client"))
        .on_failure(FailurePolicy::Closed)
        .log_level(LogLevel::Off)
        .build()
        .unwrap();
    let mut client = serve(RateLimitLayer::<FixedWindow<2, 60>>::new(limits)).await;
    let refused = check(&mut client, Some("ann")).await.unwrap_err();
    assert_eq!(refused.code(), Code::Unavailable);
    assert_eq!(refused.message(), "Rate limiter unavailable");
    assert_eq!(rate_metadata(refused.metadata()), [None, None, None, None]);
}

#[tokio::test]
async fn a_hooks_answer_reaches_a_grpc_client_as_a_grpc_status() {
    use axum::response::IntoResponse;

    // Denials answered `402` by the hook, with a header of its own.
    let hook = |_: &str, check: Check<'_>| match check {
        Check::Denied(outcome) => {
            let mut headers = outcome.header_map();
            headers.insert("x-upgrade", http::HeaderValue::from_static("/plans"));
            Action::Respond((http::StatusCode::PAYMENT_REQUIRED, headers, "pay").into_response())
        }
        _ => Action::Default,
    };
    let redis = RedisServer::start();
    for (backend, limits) in backends(&redis, |b| b.key(key::header("x-client")).hook(hook)) {
        let mut client = serve(RateLimitLayer::<FixedWindow<1, 60>>::new(limits)).await;
        check(&mut client, Some("ann")).await.expect(backend);
        let denied = check(&mut client, Some("ann")).await.unwrap_err();
        assert_eq!(denied.code(), Code::Unknown, "{backend}");
        assert_eq!(denied.message(), "Payment Required", "{backend}");
        assert_eq!(value(denied.metadata(), "x-upgrade"), Some("/plans"));
        assert_eq!(value(denied.metadata(), "x-ratelimit-remaining"), Some("0"));
    }

    // A hook that answers a gRPC status itself is taken at its word.
    let hook = |_: &str, check: Check<'_>| match check {
        Check::Denied(_) => {
            let status = Status::resource_exhausted("quota of the free plan spent");
            Action::Respond(status.into_http::<Body>())
        }
        _ => Action::Default,
    };
    let limits = PlugLimit::builder(plug_limit::Store::memory())
        .key(key::header("x-client"))
        .hook(hook)
        .build()
        .unwrap();
    let mut client = serve(RateLimitLayer::<FixedWindow<1, 60>>::new(limits)).await;
    check(&mut client, Some("ann")).await.unwrap();
    let denied = check(&mut client, Some("ann")).await.unwrap_err();
    assert_eq!(denied.code(), Code::ResourceExhausted);
    assert_eq!(denied.message(), "quota of the free plan spent");
}
