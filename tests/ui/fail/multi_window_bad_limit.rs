use plug_limit::rate_limit;

#[rate_limit(limiter = "multi_window", opts = ["5/3600", "10 per minute"])]
async fn handler() {}

fn main() {}
