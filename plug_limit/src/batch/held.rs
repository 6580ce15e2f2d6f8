//! One key's batch at this instance: the units it holds, until when they may be spent, what
//! its answers say, and the key's observed rate, which sizes the next batch.

use std::time::{Duration, Instant};

use crate::outcome::{Decision, Outcome};

/// Redis rounds a reset to the nearest second: the window may end this much before it says.
pub(super) const ROUNDING: Duration = Duration::from_millis(500);
/// Spending stops this much earlier still, for the two clocks' drift and this process's
/// scheduling: a unit is never spent where the window may already be over.
const MARGIN: Duration = Duration::from_millis(500);

/// A key's batch, and the requests seen since its last reservation.
#[derive(Debug)]
pub(super) struct Held {
    /// Which limit (a hash of its options) the units are of.
    opts: u64,
    units: u32,
    /// No unit is spent from here on.
    until: Instant,
    /// The earliest the window may end: nothing is given back unless it lands before.
    window_ends: Instant,
    /// The grant's outcome, and its remaining and reset, which the answers count from.
    granted: Option<Outcome>,
    remaining: i64,
    reset: u64,
    granted_at: Instant,
    /// Whole seconds from the grant to the last answer, and when that second began and the
    /// next one begins: an answer within them does not measure the time since the grant
    /// again.
    passed: u64,
    this_second: Instant,
    next_second: Instant,
    last_spent: Instant,
    /// Requests seen since the last reservation began, and when it began.
    seen: u32,
    since: Instant,
    /// Whether the grant said when its window resets.
    has_reset: bool,
    /// Bumped by every grant: a give-back acts only on its own batch.
    generation: u64,
    /// The key was reset: whatever this slot holds or is granted is of a window that no
    /// longer counts, neither to spend nor to give back.
    forgotten: bool,
}

/// What a batch's give-back finds.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum GiveBack {
    /// The batch is spent or replaced: nothing left to do.
    Done,
    /// Still in use: look again later.
    Later,
    /// Units to give back now; taken out of the batch.
    Units(u32),
}

impl Held {
    pub(super) fn new(now: Instant) -> Self {
        Self {
            opts: 0,
            units: 0,
            until: now,
            window_ends: now,
            granted: None,
            remaining: 0,
            reset: 0,
            granted_at: now,
            passed: 0,
            this_second: now,
            next_second: now,
            last_spent: now,
            seen: 0,
            since: now,
            has_reset: false,
            generation: 0,
            forgotten: false,
        }
    }

    /// Drops the units held, and any a reservation in flight brings (see `forgotten`).
    pub(super) fn forget(&mut self) {
        self.units = 0;
        self.forgotten = true;
    }

    /// Whether a reset dropped the slot: what it is granted is of no window that counts.
    pub(super) fn is_forgotten(&self) -> bool {
        self.forgotten
    }

    /// Whether it holds units of a limit other than `opts` that a grant would replace.
    pub(super) fn holds_other(&self, opts: u64) -> bool {
        self.units > 0 && self.opts != opts
    }

    /// Counts one request toward the key's rate.
    pub(super) fn note(&mut self) {
        self.seen = self.seen.saturating_add(1);
    }

    /// One unit of the batch for a request of the limit `opts`, and its answer; `None` when
    /// the batch is of another limit, spent, or past its time.
    pub(super) fn take(&mut self, opts: u64, now: Instant) -> Option<Outcome> {
        if self.units == 0 || self.opts != opts || now >= self.until {
            return None;
        }
        self.units -= 1;
        self.last_spent = now;
        Some(self.answer(now))
    }

    /// How many units to ask for, 1..=`max`: the key's rate times `every`. Over a period
    /// shorter than `every`, the requests seen so far in it stand for the rate (short of it,
    /// so a batch grows by doubling at most); a first request, or a key seen once in a while,
    /// asks for 1.
    pub(super) fn size(&mut self, max: u32, every: Duration, now: Instant) -> u32 {
        let elapsed = now.duration_since(self.since);
        let mut wanted = f64::from(self.seen);
        if elapsed >= every {
            wanted *= every.as_secs_f64() / elapsed.as_secs_f64();
            self.seen = 0;
            self.since = now;
        }
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // clamped below
        let wanted = wanted.ceil().min(f64::from(max)) as u32;
        wanted.max(1)
    }

    /// Holds the `granted` units Redis answered `outcome` for (a call sent at `sent_at`,
    /// arrived at `now`), none of them spent yet: the requests waiting for them take theirs
    /// with [`take_granted`](Self::take_granted), then [`leftover`](Self::leftover) says what
    /// cannot be spent here. A slot a reset dropped holds nothing of it.
    pub(super) fn grant(
        &mut self,
        opts: u64,
        outcome: &Outcome,
        granted: u32,
        sent_at: Instant,
        now: Instant,
    ) {
        let report = outcome.report();
        let reset = report.and_then(|report| u64::try_from(report.reset()).ok());
        self.generation += 1;
        self.opts = opts;
        let mut kept = outcome.clone().answered(Decision::Allow);
        // Kept without the header values the reply came with: every answer changes the report
        // (its remaining), so each would copy them only to drop them.
        let _ = kept.reported_mut();
        self.granted = Some(kept);
        self.remaining = report.map_or(0, |report| report.remaining());
        self.reset = reset.unwrap_or(0);
        self.has_reset = reset.is_some();
        self.granted_at = now;
        self.passed = 0;
        self.this_second = now;
        self.next_second = now;
        self.last_spent = now;
        // The reset counts from when Redis ran the call, which is after it was sent.
        let lasts = Duration::from_secs(self.reset).saturating_sub(ROUNDING);
        self.window_ends = sent_at + lasts;
        self.until = sent_at + lasts.saturating_sub(MARGIN);
        self.units = if self.forgotten { 0 } else { granted };
    }

    /// A unit of the grant that just arrived, for a request that waited for it: Redis counted
    /// it a round trip ago, so it is spent now however soon the window ends, as an exact
    /// call's answer would be.
    pub(super) fn take_granted(&mut self, opts: u64, now: Instant) -> Option<Outcome> {
        if self.units == 0 || self.opts != opts {
            return None;
        }
        self.units -= 1;
        self.last_spent = now;
        Some(self.answer(now))
    }

    /// Whether the batch holds units.
    pub(super) fn holds_units(&self) -> bool {
        self.units > 0
    }

    /// Gives back to the batch a unit taken for a request that has gone.
    pub(super) fn put_back(&mut self) {
        self.units = self.units.saturating_add(1);
    }

    /// The units of the grant just served that cannot be spent here: all that is left when
    /// its window ends too soon (or says nothing of when it ends); taken out of the batch.
    pub(super) fn leftover(&mut self, now: Instant) -> u32 {
        if !self.has_reset || now >= self.until {
            return std::mem::take(&mut self.units);
        }
        0
    }

    /// A denial, with the last grant's numbers, for a request of the limit `opts` this instance
    /// could not serve a unit in time (its key's queue full, or its timeout spent waiting):
    /// the limit's answer (remaining 0, a retry-after of a second), never the failure
    /// policy's. `None` before any grant: nothing is known of the limit.
    pub(super) fn refused(&mut self, opts: u64, now: Instant) -> Option<Outcome> {
        if self.granted.is_none() || self.opts != opts {
            return None;
        }
        let reset = self.reset.saturating_sub(self.seconds_since_grant(now));
        let mut refused = self.granted.clone()?.answered(Decision::Deny);
        if let Some(reported) = refused.reported_mut() {
            let reset = i64::try_from(reset).unwrap_or(i64::MAX);
            reported.report.refused_from_batch(reset);
        }
        Some(refused)
    }

    /// When the key was last seen or its batch could last be spent.
    pub(super) fn last_active(&self) -> Instant {
        self.since.max(self.last_spent).max(self.until)
    }

    /// The batch's number, to tell it from the next one.
    pub(super) fn generation(&self) -> u64 {
        self.generation
    }

    /// Whether the units still held may be given back (a refund sent now, answered within
    /// `timeout`, lands in the window they were granted in).
    pub(super) fn can_give_back(&self, now: Instant, timeout: Duration) -> bool {
        now + timeout < self.window_ends
    }

    /// The give-back of batch `generation`, looked at now: its units once it has gone unspent
    /// for `idle`, or will be past its time by the next look.
    pub(super) fn give_back(
        &mut self,
        generation: u64,
        now: Instant,
        idle: Duration,
        timeout: Duration,
    ) -> GiveBack {
        if generation != self.generation || self.units == 0 {
            return GiveBack::Done;
        }
        let unspent = now.duration_since(self.last_spent) >= idle;
        let ending = now + idle + timeout >= self.until;
        if unspent || ending {
            return GiveBack::Units(std::mem::take(&mut self.units));
        }
        GiveBack::Later
    }

    /// The answer to a request just admitted from the batch: the grant's report, with
    /// its remaining what Redis had left at the grant plus what this batch still holds, its
    /// reset the grant's counted down by the whole seconds since, and a `retry-after` only once
    /// the batch is spent (the grant's).
    fn answer(&mut self, now: Instant) -> Outcome {
        let reset = self.reset.saturating_sub(self.seconds_since_grant(now));
        let remaining = self.remaining.saturating_add(i64::from(self.units)).max(0);
        let mut answer = self
            .granted
            .clone()
            .unwrap_or_else(|| Outcome::new(Decision::Allow, Vec::new()));
        if let Some(reported) = answer.reported_mut() {
            let reset = i64::try_from(reset).unwrap_or(i64::MAX);
            reported
                .report
                .answered_from_batch(reset, remaining, self.units == 0);
        }
        answer
    }

    /// Whole seconds since the grant, as of `now`: measured again only when `now` is out of
    /// the second the last answer measured, where each answer measured it (a duration's
    /// arithmetic, about as much as the rest of an answer). Either way what
    /// `now.duration_since(granted_at)` holds, a `now` read before the last one's included.
    fn seconds_since_grant(&mut self, now: Instant) -> u64 {
        if now < self.this_second || now >= self.next_second {
            self.passed = now.duration_since(self.granted_at).as_secs();
            let at = |secs: u64| self.granted_at.checked_add(Duration::from_secs(secs));
            // Past what an `Instant` holds (never, in practice): measured every time.
            (self.this_second, self.next_second) =
                match (at(self.passed), at(self.passed.saturating_add(1))) {
                    (Some(this), Some(next)) => (this, next),
                    _ => (now, now),
                };
        }
        self.passed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::{Builtin, Field, Report, Runtime};
    use crate::outcome::Names;

    fn granted(remaining: &str, reset: &str) -> Outcome {
        let number = |text: &str| Field::Int(text.parse().unwrap());
        let values = [number("100"), number(reset), number(remaining), number("1")];
        Outcome::reported(
            Decision::Allow,
            Names::Builtin(Builtin::TokenBucket.headers()),
            Report::from_values(&values, 0).unwrap(),
            Vec::new(),
        )
    }

    fn values(outcome: &Outcome) -> Vec<String> {
        outcome
            .headers()
            .iter()
            .map(|(name, value)| format!("{name}={}", value.to_str().unwrap()))
            .collect()
    }

    #[test]
    fn answers_count_down_from_the_grant() {
        let start = Instant::now();
        let mut held = Held::new(start);
        held.grant(7, &granted("90", "10"), 10, start, start);
        let first = held.take_granted(7, start).unwrap();
        assert_eq!(held.leftover(start), 0);
        assert_eq!(
            values(&first),
            [
                "x-ratelimit-limit=100",
                "x-ratelimit-reset=10",
                "x-ratelimit-remaining=99"
            ]
        );
        // The reset counts whole seconds from the grant, each read when it has passed.
        let resets: Vec<String> = [999, 1_000, 1_999, 998]
            .map(|ms| values(&held.take(7, start + Duration::from_millis(ms)).unwrap())[1].clone())
            .into();
        assert_eq!(
            resets,
            [
                "x-ratelimit-reset=10",
                "x-ratelimit-reset=9",
                "x-ratelimit-reset=9",
                // Read before the answer before it, as another thread may have read it.
                "x-ratelimit-reset=10"
            ]
        );
        let later = start + Duration::from_millis(2_100);
        assert_eq!(held.take(8, later), None, "another limit's batch");
        let second = held.take(7, later).unwrap();
        assert_eq!(
            values(&second),
            [
                "x-ratelimit-limit=100",
                "x-ratelimit-reset=8",
                "x-ratelimit-remaining=94"
            ]
        );
        for _ in 0..3 {
            held.take(7, later).unwrap();
        }
        // The last unit: the grant's retry-after comes back.
        let last = held.take(7, later).unwrap();
        assert_eq!(
            values(&last)[2..],
            ["x-ratelimit-remaining=90", "retry-after=1"]
        );
        assert_eq!(held.take(7, later), None);
    }

    #[test]
    fn units_are_spent_only_while_the_window_surely_lasts() {
        let start = Instant::now();
        let mut held = Held::new(start);
        held.grant(1, &granted("0", "3"), 5, start, start);
        // 3 s rounded: the window lasts at least 2.5 s; spending stops 0.5 s before.
        assert!(held.take(1, start + Duration::from_millis(1_999)).is_some());
        assert_eq!(held.take(1, start + Duration::from_millis(2_000)), None);
        // A window ending within a second leaves nothing to spend but what the requests
        // waiting for the grant take as it lands: the rest go back.
        held.grant(1, &granted("0", "1"), 5, start, start);
        assert_eq!(held.take(1, start), None);
        assert!(held.take_granted(1, start).is_some());
        assert_eq!(held.leftover(start), 4);
        assert_eq!(held.take_granted(1, start), None);
    }

    #[test]
    fn the_size_follows_the_rate() {
        let start = Instant::now();
        let every = Duration::from_millis(25);
        let mut held = Held::new(start);
        held.note();
        assert_eq!(held.size(100, every, start), 1, "a first request");
        for _ in 0..40 {
            held.note();
        }
        // 41 requests within less than `every`: at least 41 per `every`.
        assert_eq!(held.size(100, every, start + Duration::from_millis(10)), 41);
        for _ in 0..400 {
            held.note();
        }
        assert_eq!(
            held.size(100, every, start + Duration::from_millis(60)),
            100
        );
        held.note();
        assert_eq!(
            held.size(100, every, start + Duration::from_secs(5)),
            1,
            "cold"
        );
    }

    #[test]
    fn an_idle_batch_goes_back_once() {
        let start = Instant::now();
        let (idle, timeout) = (Duration::from_millis(25), Duration::from_millis(100));
        let mut held = Held::new(start);
        held.grant(1, &granted("0", "60"), 5, start, start);
        held.take_granted(1, start).unwrap();
        let generation = held.generation();
        let soon = start + Duration::from_millis(10);
        assert_eq!(
            held.give_back(generation, soon, idle, timeout),
            GiveBack::Later
        );
        let idle_at = start + Duration::from_millis(30);
        assert_eq!(
            held.give_back(generation, idle_at, idle, timeout),
            GiveBack::Units(4)
        );
        assert_eq!(
            held.give_back(generation, idle_at, idle, timeout),
            GiveBack::Done
        );
        assert!(held.can_give_back(idle_at, timeout));
        assert!(!held.can_give_back(start + Duration::from_millis(59_400), timeout));
    }
}
