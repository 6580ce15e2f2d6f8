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

#[rate_limit(limiter = "sliding_window", opts = [100, 60])]
async fn sliding() -> &'static str {
    "sliding"
}

#[rate_limit(limiter = "sliding_log", opts = [2147483647, 2147483647])]
async fn logged() -> &'static str {
    "logged"
}

// The largest `limit * window` the script accepts: 12907 * 697853820 = 9007199254740.
#[rate_limit(limiter = "leaky_bucket", opts = [12907, 697853820])]
async fn leaky() -> &'static str {
    "leaky"
}

#[rate_limit(limiter = "gcra", opts = [20, 60, 20])]
async fn paced() -> &'static str {
    "paced"
}

#[rate_limit(limiter = "gcra", opts = [20, 60, 1])]
async fn evenly() -> &'static str {
    "evenly"
}

#[rate_limit(limiter = "multi_window", opts = ["1/5"])]
async fn one_window() -> &'static str {
    "one window"
}

#[rate_limit(limiter = "multi_window", opts = ["1/5", "100/3600", "2147483647/2147483647"])]
async fn windows() -> &'static str {
    "windows"
}

// Calendar quotas: either side of UTC, at the offset's extremes.
#[rate_limit(limiter = "calendar_quota", opts = [10000, "month", -300])]
async fn monthly() -> &'static str {
    "monthly"
}

#[rate_limit(limiter = "calendar_quota", opts = [500, "week", 1439], cost = 5)]
async fn weekly() -> &'static str {
    "weekly"
}

#[rate_limit(limiter = "calendar_quota", opts = [1, "day", -1439])]
async fn daily() -> &'static str {
    "daily"
}

fn app(limits: PlugLimit) -> Router {
    Router::new()
        .route("/fixed", get(fixed))
        .route("/bucket", get(bucket))
        .route("/trickle", get(trickle))
        .route("/sliding", get(sliding))
        .route("/logged", get(logged))
        .route("/leaky", get(leaky))
        .route("/paced", get(paced))
        .route("/evenly", get(evenly))
        .route("/one-window", get(one_window))
        .route("/windows", get(windows))
        .route("/monthly", get(monthly))
        .route("/weekly", get(weekly))
        .route("/daily", get(daily))
        .with_state(AppState { limits })
}

fn main() {
    let _: fn(PlugLimit) -> Router = app;
}
