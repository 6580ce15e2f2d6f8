use plug_limit::{Concurrency, FixedWindow, RateLimited};

async fn export(_limited: RateLimited<(FixedWindow<100, 60>, Concurrency<3, 600>)>) -> &'static str {
    "exported"
}

fn main() {
    let _ = axum::routing::get::<_, _, plug_limit::PlugLimit>(export);
}
