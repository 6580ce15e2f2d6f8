use plug_limit::rate_limit;

struct Plans;

#[rate_limit(opts = [10, 60])]
#[rate_limit(resolver = Plans)]
async fn handler() {}

fn main() {}
