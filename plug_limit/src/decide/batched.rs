//! A request of a limiter with local batches: answered from its key's batch at this
//! instance, or after reserving the next one (`batch/`), then decided as any other.

use std::sync::Arc;

use super::{Decider, Request, Step, opts_id, waiting};
use crate::backend::RedisBackend;
use crate::batch::Batches;

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
        match batches.spend(&request.keys, opts) {
            Ok((outcome, ahead)) => {
                if let Some(slot) = ahead {
                    batches.reserve_ahead(slot, redis, request.call(), opts);
                }
                Step::Done(self.verdict(&request, outcome))
            }
            Err(slot) => {
                let span = request.watch.span().cloned();
                waiting(span, async move {
                    let result = batches.reserve(slot, redis, request.call(), opts).await;
                    self.conclude(&request, result)
                })
            }
        }
    }
}

impl Request<'_> {
    /// Whether a batch may admit it: a unit's cost, nothing leased or owed after its
    /// response (those are counted call by call, exactly).
    pub(super) fn batchable(&self) -> bool {
        self.cost == 1 && self.lease.is_none() && !self.terms.owes()
    }
}
