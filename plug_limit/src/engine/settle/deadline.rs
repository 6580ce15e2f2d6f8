//! [`Deadline`]: a time by the limits' clock, for what stops being owed.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::clock::Clock;

/// A time by the limits' clock: the configured one, else this process's monotonic one.
pub(crate) enum Deadline {
    Monotonic(Instant),
    Clock(Arc<dyn Clock>, i64),
}

impl Deadline {
    /// `wait` from now by `clock`, or by the monotonic clock without one.
    pub(crate) fn after(clock: Option<&Arc<dyn Clock>>, wait: Duration) -> Self {
        match clock {
            Some(clock) => {
                let ms = i64::try_from(wait.as_millis()).unwrap_or(i64::MAX);
                Self::Clock(Arc::clone(clock), clock.now_ms().saturating_add(ms))
            }
            None => Self::Monotonic(Instant::now() + wait),
        }
    }

    /// Whether the deadline has come.
    pub(super) fn passed(&self) -> bool {
        match self {
            Self::Monotonic(at) => Instant::now() >= *at,
            Self::Clock(clock, at_ms) => clock.now_ms() >= *at_ms,
        }
    }
}
