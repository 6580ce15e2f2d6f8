//! Per-plan limits keyed by API key, anonymous clients by IP: the limit is chosen per request
//! by a resolver over `RateLimitLayer`.
//!
//! Run with: `cargo run --example api_tiers` (limits in memory), then
//! `curl -si -H 'x-api-key: key-pro-1' http://127.0.0.1:3000/api` (1,000 a minute),
//! `curl -si -H 'x-api-key: key-free-1' http://127.0.0.1:3000/api` (60 a minute), or without
//! a known key (10 a minute per IP).
//!
//! Only a key the accounts know gets a plan, keyed by that key: were any `x-api-key` keyed as
//! sent, a client could send a new one with each request and never run out.

use std::collections::HashMap;
use std::net::SocketAddr;

use axum::{Router, routing::get};
use http::request::Parts;
use plug_limit::{BuildError, PlugLimit, RateLimitLayer, RuntimeLimit, key};

/// A plan's limit, keyed by the API key: every key has a budget of its own.
fn plan(limit: u32, burst: u32) -> Result<RuntimeLimit, BuildError> {
    Ok(RuntimeLimit::new("token_bucket", [limit, 60, burst])?
        .scope("api")
        .key(key::header("x-api-key")))
}

/// Each known API key's plan; in an app, a lookup in a cache of the accounts table.
fn accounts() -> Result<HashMap<&'static str, RuntimeLimit>, BuildError> {
    let (pro, free) = (plan(1000, 100)?, plan(60, 10)?);
    Ok(HashMap::from([("key-pro-1", pro), ("key-free-1", free)]))
}

fn resolver(
    accounts: HashMap<&'static str, RuntimeLimit>,
    anonymous: RuntimeLimit,
) -> impl Fn(&Parts) -> Option<RuntimeLimit> + Send + Sync + 'static {
    move |parts| {
        let known = parts
            .headers
            .get("x-api-key")
            .and_then(|key| key.to_str().ok())
            .and_then(|key| accounts.get(key));
        // An unknown key is no key: the client's IP budget, never a fresh one per key sent.
        Some(known.unwrap_or(&anonymous).clone())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Without a key: 10 a minute per client IP (the default key), in a budget of its own.
    let anonymous = RuntimeLimit::new("fixed_window", [10, 60])?.scope("api-anonymous");
    let layer = RateLimitLayer::resolve(PlugLimit::memory(), resolver(accounts()?, anonymous));
    let app = Router::new()
        .route("/api", get(|| async { "ok\n" }))
        .route_layer(layer);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 3000)).await?;
    let addr = listener.local_addr()?;
    println!("listening on http://{addr}");
    println!("try: curl -si -H 'x-api-key: key-pro-1' http://{addr}/api");
    let service = app.into_make_service_with_connect_info::<SocketAddr>();
    axum::serve(listener, service).await?;
    Ok(())
}
