use plug_limit::rate_limit;

#[rate_limit(limiter = "calendar_quota", opts = [0, "year", 1440])]
async fn handler() {}

#[rate_limit(limiter = "calendar_quota", opts = [10, "month"])]
async fn two() {}

fn main() {}
