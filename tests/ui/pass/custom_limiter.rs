use axum::Router;
use axum::extract::FromRef;
use axum::routing::get;
use plug_limit::{BuildError, Limiter, PlugLimit, rate_limit};

#[derive(Clone, FromRef)]
struct AppState {
    limits: PlugLimit,
}

#[rate_limit(limiter = "quota", opts = [1000, -1, "monthly"])]
async fn upload() -> &'static str {
    "stored"
}

#[rate_limit(limiter = "always", opts = [])]
async fn free() -> &'static str {
    "free"
}

fn app(pool: deadpool_redis::Pool) -> Result<Router, BuildError> {
    let limits = PlugLimit::builder(pool)
        .limiter(
            "quota",
            Limiter::script("return {'allow', {ARGV[1]}}").headers(["x-quota"]),
        )
        .limiter("always", Limiter::script("return {'allow'}"))
        .build()?;
    Ok(Router::new()
        .route("/upload", get(upload))
        .route("/free", get(free))
        .with_state(AppState { limits }))
}

fn main() {
    let _: fn(deadpool_redis::Pool) -> Result<Router, BuildError> = app;
}
