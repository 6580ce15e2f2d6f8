use plug_limit::rate_limit;

#[rate_limit(limiter = "multi_window", opts = [])]
async fn handler() {}

fn main() {}
