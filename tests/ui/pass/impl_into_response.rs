use axum::Router;
use axum::extract::FromRef;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use plug_limit::{PlugLimit, rate_limit};

#[derive(Clone, FromRef)]
struct AppState {
    limits: PlugLimit,
}

#[rate_limit(opts = [10, 60])]
async fn opaque() -> impl IntoResponse {
    (StatusCode::ACCEPTED, "queued")
}

#[rate_limit(opts = [10, 60])]
async fn opaque_result(ok: axum::extract::Query<bool>) -> Result<impl IntoResponse, StatusCode> {
    if ok.0 {
        Ok("fine")
    } else {
        Err(StatusCode::BAD_REQUEST)
    }
}

fn app(limits: PlugLimit) -> Router {
    Router::new()
        .route("/", get(opaque))
        .route("/result", get(opaque_result))
        .with_state(AppState { limits })
}

fn main() {
    let _: fn(PlugLimit) -> Router = app;
}
