//! [`PlugLimit`], the handle to the limiters that router state holds.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use deadpool_redis::Pool;
use deadpool_redis::redis::Script;
use http::HeaderName;

use crate::backend::{MemoryBackend, RedisBackend};
use crate::deny_cache::DenyCache;
use crate::{
    Builder, Clock, Enabled, Error, FailurePolicy, KeyExtractor, Limit, LogLevel, Opt, Outcome,
    Responder, SystemClock,
};

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
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) enabled: Enabled,
    pub(crate) prefix: Box<str>,
    pub(crate) timeout: Duration,
    pub(crate) log_level: LogLevel,
    pub(crate) on_failure: FailurePolicy,
    pub(crate) denials: DenyCache,
    pub(crate) backend: Backend,
    /// Set: built-ins on Redis decide by this clock instead of the server's `TIME`.
    pub(crate) clock: Option<Arc<dyn Clock>>,
    pub(crate) fallback: OnceLock<MemoryBackend>,
    pub(crate) limiters: HashMap<Box<str>, Entry>,
}

impl Inner {
    /// The memory backend that [`FailurePolicy::Memory`] limiters fall back on, made on first
    /// use.
    fn fallback(&self) -> &MemoryBackend {
        self.fallback.get_or_init(|| {
            let clock = self.clock.clone().unwrap_or_else(|| Arc::new(SystemClock));
            MemoryBackend::new(clock)
        })
    }
}

/// Where a limiter runs.
#[derive(Debug, Clone)]
pub(crate) enum Backend {
    Redis(Arc<RedisBackend>),
    Memory(Arc<MemoryBackend>),
}

/// A registered limiter with every setting resolved, so the hot path never falls back.
pub(crate) struct Entry {
    pub(crate) name: Box<str>,
    /// The built-in algorithm its script implements; `None` for a custom script.
    pub(crate) builtin: Option<&'static str>,
    pub(crate) script: Arc<Script>,
    pub(crate) headers: Box<[HeaderName]>,
    /// Its own backend (a limiter's own pool), if any.
    pub(crate) backend: Option<Backend>,
    pub(crate) key: Arc<dyn KeyExtractor>,
    pub(crate) responder: Arc<dyn Responder>,
    pub(crate) on_failure: FailurePolicy,
    /// Denials are cached locally until their wait ends.
    pub(crate) deny_cache: bool,
    pub(crate) log_level: LogLevel,
}

/// A limit as values: what the extractor, the layer and the macro check.
#[derive(Clone, Copy)]
pub(crate) struct LimitRef {
    pub(crate) limiter: &'static str,
    pub(crate) opts: &'static [Opt],
    pub(crate) cost: u32,
    pub(crate) scope: Option<&'static str>,
    pub(crate) key: Option<&'static dyn KeyExtractor>,
}

impl LimitRef {
    pub(crate) fn of<L: Limit>() -> Self {
        Self {
            limiter: L::LIMITER,
            opts: L::OPTS,
            cost: L::COST,
            scope: L::SCOPE,
            key: L::KEY,
        }
    }
}

impl PlugLimit {
    /// Limits on the Redis behind `pool`, with the default settings: always enabled, keys by
    /// peer IP, fail open, 500 ms timeout.
    ///
    /// No connection is made until the first check.
    ///
    /// # Panics
    ///
    /// When a `#[rate_limit]` handler of this program uses a limiter that is not built in, so
    /// that a missing limiter stops the application at start-up, not at the handler's first
    /// request. Register custom limiters with [`PlugLimit::builder`], whose
    /// [`build`](Builder::build) returns this as an error.
    #[must_use]
    #[track_caller]
    pub fn redis(pool: Pool) -> Self {
        crate::__private::assert_builtin_limiters();
        Builder::new(pool).build_default()
    }

    /// Limits kept in this process's memory, with the default settings: for a single
    /// instance, tests and local development. Every built-in limiter decides exactly as its
    /// Lua script does on Redis; custom Lua limiters need Redis.
    ///
    /// # Panics
    ///
    /// As [`redis`](Self::redis): when a `#[rate_limit]` handler of this program uses a
    /// limiter that is not built in.
    #[must_use]
    #[track_caller]
    pub fn memory() -> Self {
        crate::__private::assert_builtin_limiters();
        Builder::memory().build_default()
    }

    /// A [`Builder`] for limits on the Redis behind `pool`, with every setting: enabled flag,
    /// prefix, timeout, key, responder, failure policy, log level, clock, and custom limiters.
    pub fn builder(pool: Pool) -> Builder {
        Builder::new(pool)
    }

    /// A [`Builder`] for limits kept in this process's memory.
    pub fn memory_builder() -> Builder {
        Builder::memory()
    }

    /// Limits on the Redis Cluster behind `pool`, with the default settings of
    /// [`redis`](Self::redis).
    ///
    /// Every check is one `EVALSHA` on a shared cluster connection, routed to the node owning
    /// the slot of its key. The built-in scripts touch only `KEYS[1]`; a custom script given
    /// several keys needs them in one slot, e.g. with a `{hash tag}` in the key.
    ///
    /// # Example
    ///
    /// ```no_run
    /// use plug_limit::PlugLimit;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let nodes = ["redis://cache-1/", "redis://cache-2/", "redis://cache-3/"];
    /// let pool = deadpool_redis::cluster::Config::from_urls(nodes.map(String::from).to_vec())
    ///     .create_pool(Some(deadpool_redis::Runtime::Tokio1))?;
    /// let limits = PlugLimit::redis_cluster(pool);
    /// # let _ = limits;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Panics
    ///
    /// As [`redis`](Self::redis): when a `#[rate_limit]` handler of this program uses a
    /// limiter that is not built in.
    #[cfg(feature = "cluster")]
    #[cfg_attr(docsrs, doc(cfg(feature = "cluster")))]
    #[must_use]
    #[track_caller]
    pub fn redis_cluster(pool: deadpool_redis::cluster::Pool) -> Self {
        crate::__private::assert_builtin_limiters();
        Builder::cluster(pool).build_default()
    }

    /// A [`Builder`] for limits on the Redis Cluster behind `pool`, with every setting of
    /// [`builder`](Self::builder). A limiter's own [`pool`](crate::Limiter::pool) is still a
    /// single Redis.
    #[cfg(feature = "cluster")]
    #[cfg_attr(docsrs, doc(cfg(feature = "cluster")))]
    pub fn cluster_builder(pool: deadpool_redis::cluster::Pool) -> Builder {
        Builder::cluster(pool)
    }

    pub(crate) fn from_inner(inner: Inner) -> Self {
        Self {
            inner: Arc::new(inner),
        }
    }

    /// Whether limits apply now (see [`Enabled`]).
    #[must_use]
    pub fn is_enabled(&self) -> bool {
        self.inner.enabled.is_enabled()
    }

    /// How many keys the memory backend holds state for (expired keys not yet swept
    /// included); `None` on Redis. For monitoring: it stays near the number of keys active
    /// within their windows.
    #[must_use]
    pub fn memory_keys(&self) -> Option<usize> {
        match &self.inner.backend {
            Backend::Memory(memory) => Some(memory.len()),
            Backend::Redis(_) => None,
        }
    }

    /// Evaluates `limiter` with `opts` for one key, outside any request: for jobs, websockets
    /// or custom middleware. The request costs [`Limit::COST`]'s default, 1.
    ///
    /// The key is `{prefix}:{limiter}:{key}`; a request to a route is counted under
    /// `{prefix}:{limiter}:{scope}:{client}`, so `key = "{scope}:{client}"` shares its budget.
    /// This ignores the enabled flag and the failure policy: the caller sees every error.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownLimiter`] for an unregistered limiter, and any backend, timeout or reply
    /// error.
    ///
    /// # Example
    ///
    /// ```
    /// use plug_limit::{Opt, PlugLimit};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), plug_limit::Error> {
    /// let limits = PlugLimit::memory();
    /// let hourly = [Opt::Int(3), Opt::Int(3600)];
    /// for _ in 0..3 {
    ///     assert!(limits.check("fixed_window", "emails:user-42", &hourly).await?.is_allowed());
    /// }
    /// let fourth = limits.check("fixed_window", "emails:user-42", &hourly).await?;
    /// assert!(!fourth.is_allowed());
    /// assert_eq!(fourth.header("x-ratelimit-remaining").unwrap(), "0");
    /// # Ok(())
    /// # }
    /// ```
    pub async fn check(&self, limiter: &str, key: &str, opts: &[Opt]) -> Result<Outcome, Error> {
        self.check_cost(limiter, key, opts, 1).await
    }

    /// Like [`check`](Self::check), for a request that costs `cost` units (built-in limiters
    /// only): an upload of 5 files may cost 5.
    ///
    /// # Errors
    ///
    /// As [`check`](Self::check); [`Error::NotBuiltIn`] for a custom limiter and a cost other
    /// than 1.
    pub async fn check_cost(
        &self,
        limiter: &str,
        key: &str,
        opts: &[Opt],
        cost: u32,
    ) -> Result<Outcome, Error> {
        let entry = self.entry(limiter)?;
        let key = self.key(entry, key);
        self.eval(entry, std::slice::from_ref(&key), opts, cost)
            .await
    }

    /// What a request of cost 1 would get now, without consuming anything (built-in limiters
    /// only): to show a quota, or to refuse early.
    ///
    /// # Errors
    ///
    /// As [`check`](Self::check); [`Error::NotBuiltIn`] for a custom limiter.
    pub async fn peek(&self, limiter: &str, key: &str, opts: &[Opt]) -> Result<Outcome, Error> {
        self.check_cost(limiter, key, opts, 0).await
    }

    /// Forgets everything `limiter` counted for `key`: the next request starts afresh.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownLimiter`] for an unregistered limiter, and any Redis or timeout error.
    pub async fn reset(&self, limiter: &str, key: &str) -> Result<(), Error> {
        let entry = self.entry(limiter)?;
        let key = self.key(entry, key);
        self.inner.denials.remove(&key);
        match self.backend(entry) {
            Backend::Redis(redis) => {
                let timeout = self.inner.timeout;
                tokio::time::timeout(timeout, redis.delete(&key))
                    .await
                    .map_err(|_| Error::Timeout(timeout))?
            }
            Backend::Memory(memory) => {
                memory.reset(&key);
                Ok(())
            }
        }
    }

    fn key(&self, entry: &Entry, key: &str) -> String {
        format!("{}:{}:{key}", self.inner.prefix, entry.name)
    }

    pub(crate) fn entry(&self, limiter: &str) -> Result<&Entry, Error> {
        self.inner
            .limiters
            .get(limiter)
            .ok_or_else(|| Error::UnknownLimiter(limiter.to_owned()))
    }

    pub(crate) fn inner(&self) -> &Inner {
        &self.inner
    }

    pub(crate) fn backend<'a>(&'a self, entry: &'a Entry) -> &'a Backend {
        entry.backend.as_ref().unwrap_or(&self.inner.backend)
    }

    /// Evaluates `entry` for `keys` on its backend, within the timeout; a Redis failure of a
    /// built-in under [`FailurePolicy::Memory`] is decided in memory instead.
    pub(crate) async fn eval(
        &self,
        entry: &Entry,
        keys: &[String],
        opts: &[Opt],
        cost: u32,
    ) -> Result<Outcome, Error> {
        match self.backend(entry) {
            Backend::Memory(memory) => eval_memory(memory, entry, keys, opts, cost),
            // Boxed: a Redis check's state (the call, its timer, the retry) is most of a
            // request's future. Kept apart, it spares memory checks a large future.
            Backend::Redis(redis) => {
                Box::pin(self.eval_on_redis(redis, entry, keys, opts, cost)).await
            }
        }
    }

    /// [`eval`](Self::eval) on Redis: the call within the timeout, then the failure policy's
    /// memory fallback.
    pub(crate) async fn eval_on_redis(
        &self,
        redis: &RedisBackend,
        entry: &Entry,
        keys: &[String],
        opts: &[Opt],
        cost: u32,
    ) -> Result<Outcome, Error> {
        if let Some(builtin) = entry.builtin {
            check_arity(builtin, opts)?;
        }
        let timeout = self.inner.timeout;
        let now = self.inner.clock.as_ref().map(|clock| clock.now_ms());
        let call = eval_redis(redis, entry, keys, opts, cost, now);
        let result = match tokio::time::timeout(timeout, call).await {
            Ok(result) => result,
            Err(_) => Err(Error::Timeout(timeout)),
        };
        match result {
            Err(error) if entry.on_failure == FailurePolicy::Memory => {
                entry.log_level.log(&entry.name, &error);
                eval_memory(self.inner.fallback(), entry, keys, opts, cost)
            }
            result => result,
        }
    }
}

async fn eval_redis(
    redis: &RedisBackend,
    entry: &Entry,
    keys: &[String],
    opts: &[Opt],
    cost: u32,
    now_ms: Option<i64>,
) -> Result<Outcome, Error> {
    // Built-ins take `[opts..., cost, now_ms]`; both are optional, so the seed's plain
    // `ARGV = opts` calls stay valid and cost nothing extra.
    let extra = [
        Opt::Int(i64::from(cost)),
        Opt::Int(now_ms.unwrap_or_default()),
    ];
    let extra = match (entry.builtin, cost, now_ms) {
        (_, 1, None) => &extra[..0],
        (None, _, _) => return Err(Error::NotBuiltIn(entry.name.to_string())),
        (Some(_), _, now) => &extra[..if now.is_some() { 2 } else { 1 }],
    };
    let reply = redis.eval(&entry.script, keys, opts, extra).await?;
    Ok(Outcome::from_reply(reply, &entry.headers)?)
}

/// [`PlugLimit::eval`] on the memory backend.
pub(crate) fn eval_memory(
    memory: &MemoryBackend,
    entry: &Entry,
    keys: &[String],
    opts: &[Opt],
    cost: u32,
) -> Result<Outcome, Error> {
    let builtin = entry
        .builtin
        .ok_or_else(|| Error::NotBuiltIn(entry.name.to_string()))?;
    check_arity(builtin, opts)?;
    let key = keys.first().map_or("", String::as_str);
    let verdict = memory.eval(builtin, key, opts, cost)?;
    Ok(Outcome::from_verdict(verdict, &entry.headers)?)
}

/// A built-in's trailing `cost` and `now` are positional: a wrong number of options would
/// shift them into an option's place. Checked before either backend, so both answer alike.
fn check_arity(builtin: &str, opts: &[Opt]) -> Result<(), Error> {
    match crate::native::arity(builtin) {
        Some(arity) if arity != opts.len() => Err(Error::Script(format!(
            "{builtin}: takes {arity} options, found {}",
            opts.len()
        ))),
        _ => Ok(()),
    }
}

impl fmt::Debug for PlugLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut limiters: Vec<&str> = self.inner.limiters.keys().map(|k| &**k).collect();
        limiters.sort_unstable();
        f.debug_struct("PlugLimit")
            .field("enabled", &self.inner.enabled)
            .field("prefix", &self.inner.prefix)
            .field("timeout", &self.inner.timeout)
            .field("log_level", &self.inner.log_level)
            .field("on_failure", &self.inner.on_failure)
            .field("backend", &self.inner.backend)
            .field("limiters", &limiters)
            .finish_non_exhaustive()
    }
}
