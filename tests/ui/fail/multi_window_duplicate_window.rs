use plug_limit::rate_limit;

#[rate_limit(limiter = "multi_window", opts = ["1/60", "5/3600", "10/60"])]
async fn handler() {}

fn main() {}
