//! A rate-limited Axum app: 20 requests per 10 minutes with bursts of 5, per client IP.
//!
//! Run with: `REDIS_URL=redis://127.0.0.1:6379/ cargo run --example quickstart`
//!
//! Without `REDIS_URL` it keeps its limits in memory (one instance), and says so. It listens on
//! `PORT` (default 3000), or on the port given as its first argument, and prints what to curl.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use axum::{Router, extract::FromRef, routing::get};
use deadpool_redis::{Config, Pool, Runtime};
use plug_limit::{PlugLimit, RateLimited, TokenBucket};

#[derive(Clone, FromRef)]
struct AppState {
    limits: PlugLimit,
}

type Expensive = RateLimited<TokenBucket<20, 600, 5>>;

async fn expensive(limited: Expensive) -> (Expensive, &'static str) {
    (limited, "done\n")
}

async fn free() -> &'static str {
    "no limit here\n"
}

/// Checks that Redis answers before serving, so a wrong URL is a clear message at start-up.
async fn ping(pool: &Pool) -> Result<(), String> {
    let ping = async {
        let mut conn = pool.get().await.map_err(|e| e.to_string())?;
        deadpool_redis::redis::cmd("PING")
            .query_async::<String>(&mut conn)
            .await
            .map_err(|e| e.to_string())
    };
    match tokio::time::timeout(Duration::from_secs(2), ping).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(error)) => Err(error),
        Err(_) => Err("no answer within 2 s".to_owned()),
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{error}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let (limits, store) = match std::env::var("REDIS_URL") {
        Ok(url) => {
            let pool = Config::from_url(url.as_str()).create_pool(Some(Runtime::Tokio1))?;
            if let Err(error) = ping(&pool).await {
                return Err(format!(
                    "cannot reach Redis at {url}: {error}\n\
                     start one (`redis-server`), point REDIS_URL at yours, \
                     or unset it to keep limits in memory"
                )
                .into());
            }
            (PlugLimit::redis(pool), format!("limits in Redis at {url}"))
        }
        Err(_) => (
            PlugLimit::memory(),
            "REDIS_URL is unset: limits in this process's memory".to_owned(),
        ),
    };

    let app = Router::new()
        .route("/expensive", get(expensive))
        .route("/free", get(free))
        .with_state(AppState { limits });

    let port = std::env::args()
        .nth(1)
        .or_else(|| std::env::var("PORT").ok())
        .map_or(Ok(3000), |port| port.parse::<u16>())
        .map_err(|error| format!("the port must be a number from 0 to 65535: {error}"))?;
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    let addr = listener.local_addr()?;
    println!("listening on http://{addr} ({store})");
    println!("try: for i in $(seq 7); do curl -si http://{addr}/expensive | head -n 6; done");
    // The default key is the peer IP, which axum only knows with connect info.
    let service = app.into_make_service_with_connect_info::<SocketAddr>();
    axum::serve(listener, service).await?;
    Ok(())
}
