use plug_limit::rate_limit;

#[rate_limit(opts = [10, 60], opts = [20, 60])]
async fn handler() {}

fn main() {}
