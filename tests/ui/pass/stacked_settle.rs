use axum::http::StatusCode;
use plug_limit::{Usage, key, rate_limit};

fn failed(status: StatusCode) -> bool {
    status.is_client_error()
}

// Failed logins per client, and every login for everyone.
#[rate_limit(opts = [5, 900], count_if = failed)]
#[rate_limit(opts = [100, 60], key = key::global(), scope = "everyone")]
async fn login() -> &'static str {
    "welcome"
}

// Tokens per client and for everyone, both reserved on an estimate and settled to what was used.
#[rate_limit(opts = [10_000, 60], cost = 500, settle)]
#[rate_limit(opts = [1_000_000, 60], cost = 500, settle, key = key::global(), scope = "everyone")]
async fn complete(axum::Extension(usage): axum::Extension<Usage>) -> &'static str {
    usage.set(120);
    "done"
}

fn main() {
    let _ = (login, complete);
}
