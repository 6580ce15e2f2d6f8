use plug_limit::rate_limit;

struct PlanLimits;

#[rate_limit(resolver = PlanLimits, limiter = "token_bucket", opts = [20, 600, 5], cost = 2)]
async fn handler() {}

fn main() {}
