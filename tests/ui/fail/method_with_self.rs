use plug_limit::rate_limit;

struct Api;

impl Api {
    #[rate_limit(opts = [10, 60])]
    async fn handler(&self) {}
}

fn main() {}
