//! Errors: a failed rate-limit check, and an invalid configuration.

use std::path::PathBuf;
use std::time::Duration;

use deadpool_redis::PoolError;
use deadpool_redis::redis::RedisError;

use crate::outcome::ReplyError;

/// Why a rate-limit check could not decide. The request then follows its
/// [`FailurePolicy`](crate::FailurePolicy).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No connection could be taken from the Redis pool.
    #[error("redis pool: {0}")]
    Pool(#[from] PoolError),
    /// Redis answered with an error (connection lost, script error, ...).
    #[error("redis: {0}")]
    Redis(#[from] RedisError),
    /// Redis kept failing and the circuit breaker is open: no call was made (see
    /// [`CircuitBreaker`](crate::CircuitBreaker)).
    #[error("redis is failing: circuit breaker open (for up to {0:?} at a time)")]
    CircuitOpen(Duration),
    /// The check took longer than the configured timeout.
    #[error("rate limit check timed out after {0:?}")]
    Timeout(Duration),
    /// The script's reply does not follow the script contract.
    #[error("invalid script reply: {0}")]
    Reply(#[from] ReplyError),
    /// A built-in limiter refused its options, cost or time: a wrong number of options, or
    /// values its script would refuse (on Redis the script's own error arrives as
    /// [`Error::Redis`]).
    #[error("invalid limiter input: {0}")]
    Input(String),
    /// A custom Lua limiter was asked for what only built-ins do: a cost other than 1, a
    /// peek, an explicit clock, or the memory backend.
    #[error(
        "limiter `{0}` is a custom script: costs, peeks, clocks and the memory backend need a built-in"
    )]
    NotBuiltIn(String),
    /// The limit names a limiter that is neither built in nor registered.
    #[error("unknown limiter `{0}`; register it with `Builder::limiter`")]
    UnknownLimiter(String),
}

/// An invalid configuration, reported by [`Builder::build`](crate::Builder::build) with the
/// field at fault and the rule it breaks.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// A field breaks a rule, e.g. `timeout` must be greater than zero.
    #[error("invalid `{field}`: {rule}")]
    Invalid {
        /// The field at fault, e.g. `limiters.login.headers`.
        field: String,
        /// The rule it breaks.
        rule: String,
    },
    /// A limiter's script file could not be read.
    #[error("cannot read `{field}` from {}: {source}", path.display())]
    ScriptFile {
        /// The field at fault, e.g. `limiters.login.script_file`.
        field: String,
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A limiter's own Redis URL does not make a pool.
    #[error("invalid `{field}`: {source}")]
    Pool {
        /// The field at fault, e.g. `limiters.login.redis_url`.
        field: String,
        /// Why the pool could not be made.
        source: deadpool_redis::CreatePoolError,
    },
}

impl BuildError {
    pub(crate) fn invalid(field: impl Into<String>, rule: impl Into<String>) -> Self {
        Self::Invalid {
            field: field.into(),
            rule: rule.into(),
        }
    }
}
