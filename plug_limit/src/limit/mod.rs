//! Limits: what a handler is subject to, as a type ([`Limit`]) and as values ([`LimitRef`]).

use http::request::Parts;

use crate::key::KeyExtractor;

pub use self::builtin::{
    DailyQuota, FixedWindow, Gcra, LeakyBucket, MonthlyQuota, SlidingLog, SlidingWindow,
    TokenBucket, WeeklyQuota,
};
pub use self::opt::Opt;
pub use self::runtime::RuntimeLimit;
pub use self::subject::Subject;

mod builtin;
mod opt;
mod runtime;
mod subject;

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

    /// Requests of this limit for which this predicate is `true` pass uncounted, without
    /// headers (default: none), as those the [`Rules`](crate::Rules) skip: the deny-list
    /// still refuses them. `#[rate_limit(skip = path)]` sets it.
    const SKIP: Option<fn(&Parts) -> bool> = None;
}

/// A limit as values: what the extractor, the layer and the macro check, borrowed from a
/// [`Limit`]'s constants or from a [`RuntimeLimit`].
#[derive(Clone, Copy)]
pub(crate) struct LimitRef<'a> {
    pub(crate) limiter: &'a str,
    pub(crate) opts: &'a [Opt],
    pub(crate) cost: u32,
    pub(crate) scope: Option<&'a str>,
    pub(crate) key: Option<&'a dyn KeyExtractor>,
    pub(crate) skip: Option<fn(&Parts) -> bool>,
}

impl LimitRef<'static> {
    pub(crate) fn of<L: Limit>() -> Self {
        Self {
            limiter: L::LIMITER,
            opts: L::OPTS,
            cost: L::COST,
            scope: L::SCOPE,
            key: L::KEY,
            skip: L::SKIP,
        }
    }
}
