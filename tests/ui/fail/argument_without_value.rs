use plug_limit::rate_limit;

#[rate_limit(opts)]
async fn handler() {}

fn main() {}
