use plug_limit::rate_limit;

#[rate_limit(opts = [10, 60], cost = 2147483648)]
async fn handler() {}

fn main() {}
