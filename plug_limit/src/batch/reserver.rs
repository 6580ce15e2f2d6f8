//! A key's one reservation on its way: sent for the requests waiting on the key, sized by its
//! rate and their number, and answered to every one of them when it lands.

use std::sync::Arc;
use std::time::Instant;

use deadpool_redis::redis::Value;

use super::Inner;
use super::denial::{Denial, Refill};
use super::give_back;
use super::slot::{Served, Slot, State};
use crate::backend::{Call, RedisBackend};
use crate::error::{Error, ReplyError};
use crate::limit::{Charge, Opt};
use crate::outcome::{Decision, Outcome};

/// What a reservation needs once the request that started it is gone: it outlives every
/// request it serves, so a request that gives up never cuts a call short (what Redis counted
/// reaches the batch).
pub(super) struct Reserver {
    pub(super) inner: Arc<Inner>,
    pub(super) redis: Arc<RedisBackend>,
    pub(super) slot: Arc<Slot>,
    pub(super) key: Vec<String>,
    pub(super) opts: Vec<Opt>,
    /// The limit's options as batches tell limits apart.
    pub(super) opts_id: u64,
    pub(super) refill: Refill,
}

/// What became of one reservation.
enum Landed {
    /// Every waiting request is answered, and the slot has no reservation on its way.
    Done,
    /// Requests still wait and the limit has units left: reserve again for them.
    Again,
}

impl Reserver {
    /// Sends the reservation, in the background.
    pub(super) fn start(self) {
        tokio::spawn(self.run());
    }

    /// Reserves until every request waiting on the key is answered.
    async fn run(self) {
        loop {
            let (size, sent_at) = {
                let mut state = self.slot.state();
                let now = Instant::now();
                let settings = &self.inner.settings;
                let waiting = u32::try_from(state.waiting.len()).unwrap_or(u32::MAX);
                let size = state
                    .held
                    .size(settings.max, settings.every, now)
                    .max(waiting)
                    .clamp(1, settings.max);
                state.reserving = Some((self.opts_id, now));
                (size, now)
            };
            // A batch of one is a plain take: a cold key's call is the one it makes without
            // batches.
            let cost = if size == 1 {
                Charge::Take(1)
            } else {
                Charge::UpTo(size)
            };
            let call = Call {
                program: &self.inner.program,
                keys: &self.key,
                opts: &self.opts,
                // Sent to Redis, whose script reads the options itself.
                read_ahead: None,
                cost,
                lease: None,
            };
            // Bounded by the backend's timeout, connection included.
            let result = self.redis.eval(call).await;
            let landed = {
                let mut state = self.slot.state();
                self.landed(&mut state, result, size, sent_at)
            };
            if let Landed::Done = landed {
                return;
            }
        }
    }

    /// Answers the waiting requests by what the reservation of `size` sent at `sent_at` came
    /// back with.
    fn landed(
        &self,
        state: &mut State,
        result: Result<Outcome, Error>,
        size: u32,
        sent_at: Instant,
    ) -> Landed {
        let now = Instant::now();
        let outcome = match result {
            Ok(outcome) => outcome,
            Err(error) => {
                state.reserving = None;
                state.answer_all(|| Served::Failed(error.duplicate()));
                return Landed::Done;
            }
        };
        let granted = match (size, granted(&outcome)) {
            (1, _) => u32::from(outcome.is_allowed()),
            (_, Ok(granted)) => granted,
            (_, Err(error)) => {
                state.reserving = None;
                state.answer_all(|| Served::Failed(error.duplicate()));
                return Landed::Done;
            }
        };
        state.measured(now.saturating_duration_since(sent_at));
        if state.held.is_forgotten() {
            // Units of a window a reset ended: each request takes one of the new window.
            state.reserving = None;
            state.answer_all(|| Served::Exact);
            return Landed::Done;
        }
        if granted == 0 {
            // Redis's own denial, as a take's: every waiting request gets it, and the key
            // holds it until the limit could admit again.
            self.deny_all(state, outcome.answered(Decision::Deny), now);
            return Landed::Done;
        }
        state
            .held
            .grant(self.opts_id, &outcome, granted, sent_at, now);
        state.serve(self.opts_id, now);
        if !state.waiting.is_empty() {
            if granted == size {
                return Landed::Again;
            }
            // Redis had fewer units than asked: the limit is spent, and the rest are denied
            // with the grant's own numbers, as a take after it would be.
            self.deny_all(state, outcome.answered(Decision::Deny), now);
            return Landed::Done;
        }
        state.reserving = None;
        let leftover = state.held.leftover(now);
        let owner = || give_back::Owner {
            inner: Arc::clone(&self.inner),
            redis: Arc::clone(&self.redis),
            key: self.key.clone(),
            opts: self.opts.clone(),
        };
        if leftover > 0 {
            // Units of a window that may have ended by the time they land are not given back.
            if state.held.can_give_back(now, self.inner.timeout) {
                owner().refund(leftover);
            }
        } else if state.held.holds_units() {
            owner().watch(Arc::clone(&self.slot), state.held.generation());
        }
        Landed::Done
    }

    /// Answers every waiting request with `denial` (a denial of this limit Redis answered), and
    /// holds it for the requests to come.
    fn deny_all(&self, state: &mut State, denial: Outcome, now: Instant) {
        let hold = self.refill.hold(denial.report(), self.inner.settings.every);
        let mut denial = Denial::new(self.opts_id, denial, now, hold);
        state.answer_all(|| Served::Answer(denial.answer(now)));
        state.denial = Some(denial);
        state.reserving = None;
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
