use plug_limit::rate_limit;

#[rate_limit(opts = [10, 60])]
async fn handler(_body: impl Send) {}

fn main() {}
