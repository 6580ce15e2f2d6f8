//! Waiting instead of refusing: a check retried after each denial, on the schedule of
//! `pace.rs`, until admitted or out of time. [`Decider::acquire`] for a call,
//! [`Decider::decide_waiting`] for a request.
//!
//! The wait happens between checks, each one backend call as a check makes: a waiter dropped
//! while it sleeps counts nothing further, and one dropped during a check is a dropped check
//! (its call may have reached the backend and counted, as any abandoned request's).

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
        let started = Instant::now();
        let mut schedule = None;
        loop {
            let outcome = self.check(limit, client, Charge::Take(limit.cost)).await?;
            if outcome.is_allowed() {
                return Ok(outcome);
            }
            // Made on the first denial only: an admitted call reads no options.
            let schedule = schedule.get_or_insert_with(|| {
                let every = self.pace(std::slice::from_ref(&limit));
                Pace::new(started, bound, every)
            });
            let Some(pause) = schedule.pause(&outcome) else {
                return Ok(outcome);
            };
            tokio::time::sleep(pause).await;
        }
    }

    /// Decides one request under `limits` as [`decide_all`](Self::decide_all) does, retrying a
    /// denial (the default 429, not a hook's own answer) for at most `bound` from now.
    pub(crate) async fn decide_waiting(
        &self,
        limits: &[LimitRef<'_>],
        parts: &Parts,
        bound: Duration,
    ) -> Decided {
        let started = Instant::now();
        let mut schedule = None;
        loop {
            let decided = self.decide_all(limits, parts).await;
            let Err(RateLimitRejection::TooManyRequests(denied)) = &decided else {
                return decided;
            };
            let schedule =
                schedule.get_or_insert_with(|| Pace::new(started, bound, self.pace(limits)));
            let Some(pause) = schedule.pause(denied) else {
                return decided;
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
