//! Errors: a failed rate-limit check, an invalid configuration, and a script reply out of
//! contract.

use std::path::PathBuf;
use std::time::Duration;

use deadpool_redis::PoolError;
use deadpool_redis::redis::RedisError;

use http::HeaderName;

/// Why a rate-limit check could not decide. The request then follows its
/// [`FailurePolicy`](crate::FailurePolicy).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No connection could be taken from the Redis pool.
    #[error("redis pool: {}", server_text(.0))]
    Pool(#[from] PoolError),
    /// Redis answered with an error (connection lost, script error, ...).
    #[error("redis: {}", server_text(.0))]
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
    /// peek, an explicit clock, or the memory backend (its name, or a long one's first 64
    /// characters and length).
    #[error(
        "limiter `{0}` is a custom script: costs, peeks, clocks and the memory backend need a built-in"
    )]
    NotBuiltIn(String),
    /// The limit names a limiter that is neither built in nor registered (its name, or a long
    /// one's first 64 characters and length).
    #[error("unknown limiter `{0}`; register it with `Builder::limiter`")]
    UnknownLimiter(String),
}

/// A message from Redis as an error quotes it: escaped and bounded, as every quoted input is.
/// A script's refusal of an option fills the server's reply with the option, which a limit
/// made at run time may carry from anywhere.
fn server_text(error: &dyn std::fmt::Display) -> String {
    /// Enough for any message of the server's own; a quoted input is cut after it.
    const SERVER_TEXT_CHARS: usize = 512;
    plug_limit_options::excerpt_within(&error.to_string(), SERVER_TEXT_CHARS).into_owned()
}

impl Error {
    /// The same error again, for each of several requests one failed call answers (a local
    /// batch's reservation): the pool's errors, which do not clone, by what they say.
    pub(crate) fn duplicate(&self) -> Self {
        use deadpool_redis::redis::ErrorKind;
        match self {
            Self::Pool(PoolError::Timeout(kind)) => Self::Pool(PoolError::Timeout(*kind)),
            Self::Pool(PoolError::Backend(error)) => Self::Pool(PoolError::Backend(error.clone())),
            Self::Pool(PoolError::Closed) => Self::Pool(PoolError::Closed),
            Self::Pool(PoolError::NoRuntimeSpecified) => Self::Pool(PoolError::NoRuntimeSpecified),
            Self::Pool(other) => Self::Pool(PoolError::Backend(RedisError::from((
                ErrorKind::Io,
                "redis pool",
                other.to_string(),
            )))),
            Self::Redis(error) => Self::Redis(error.clone()),
            Self::CircuitOpen(open) => Self::CircuitOpen(*open),
            Self::Timeout(timeout) => Self::Timeout(*timeout),
            Self::Reply(error) => Self::Reply(error.clone()),
            Self::Input(text) => Self::Input(text.clone()),
            Self::NotBuiltIn(name) => Self::NotBuiltIn(name.clone()),
            Self::UnknownLimiter(name) => Self::UnknownLimiter(name.clone()),
        }
    }
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
    #[error("cannot read `{field}` from {}: {source}", plug_limit_options::excerpt(&path.display().to_string()))]
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

/// A script reply that does not follow the script contract.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReplyError {
    /// The reply is not an array.
    #[error("reply must be an array `{{decision, {{headers}}, extra...}}`, found {0}")]
    NotAnArray(&'static str),
    /// A stack's reply is not the one string of records the stack script packs.
    #[error("a stack's reply must be one string of records, found {0}")]
    NotPacked(&'static str),
    /// A stack's reply answers for more limits than it has, or for fewer without a denial
    /// that would have ended it.
    #[error(
        "a stack of {limits} limits answered {records} records: one a limit, or fewer after a denial"
    )]
    StackRecords {
        /// The limits of the call.
        limits: usize,
        /// The records of its reply.
        records: usize,
    },
    /// The reply array is empty.
    #[error("reply is empty; expected `\"allow\"` or `\"deny\"` first")]
    Empty,
    /// The first element is not `"allow"`, `"deny"` or `"block"`.
    #[error("unknown decision `{0}`; expected `allow` or `deny`")]
    UnknownDecision(String),
    /// The second element is not an array of header values.
    #[error("headers must be an array, found {0}")]
    HeadersNotAnArray(&'static str),
    /// A header value has no declared name and is not a `{name, value}` pair.
    #[error("header value {position} has no declared name ({declared} declared)")]
    UndeclaredHeader {
        /// Zero-based position in the headers array.
        position: usize,
        /// How many header names the limiter declares.
        declared: usize,
    },
    /// A header override is not a two-element `{name, value}` array.
    #[error("header override {position} must be a `{{name, value}}` pair")]
    BadOverride {
        /// Zero-based position in the headers array.
        position: usize,
    },
    /// A header override names a header that frames the message or belongs to the connection
    /// (`content-length`, `transfer-encoding`, `connection`, ...).
    #[error("header override {position} names `{name}`, which no script may set")]
    FramingHeader {
        /// Zero-based position in the headers array.
        position: usize,
        /// The header it names.
        name: HeaderName,
    },
    /// A header override names an invalid header.
    #[error("header override {position} has an invalid header name")]
    InvalidHeaderName {
        /// Zero-based position in the headers array.
        position: usize,
    },
    /// A header value is not a string or integer, or holds bytes a header cannot carry.
    #[error("header value {position} is invalid: {found}")]
    InvalidHeaderValue {
        /// Zero-based position in the headers array.
        position: usize,
        /// What was found instead.
        found: &'static str,
    },
    /// A batch's reply (cost `~n`) has no count of the units granted, or no milliseconds left
    /// of their window, after its headers.
    #[error(
        "a batch's reply must carry the units it granted and the milliseconds left of their window, two integers, after the headers"
    )]
    NoGrant,
}
