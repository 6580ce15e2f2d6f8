//! Local batches for hot keys (see [`LocalBatches`](crate::LocalBatches)): one limiter's
//! batches at this instance, one per key, and the reservations that fill them.
//!
//! A request takes a unit of its key's batch without waiting when there is one, and is
//! answered by its key's held denial while one holds ([`Batches::spend`]); otherwise it waits
//! for the key's one reservation on its way (`reserver.rs`), which it starts if there is none
//! ([`Batches::reserve`]). The reservation answers every request waiting when it lands: with
//! a unit each while the grant lasts, with the limit's denial once Redis has no more. What a
//! batch holds when it goes idle goes back to Redis (`give_back.rs`).

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::HeaderValue;
use http::header::RETRY_AFTER;
use tokio::sync::oneshot;

use self::denial::Refill;
use self::inner::BatchesInner;
use self::reserver::Reserver;
pub(crate) use self::slot::Slot;
use self::slot::{Served, Waiter};
use crate::backend::sharded::{Locked, Sharded};
use crate::backend::{Call, KeyText, Program, RedisBackend, head_len};
use crate::config::LocalBatches;
use crate::error::Error;
use crate::limit::{Charge, Opt};
use crate::outcome::{Decision, Outcome};

mod denial;
mod give_back;
mod held;
mod inner;
#[cfg(all(test, plug_limit_loom))]
mod interleavings;
mod reserver;
mod share;
mod slot;

const SHARDS: usize = 16;

/// How long a busy slot (a reservation on its way, requests waiting) counts as expiring
/// from now when a full shard makes room: after every idle one.
const BUSY: Duration = Duration::from_secs(3_600);

/// One limiter's batches at this instance.
pub(crate) struct Batches {
    inner: Arc<BatchesInner>,
}

impl Batches {
    /// Batches of `program`'s keys (which start with `prefix`) by `settings`, for at most
    /// `capacity` keys (past it, the keys least recently used go first, with any units they
    /// held).
    pub(crate) fn new(
        settings: LocalBatches,
        program: Program,
        capacity: NonZeroUsize,
        timeout: Duration,
        prefix: &str,
    ) -> Self {
        Self {
            inner: Arc::new(BatchesInner {
                settings,
                program,
                timeout,
                slots: Sharded::bounded(SHARDS, capacity),
                head: head_len(prefix),
            }),
        }
    }

    /// A unit of `key`'s batch for a request of the limit `opts` (a hash of its options), or
    /// the denial the key holds, and its answer, handing the key's slot to `ahead` when the
    /// next batch should be reserved now ([`reserve_ahead`](Self::reserve_ahead)); else the
    /// key's slot, to reserve on.
    #[inline]
    pub(crate) fn spend(
        &self,
        keys: &dyn KeyText,
        opts: u64,
        ahead: impl FnOnce(Arc<Slot>),
    ) -> Result<Outcome, Arc<Slot>> {
        let now = Instant::now();
        let slot = self.slot(keys, now);
        let mut state = slot.state();
        state.held.note();
        let taken = state.held.take(opts, now);
        let reserve = state.wants_ahead(opts, now);
        if reserve {
            state.reserving = Some((opts, now));
        }
        // A held denial answers while the reservation sent at its end is on its way.
        let outcome = taken.or_else(|| state.denied(opts, now));
        drop(state);
        if reserve {
            ahead(Arc::clone(&slot));
        }
        outcome.ok_or(slot)
    }

    /// Reserves `call`'s key's next batch ahead, in the background, for a slot whose
    /// [`spend`](Self::spend) asked for it (and marked it reserving).
    pub(crate) fn reserve_ahead(
        &self,
        slot: Arc<Slot>,
        redis: &Arc<RedisBackend>,
        call: Call<'_>,
        opts: u64,
    ) {
        self.reserver(slot, redis, call, opts).start();
    }

    fn reserver(
        &self,
        slot: Arc<Slot>,
        redis: &Arc<RedisBackend>,
        call: Call<'_>,
        opts: u64,
    ) -> Reserver {
        Reserver {
            inner: Arc::clone(&self.inner),
            redis: Arc::clone(redis),
            slot,
            key: call.keys.all().to_vec(),
            opts: call.opts.to_vec(),
            opts_id: opts,
            refill: Refill::of(call.program.algorithm, call.opts),
            done: false,
        }
    }

    /// Waits for the units of `call`'s key's reservation on its way, starting one if there is
    /// none (one call of its script, sized by the key's rate and the requests waiting), and
    /// answers by it: a unit, or the limit's denial. A request waits at most the check's
    /// timeout, and the requests waiting on one key at most `LocalBatches::queue`: past either
    /// it is denied, by the limit's numbers, never passed by the failure policy. A failed
    /// reservation is every waiting request's failure, which each follows its policy for;
    /// until one lands again, a request is answered by that failure at once, while one
    /// reservation at a time finds out whether the store answers again.
    ///
    /// The request takes one unit exactly instead, in a call of its own, when a batch would
    /// not count where it should: a slot a reset dropped, or a key whose batch or reservation
    /// is another limit's.
    pub(crate) async fn reserve(
        &self,
        slot: Arc<Slot>,
        redis: &Arc<RedisBackend>,
        call: Call<'_>,
        opts: u64,
    ) -> Result<Outcome, Error> {
        let timeout = self.inner.timeout;
        let arrived = Instant::now();
        let deadline = arrived + timeout;
        let start = || self.reserver(Arc::clone(&slot), redis, call, opts).start();
        let receiver = match self.join(&slot, opts, arrived, start) {
            Joined::Answered(outcome) => return Ok(outcome),
            Joined::Failed(error) => return Err(error),
            Joined::Exact => return exact_take(redis, call, timeout).await,
            Joined::Waiting(receiver) => receiver,
        };
        match tokio::time::timeout_at(deadline.into(), receiver).await {
            Ok(Ok(Served::Answer(outcome))) => Ok(outcome),
            Ok(Ok(Served::Failed(error))) => Err(error),
            Ok(Ok(Served::Exact)) => {
                let now = Instant::now();
                let left = deadline.saturating_duration_since(now);
                let round_trip = slot.state().round_trip.unwrap_or_default();
                // A call that cannot come back within the timeout is not sent.
                if left <= round_trip {
                    let refused = refused(&mut slot.state().held, opts, now);
                    return Ok(refused);
                }
                match exact_take(redis, call, left).await {
                    // Cut short by what its wait left, not by the store: the limit's answer.
                    Err(Error::Timeout(_)) if left < timeout => {
                        let refused = refused(&mut slot.state().held, opts, Instant::now());
                        Ok(refused)
                    }
                    result => result,
                }
            }
            // The reservation's task ended without an answer: its runtime is shutting down.
            Ok(Err(_)) => Err(Error::Timeout(timeout)),
            Err(_) => {
                let mut state = slot.state();
                match state.reserving {
                    // The call on its way since before this request came has not answered
                    // within a timeout: the store's failure, which the policy answers.
                    Some((_, sent)) if sent <= arrived => Err(Error::Timeout(timeout)),
                    // Its turn had not come: the queue, not the store, kept it.
                    _ => Ok(refused(&mut state.held, opts, Instant::now())),
                }
            }
        }
    }

    /// Joins the requests waiting on `slot` for the limit `opts`, starting its reservation
    /// (`start`, called with the slot's lock let go) if none is on its way; or answers at once.
    fn join(&self, slot: &Slot, opts: u64, now: Instant, start: impl FnOnce()) -> Joined {
        let mut state = slot.state();
        // Another request's reservation may have landed since this one looked.
        if let Some(outcome) = state.held.take(opts, now) {
            return Joined::Answered(outcome);
        }
        if let Some(denied) = state.denied(opts, now) {
            return Joined::Answered(denied);
        }
        let exact = state.held.is_forgotten()
            || state.held.holds_other(opts)
            || state.reserving.is_some_and(|(other, _)| other != opts);
        if exact {
            return Joined::Exact;
        }
        if let Some((error, at)) = &state.failed {
            let known = now < *at + self.inner.timeout || state.probing;
            if known && (state.reserving.is_none() || state.probing) {
                // The store is known to fail (the last reservation failed within a timeout,
                // or the one on its way is finding out whether it answers again): answered by
                // that at once, while one reservation at a time finds out.
                let error = error.duplicate();
                if state.reserving.is_none() {
                    state.reserving = Some((opts, now));
                    state.probing = true;
                    drop(state);
                    start();
                }
                return Joined::Failed(error);
            }
        }
        if state.waiting.len() >= self.inner.settings.queue as usize {
            // Requests that gave up hold no place.
            state.waiting.retain(|waiter| !waiter.answer.is_closed());
        }
        if state.waiting.len() >= self.inner.settings.queue as usize {
            return Joined::Answered(refused(&mut state.held, opts, now));
        }
        let (answer, receiver) = oneshot::channel();
        state.waiting.push_back(Waiter { answer });
        if state.reserving.is_none() {
            state.reserving = Some((opts, now));
            drop(state);
            start();
        }
        Joined::Waiting(receiver)
    }

    /// The answer of this instance's recent share of `slot`'s limit of `limit` (its options,
    /// `opts` their hash) to a request Redis could not decide
    /// ([`FailurePolicy::LocalShare`](crate::FailurePolicy::LocalShare)): allowed while the
    /// share admits, else denied, each with the last grant's numbers (a denial's
    /// `retry-after` 0: the share's next unit is due within the second).
    pub(crate) fn by_share(&self, slot: &Slot, limit: &[Opt], opts: u64) -> Outcome {
        let now = Instant::now();
        let mut state = slot.state();
        // Requests waiting on a reservation that fails are answered together, at most a
        // timeout apart.
        let burst = self.inner.timeout + self.inner.settings.every;
        let spent = state.held.spent();
        let admits = state.share.admits(spent, now, burst, share::most(limit));
        let decision = if admits {
            Decision::Allow
        } else {
            Decision::Deny
        };
        state.held.by_share(opts, decision, now).unwrap_or_else(|| {
            Outcome::new(decision, vec![(RETRY_AFTER, HeaderValue::from_static("0"))])
        })
    }

    /// Drops what this instance holds of `key` (a reset): a unit of the window that was reset
    /// must not be spent in the next, nor a denial of it answered. Other instances' batches
    /// end with their windows.
    pub(crate) fn forget(&self, keys: &dyn KeyText) {
        let mut shard = self.lock(keys);
        if let Some(slot) = shard.get_mut() {
            forget(slot);
        }
        shard.remove();
    }

    /// Drops what this instance holds of `client`'s keys (its client part as a key holds it)
    /// under any options and scope of `limiter`.
    pub(crate) fn forget_client(&self, limiter: &str, client: &str) {
        self.inner
            .slots
            .remove_client(limiter, client.as_bytes(), |slot| forget(slot));
    }

    /// Drops what this instance holds of every key.
    pub(crate) fn clear(&self) {
        self.inner.slots.for_each(|slot| forget(slot));
        self.inner.slots.clear();
    }

    fn lock(&self, keys: &dyn KeyText) -> Locked<'_, Arc<Slot>> {
        self.inner.slots.lock_first(keys, self.inner.head)
    }

    /// The slot of `keys`' first key, made if need be.
    fn slot(&self, keys: &dyn KeyText, now: Instant) -> Arc<Slot> {
        let mut shard = self.lock(keys);
        shard.sweep_if_due(|slot| slot.forget_at().is_none_or(|at| at > now));
        if let Some(slot) = shard.get_mut() {
            return Arc::clone(slot);
        }
        shard.make_room(now, |slot| slot.forget_at().unwrap_or(now + BUSY));
        let slot = Arc::new(Slot::new(now));
        shard.insert(Arc::clone(&slot));
        slot
    }
}

fn forget(slot: &Slot) {
    let mut state = slot.state();
    state.held.forget();
    state.denial = None;
}

/// What a request that found no unit comes to on joining its key's queue.
enum Joined {
    Answered(Outcome),
    /// The store is known to fail.
    Failed(Error),
    /// Not batched: one unit taken exactly.
    Exact,
    Waiting(oneshot::Receiver<Served>),
}

/// One unit of `call`'s key taken exactly, within `left`.
async fn exact_take(
    redis: &RedisBackend,
    call: Call<'_>,
    left: Duration,
) -> Result<Outcome, Error> {
    let call = Call {
        cost: Charge::Take(1),
        ..call
    };
    tokio::time::timeout(left, redis.eval(call))
        .await
        .map_err(|_| Error::Timeout(redis.timeout()))?
}

/// The limit's denial of a request this instance could not serve a unit in time: with the
/// last grant's numbers, or, before any, a bare `retry-after: 0`. Its retry-after is 0, so no
/// deny cache holds it: a burst that fills a key's queue must not deny the key to everyone
/// for a second.
fn refused(held: &mut held::Held, opts: u64, now: Instant) -> Outcome {
    held.refused(opts, now).unwrap_or_else(|| {
        Outcome::new(
            Decision::Deny,
            vec![(RETRY_AFTER, HeaderValue::from_static("0"))],
        )
    })
}
