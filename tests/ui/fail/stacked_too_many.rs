use plug_limit::rate_limit;

#[rate_limit(opts = [1, 1])]
#[rate_limit(opts = [2, 2])]
#[rate_limit(opts = [3, 3])]
#[rate_limit(opts = [4, 4])]
#[rate_limit(opts = [5, 5])]
#[rate_limit(opts = [6, 6])]
#[rate_limit(opts = [7, 7])]
async fn handler() {}

fn main() {}
