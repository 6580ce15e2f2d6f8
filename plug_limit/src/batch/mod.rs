//! Local batches for hot keys (see [`LocalBatches`](crate::LocalBatches)): one limiter's
//! batches at this instance, one per key, and the reservations that fill them.
//!
//! A request takes a unit of its key's batch without waiting when there is one
//! ([`Batches::spend`]); otherwise it reserves the next batch ([`Batches::reserve`]), one
//! reservation per key at a time, the requests behind it waiting their turn and taking from
//! what it brought. What a batch holds when it goes idle goes back to Redis (`give_back.rs`).

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use deadpool_redis::redis::Value;

use self::held::Held;
use crate::backend::sharded::{Locked, Sharded};
use crate::backend::{Call, KeyText, Program, RedisBackend, head_len};
use crate::config::LocalBatches;
use crate::error::Error;
use crate::error::ReplyError;
use crate::limit::Charge;
use crate::limit::Opt;
use crate::outcome::Outcome;

mod give_back;
mod held;

const SHARDS: usize = 16;

/// A key's batch is forgotten this long after it was last used or could be spent.
const FORGET: Duration = Duration::from_secs(10);

/// The shortest window batched: a grant's units are spent until a second before its window
/// may end (the reset is rounded to the second), so a shorter window leaves no time to spend.
const MIN_WINDOW_S: i64 = 2;

/// One limiter's batches at this instance.
pub(crate) struct Batches {
    inner: Arc<Inner>,
}

struct Inner {
    settings: LocalBatches,
    /// The limiter's program, for the give-backs, which outlive the request.
    program: Program,
    /// The check's timeout: how long a request waits for its key's reservation, and how
    /// long a give-back may take to land.
    timeout: Duration,
    /// By key (the digest of its text past the `{prefix}:{TAG}:` head, as the memory backend
    /// keys it).
    slots: Sharded<Arc<Slot>>,
    /// The length of its keys' head.
    head: usize,
}

/// One key's batch, and the turn to reserve the next one.
pub(crate) struct Slot {
    held: Mutex<Held>,
    reserving: tokio::sync::Mutex<()>,
}

impl Slot {
    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        // A panic while holding it leaves a consistent batch: every update is one assignment.
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// When the slot may be forgotten.
    fn forget_at(&self) -> Instant {
        self.held().last_active() + FORGET
    }
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
            inner: Arc::new(Inner {
                settings,
                program,
                timeout,
                slots: Sharded::bounded(SHARDS, capacity),
                head: head_len(prefix),
            }),
        }
    }

    /// A unit of `key`'s batch for a request of the limit `opts` (a hash of its options), and
    /// its answer; else the key's slot, to reserve on.
    pub(crate) fn spend(&self, keys: &dyn KeyText, opts: u64) -> Result<Outcome, Arc<Slot>> {
        let now = Instant::now();
        let slot = self.slot(keys, now);
        let mut held = slot.held();
        held.note();
        if let Some(outcome) = held.take(opts, now) {
            return Ok(outcome);
        }
        drop(held);
        Err(slot)
    }

    /// Reserves `call`'s key a batch in one call of its script, sized by the key's rate, and
    /// spends its first unit on this request; or, when another request's reservation for the
    /// key brought units meanwhile, one of those. The wait for its turn and the call share the
    /// check's timeout. A denial is Redis's own, as without batches.
    ///
    /// The call is a plain take of one unit, leaving the slot as it is, when a batch could not
    /// be spent or would waste units: a window too short to spend one in (under 2 s), a slot
    /// a reset dropped while this request waited, or one holding another limit's batch.
    pub(crate) async fn reserve(
        &self,
        slot: Arc<Slot>,
        redis: &Arc<RedisBackend>,
        call: Call<'_>,
        opts: u64,
    ) -> Result<Outcome, Error> {
        let timeout = self.inner.timeout;
        let started = Instant::now();
        let _turn = tokio::time::timeout(timeout, slot.reserving.lock())
            .await
            .map_err(|_| Error::Timeout(timeout))?;
        let (size, exact) = {
            let mut held = slot.held();
            let now = Instant::now();
            if let Some(outcome) = held.take(opts, now) {
                return Ok(outcome);
            }
            let size = held.size(self.inner.settings.max, self.inner.settings.every, now);
            let exact = held.is_forgotten()
                || held.holds_other(opts)
                || window_s(call.opts).is_none_or(|window| window < MIN_WINDOW_S);
            (if exact { 1 } else { size }, exact)
        };
        // A batch of one is a plain take: a cold key's call is the one it makes without batches.
        let cost = if size == 1 {
            Charge::Take(1)
        } else {
            Charge::UpTo(size)
        };
        let sent_at = Instant::now();
        let left = timeout.saturating_sub(started.elapsed());
        let outcome = tokio::time::timeout(left, redis.eval(Call { cost, ..call }))
            .await
            .map_err(|_| Error::Timeout(timeout))??;
        if exact {
            return Ok(outcome);
        }
        let granted = match cost {
            Charge::UpTo(_) => granted(&outcome)?,
            _ => u32::from(outcome.is_allowed()),
        };
        if granted == 0 {
            // Redis's answer, as a take's: the granted count is the batch's business.
            let decision = outcome.decision();
            return Ok(outcome.answered(decision));
        }
        let (answer, leftover, generation) = {
            let mut held = slot.held();
            let (answer, leftover) = held.grant(opts, &outcome, granted, sent_at, Instant::now());
            // Units of a window that may have ended by the time they land are not given back.
            let leftover = if held.can_give_back(Instant::now(), timeout) {
                leftover
            } else {
                0
            };
            (answer, leftover, held.generation())
        };
        let owner = give_back::Owner {
            inner: Arc::clone(&self.inner),
            redis: Arc::clone(redis),
            key: call.keys.all().to_vec(),
            opts: call.opts.to_vec(),
        };
        if leftover > 0 {
            owner.refund(leftover);
        } else if granted > 1 {
            owner.watch(Arc::clone(&slot), generation);
        }
        Ok(answer)
    }

    /// Drops what this instance holds of `key` (a reset): a unit of the window that was reset
    /// must not be spent in the next. Other instances' batches end with their windows.
    pub(crate) fn forget(&self, keys: &dyn KeyText) {
        let mut shard = self.lock(keys);
        if let Some(slot) = shard.get_mut() {
            slot.held().forget();
        }
        shard.remove();
    }

    /// Drops what this instance holds of every key.
    pub(crate) fn clear(&self) {
        self.inner.slots.for_each(|slot| slot.held().forget());
        self.inner.slots.clear();
    }

    fn lock(&self, keys: &dyn KeyText) -> Locked<'_, Arc<Slot>> {
        self.inner.slots.lock_first(keys, self.inner.head)
    }

    /// The slot of `keys`' first key, made if need be.
    fn slot(&self, keys: &dyn KeyText, now: Instant) -> Arc<Slot> {
        let mut shard = self.lock(keys);
        shard.sweep_if_due(|slot| slot.forget_at() > now);
        if let Some(slot) = shard.get_mut() {
            return Arc::clone(slot);
        }
        shard.make_room(now, |slot| slot.forget_at());
        let slot = Arc::new(Slot {
            held: Mutex::new(Held::new(now)),
            reserving: tokio::sync::Mutex::new(()),
        });
        shard.insert(Arc::clone(&slot));
        slot
    }
}

/// The window of a fixed_window or token_bucket limit, in seconds: its second option.
fn window_s(opts: &[Opt]) -> Option<i64> {
    match opts.get(1)? {
        Opt::Int(window) => Some(*window),
        text => text.as_str()?.parse().ok(),
    }
}

/// The units a `~n` call granted: its reply's first value after the headers.
fn granted(outcome: &Outcome) -> Result<u32, Error> {
    match outcome.extra().first() {
        Some(Value::Int(units)) => u32::try_from(*units).map_err(|_| bad_grant()),
        _ => Err(bad_grant()),
    }
}

fn bad_grant() -> Error {
    Error::Reply(ReplyError::NoGrant)
}
