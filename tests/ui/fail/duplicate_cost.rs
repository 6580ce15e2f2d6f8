use plug_limit::rate_limit;

#[rate_limit(opts = [10, 60], cost = 2, cost = 3)]
async fn handler() {}

fn main() {}
