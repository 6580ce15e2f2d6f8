//! Where limiters run: Redis, or the process's memory. One dispatch for both.
//!
//! A backend gets a [`Call`] (which program, which keys, which options) and answers an
//! [`Outcome`]: the Redis backend through the script contract's reply, the memory backend
//! through the built-in's native twin. The Redis backend owns its timeout and its retry rule;
//! the memory backend never waits.

use std::sync::Arc;

use smallvec::SmallVec;

use crate::algorithm::{Builtin, Report, Runtime};
use crate::error::Error;
use crate::limit::{Charge, Opt, ReadAhead};
use crate::lua::Lua;
use crate::outcome::{Names, Outcome};

pub(crate) use self::digest::{ClientMemo, Digest, KeyDigests};
pub(crate) use self::memory::{MemoryBackend, Twin};
pub use self::redis::EvictionPolicy;
pub(crate) use self::redis::{Pools, RedisBackend, Settings as RedisSettings};

mod breaker;
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

/// What a limiter runs: a built-in algorithm, or a custom script, with its header names.
#[derive(Debug, Clone)]
pub(crate) struct Program {
    /// The limiter's registered name, for errors.
    pub(crate) name: Box<str>,
    /// The built-in its script implements; `None` for a custom script.
    pub(crate) algorithm: Option<Builtin>,
    pub(crate) script: Arc<Lua>,
    pub(crate) headers: Names,
}

impl Program {
    /// A built-in under its own name and headers.
    pub(crate) fn builtin(algorithm: Builtin) -> Self {
        Self {
            name: algorithm.name().into(),
            algorithm: Some(algorithm),
            script: Arc::clone(algorithm.script()),
            headers: Names::Builtin(algorithm.headers()),
        }
    }

    /// The built-in algorithm, or [`Error::NotBuiltIn`] for what only built-ins do.
    pub(crate) fn builtin_only(&self) -> Result<Builtin, Error> {
        self.algorithm
            .ok_or_else(|| Error::NotBuiltIn(plug_limit_options::excerpt(&self.name).into_owned()))
    }
}

/// One evaluation: a program, the request's namespaced keys, the limit's options (and a
/// built-in's read ahead, for its twin), the cost, and for a limiter that leases its units,
/// the lease's id (its ARGV entry after `now`): the lease a `Take` takes, or a `Refund` gives
/// back.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Call<'a> {
    pub(crate) program: &'a Program,
    pub(crate) keys: &'a dyn KeyText,
    pub(crate) opts: &'a [Opt],
    pub(crate) read_ahead: Option<&'a ReadAhead>,
    pub(crate) cost: Charge,
    pub(crate) lease: Option<&'a str>,
}

/// The keys of a call, as the backend reads them: every key's text (Redis), or only the first
/// key's digest (the in-process stores, for which a request's keys need not be composed).
pub(crate) trait KeyText: Sync + std::fmt::Debug {
    /// Every key's text.
    fn all(&self) -> &[String];

    /// The digest by `digests` of the first key past its first `head` bytes (its
    /// `{prefix}:{TAG}:`, which the in-process stores leave out); of an empty key without keys.
    fn first_digest(&self, head: usize, digests: &KeyDigests) -> Digest {
        digests.of_text(past_head(
            self.all().first().map_or("", String::as_str),
            head,
        ))
    }

    /// [`first_digest`](Self::first_digest), one of several on one map (a stack's): a client
    /// part `memo` holds from the key before is not hashed again.
    fn first_digest_shared<'s>(
        &'s self,
        head: usize,
        digests: &KeyDigests,
        memo: &mut ClientMemo<'s>,
    ) -> Digest {
        let _ = memo;
        self.first_digest(head, digests)
    }
}

/// The length of the `{prefix}:{TAG}:` head of every key under `prefix`: `:{`, the tag's four
/// hex digits, `}:` after the prefix. The in-process stores (the memory backend, the deny
/// cache, local batches) tell keys apart past it: one handle's keys share its prefix, and the
/// tag is a function of the client part that ends the key.
pub(crate) fn head_len(prefix: &str) -> usize {
    prefix.len() + ":{0000}:".len()
}

/// A client's keys of one limiter, under any options and scope: what
/// [`PlugLimit::reset_key`](crate::PlugLimit::reset_key) deletes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ClientKeys<'a> {
    pub(crate) prefix: &'a str,
    /// Their hash tag.
    pub(crate) tag: [u8; 4],
    pub(crate) limiter: &'a str,
    /// The client part they hold: the client's key, or `#` and its digest.
    pub(crate) part: &'a str,
}

/// `key` past its first `head` bytes; all of it when it is shorter.
pub(crate) fn past_head(key: &str, head: usize) -> &[u8] {
    let bytes = key.as_bytes();
    bytes.get(head..).unwrap_or(bytes)
}

impl KeyText for [String; 1] {
    fn all(&self) -> &[String] {
        self
    }
}

impl KeyText for Vec<String> {
    fn all(&self) -> &[String] {
        self
    }
}

/// One limit of stacked limits: its program (a built-in), its key, options and cost, and
/// whether its denial denies the stack (`soft`: shadow mode, it does not).
#[derive(Debug, Clone, Copy)]
pub(crate) struct StackPart<'a> {
    pub(crate) program: &'a Program,
    pub(crate) keys: &'a dyn KeyText,
    pub(crate) opts: &'a [Opt],
    pub(crate) read_ahead: Option<&'a ReadAhead>,
    pub(crate) cost: u32,
    pub(crate) soft: bool,
}

impl StackPart<'_> {
    /// The built-in the part runs, or why it cannot be stacked: a custom script, options
    /// of another number than its built-in's, or a built-in that leases (its lease would
    /// outlive the call).
    #[inline(always)]
    pub(crate) fn builtin(&self) -> Result<Builtin, Error> {
        let algorithm = self.program.builtin_only()?;
        algorithm
            .check_arity(self.opts.len())
            .map_err(|refusal| Error::Input(refusal.into()))?;
        if algorithm.leases() {
            return Err(Error::Input(format!(
                "{}: cannot be stacked: its lease outlives the call",
                algorithm.name()
            )));
        }
        Ok(algorithm)
    }

    /// The part's key, composed: what Redis reads.
    pub(crate) fn key(&self) -> &str {
        self.keys.all().first().map_or("", String::as_str)
    }
}

/// What stacked limits answered: each part's answer, in order, `None` for those not run
/// (after a denial).
pub(crate) type Stacked = Result<Outcomes, Error>;

/// Each stacked part's answer, a stack's few held inline.
pub(crate) type Outcomes = SmallVec<[Option<Answer>; 4]>;

/// What one part of a stack answered: Redis's reply, read to an outcome, or a twin's verdict,
/// checked as a reply is and made an outcome only when the stack keeps it. Of a stack that
/// allows, one limit speaks for all (in the legacy style): the others' outcomes, each an
/// allocation, would be made only to be dropped.
#[derive(Debug)]
pub(crate) enum Answer {
    Outcome(Outcome),
    Twin(Twin),
}

impl Answer {
    pub(crate) fn is_allowed(&self) -> bool {
        match self {
            Self::Outcome(outcome) => outcome.is_allowed(),
            Self::Twin(twin) => twin.is_allowed(),
        }
    }

    /// The numbers a built-in reported of the limit.
    pub(crate) fn report(&self) -> Option<&Report> {
        match self {
            Self::Outcome(outcome) => outcome.report(),
            Self::Twin(twin) => Some(twin.report()),
        }
    }

    /// The outcome, its values under `names` (its limiter's header names) for a twin's.
    pub(crate) fn into_outcome(self, names: &Names) -> Outcome {
        match self {
            Self::Outcome(outcome) => outcome,
            Self::Twin(twin) => twin.into_outcome(names),
        }
    }
}

/// How far a backend gets without waiting: decided (memory), or to be sent to Redis.
pub(crate) enum Started<'a> {
    Done(Result<Outcome, Error>),
    Redis(&'a RedisBackend),
}

/// How far stacked limits get without waiting: decided (memory, its answers in the caller's
/// collection, or its error), or to be sent to Redis.
pub(crate) enum StartedStack<'a> {
    Done(Result<(), Error>),
    Redis(&'a RedisBackend),
}

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
    pub(crate) fn start(&self, call: Call<'_>) -> Started<'_> {
        // A wrong number of opts would shift the cost and `now` into an option's place:
        // refused before either backend, so both answer alike.
        if let Some(algorithm) = call.program.algorithm
            && let Err(refusal) = algorithm.check_arity(call.opts.len())
        {
            return Started::Done(Err(Error::Input(refusal.into())));
        }
        match self {
            Self::Memory(memory) => Started::Done(memory.eval(call)),
            Self::Redis(redis) => Started::Redis(redis),
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
            Self::Memory(memory) => StartedStack::Done(memory.eval_stack(parts, answers)),
            Self::Redis(redis) => {
                for part in parts {
                    part.builtin()?;
                }
                StartedStack::Redis(redis)
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
            Started::Redis(redis) => Box::pin(redis.eval(call)).await,
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
