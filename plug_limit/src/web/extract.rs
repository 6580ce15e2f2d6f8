//! [`RateLimited`], the extractor that checks a handler's limit.

use std::fmt;
use std::marker::PhantomData;

use axum::extract::{FromRef, FromRequestParts};
use axum::response::{IntoResponse, IntoResponseParts, Response, ResponseParts};
use http::request::Parts;

use crate::engine::settle;
use crate::handle::PlugLimit;
use crate::limit::Limits;
use crate::outcome::Outcome;
use crate::outcome::Usage;
use crate::rejection::RateLimitRejection;
use crate::web::send_headers::HeaderSlot;

/// Extractor that checks the limit `L` before the handler runs: one [`Limit`](crate::Limit),
/// or a tuple of them checked at once ([stacked limits](crate::Limits)).
///
/// The [`PlugLimit`] comes from the router state (`PlugLimit: FromRef<S>`). On allow, the
/// handler runs and receives this value; return it in the response tuple to send the
/// rate-limit headers, or serve the router under a
/// [`SendHeadersLayer`](crate::SendHeadersLayer), which sends them whatever the handler
/// returns. On deny, the request is rejected with `429 Too Many Requests` plus headers (or
/// what the limiter's [`Hook`](crate::Hook) answers) and the handler does not run.
///
/// When limits are disabled, or the check failed open, the handler runs and this value adds no
/// headers.
///
/// # Example
///
/// ```no_run
/// use axum::{extract::FromRef, routing::get, Router};
/// use plug_limit::{PlugLimit, RateLimited, TokenBucket};
///
/// #[derive(Clone, FromRef)]
/// struct AppState {
///     limits: PlugLimit,
/// }
///
/// type Expensive = RateLimited<TokenBucket<20, 600, 5>>;
///
/// async fn expensive(limited: Expensive) -> (Expensive, &'static str) {
///     (limited, "done")
/// }
///
/// # fn app(limits: PlugLimit) -> Router {
/// Router::new()
///     .route("/expensive", get(expensive))
///     .with_state(AppState { limits })
/// # }
/// ```
pub struct RateLimited<L> {
    outcome: Option<Outcome>,
    /// Where the handler reports what it used, for a limit that settles.
    usage: Option<Usage>,
    _limit: PhantomData<fn() -> L>,
}

impl<L> RateLimited<L> {
    /// The limiter's outcome; `None` when limits are disabled or the check failed open.
    #[must_use]
    pub fn outcome(&self) -> Option<&Outcome> {
        self.outcome.as_ref()
    }

    /// Takes the outcome out of the extractor.
    #[must_use]
    pub fn into_outcome(self) -> Option<Outcome> {
        self.outcome
    }

    /// Where the handler reports what the request used, when the limit's cost is an estimate
    /// ([`Limit::SETTLE`](crate::Limit::SETTLE)); `None` for other limits. When nothing was
    /// counted (limits disabled, the check failed open, a shadow denial), reports to it go
    /// nowhere. The extractor also leaves it in the request's extensions, for the handler's
    /// later arguments (`Extension<Usage>`).
    #[must_use]
    pub fn usage(&self) -> Option<Usage> {
        self.usage.clone()
    }

    /// `response` with the rate-limit headers added, holding what the request owes its limit
    /// until the body ends (or is dropped unfinished): a [`Concurrency`](crate::Concurrency)
    /// limit's lease, so a streamed download stays in flight while it streams; the
    /// [`Usage`] a streaming body reports; and the status
    /// [`Limit::COUNT_IF`](crate::Limit::COUNT_IF) judges.
    ///
    /// Returning the extractor in a tuple (`(limited, body)`) adds the same headers, but the
    /// tuple settles as soon as the response is built, before its body is sent, and without
    /// its status: a lease comes back at once, and a `COUNT_IF` limit counts the request.
    ///
    /// # Example
    ///
    /// ```
    /// use axum::response::Response;
    /// use plug_limit::{Concurrency, RateLimited};
    ///
    /// // At most 3 exports in flight per client, each for at most 10 minutes.
    /// async fn export(limited: RateLimited<Concurrency<3, 600>>) -> Response {
    ///     limited.respond("a large export")
    /// }
    /// ```
    pub fn respond(self, response: impl IntoResponse) -> Response {
        let Some(mut outcome) = self.outcome else {
            return response.into_response();
        };
        let debt = outcome.take_debt();
        settle::hold((outcome, response).into_response(), debt)
    }
}

impl<S, L> FromRequestParts<S> for RateLimited<L>
where
    PlugLimit: FromRef<S>,
    S: Send + Sync,
    L: Limits,
{
    type Rejection = RateLimitRejection;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let limits = PlugLimit::from_ref(state);
        let outcome = limits.decider().check_request(L::STACK, parts).await?;
        let settles = L::STACK.iter().any(|limit| limit.settle);
        Ok(Self::from_outcome(outcome, parts, settles))
    }
}

impl<L> RateLimited<L> {
    /// The extractor of a decided request, whatever chose its limit; `settles` when the limit
    /// takes a [`Usage`] (or may: a resolver's limit unknown), so that the handler finds one
    /// even when nothing was counted (limits disabled, failed open, a shadow denial).
    pub(crate) fn from_outcome(outcome: Option<Outcome>, parts: &mut Parts, settles: bool) -> Self {
        // Under a `SendHeadersLayer`, the headers reach the response whatever it returns.
        if let (Some(outcome), Some(slot)) = (&outcome, HeaderSlot::of(&parts.extensions)) {
            slot.put(outcome);
        }
        let debt = outcome.as_ref().and_then(Outcome::debt);
        let usage = settle::leave_usage(&mut parts.extensions, debt, settles);
        Self {
            outcome,
            usage,
            _limit: PhantomData,
        }
    }
}

impl<L> IntoResponseParts for RateLimited<L> {
    type Error = std::convert::Infallible;

    fn into_response_parts(self, res: ResponseParts) -> Result<ResponseParts, Self::Error> {
        match self.outcome {
            Some(outcome) => outcome.into_response_parts(res),
            None => Ok(res),
        }
    }
}

impl<L> fmt::Debug for RateLimited<L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimited")
            .field("limit", &std::any::type_name::<L>())
            .field("outcome", &self.outcome)
            .finish()
    }
}
