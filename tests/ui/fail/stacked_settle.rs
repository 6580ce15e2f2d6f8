use axum::http::StatusCode;
use plug_limit::rate_limit;

fn failed(status: StatusCode) -> bool {
    status.is_client_error()
}

#[rate_limit(opts = [5, 900], count_if = failed)]
#[rate_limit(opts = [100, 60])]
async fn login() -> &'static str {
    "welcome"
}

fn main() {}
