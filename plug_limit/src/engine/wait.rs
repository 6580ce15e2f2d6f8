//! Waiting instead of refusing: a check retried after each denial, on the schedule of
//! `pace.rs`, until admitted or out of time. [`Decider::acquire`] for a call,
//! [`Decider::check_request_waiting`] for a request.
//!
//! The requests of one key at this instance wait in one line (`line.rs`), first come, first
//! served: each takes its place before its first check (one that checked first could
//! overtake those already waiting), and only the line's head checks. A line's first check,
//! and the next head's after a grant, goes at once; after a denial the head waits the
//! limit's pace. A waiter whose time runs out, or whom the line's last denial says cannot be
//! admitted in time, is answered with that denial; the line holds at most `wait_queue`.
//!
//! The wait happens between checks, each one backend call as a check makes: a waiter dropped
//! while it waits counts nothing further and frees its place, and one dropped during a check
//! is a dropped check (its call may have reached the backend and counted, as any abandoned
//! request's).

use std::future::Future;
use std::hash::Hasher;
use std::time::Duration;

use axum::extract::MatchedPath;
use http::request::Parts;
use tokio::time::Instant;

use super::line::{self, Refused};
use super::pace::{self, Pace};
use super::prepare::opts_id;
use super::ruling::Ruling;
use super::{Decider, Verdict};
use crate::error::Error;
use crate::key;
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
        let line = line::key(|hasher| {
            write_limit(hasher, &limit, limit.scope.unwrap_or_default());
            line::write_text(hasher, client);
        });
        let limits = std::slice::from_ref(&limit);
        let answers = (call_denied, call_admitted, Ok);
        self.retried(limits, bound, Some(line), check, answers)
            .await
    }

    /// Decides one request under `limits` as [`check_request`](Self::check_request) does, retrying a
    /// denial (the default 429, not a hook's own answer) for at most `bound` from now.
    pub(crate) async fn check_request_waiting(
        &self,
        limits: &[LimitRef<'_>],
        parts: &Parts,
        bound: Duration,
    ) -> Verdict {
        let check = || self.check_request(limits, parts);
        let line = self.line_of(limits, parts);
        let refuse = |denial| Err(RateLimitRejection::denied(denial));
        let answers = (request_denied, request_admitted, refuse);
        self.retried(limits, bound, line, check, answers).await
    }

    /// The line of a request's waiters: its limits' budgets, each its limiter, options, scope
    /// (as a check scopes it) and the client's key; `None` when a limit names no registered
    /// limiter or its key cannot be read (the check says what then).
    fn line_of(&self, limits: &[LimitRef<'_>], parts: &Parts) -> Option<u64> {
        // A request the check would not count (disabled, or a limit's rules let it through or
        // refuse it) is not held in a line: its check answers it.
        if !self.enabled.is_enabled() {
            return None;
        }
        let matched = || {
            parts
                .extensions
                .get::<MatchedPath>()
                .map_or("*", MatchedPath::as_str)
        };
        let mut keys = Vec::with_capacity(limits.len());
        for limit in limits {
            let entry = self.registry.of(limit).ok()?;
            if entry
                .rules
                .as_deref()
                .is_some_and(|rules| !matches!(rules.judge(parts), Ruling::Check))
            {
                return None;
            }
            let extractor = limit.key.unwrap_or(&*entry.key);
            let client = key::extract(extractor, parts, None).ok()?;
            keys.push((limit, limit.scope.unwrap_or_else(matched), client));
        }
        Some(line::key(|hasher| {
            for (limit, scope, client) in &keys {
                write_limit(hasher, limit, scope);
                line::write_text(hasher, client.first());
                for part in client.rest() {
                    line::write_text(hasher, part);
                }
                // Where one key's parts end and the next limit's begin.
                hasher.write_u8(0xff);
            }
        }))
    }

    /// Runs `check` until `denied` finds no denial in its answer, or the schedule of `limits`
    /// within `bound` from now says to answer the denial: the last answer, or `refuse` of the
    /// denial the line last met. With a `line`, the waiters of one key take their turns in it
    /// (see the module's docs); the schedule is made on the first denial only: an admitted
    /// check reads no options. `answers` reads an answer's denial, its admitting outcome, and
    /// makes an answer of a denial.
    async fn retried<T, F>(
        &self,
        limits: &[LimitRef<'_>],
        bound: Duration,
        line: Option<u64>,
        mut check: impl FnMut() -> F,
        answers: (
            impl Fn(&T) -> Option<&Outcome>,
            impl Fn(&T) -> Option<&Outcome>,
            impl Fn(Outcome) -> T,
        ),
    ) -> T
    where
        F: Future<Output = T>,
    {
        let (denied, admitted, refuse) = answers;
        let started = Instant::now();
        let Some(line) = line else {
            return self.retried_alone(limits, bound, check, denied).await;
        };
        // Every request of the key takes its place first: one that checked before joining
        // could overtake those already waiting.
        let place = match self.lines.join(line, None, self.wait_queue) {
            Ok(place) => place,
            Err(Refused::Full(Some(denial))) => return refuse(denial),
            // Full before any check of the line has answered: one check, no wait.
            Err(Refused::Full(None)) => return check().await,
        };
        let mut wait = Wait::new(self, limits, started, bound);
        let deadline = started.checked_add(bound);
        loop {
            // Answered at once when the line's denial says this waiter cannot pass in time.
            if let Some(denial) = place.denial()
                && wait.pause(&denial).is_none()
            {
                return refuse(denial);
            }
            let turn = place.turn();
            match deadline {
                Some(deadline) => {
                    if tokio::time::timeout_at(deadline, turn).await.is_err() {
                        return match place.denial() {
                            Some(denial) => refuse(denial),
                            // No check has answered the line yet: its own, within its timeout.
                            None => check().await,
                        };
                    }
                }
                None => turn.await,
            }
            // The head. A line's first check, and one after a grant (the limit may have
            // more), goes at once; after a denial, the head waits that denial's pace.
            if !place.granted()
                && let Some(denial) = place.denial()
            {
                let Some(pause) = wait.pause(&denial) else {
                    return refuse(denial);
                };
                tokio::time::sleep(pause).await;
            }
            let answer = check().await;
            let Some(denial) = denied(&answer) else {
                if let Some(admitted) = admitted(&answer) {
                    place.admitted(admitted);
                }
                return answer;
            };
            place.denied(denial);
            if wait.pause(denial).is_none() {
                return answer;
            }
        }
    }

    /// [`retried`](Self::retried) without a line: its own retries, as a request whose key
    /// cannot be read makes none (its check answers).
    async fn retried_alone<T, F>(
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
        let mut wait = Wait::new(self, limits, started, bound);
        loop {
            let answer = check().await;
            let Some(outcome) = denied(&answer) else {
                return answer;
            };
            let Some(pause) = wait.pause(outcome) else {
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

/// Writes `limit`'s budget, but for its client, into a line's key: its limiter, options,
/// `scope` and cost.
fn write_limit(hasher: &mut dyn Hasher, limit: &LimitRef<'_>, scope: &str) {
    line::write_text(hasher, limit.limiter);
    hasher.write_u64(opts_id(limit.opts));
    line::write_text(hasher, scope);
    hasher.write_u32(limit.cost);
}

/// A call's denial, if it was denied.
fn call_denied(checked: &Result<Outcome, Error>) -> Option<&Outcome> {
    checked
        .as_ref()
        .ok()
        .filter(|outcome| !outcome.is_allowed())
}

/// A call's admitting outcome, if it was admitted.
fn call_admitted(checked: &Result<Outcome, Error>) -> Option<&Outcome> {
    checked.as_ref().ok().filter(|outcome| outcome.is_allowed())
}

/// A request's admitting outcome, if it was admitted with one.
fn request_admitted(verdict: &Verdict) -> Option<&Outcome> {
    match verdict {
        Ok(outcome) => outcome.as_ref(),
        Err(_) => None,
    }
}

/// A request's denial, if it got the default 429 (a hook's own answer is not waited on).
fn request_denied(verdict: &Verdict) -> Option<&Outcome> {
    match verdict {
        Err(RateLimitRejection::TooManyRequests(denied)) => Some(denied),
        _ => None,
    }
}

/// One waiter's schedule of retries: when it started, how long it may wait, and the pace of
/// its limits, learnt at its first denial (an admitted request never needs it).
struct Wait<'a> {
    decider: &'a Decider,
    limits: &'a [LimitRef<'a>],
    started: Instant,
    bound: Duration,
    pace: Option<Pace>,
}

impl<'a> Wait<'a> {
    fn new(
        decider: &'a Decider,
        limits: &'a [LimitRef<'a>],
        started: Instant,
        bound: Duration,
    ) -> Self {
        Self {
            decider,
            limits,
            started,
            bound,
            pace: None,
        }
    }

    /// How long to pause after `denial` before the next check, `None` when the waiter cannot
    /// be admitted in time.
    fn pause(&mut self, denial: &Outcome) -> Option<Duration> {
        let (decider, limits) = (self.decider, self.limits);
        let (started, bound) = (self.started, self.bound);
        self.pace
            .get_or_insert_with(|| Pace::new(started, bound, decider.pace(limits)))
            .pause(denial)
    }
}
