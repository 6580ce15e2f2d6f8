use plug_limit::rate_limit;

// Independent mistakes are reported together.
#[rate_limit(limiter = "token_bucket", opts = [0, 60, 5], scope = "", bogus = 1)]
fn handler<T>() {}

fn main() {}
