use plug_limit::rate_limit;

#[rate_limit(opts = [10, 60])]
fn handler() -> &'static str {
    "sync"
}

fn main() {}
