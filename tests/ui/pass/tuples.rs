use axum::extract::FromRef;
use axum::http::{HeaderMap, StatusCode};
use axum::response::AppendHeaders;
use axum::routing::get;
use axum::{Json, Router};
use plug_limit::{PlugLimit, rate_limit};

#[derive(Clone, FromRef)]
struct AppState {
    limits: PlugLimit,
}

#[rate_limit(opts = [10, 60])]
async fn status_and_body() -> (StatusCode, &'static str) {
    (StatusCode::CREATED, "created")
}

#[rate_limit(opts = [10, 60])]
async fn with_headers() -> (
    StatusCode,
    HeaderMap,
    AppendHeaders<[(&'static str, &'static str); 1]>,
    Json<u8>,
) {
    (
        StatusCode::OK,
        HeaderMap::new(),
        AppendHeaders([("x-extra", "1")]),
        Json(1),
    )
}

fn app(limits: PlugLimit) -> Router {
    Router::new()
        .route("/a", get(status_and_body))
        .route("/b", get(with_headers))
        .with_state(AppState { limits })
}

fn main() {
    let _: fn(PlugLimit) -> Router = app;
}
