//! The memory backend: the built-in limiters evaluated in process, for one instance, tests and
//! local development.

use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::native::{self, Stored, Verdict};
use crate::{Clock, Error, Opt};

/// Independent locks, so concurrent requests for different keys rarely wait on each other.
const SHARDS: usize = 64;

/// A shard sweeps after at least this many operations: below it a sweep costs more than the
/// memory it frees.
const MIN_SWEEP: usize = 64;

/// Keeps each key's limiter state in a sharded map, evaluated by the same rules as the Lua
/// scripts.
///
/// Expired state is evicted without a background task: a shard sweeps its expired entries
/// once it has served as many operations as it kept entries at its last sweep. A sweep of
/// `n` entries thus follows at least `n / 2` operations (O(1) per operation, amortised), and a
/// shard holds at most its live keys plus the operations since its last sweep: about twice
/// its live keys.
pub(crate) struct MemoryBackend {
    shards: Box<[Mutex<Shard>]>,
    hasher: RandomState,
    clock: Arc<dyn Clock>,
}

struct Shard {
    entries: HashMap<Box<str>, Stored>,
    ops_since_sweep: usize,
    next_sweep: usize,
}

impl Default for Shard {
    fn default() -> Self {
        Self {
            entries: HashMap::new(),
            ops_since_sweep: 0,
            next_sweep: MIN_SWEEP,
        }
    }
}

impl Shard {
    fn sweep_if_due(&mut self, now_ms: i64) {
        self.ops_since_sweep += 1;
        if self.ops_since_sweep >= self.next_sweep {
            self.entries
                .retain(|_, stored| stored.expires_at_ms > now_ms);
            self.ops_since_sweep = 0;
            self.next_sweep = self.entries.len().max(MIN_SWEEP);
        }
    }
}

impl MemoryBackend {
    pub(crate) fn new(clock: Arc<dyn Clock>) -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            hasher: RandomState::new(),
            clock,
        }
    }

    fn shard(&self, key: &str) -> MutexGuard<'_, Shard> {
        // Truncation is the point: any bits of the hash pick a shard.
        #[allow(clippy::cast_possible_truncation)]
        let index = self.hasher.hash_one(key) as usize % SHARDS;
        // A shard's map is only written by `evaluate`, which cannot panic halfway.
        self.shards[index]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Evaluates built-in `limiter` for `key`, as its Lua script would.
    pub(crate) fn eval(
        &self,
        limiter: &str,
        key: &str,
        opts: &[Opt],
        cost: u32,
    ) -> Result<Verdict, Error> {
        let now_ms = self.clock.now_ms();
        let mut shard = self.shard(key);
        shard.sweep_if_due(now_ms);
        // Take the entry out and put it back, so an existing key costs no allocation.
        let (owned_key, mut slot) = match shard.entries.remove_entry(key) {
            Some((owned, stored)) if stored.expires_at_ms > now_ms => (Some(owned), Some(stored)),
            Some((owned, _expired)) => (Some(owned), None),
            None => (None, None),
        };
        let verdict = native::evaluate(limiter, opts, cost, now_ms, &mut slot);
        if let Some(stored) = slot {
            let owned_key = owned_key.unwrap_or_else(|| key.into());
            shard.entries.insert(owned_key, stored);
        }
        verdict.map_err(Error::Script)
    }

    /// Deletes `key`'s state.
    pub(crate) fn reset(&self, key: &str) {
        self.shard(key).entries.remove(key);
    }

    /// How many keys hold state, expired ones not yet swept included.
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

impl fmt::Debug for MemoryBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryBackend")
            .field("keys", &self.len())
            .field("now_ms", &self.clock.now_ms())
            .finish_non_exhaustive()
    }
}
