use plug_limit::{Usage, key, rate_limit};

// Requests and tokens: one report would charge both the same number.
#[rate_limit(opts = [10, 60], settle)]
#[rate_limit(opts = [10_000, 60], cost = 300, settle, key = key::global(), scope = "everyone")]
async fn complete(axum::Extension(usage): axum::Extension<Usage>) -> &'static str {
    usage.set(120);
    "done"
}

fn main() {}
