//! One limit for a group of routes: `RateLimitLayer` on a nested router, with a shared scope so
//! the whole group draws on one budget per client, and the rest of the app left alone.
//!
//! Run with: `cargo run --example router_group` (limits in memory; `REDIS_URL` is not read).

use std::net::SocketAddr;

use axum::{Router, routing::get};
use plug_limit::{Limit, Opt, PlugLimit, RateLimitLayer};

/// 100 requests a minute per client, for every route under `/api` together.
struct Api;

impl Limit for Api {
    const LIMITER: &'static str = "sliding_window";
    const OPTS: &'static [Opt] = &[Opt::Int(100), Opt::Int(60)];
    const SCOPE: Option<&'static str> = Some("api");
}

fn app(limits: PlugLimit) -> Router {
    let api = Router::new()
        .route("/users", get(|| async { "users\n" }))
        .route("/orders", get(|| async { "orders\n" }))
        // `route_layer`: unmatched paths under /api answer 404 without spending the budget.
        .route_layer(RateLimitLayer::<Api>::new(limits));
    Router::new()
        .nest("/api", api)
        .route("/health", get(|| async { "ok\n" }))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 3000)).await?;
    let addr = listener.local_addr()?;
    println!("listening on http://{addr}");
    println!("try: curl -si http://{addr}/api/users; curl -si http://{addr}/health");
    let service = app(PlugLimit::memory()).into_make_service_with_connect_info::<SocketAddr>();
    axum::serve(listener, service).await?;
    Ok(())
}
