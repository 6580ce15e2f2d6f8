//! Clocks: where a limiter's "now" comes from.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The time limiters decide by, in milliseconds since the Unix epoch: the system's wall clock,
/// or a [`ManualClock`] set with [`Builder::clock`](crate::Builder::clock).
pub(crate) trait Clock: Send + Sync + 'static {
    /// Now, in milliseconds since the Unix epoch.
    fn now_ms(&self) -> i64;
}

/// The system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        // The system call itself where there is one: `SystemTime` checks and normalizes a
        // `Duration` on the way, about 60 instructions a memory check (`benches/HISTORY.md`,
        // "The clock, the span, and a route's part of a key kept per thread").
        #[cfg(unix)]
        if let Ok(now) = nix::time::clock_gettime(nix::time::ClockId::CLOCK_REALTIME) {
            // As `SystemTime` reads it below: never before the epoch.
            return now
                .tv_sec()
                .max(0)
                .saturating_mul(1000)
                .saturating_add(now.tv_nsec() / 1_000_000);
        }
        let since_epoch = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO);
        // In 64 bits, where `as_millis` divides in 128.
        i64::try_from(since_epoch.as_secs())
            .ok()
            .and_then(|secs| secs.checked_mul(1000))
            .and_then(|ms| ms.checked_add(i64::from(since_epoch.subsec_millis())))
            .unwrap_or(i64::MAX)
    }
}

/// A clock that moves only when told to: for tests and simulations.
///
/// Clones share one time.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use plug_limit::ManualClock;
///
/// let clock = ManualClock::new(1_700_000_000_000);
/// let view = clock.clone();
/// clock.advance(Duration::from_millis(1500));
/// assert_eq!(view.now_ms(), 1_700_000_001_500);
/// ```
#[derive(Clone, Default)]
pub struct ManualClock(Arc<AtomicI64>);

impl ManualClock {
    /// A clock standing at `now_ms`.
    #[must_use]
    pub fn new(now_ms: i64) -> Self {
        Self(Arc::new(AtomicI64::new(now_ms)))
    }

    /// A clock standing at the system's current time.
    #[must_use]
    pub fn starting_now() -> Self {
        Self::new(SystemClock.now_ms())
    }

    /// Moves the clock forward by `by` (whole milliseconds).
    pub fn advance(&self, by: Duration) {
        let ms = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        self.0.fetch_add(ms, Ordering::SeqCst);
    }

    /// Sets the clock to `now_ms`.
    pub fn set(&self, now_ms: i64) {
        self.0.store(now_ms, Ordering::SeqCst);
    }

    /// Now, by this clock, in milliseconds since the Unix epoch.
    #[must_use]
    pub fn now_ms(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        Self::now_ms(self)
    }
}

impl fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ManualClock").field(&self.now_ms()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_clock_is_after_2020() {
        assert!(SystemClock.now_ms() > 1_577_836_800_000);
    }

    /// The system call read on Unix is the clock `SystemTime` reads: the same milliseconds,
    /// read between two of its readings.
    #[test]
    fn system_clock_reads_what_system_time_reads() {
        let std_ms = || {
            let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
            i64::try_from(since.as_millis()).unwrap()
        };
        let before = std_ms();
        let now = SystemClock.now_ms();
        let after = std_ms();
        assert!(
            before <= now && now <= after,
            "{before} <= {now} <= {after}"
        );
    }

    #[test]
    fn manual_clock_moves_when_told() {
        let clock = ManualClock::new(10);
        clock.advance(Duration::from_millis(5));
        assert_eq!(clock.now_ms(), 15);
        clock.set(3);
        assert_eq!(clock.now_ms(), 3);
    }
}
