use plug_limit::rate_limit;

#[rate_limit(limiter = "concurrency", opts = [3, 600])]
#[rate_limit(opts = [100, 60])]
async fn export() -> &'static str {
    "exported"
}

fn main() {}
