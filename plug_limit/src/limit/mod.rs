//! Limits: what a handler is subject to, as a type ([`Limit`]) and as values ([`LimitRef`]).

use http::StatusCode;

use plug_limit_options::Builtin;

use crate::key::KeyExtractor;

pub use self::builtin::{
    Concurrency, DailyQuota, FixedWindow, Gcra, LeakyBucket, MonthlyQuota, SlidingLog,
    SlidingWindow, TokenBucket, WeeklyQuota,
};
pub(crate) use self::charge::Charge;
pub use self::opt::Opt;
use self::opt::key_text;
pub(crate) use self::opt::{ReadAhead, push_digest, write_key_text};
pub use self::runtime::RuntimeLimit;
pub(crate) use self::runtime::check_against;

mod builtin;
mod charge;
mod opt;
mod runtime;

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
/// use plug_limit::{key, Limit, Opt, RateLimited};
/// use plug_limit::key::KeyExtractor;
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

    /// Which responses count (default: all). A request is charged its [`COST`](Self::COST)
    /// when it is admitted, as always, so a burst is limited while it runs; once its response
    /// is sent, a response for which this is `false` gets the cost back. Count failed logins
    /// only (`|status| status == StatusCode::UNAUTHORIZED`), or not the 5xx of an outage
    /// (`|status| !status.is_server_error()`). `#[rate_limit(count_if = path)]` sets it.
    ///
    /// The status must reach the limit: it does under
    /// [`RateLimitLayer`](crate::RateLimitLayer), `#[rate_limit]`,
    /// [`SendHeadersLayer`](crate::SendHeadersLayer) and
    /// [`RateLimited::respond`](crate::RateLimited::respond); an extractor returned in a
    /// response tuple never sees it, and its request counts. Built-in limiters only, and not
    /// [`Concurrency`](crate::Concurrency). In a [stack](Limits), such a limit is settled by
    /// its own script once the response ends, as it is alone.
    const COUNT_IF: Option<fn(StatusCode) -> bool> = None;

    /// Whether [`COST`](Self::COST) is an estimate (default `false`): reserved when the
    /// request is admitted, then settled once its response ends to what its handler reported
    /// through [`Usage`](crate::Usage): the difference is given back, or taken on top without
    /// denying (the request was served). Tokens generated, rows returned, bytes sent.
    /// `#[rate_limit(settle)]` sets it. Headers are sent before the body, so they show the
    /// reservation; the next request sees the settled count.
    ///
    /// Settling needs the response's end, as [`COUNT_IF`](Self::COUNT_IF) does; a request
    /// whose handler reports nothing keeps its estimate. Built-in limiters only, and not
    /// [`Concurrency`](crate::Concurrency). In a [stack](Limits), each limit that settles is
    /// settled by its own script once the response ends, all of them to the one
    /// [`Usage`](crate::Usage) the handler reports to: they must have one
    /// [`COST`](Self::COST) (a stack of settling limits of different costs does not compile).
    const SETTLE: bool = false;
}

/// `L::OPTS` as a key holds them, written once at compile time, and as a built-in's twin reads
/// them, read once at compile time. Not a member of [`Limit`], so no implementation writes
/// other text or reads other numbers: the in-process stores find a key's options by the text
/// [`write_key_text`] writes, which holds no `:` (see `backend/digest.rs`).
struct OptsKey<L>(std::marker::PhantomData<L>);

impl<L: Limit> OptsKey<L> {
    /// `L::OPTS` read ahead, when they can be (see [`ReadAhead`]).
    const READ_AHEAD: Option<&'static ReadAhead> =
        match &ReadAhead::of(Builtin::from_name(L::LIMITER), L::OPTS) {
            Some(read) => Some(read),
            None => None,
        };
    const TEXT: Option<&'static str> = match &key_text(L::OPTS) {
        Some((text, len)) => match std::str::from_utf8(text.split_at(*len).0) {
            Ok(text) => Some(text),
            Err(_) => None,
        },
        None => None,
    };
}

/// What [`RateLimited`](crate::RateLimited) and [`RateLimitLayer`](crate::RateLimitLayer)
/// check: one [`Limit`], or a tuple of two to six of them, stacked.
///
/// Stacked limits are decided at once, in one backend call (one `EVALSHA` on a single Redis)
/// that consumes from every limit only if every limit allows: a request denied by one limit
/// costs the others nothing. Each limit keeps its own limiter, options, cost, key and scope,
/// so one stack can hold a per-client, a per-tenant and a global limit, or 10 a second and
/// 1,000 a day. The response reports the tightest limit in the legacy header style and every
/// limit in the draft-10 style; a denial reports the limit that denied. See the
/// [guide](crate::guide::limiting#stacked-limits-several-limits-one-round-trip) for Redis
/// Cluster and the other details.
///
/// This trait is implemented by the library only.
///
/// # Example
///
/// ```
/// use plug_limit::{key, FixedWindow, Limit, Opt, RateLimited, TokenBucket};
/// use plug_limit::key::KeyExtractor;
///
/// /// 1,000 requests a day per tenant, shared by every route that names this scope.
/// struct TenantDaily;
///
/// impl Limit for TenantDaily {
///     const LIMITER: &'static str = "fixed_window";
///     const OPTS: &'static [Opt] = &[Opt::Int(1_000), Opt::Int(86_400)];
///     const SCOPE: Option<&'static str> = Some("tenant");
///     const KEY: Option<&'static dyn KeyExtractor> = Some(&key::header("x-tenant"));
/// }
///
/// // A burst of 5 and 10 a second per client, and the tenant's daily quota: one round trip.
/// async fn search(
///     _limited: RateLimited<(TokenBucket<10, 1, 5>, TenantDaily)>,
/// ) -> &'static str {
///     "results"
/// }
/// ```
pub trait Limits: Send + Sync + 'static {
    /// The limits, in the order they are decided.
    #[doc(hidden)]
    const STACK: &'static [LimitRef<'static>];
}

impl<L: Limit> Limits for L {
    const STACK: &'static [LimitRef<'static>] = &[LimitRef::of::<L>()];
}

macro_rules! stacked {
    ($($limit:ident),+) => {
        impl<$($limit: Limit),+> Limits for ($($limit,)+) {
            const STACK: &'static [LimitRef<'static>] = {
                $(assert!(
                    !leases($limit::LIMITER),
                    "a `concurrency` limit cannot be stacked: its lease outlives the stack's one call"
                );)+
                assert!(
                    one_settling_cost(&[$(($limit::SETTLE, $limit::COST)),+]),
                    "the limits of a stack that `SETTLE` are settled to one `Usage`: give them one `COST`"
                );
                &[$(LimitRef::of::<$limit>()),+]
            };
        }
    };
}

/// Whether the limits that settle (`(SETTLE, COST)` each) reserve one cost: settled to the one
/// [`Usage`](crate::Usage) their handler reports, limits of different costs (requests and
/// tokens, say) would each be charged the same number.
const fn one_settling_cost(limits: &[(bool, u32)]) -> bool {
    let mut first = None;
    let mut i = 0;
    while i < limits.len() {
        let (settles, cost) = limits[i];
        if settles {
            match first {
                None => first = Some(cost),
                Some(first) if first != cost => return false,
                Some(_) => {}
            }
        }
        i += 1;
    }
    true
}

/// Whether `limiter` is a built-in that leases its units (`concurrency`): a stack's one call
/// cannot hold a lease until each response ends.
const fn leases(limiter: &str) -> bool {
    match plug_limit_options::Builtin::from_name(limiter) {
        Some(builtin) => builtin.leases(),
        None => false,
    }
}

stacked!(A, B);
stacked!(A, B, C);
stacked!(A, B, C, D);
stacked!(A, B, C, D, E);
stacked!(A, B, C, D, E, F);

/// A limit as values: what the extractor, the layer and the macro check, borrowed from a
/// [`Limit`]'s constants or from a [`RuntimeLimit`]. Public only to name in [`Limits`], from a
/// module no user can reach.
#[derive(Clone, Copy)]
pub struct LimitRef<'a> {
    pub(crate) limiter: &'a str,
    /// The built-in `limiter` names, if any: found when the limit is made (at compile time for
    /// a typed one), so that a check finds its limiter without hashing the name.
    pub(crate) builtin: Option<Builtin>,
    pub(crate) opts: &'a [Opt],
    /// A built-in's options read ahead, when they could be: a check does not read them again.
    pub(crate) read_ahead: Option<&'a ReadAhead>,
    /// The options as the key holds them, when written ahead (see `OptsKey`).
    pub(crate) opts_key: Option<&'a str>,
    pub(crate) cost: u32,
    pub(crate) scope: Option<&'a str>,
    pub(crate) key: Option<&'a dyn KeyExtractor>,
    pub(crate) count_if: Option<fn(StatusCode) -> bool>,
    pub(crate) settle: bool,
}

impl std::fmt::Debug for LimitRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LimitRef")
            .field("limiter", &self.limiter)
            .field("opts", &self.opts)
            .field("cost", &self.cost)
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

impl LimitRef<'static> {
    pub(crate) const fn of<L: Limit>() -> Self {
        Self {
            limiter: L::LIMITER,
            builtin: Builtin::from_name(L::LIMITER),
            opts: L::OPTS,
            read_ahead: OptsKey::<L>::READ_AHEAD,
            opts_key: OptsKey::<L>::TEXT,
            cost: L::COST,
            scope: L::SCOPE,
            key: L::KEY,
            count_if: L::COUNT_IF,
            settle: L::SETTLE,
        }
    }
}
