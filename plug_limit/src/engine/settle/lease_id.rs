//! Lease ids: unique across instances, and no client byte in them.

use std::hash::{BuildHasher, RandomState};
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// This process's part of every lease id: random, so two instances' ids never meet.
static NONCE: LazyLock<u64> = LazyLock::new(|| {
    let time = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos());
    RandomState::new().hash_one((std::process::id(), time))
});

/// The part of a lease id that tells this process's leases apart.
static SEQUENCE: AtomicU64 = AtomicU64::new(0);

/// A fresh lease id: unique across instances and within this one, 32 hex digits.
pub(crate) fn new_id() -> String {
    let sequence = SEQUENCE.fetch_add(1, Ordering::Relaxed);
    format!("{:016x}{sequence:016x}", *NONCE)
}
