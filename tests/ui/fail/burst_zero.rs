use plug_limit::rate_limit;

#[rate_limit(limiter = "token_bucket", opts = [5, 60, 0])]
async fn handler() {}

fn main() {}
