use axum::Router;
use axum::extract::FromRef;
use axum::routing::get;
use plug_limit::{PlugLimit, rate_limit};

#[derive(Clone, FromRef)]
struct AppState {
    limits: PlugLimit,
}

#[rate_limit(limiter = "fixed_window", opts = [10, 60])]
async fn fixed() -> &'static str {
    "fixed"
}

// The extremes the scripts accept: `burst` equal to `limit`, and the largest value.
#[rate_limit(limiter = "token_bucket", opts = [2147483647, 1, 2147483647])]
async fn bucket() -> &'static str {
    "bucket"
}

#[rate_limit(limiter = "token_bucket", opts = [20, 600, 1])]
async fn trickle() -> &'static str {
    "trickle"
}

fn app(limits: PlugLimit) -> Router {
    Router::new()
        .route("/fixed", get(fixed))
        .route("/bucket", get(bucket))
        .route("/trickle", get(trickle))
        .with_state(AppState { limits })
}

fn main() {
    let _: fn(PlugLimit) -> Router = app;
}
