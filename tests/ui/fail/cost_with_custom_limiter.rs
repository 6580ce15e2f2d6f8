use plug_limit::rate_limit;

#[rate_limit(limiter = "quota", opts = [1000, "monthly"], cost = 5)]
async fn handler() {}

fn main() {}
