use axum::extract::State;
use plug_limit::rate_limit;

#[rate_limit(opts = [10, 60])]
async fn handler<S>(State(_state): State<S>) {}

fn main() {}
