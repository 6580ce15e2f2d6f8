//! A request of a limiter with local batches: answered from its key's batch at this
//! instance, or after reserving the next one (`batch/`), then decided as any other.

use std::sync::Arc;

use super::{Decided, Decider, Request, Step, opts_id, waiting};
use crate::backend::RedisBackend;
use crate::batch::Batches;
use crate::config::FailurePolicy;
use crate::error::Error;
use crate::outcome::Outcome;
use crate::telemetry;

impl Decider {
    /// Runs `request` on `batches`, reserving on `redis` when its key's batch is spent.
    pub(super) fn run_batched<'a>(
        &'a self,
        batches: &'a Batches,
        redis: &'a Arc<RedisBackend>,
        request: Request<'a>,
    ) -> Step<'a> {
        // Hashed once: the deny cache's lookup may have hashed them already.
        let opts = request
            .cached
            .map_or_else(|| opts_id(request.opts), |(opts, _)| opts);
        let ahead = |slot| batches.reserve_ahead(slot, redis, request.call(), opts);
        match batches.spend(&request.keys, opts, ahead) {
            Ok(outcome) => Step::Done(self.verdict(&request, outcome)),
            Err(slot) => {
                let span = request.watch.span().cloned();
                waiting(span, async move {
                    let share = (request.entry.on_failure == FailurePolicy::LocalShare)
                        .then(|| Arc::clone(&slot));
                    let result = batches.reserve(slot, redis, request.call(), opts).await;
                    match (result, share) {
                        (Err(error), Some(slot)) => {
                            let outcome = batches.by_share(&slot, request.opts, opts);
                            self.by_share(&request, &error, outcome)
                        }
                        (result, _) => self.conclude(&request, result),
                    }
                })
            }
        }
    }
}

impl Decider {
    /// The answer of a key's recent share, `outcome`, to `request`, which Redis could not
    /// decide: logged and counted as a failure the fallback decided, the hook first.
    fn by_share(&self, request: &Request<'_>, error: &Error, outcome: Outcome) -> Decided {
        let entry = request.entry;
        entry.failures.log(entry.log_level, entry.name(), error);
        request.watch.failed(telemetry::cause(error));
        if let Some(decided) = entry.hooked_failure(error) {
            request.watch.undecided();
            return decided;
        }
        request.watch.fell_back();
        self.verdict(request, outcome)
    }
}

impl Request<'_> {
    /// Whether a batch may admit it: a unit's cost, nothing leased or owed after its
    /// response (those are counted call by call, exactly).
    pub(super) fn batchable(&self) -> bool {
        self.cost == 1 && self.lease.is_none() && !self.terms.owes()
    }
}
