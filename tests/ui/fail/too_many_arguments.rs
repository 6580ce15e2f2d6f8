use axum::http::{HeaderMap, Method, Uri, Version};
use plug_limit::rate_limit;

// axum's handlers take at most 16 extractors, and the rate limit is one of them.
#[rate_limit(opts = [10, 60])]
async fn handler(
    _1: Method, _2: Uri, _3: Version, _4: HeaderMap,
    _5: Method, _6: Uri, _7: Version, _8: HeaderMap,
    _9: Method, _10: Uri, _11: Version, _12: HeaderMap,
    _13: Method, _14: Uri, _15: Version, _16: HeaderMap,
) {}

fn main() {}
