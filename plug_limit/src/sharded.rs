//! A string-keyed map split over independently locked shards, with expired entries swept as
//! traffic flows: the store of the memory backend and of the local deny cache.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// A shard sweeps after at least this many operations: below it a sweep costs more than the
/// memory it frees.
const MIN_SWEEP: usize = 64;

/// Independent locks, so concurrent requests for different keys rarely wait on each other.
#[derive(Debug)]
pub(crate) struct Sharded<V> {
    shards: Box<[Mutex<Shard<V>>]>,
    hasher: RandomState,
}

/// One shard: its entries, and when it sweeps next.
///
/// Expired entries are evicted without a background task: a shard sweeps once it has counted
/// as many operations as it kept entries at its last sweep. A sweep of `n` entries thus follows
/// at least `n / 2` operations (O(1) per operation, amortised), and a shard holds at most its
/// live entries plus the operations since its last sweep: about twice its live entries.
#[derive(Debug)]
pub(crate) struct Shard<V> {
    pub(crate) entries: HashMap<Box<str>, V>,
    ops_since_sweep: usize,
    next_sweep: usize,
}

impl<V> Shard<V> {
    /// Counts one operation, and drops the entries `live` rejects when a sweep is due.
    pub(crate) fn sweep_if_due(&mut self, live: impl FnMut(&V) -> bool) {
        let mut live = live;
        self.ops_since_sweep += 1;
        if self.ops_since_sweep >= self.next_sweep {
            self.entries.retain(|_, value| live(value));
            self.ops_since_sweep = 0;
            self.next_sweep = self.entries.len().max(MIN_SWEEP);
        }
    }
}

impl<V> Sharded<V> {
    pub(crate) fn new(shards: usize) -> Self {
        Self {
            shards: (0..shards.max(1))
                .map(|_| {
                    Mutex::new(Shard {
                        entries: HashMap::new(),
                        ops_since_sweep: 0,
                        next_sweep: MIN_SWEEP,
                    })
                })
                .collect(),
            hasher: RandomState::new(),
        }
    }

    /// The locked shard that holds `key`.
    pub(crate) fn shard(&self, key: &str) -> MutexGuard<'_, Shard<V>> {
        // Truncation is the point: any bits of the hash pick a shard.
        #[allow(clippy::cast_possible_truncation)]
        let index = self.hasher.hash_one(key) as usize % self.shards.len();
        // Only plain map operations and non-panicking evaluations run under the lock: nothing
        // can leave a shard half-written.
        self.shards[index]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// How many entries the shards hold, expired ones not yet swept included.
    pub(crate) fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| {
                shard
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .entries
                    .len()
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shard_sweeps_once_it_served_as_many_operations_as_it_kept() {
        let map: Sharded<u32> = Sharded::new(1);
        let mut shard = map.shard("any");
        for i in 0..100u32 {
            shard.sweep_if_due(|&v| v >= 50);
            shard.entries.insert(i.to_string().into(), i);
        }
        // The 64th operation swept the first 50 away; 36 more were inserted since.
        assert_eq!(shard.entries.len(), 14 + 36);
        drop(shard);
        assert_eq!(map.len(), 50);
    }
}
