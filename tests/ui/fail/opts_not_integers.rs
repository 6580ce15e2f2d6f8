use plug_limit::rate_limit;

const LIMIT: u32 = 10;

#[rate_limit(opts = [LIMIT, "60"])]
async fn handler() {}

fn main() {}
