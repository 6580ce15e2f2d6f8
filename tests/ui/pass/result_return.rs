use axum::extract::{FromRef, Path};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use plug_limit::{PlugLimit, rate_limit};

#[derive(Clone, FromRef)]
struct AppState {
    limits: PlugLimit,
}

struct AppError(&'static str);

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        (StatusCode::INTERNAL_SERVER_ERROR, self.0).into_response()
    }
}

impl From<std::num::ParseIntError> for AppError {
    fn from(_: std::num::ParseIntError) -> Self {
        Self("not a number")
    }
}

// `?` converts through `From` into the declared error type, and `return` leaves the body
// early, exactly as without the attribute.
#[rate_limit(opts = [10, 60])]
async fn parse(Path(text): Path<String>) -> Result<Json<i64>, AppError> {
    let n: i64 = text.parse()?;
    if n < 0 {
        return Err(AppError("negative"));
    }
    Ok(Json(n))
}

fn app(limits: PlugLimit) -> Router {
    Router::new()
        .route("/parse/{text}", get(parse))
        .with_state(AppState { limits })
}

fn main() {
    let _: fn(PlugLimit) -> Router = app;
}
