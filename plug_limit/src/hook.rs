//! [`Hook`]: one function that sees every result of a limiter's check and shapes its response.

use axum::response::Response;
use http::HeaderMap;

use crate::error::Error;
use crate::outcome::Outcome;

/// What one check of a limiter came to, as a [`Hook`] sees it.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum Check<'a> {
    /// The limiter allowed the request: its outcome, headers and extra values.
    Allowed(&'a Outcome),
    /// The limiter denied the request (answered from the deny cache too). In shadow mode the
    /// hook sees the would-be denial, and may set its headers, but not refuse the request.
    Denied(&'a Outcome),
    /// The limiter could not decide.
    Failed(&'a Error),
}

/// What a [`Hook`] makes of a check.
#[derive(Debug)]
#[non_exhaustive]
pub enum Action {
    /// What happens without a hook: an allowed request proceeds with the outcome's headers, a
    /// denied one gets `429 Too Many Requests` with the headers (or passes, in shadow mode), a
    /// failed one follows the [`FailurePolicy`](crate::FailurePolicy).
    Default,
    /// The request proceeds to its handler, and these headers go on its response (instead
    /// of the outcome's: start from [`Outcome::header_map`] to keep them).
    Proceed(HeaderMap),
    /// The request is answered with this response; its handler does not run.
    Respond(Response),
}

/// Sees every result of a limiter's check (allowed, denied, failed) and decides what the
/// request gets: the counterpart of the seed's `:response` function, globally
/// ([`Builder::hook`](crate::Builder::hook)) or per limiter
/// ([`Limiter::hook`](crate::Limiter::hook)). Works the same under the extractor, the layer
/// and `#[rate_limit]`.
///
/// Returning [`Action::Default`] keeps the configured behaviour, so a hook only handles the
/// cases it cares about. It runs after the decision, on the request's task: keep it quick and
/// free of I/O. Requests that never reach the limiter (disabled limits, rules, a missing key)
/// do not call it. Any `Fn(&str, Check<'_>) -> Action` is a hook; the `&str` is the limiter's
/// name.
///
/// # Example
///
/// A header from the script's extra value on allowed responses, and a script's own error
/// answered with its own status:
///
/// ```
/// use axum::response::IntoResponse;
/// use http::{HeaderValue, StatusCode};
/// use plug_limit::{redis::Value, Action, Check};
///
/// fn hook(_limiter: &str, check: Check<'_>) -> Action {
///     match check {
///         Check::Allowed(outcome) => {
///             let mut headers = outcome.header_map();
///             if let [Value::Int(credits), ..] = outcome.extra() {
///                 headers.insert("x-credits-left", HeaderValue::from(*credits));
///             }
///             Action::Proceed(headers)
///         }
///         Check::Failed(error) if error.to_string().contains("frozen") => {
///             Action::Respond((StatusCode::PAYMENT_REQUIRED, "account frozen").into_response())
///         }
///         _ => Action::Default,
///     }
/// }
/// # let _: &dyn plug_limit::Hook = &hook;
/// ```
pub trait Hook: Send + Sync + 'static {
    /// What the request gets after `limiter`'s check came to `check`.
    fn on_check(&self, limiter: &str, check: Check<'_>) -> Action;
}

impl<F> Hook for F
where
    F: Fn(&str, Check<'_>) -> Action + Send + Sync + 'static,
{
    fn on_check(&self, limiter: &str, check: Check<'_>) -> Action {
        self(limiter, check)
    }
}
