use plug_limit::rate_limit;

#[rate_limit(opts = [10, 60], scope = "")]
async fn handler() {}

fn main() {}
