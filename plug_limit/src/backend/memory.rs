//! The memory backend: the built-in limiters evaluated in process, for one instance, tests and
//! local development.

use std::fmt;
use std::sync::Arc;

use crate::native::{self, Stored, Verdict};
use crate::sharded::Sharded;
use crate::{Clock, Error, Opt};

const SHARDS: usize = 64;

/// Keeps each key's limiter state in a [`Sharded`] map, evaluated by the same rules as the Lua
/// scripts; expired state is swept as traffic flows, without a background task.
pub(crate) struct MemoryBackend {
    states: Sharded<Stored>,
    clock: Arc<dyn Clock>,
}

impl MemoryBackend {
    pub(crate) fn new(clock: Arc<dyn Clock>) -> Self {
        Self {
            states: Sharded::new(SHARDS),
            clock,
        }
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
        let mut shard = self.states.shard(key);
        shard.sweep_if_due(|stored| stored.expires_at_ms > now_ms);
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
        self.states.shard(key).entries.remove(key);
    }

    /// How many keys hold state, expired ones not yet swept included.
    pub(crate) fn len(&self) -> usize {
        self.states.len()
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
