use plug_limit::rate_limit;

#[rate_limit(limiter = "leaky_bucket", opts = [1000000000, 10000])]
async fn handler() {}

fn main() {}
