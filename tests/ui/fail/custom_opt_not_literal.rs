use plug_limit::rate_limit;

#[rate_limit(limiter = "quota", opts = [10, 1.5, true])]
async fn handler() {}

fn main() {}
