//! Checks from code rather than from a request: [`Decider::check`] and the resets, through
//! the same dispatch, every error returned to the caller.

use std::future::Future;

use tracing::Instrument;

use super::Decider;
use super::keys::{self, Keys};
use super::prepare::lease_for;
use super::prepare::named;
use super::registry::Entry;
use super::settle::Terms;
use crate::backend::{Backend, Call, ClientKeys};
use crate::error::Error;
use crate::limit::{Charge, LimitRef};
use crate::outcome::Outcome;
use crate::telemetry::Watch;

impl Decider {
    /// Evaluates `limit` for the programmatic client key `client`, charging `cost`: the same
    /// dispatch as a request's, with every error returned to the caller.
    pub(crate) async fn check(
        &self,
        limit: LimitRef<'_>,
        client: &str,
        cost: Charge,
    ) -> Result<Outcome, Error> {
        let scope = limit.scope.unwrap_or_default();
        let opts = limit.opts;
        let watch = Watch::call(&self.telemetry, limit.limiter, scope, cost);
        let work = async {
            let entry = self.registry.of(&limit)?;
            let keys = self.client_keys(entry, limit, client);
            if matches!(cost, Charge::Refund(_)) {
                // Units given back may lift a denial this instance has cached.
                self.denials.remove(&keys);
            }
            let lease = lease_for(entry, cost);
            let call = Call {
                program: &entry.program,
                keys: &keys,
                opts,
                read_ahead: limit.read_ahead,
                cost,
                lease: lease.as_deref(),
            };
            let backend = self.backend(entry);
            watch.dispatched(backend.name());
            let result = backend.eval(call).await;
            let outcome =
                self.admitted(backend, call, Terms::default(), entry.deny_cache, result)?;
            Ok(entry.style.finish(|| keys.first(), opts, outcome))
        };
        // Within the span only when something would record it (see `waiting`), and awaited
        // where it lies: each move of the work's future is a copy of it.
        let result = match watch.span() {
            None => work.await,
            Some(span) => work.instrument(span.clone()).await,
        };
        watch.checked(&result);
        result
    }

    /// Forgets everything `limit` counted for `client`, here and in this instance's deny
    /// cache.
    pub(crate) async fn reset(&self, limit: LimitRef<'_>, client: &str) -> Result<(), Error> {
        let entry = self.registry.of(&limit)?;
        let keys = self.client_keys(entry, limit, client);
        self.denials.remove(&keys);
        if let Some(batches) = &entry.batches {
            batches.forget(&keys);
        }
        let reset = self.backend(entry).reset(keys.first()).await;
        // Again: a batch reserved by a request while the key went would be of the window the
        // reset ended.
        if let Some(batches) = &entry.batches {
            batches.forget(&keys);
        }
        reset
    }

    /// Forgets everything `limiter` counted for `client` under any options and scope: in its
    /// backend and the memory fallback, in this instance's deny cache and local batches.
    pub(crate) async fn reset_key(&self, limiter: &str, client: &str) -> Result<u64, Error> {
        let entry = self.registry.get(limiter)?;
        let name = entry.name();
        let (tag, part) = keys::client_parts(client);
        let forget_here = || {
            self.denials.remove_client(name, &part);
            if let Some(batches) = &entry.batches {
                batches.forget_client(name, &part);
            }
        };
        forget_here();
        let client = ClientKeys {
            prefix: &self.prefix,
            tag,
            limiter: name,
            part: &part,
        };
        let backends = std::iter::once(self.backend(entry)).chain(self.fallback.get());
        let deleted = cleared(backends, |backend| backend.clear_client(client)).await;
        // Again: a denial cached, or a batch reserved, while the keys went would outlive them.
        forget_here();
        deleted
    }

    /// Forgets everything every limiter counted, in every backend (the limiters' own pools and
    /// the memory fallback included) and in this instance's deny cache.
    pub(crate) async fn reset_all(&self) -> Result<u64, Error> {
        let forget_here = || {
            self.denials.clear();
            for batches in self
                .registry
                .entries()
                .filter_map(|entry| entry.batches.as_ref())
            {
                batches.clear();
            }
        };
        forget_here();
        let own = self
            .registry
            .entries()
            .filter_map(|entry| entry.backend.as_ref());
        let backends = std::iter::once(&self.backend)
            .chain(own)
            .chain(self.fallback.get());
        let deleted = cleared(backends, |backend| backend.clear(&self.prefix)).await;
        // Again: a denial cached, or a batch reserved, while the keys went would outlive the
        // reset.
        forget_here();
        deleted
    }

    /// The keys a programmatic check of `limit` counts `client` under: those of a request
    /// from the same client to a route of the limit's scope (none: `""`).
    pub(super) fn client_keys<'a>(
        &'a self,
        entry: &'a Entry,
        limit: LimitRef<'a>,
        client: &'a str,
    ) -> Keys<'a> {
        let scope = limit.scope.unwrap_or_default();
        Keys::of_client(client, &self.prefix, named(entry, &limit), scope)
    }
}

/// How many keys `clear` deleted from every one of `backends`, or the first error: one failing
/// store (a Redis down) does not keep the others, or memory, from being cleared.
async fn cleared<'b, F>(
    backends: impl Iterator<Item = &'b Backend>,
    clear: impl Fn(&'b Backend) -> F,
) -> Result<u64, Error>
where
    F: Future<Output = Result<u64, Error>>,
{
    let (mut deleted, mut first_error) = (0, None);
    for backend in backends {
        match clear(backend).await {
            Ok(count) => deleted += count,
            Err(error) => first_error = first_error.or(Some(error)),
        }
    }
    first_error.map_or(Ok(deleted), Err)
}
