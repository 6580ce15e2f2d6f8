use axum::Router;
use axum::extract::FromRef;
use axum::http::request::Parts;
use axum::routing::get;
use plug_limit::key::{self, ClientIpSource, KeyError};
use plug_limit::{PlugLimit, rate_limit};

#[derive(Clone, FromRef)]
struct AppState {
    limits: PlugLimit,
}

fn tenant(parts: &Parts) -> Result<String, KeyError> {
    parts
        .headers
        .get("x-tenant")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned)
        .ok_or_else(|| KeyError::new("missing tenant"))
}

const BY_PROXY: key::ClientIp = key::client_ip(ClientIpSource::RightmostXForwardedFor, key::ANY_PEER);

#[rate_limit(opts = [10, 60], key = plug_limit::key::header("x-api-key"))]
async fn by_header() {}

#[rate_limit(opts = [10, 60], key = tenant)]
async fn by_tenant() {}

#[rate_limit(opts = [10, 60], key = BY_PROXY, scope = "proxied")]
async fn by_proxy() {}

#[rate_limit(opts = [10, 60], key = key::global(), scope = "everyone")]
async fn everyone() {}

#[rate_limit(scope = "everyone", opts = [10, 60], key = key::global())]
async fn everyone_too() {}

fn app(limits: PlugLimit) -> Router {
    Router::new()
        .route("/a", get(by_header))
        .route("/b", get(by_tenant))
        .route("/c", get(by_proxy))
        .route("/d", get(everyone))
        .route("/e", get(everyone_too))
        .with_state(AppState { limits })
}

fn main() {
    let _: fn(PlugLimit) -> Router = app;
}
