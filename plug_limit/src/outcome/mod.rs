//! The result of one limiter evaluation: [`Outcome`] and its [`Decision`].

use std::fmt;
use std::sync::Arc;

use axum::response::{IntoResponseParts, ResponseParts};
use deadpool_redis::redis::Value;
use http::{HeaderName, HeaderValue, StatusCode};

use crate::algorithm::{Field, Report};

use self::headers::Headers;
pub(crate) use self::headers::{Names, Reported, number};
pub(crate) use self::reply::{
    answered_in_full, declared_name, is_framing, packed_records, parse_builtin, parse_record,
    parse_reply,
};
pub use self::style::HeaderStyle;
pub(crate) use self::style::Styler;
pub use self::usage::Usage;

mod headers;
pub(crate) mod ietf;
mod reply;
mod style;
pub(crate) mod tightest;
mod usage;

/// Whether a request may proceed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub(crate) enum Decision {
    /// The request is within its limit.
    Allow,
    /// The request is over its limit.
    Deny,
}

/// What an outcome holds of what its request owes: boxed inside the `Arc`, a thin pointer keeps
/// every outcome, moved through every layer of a check, a word smaller than a `dyn` one would.
pub(crate) type HeldDebt = Arc<Box<dyn Debt>>;

/// What a request owes its limits after its response (a lease to give back, a reservation to
/// settle): made by the engine, carried by an [`Outcome`] to the response, and settled when its
/// last holder drops it. The outcome knows it only by this trait, so it depends on nothing that
/// calls a backend.
pub(crate) trait Debt: fmt::Debug + Send + Sync {
    /// The response's status, which decides what a limit counting by status gives back.
    fn responded(&self, status: StatusCode);

    /// The [`Usage`] its handler reports to, for a limit that settles to what was used.
    fn usage(&self) -> Option<&Usage>;
}

/// What a limiter decided for one request: the decision, the rate-limit headers, and any extra
/// values a custom script returned after them.
///
/// A custom script's header values come ready-made from its reply; Rust only maps each reply
/// position to its declared header name. A built-in limiter's outcome holds its numbers
/// (limit, remaining, reset, retry-after, the window that decided) and makes them into headers
/// of the limiter's [`HeaderStyle`] when first read ([`headers`](Self::headers), a response):
/// an outcome whose headers are never sent never formats them.
///
/// An allowed outcome of a [`Concurrency`](crate::Concurrency) limit holds the request's
/// lease, and one of a limit that settles after the response
/// ([`Limit::COUNT_IF`](crate::Limit::COUNT_IF), [`Limit::SETTLE`](crate::Limit::SETTLE)) what
/// its request owes: both are settled when the outcome and every clone of it are dropped (see
/// [`RateLimited::respond`](crate::RateLimited::respond)). Outcomes compare by decision,
/// headers and extra values, whatever they hold.
#[derive(Debug)]
pub struct Outcome {
    decision: Decision,
    headers: Headers,
    /// A boxed slice, not a `Vec`: nearly always empty, and the word it saves is moved with
    /// every outcome.
    extra: Box<[Value]>,
    debt: Option<HeldDebt>,
}

impl Clone for Outcome {
    fn clone(&self) -> Self {
        Self {
            decision: self.decision,
            headers: self.headers.clone(),
            // Most outcomes hold no extra values: an empty box is made, not copied (a batch
            // answers each request with a copy of its grant's outcome).
            extra: if self.extra.is_empty() {
                Box::default()
            } else {
                self.extra.clone()
            },
            debt: self.debt.clone(),
        }
    }
}

impl PartialEq for Outcome {
    fn eq(&self, other: &Self) -> bool {
        self.decision == other.decision
            && self.headers == other.headers
            && self.extra == other.extra
    }
}

impl Outcome {
    /// An allowed outcome with `headers`, built by hand, e.g. in a hook's tests.
    #[must_use]
    pub fn allowed(headers: Vec<(HeaderName, HeaderValue)>) -> Self {
        Self::new(Decision::Allow, headers)
    }

    /// A denied outcome with `headers`, built by hand, e.g. in a hook's tests.
    #[must_use]
    pub fn denied(headers: Vec<(HeaderName, HeaderValue)>) -> Self {
        Self::new(Decision::Deny, headers)
    }

    pub(crate) fn new(decision: Decision, headers: Vec<(HeaderName, HeaderValue)>) -> Self {
        Self {
            decision,
            headers: Headers::made(headers),
            extra: Box::default(),
            debt: None,
        }
    }

    /// An outcome with the extra values a script returned after its headers.
    pub(crate) fn with_extra(
        decision: Decision,
        headers: Vec<(HeaderName, HeaderValue)>,
        extra: Vec<Value>,
    ) -> Self {
        Self {
            decision,
            headers: Headers::made(headers),
            extra: extra.into_boxed_slice(),
            debt: None,
        }
    }

    /// A built-in's outcome: its `report`'s values under `names`, made into headers when first
    /// read; the caller has checked them.
    // Always inline: a call of its own moves the report and the outcome once more.
    #[inline(always)]
    pub(crate) fn reported(
        decision: Decision,
        names: Names,
        report: Report,
        extra: impl Into<Box<[Value]>>,
    ) -> Self {
        Self {
            decision,
            headers: Headers::reported(names, report),
            extra: extra.into(),
            debt: None,
        }
    }

    /// The outcome with `sent`, the header values of the reply its report was read from, as
    /// its headers until the report changes: a script's reply is sent as it came, without a
    /// copy.
    pub(crate) fn sent_as(mut self, sent: Vec<(HeaderName, HeaderValue)>) -> Self {
        self.headers.set_sent(sent);
        self
    }

    /// What a built-in reported, and how it is written; `None` for an outcome whose headers
    /// are made (a custom script's, a hand-built or an edited one).
    pub(crate) fn reported_as(&self) -> Option<&Reported> {
        self.headers.as_reported()
    }

    /// [`reported_as`](Self::reported_as), to change: the headers are made again when next
    /// read.
    pub(crate) fn reported_mut(&mut self) -> Option<&mut Reported> {
        self.headers.as_reported_mut()
    }

    /// The numbers a built-in reported of the limit that decided.
    pub(crate) fn report(&self) -> Option<&Report> {
        self.reported_as().map(|reported| &reported.report)
    }

    /// The same outcome with `decision` and without its extra values.
    pub(crate) fn answered(mut self, decision: Decision) -> Self {
        self.decision = decision;
        self.extra = Box::default();
        self
    }

    /// The outcome holding what its request owes after its response, until it drops.
    pub(crate) fn with_debt(mut self, debt: impl Debt + 'static) -> Self {
        self.debt = Some(Arc::new(Box::new(debt)));
        self
    }

    /// The outcome holding the debt of `other`'s request: the same request, answered otherwise.
    pub(crate) fn with_debt_of(mut self, other: &Self) -> Self {
        self.debt.clone_from(&other.debt);
        self
    }

    /// What its request owes, to hold elsewhere (a response body).
    pub(crate) fn take_debt(&mut self) -> Option<HeldDebt> {
        self.debt.take()
    }

    /// What its request owes, if anything.
    pub(crate) fn debt(&self) -> Option<&dyn Debt> {
        self.debt.as_deref().map(Box::as_ref)
    }

    /// The decision.
    #[must_use]
    pub(crate) fn decision(&self) -> Decision {
        self.decision
    }

    /// `true` when the request may proceed.
    #[must_use]
    pub fn is_allowed(&self) -> bool {
        self.decision == Decision::Allow
    }

    /// The rate-limit headers, in the order the script returned them.
    #[must_use]
    pub fn headers(&self) -> &[(HeaderName, HeaderValue)] {
        self.headers.get()
    }

    /// The value of one rate-limit header, if the script set it.
    #[must_use]
    pub fn header(&self, name: &str) -> Option<&HeaderValue> {
        self.headers()
            .iter()
            .find(|(candidate, _)| candidate.as_str().eq_ignore_ascii_case(name))
            .map(|(_, value)| value)
    }

    /// The rate-limit headers as a map, e.g. to add to in a [`Hook`](crate::Hook).
    #[must_use]
    pub fn header_map(&self) -> http::HeaderMap {
        self.headers().iter().cloned().collect()
    }

    /// The deciding quota's limit (gcra's burst), as `x-ratelimit-limit` carries it; `None`
    /// for a custom script's outcome or one whose headers were edited. Numbers without
    /// parsing headers, whatever the [`HeaderStyle`]:
    ///
    /// ```
    /// use std::time::Duration;
    /// use plug_limit::{FixedWindow, PlugLimit};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), plug_limit::Error> {
    /// let limits = PlugLimit::memory();
    /// let outcome = limits.check(FixedWindow::<2, 60>, "job:42").await?;
    /// assert_eq!(outcome.limit(), Some(2));
    /// assert_eq!(outcome.remaining(), Some(1));
    /// assert_eq!(outcome.reset(), Some(Duration::from_secs(60)));
    /// assert_eq!(outcome.retry_after(), None);
    /// assert_eq!(outcome.policy().as_deref(), Some("2"));
    /// limits.check(FixedWindow::<2, 60>, "job:42").await?;
    /// let denied = limits.check(FixedWindow::<2, 60>, "job:42").await?;
    /// assert_eq!(denied.retry_after(), Some(Duration::from_secs(60)));
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn limit(&self) -> Option<u64> {
        match self.report()?.limit() {
            Field::Int(n) => u64::try_from(*n).ok(),
            Field::TokenBucketPolicy { limit, .. } => Some(u64::from(*limit)),
            // A policy as a script writes it, `{limit} {limit};w=..`: its limit leads.
            Field::Text(text) => {
                let digits = text.split(|c: char| !c.is_ascii_digit()).next()?;
                digits.parse().ok()
            }
        }
    }

    /// What the deciding quota has left; `None` as for [`limit`](Self::limit).
    #[must_use]
    pub fn remaining(&self) -> Option<u64> {
        u64::try_from(self.report()?.remaining()).ok()
    }

    /// How long until the deciding quota resets; `None` as for [`limit`](Self::limit).
    #[must_use]
    pub fn reset(&self) -> Option<std::time::Duration> {
        let seconds = u64::try_from(self.report()?.reset()).ok()?;
        Some(std::time::Duration::from_secs(seconds))
    }

    /// How long until the next request may pass, as `retry-after` says it: on a denial, and
    /// on the allowed request that spent a token bucket's last token (the seed's
    /// `token_bucket` says it then too); `None` otherwise, and as for [`limit`](Self::limit).
    /// Read [`is_allowed`](Self::is_allowed) for the decision.
    #[must_use]
    pub fn retry_after(&self) -> Option<std::time::Duration> {
        let seconds = u64::try_from(self.report()?.retry_after()?).ok()?;
        Some(std::time::Duration::from_secs(seconds))
    }

    /// The policy that decided, as the built-in writes it into `x-ratelimit-limit`: the limit
    /// (`"100"`), token_bucket's `"20 20;w=600;burst=5;policy=token_bucket"`, or for
    /// `multi_window` and a stack, the limit of the window that decided; `None` as for
    /// [`limit`](Self::limit).
    #[must_use]
    pub fn policy(&self) -> Option<String> {
        Some(self.report()?.limit().to_string())
    }

    /// The values a custom script returned after the headers, for a
    /// [`Hook`](crate::Hook) to answer with.
    #[must_use]
    pub fn extra(&self) -> &[Value] {
        &self.extra
    }
}

impl IntoResponseParts for Outcome {
    type Error = std::convert::Infallible;

    fn into_response_parts(self, mut res: ResponseParts) -> Result<ResponseParts, Self::Error> {
        // What is still owed here is settled with this outcome: a response body can hold it
        // only where the body is reachable (`RateLimited::respond`, the layers).
        self.headers.insert_into(res.headers_mut());
        Ok(res)
    }
}
