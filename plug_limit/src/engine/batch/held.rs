//! One key's batches at this instance: the units they hold, until when each may be spent,
//! what their answers say, and the key's observed rate, which sizes the next batch.
//!
//! A key holds the batch it spends and, reserved ahead while that one lasts, at most one more:
//! each keeps the window it was granted in, to the millisecond, so a unit is never spent
//! outside it, even when the next batch is of the next window.

use std::time::{Duration, Instant};

use crate::outcome::{Decision, Outcome};

/// Spending stops this much before a batch's window can end, for this process's scheduling
/// between a unit's answer and its request going on (the window's end itself is known to the
/// millisecond, counted from before Redis ran the call).
const MARGIN: Duration = Duration::from_millis(10);

/// A key's batches, and the requests seen since its last reservation.
#[derive(Debug)]
pub(super) struct Held {
    /// Which limit (a hash of its options) the units are of.
    opts: u64,
    /// The batch being spent.
    current: Batch,
    /// A batch reserved ahead while `current` lasted, spent once `current` is spent or over.
    next: Option<Box<Batch>>,
    last_spent: Instant,
    /// Requests seen since the last reservation began, and when it began.
    seen: u32,
    since: Instant,
    /// Requests a second at this instance, as last measured over at least `every`.
    rate: f64,
    /// A batch is reserved ahead once the one being spent holds fewer units than this: what
    /// the key spends at its rate while a reservation lands.
    ahead_units: u32,
    /// Bumped by every grant: a give-back acts only on its own batch.
    generation: u64,
    /// Units spent so far, all batches: what this instance's share of the limit is read from.
    spent: u64,
    /// The key was reset: whatever this slot holds or is granted is of a window that no
    /// longer counts, neither to spend nor to give back.
    forgotten: bool,
}

/// One grant's units.
#[derive(Debug)]
struct Batch {
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
    generation: u64,
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

impl Batch {
    fn empty(now: Instant) -> Self {
        Self {
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
            generation: 0,
        }
    }

    #[inline(always)]
    fn spendable(&self, now: Instant) -> bool {
        self.units > 0 && now < self.until
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

impl Held {
    pub(super) fn new(now: Instant) -> Self {
        Self {
            opts: 0,
            current: Batch::empty(now),
            next: None,
            last_spent: now,
            seen: 0,
            since: now,
            rate: 0.0,
            ahead_units: 0,
            generation: 0,
            spent: 0,
            forgotten: false,
        }
    }

    /// Drops the units held, and any a reservation in flight brings (see `forgotten`).
    pub(super) fn forget(&mut self) {
        self.current.units = 0;
        self.next = None;
        self.forgotten = true;
    }

    /// Whether a reset dropped the slot: what it is granted is of no window that counts.
    pub(super) fn is_forgotten(&self) -> bool {
        self.forgotten
    }

    /// Whether it holds units of a limit other than `opts` that a grant would replace.
    pub(super) fn holds_other(&self, opts: u64) -> bool {
        self.holds_units() && self.opts != opts
    }

    /// Whether a batch holds units.
    pub(super) fn holds_units(&self) -> bool {
        self.current.units > 0 || self.next.as_ref().is_some_and(|next| next.units > 0)
    }

    /// Counts one request toward the key's rate.
    pub(super) fn note(&mut self) {
        self.seen = self.seen.saturating_add(1);
    }

    /// One unit of a batch for a request of the limit `opts`, and its answer; `None` when the
    /// batches are of another limit, spent, or past their time. The batch reserved ahead is
    /// spent once the one before it is spent or over (whatever that one still holds is then
    /// past its window's safe end).
    #[inline(always)]
    pub(super) fn take(&mut self, opts: u64, now: Instant) -> Option<Outcome> {
        if self.opts == opts && self.current.spendable(now) {
            self.current.units -= 1;
            self.last_spent = now;
            self.spent = self.spent.wrapping_add(1);
            return Some(self.current.answer(now));
        }
        self.take_next(opts, now)
    }

    /// [`take`](Self::take) once the batch being spent cannot be: from the one reserved ahead.
    #[cold]
    fn take_next(&mut self, opts: u64, now: Instant) -> Option<Outcome> {
        if self.opts != opts {
            return None;
        }
        let next = self.next.take()?;
        self.current = *next;
        if !self.current.spendable(now) {
            return None;
        }
        self.current.units -= 1;
        self.last_spent = now;
        self.spent = self.spent.wrapping_add(1);
        Some(self.current.answer(now))
    }

    /// Whether to reserve the next batch now, ahead: when the batch being spent holds less
    /// than the key spends while a reservation lands, and none is reserved ahead yet.
    #[inline]
    pub(super) fn wants_ahead(&self) -> bool {
        self.current.units < self.ahead_units && self.next.is_none() && !self.forgotten
    }

    /// Plans the next reservation ahead for a round trip of `ahead`, at the key's rate.
    pub(super) fn plan_ahead(&mut self, ahead: Duration) {
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // clamped
        let units = (self.rate * ahead.as_secs_f64())
            .ceil()
            .min(f64::from(u32::MAX)) as u32;
        self.ahead_units = units;
    }

    /// How many units to ask for, 1..=`max`: the key's rate times `span` (the time to aim
    /// for between reservations, and the time one takes to land). Over a period shorter than
    /// `every`, the requests seen so far in it stand for the rate (short of it, so a batch
    /// grows by doubling at most); a first request, or a key seen once in a while, asks for 1.
    pub(super) fn size(&mut self, max: u32, every: Duration, span: Duration, now: Instant) -> u32 {
        let elapsed = now.duration_since(self.since);
        let mut wanted = f64::from(self.seen);
        if elapsed >= every {
            self.rate = wanted / elapsed.as_secs_f64();
            wanted = self.rate * span.as_secs_f64();
            self.seen = 0;
            self.since = now;
        }
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // clamped below
        let wanted = wanted.ceil().min(f64::from(max)) as u32;
        wanted.max(1)
    }

    /// Holds the `granted` units Redis answered `outcome` for, in a window that had
    /// `window_ms` left when Redis ran the call (sent at `sent_at`, arrived at `now`), none of
    /// them spent yet. It is the batch spent next, after the one being spent if that one still
    /// lasts (a batch reserved ahead). The requests waiting for it take theirs with
    /// [`take_granted`](Self::take_granted), then [`leftover`](Self::leftover) says what
    /// cannot be spent here. A slot a reset dropped holds nothing of it. Returns the batch's
    /// number.
    pub(super) fn grant(
        &mut self,
        opts: u64,
        outcome: &Outcome,
        granted: u32,
        window_ms: u64,
        sent_at: Instant,
        now: Instant,
    ) -> u64 {
        let report = outcome.report();
        self.generation += 1;
        let mut kept = outcome.clone().answered(Decision::Allow);
        // Kept without the header values the reply came with: every answer changes the report
        // (its remaining), so each would copy them only to drop them.
        let _ = kept.reported_mut();
        // Redis ran the call after it was sent: the window ends no sooner than this.
        let window_ends = sent_at + Duration::from_millis(window_ms);
        let batch = Batch {
            units: if self.forgotten { 0 } else { granted },
            until: window_ends.checked_sub(MARGIN).unwrap_or(sent_at),
            window_ends,
            granted: Some(kept),
            remaining: report.map_or(0, |report| report.remaining()),
            reset: report.map_or(0, |report| u64::try_from(report.reset()).unwrap_or(0)),
            granted_at: now,
            passed: 0,
            this_second: now,
            next_second: now,
            generation: self.generation,
        };
        if self.opts == opts && self.current.spendable(now) {
            self.next = Some(Box::new(batch));
        } else {
            self.opts = opts;
            self.current = batch;
            self.next = None;
        }
        self.generation
    }

    /// A unit of the grant that just arrived, for a request that waited for it: Redis counted
    /// it a round trip ago, so it is spent now however soon the window ends, as an exact
    /// call's answer would be. A request waits only while no batch is spendable, so the grant
    /// is the one being spent.
    pub(super) fn take_granted(&mut self, opts: u64, now: Instant) -> Option<Outcome> {
        if self.current.units == 0 || self.opts != opts {
            return None;
        }
        self.current.units -= 1;
        self.last_spent = now;
        self.spent = self.spent.wrapping_add(1);
        Some(self.current.answer(now))
    }

    /// Gives back to the batch a unit taken for a request that has gone.
    pub(super) fn put_back(&mut self) {
        self.current.units = self.current.units.saturating_add(1);
        self.spent = self.spent.wrapping_sub(1);
    }

    /// The units its batches hold, the one reserved ahead included.
    #[cfg(all(test, plug_limit_loom))]
    pub(super) fn units(&self) -> u32 {
        self.current.units + self.next.as_ref().map_or(0, |next| next.units)
    }

    /// Units spent so far (wrapping): what a share reads its rate from.
    pub(super) fn spent(&self) -> u64 {
        self.spent
    }

    /// The units of batch `generation` that cannot be spent here, its window ending too
    /// soon; taken out of the batch.
    pub(super) fn leftover(&mut self, generation: u64, now: Instant) -> u32 {
        match self.batch_mut(generation) {
            Some(batch) if now >= batch.until => std::mem::take(&mut batch.units),
            _ => 0,
        }
    }

    /// Whether batch `generation` holds units.
    pub(super) fn holds(&self, generation: u64) -> bool {
        self.batch(generation).is_some_and(|batch| batch.units > 0)
    }

    /// A denial, with the last grant's numbers, for a request of the limit `opts` this instance
    /// could not serve a unit in time (its key's queue full, or its timeout spent waiting):
    /// the limit's answer (remaining 0, a retry-after of 0), never the failure policy's.
    /// `None` before any grant: nothing is known of the limit.
    pub(super) fn refused(&mut self, opts: u64, now: Instant) -> Option<Outcome> {
        if self.opts != opts {
            return None;
        }
        let batch = &mut self.current;
        let granted = batch.granted.clone()?;
        let reset = batch.reset.saturating_sub(batch.seconds_since_grant(now));
        let mut refused = granted.answered(Decision::Deny);
        if let Some(reported) = refused.reported_mut() {
            let reset = i64::try_from(reset).unwrap_or(i64::MAX);
            reported.report.refused_from_batch(reset);
        }
        Some(refused)
    }

    /// The answer, `decision`, of the key's recent share while Redis cannot be reached, with
    /// the last grant's numbers: nothing remaining, and on a denial a `retry-after` of 0.
    /// `None` before any grant.
    pub(super) fn by_share(
        &mut self,
        opts: u64,
        decision: Decision,
        now: Instant,
    ) -> Option<Outcome> {
        if self.opts != opts {
            return None;
        }
        let batch = &mut self.current;
        let granted = batch.granted.clone()?;
        let reset = batch.reset.saturating_sub(batch.seconds_since_grant(now));
        let mut answer = granted.answered(decision);
        if let Some(reported) = answer.reported_mut() {
            let reset = i64::try_from(reset).unwrap_or(i64::MAX);
            let denied = decision == Decision::Deny;
            reported.report.answered_by_share(reset, denied);
        }
        Some(answer)
    }

    /// When the key was last seen or a batch of it could last be spent.
    pub(super) fn last_active(&self) -> Instant {
        let until = self
            .next
            .as_ref()
            .map_or(self.current.until, |next| next.until);
        self.since.max(self.last_spent).max(until)
    }

    /// The give-back of batch `generation`, looked at now: its units once the key has gone
    /// unspent for `idle`, or once it will be past its time by the next look, if a refund sent
    /// now (answered within `timeout`) lands before its window can end; else they stay to be
    /// spent until its time, and nothing more is given back.
    pub(super) fn give_back(
        &mut self,
        generation: u64,
        now: Instant,
        idle: Duration,
        timeout: Duration,
    ) -> GiveBack {
        let unspent = now.duration_since(self.last_spent) >= idle;
        let Some(batch) = self.batch_mut(generation) else {
            return GiveBack::Done;
        };
        if batch.units == 0 {
            return GiveBack::Done;
        }
        if now + timeout >= batch.window_ends {
            return GiveBack::Done;
        }
        let ending = now + idle + timeout >= batch.until;
        if unspent || ending {
            return GiveBack::Units(std::mem::take(&mut batch.units));
        }
        GiveBack::Later
    }

    fn batch(&self, generation: u64) -> Option<&Batch> {
        std::iter::once(&self.current)
            .chain(self.next.as_deref())
            .find(|batch| batch.generation == generation)
    }

    fn batch_mut(&mut self, generation: u64) -> Option<&mut Batch> {
        if self.current.generation == generation {
            return Some(&mut self.current);
        }
        self.next
            .as_deref_mut()
            .filter(|next| next.generation == generation)
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
        let generation = held.grant(7, &granted("90", "10"), 10, 10_000, start, start);
        let first = held.take_granted(7, start).unwrap();
        assert_eq!(held.leftover(generation, start), 0);
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
        // The window had 1,300 ms left when Redis ran the call, sent at `start`.
        held.grant(1, &granted("0", "1"), 5, 1_300, start, start);
        assert!(held.take(1, start + Duration::from_millis(1_289)).is_some());
        assert_eq!(held.take(1, start + Duration::from_millis(1_290)), None);
        // A window ending before the grant lands leaves nothing to spend but what the
        // requests waiting for it take as it lands: the rest cannot be spent here.
        let mut held = Held::new(start);
        let landed = start + Duration::from_millis(200);
        let generation = held.grant(1, &granted("0", "1"), 5, 150, start, landed);
        assert_eq!(held.take(1, landed), None);
        assert!(held.take_granted(1, landed).is_some());
        assert_eq!(held.leftover(generation, landed), 4);
        assert_eq!(held.take_granted(1, landed), None);
    }

    #[test]
    fn a_batch_reserved_ahead_is_spent_after_the_one_before_in_its_own_window() {
        let start = Instant::now();
        let mut held = Held::new(start);
        held.grant(1, &granted("10", "1"), 2, 900, start, start);
        // Reserved ahead while the first lasts, landing in the next window (2 s left).
        let at = start + Duration::from_millis(850);
        let ahead = held.grant(1, &granted("40", "2"), 3, 2_000, at, at);
        assert!(held.holds(ahead));
        let remaining = |outcome: Outcome| outcome.report().unwrap().remaining();
        // The first window's units go first, with its numbers...
        assert_eq!(remaining(held.take(1, at).unwrap()), 11);
        // ... and once its window is over, its last unit is dropped: the next batch's go.
        let past = start + Duration::from_millis(891);
        assert_eq!(remaining(held.take(1, past).unwrap()), 42);
        assert_eq!(remaining(held.take(1, past).unwrap()), 41);
        assert_eq!(remaining(held.take(1, past).unwrap()), 40);
        assert_eq!(held.take(1, past), None);
    }

    #[test]
    fn the_size_follows_the_rate_and_plans_the_next_ahead() {
        let start = Instant::now();
        let every = Duration::from_millis(25);
        let span = Duration::from_millis(50);
        let mut held = Held::new(start);
        held.note();
        assert_eq!(held.size(100, every, span, start), 1, "a first request");
        for _ in 0..40 {
            held.note();
        }
        // 41 requests within less than `every`: at least 41 per `every`.
        assert_eq!(
            held.size(100, every, span, start + Duration::from_millis(10)),
            41
        );
        for _ in 0..39 {
            held.note();
        }
        // 80 in 40 ms: 2,000 a second, 100 over the span.
        assert_eq!(
            held.size(1_000, every, span, start + Duration::from_millis(40)),
            100
        );
        // 20 ms of that rate is 40 units: a batch holding fewer wants the next.
        held.plan_ahead(Duration::from_millis(20));
        held.grant(1, &granted("0", "60"), 40, 60_000, start, start);
        assert!(!held.wants_ahead());
        held.take(1, start).unwrap();
        assert!(held.wants_ahead());
        held.note();
        assert_eq!(
            held.size(100, every, span, start + Duration::from_secs(5)),
            1,
            "cold"
        );
    }

    #[test]
    fn an_idle_batch_goes_back_once() {
        let start = Instant::now();
        let (idle, timeout) = (Duration::from_millis(25), Duration::from_millis(100));
        let mut held = Held::new(start);
        let generation = held.grant(1, &granted("0", "60"), 5, 60_000, start, start);
        held.take_granted(1, start).unwrap();
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
        // Too near its window's end for a refund to land: the units stay, to be spent.
        let generation = held.grant(1, &granted("0", "60"), 5, 60_000, start, start);
        let late = start + Duration::from_millis(59_950);
        assert_eq!(
            held.give_back(generation, late, idle, timeout),
            GiveBack::Done
        );
        assert!(held.holds(generation));
    }
}
