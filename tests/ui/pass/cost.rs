use axum::Router;
use axum::extract::FromRef;
use axum::routing::get;
use plug_limit::{PlugLimit, key, rate_limit};

#[derive(Clone, FromRef)]
struct AppState {
    limits: PlugLimit,
}

#[rate_limit(opts = [10, 60], cost = 3)]
async fn fixed() {}

#[rate_limit(limiter = "token_bucket", opts = [20, 600, 5], cost = 2)]
async fn bucket() {}

#[rate_limit(limiter = "sliding_window", opts = [10, 60], cost = 1)]
async fn sliding() {}

#[rate_limit(limiter = "sliding_log", opts = [10, 60], cost = 10)]
async fn logged() {}

#[rate_limit(limiter = "leaky_bucket", opts = [10, 60], cost = 4)]
async fn leaky() {}

#[rate_limit(limiter = "gcra", opts = [10, 60, 5], cost = 5)]
async fn paced() {}

#[rate_limit(limiter = "multi_window", opts = ["2/60", "5/3600"], cost = 2)]
async fn windows() {}

// Any position, with every other argument, and the largest cost the scripts accept.
#[rate_limit(
    cost = 2147483647,
    scope = "bulk",
    key = key::global(),
    opts = [2147483647, 60],
    limiter = "fixed_window",
)]
async fn bulk() {}

fn app(limits: PlugLimit) -> Router {
    Router::new()
        .route("/fixed", get(fixed))
        .route("/bucket", get(bucket))
        .route("/sliding", get(sliding))
        .route("/logged", get(logged))
        .route("/leaky", get(leaky))
        .route("/paced", get(paced))
        .route("/windows", get(windows))
        .route("/bulk", get(bulk))
        .with_state(AppState { limits })
}

fn main() {
    let _: fn(PlugLimit) -> Router = app;
}
