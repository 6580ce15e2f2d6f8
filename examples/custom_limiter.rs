//! A custom Lua limiter with its own header names and its own hook: a daily quota per
//! API key, answered with a JSON body when it runs out.
//!
//! Custom scripts run in Redis: `REDIS_URL=redis://127.0.0.1:6379/ cargo run --example
//! custom_limiter`, then `curl -si -H 'x-api-key: k1' http://127.0.0.1:3000/report` (the quota
//! is 3 a day).

use std::net::SocketAddr;
use std::process::ExitCode;

use axum::response::{IntoResponse, Response};
use axum::{Json, Router, extract::FromRef, routing::get};
use deadpool_redis::Runtime;
use http::StatusCode;
use plug_limit::redis::Value;
use plug_limit::{Action, Check, Limit, Limiter, Opt, Outcome, PlugLimit, RateLimited, key};

#[derive(Clone, FromRef)]
struct AppState {
    limits: PlugLimit,
}

/// Three reports a day per API key, counted by the `daily_quota` script.
struct DailyReports;

impl Limit for DailyReports {
    const LIMITER: &'static str = "daily_quota";
    const OPTS: &'static [Opt] = &[Opt::Int(3), Opt::Int(86_400)];
    const SCOPE: Option<&'static str> = Some("reports");
}

async fn report(limited: RateLimited<DailyReports>) -> (RateLimited<DailyReports>, &'static str) {
    (limited, "your report\n")
}

/// The quota's own refusal: `429` with a JSON body built from the script's extra value.
fn quota_exhausted(outcome: &Outcome) -> Response {
    let used = match outcome.extra().first() {
        Some(Value::Int(used)) => *used,
        _ => 0,
    };
    let body = serde_json::json!({ "error": "daily quota used up", "used": used });
    (StatusCode::TOO_MANY_REQUESTS, outcome.clone(), Json(body)).into_response()
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
    let url = std::env::var("REDIS_URL")
        .map_err(|_| "custom scripts run in Redis: set REDIS_URL, e.g. redis://127.0.0.1:6379/")?;
    let pool = deadpool_redis::Config::from_url(url).create_pool(Some(Runtime::Tokio1))?;
    let limits = PlugLimit::builder(pool)
        .limiter(
            "daily_quota",
            Limiter::script(include_str!("lua/daily_quota.lua"))
                .headers(["x-quota-limit", "x-quota-remaining"])
                .key(key::header("x-api-key"))
                .hook(|_: &str, check: Check<'_>| match check {
                    Check::Denied(outcome) => Action::Respond(quota_exhausted(outcome)),
                    _ => Action::Default,
                }),
        )
        .build()?;
    let app = Router::new()
        .route("/report", get(report))
        .with_state(AppState { limits });

    let port = std::env::var("PORT").map_or(Ok(3000), |port| port.parse::<u16>())?;
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    let addr = listener.local_addr()?;
    println!("listening on http://{addr}");
    println!("try: for i in 1 2 3 4; do curl -si -H 'x-api-key: k1' http://{addr}/report; done");
    let service = app.into_make_service_with_connect_info::<SocketAddr>();
    axum::serve(listener, service).await?;
    Ok(())
}
