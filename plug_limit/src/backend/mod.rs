//! Where limiters run: Redis, or the process's memory. One dispatch for both.
//!
//! A backend gets a [`Call`] (which program, which keys, which options) and answers an
//! [`Outcome`]: the Redis backend through the script contract's reply, the memory backend
//! through the built-in's native twin. The Redis backend owns its timeout and its retry rule;
//! the memory backend never waits.

use std::sync::Arc;

use crate::error::Error;
use crate::outcome::Outcome;

pub(crate) use self::answer::{Answer, Outcomes};
pub(crate) use self::call::{Call, ClientKeys, KeyText, Program, StackPart, head_len, past_head};
pub(crate) use self::digest::{ClientMemo, Digest, KeyDigests};
pub(crate) use self::memory::MemoryBackend;
pub use self::redis::EvictionPolicy;
pub(crate) use self::redis::{ConnectionSource, RedisBackend, Settings as RedisSettings};

mod answer;
mod breaker;
mod call;
pub(crate) mod digest;
mod memory;
mod redis;
pub(crate) mod sharded;

/// A backend a limiter runs on.
#[derive(Debug, Clone)]
pub(crate) enum Backend {
    Redis(Arc<RedisBackend>),
    Memory(Arc<MemoryBackend>),
}

/// How far something gets without waiting: done, or waiting on Redis (a call, for the Redis
/// to send it to; a check, its future).
pub(crate) enum Started<T, W> {
    Done(T),
    Waiting(W),
}

/// How far a call gets without waiting: decided (memory), or to be sent to Redis.
pub(crate) type StartedCall<'a> = Started<Result<Outcome, Error>, &'a RedisBackend>;

/// How far stacked limits get without waiting: decided (memory, its answers in the caller's
/// collection, or its error), or to be sent to Redis.
pub(crate) type StartedStack<'a> = Started<Result<(), Error>, &'a RedisBackend>;

impl Backend {
    /// The backend's name in telemetry: `redis` or `memory`.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Self::Redis(_) => "redis",
            Self::Memory(_) => "memory",
        }
    }

    /// Evaluates `call` as far as it goes without waiting. A built-in's option count is
    /// checked first, so both backends refuse the same calls alike.
    ///
    /// The caller awaits a Redis call itself ([`RedisBackend::eval`]), so that its state lives
    /// in the caller's one boxed future rather than in a box of its own.
    pub(crate) fn start(&self, call: Call<'_>) -> StartedCall<'_> {
        // A wrong number of opts would shift the cost and `now` into an option's place:
        // refused before either backend, so both answer alike.
        if let Some(algorithm) = call.program.algorithm
            && let Err(refusal) = algorithm.check_arity(call.opts.len())
        {
            return Started::Done(Err(Error::Input(refusal.into())));
        }
        match self {
            Self::Memory(memory) => Started::Done(memory.eval(call)),
            Self::Redis(redis) => Started::Waiting(redis),
        }
    }

    /// Evaluates stacked limits as far as they go without waiting: every part must be a
    /// built-in with its number of options, and one that does not lease
    /// ([`StackPart::builtin`]). Decided in memory, each part's answer is pushed onto
    /// `answers` (empty when called), where the caller holds them: a stack's few answers,
    /// returned, would be copied at each step on the way.
    ///
    /// The parts are read as they are made, in order, once per pass over them: a stack's
    /// parts are not collected first.
    pub(crate) fn start_stack<'p>(
        &self,
        parts: impl Iterator<Item = StackPart<'p>> + Clone,
        answers: &mut Outcomes,
    ) -> Result<StartedStack<'_>, Error> {
        Ok(match self {
            // Checks each part as it reads it.
            Self::Memory(memory) => Started::Done(memory.eval_stack(parts, answers)),
            Self::Redis(redis) => {
                for part in parts {
                    part.builtin()?;
                }
                Started::Waiting(redis)
            }
        })
    }

    /// Whether `self` and `other` are one backend (stacked limits must share theirs).
    pub(crate) fn is(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Redis(a), Self::Redis(b)) => Arc::ptr_eq(a, b),
            (Self::Memory(a), Self::Memory(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// Evaluates `call`, waiting for Redis if need be.
    pub(crate) async fn eval(&self, call: Call<'_>) -> Result<Outcome, Error> {
        match self.start(call) {
            Started::Done(result) => result,
            // Boxed: a Redis call's state (the call, its timer, the retry) is most of the
            // future, and this one is awaited by callers that also evaluate in memory.
            Started::Waiting(redis) => Box::pin(redis.eval(call)).await,
        }
    }

    /// Forgets everything counted under `key`.
    pub(crate) async fn reset(&self, key: &str) -> Result<(), Error> {
        match self {
            Self::Memory(memory) => {
                memory.reset(key);
                Ok(())
            }
            Self::Redis(redis) => redis.delete(key).await,
        }
    }

    /// Deletes `client`'s keys (in memory: those under every options and scope this process
    /// counted); returns how many there were.
    pub(crate) async fn clear_client(&self, client: ClientKeys<'_>) -> Result<u64, Error> {
        match self {
            Self::Memory(memory) => {
                let count = memory.reset_client(client.limiter, client.part);
                Ok(u64::try_from(count).unwrap_or(u64::MAX))
            }
            Self::Redis(redis) => redis.delete_client(client).await,
        }
    }

    /// Deletes every key under `prefix`; returns how many there were.
    pub(crate) async fn clear(&self, prefix: &str) -> Result<u64, Error> {
        match self {
            Self::Memory(memory) => Ok(u64::try_from(memory.clear()).unwrap_or(u64::MAX)),
            Self::Redis(redis) => redis.delete_prefix(prefix).await,
        }
    }

    /// What is known of the Redis server's `maxmemory-policy`; `None` in memory.
    pub(crate) fn redis_eviction(&self) -> Option<EvictionPolicy> {
        match self {
            Self::Redis(redis) => Some(redis.eviction()),
            Self::Memory(_) => None,
        }
    }

    /// How many keys the memory backend holds state for; `None` on Redis.
    pub(crate) fn memory_keys(&self) -> Option<usize> {
        match self {
            Self::Memory(memory) => Some(memory.len()),
            Self::Redis(_) => None,
        }
    }
}
