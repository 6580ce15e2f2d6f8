//! The [`Limit`] trait: what a handler's limit names, and the options it passes.

use std::fmt;

use deadpool_redis::redis::{RedisWrite, ToRedisArgs};

use crate::key::KeyExtractor;

/// One option handed to a limiter's Lua script as an `ARGV` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Opt {
    /// An integer option, such as a limit or a window length in seconds.
    Int(i64),
    /// A string option, for custom scripts that take words.
    Str(&'static str),
}

impl fmt::Display for Opt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Int(n) => write!(f, "{n}"),
            Self::Str(s) => f.write_str(s),
        }
    }
}

impl ToRedisArgs for Opt {
    fn write_redis_args<W: ?Sized + RedisWrite>(&self, out: &mut W) {
        match self {
            Self::Int(n) => n.write_redis_args(out),
            Self::Str(s) => s.write_redis_args(out),
        }
    }
}

/// A rate limit a handler is subject to: which limiter, with which options, keyed how.
///
/// A handler's limit lives in a type because an extractor sees only the request parts and the
/// router state. The built-in limits ([`FixedWindow`](crate::FixedWindow),
/// [`TokenBucket`](crate::TokenBucket), ...) implement it with const
/// generics; `#[rate_limit]` generates an implementation for every annotated handler; and any
/// zero-sized type can implement it by hand, for instance to call a custom limiter registered
/// with [`Builder::limiter`](crate::Builder::limiter).
///
/// # Example
///
/// ```
/// use plug_limit::{key, KeyExtractor, Limit, Opt, RateLimited};
///
/// /// Five login attempts a minute per user name header, on a custom script.
/// struct LoginAttempts;
///
/// impl Limit for LoginAttempts {
///     const LIMITER: &'static str = "login";
///     const OPTS: &'static [Opt] = &[Opt::Int(5), Opt::Int(60), Opt::Str("strict")];
///     const SCOPE: Option<&'static str> = Some("login");
///     const KEY: Option<&'static dyn KeyExtractor> = Some(&key::header("x-user-name"));
/// }
///
/// async fn login(_limited: RateLimited<LoginAttempts>) -> &'static str {
///     "welcome"
/// }
/// ```
pub trait Limit: Send + Sync + 'static {
    /// The limiter's name: `fixed_window`, `token_bucket`, or one registered with
    /// [`Builder::limiter`](crate::Builder::limiter).
    const LIMITER: &'static str;

    /// The options, in the order of the script's `ARGV`.
    const OPTS: &'static [Opt];

    /// How many units one request consumes (default 1). Built-in limiters only: a custom
    /// script's `ARGV` is exactly [`OPTS`](Self::OPTS).
    const COST: u32 = 1;

    /// The budget this limit counts against. `None` (the default) scopes it to the matched
    /// route, so two routes never share a budget unless they name the same scope.
    const SCOPE: Option<&'static str> = None;

    /// The key extractor for this limit. `None` (the default) uses the limiter's key, or else
    /// the [`PlugLimit`](crate::PlugLimit)'s default key.
    const KEY: Option<&'static dyn KeyExtractor> = None;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opts_render_as_redis_arguments() {
        assert_eq!(Opt::Int(-3).to_redis_args(), vec![b"-3".to_vec()]);
        assert_eq!(Opt::Str("x").to_redis_args(), vec![b"x".to_vec()]);
        assert_eq!(Opt::Int(7).to_string(), "7");
    }
}
