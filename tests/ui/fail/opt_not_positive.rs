use plug_limit::rate_limit;

#[rate_limit(opts = [0, -60])]
async fn handler() {}

fn main() {}
