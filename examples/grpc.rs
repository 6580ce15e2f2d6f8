//! gRPC with the same budgets: an axum app and a tonic service (tonic-health's `Health`) under
//! one limit, 5 requests a minute per client IP, spent by HTTP requests and gRPC calls alike.
//!
//! Run with: `cargo run --example grpc --features grpc` (limits in memory; `REDIS_URL` is not read). It serves
//! HTTP on port 3000 and gRPC on 50051, then calls both itself and prints what each got: the
//! sixth answer, whichever protocol asks, is refused (`429` over HTTP, `RESOURCE_EXHAUSTED`
//! over gRPC). The `tonic` feature of plug_limit lets the default key find the peer address of
//! a gRPC call.

use std::net::SocketAddr;

use axum::{Router, routing::get};
use plug_limit::{Limit, Opt, PlugLimit, RateLimitLayer};
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Channel, Server};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

/// 5 a minute per client IP (the default key), for every route and method that names the scope
/// `api`.
struct Api;

impl Limit for Api {
    const LIMITER: &'static str = "fixed_window";
    const OPTS: &'static [Opt] = &[Opt::Int(5), Opt::Int(60)];
    const SCOPE: Option<&'static str> = Some("api");
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let limits = PlugLimit::memory();

    let app = Router::new()
        .route("/status", get(|| async { "serving\n" }))
        .route_layer(RateLimitLayer::<Api>::new(limits.clone()));
    let http = tokio::net::TcpListener::bind(("127.0.0.1", 3000)).await?;
    let http_addr = http.local_addr()?;
    let service = app.into_make_service_with_connect_info::<SocketAddr>();
    tokio::spawn(async move { axum::serve(http, service).await });

    // The same layer around the tonic server: the one budget, answered in gRPC's terms.
    let (_reporter, health) = tonic_health::server::health_reporter();
    let grpc = tokio::net::TcpListener::bind(("127.0.0.1", 50051)).await?;
    let grpc_addr = grpc.local_addr()?;
    let server = Server::builder()
        .layer(RateLimitLayer::<Api>::new(limits))
        .add_service(health)
        .serve_with_incoming(TcpIncoming::from(grpc));
    tokio::spawn(server);
    println!("HTTP on http://{http_addr}, gRPC on {grpc_addr}");

    let channel = Channel::from_shared(format!("http://{grpc_addr}"))?
        .connect()
        .await?;
    let mut client = HealthClient::new(channel);
    for turn in 1..=6 {
        if turn % 2 == 1 {
            let mut stream = tokio::net::TcpStream::connect(http_addr).await?;
            let status = http_get(&mut stream).await?;
            println!("{turn}. HTTP GET /status: {status}");
        } else {
            let call = client.check(HealthCheckRequest::default()).await;
            match call {
                Ok(response) => {
                    let left = response.metadata().get("x-ratelimit-remaining");
                    println!("{turn}. gRPC Check: OK, remaining {left:?}");
                }
                Err(status) => println!(
                    "{turn}. gRPC Check: {:?} {:?}, retry-after {:?}",
                    status.code(),
                    status.message(),
                    status.metadata().get("retry-after"),
                ),
            }
        }
    }
    Ok(())
}

/// `GET /status` over `stream`, by hand (one request, then the server closes): its status line
/// and rate-limit headers.
async fn http_get(stream: &mut tokio::net::TcpStream) -> std::io::Result<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    stream
        .write_all(b"GET /status HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n")
        .await?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply).await?;
    let lines = reply
        .lines()
        .filter(|line| line.starts_with("HTTP/") || line.starts_with("x-ratelimit-remaining"));
    Ok(lines.collect::<Vec<_>>().join(", "))
}
