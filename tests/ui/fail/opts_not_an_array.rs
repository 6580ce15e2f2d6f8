use plug_limit::rate_limit;

#[rate_limit(opts = 10)]
async fn handler() {}

fn main() {}
