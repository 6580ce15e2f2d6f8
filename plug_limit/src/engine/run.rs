//! One limit's check from its dispatch to its decision: the deny cache, the backend (or the
//! local batches), then what the outcome or the error means for the request, the hook and the
//! failure policy included.

use super::Decider;
use super::batched::Batched;
use super::prepare::Evaluation;
use super::prepare::Prepared;
use super::verdict::{StartedCheck, Verdict, waiting};
use crate::backend::{Backend, Started};
use crate::limit::LimitRef;
use crate::rejection::RateLimitRejection;
use crate::telemetry::DecisionLabel;
use http::request::Parts;

impl Decider {
    /// Runs a request's check as far as it goes without waiting.
    pub(super) fn start<'a>(&'a self, limit: &LimitRef<'a>, parts: &'a Parts) -> StartedCheck<'a> {
        if !self.enabled.is_enabled() {
            return Started::Done(Ok(None));
        }
        match self.prepare(limit, parts, None, |evaluation| self.run(evaluation)) {
            Prepared::Check(started) => started,
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
}
