//! Limiter definitions: a Lua script, its header names, and per-limiter settings.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use deadpool_redis::{Pool, Runtime};
use serde::Deserialize;

use crate::algorithm::Builtin;
use crate::backend::ConnectionSource;
use crate::config::{FailurePolicy, KeyFailure, LocalBatches, LogLevel, Rules};
use crate::hook::Hook;
use crate::key::KeyExtractor;
use crate::outcome::HeaderStyle;
use deadpool_redis::redis::aio::ConnectionLike;

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
#[derive(Clone, Deserialize)]
#[serde(from = "LimiterFile")]
pub struct Limiter {
    pub(crate) source: Source,
    pub(crate) headers: Option<Vec<String>>,
    /// Its own pool or connection.
    pub(crate) redis: Option<ConnectionSource>,
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
    /// Its pool was made from a configuration file's `redis_url`.
    pub(crate) redis_from_url: bool,
    /// What a configuration file's table of it breaks: the key after `limiters.NAME` and the
    /// rule, refused by `build()`.
    pub(crate) invalid: Option<(String, String)>,
}

#[derive(Clone)]
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
            redis_from_url: false,
            invalid: None,
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
        self.redis = Some(ConnectionSource::Single(pool));
        self
    }

    /// Runs this limiter on a connection the application already holds (the seed's
    /// per-limiter `cmd`), e.g. a `ConnectionManager`, under the rules of
    /// [`Store::connection`](crate::Store::connection).
    pub fn connection(mut self, conn: impl ConnectionLike + Clone + Send + Sync + 'static) -> Self {
        self.redis = Some(ConnectionSource::Own(Box::new(conn)));
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

/// A limiter as a configuration file writes it (see [`Config::limiters`](crate::Config)).
#[derive(Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct LimiterFile {
    script: Option<String>,
    script_file: Option<PathBuf>,
    script_name: Option<String>,
    builtin: Option<String>,
    headers: Vec<String>,
    redis_url: Option<String>,
    log_level: Option<LogLevel>,
    on_failure: Option<FailurePolicy>,
    on_key_failure: Option<KeyFailure>,
    shadow: Option<bool>,
    deny_cache: Option<bool>,
    header_style: Option<HeaderStyle>,
    allow_cidrs: Option<Vec<String>>,
    deny_cidrs: Option<Vec<String>>,
    local_batches: Option<BatchesFile>,
}

/// A limiter's local batches as a configuration file writes them.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BatchesFile {
    max: u32,
    every_ms: Option<u64>,
    queue: Option<u32>,
}

/// A file's limiter: what it breaks is kept, for [`Builder::build`](crate::Builder::build) to
/// refuse naming the limiter, rather than failing the whole file's parse without a name.
impl From<LimiterFile> for Limiter {
    fn from(file: LimiterFile) -> Self {
        let invalid = |suffix: &str, rule: String| {
            let mut limiter = Self::from_source(Source::Lua(String::new()));
            limiter.invalid = Some((suffix.to_owned(), rule));
            limiter
        };
        // A shared script's or a built-in's header names stand unless the limiter names its own.
        let declared = file.script_name.is_some() || file.builtin.is_some();
        let mut limiter = match (
            file.script,
            file.script_file,
            file.script_name,
            file.builtin,
        ) {
            (Some(lua), None, None, None) => Self::script(lua),
            (None, Some(path), None, None) => Self::script_file(path),
            (None, None, Some(name), None) => Self::script_named(name),
            (None, None, None, Some(name)) => match name.as_str() {
                "fixed_window" => Self::fixed_window(),
                "token_bucket" => Self::token_bucket(),
                // The others are known by their own names to the checks that guard them (a
                // lease never stacked, a settling limit's options), which a renamed one would
                // slip past.
                _ => {
                    let rule = format!(
                        "must be `fixed_window` or `token_bucket` (the built-ins that run under \
                         another name), got `{}`",
                        plug_limit_options::excerpt(&name)
                    );
                    return invalid(".builtin", rule);
                }
            },
            _ => {
                let rule = "exactly one of `script`, `script_file`, `script_name` and `builtin` \
                            is required";
                return invalid("", rule.to_owned());
            }
        };
        if !(declared && file.headers.is_empty()) {
            limiter = limiter.headers(file.headers);
        }
        if let Some(batches) = file.local_batches {
            let mut settings = LocalBatches::new(batches.max);
            match batches.every_ms {
                None => {}
                Some(every_ms @ 1..=1000) => {
                    settings = settings.every(Duration::from_millis(every_ms));
                }
                Some(_) => {
                    let rule = "must be 1..=1000 (milliseconds)".to_owned();
                    return invalid(".local_batches.every_ms", rule);
                }
            }
            if let Some(queue) = batches.queue {
                settings = settings.queue(queue);
            }
            limiter = limiter.local_batches(settings);
        }
        if let Some(url) = file.redis_url {
            match deadpool_redis::Config::from_url(url).create_pool(Some(Runtime::Tokio1)) {
                Ok(pool) => limiter = limiter.pool(pool),
                Err(error) => return invalid(".redis_url", error.to_string()),
            }
            limiter.redis_from_url = true;
        }
        limiter.log_level = file.log_level;
        limiter.on_failure = file.on_failure;
        limiter.on_key_failure = file.on_key_failure;
        limiter.shadow = file.shadow;
        limiter.deny_cache = file.deny_cache;
        limiter.header_style = file.header_style;
        if file.allow_cidrs.is_some() || file.deny_cidrs.is_some() {
            limiter.rules = Some(Rules::new().with_lists(file.allow_cidrs, file.deny_cidrs));
        }
        limiter
    }
}
