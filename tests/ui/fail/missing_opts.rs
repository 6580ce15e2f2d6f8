use plug_limit::rate_limit;

#[rate_limit(limiter = "token_bucket")]
async fn handler() {}

fn main() {}
