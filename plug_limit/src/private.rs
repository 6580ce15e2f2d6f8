//! Support for the code `#[rate_limit]` expands to. Not public API: nothing here follows
//! semver, and only the macro should name it.

use axum::response::IntoResponse;

pub use axum::response::Response;
pub use inventory;

use crate::{BuildError, RateLimited, builtin};

/// Sends the handler's response with the rate-limit headers added, whatever its type.
pub fn respond<L, R: IntoResponse>(limited: RateLimited<L>, response: R) -> Response {
    (limited, response).into_response()
}

/// A `#[rate_limit]` handler naming a limiter that is not built in. Every such handler submits
/// one, so a [`PlugLimit`](crate::PlugLimit) missing the limiter is refused when it is built
/// rather than at the handler's first request.
#[derive(Debug)]
pub struct LimiterUse {
    /// The limiter's name.
    pub limiter: &'static str,
    /// The handler's path, e.g. `app::routes::login`.
    pub handler: &'static str,
}

inventory::collect!(LimiterUse);

/// The first handler in this program (by limiter name, then handler path, so the error is the
/// same on every run) whose limiter `is_registered` does not know.
pub(crate) fn check_limiters(is_registered: impl Fn(&str) -> bool) -> Result<(), BuildError> {
    let missing = inventory::iter::<LimiterUse>
        .into_iter()
        .filter(|used| !is_registered(used.limiter))
        .min_by_key(|used| (used.limiter, used.handler));
    match missing {
        None => Ok(()),
        Some(used) => Err(BuildError::invalid(
            format!("limiters.{}", used.limiter),
            format!(
                "handler `{}` uses limiter `{}`, which is not registered",
                used.handler, used.limiter
            ),
        )),
    }
}

/// Panics unless every `#[rate_limit]` handler in this program uses a built-in limiter: the
/// check of [`PlugLimit::redis`](crate::PlugLimit::redis), which has no error to return.
#[track_caller]
pub(crate) fn assert_builtin_limiters() {
    if let Err(error) = check_limiters(|name| builtin::ALL.iter().any(|b| b.name == name)) {
        panic!("{error}");
    }
}
