use axum::{Router, extract::FromRef, routing::get};
use plug_limit::{PlugLimit, key, rate_limit};

#[derive(Clone, FromRef)]
struct AppState {
    limits: PlugLimit,
}

// Per client, per tenant and for everyone: three limits, one check.
#[rate_limit(limiter = "token_bucket", opts = [10, 1, 5])]
#[plug_limit::rate_limit(opts = [1000, 86400], key = key::header("x-tenant"), scope = "tenant")]
#[rate_limit(opts = [5000, 60], key = key::global(), scope = "everyone")]
async fn search(query: String) -> String {
    query
}

fn main() {
    let _app: Router<AppState> = Router::new().route("/search", get(search));
}
