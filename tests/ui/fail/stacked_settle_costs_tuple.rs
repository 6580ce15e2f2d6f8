use plug_limit::{Limit, Opt, RateLimited};

struct Requests;

impl Limit for Requests {
    const LIMITER: &'static str = "fixed_window";
    const OPTS: &'static [Opt] = &[Opt::Int(10), Opt::Int(60)];
    const SETTLE: bool = true;
}

struct Tokens;

impl Limit for Tokens {
    const LIMITER: &'static str = "fixed_window";
    const OPTS: &'static [Opt] = &[Opt::Int(10_000), Opt::Int(60)];
    const COST: u32 = 300;
    const SCOPE: Option<&'static str> = Some("tokens");
    const SETTLE: bool = true;
}

async fn complete(limited: RateLimited<(Requests, Tokens)>) -> (RateLimited<(Requests, Tokens)>, &'static str) {
    (limited, "done")
}

fn main() {
    let _ = axum::routing::get::<_, _, plug_limit::PlugLimit>(complete);
}
