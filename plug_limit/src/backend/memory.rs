//! The memory backend: the built-in limiters evaluated in process, for one instance, tests and
//! local development.

use std::fmt;
use std::sync::Arc;

use crate::native::{self, Stored, Verdict};
use crate::sharded::Sharded;
use crate::{Clock, Error, Opt};

const SHARDS: usize = 64;

// The `Option` around each key's state costs no memory: `State`'s tag has room for `None`.
const _: () = assert!(size_of::<Option<Stored>>() == size_of::<Stored>());

/// Keeps each key's limiter state in a [`Sharded`] map, evaluated by the same rules as the Lua
/// scripts; expired state is swept as traffic flows, without a background task.
pub(crate) struct MemoryBackend {
    /// `None` only while an evaluation runs: a key whose state it deletes is removed.
    states: Sharded<Option<Stored>>,
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
        let mut shard = self.states.lock(key);
        shard.sweep_if_due(|slot| slot.as_ref().is_some_and(|s| s.expires_at_ms > now_ms));
        // An existing key is evaluated in place: one lookup, no allocation.
        if let Some(slot) = shard.get_mut(key) {
            if slot.as_ref().is_some_and(|s| s.expires_at_ms <= now_ms) {
                *slot = None;
            }
            let verdict = native::evaluate(limiter, opts, cost, now_ms, slot);
            if slot.is_none() {
                shard.remove(key);
            }
            return verdict.map_err(Error::Script);
        }
        let mut slot = None;
        let verdict = native::evaluate(limiter, opts, cost, now_ms, &mut slot);
        if slot.is_some() {
            shard.insert(key, slot);
        }
        verdict.map_err(Error::Script)
    }

    /// Deletes `key`'s state.
    pub(crate) fn reset(&self, key: &str) {
        self.states.lock(key).remove(key);
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
