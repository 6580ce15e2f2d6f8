//! What every slot of a limiter's batches shares, and the reservations and give-backs that
//! outlive a request: the settings, the limiter's program, the timeout, the slots by key.

use std::sync::Arc;
use std::time::Duration;

use super::Slot;
use crate::backend::Program;
use crate::backend::sharded::Sharded;
use crate::config::LocalBatches;

/// The state of a limiter's batches, shared with their reservations and give-backs.
pub(super) struct BatchesInner {
    pub(super) settings: LocalBatches,
    /// The limiter's program, for the reservations and give-backs, which outlive the
    /// request.
    pub(super) program: Program,
    /// The check's timeout: the most a request waits for its key's reservation, and how long
    /// a give-back may take to land.
    pub(super) timeout: Duration,
    /// By key (the digest of its text past the `{prefix}:{TAG}:` head, as the memory backend
    /// keys it).
    pub(super) slots: Sharded<Arc<Slot>>,
    /// The length of its keys' head.
    pub(super) head: usize,
}
