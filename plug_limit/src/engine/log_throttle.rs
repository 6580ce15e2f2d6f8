//! Logging that a flood of events cannot turn into a flood of lines (an outage's failures, a
//! shadow limiter's would-be denials): one line a second per limiter, each saying how many
//! events went unlogged since the last.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::config::LogLevel;

/// The least time between two lines of one throttle.
const EVERY: Duration = Duration::from_secs(1);

/// One limiter's throttle for one kind of event.
#[derive(Debug)]
pub(crate) struct LogThrottle {
    epoch: Instant,
    /// When the last line was written, in milliseconds since `epoch`, plus one (0: never).
    last_ms: AtomicU64,
    suppressed: AtomicU64,
}

impl LogThrottle {
    pub(crate) fn new() -> Self {
        Self {
            epoch: Instant::now(),
            last_ms: AtomicU64::new(0),
            suppressed: AtomicU64::new(0),
        }
    }

    /// Logs the failure `error` at `level`, unless a line was written less than a second ago: then it is
    /// counted, and the next line reports the count.
    pub(crate) fn log(&self, level: LogLevel, limiter: &str, error: &dyn std::error::Error) {
        if level == LogLevel::Off {
            return;
        }
        if let Some(suppressed) = self.due() {
            level.log(limiter, error, suppressed);
        }
    }

    /// Whether a line is due (none was written in the last second): then how many events went
    /// unlogged since the last line. Otherwise the event is counted, and `None`.
    pub(crate) fn due(&self) -> Option<u64> {
        let now = u64::try_from(self.epoch.elapsed().as_millis())
            .unwrap_or(u64::MAX)
            .saturating_add(1);
        let last = self.last_ms.load(Ordering::Relaxed);
        let due = last == 0 || now.saturating_sub(last) >= millis(EVERY);
        // One writer wins the second; the others count themselves as suppressed.
        if due
            && self
                .last_ms
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            Some(self.suppressed.swap(0, Ordering::Relaxed))
        } else {
            self.suppressed.fetch_add(1, Ordering::Relaxed);
            None
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
