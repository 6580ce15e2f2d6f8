//! One limit's check from its dispatch to its decision: the deny cache, the backend (or the
//! local batches), then what the outcome or the error means for the request, the hook and the
//! failure policy included.

use std::future::Future;

use super::Decider;
use super::batched::Batched;
use super::evaluation::Evaluation;
use super::prepare::Prepared;
use super::verdict::{StartedCheck, Verdict, refuse_or_pass, waiting};
use crate::backend::{Backend, Started};
use crate::config::FailurePolicy;
use crate::error::Error;
use crate::limit::LimitRef;
use crate::outcome::Outcome;
use crate::rejection::RateLimitRejection;
use crate::telemetry::{self, DecisionLabel};
use http::request::Parts;

impl Decider {
    /// Runs a request's check as far as it goes without waiting.
    pub(super) fn start<'a>(&'a self, limit: &LimitRef<'a>, parts: &'a Parts) -> StartedCheck<'a> {
        if !self.enabled.is_enabled() {
            return Started::Done(Ok(None));
        }
        match self.prepare(limit, parts, None, |evaluation| self.run(evaluation)) {
            Prepared::Check(step) => step,
            Prepared::Pass => Started::Done(Ok(None)),
            Prepared::Answered(verdict) => Started::Done(verdict),
        }
    }

    /// The local deny cache's answer to `evaluation`, if it holds a denial for it. Inline, so
    /// that a limiter without the cache (the memory backend's) pays no call to learn it.
    #[inline]
    pub(super) fn cached_denial(&self, evaluation: &Evaluation<'_>) -> Option<Verdict> {
        let (opts, now_ms) = evaluation.cached()?;
        self.cached_denial_at(evaluation, opts, now_ms)
    }

    /// [`cached_denial`](Self::cached_denial) of a limiter with the cache.
    pub(super) fn cached_denial_at(
        &self,
        evaluation: &Evaluation<'_>,
        opts: u64,
        now_ms: i64,
    ) -> Option<Verdict> {
        let outcome = evaluation.cached_denial(&self.denials, opts, now_ms)?;
        let entry = evaluation.entry();
        // The client's key stays out of the logs: it may be a credential (an API key).
        tracing::trace!(target: "plug_limit", limiter = %entry.name(), "request denied from the local deny cache");
        evaluation.watch().deny_cache_hit();
        evaluation.watch().decided(DecisionLabel::Denied);
        let hooked = entry.hooked(&outcome);
        Some(hooked.unwrap_or_else(|| Err(RateLimitRejection::denied(outcome))))
    }

    /// Answers `evaluation` from the deny cache, or sends it to its backend.
    #[inline(always)]
    pub(super) fn run<'a>(&'a self, evaluation: Evaluation<'a>) -> StartedCheck<'a> {
        if let Some(verdict) = self.cached_denial(&evaluation) {
            return Started::Done(verdict);
        }
        let entry = evaluation.entry();
        evaluation.watch().dispatched(self.backend(entry).name());
        let backend = self.backend(entry);
        if let (Some(batches), Backend::Redis(redis)) = (&entry.batches, backend)
            && evaluation.batchable()
        {
            return Batched::new(batches, redis).run(self, evaluation);
        }
        match backend.start(evaluation.call()) {
            Started::Done(result) => {
                let result = self.admit(&evaluation, backend, result);
                Started::Done(self.conclude(&evaluation, result))
            }
            Started::Waiting(redis) => {
                let span = evaluation.watch().span().cloned();
                waiting(span, async move {
                    let result = redis.eval(evaluation.call()).await;
                    let result = self.admit(&evaluation, backend, result);
                    self.conclude(&evaluation, result)
                })
            }
        }
    }

    /// Turns an evaluation into the request's fate: allowed, denied (and remembered by the
    /// deny cache), or failed by the limiter's policy.
    #[inline(always)]
    pub(super) fn conclude(
        &self,
        evaluation: &Evaluation<'_>,
        result: Result<Outcome, Error>,
    ) -> Verdict {
        match result {
            Ok(outcome) => self.verdict(evaluation, outcome),
            Err(error) => self.fail(evaluation, error),
        }
    }

    /// What an outcome, from the backend or from the memory fallback, means for the request:
    /// allowed, let through by shadow mode, or denied (and remembered by the deny cache).
    /// Inline to its callers: most outcomes are allowed, and are not moved into a call and out.
    #[inline(always)]
    pub(super) fn verdict(&self, evaluation: &Evaluation<'_>, outcome: Outcome) -> Verdict {
        let entry = evaluation.entry();
        // Styled before the deny cache keeps a denial, so its answers read as this one does.
        let outcome = entry
            .style
            .finish(|| evaluation.keys().first(), evaluation.opts(), outcome);
        // Most checks: allowed, and no hook to hear of it. Returned at once, the outcome is
        // moved once rather than through every arm below.
        if entry.hook.is_none() && outcome.is_allowed() {
            evaluation.watch().decided(DecisionLabel::Allowed);
            return Ok(Some(outcome));
        }
        self.verdict_heard(evaluation, outcome)
    }

    /// [`verdict`](Self::verdict) of a denial, or of an outcome a hook hears of.
    pub(super) fn verdict_heard(&self, evaluation: &Evaluation<'_>, outcome: Outcome) -> Verdict {
        let entry = evaluation.entry();
        // The hook speaks first; the default path still counts, caches and logs the decision.
        let hooked = entry
            .hooked(&outcome)
            // Shadow mode never refuses, whatever a hook answers to a would-be denial.
            .filter(|verdict| !(entry.shadow && verdict.is_err()));
        let verdict = match outcome {
            outcome if outcome.is_allowed() => {
                evaluation.watch().decided(DecisionLabel::Allowed);
                Ok(Some(outcome))
            }
            outcome if entry.shadow => {
                if let Some(suppressed) = entry.shadow_denials.due() {
                    tracing::info!(target: "plug_limit", limiter = %entry.name(), suppressed, "request would be denied (shadow mode)");
                }
                evaluation.watch().decided(DecisionLabel::ShadowDenied);
                Ok(Some(outcome))
            }
            outcome => {
                tracing::debug!(target: "plug_limit", limiter = %entry.name(), "request denied");
                evaluation.watch().decided(DecisionLabel::Denied);
                evaluation.remember_denial(&self.denials, &outcome);
                Err(RateLimitRejection::denied(outcome))
            }
        };
        hooked.unwrap_or(verdict)
    }

    /// Logs a check that could not decide and applies the limiter's failure policy: the one
    /// place both happen.
    pub(super) fn fail(&self, evaluation: &Evaluation<'_>, error: Error) -> Verdict {
        let entry = evaluation.entry();
        entry.failures.log(entry.log_level, entry.name(), &error);
        evaluation.watch().failed(telemetry::cause(&error));
        if let Some(verdict) = entry.hooked_failure(&error) {
            evaluation.watch().undecided();
            return verdict;
        }
        if entry.on_failure == FailurePolicy::Memory
            && let Started::Done(result) = self.fallback().start(evaluation.call())
        {
            return match self.admit(evaluation, self.fallback(), result) {
                Ok(outcome) => {
                    evaluation.watch().fell_back();
                    self.verdict(evaluation, outcome)
                }
                Err(error) => {
                    entry.failures.log(entry.log_level, entry.name(), &error);
                    evaluation.watch().undecided();
                    Ok(None)
                }
            };
        }
        evaluation.watch().undecided();
        refuse_or_pass(entry.on_failure, error)
    }
}

impl Decider {
    /// Runs a limit's resolver within the check's timeout. One that overruns it fails like a
    /// check that could not decide, by the handle's failure policy (no limiter is known yet to
    /// have one of its own): a resolver waiting on a slow database must not hold every request
    /// with it. `Err` holds the decision of a request no limit could be chosen for.
    pub(crate) async fn resolve<L>(
        &self,
        resolver: impl Future<Output = Option<L>>,
    ) -> Result<Option<L>, Verdict> {
        let Ok(limit) = tokio::time::timeout(self.timeout, resolver).await else {
            let error = Error::Timeout(self.timeout);
            self.failures.log(self.log_level, "resolver", &error);
            return Err(refuse_or_pass(self.on_failure, error));
        };
        Ok(limit)
    }
}
