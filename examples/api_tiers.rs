//! Per-plan limits keyed by API key, anonymous clients by IP: the limit is chosen per request
//! by a resolver over `RuntimeLimitLayer`.
//!
//! Run with: `cargo run --example api_tiers` (limits in memory), then
//! `curl -si -H 'x-api-key: pro_k1' http://127.0.0.1:3000/api` (1,000 a minute),
//! `curl -si -H 'x-api-key: k2' http://127.0.0.1:3000/api` (60 a minute), or without a key
//! (10 a minute per IP).

use std::collections::HashMap;
use std::net::SocketAddr;

use axum::{Router, routing::get};
use http::request::Parts;
use plug_limit::{BuildError, PlugLimit, RuntimeLimit, RuntimeLimitLayer, key};

/// A plan's limit, keyed by the API key: every key has a budget of its own.
fn plan(limit: u32, burst: u32) -> Result<RuntimeLimit, BuildError> {
    Ok(RuntimeLimit::new("token_bucket", [limit, 60, burst])?
        .scope("api")
        .key(key::header("x-api-key")))
}

/// The plans, by API key prefix; in an app, a lookup in a cache of the accounts table.
fn plans() -> Result<HashMap<&'static str, RuntimeLimit>, BuildError> {
    Ok(HashMap::from([
        ("pro", plan(1000, 100)?),
        ("free", plan(60, 10)?),
    ]))
}

fn resolver(
    plans: HashMap<&'static str, RuntimeLimit>,
    anonymous: RuntimeLimit,
) -> impl Fn(&Parts) -> Option<RuntimeLimit> + Send + Sync + 'static {
    move |parts| {
        let Some(api_key) = parts.headers.get("x-api-key") else {
            return Some(anonymous.clone());
        };
        let tier = if api_key.as_bytes().starts_with(b"pro_") {
            "pro"
        } else {
            "free"
        };
        plans.get(tier).cloned()
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Without a key: 10 a minute per client IP (the default key), in a budget of its own.
    let anonymous = RuntimeLimit::new("fixed_window", [10, 60])?.scope("api-anonymous");
    let layer = RuntimeLimitLayer::resolve(PlugLimit::memory(), resolver(plans()?, anonymous));
    let app = Router::new()
        .route("/api", get(|| async { "ok\n" }))
        .route_layer(layer);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 3000)).await?;
    let addr = listener.local_addr()?;
    println!("listening on http://{addr}");
    println!("try: curl -si -H 'x-api-key: pro_k1' http://{addr}/api");
    let service = app.into_make_service_with_connect_info::<SocketAddr>();
    axum::serve(listener, service).await?;
    Ok(())
}
