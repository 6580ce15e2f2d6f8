//! The settings of a limiter's local batches (see [`LocalBatches`]).

use std::time::Duration;

/// Local batches for hot keys: an instance reserves a batch of units from Redis in one call
/// and admits requests from it without a round trip, giving back what it did not use. Set with
/// [`Limiter::local_batches`](crate::Limiter::local_batches), on a `fixed_window` or
/// `token_bucket` limiter on Redis.
///
/// A batch is granted by one call of the limiter's own script (cost `~n`: up to `n` units, as
/// many as the key has left, and how long their window lasts, to the millisecond), so every
/// unit admitted locally was counted in Redis first, and it is spent only while the window it
/// was granted in surely lasts. The batch size follows the key's observed rate at this
/// instance: about one reservation per key every [`every`](Self::every), between 1 and
/// [`max`](Self::new) units, and the next one is reserved ahead, by the round trip the
/// instance measures, so that no request waits on the store in steady state. A cold key gets
/// batches of one, one call per request, as without batches.
///
/// One reservation per key is on its way at a time: the requests that find no unit wait for
/// it (at most [`queue`](Self::queue) of them, each at most the check's timeout) and are
/// answered when it lands, in order. A denial answers them all and is held until the limit
/// could admit again. A batch never passes a request by itself: past the queue or the timeout
/// a request is denied with the limit's numbers, and only what the store fails follows the
/// failure policy ([`FailurePolicy::LocalShare`](crate::FailurePolicy::LocalShare) decides by
/// this instance's recent share).
///
/// # Bounds
///
/// - Over-admission: none while Redis answers. Across any number of instances, a window admits
///   at most its limit (a token bucket: at most its window's `limit`; a burst may come up to
///   one batch per instance later than Redis granted it).
/// - Under-admission: units other instances hold unspent, at most `(instances - 1) x max`
///   at any time (twice that with a batch reserved ahead); they are given back once their
///   batch goes idle, and lost only when a window ends before they could be.
///
/// # Example
///
/// ```
/// use plug_limit::{Limiter, LocalBatches};
///
/// let hot = Limiter::fixed_window().local_batches(LocalBatches::new(200));
/// # let _ = hot;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalBatches {
    pub(crate) max: u32,
    pub(crate) every: Duration,
    pub(crate) queue: u32,
}

/// The default time between two reservations of one hot key.
const EVERY: Duration = Duration::from_millis(25);

/// The default bound on the requests of one key waiting for a reservation at an instance.
const QUEUE: u32 = 1_024;

/// The most [`LocalBatches::queue`] takes.
const QUEUE_MAX: u32 = 1_000_000;

impl LocalBatches {
    /// Batches of at most `max` units (1..=2147483647), reserved about every 25 ms per hot
    /// key.
    #[must_use]
    pub fn new(max: u32) -> Self {
        Self {
            max,
            every: EVERY,
            queue: QUEUE,
        }
    }

    /// The time to aim for between two reservations of one key (more than 0, at most a
    /// second): the batch size is the key's rate at this instance times this, at most `max`.
    /// A batch left unspent this long goes back to Redis.
    #[must_use]
    pub fn every(mut self, every: Duration) -> Self {
        self.every = every;
        self
    }

    /// The most requests of one key that wait at this instance for its next reservation
    /// (1..=1000000, 1024 by default). Past it a request is denied at once, with the limit's
    /// numbers and a `retry-after` of a second: the queue never grows past what a few
    /// reservations serve, and never into a wait that ends in the failure policy.
    #[must_use]
    pub fn queue(mut self, queue: u32) -> Self {
        self.queue = queue;
        self
    }

    /// The field and rule these settings break, if any.
    pub(crate) fn invalid(&self) -> Option<(&'static str, &'static str)> {
        if self.max == 0 || self.max > 2_147_483_647 {
            return Some(("max", "must be 1..=2147483647"));
        }
        if self.queue == 0 || self.queue > QUEUE_MAX {
            return Some(("queue", "must be 1..=1000000"));
        }
        if self.every.is_zero() || self.every > Duration::from_secs(1) {
            return Some(("every", "must be more than 0 and at most 1 second"));
        }
        None
    }
}
