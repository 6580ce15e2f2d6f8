use axum::{Router, extract::FromRef, routing::get};
use plug_limit::{PlugLimit, rate_limit};

#[derive(Clone, FromRef)]
struct AppState {
    limits: PlugLimit,
}

#[rate_limit(opts = [10, 60])]
async fn handler() -> &'static str {
    "hello"
}

#[rate_limit(opts = [10, 60])]
async fn unit() {}

fn app(limits: PlugLimit) -> Router {
    Router::new()
        .route("/", get(handler))
        .route("/unit", get(unit))
        .with_state(AppState { limits })
}

fn main() {
    let _: fn(PlugLimit) -> Router = app;
}
