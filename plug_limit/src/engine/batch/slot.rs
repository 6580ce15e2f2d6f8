//! One key's slot at this instance: its batch, the denial it holds, and the requests waiting
//! for its next reservation, answered first come, first served.
//!
//! Everything here is one lock's worth of state, changed by the requests of the key and by
//! the one reservation on its way (`reserver.rs`); nothing here waits or calls Redis.

use std::collections::VecDeque;
use std::sync::PoisonError;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::denial::Denial;
use super::held::Held;
use super::share::Share;
use crate::error::Error;
use crate::outcome::Outcome;
use crate::sync::{Mutex, MutexGuard};

/// A key's batch is forgotten this long after it was last used or could be spent.
const FORGET: Duration = Duration::from_secs(10);

/// One key's batch, the denial it holds, and the requests waiting for units.
pub(crate) struct Slot {
    state: Mutex<State>,
}

impl Slot {
    pub(super) fn new(now: Instant) -> Self {
        Self {
            state: Mutex::new(State {
                held: Held::new(now),
                denial: None,
                reserving: None,
                waiting: VecDeque::new(),
                round_trip: None,
                share: Share::new(now),
                failed: None,
                probing: false,
            }),
        }
    }

    pub(super) fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding it leaves a consistent slot: every update is a few assignments
        // that leave it valid between them.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// When the slot may be forgotten: `FORGET` after it was last used, could last be spent,
    /// or its denial ends; never (`None`) while a reservation is on its way or a request waits.
    pub(super) fn forget_at(&self) -> Option<Instant> {
        let state = self.state();
        if state.reserving.is_some() || !state.waiting.is_empty() {
            return None;
        }
        let active = state.held.last_active();
        let denied = state.denial.as_ref().map_or(active, Denial::until);
        Some(active.max(denied) + FORGET)
    }
}

/// A slot's state, under its one lock.
pub(super) struct State {
    pub(super) held: Held,
    /// The last denial of the key, held until the limit could admit again.
    pub(super) denial: Option<Denial>,
    /// The reservation on its way: the limit (a hash of its options) it is for, and when it
    /// was sent.
    pub(super) reserving: Option<(u64, Instant)>,
    /// The requests waiting for units, oldest first.
    pub(super) waiting: VecDeque<Waiter>,
    /// The round trip of this key's reservations, smoothed: how long one is expected to take.
    pub(super) round_trip: Option<Duration>,
    /// This instance's recent share of the key's limit.
    pub(super) share: Share,
    /// Why the last reservation failed, and when, until one lands: the store is known to
    /// fail, and a request is answered by that at once rather than wait on the next one.
    pub(super) failed: Option<(Error, Instant)>,
    /// The reservation on its way was started to find out whether the store answers again:
    /// requests do not wait on it.
    pub(super) probing: bool,
}

/// A request waiting for its key's next reservation.
pub(super) struct Waiter {
    pub(super) answer: oneshot::Sender<Served>,
}

/// How a waiting request is answered.
#[derive(Debug)]
pub(super) enum Served {
    /// By the limit: a unit of the batch (allowed), or the limit's denial.
    Answer(Outcome),
    /// The reservation failed: the request follows its failure policy, as any check.
    Failed(Error),
    /// The key was reset while the reservation was on its way: what it brought is of a
    /// window that no longer counts, and the request takes its unit of the new one exactly.
    Exact,
}

impl State {
    /// No reservation is on its way any more, nor a probe of a failing Redis.
    pub(super) fn reservation_ended(&mut self) {
        self.reserving = None;
        self.probing = false;
    }

    /// The reservation failed with `error` at `now`: every waiting request is answered with
    /// it, and the key remembers it.
    pub(super) fn reservation_failed(&mut self, error: Error, now: Instant) {
        self.reservation_ended();
        self.answer_all(|| Served::Failed(error.duplicate()));
        self.failed = Some((error, now));
    }

    /// The held denial's answer to a request of the limit `opts`, while it holds: until its
    /// time, and past it while the reservation sent ahead of that time is on its way (what it
    /// brings replaces the denial; a request meanwhile would only wait to learn it).
    pub(super) fn denied(&mut self, opts: u64, now: Instant) -> Option<Outcome> {
        let denial = self.denial.as_mut()?;
        if denial.opts() != opts {
            return None;
        }
        let ahead = self
            .reserving
            .is_some_and(|(reserving, _)| reserving == opts);
        if now >= denial.until() && !ahead {
            self.denial = None;
            return None;
        }
        Some(denial.answer(now))
    }

    /// Whether to send the next reservation ahead now, for the limit `opts`, none being on its
    /// way: the held denial's time has come (it ends a little short of the limit's, so the
    /// reservation reaches Redis as the limit admits again; the denial answers until it
    /// lands), or, without one, the batch being spent runs low.
    #[inline(always)]
    pub(super) fn wants_ahead(&self, opts: u64, now: Instant) -> bool {
        let due = match &self.denial {
            Some(denial) if denial.opts() == opts => now >= denial.until(),
            _ => self.held.wants_ahead(),
        };
        // A store known to fail is probed by the requests that find no unit.
        due && self.reserving.is_none() && self.failed.is_none()
    }

    /// Answers the waiting requests, oldest first, from the units just granted for the limit
    /// `opts` (at `now`, the grant's arrival: Redis has just counted them, so they are spent
    /// at once, however soon the window ends). A request that has gone (its client hung up)
    /// takes nothing.
    pub(super) fn serve(&mut self, opts: u64, now: Instant) {
        while let Some(waiter) = self.waiting.pop_front() {
            if waiter.answer.is_closed() {
                continue;
            }
            let Some(outcome) = self.held.take_granted(opts, now) else {
                self.waiting.push_front(waiter);
                return;
            };
            if waiter.answer.send(Served::Answer(outcome)).is_err() {
                // Gone between the look and the answer: its unit stays in the batch.
                self.held.put_back();
            }
        }
    }

    /// Answers every waiting request with `served` made afresh for each.
    pub(super) fn answer_all(&mut self, mut served: impl FnMut() -> Served) {
        for waiter in self.waiting.drain(..) {
            let _ = waiter.answer.send(served());
        }
    }

    /// How long a reservation is expected to take to land: the round trip and half again,
    /// for its jitter (nothing before one was measured).
    pub(super) fn ahead(&self) -> Duration {
        self.round_trip.unwrap_or_default() * 3 / 2
    }

    /// Counts a reservation's round trip into the smoothed one (a weight of 1/4 for the
    /// newest: it follows a link that slows down within a few reservations).
    pub(super) fn measured(&mut self, took: Duration) {
        self.round_trip = Some(match self.round_trip {
            None => took,
            Some(smoothed) => (smoothed * 3 + took) / 4,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::{Builtin, Field, Report, Runtime};
    use crate::outcome::{Decision, Names};

    fn granted() -> Outcome {
        let values = [100, 60, 90].map(Field::Int);
        Outcome::reported(
            Decision::Allow,
            Names::Builtin(Builtin::FixedWindow.headers()),
            Report::from_values(&values, 0).unwrap(),
            Vec::new(),
        )
    }

    fn waiter(state: &mut State) -> oneshot::Receiver<Served> {
        let (answer, receiver) = oneshot::channel();
        state.waiting.push_back(Waiter { answer });
        receiver
    }

    #[test]
    fn waiters_are_served_in_order_and_a_gone_one_takes_nothing() {
        let now = Instant::now();
        let slot = Slot::new(now);
        let mut state = slot.state();
        let mut first = waiter(&mut state);
        drop(waiter(&mut state));
        let mut third = waiter(&mut state);
        let mut fourth = waiter(&mut state);
        state.held.grant(7, &granted(), 2, 60_000, now, now);
        state.serve(7, now);
        let remaining = |served: Served| match served {
            Served::Answer(outcome) => outcome.report().unwrap().remaining(),
            other => panic!("{other:?}"),
        };
        // Both units went to the first and third: the second had gone.
        assert_eq!(remaining(first.try_recv().unwrap()), 91);
        assert_eq!(remaining(third.try_recv().unwrap()), 90);
        assert!(fourth.try_recv().is_err(), "no unit left for the fourth");
        assert_eq!(state.waiting.len(), 1);
    }

    #[test]
    fn the_round_trip_follows_a_slower_link() {
        let slot = Slot::new(Instant::now());
        let mut state = slot.state();
        state.measured(Duration::from_millis(4));
        assert_eq!(state.round_trip, Some(Duration::from_millis(4)));
        state.measured(Duration::from_millis(100));
        assert_eq!(state.round_trip, Some(Duration::from_millis(28)));
    }
}
