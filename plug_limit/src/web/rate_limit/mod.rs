//! [`RateLimitLayer`] and its service, [`RateLimit`]: limits as tower middleware. The layer
//! of typed limits (`layer.rs`) and its service (`service.rs`); limits made or chosen at run
//! time (`runtime.rs`, by a `Resolver`, `resolver.rs`); a refusal in gRPC's terms
//! (`grpc.rs`).

mod grpc;
mod layer;
mod resolver;
mod runtime;
mod service;

pub use self::layer::RateLimitLayer;
pub use self::service::RateLimit;
