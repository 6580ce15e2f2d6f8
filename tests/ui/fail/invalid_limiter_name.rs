use plug_limit::rate_limit;

#[rate_limit(limiter = "my quota", opts = [10])]
async fn handler() {}

fn main() {}
