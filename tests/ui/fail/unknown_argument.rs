use plug_limit::rate_limit;

#[rate_limit(limit = 10, opts = [10, 60])]
async fn handler() {}

fn main() {}
