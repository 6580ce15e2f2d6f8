//! Where a request meets a limit: the extractor [`RateLimited`] (`extract.rs`), and two tower
//! middlewares, each a folder of a layer and its service: [`RateLimitLayer`] (`rate_limit/`)
//! and [`SendHeadersLayer`] (`send_headers/`).

mod extract;
mod rate_limit;
mod send_headers;

pub use self::extract::RateLimited;
pub use self::rate_limit::{RateLimit, RateLimitLayer};
pub use self::send_headers::{SendHeaders, SendHeadersLayer};
