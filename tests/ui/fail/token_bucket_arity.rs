use plug_limit::rate_limit;

#[rate_limit(limiter = "token_bucket", opts = [20, 600])]
async fn handler() {}

fn main() {}
