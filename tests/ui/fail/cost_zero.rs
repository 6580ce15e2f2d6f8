use plug_limit::rate_limit;

#[rate_limit(opts = [10, 60], cost = 0)]
async fn handler() {}

fn main() {}
