//! A request of a limiter with local batches: answered from its key's batch at this
//! instance, or after reserving the next one (`engine/batch/`), then decided as any other.

use std::sync::Arc;

use super::Decider;
use super::prepare::Evaluation;
use super::prepare::opts_id;
use super::verdict::{StartedCheck, Verdict, waiting};
use crate::backend::RedisBackend;
use crate::backend::Started;
use crate::config::FailurePolicy;
use crate::engine::batch::Batches;
use crate::error::Error;
use crate::outcome::Outcome;
use crate::telemetry;

/// A check of a limiter with local batches: the batches, the Redis they reserve on.
pub(super) struct Batched<'a> {
    batches: &'a Batches,
    redis: &'a Arc<RedisBackend>,
}

impl<'a> Batched<'a> {
    pub(super) fn new(batches: &'a Batches, redis: &'a Arc<RedisBackend>) -> Self {
        Self { batches, redis }
    }

    /// Runs `evaluation` on the batches, reserving on Redis when its key's batch is spent.
    #[inline]
    pub(super) fn run(self, decider: &'a Decider, evaluation: Evaluation<'a>) -> StartedCheck<'a> {
        let Self { batches, redis } = self;
        // Hashed once: the deny cache's lookup may have hashed them already.
        let opts = evaluation
            .cached()
            .map_or_else(|| opts_id(evaluation.opts()), |(opts, _)| opts);
        let ahead = |slot| batches.reserve_ahead(slot, redis, evaluation.call(), opts);
        match batches.spend(evaluation.keys(), opts, ahead) {
            Ok(outcome) => Started::Done(decider.verdict(&evaluation, outcome)),
            Err(slot) => {
                let span = evaluation.watch().span().cloned();
                waiting(span, async move {
                    let share = (evaluation.entry().on_failure == FailurePolicy::LocalShare)
                        .then(|| Arc::clone(&slot));
                    let result = batches.reserve(slot, redis, evaluation.call(), opts).await;
                    match (result, share) {
                        (Err(error), Some(slot)) => {
                            let outcome = batches.by_share(&slot, evaluation.opts(), opts);
                            by_share(decider, &evaluation, &error, outcome)
                        }
                        (result, _) => decider.conclude(&evaluation, result),
                    }
                })
            }
        }
    }
}

/// The answer of a key's recent share, `outcome`, to `evaluation`, which Redis could not
/// decide: logged and counted as a failure the fallback decided, the hook first.
fn by_share(
    decider: &Decider,
    evaluation: &Evaluation<'_>,
    error: &Error,
    outcome: Outcome,
) -> Verdict {
    let entry = evaluation.entry();
    entry.failures.log(entry.log_level, entry.name(), error);
    evaluation.watch().failed(telemetry::cause(error));
    if let Some(verdict) = entry.hooked_failure(error) {
        evaluation.watch().undecided();
        return verdict;
    }
    evaluation.watch().fell_back();
    decider.verdict(evaluation, outcome)
}
