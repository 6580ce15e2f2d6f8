//! Where a request meets a limit: the extractor [`RateLimited`], the layer
//! [`RateLimitLayer`] (typed limits in `layer.rs`, limits made or chosen at run time in
//! `runtime_layer.rs`), a refusal in gRPC's terms (`grpc.rs`), and [`SendHeadersLayer`].

pub(crate) mod extract;
pub(crate) mod grpc;
pub(crate) mod layer;
mod resolver;
pub(crate) mod runtime_layer;
pub(crate) mod send_headers;

pub use self::extract::RateLimited;
pub use self::layer::{RateLimit, RateLimitLayer};
pub use self::send_headers::{SendHeaders, SendHeadersLayer};
