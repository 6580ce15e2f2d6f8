use axum::Router;
use axum::extract::FromRef;
use axum::http::request::Parts;
use axum::routing::get;
use plug_limit::{PlugLimit, rate_limit};

#[derive(Clone, FromRef)]
struct AppState {
    limits: PlugLimit,
}

fn is_probe(parts: &Parts) -> bool {
    parts.headers.contains_key("x-probe")
}

mod health {
    pub fn internal(parts: &axum::http::request::Parts) -> bool {
        parts.uri.path().starts_with("/internal")
    }
}

#[rate_limit(opts = [10, 60], skip = is_probe)]
async fn probed() {}

#[rate_limit(skip = health::internal, opts = [10, 60], scope = "internal")]
async fn internal() {}

fn app(limits: PlugLimit) -> Router {
    Router::new()
        .route("/a", get(probed))
        .route("/internal/b", get(internal))
        .with_state(AppState { limits })
}

fn main() {
    let _: fn(PlugLimit) -> Router = app;
}
