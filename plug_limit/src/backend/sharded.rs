//! A string-keyed map split over independently locked shards, with expired entries swept as
//! traffic flows: the store of the memory backend and of the local deny cache.

use std::hash::{BuildHasher, RandomState};
use std::sync::{Mutex, MutexGuard, PoisonError};

use hashbrown::HashTable;

/// A shard sweeps after at least this many operations: below it a sweep costs more than the
/// memory it frees.
const MIN_SWEEP: usize = 64;

/// Independent locks, so concurrent requests for different keys rarely wait on each other.
///
/// Keys come from clients, so they are hashed with std's DoS-resistant SipHash; but only once
/// per operation: the one hash picks the shard (from its high bits) and probes the shard's
/// table (which reads its low bits and its top seven).
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
struct Shard<V> {
    entries: HashTable<(Box<str>, V)>,
    ops_since_sweep: usize,
    next_sweep: usize,
}

/// The shard that holds one key, locked, with the key's hash.
pub(crate) struct Locked<'a, V> {
    shard: MutexGuard<'a, Shard<V>>,
    hasher: &'a RandomState,
    hash: u64,
}

impl<V> Sharded<V> {
    pub(crate) fn new(shards: usize) -> Self {
        Self {
            shards: (0..shards.max(1))
                .map(|_| {
                    Mutex::new(Shard {
                        entries: HashTable::new(),
                        ops_since_sweep: 0,
                        next_sweep: MIN_SWEEP,
                    })
                })
                .collect(),
            hasher: RandomState::new(),
        }
    }

    /// The locked shard that holds `key`, ready for operations on `key`.
    pub(crate) fn lock(&self, key: &str) -> Locked<'_, V> {
        let hash = self.hasher.hash_one(key);
        // Truncation is the point: any bits of the hash pick a shard, and these are bits the
        // table does not probe by.
        #[allow(clippy::cast_possible_truncation)]
        let index = (hash >> 32) as usize % self.shards.len();
        Locked {
            // Only plain map operations and non-panicking evaluations run under the lock:
            // nothing can leave a shard half-written.
            shard: self.shards[index]
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
            hasher: &self.hasher,
            hash,
        }
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

impl<V> Locked<'_, V> {
    /// Counts one operation, and drops the entries `live` rejects when a sweep is due.
    pub(crate) fn sweep_if_due(&mut self, live: impl FnMut(&V) -> bool) {
        let mut live = live;
        let shard = &mut *self.shard;
        shard.ops_since_sweep += 1;
        if shard.ops_since_sweep >= shard.next_sweep {
            shard.entries.retain(|(_, value)| live(value));
            shard.ops_since_sweep = 0;
            shard.next_sweep = shard.entries.len().max(MIN_SWEEP);
        }
    }

    /// The value stored under `key` (the key this shard was locked for).
    pub(crate) fn get_mut(&mut self, key: &str) -> Option<&mut V> {
        self.shard
            .entries
            .find_mut(self.hash, |(stored, _)| **stored == *key)
            .map(|(_, value)| value)
    }

    /// Stores `value` under `key`, replacing any value it had.
    pub(crate) fn insert(&mut self, key: &str, value: V) {
        let hasher = self.hasher;
        let entry = self.shard.entries.entry(
            self.hash,
            |(stored, _)| **stored == *key,
            |(stored, _)| hasher.hash_one(&**stored),
        );
        match entry {
            hashbrown::hash_table::Entry::Occupied(mut occupied) => occupied.get_mut().1 = value,
            hashbrown::hash_table::Entry::Vacant(vacant) => {
                vacant.insert((key.into(), value));
            }
        }
    }

    /// Forgets `key`.
    pub(crate) fn remove(&mut self, key: &str) {
        if let Ok(occupied) = self
            .shard
            .entries
            .find_entry(self.hash, |(stored, _)| **stored == *key)
        {
            occupied.remove();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shard_sweeps_once_it_served_as_many_operations_as_it_kept() {
        let map: Sharded<u32> = Sharded::new(1);
        for i in 0..100u32 {
            let key = i.to_string();
            let mut shard = map.lock(&key);
            shard.sweep_if_due(|&v| v >= 50);
            shard.insert(&key, i);
        }
        // The 64th operation swept the first 50 away; 36 more were inserted since.
        assert_eq!(map.len(), 14 + 36);
        assert_eq!(map.lock("49").get_mut("49"), None);
        assert_eq!(map.lock("50").get_mut("50"), Some(&mut 50));
    }

    #[test]
    fn insert_replaces_and_remove_forgets() {
        let map: Sharded<u32> = Sharded::new(4);
        map.lock("a").insert("a", 1);
        map.lock("a").insert("a", 2);
        map.lock("b").insert("b", 3);
        assert_eq!(map.len(), 2);
        assert_eq!(map.lock("a").get_mut("a"), Some(&mut 2));
        map.lock("a").remove("a");
        map.lock("a").remove("a");
        assert_eq!(map.lock("a").get_mut("a"), None);
        assert_eq!(map.lock("b").get_mut("b"), Some(&mut 3));
        assert_eq!(map.len(), 1);
    }
}
