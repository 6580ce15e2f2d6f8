//! The [`Limit`] trait and the built-in limits usable as types.

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
/// router state. The built-in [`FixedWindow`] and [`TokenBucket`] implement it with const
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

    /// The budget this limit counts against. `None` (the default) scopes it to the matched
    /// route, so two routes never share a budget unless they name the same scope.
    const SCOPE: Option<&'static str> = None;

    /// The key extractor for this limit. `None` (the default) uses the limiter's key, or else
    /// the [`PlugLimit`](crate::PlugLimit)'s default key.
    const KEY: Option<&'static dyn KeyExtractor> = None;
}

/// The fixed window limiter: at most `LIMIT` requests per `WINDOW` seconds.
///
/// The Lua script (`lua/fixed_window.lua`) keeps one counter per key that expires with the
/// window. Headers: `x-ratelimit-limit`, `x-ratelimit-reset` (seconds until the window
/// restarts), `x-ratelimit-remaining`.
///
/// Zero options are refused at compile time.
///
/// # Example
///
/// ```
/// use plug_limit::{FixedWindow, RateLimited};
///
/// // 10 requests per minute per client.
/// async fn search(limited: RateLimited<FixedWindow<10, 60>>) -> (RateLimited<FixedWindow<10, 60>>, &'static str) {
///     (limited, "results")
/// }
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct FixedWindow<const LIMIT: u32, const WINDOW: u32>;

impl<const LIMIT: u32, const WINDOW: u32> Limit for FixedWindow<LIMIT, WINDOW> {
    const LIMITER: &'static str = "fixed_window";
    const OPTS: &'static [Opt] = {
        assert!(LIMIT >= 1, "fixed_window: `limit` must be >= 1");
        assert!(WINDOW >= 1, "fixed_window: `window` must be >= 1");
        &[Opt::Int(LIMIT as i64), Opt::Int(WINDOW as i64)]
    };
}

/// The token bucket limiter: a bucket of `BURST` tokens refilled at
/// `(LIMIT - BURST) / WINDOW` tokens a second, at most `LIMIT` requests per `WINDOW` seconds.
///
/// The bucket starts full (`BURST` tokens) and resets every window. Headers:
/// `x-ratelimit-limit` (`"20 20;w=600;burst=5;policy=token_bucket"`), `x-ratelimit-reset`,
/// `x-ratelimit-remaining`, and `retry-after` once the bucket is empty.
///
/// `BURST` must be between 1 and `LIMIT`, and `WINDOW` at least 1; anything else is refused at
/// compile time.
///
/// # Example
///
/// ```
/// use plug_limit::{RateLimited, TokenBucket};
///
/// // Bursts of 5, 20 requests per 10 minutes.
/// async fn export(_limited: RateLimited<TokenBucket<20, 600, 5>>) -> &'static str {
///     "exported"
/// }
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct TokenBucket<const LIMIT: u32, const WINDOW: u32, const BURST: u32>;

impl<const LIMIT: u32, const WINDOW: u32, const BURST: u32> Limit
    for TokenBucket<LIMIT, WINDOW, BURST>
{
    const LIMITER: &'static str = "token_bucket";
    const OPTS: &'static [Opt] = {
        assert!(WINDOW >= 1, "token_bucket: `window` must be >= 1");
        assert!(BURST >= 1, "token_bucket: `burst` must be >= 1");
        assert!(BURST <= LIMIT, "token_bucket: `burst` must be <= `limit`");
        &[
            Opt::Int(LIMIT as i64),
            Opt::Int(WINDOW as i64),
            Opt::Int(BURST as i64),
        ]
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_opts_follow_argv_order() {
        assert_eq!(
            <TokenBucket<20, 600, 5> as Limit>::OPTS,
            &[Opt::Int(20), Opt::Int(600), Opt::Int(5)]
        );
        assert_eq!(
            <FixedWindow<10, 60> as Limit>::OPTS,
            &[Opt::Int(10), Opt::Int(60)]
        );
        assert_eq!(<FixedWindow<10, 60> as Limit>::LIMITER, "fixed_window");
        assert_eq!(<TokenBucket<1, 1, 1> as Limit>::LIMITER, "token_bucket");
    }

    #[test]
    fn opts_render_as_redis_arguments() {
        assert_eq!(Opt::Int(-3).to_redis_args(), vec![b"-3".to_vec()]);
        assert_eq!(Opt::Str("x").to_redis_args(), vec![b"x".to_vec()]);
        assert_eq!(Opt::Int(7).to_string(), "7");
    }
}
