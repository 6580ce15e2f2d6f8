//! Limiter definitions: a Lua script, its header names, and per-limiter settings.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use deadpool_redis::Pool;

use super::RedisConnection;
use crate::algorithm::Builtin;
use crate::backend::Pools;
use crate::config::{FailurePolicy, KeyFailure, LocalBatches, LogLevel, Rules};
use crate::hook::Hook;
use crate::key::KeyExtractor;
use crate::outcome::HeaderStyle;

/// A limiter to register with [`Builder::limiter`](crate::Builder::limiter): a Lua script
/// following the script contract, the names of the headers it returns, and optionally its own
/// Redis pool, key extractor, hook, failure policy and log level.
///
/// Unset settings fall back to the [`PlugLimit`](crate::PlugLimit)'s.
///
/// # Script contract
///
/// `KEYS` are the request's namespaced keys, `ARGV` the limit's options. The script answers
/// `{"allow"|"deny", {header values...}, extra...}`: each header value is sent under the name
/// declared at its position, a `{name, value}` pair sets its own name, and extra values reach a
/// [`Hook`](crate::Hook) through [`Outcome::extra`](crate::Outcome::extra).
///
/// # Example
///
/// ```
/// use plug_limit::{Limiter, LogLevel};
///
/// let quota = Limiter::script(
///     "local n = redis.call('INCR', KEYS[1])
///      if n == 1 then redis.call('EXPIRE', KEYS[1], ARGV[2]) end
///      local left = math.max(tonumber(ARGV[1]) - n, 0)
///      return {n <= tonumber(ARGV[1]) and 'allow' or 'deny', {ARGV[1], tostring(left)}}",
/// )
/// .headers(["x-quota-limit", "x-quota-remaining"])
/// .log_level(LogLevel::Warn);
/// # let _ = quota;
/// ```
#[must_use]
pub struct Limiter {
    pub(crate) source: Source,
    pub(crate) headers: Option<Vec<String>>,
    /// Its own pool or connection.
    pub(crate) redis: Option<Pools>,
    pub(crate) key: Option<Arc<dyn KeyExtractor>>,
    pub(crate) on_failure: Option<FailurePolicy>,
    pub(crate) on_key_failure: Option<KeyFailure>,
    pub(crate) shadow: Option<bool>,
    pub(crate) deny_cache: Option<bool>,
    pub(crate) log_level: Option<LogLevel>,
    pub(crate) header_style: Option<HeaderStyle>,
    pub(crate) rules: Option<Rules>,
    pub(crate) hook: Option<Arc<dyn Hook>>,
    pub(crate) batches: Option<LocalBatches>,
}

pub(crate) enum Source {
    BuiltIn(Builtin),
    Lua(String),
    File(PathBuf),
    /// A script registered with `Builder::script`.
    Named(String),
}

impl Limiter {
    pub(crate) fn from_source(source: Source) -> Self {
        Self {
            source,
            headers: None,
            redis: None,
            key: None,
            on_failure: None,
            on_key_failure: None,
            shadow: None,
            deny_cache: None,
            log_level: None,
            header_style: None,
            rules: None,
            hook: None,
            batches: None,
        }
    }

    /// A limiter running the Lua `source`.
    pub fn script(source: impl Into<String>) -> Self {
        Self::from_source(Source::Lua(source.into()))
    }

    /// A limiter running the Lua script in the file at `path`, read by
    /// [`Builder::build`](crate::Builder::build).
    pub fn script_file(path: impl Into<PathBuf>) -> Self {
        Self::from_source(Source::File(path.into()))
    }

    /// A limiter running the script registered as `name` with
    /// [`Builder::script`](crate::Builder::script), shared with every other limiter naming
    /// it; its header names are the script's unless [`headers`](Self::headers) says otherwise.
    pub fn script_named(name: impl Into<String>) -> Self {
        Self::from_source(Source::Named(name.into()))
    }

    /// The built-in fixed window script, for a limiter with its own settings (e.g. another
    /// hook) under another name.
    pub fn fixed_window() -> Self {
        Self::from_source(Source::BuiltIn(Builtin::FixedWindow))
    }

    /// The built-in token bucket script, for a limiter with its own settings under another
    /// name.
    pub fn token_bucket() -> Self {
        Self::from_source(Source::BuiltIn(Builtin::TokenBucket))
    }

    /// The header names the script's header values are sent under, in order.
    ///
    /// Built-in scripts declare their own; setting this replaces them.
    pub fn headers<I>(mut self, names: I) -> Self
    where
        I: IntoIterator,
        I::Item: Into<String>,
    {
        self.headers = Some(names.into_iter().map(Into::into).collect());
        self
    }

    /// Runs this limiter on its own Redis pool (the seed's per-limiter `cmd`).
    pub fn pool(mut self, pool: Pool) -> Self {
        self.redis = Some(Pools::Single(pool));
        self
    }

    /// Runs this limiter on a connection the application already holds (the seed's
    /// per-limiter `cmd`), e.g. a `ConnectionManager`: see [`RedisConnection`].
    pub fn connection(mut self, conn: impl RedisConnection) -> Self {
        self.redis = Some(Pools::Own(Box::new(conn)));
        self
    }

    /// The key extractor for this limiter's requests.
    pub fn key(mut self, key: impl KeyExtractor) -> Self {
        self.key = Some(crate::key::shared(key));
        self
    }

    /// What this limiter's requests get when it cannot decide.
    pub fn on_failure(mut self, policy: FailurePolicy) -> Self {
        self.on_failure = Some(policy);
        self
    }

    /// What this limiter's requests get when their key cannot be extracted.
    pub fn on_key_failure(mut self, policy: KeyFailure) -> Self {
        self.on_key_failure = Some(policy);
        self
    }

    /// Shadow mode for this limiter (see [`Builder::shadow`](crate::Builder::shadow)).
    pub fn shadow(mut self, on: bool) -> Self {
        self.shadow = Some(on);
        self
    }

    /// Whether this limiter keeps a local deny cache (see
    /// [`Builder::deny_cache`](crate::Builder::deny_cache)). A custom script's denials are
    /// cached only when it answers a `retry-after` or `x-ratelimit-reset` in seconds.
    pub fn deny_cache(mut self, on: bool) -> Self {
        self.deny_cache = Some(on);
        self
    }

    /// The level this limiter's errors are logged at.
    pub fn log_level(mut self, level: LogLevel) -> Self {
        self.log_level = Some(level);
        self
    }

    /// The rate-limit header fields this limiter sends (see
    /// [`Builder::header_style`](crate::Builder::header_style)). A custom script keeps its
    /// own headers in either style: only built-in limiters declare the quota and window
    /// [`HeaderStyle::Draft10`] reports.
    pub fn header_style(mut self, style: HeaderStyle) -> Self {
        self.header_style = Some(style);
        self
    }

    /// This limiter's [`Hook`], which sees every result of its checks (the seed's per-limiter
    /// `:response`); it replaces the global one of [`Builder::hook`](crate::Builder::hook).
    pub fn hook(mut self, hook: impl Hook) -> Self {
        self.hook = Some(Arc::new(hook));
        self
    }

    /// Local batches for this limiter's hot keys (`fixed_window` and `token_bucket` on Redis
    /// only; see [`LocalBatches`] for the bounds): requests take units this instance reserved
    /// from Redis in batches, without a round trip each. A request costing other than 1, or
    /// settling after its response, and programmatic checks stay exact.
    ///
    /// ```
    /// use plug_limit::{Limiter, LocalBatches};
    ///
    /// // Register under a name of its own: `Builder::limiter("global", hot)`.
    /// let hot = Limiter::token_bucket().local_batches(LocalBatches::new(100));
    /// # let _ = hot;
    /// ```
    pub fn local_batches(mut self, batches: LocalBatches) -> Self {
        self.batches = Some(batches);
        self
    }

    /// This limiter's [`Rules`]: the parts they set replace the global rules of
    /// [`Builder::rules`](crate::Builder::rules), the others are the global ones.
    pub fn rules(mut self, rules: Rules) -> Self {
        self.rules = Some(rules);
        self
    }
}

impl fmt::Debug for Limiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let source = match &self.source {
            Source::BuiltIn(algorithm) => algorithm.name().to_owned(),
            Source::Lua(lua) => format!("{} bytes of Lua", lua.len()),
            Source::File(path) => path.display().to_string(),
            Source::Named(name) => format!("the script `{name}`"),
        };
        f.debug_struct("Limiter")
            .field("source", &source)
            .field("headers", &self.headers)
            .field("own_redis", &self.redis.is_some())
            .field("own_key", &self.key.is_some())
            .field("on_failure", &self.on_failure)
            .field("on_key_failure", &self.on_key_failure)
            .field("shadow", &self.shadow)
            .field("deny_cache", &self.deny_cache)
            .field("log_level", &self.log_level)
            .field("header_style", &self.header_style)
            .field("rules", &self.rules)
            .field("local_batches", &self.batches)
            .finish()
    }
}
