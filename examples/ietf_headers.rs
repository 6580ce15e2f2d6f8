//! The IETF draft-10 header fields, `RateLimit-Policy` and `RateLimit`, on an app keeping its
//! limits in memory: 3 requests a minute per client IP on `/fixed`, and two windows at once on
//! `/multi`.
//!
//! Run with: `cargo run --example ietf_headers` (`PORT` defaults to 3000), then curl
//! `/fixed` four times: the fourth answer is a 429 whose `ratelimit` says `r=0`.
//!
//! The `pk` secret comes from `PLUG_LIMIT_PK_SECRET` (at least 16 bytes), as every instance of
//! a real deployment would share it; without it, this process draws its own.

use std::net::SocketAddr;

use axum::{Router, extract::FromRef, routing::get};
use plug_limit::{FixedWindow, HeaderStyle, Limit, Opt, PlugLimit, RateLimited, Store};

#[derive(Clone, FromRef)]
struct AppState {
    limits: PlugLimit,
}

type Fixed = RateLimited<FixedWindow<3, 60>>;

/// 2 requests per 10 s and 5 per minute, consumed together.
struct TwoWindows;

impl Limit for TwoWindows {
    const LIMITER: &'static str = "multi_window";
    const OPTS: &'static [Opt] = &[Opt::Str("2/10"), Opt::Str("5/60")];
}

async fn fixed(limited: Fixed) -> (Fixed, &'static str) {
    (limited, "fixed\n")
}

async fn multi(limited: RateLimited<TwoWindows>) -> (RateLimited<TwoWindows>, &'static str) {
    (limited, "multi\n")
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut builder = PlugLimit::builder(Store::memory()).header_style(HeaderStyle::Draft10);
    if let Ok(secret) = std::env::var("PLUG_LIMIT_PK_SECRET") {
        builder = builder.partition_key_secret(secret);
    }
    let app = Router::new()
        .route("/fixed", get(fixed))
        .route("/multi", get(multi))
        .with_state(AppState {
            limits: builder.build()?,
        });

    let port = std::env::var("PORT").map_or(Ok(3000), |port| port.parse::<u16>())?;
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    let addr = listener.local_addr()?;
    println!("listening on http://{addr}");
    println!(
        "try: for i in $(seq 4); do curl -si http://{addr}/fixed | grep -i -e ^http -e ratelimit -e retry; done"
    );
    // The default key is the peer IP, which axum only knows with connect info.
    let service = app.into_make_service_with_connect_info::<SocketAddr>();
    axum::serve(listener, service).await?;
    Ok(())
}
