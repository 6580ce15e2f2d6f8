use plug_limit::rate_limit;

// Every attribute's mistakes are reported at once.
#[rate_limit(opts = [10, 60], cost = 0)]
#[plug_limit::rate_limit(limiter = "token_bucket", opts = [5, 60, 10])]
async fn handler() {}

fn main() {}
