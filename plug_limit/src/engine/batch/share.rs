//! A key's recent share of its limit at this instance: the units its batches spent, as a
//! rate, and what admits by that rate while Redis cannot be reached
//! ([`FailurePolicy::LocalShare`](crate::FailurePolicy::LocalShare)).

use std::time::{Duration, Instant};

use super::denial::int;
use crate::limit::Opt;

/// How far back a share looks: a grant this long ago weighs e^-1 of one just now.
const HORIZON: Duration = Duration::from_secs(10);

/// Units spent a second, over the last [`HORIZON`] or so, and, while the store cannot be
/// reached, the units that rate has made available and not yet spent. Units granted and not
/// spent (given back, or past their window) are no part of it: an instance's share is what
/// its clients used.
#[derive(Debug)]
pub(super) struct Share {
    /// Units spent, and seconds passed, each decayed over [`HORIZON`]: their ratio is the
    /// rate, from the first on (a sum alone would read low until a horizon had passed).
    units: f64,
    seconds: f64,
    /// The batches' count of units spent when last read.
    read: u64,
    /// When they were last brought up to date.
    at: Instant,
    /// Since the cut began: the rate it admits by, the units available, and when they were
    /// last counted. `None` while the store answers.
    cut: Option<Cut>,
}

#[derive(Debug, Clone, Copy)]
struct Cut {
    rate: f64,
    units: f64,
    counted: Instant,
}

impl Share {
    pub(super) fn new(now: Instant) -> Self {
        Self {
            units: 0.0,
            seconds: 0.0,
            read: 0,
            at: now,
            cut: None,
        }
    }

    /// Reads the batches' count of units `spent` so far, at `now`; the store answered, so any
    /// cut is over.
    pub(super) fn answered(&mut self, spent: u64, now: Instant) {
        self.read_spent(spent, now);
        self.cut = None;
    }

    fn read_spent(&mut self, spent: u64, now: Instant) {
        self.bring_up_to(now);
        #[allow(clippy::cast_precision_loss)] // a count read every few seconds at most
        let units = spent.wrapping_sub(self.read) as f64;
        self.units += units;
        self.read = spent;
    }

    fn bring_up_to(&mut self, now: Instant) {
        let since = now.saturating_duration_since(self.at).as_secs_f64();
        let decay = (-since / HORIZON.as_secs_f64()).exp();
        self.units *= decay;
        self.seconds = self.seconds * decay + since;
        self.at = now;
    }

    /// The rate as of `now`, units a second: over at least a second, so a first spending does
    /// not read as a rate of its size a moment.
    pub(super) fn rate(&mut self, now: Instant) -> f64 {
        self.bring_up_to(now);
        self.units / self.seconds.max(1.0)
    }

    /// Whether a request may be admitted at `now` by the share, the store cut off: the rate as
    /// it stood when the cut began (the batches having `spent` so far), at most `most` a
    /// second (the limit's own rate), with at most `burst` worth of it saved up (none at
    /// first: what the batches still held was spent before). Requests waiting on a
    /// reservation that fails are answered together, so `burst` is at least the time one
    /// waits.
    pub(super) fn admits(&mut self, spent: u64, now: Instant, burst: Duration, most: f64) -> bool {
        let cut = if let Some(cut) = self.cut {
            cut
        } else {
            // The rate freezes as the cut begins: what the instance's clients used is what it
            // may admit, however long the cut lasts.
            self.read_spent(spent, now);
            Cut {
                rate: self.rate(now).min(most),
                units: 0.0,
                counted: now,
            }
        };
        let elapsed = now.saturating_duration_since(cut.counted).as_secs_f64();
        let most = (cut.rate * burst.as_secs_f64()).max(1.0);
        let mut units = (cut.units + cut.rate * elapsed).min(most);
        let admits = units >= 1.0;
        if admits {
            units -= 1.0;
        }
        self.cut = Some(Cut {
            units,
            counted: now,
            ..cut
        });
        admits
    }
}

/// The most a share admits a second: the limit's own rate, its first option over its second
/// (what a window admits, over the window): however many units an instance spent before a
/// cut, it never admits faster than the whole limit.
pub(super) fn most(opts: &[Opt]) -> f64 {
    match (int(opts, 0), int(opts, 1)) {
        #[allow(clippy::cast_precision_loss)] // options are at most 2147483647
        (Some(limit), Some(window)) if window > 0 => limit as f64 / window as f64,
        _ => f64::MAX,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_admits_at_the_rate_spent_before_it() {
        let start = Instant::now();
        let mut share = Share::new(start);
        // 100 units every 100 ms for 30 s: about 1,000 a second.
        for tick in 0..300 {
            share.answered(100 * (tick + 1), start + Duration::from_millis(100 * tick));
        }
        let cut = start + Duration::from_millis(30_000);
        let rate = share.rate(cut);
        assert!((rate - 1_000.0).abs() < 10.0, "{rate}");
        // At first nothing is saved up: a unit comes every millisecond or so.
        let spent = 30_000;
        assert!(!share.admits(spent, cut, Duration::from_millis(25), f64::MAX));
        // 10 s of requests every 100 µs: the share's rate, never more.
        let admitted = (1..=100_000)
            .filter(|i| {
                let at = cut + Duration::from_micros(100 * i);
                share.admits(spent, at, Duration::from_millis(25), f64::MAX)
            })
            .count();
        let expected = (rate * 10.0).floor() as usize;
        assert!(admitted.abs_diff(expected) <= 1, "{admitted} of {expected}");
        // The store answers again: the cut is over, and the next one starts afresh.
        let later = cut + Duration::from_secs(10);
        share.answered(spent, later);
        assert!(!share.admits(spent, later, Duration::from_millis(25), f64::MAX));
    }

    #[test]
    fn a_share_reads_its_rate_from_the_first_grant_and_fades_with_time() {
        let start = Instant::now();
        let mut share = Share::new(start);
        // 50 units every 100 ms for 2 s: 500 a second already, not a fifth of it.
        for tick in 1..=20 {
            share.answered(50 * tick, start + Duration::from_millis(100 * tick));
        }
        let rate = share.rate(start + Duration::from_secs(2));
        assert!((rate - 500.0).abs() < 5.0, "{rate}");
        // A minute without a grant: the share fades (what was granted is long spent).
        let rate = share.rate(start + Duration::from_secs(62));
        assert!(rate < 500.0 / 5.0, "{rate}");
    }

    #[test]
    fn a_cut_saves_up_at_most_its_burst() {
        let start = Instant::now();
        let mut share = Share::new(start);
        for tick in 1..=100 {
            share.answered(10 * tick, start + Duration::from_millis(100 * tick));
        }
        // 100 a second; a burst of 500 ms saves up 50 at most.
        let cut = start + Duration::from_secs(10);
        let burst = Duration::from_millis(500);
        assert!(!share.admits(1_000, cut, burst, f64::MAX));
        let later = cut + Duration::from_secs(5);
        let admitted = (0..100)
            .filter(|_| share.admits(1_000, later, burst, f64::MAX))
            .count();
        assert_eq!(admitted, 50);
        // Never above the limit's own rate: 20 a second, 10 saved up.
        let mut capped = Share::new(start);
        for tick in 1..=100 {
            capped.answered(10 * tick, start + Duration::from_millis(100 * tick));
        }
        assert!(!capped.admits(1_000, cut, burst, 20.0));
        let admitted = (0..100)
            .filter(|_| capped.admits(1_000, later, burst, 20.0))
            .count();
        assert_eq!(admitted, 10);
    }
}
