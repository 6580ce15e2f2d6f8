//! [`PlugLimit`], the handle to the limiters that router state holds.

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::backend::EvictionPolicy;
use crate::engine::Decider;
use crate::error::Error;
use crate::limit::{Charge, RuntimeLimit};
use crate::outcome::Outcome;

/// The rate limiter handle: a cheap [`Clone`] to keep in router state.
///
/// It holds the Redis backend, the registered limiters and the settings every check uses.
/// [`RateLimited`](crate::RateLimited), [`RateLimitLayer`](crate::RateLimitLayer) and
/// `#[rate_limit]` find it in the state through [`FromRef`](axum::extract::FromRef).
///
/// # Example
///
/// ```no_run
/// use axum::{extract::FromRef, routing::get, Router};
/// use plug_limit::{FixedWindow, PlugLimit, RateLimited};
///
/// #[derive(Clone, FromRef)]
/// struct AppState {
///     limits: PlugLimit,
/// }
///
/// async fn hello(limited: RateLimited<FixedWindow<10, 60>>) -> (RateLimited<FixedWindow<10, 60>>, &'static str) {
///     (limited, "hello")
/// }
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let pool = deadpool_redis::Config::from_url("redis://127.0.0.1:6379/")
///     .create_pool(Some(deadpool_redis::Runtime::Tokio1))?;
/// let app = Router::new()
///     .route("/", get(hello))
///     .with_state(AppState { limits: PlugLimit::redis(pool) });
/// # let _: Router = app;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct PlugLimit {
    decider: Arc<Decider>,
}

impl PlugLimit {
    pub(crate) fn from_decider(decider: Decider) -> Self {
        Self {
            decider: Arc::new(decider),
        }
    }

    pub(crate) fn decider(&self) -> &Decider {
        &self.decider
    }

    /// Whether limits apply now (see [`Enabled`](crate::Enabled)).
    #[must_use]
    pub fn is_enabled(&self) -> bool {
        self.decider.is_enabled()
    }

    /// How many keys the memory backend holds state for (expired keys not yet swept
    /// included); `None` on Redis. For monitoring: it stays near the number of keys active
    /// within their windows.
    #[must_use]
    pub fn memory_keys(&self) -> Option<usize> {
        self.decider.default_backend().memory_keys()
    }

    /// Whether the Redis behind this handle may evict its counters, for a health check: its
    /// `maxmemory-policy`, read once in the background when the backend first connects;
    /// `None` on the memory backend.
    ///
    /// Under any policy but `noeviction`, a Redis short of memory deletes keys to make room, and
    /// a request whose counter was deleted is admitted past its limit (`volatile-*` policies
    /// too: every key the library writes has a TTL). When the read finds such a policy, one
    /// warning is logged (target `plug_limit`) naming it, and the `metrics` feature's
    /// `plug_limit_redis_evicts` gauge reads 1. The fix is `maxmemory-policy noeviction`, or a
    /// Redis of its own for the limits, with enough memory.
    ///
    /// [`EvictionPolicy::Unknown`] until the backend has connected and the read has answered;
    /// [`EvictionPolicy::Unreadable`] when the server refuses `CONFIG GET` (an ACL user without
    /// `+config`, a managed Redis that renames `CONFIG`), also logged once, at `INFO`. On Redis
    /// Cluster every master is asked, and the answer is that of a master that evicts, if any
    /// (then of one that could not be read, if any). Limiters with a
    /// pool of their own ([`Limiter::pool`](crate::Limiter::pool)) are read and logged as well,
    /// but answered only by the gauge, under their own `pool` label.
    ///
    /// # Example
    ///
    /// ```
    /// use plug_limit::{EvictionPolicy, PlugLimit};
    ///
    /// /// Whether the limits can be trusted to hold.
    /// fn limits_hold(limits: &PlugLimit) -> bool {
    ///     !matches!(limits.redis_eviction(), Some(EvictionPolicy::Evicts(_)))
    /// }
    ///
    /// let limits = PlugLimit::memory();
    /// assert_eq!(limits.redis_eviction(), None);
    /// assert!(limits_hold(&limits));
    /// ```
    #[must_use]
    pub fn redis_eviction(&self) -> Option<EvictionPolicy> {
        self.decider.default_backend().redis_eviction()
    }

    /// Evaluates `limit` for the client key `key`, outside any request: for jobs, websockets
    /// or custom middleware. `limit` is a typed limit (`FixedWindow::<3, 3600>`, a
    /// [`Limit`](crate::Limit) of your own) or a [`RuntimeLimit`]; the check costs its cost
    /// (1 unless set: [`RuntimeLimit::cost`] for a request worth several units).
    ///
    /// `key` is counted within the limit's scope, exactly as a route of that scope counts the
    /// client its key extractor returns: a limit without a scope counts `key` apart from every
    /// route; [`RuntimeLimit::scope`] names a route's budget (`/users/{id}`, or its
    /// `#[rate_limit(scope = ..)]`). This ignores the enabled flag and the failure policy: the
    /// caller sees every error.
    ///
    /// An allowed check of `concurrency` holds its lease in the returned [`Outcome`]: the slot
    /// comes back when the outcome (and every clone of it) is dropped, so keep it for as long
    /// as the work it admits runs.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownLimiter`] for an unregistered limiter, and any backend, timeout or reply
    /// error.
    ///
    /// # Example
    ///
    /// ```
    /// use plug_limit::{FixedWindow, PlugLimit};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), plug_limit::Error> {
    /// let limits = PlugLimit::memory();
    /// let hourly = FixedWindow::<3, 3600>;
    /// for _ in 0..3 {
    ///     assert!(limits.check(hourly, "emails:user-42").await?.is_allowed());
    /// }
    /// let fourth = limits.check(hourly, "emails:user-42").await?;
    /// assert!(!fourth.is_allowed());
    /// assert_eq!(fourth.header("x-ratelimit-remaining").unwrap(), "0");
    /// # Ok(())
    /// # }
    /// ```
    pub async fn check(&self, limit: impl Into<RuntimeLimit>, key: &str) -> Result<Outcome, Error> {
        let limit = limit.into();
        let limit = limit.as_ref();
        let charge = Charge::Take(limit.cost);
        self.decider.check(limit, key, charge).await
    }

    /// [`check`](Self::check), but waits for admission instead of answering a denial: each
    /// denial is retried, as its limit says it may pass, until a check allows or waiting
    /// longer than `max_wait` would be needed. The outcome is the admitting one, or the last
    /// denial (check [`is_allowed`](Outcome::is_allowed)): answered as soon as the limit says
    /// it cannot pass within `max_wait`, and never after `max_wait` but for the time of the
    /// last check. For calls to a third-party API that allows so many a second across a fleet
    /// (outbound throttling), or a job that would rather queue than fail.
    ///
    /// A wait counts nothing: the call is counted once, by the check that admits it (no
    /// built-in counts a denied check). Waiters of one key, on one instance or many, spread
    /// their retries at random, and none retries more often than twice per unit's share of
    /// the window (window / limit: 50 ms for 20 a second); the
    /// [guide](crate::guide::limiting#waiting-instead-of-refusing) says how the wait is
    /// timed. Dropping the future stops the wait and counts nothing further; dropped during a
    /// check, that check may have counted, as any abandoned call may. A custom limiter whose
    /// denial carries neither `retry-after` nor `x-ratelimit-reset` is answered at once.
    ///
    /// # Errors
    ///
    /// As [`check`](Self::check): the first error ends the wait.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use plug_limit::{Gcra, PlugLimit};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), plug_limit::Error> {
    /// let limits = PlugLimit::memory();
    /// // The partner API takes 20 calls a second, one at a time.
    /// let partner = Gcra::<20, 1, 1>;
    /// let started = Instant::now();
    /// for _ in 0..5 {
    ///     let admitted = limits.acquire(partner, "partner-api", Duration::from_secs(1)).await?;
    ///     assert!(admitted.is_allowed());
    /// }
    /// // Four waits of at least 50 ms each.
    /// assert!(started.elapsed() >= Duration::from_millis(200));
    /// # Ok(())
    /// # }
    /// ```
    pub async fn acquire(
        &self,
        limit: impl Into<RuntimeLimit>,
        key: &str,
        max_wait: Duration,
    ) -> Result<Outcome, Error> {
        let limit = limit.into();
        self.decider.acquire(limit.as_ref(), key, max_wait).await
    }

    /// Settles a request admitted on an estimate (built-in limiters only): gives back
    /// `reserved - actual` units when it used fewer, takes `actual - reserved` more (without
    /// denying: the request was served) when it used more; a peek when equal. One backend call,
    /// as [`check`](Self::check) makes. The limit's own cost plays no part.
    ///
    /// A refund never gives back more than the key holds, writes nothing for a key that holds
    /// nothing, and always allows. A forced charge is always counted, and denies when it leaves
    /// the key past its limit, so that the outcome's headers say what the next request will
    /// meet. What each algorithm does is in the [algorithm guide](crate::algorithms).
    ///
    /// # Errors
    ///
    /// As [`check`](Self::check); [`Error::NotBuiltIn`] for a custom limiter.
    ///
    /// # Example
    ///
    /// ```
    /// use plug_limit::{FixedWindow, PlugLimit, RuntimeLimit};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let limits = PlugLimit::memory();
    /// let tokens = RuntimeLimit::from(FixedWindow::<1000, 60>);
    /// // Admitted on an estimate of 300 tokens; the response used 120.
    /// let estimate = tokens.clone().cost(300)?;
    /// assert!(limits.check(&estimate, "ann").await?.is_allowed());
    /// let settled = limits.settle(&tokens, "ann", 300, 120).await?;
    /// assert_eq!(settled.header("x-ratelimit-remaining").unwrap(), "880");
    /// // The next one used 1000: counted all the same, and the limit is spent.
    /// assert!(limits.check(&estimate, "ann").await?.is_allowed());
    /// let settled = limits.settle(&tokens, "ann", 300, 1000).await?;
    /// assert!(!settled.is_allowed());
    /// assert!(!limits.check(&tokens, "ann").await?.is_allowed());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn settle(
        &self,
        limit: impl Into<RuntimeLimit>,
        key: &str,
        reserved: u32,
        actual: u32,
    ) -> Result<Outcome, Error> {
        let charge = match reserved.cmp(&actual) {
            Ordering::Greater => Charge::Refund(reserved - actual),
            Ordering::Less => Charge::Force(actual - reserved),
            Ordering::Equal => Charge::Take(0),
        };
        let limit = limit.into();
        self.decider.check(limit.as_ref(), key, charge).await
    }

    /// Takes up to `units` units at once, as many as the key has left (`fixed_window` and
    /// `token_bucket` only): what a [local batch](crate::LocalBatches) reserves. The outcome
    /// allows when it took at least one; its [extra](Outcome::extra) values are how many it
    /// took (an integer, 0 on a deny) and the milliseconds left of the window they count in,
    /// its headers those a take of that many would get.
    ///
    /// # Errors
    ///
    /// As [`check`](Self::check); the script's refusal ([`Error::Input`] in memory) for a
    /// limiter without batches, or `units` of 0 or above 2147483647.
    ///
    /// # Example
    ///
    /// ```
    /// use plug_limit::{FixedWindow, PlugLimit, redis::Value};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), plug_limit::Error> {
    /// let limits = PlugLimit::memory();
    /// let five = FixedWindow::<5, 60>;
    /// let batch = limits.take_up_to(five, "ann", 3).await?;
    /// assert_eq!(batch.extra()[0], Value::Int(3));
    /// let rest = limits.take_up_to(five, "ann", 3).await?;
    /// assert_eq!(rest.extra()[0], Value::Int(2));
    /// // The window has a minute left, to the millisecond (less the time since it began).
    /// assert!(matches!(rest.extra()[1], Value::Int(59_000..=60_000)));
    /// assert!(!limits.take_up_to(five, "ann", 3).await?.is_allowed());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn take_up_to(
        &self,
        limit: impl Into<RuntimeLimit>,
        key: &str,
        units: u32,
    ) -> Result<Outcome, Error> {
        let limit = limit.into();
        self.decider
            .check(limit.as_ref(), key, Charge::UpTo(units))
            .await
    }

    /// Checks several limits at once, stacked: each `(limit, key)` is counted only if every
    /// one allows, in one backend call (one `EVALSHA` on a single Redis). The outcome is that
    /// of the limit that denied, or else the tightest limit's headers (every limit's in the
    /// draft-10 header style). Built-in limiters only, on one backend.
    ///
    /// # Errors
    ///
    /// As [`check`](Self::check); [`Error::NotBuiltIn`] for a custom limiter, and
    /// [`Error::Input`] for limiters on different backends or an empty stack.
    ///
    /// # Example
    ///
    /// ```
    /// use plug_limit::{FixedWindow, PlugLimit, RuntimeLimit, TokenBucket};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), plug_limit::Error> {
    /// let limits = PlugLimit::memory();
    /// let per_user = RuntimeLimit::from(FixedWindow::<2, 3600>);
    /// let per_team = RuntimeLimit::from(TokenBucket::<100, 3600, 100>);
    /// let stack = [(per_user, "ann"), (per_team.clone(), "team-7")];
    /// assert!(limits.check_all(&stack).await?.is_allowed());
    /// assert!(limits.check_all(&stack).await?.is_allowed());
    /// // Ann's own limit denies: the team's bucket is not charged for it.
    /// assert!(!limits.check_all(&stack).await?.is_allowed());
    /// let team = limits.peek(&per_team, "team-7").await?;
    /// assert_eq!(team.header("x-ratelimit-remaining").unwrap(), "97");
    /// # Ok(())
    /// # }
    /// ```
    pub async fn check_all(&self, limits: &[(RuntimeLimit, &str)]) -> Result<Outcome, Error> {
        let limits: Vec<_> = limits
            .iter()
            .map(|(limit, key)| (limit.as_ref(), *key))
            .collect();
        self.decider.check_all(&limits).await
    }

    /// What a request of cost 1 would get now, without consuming anything (built-in limiters
    /// only): to show a quota, or to refuse early.
    ///
    /// # Errors
    ///
    /// As [`check`](Self::check); [`Error::NotBuiltIn`] for a custom limiter.
    pub async fn peek(&self, limit: impl Into<RuntimeLimit>, key: &str) -> Result<Outcome, Error> {
        let limit = limit.into();
        self.decider
            .check(limit.as_ref(), key, Charge::Take(0))
            .await
    }

    /// Forgets everything `limit` counted for `key` (within the limit's scope, as
    /// [`check`](Self::check) counts it): the next request starts afresh.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownLimiter`] for an unregistered limiter, and any Redis or timeout error.
    ///
    /// # Example
    ///
    /// ```
    /// use plug_limit::{FixedWindow, PlugLimit, RuntimeLimit};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), plug_limit::Error> {
    /// let limits = PlugLimit::memory();
    /// // Forgive client 192.0.2.1 what it spent on `GET /search`.
    /// let search = RuntimeLimit::from(FixedWindow::<10, 60>).scope("/search");
    /// limits.reset(&search, "192.0.2.1").await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn reset(&self, limit: impl Into<RuntimeLimit>, key: &str) -> Result<(), Error> {
        let limit = limit.into();
        self.decider.reset(limit.as_ref(), key).await
    }

    /// Forgets everything `limiter` counted for `key` under every options and every scope, and
    /// returns how many keys it deleted: to forgive a client a limiter's every route at once,
    /// or after a configuration change, when a client's counters under the options it had are
    /// still stored. [`reset`](Self::reset) forgets one limit's.
    ///
    /// On Redis it deletes the keys of `key` that `SCAN` finds under the limiter (on Redis
    /// Cluster, every primary is scanned), as [`reset_all`](Self::reset_all) does: not atomic,
    /// so a request counted while it runs may survive it. In memory (the memory backend, the
    /// memory fallback, this instance's deny cache and local batches), where keys are kept as
    /// digests that cannot be read back, it finds them under every options and scope this
    /// process has counted the limiter under (up to 65,536 of them a store).
    ///
    /// # Errors
    ///
    /// [`Error::UnknownLimiter`] for an unregistered limiter; the first Redis or timeout
    /// error, once every store has been tried.
    ///
    /// # Example
    ///
    /// ```
    /// use plug_limit::{FixedWindow, PlugLimit, RuntimeLimit};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), plug_limit::Error> {
    /// let limits = PlugLimit::memory();
    /// let before = RuntimeLimit::from(FixedWindow::<1, 60>).scope("/search");
    /// let after = RuntimeLimit::from(FixedWindow::<2, 60>).scope("/export");
    /// limits.check(before.clone(), "user-7").await?;
    /// limits.check(after.clone(), "user-7").await?;
    /// assert_eq!(limits.reset_key("fixed_window", "user-7").await?, 2);
    /// assert_eq!(limits.check(before, "user-7").await?.remaining(), Some(0));
    /// assert_eq!(limits.check(after, "user-7").await?.remaining(), Some(1));
    /// # Ok(())
    /// # }
    /// ```
    pub async fn reset_key(&self, limiter: &str, key: &str) -> Result<u64, Error> {
        self.decider.reset_key(limiter, key).await
    }

    /// Forgets everything every limiter counted under this handle's prefix: between tests, or
    /// to lift every limit at once. Returns how many keys it deleted.
    ///
    /// On Redis it deletes the keys matching the prefix and the library's key layout (`SCAN`
    /// in batches, then `UNLINK`), so keys of another prefix, even one extending this one
    /// (`app` and `app:v2`), stay; on Redis Cluster, every primary is scanned. It is not
    /// atomic: a request counted while it runs may survive it. The memory backends and this
    /// instance's deny cache are emptied; other instances' deny caches keep their denials
    /// until these end.
    ///
    /// # Errors
    ///
    /// The first Redis or timeout error, once every backend has been tried (what could be
    /// deleted is).
    ///
    /// # Example
    ///
    /// ```
    /// use plug_limit::{FixedWindow, PlugLimit};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), plug_limit::Error> {
    /// let limits = PlugLimit::memory();
    /// let once = FixedWindow::<1, 60>;
    /// assert!(limits.check(once, "user-1").await?.is_allowed());
    /// assert!(!limits.check(once, "user-1").await?.is_allowed());
    /// assert_eq!(limits.reset_all().await?, 1);
    /// assert!(limits.check(once, "user-1").await?.is_allowed());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn reset_all(&self) -> Result<u64, Error> {
        self.decider.reset_all().await
    }
}

impl fmt::Debug for PlugLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut fields = f.debug_struct("PlugLimit");
        self.decider.describe(&mut fields);
        fields.finish_non_exhaustive()
    }
}
