use plug_limit::rate_limit;

#[rate_limit(opts = [10, 60], skip = |parts| parts.uri.path() == "/health")]
async fn handler() {}

fn main() {}
