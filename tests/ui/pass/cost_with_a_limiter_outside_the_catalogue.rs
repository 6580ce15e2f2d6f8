// A name outside the catalogue may be a built-in registered under a name of its own
// (`Limiter::fixed_window()` as "quota"): the attribute takes a cost for it, and
// `Builder::build` refuses the cost for a custom script.
use plug_limit::rate_limit;

#[rate_limit(limiter = "quota", opts = [1000, "monthly"], cost = 5)]
async fn handler() {}

fn main() {}
