//! A key's denial, held at this instance until its limit could admit again: a flood past the
//! limit is answered here without a call, as a granted batch answers a flood within it.

use std::time::{Duration, Instant};

use crate::algorithm::{Builtin, Report};
use crate::limit::Opt;
use crate::outcome::Outcome;

/// A denial of one limit (a hash of its options), answered until `until`.
#[derive(Debug)]
pub(super) struct Denial {
    opts: u64,
    outcome: Outcome,
    at: Instant,
    until: Instant,
    /// The outcome as last answered, counted down by that many whole seconds: a flood's
    /// answers within one second read the same values, made once.
    answered: Option<(u64, Outcome)>,
}

impl Denial {
    /// Holds `outcome`, a denial of the limit `opts` answered at `now`, until `until`.
    pub(super) fn new(opts: u64, outcome: Outcome, now: Instant, until: Instant) -> Self {
        Self {
            opts,
            outcome,
            at: now,
            until,
            answered: None,
        }
    }

    pub(super) fn opts(&self) -> u64 {
        self.opts
    }

    pub(super) fn until(&self) -> Instant {
        self.until
    }

    /// The denial as it reads at `now`: its reset and retry-after counted down by the whole
    /// seconds since Redis answered it.
    pub(super) fn answer(&mut self, now: Instant) -> Outcome {
        let passed = now.saturating_duration_since(self.at).as_secs();
        match &self.answered {
            Some((at, answered)) if *at == passed => answered.clone(),
            _ => {
                let mut answered = self.outcome.clone();
                if let Some(reported) = answered.reported_mut() {
                    reported.count_down(i64::try_from(passed).unwrap_or(i64::MAX));
                }
                // Made here, once: each answer clones them.
                let _ = answered.headers();
                self.answered = Some((passed, answered.clone()));
                answered
            }
        }
    }
}

/// When a batched limit's units come back once spent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refill {
    /// All at once, when the window resets (a fixed window; a token bucket that does not
    /// refill).
    AtReset,
    /// One every so long (a token bucket: its window over what it refills in one).
    Every(Duration),
}

impl Refill {
    /// How `algorithm`'s limit of `opts` refills.
    pub(super) fn of(algorithm: Option<Builtin>, opts: &[Opt]) -> Self {
        if algorithm != Some(Builtin::TokenBucket) {
            return Self::AtReset;
        }
        let (Some(limit), Some(window), Some(burst)) = (int(opts, 0), int(opts, 1), int(opts, 2))
        else {
            return Self::AtReset;
        };
        let refill = limit.saturating_sub(burst);
        match (u64::try_from(window), u64::try_from(refill)) {
            (Ok(window), Ok(refill)) if refill > 0 => {
                Self::Every(Duration::from_millis(window.saturating_mul(1000) / refill))
            }
            _ => Self::AtReset,
        }
    }

    /// How long, from when Redis ran the call, a denial reported as `report` holds, its
    /// window having `window_left` to run: until the window ends (less `lead`, the time a
    /// reservation takes to reach Redis, so the next one arrives as it ends) when it is spent
    /// or refills only then, else until the next unit refills.
    pub(super) fn hold(
        self,
        report: Option<&Report>,
        window_left: Duration,
        lead: Duration,
    ) -> Duration {
        let at_reset = window_left.saturating_sub(lead);
        match self {
            Self::Every(one) if report.is_some_and(|report| report.remaining() > 0) => {
                one.min(at_reset)
            }
            Self::AtReset | Self::Every(_) => at_reset,
        }
    }
}

/// Option `position` as an integer, as a script reads it.
pub(super) fn int(opts: &[Opt], position: usize) -> Option<i64> {
    match opts.get(position)? {
        Opt::Int(n) => Some(*n),
        text => text.as_str()?.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::{Field, Runtime};
    use crate::outcome::{Decision, Names};

    fn report(reset: i64, remaining: i64) -> Report {
        Report::from_values(&[100, reset, remaining, 1].map(Field::Int), 0).unwrap()
    }

    const LEAD: Duration = Duration::from_millis(20);

    #[test]
    fn a_fixed_window_holds_its_denial_until_the_window_ends() {
        let refill = Refill::of(Some(Builtin::FixedWindow), &[Opt::Int(100), Opt::Int(10)]);
        assert_eq!(refill, Refill::AtReset);
        let left = Duration::from_millis(6_700);
        assert_eq!(
            refill.hold(Some(&report(7, 0)), left, LEAD),
            Duration::from_millis(6_680)
        );
    }

    #[test]
    fn a_token_bucket_holds_its_denial_until_the_next_token() {
        let opts = [Opt::Int(10_000), Opt::Int(10), Opt::Int(1_000)];
        let refill = Refill::of(Some(Builtin::TokenBucket), &opts);
        // 9,000 tokens over 10 s: one every 1.1 ms.
        assert_eq!(refill, Refill::Every(Duration::from_millis(1)));
        let left = Duration::from_secs(9);
        assert_eq!(
            refill.hold(Some(&report(9, 5_000)), left, LEAD),
            Duration::from_millis(1)
        );
        // One token a minute.
        let slow = Refill::of(
            Some(Builtin::TokenBucket),
            &[Opt::Int(70), Opt::Int(600), Opt::Int(60)],
        );
        let left = Duration::from_secs(500);
        assert_eq!(
            slow.hold(Some(&report(500, 3)), left, LEAD),
            Duration::from_secs(60)
        );
        // The window spent, or no refill at all: until the window ends.
        let left = Duration::from_millis(29_500);
        assert_eq!(
            slow.hold(Some(&report(30, 0)), left, LEAD),
            Duration::from_millis(29_480)
        );
        let none = Refill::of(
            Some(Builtin::TokenBucket),
            &[Opt::Int(5), Opt::Int(60), Opt::Int(5)],
        );
        assert_eq!(none, Refill::AtReset);
    }

    #[test]
    fn a_held_denial_counts_down() {
        let start = Instant::now();
        let denied = Outcome::reported(
            Decision::Deny,
            Names::Builtin(Builtin::TokenBucket.headers()),
            report(9, 0),
            Vec::new(),
        );
        let mut denial = Denial::new(1, denied, start, start + Duration::from_secs(9));
        let reset = |outcome: Outcome| outcome.report().unwrap().reset();
        assert_eq!(reset(denial.answer(start)), 9);
        assert_eq!(
            reset(denial.answer(start + Duration::from_millis(2_100))),
            7
        );
        assert_eq!(denial.until(), start + Duration::from_secs(9));
    }
}
