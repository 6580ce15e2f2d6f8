//! [`PlugLimit`], the handle to the limiters that router state holds.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::MatchedPath;
use deadpool_redis::Pool;
use deadpool_redis::redis::Script;
use http::HeaderName;
use http::request::Parts;

use crate::backend::RedisBackend;
use crate::rejection::RateLimitRejection;
use crate::{
    Builder, Enabled, Error, FailurePolicy, KeyExtractor, Limit, LogLevel, Opt, Outcome, Responder,
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
    pub(crate) backend: Arc<RedisBackend>,
    pub(crate) limiters: HashMap<Box<str>, Entry>,
}

/// A registered limiter with every setting resolved, so the hot path never falls back.
pub(crate) struct Entry {
    pub(crate) name: Box<str>,
    pub(crate) script: Arc<Script>,
    pub(crate) headers: Box<[HeaderName]>,
    pub(crate) backend: Option<Arc<RedisBackend>>,
    pub(crate) key: Arc<dyn KeyExtractor>,
    pub(crate) responder: Arc<dyn Responder>,
    pub(crate) on_failure: FailurePolicy,
    pub(crate) log_level: LogLevel,
}

/// A limit as values: what the extractor, the layer and the macro check.
#[derive(Clone, Copy)]
pub(crate) struct LimitRef {
    pub(crate) limiter: &'static str,
    pub(crate) opts: &'static [Opt],
    pub(crate) scope: Option<&'static str>,
    pub(crate) key: Option<&'static dyn KeyExtractor>,
}

impl LimitRef {
    pub(crate) fn of<L: Limit>() -> Self {
        Self {
            limiter: L::LIMITER,
            opts: L::OPTS,
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

    /// A [`Builder`] for every setting: enabled flag, prefix, timeout, key, responder, failure
    /// policy, log level, and custom limiters.
    pub fn builder(pool: Pool) -> Builder {
        Builder::new(pool)
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

    /// Evaluates `limiter` with `opts` for one key, outside any request: for jobs, websockets
    /// or custom middleware.
    ///
    /// The Redis key is `{prefix}:{limiter}:{key}`; a request to a route is counted under
    /// `{prefix}:{limiter}:{scope}:{client}`, so `key = "{scope}:{client}"` shares its budget.
    /// This ignores the enabled flag and the failure policy: the caller sees every error.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownLimiter`] for an unregistered limiter, and any Redis, timeout or reply
    /// error.
    ///
    /// # Example
    ///
    /// ```no_run
    /// use plug_limit::{Opt, PlugLimit};
    ///
    /// # async fn run(limits: PlugLimit) -> Result<(), plug_limit::Error> {
    /// let outcome = limits
    ///     .check("fixed_window", "emails:user-42", &[Opt::Int(3), Opt::Int(3600)])
    ///     .await?;
    /// if !outcome.is_allowed() {
    ///     println!("no more emails this hour");
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn check(&self, limiter: &str, key: &str, opts: &[Opt]) -> Result<Outcome, Error> {
        let entry = self.entry(limiter)?;
        let key = format!("{}:{}:{key}", self.inner.prefix, entry.name);
        self.eval(entry, [key.as_str()], opts).await
    }

    fn entry(&self, limiter: &str) -> Result<&Entry, Error> {
        self.inner
            .limiters
            .get(limiter)
            .ok_or_else(|| Error::UnknownLimiter(limiter.to_owned()))
    }

    async fn eval<'k>(
        &self,
        entry: &Entry,
        keys: impl IntoIterator<Item = &'k str>,
        opts: &[Opt],
    ) -> Result<Outcome, Error> {
        let backend = entry.backend.as_ref().unwrap_or(&self.inner.backend);
        let timeout = self.inner.timeout;
        let reply = tokio::time::timeout(timeout, backend.eval(&entry.script, keys, opts))
            .await
            .map_err(|_| Error::Timeout(timeout))??;
        Ok(Outcome::from_reply(reply, &entry.headers)?)
    }

    /// Decides one request: `Ok(Some(outcome))` to allow it with headers, `Ok(None)` to let it
    /// through without (disabled, or failed open), `Err` to refuse it.
    pub(crate) async fn decide(
        &self,
        limit: LimitRef,
        parts: &Parts,
    ) -> Result<Option<Outcome>, RateLimitRejection> {
        if !self.is_enabled() {
            return Ok(None);
        }
        let Ok(entry) = self.entry(limit.limiter) else {
            let error = Error::UnknownLimiter(limit.limiter.to_owned());
            return fail(
                limit.limiter,
                self.inner.log_level,
                self.inner.on_failure,
                error,
            );
        };
        let fail = |error| fail(&entry.name, entry.log_level, entry.on_failure, error);
        let extractor = limit.key.unwrap_or(&*entry.key);
        let key = match extractor.extract(parts) {
            Ok(key) => key,
            Err(error) => return fail(error.into()),
        };
        let scope = limit
            .scope
            .or_else(|| {
                parts
                    .extensions
                    .get::<MatchedPath>()
                    .map(MatchedPath::as_str)
            })
            .unwrap_or("*");
        let keys: Vec<String> = key
            .iter()
            .map(|k| format!("{}:{}:{scope}:{k}", self.inner.prefix, entry.name))
            .collect();
        match self
            .eval(entry, keys.iter().map(String::as_str), limit.opts)
            .await
        {
            Ok(outcome) if outcome.is_allowed() => Ok(Some(outcome)),
            Ok(outcome) => {
                tracing::debug!(target: "plug_limit", limiter = %entry.name, key = %keys[0], "request denied");
                Err(RateLimitRejection::denied(
                    outcome,
                    Arc::clone(&entry.responder),
                ))
            }
            Err(error) => fail(error),
        }
    }
}

fn fail(
    limiter: &str,
    level: LogLevel,
    policy: FailurePolicy,
    error: Error,
) -> Result<Option<Outcome>, RateLimitRejection> {
    level.log(limiter, &error);
    match policy {
        FailurePolicy::Open => Ok(None),
        FailurePolicy::Closed => Err(RateLimitRejection::Unavailable(error)),
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
