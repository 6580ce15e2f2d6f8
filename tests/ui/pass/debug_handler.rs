use axum::Router;
use axum::debug_handler;
use axum::extract::{FromRef, State};
use axum::routing::get;
use plug_limit::{PlugLimit, rate_limit};

#[derive(Clone, FromRef)]
struct AppState {
    limits: PlugLimit,
    name: String,
}

// `#[rate_limit]` goes first, so that `debug_handler` checks the handler axum will call.
#[rate_limit(opts = [10, 60])]
#[debug_handler]
async fn inferred(State(state): State<AppState>) -> String {
    state.name
}

// Without a `State` argument the state cannot be inferred; the rate limit needs it.
#[rate_limit(limiter = "token_bucket", opts = [20, 600, 5])]
#[debug_handler(state = AppState)]
async fn named() -> &'static str {
    "named"
}

fn app(state: AppState) -> Router {
    Router::new()
        .route("/inferred", get(inferred))
        .route("/named", get(named))
        .with_state(state)
}

fn main() {
    let _: fn(AppState) -> Router = app;
}
