use plug_limit::rate_limit;

#[rate_limit(limiter = "gcra", opts = [5, 60, 10])]
async fn handler() {}

fn main() {}
