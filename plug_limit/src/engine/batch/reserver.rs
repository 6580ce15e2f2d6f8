//! A key's one reservation on its way: sent for the requests waiting on the key, sized by its
//! rate and their number, and answered to every one of them when it lands.

use std::sync::Arc;
use std::time::{Duration, Instant};

use deadpool_redis::redis::Value;

use super::denial::{Denial, Refill};
use super::give_back;
use super::inner::BatchesInner;
use super::slot::{Served, Slot, State};
use crate::backend::{Call, RedisBackend};
use crate::error::{Error, ReplyError};
use crate::limit::{Charge, Opt};
use crate::outcome::{Decision, Outcome};

/// What a reservation needs once the request that started it is gone: it outlives every
/// request it serves, so a request that gives up never cuts a call short (what Redis counted
/// reaches the batch).
pub(super) struct Reserver {
    pub(super) inner: Arc<BatchesInner>,
    pub(super) redis: Arc<RedisBackend>,
    pub(super) slot: Arc<Slot>,
    pub(super) key: Vec<String>,
    pub(super) opts: Vec<Opt>,
    /// The limit's options as batches tell limits apart.
    pub(super) opts_id: u64,
    pub(super) refill: Refill,
    /// Set once it has answered every request waiting: until then, dropping it (its task
    /// dropped unpolled or mid-call as its runtime shuts down, or a panic) answers for it.
    pub(super) done: bool,
}

impl Drop for Reserver {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        // Never left reserving: the key's requests would wait on a call nobody makes.
        let error = Error::Timeout(self.inner.timeout);
        self.slot.state().reservation_failed(error, Instant::now());
    }
}

/// What became of one reservation.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Landed {
    /// Every waiting request is answered, and the slot has no reservation on its way; then
    /// what the grant left goes back.
    Done(Leftover),
    /// Requests still wait and the limit has units left: reserve again for them.
    Again,
}

/// What a landed grant leaves to give back to Redis, once the slot's lock is let go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Leftover {
    /// Nothing held, or nothing whose give-back could land within its window.
    Nothing,
    /// Units whose window ends too soon to spend them here, taken out of the batch: given back
    /// now.
    Refund(u32),
    /// The grant of this number still holds units: watched, to give back what it holds once
    /// it goes unused.
    Watch(u64),
}

/// What a reservation's landing reads of it: the part of a [`Reserver`] that decides, under
/// the slot's lock, apart from the call to Redis and the tasks that give units back, so that
/// it runs without a store or a runtime.
pub(super) struct Landing<'r> {
    pub(super) inner: &'r BatchesInner,
    /// The limit's options as batches tell limits apart.
    pub(super) opts_id: u64,
    pub(super) refill: &'r Refill,
}

impl Reserver {
    /// Sends the reservation, in the background.
    pub(super) fn start(self) {
        tokio::spawn(self.run());
    }

    /// Reserves until every request waiting on the key is answered.
    async fn run(mut self) {
        let mut first = true;
        loop {
            let (size, sent_at) = {
                let mut state = self.slot.state();
                let now = Instant::now();
                let settings = &self.inner.settings;
                let waiting = u32::try_from(state.waiting.len()).unwrap_or(u32::MAX);
                // Enough for `every` at the key's rate, and for the time the next one takes
                // to land, reserved ahead.
                let span = settings.every + state.ahead();
                let size = state
                    .held
                    .size(settings.max, settings.every, span, now)
                    .max(waiting)
                    .clamp(1, settings.max);
                // The first round keeps the time its starter marked it at, which a request
                // waiting on it reads: sent no later than that request came.
                let sent_at = match state.reserving {
                    Some((_, at)) if first => at,
                    _ => now,
                };
                first = false;
                state.reserving = Some((self.opts_id, sent_at));
                (size, sent_at)
            };
            let call = Call {
                program: &self.inner.program,
                keys: &self.key,
                opts: &self.opts,
                // Sent to Redis, whose script reads the options itself.
                read_ahead: None,
                cost: Charge::UpTo(size),
                lease: None,
            };
            // Bounded by the backend's timeout, connection included.
            let result = self.redis.eval(call).await;
            let landed = {
                let mut state = self.slot.state();
                self.landing().landed(&mut state, result, size, sent_at)
            };
            if let Landed::Done(leftover) = landed {
                self.done = true;
                self.give_back(leftover);
                return;
            }
        }
    }

    fn landing(&self) -> Landing<'_> {
        Landing {
            inner: &self.inner,
            opts_id: self.opts_id,
            refill: &self.refill,
        }
    }

    /// Gives back what a grant left, in the background.
    fn give_back(&self, leftover: Leftover) {
        let owner = || give_back::Owner {
            inner: Arc::clone(&self.inner),
            redis: Arc::clone(&self.redis),
            key: self.key.clone(),
            opts: self.opts.clone(),
        };
        match leftover {
            Leftover::Nothing => {}
            Leftover::Refund(units) => owner().refund(units),
            Leftover::Watch(generation) => owner().watch(Arc::clone(&self.slot), generation),
        }
    }
}

impl Landing<'_> {
    /// Answers the waiting requests by what the reservation of `size` sent at `sent_at` came
    /// back with.
    pub(super) fn landed(
        &self,
        state: &mut State,
        result: Result<Outcome, Error>,
        size: u32,
        sent_at: Instant,
    ) -> Landed {
        let now = Instant::now();
        let (outcome, granted, window_ms) = match result.and_then(|outcome| {
            let (granted, window_ms) = granted(&outcome)?;
            Ok((outcome, granted, window_ms))
        }) {
            Ok(landed) => landed,
            Err(error) => {
                state.reservation_failed(error, now);
                // A denial past its time, which this reservation was to follow, holds no more.
                if state
                    .denial
                    .as_ref()
                    .is_some_and(|denial| now >= denial.until())
                {
                    state.denial = None;
                }
                return Landed::Done(Leftover::Nothing);
            }
        };
        state.failed = None;
        state.probing = false;
        state.measured(now.saturating_duration_since(sent_at));
        if state.held.is_forgotten() {
            // Units of a window a reset ended: each request takes one of the new window.
            state.reservation_ended();
            state.answer_all(|| Served::Exact);
            return Landed::Done(Leftover::Nothing);
        }
        let window_left = Duration::from_millis(window_ms);
        if granted == 0 {
            // Redis's own denial, as a take's: every waiting request gets it, and the key
            // holds it until the limit could admit again.
            self.deny_all(
                state,
                outcome.answered(Decision::Deny),
                window_left,
                sent_at,
            );
            return Landed::Done(Leftover::Nothing);
        }
        let generation = state
            .held
            .grant(self.opts_id, &outcome, granted, window_ms, sent_at, now);
        let spent = state.held.spent();
        state.share.answered(spent, now);
        let ahead = state.ahead();
        state.held.plan_ahead(ahead);
        state.serve(self.opts_id, now);
        if granted == size {
            state.denial = None;
            if !state.waiting.is_empty() {
                return Landed::Again;
            }
        } else {
            // Redis had fewer units than asked: the limit is spent. The requests still
            // waiting are denied with the grant's own numbers, as a take after it would be,
            // and so is every request once the batch is spent, until the limit could admit
            // again.
            self.deny_all(
                state,
                outcome.answered(Decision::Deny),
                window_left,
                sent_at,
            );
        }
        state.reservation_ended();
        Landed::Done(self.leftover(state, generation, now, sent_at, window_left))
    }

    /// What the grant `generation` left unspent at `now` goes back to Redis while its window
    /// (`window_left` after `sent_at`) outlasts the give-back's way there; else the key's
    /// batch is watched, to give back what it holds once it goes unused.
    fn leftover(
        &self,
        state: &mut State,
        generation: u64,
        now: Instant,
        sent_at: Instant,
        window_left: Duration,
    ) -> Leftover {
        let leftover = state.held.leftover(generation, now);
        if leftover > 0 {
            // Units of a window that may have ended by the time they land are not given back.
            if now + self.inner.timeout < sent_at + window_left {
                // The limit has them again: a denial of the partial grant no longer holds.
                state.denial = None;
                return Leftover::Refund(leftover);
            }
        } else if state.held.holds(generation) {
            return Leftover::Watch(generation);
        }
        Leftover::Nothing
    }

    /// Answers every waiting request with `denial` (a denial of this limit Redis answered for
    /// a call sent at `sent_at`, its window having `window_left` to run), and holds it for the
    /// requests to come once the batch is spent: at least `every`, the time a batch aims to
    /// last, so a denied key costs at most one call every so long.
    fn deny_all(
        &self,
        state: &mut State,
        denial: Outcome,
        window_left: Duration,
        sent_at: Instant,
    ) {
        let now = Instant::now();
        // Half the round trip, a little short: the next reservation reaches Redis as the
        // window ends.
        let lead = state.round_trip.unwrap_or_default() * 2 / 5;
        let hold = self.refill.hold(denial.report(), window_left, lead);
        let until = (sent_at + hold).max(now + self.inner.settings.every);
        let mut denial = Denial::new(self.opts_id, denial, now, until);
        state.answer_all(|| Served::Answer(denial.answer(now)));
        state.denial = Some(denial);
        state.reservation_ended();
    }
}

/// The units a `~n` call granted and the milliseconds left of their window: its reply's two
/// values after the headers.
fn granted(outcome: &Outcome) -> Result<(u32, u64), Error> {
    match outcome.extra() {
        [Value::Int(units), Value::Int(window_ms), ..] => Ok((
            u32::try_from(*units).map_err(|_| bad_grant())?,
            u64::try_from(*window_ms).map_err(|_| bad_grant())?,
        )),
        _ => Err(bad_grant()),
    }
}

fn bad_grant() -> Error {
    Error::Reply(ReplyError::NoGrant)
}
