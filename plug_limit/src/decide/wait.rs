//! Waiting instead of refusing: a check retried after each denial, on the schedule of
//! `pace.rs`, until admitted or out of time. [`Decider::acquire`] for a call,
//! [`Decider::decide_waiting`] for a request.
//!
//! The wait happens between checks, each one backend call as a check makes: a waiter dropped
//! while it sleeps counts nothing further, and one dropped during a check is a dropped check
//! (its call may have reached the backend and counted, as any abandoned request's).

use std::future::Future;
use std::time::Duration;

use http::request::Parts;
use tokio::time::Instant;

use super::pace::{self, Pace};
use super::{Decided, Decider};
use crate::error::Error;
use crate::limit::{Charge, LimitRef};
use crate::outcome::Outcome;
use crate::rejection::RateLimitRejection;

impl Decider {
    /// Checks `limit` for the programmatic client key `client` until it is admitted, retrying
    /// after each denial for at most `bound` from now: the admitting outcome, or the last
    /// denial once waiting longer could not admit it in time. Errors end the wait.
    pub(crate) async fn acquire(
        &self,
        limit: LimitRef<'_>,
        client: &str,
        bound: Duration,
    ) -> Result<Outcome, Error> {
        let check = || self.check(limit, client, Charge::Take(limit.cost));
        self.retried(std::slice::from_ref(&limit), bound, check, call_denied)
            .await
    }

    /// Decides one request under `limits` as [`decide_all`](Self::decide_all) does, retrying a
    /// denial (the default 429, not a hook's own answer) for at most `bound` from now.
    pub(crate) async fn decide_waiting(
        &self,
        limits: &[LimitRef<'_>],
        parts: &Parts,
        bound: Duration,
    ) -> Decided {
        let check = || self.decide_all(limits, parts);
        self.retried(limits, bound, check, request_denied).await
    }

    /// Runs `check` until `denied` finds no denial in its answer, or the schedule of `limits`
    /// within `bound` from now says to answer the denial: the last answer. The schedule is
    /// made on the first denial only: an admitted check reads no options.
    async fn retried<T, F>(
        &self,
        limits: &[LimitRef<'_>],
        bound: Duration,
        mut check: impl FnMut() -> F,
        denied: impl Fn(&T) -> Option<&Outcome>,
    ) -> T
    where
        F: Future<Output = T>,
    {
        let started = Instant::now();
        let mut schedule = None;
        loop {
            let answer = check().await;
            let Some(outcome) = denied(&answer) else {
                return answer;
            };
            let schedule =
                schedule.get_or_insert_with(|| Pace::new(started, bound, self.pace(limits)));
            let Some(pause) = schedule.pause(outcome) else {
                return answer;
            };
            tokio::time::sleep(pause).await;
        }
    }

    /// How often a waiter retries a denial of `limits` (see `pace.rs`).
    fn pace(&self, limits: &[LimitRef<'_>]) -> Duration {
        pace::of(limits.iter().map(|limit| {
            let builtin = self
                .registry
                .get(limit.limiter)
                .ok()
                .and_then(|entry| entry.program.algorithm);
            (builtin, limit.opts, limit.cost)
        }))
    }
}

/// A call's denial, if it was denied.
fn call_denied(checked: &Result<Outcome, Error>) -> Option<&Outcome> {
    checked
        .as_ref()
        .ok()
        .filter(|outcome| !outcome.is_allowed())
}

/// A request's denial, if it got the default 429 (a hook's own answer is not waited on).
fn request_denied(decided: &Decided) -> Option<&Outcome> {
    match decided {
        Err(RateLimitRejection::TooManyRequests(denied)) => Some(denied),
        _ => None,
    }
}
