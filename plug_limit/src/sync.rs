//! The lock that requests for one key meet at, where several threads change one state: a
//! shard of the in-process stores (`backend/sharded.rs`: the memory backend, the deny cache,
//! local batches' slots) and a key's local batch (`engine/batch/slot.rs`).
//!
//! std's, except in this crate's tests built with `--cfg plug_limit_loom`, where it is the
//! model checker `loom`'s, which runs every interleaving of the threads a model starts (see
//! the guide, "What is proved about threads"). Only in its tests: `loom` is a dev-dependency,
//! so the library itself builds with std's under the flag too. A re-export either way: a
//! request pays nothing for it.

#[cfg(all(test, plug_limit_loom))]
pub(crate) use loom::sync::{Mutex, MutexGuard};
#[cfg(not(all(test, plug_limit_loom)))]
pub(crate) use std::sync::{Mutex, MutexGuard};
