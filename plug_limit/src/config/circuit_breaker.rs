//! When the Redis backend stops calling Redis for a while.

use std::time::Duration;

use serde::Deserialize;

/// The circuit breaker of a Redis backend: after `failures` consecutive failed calls (timeouts,
/// lost connections, an exhausted pool), Redis is not called for `open_for`, and every check
/// follows its [`FailurePolicy`](crate::FailurePolicy) at once instead of waiting out the
/// timeout. Then one check at a time probes Redis (half-open); the first success closes the
/// breaker, a failure opens it for another `open_for`.
///
/// A script error or a reply out of contract is the script's fault, not Redis's: it does not
/// count. Each transition is logged once, at the [`PlugLimit`](crate::PlugLimit)'s log level.
///
/// On Redis Cluster each master has a breaker of its own with these settings, found by the
/// slot of a check's key in the cluster's slot map: one master's outage opens only its breaker,
/// and the checks of the other masters go on as if nothing happened.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use plug_limit::CircuitBreaker;
///
/// let breaker = CircuitBreaker::new(3, Duration::from_millis(500));
/// assert_eq!(breaker.failures(), 3);
/// assert_eq!(CircuitBreaker::default().open_for(), Duration::from_secs(1));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CircuitBreaker {
    failures: u32,
    #[serde(rename = "open_for_ms", with = "millis")]
    open_for: Duration,
}

impl CircuitBreaker {
    /// Opens after `failures` consecutive failures, for `open_for`. Checked by
    /// [`Builder::build`](crate::Builder::build): `failures` at least 1, `open_for` above zero.
    #[must_use]
    pub const fn new(failures: u32, open_for: Duration) -> Self {
        Self { failures, open_for }
    }

    /// How many consecutive failures open the breaker.
    #[must_use]
    pub const fn failures(&self) -> u32 {
        self.failures
    }

    /// How long the breaker stays open before it lets one probe through.
    #[must_use]
    pub const fn open_for(&self) -> Duration {
        self.open_for
    }
}

impl Default for CircuitBreaker {
    /// 5 consecutive failures open it for 1 s: a few requests learn of an outage, the rest
    /// pay nothing for it, and a recovered Redis is back in use within a second.
    fn default() -> Self {
        Self::new(5, Duration::from_secs(1))
    }
}

mod millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer};

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_millis)
    }
}
