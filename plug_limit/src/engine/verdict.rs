//! What a check of a request comes to ([`Verdict`]), and how far one gets without waiting
//! ([`StartedCheck`]).

use std::future::Future;
use std::pin::Pin;

use tracing::Instrument;

use crate::backend::Started;
use crate::config::FailurePolicy;
use crate::error::Error;
use crate::outcome::Outcome;
use crate::rejection::RateLimitRejection;

/// What a check of one request comes to: `Ok(Some(outcome))` to allow it with headers,
/// `Ok(None)` to let it through without (disabled, or failed open), `Err` to refuse it.
pub(crate) type Verdict = Result<Option<Outcome>, RateLimitRejection>;

/// A check as far as it gets without waiting: decided, or waiting on Redis.
pub(super) type StartedCheck<'a> =
    Started<Verdict, Pin<Box<dyn Future<Output = Verdict> + Send + 'a>>>;

/// A check waiting on Redis, within `span` when there is one (something would record it):
/// entering and leaving a disabled span on every poll cost a Redis check about 400
/// instructions. Boxed where it is made: each move of the call's future is a copy of it.
pub(super) fn waiting<'a>(
    span: Option<tracing::Span>,
    call: impl Future<Output = Verdict> + Send + 'a,
) -> StartedCheck<'a> {
    Started::Waiting(match span {
        None => Box::pin(call),
        Some(span) => Box::pin(call.instrument(span)),
    })
}

/// The failure policy's answer once nothing can decide: pass (`Open`, and `Memory` when memory
/// cannot stand in) or refuse with 503 (`Closed`, and `LocalShare` where no share stands in).
pub(super) fn refuse_or_pass(policy: FailurePolicy, error: Error) -> Verdict {
    match policy {
        FailurePolicy::Open | FailurePolicy::Memory => Ok(None),
        FailurePolicy::Closed | FailurePolicy::LocalShare => {
            Err(RateLimitRejection::Unavailable(error))
        }
    }
}
