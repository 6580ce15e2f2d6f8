//! Support for the code `#[rate_limit]` expands to. Not public API: nothing here follows
//! semver, and only the macro should name it.

use axum::response::IntoResponse;

pub use axum::response::Response;
pub use http::StatusCode;
pub use http::request::Parts;
pub use inventory;

pub use crate::build::LimiterUse;
use crate::web::RateLimited;

/// Sends the handler's response with the rate-limit headers added, whatever its type, holding
/// a concurrency lease until its body ends.
pub fn respond<L, R: IntoResponse>(limited: RateLimited<L>, response: R) -> Response {
    limited.respond(response)
}
