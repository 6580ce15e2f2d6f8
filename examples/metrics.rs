//! A rate-limited Axum app whose limits are counted for Prometheus, on `/metrics`.
//!
//! Run with: `cargo run --example metrics --features metrics` (plug_limit's `metrics` feature), then
//! `for i in $(seq 4); do curl -s localhost:3000/hello; done; curl -s localhost:3000/metrics`.
//!
//! The limits are kept in memory; with Redis (`PlugLimit::redis`) the same metrics also count
//! failures by cause, the circuit breaker and script reloads. It listens on `PORT` (default
//! 3000).

use std::net::SocketAddr;
use std::time::Duration;

use axum::{Router, extract::FromRef, routing::get};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use plug_limit::{FixedWindow, PlugLimit, RateLimited};

#[derive(Clone, FromRef)]
struct AppState {
    limits: PlugLimit,
    prometheus: PrometheusHandle,
}

type Hello = RateLimited<FixedWindow<3, 60>>;

async fn hello(limited: Hello) -> (Hello, &'static str) {
    (limited, "hello\n")
}

/// The Prometheus text exposition of every metric recorded so far.
async fn metrics(
    axum::extract::State(prometheus): axum::extract::State<PrometheusHandle>,
) -> String {
    prometheus.render()
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Buckets make the decision latency a Prometheus histogram (without them, a summary):
    // from 50 µs (memory) to 100 ms (a Redis timeout).
    let prometheus = PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Full("plug_limit_decision_seconds".to_owned()),
            &[0.000_05, 0.000_1, 0.000_5, 0.001, 0.005, 0.01, 0.05, 0.1],
        )?
        .install_recorder()?;
    plug_limit::metrics::describe();
    // The recorder keeps histograms in buckets of time: drain them now and then.
    let upkeep = prometheus.clone();
    tokio::spawn(async move {
        let mut every = tokio::time::interval(Duration::from_secs(5));
        loop {
            every.tick().await;
            upkeep.run_upkeep();
        }
    });

    let state = AppState {
        limits: PlugLimit::memory(),
        prometheus,
    };
    let app = Router::new()
        .route("/hello", get(hello))
        .route("/metrics", get(metrics))
        .with_state(state);
    let port = std::env::var("PORT").map_or(Ok(3000), |port| port.parse::<u16>())?;
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    println!("listening on http://{}", listener.local_addr()?);
    // The default key is the peer IP, which axum only knows with connect info.
    let service = app.into_make_service_with_connect_info::<SocketAddr>();
    axum::serve(listener, service).await?;
    Ok(())
}
