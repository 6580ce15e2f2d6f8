//! When a waiter retries a denied check: the schedule of [`PlugLimit::acquire`] and of a layer
//! that waits before its 429 ([`RateLimitLayer::wait_up_to`]).
//!
//! A denial says when to come back only in whole seconds (`retry-after`, rounded up), too
//! coarse for a limit of 20 a second: its next slot is at most 50 ms away, yet the denial says
//! 1. Rather than change every script's reply, a waiter reads two things it already has:
//!
//! - the `retry-after` (else the reset), a bound from above rounded up to the second, so the
//!   wait is longer than one second less: a waiter sleeps that long at once, never past the
//!   moment the limit can free;
//! - the limit's own pace, its window over its limit (one unit's share of the window; the
//!   finest of a stack's), then retries once per pace, within the last second, until admitted
//!   or out of time.
//!
//! A retry is an ordinary check, and no built-in counts a denied check (a fixed window takes
//! its increment back, the others write nothing on a denial), so retrying costs the limit
//! nothing. Each pause is drawn at random between half the pace and the pace ("equal jitter"):
//! waiters of one key, on one instance or many, spread their retries instead of calling the
//! backend at one instant, and no waiter retries more than twice a pace.
//!
//! [`PlugLimit::acquire`]: crate::PlugLimit::acquire
//! [`RateLimitLayer::wait_up_to`]: crate::RateLimitLayer::wait_up_to

use std::hash::BuildHasher;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use plug_limit_options::Arg;
use tokio::time::Instant;

use super::deny_cache::wait_s;
use crate::algorithm::Builtin;
use crate::limit::Opt;
use crate::outcome::Outcome;

/// The finest pace: a limit of thousands a second would otherwise have its waiters retry in a
/// busy loop.
const FINEST: Duration = Duration::from_millis(5);

/// The coarsest: the `retry-after` is exact to the second, so a pace of a second or more has
/// nothing left to find.
const COARSEST: Duration = Duration::from_secs(1);

/// The pace of a limit without a rate: a concurrency slot comes back when any request ends,
/// and a custom limiter says nothing of its own.
const UNPACED: Duration = Duration::from_millis(50);

/// A waiter's schedule: until when it may wait, and how often it retries.
#[derive(Debug)]
pub(crate) struct Pace {
    deadline: Instant,
    every: Duration,
}

impl Pace {
    /// The schedule of a wait that started at `started`, bounded by `bound`, retrying at
    /// `every` (see [`of`]).
    pub(crate) fn new(started: Instant, bound: Duration, every: Duration) -> Self {
        Self {
            deadline: started.checked_add(bound).unwrap_or_else(far_future),
            every,
        }
    }

    /// How long to pause before retrying after `denied`; `None` to answer the denial now: the
    /// deadline has passed, the denial says it ends after the deadline, or it says nothing of
    /// when it ends (a custom limiter with neither `retry-after` nor a reset).
    pub(crate) fn pause(&self, denied: &Outcome) -> Option<Duration> {
        let wait_s = wait_s(denied)?;
        let now = Instant::now();
        let left = self.deadline.checked_duration_since(now)?;
        if left.is_zero() {
            return None;
        }
        // Rounded up: the denial ends later than a second less, and no sooner.
        let surely_denied = Duration::from_secs(wait_s.saturating_sub(1));
        if surely_denied >= left {
            return None;
        }
        // Never past the deadline: the last retry is made at it.
        Some((surely_denied + jitter(self.every)).min(left))
    }
}

/// How often a waiter retries a denial of `limits`, each `(built-in, options, cost)`: the
/// finest of their paces, each its window over its limit (a unit's share of the window) times
/// the cost; [`UNPACED`] for a limit without a rate.
pub(crate) fn of<'a>(
    limits: impl IntoIterator<Item = (Option<Builtin>, &'a [Opt], u32)>,
) -> Duration {
    limits
        .into_iter()
        .map(|(builtin, opts, cost)| {
            let share = builtin.and_then(|builtin| share(builtin, opts));
            share.map_or(UNPACED, |share| share.saturating_mul(cost.max(1)))
        })
        .min()
        .unwrap_or(UNPACED)
        .clamp(FINEST, COARSEST)
}

/// One unit's share of `builtin`'s window with `opts`: the finest of multi_window's; `None`
/// without a rate (concurrency, calendar_quota), or for options its script would refuse.
fn share(builtin: Builtin, opts: &[Opt]) -> Option<Duration> {
    let arg = |position: usize| opts.get(position).map_or(Arg::Missing, Opt::arg);
    let rates = match builtin {
        Builtin::Concurrency | Builtin::CalendarQuota => return None,
        Builtin::MultiWindow => {
            let count = opts.iter().filter(|opt| opt.as_str().is_some()).count();
            builtin.rates(count, arg).ok()?
        }
        _ => {
            let [limit, window, _] = builtin.read(arg).ok()?;
            vec![(limit, window)]
        }
    };
    rates
        .into_iter()
        .map(|(limit, window)| Duration::from_secs_f64(window / limit))
        .min()
}

/// A pause drawn evenly between half of `every` and `every`.
fn jitter(every: Duration) -> Duration {
    let half = every / 2;
    let span = u64::try_from((every - half).as_nanos()).unwrap_or(u64::MAX);
    half + Duration::from_nanos(draw() % span.saturating_add(1))
}

/// A random number: the hash of a counter under a seed drawn once per process, so two
/// instances draw apart and one instance's waiters draw apart. Not for secrets.
fn draw() -> u64 {
    static SEED: LazyLock<foldhash::quality::RandomState> = LazyLock::new(Default::default);
    static DRAWS: AtomicU64 = AtomicU64::new(0);
    SEED.hash_one(DRAWS.fetch_add(1, Ordering::Relaxed))
}

/// A deadline no wait reaches: a bound too large to add to now.
fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(86_400 * 365 * 30)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pace_is_a_units_share_of_the_window_times_its_cost() {
        let twenty = [Opt::Int(20), Opt::Int(1), Opt::Int(2)];
        assert_eq!(
            of([(Some(Builtin::Gcra), &twenty[..], 1)]),
            Duration::from_millis(50)
        );
        assert_eq!(
            of([(Some(Builtin::Gcra), &twenty[..], 3)]),
            Duration::from_millis(150)
        );
        let windows = [Opt::Str("10/1"), Opt::Str("100/60")];
        assert_eq!(
            of([(Some(Builtin::MultiWindow), &windows[..], 1)]),
            Duration::from_millis(100)
        );
        // The finest of a stack's; bounded both ways.
        let slow = [Opt::Int(1), Opt::Int(3600)];
        let fast = [Opt::Int(100_000), Opt::Int(1)];
        assert_eq!(
            of([
                (Some(Builtin::FixedWindow), &slow[..], 1),
                (Some(Builtin::Gcra), &twenty[..], 1),
            ]),
            Duration::from_millis(50)
        );
        assert_eq!(of([(Some(Builtin::FixedWindow), &slow[..], 1)]), COARSEST);
        assert_eq!(of([(Some(Builtin::SlidingLog), &fast[..], 1)]), FINEST);
        let lease = [Opt::Int(2), Opt::Int(30)];
        assert_eq!(of([(Some(Builtin::Concurrency), &lease[..], 1)]), UNPACED);
        assert_eq!(of([(None, &lease[..], 1)]), UNPACED);
    }

    #[test]
    fn pauses_spread_between_half_the_pace_and_the_pace() {
        let every = Duration::from_millis(50);
        let pauses: Vec<Duration> = (0..1000).map(|_| jitter(every)).collect();
        assert!(pauses.iter().all(|p| (every / 2..=every).contains(p)));
        let mut distinct = pauses.clone();
        distinct.sort();
        distinct.dedup();
        assert!(distinct.len() > 990, "{} distinct", distinct.len());
        // Both halves of the range are drawn, evenly enough.
        let low = pauses.iter().filter(|p| **p < every * 3 / 4).count();
        assert!((400..600).contains(&low), "{low} of 1000 in the lower half");
    }
}
