//! The [`Builder`] of a [`PlugLimit`], and the validation of its configuration.

use std::fmt;
use std::num::NonZeroUsize;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use deadpool_redis::{Pool, Runtime};
use http::HeaderName;

use super::handler_uses::check_limiters;
use super::limiter::Source;
use super::{CircuitBreaker, Config, Enabled, FailurePolicy, KeyFailure, Limiter, LogLevel};
use crate::algorithm::Algorithm;
use crate::backend::{Backend, MemoryBackend, Program, RedisBackend, RedisSettings};
use crate::clock::{Clock, SystemClock};
use crate::decide::{Decider, DenyCache, Entry, FailureLog, Registry};
use crate::error::BuildError;
use crate::handle::PlugLimit;
use crate::key::{self, KeyExtractor};
use crate::lua::Lua;
use crate::outcome::is_framing;
use crate::responder::{Responder, TooManyRequests};

const DEFAULT_PREFIX: &str = "plug_limit";
const DEFAULT_TIMEOUT: Duration = Duration::from_millis(500);
const DEFAULT_MEMORY_CAPACITY: usize = 1_000_000;

/// Builds a [`PlugLimit`] with every option of the configuration. Made by
/// [`PlugLimit::builder`].
///
/// Invalid settings are reported by [`build`](Self::build), naming the field and the rule.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use plug_limit::{key, Enabled, FailurePolicy, Limiter, LogLevel, PlugLimit};
///
/// # fn make(pool: deadpool_redis::Pool) -> Result<PlugLimit, plug_limit::BuildError> {
/// let limits = PlugLimit::builder(pool)
///     .enabled(Enabled::env("PLUG_LIMIT_ENABLED", true))
///     .prefix("myapp")
///     .timeout(Duration::from_millis(100))
///     .key(key::header("x-api-key"))
///     .log_level(LogLevel::Warn)
///     .on_failure(FailurePolicy::Open)
///     .limiter("login", Limiter::token_bucket().on_failure(FailurePolicy::Closed))
///     .build()?;
/// # Ok(limits)
/// # }
/// ```
#[must_use]
pub struct Builder {
    store: Store,
    clock: Option<Arc<dyn Clock>>,
    enabled: Enabled,
    prefix: String,
    timeout: Duration,
    log_level: LogLevel,
    on_failure: FailurePolicy,
    on_key_failure: KeyFailure,
    deny_cache: bool,
    breaker: CircuitBreaker,
    memory_capacity: usize,
    key: Arc<dyn KeyExtractor>,
    responder: Arc<dyn Responder>,
    limiters: Vec<(String, Limiter)>,
    errors: Vec<BuildError>,
}

/// Where the limiters will run.
enum Store {
    Redis(Pool),
    #[cfg(feature = "cluster")]
    RedisCluster(deadpool_redis::cluster::Pool),
    Memory,
}

impl Builder {
    pub(crate) fn new(pool: Pool) -> Self {
        Self::with_store(Store::Redis(pool))
    }

    #[cfg(feature = "cluster")]
    pub(crate) fn cluster(pool: deadpool_redis::cluster::Pool) -> Self {
        Self::with_store(Store::RedisCluster(pool))
    }

    pub(crate) fn memory() -> Self {
        Self::with_store(Store::Memory)
    }

    fn with_store(store: Store) -> Self {
        Self {
            store,
            clock: None,
            enabled: Enabled::default(),
            prefix: DEFAULT_PREFIX.to_owned(),
            timeout: DEFAULT_TIMEOUT,
            log_level: LogLevel::default(),
            on_failure: FailurePolicy::default(),
            on_key_failure: KeyFailure::default(),
            deny_cache: false,
            breaker: CircuitBreaker::default(),
            memory_capacity: DEFAULT_MEMORY_CAPACITY,
            key: Arc::new(key::peer_ip()),
            responder: Arc::new(TooManyRequests),
            limiters: Vec::new(),
            errors: Vec::new(),
        }
    }

    /// Whether limits apply (default: always), read on every request.
    pub fn enabled(mut self, enabled: impl Into<Enabled>) -> Self {
        self.enabled = enabled.into();
        self
    }

    /// The prefix of every Redis key (default `plug_limit`).
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// The most a check may take, connection included (default 500 ms). A slower check
    /// follows the failure policy.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The level errors are logged at (default [`LogLevel::Error`]).
    pub fn log_level(mut self, level: LogLevel) -> Self {
        self.log_level = level;
        self
    }

    /// What a request gets when its limiter cannot decide (default [`FailurePolicy::Open`]).
    pub fn on_failure(mut self, policy: FailurePolicy) -> Self {
        self.on_failure = policy;
        self
    }

    /// What a request gets when its key cannot be extracted (default [`KeyFailure::PeerIp`]).
    pub fn on_key_failure(mut self, policy: KeyFailure) -> Self {
        self.on_key_failure = policy;
        self
    }

    /// Whether limiters keep a local deny cache (default `false`; a limiter may say otherwise
    /// with [`Limiter::deny_cache`]).
    ///
    /// Once a key is denied until T (its `retry-after`, else its `x-ratelimit-reset`), this
    /// instance denies it until T by itself, without a backend call, so a flood from one
    /// denied client costs Redis nothing. The answers are the limiter's own, with their waits
    /// counted down. It is opt-in because a [`PlugLimit::reset`] on *another* instance cannot
    /// clear this one's cache: the key stays denied here until T.
    pub fn deny_cache(mut self, on: bool) -> Self {
        self.deny_cache = on;
        self
    }

    /// The circuit breaker of the Redis backend (default: open for 1 s after 5 consecutive
    /// failures; see [`CircuitBreaker`]). A limiter's own pool gets its own breaker with the
    /// same settings.
    pub fn circuit_breaker(mut self, breaker: CircuitBreaker) -> Self {
        self.breaker = breaker;
        self
    }

    /// The most keys the memory backend holds state for (default 1,000,000), so that a
    /// client sending a new key with every request cannot grow memory without bound.
    ///
    /// It bounds the backend of [`PlugLimit::memory_builder`] and the one
    /// [`FailurePolicy::Memory`] falls back on while Redis fails. The default is far above the
    /// distinct clients one instance sees within their windows (more is a case for Redis), and
    /// holds a spray to 0.2 to 0.3 GB rather than to the process's memory: a full backend
    /// takes about 220 to 300 bytes per key, by limiter (`cargo bench --bench memory_keys`).
    /// A lower bound saves memory but makes evicting a key cheaper (see below).
    /// `usize::MAX` lifts the bound.
    ///
    /// # Eviction
    ///
    /// The bound is kept per shard, so no lock spans the map: keys are spread by a keyed hash
    /// over up to 64 shards, whose shares of `max_keys` add up to exactly `max_keys`; a shard
    /// can thus fill while the whole holds a little less. A key's *expiry* is when its state
    /// would end by itself, as its Redis key's TTL would end it. Only a new key arriving at a
    /// full shard evicts, and the shard then drops:
    ///
    /// 1. every expired entry: its state was over, nothing is lost;
    /// 2. if that freed less than an eighth of the shard, the live entries that expire
    ///    soonest, until an eighth is free (entries expiring in the same millisecond go in no
    ///    particular order).
    ///
    /// So a live key is evicted only while fewer than an eighth of its shard's entries expire
    /// before it, and what it loses is its state: its next request starts afresh, its budget
    /// back early by at most the time that state had left, which was among the shortest eighth
    /// in its shard. Evicting it takes its full shard to hold at least seven eighths of entries
    /// expiring no sooner than it; a client cannot choose shards, so on an otherwise idle
    /// backend a spray needs about seven eighths of `max_keys` fresh keys that outlast it. Keys
    /// that expire sooner never push it out: a client denied for an hour stays denied through
    /// any spray, however long, through limiters whose windows end before its denial does
    /// (given two keys or more per shard, i.e. `max_keys` of 128 or more). A spray through the
    /// victim's own limiter does count, once its fresh keys outlast the victim's state. One
    /// pass over a shard frees an eighth of it, so eviction costs each new key a constant
    /// amount of work, amortised.
    ///
    /// The local [deny cache](Self::deny_cache) holds at most as many keys, by the same rule
    /// (the denials ending soonest go first): a dropped denial only costs its key one backend
    /// call.
    ///
    /// # Example
    ///
    /// ```
    /// use plug_limit::PlugLimit;
    ///
    /// # fn main() -> Result<(), plug_limit::BuildError> {
    /// let limits = PlugLimit::memory_builder().memory_capacity(100_000).build()?;
    /// # let _ = limits;
    /// let refused = PlugLimit::memory_builder().memory_capacity(0).build().unwrap_err();
    /// assert_eq!(refused.to_string(), "invalid `memory_capacity`: must be at least 1");
    /// # Ok(())
    /// # }
    /// ```
    pub fn memory_capacity(mut self, max_keys: usize) -> Self {
        self.memory_capacity = max_keys;
        self
    }

    /// The default key extractor (default [`key::peer_ip`]).
    pub fn key(mut self, key: impl KeyExtractor) -> Self {
        self.key = Arc::new(key);
        self
    }

    /// The default responder for denied requests (default `429 Too Many Requests`).
    pub fn responder(mut self, responder: impl Responder) -> Self {
        self.responder = Arc::new(responder);
        self
    }

    /// The clock limiters decide by. The memory backend uses the system clock by default; on
    /// Redis, built-in limiters use the server's `TIME` unless a clock is set, which one
    /// clock for every instance keeps exact. Set one to control time in tests and simulations
    /// ([`ManualClock`](crate::ManualClock)); custom scripts always keep their own time.
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Some(Arc::new(clock));
        self
    }

    /// Registers a custom limiter under `name`, for [`Limit::LIMITER`](crate::Limit::LIMITER)
    /// and `#[rate_limit(limiter = "name")]`.
    pub fn limiter(mut self, name: impl Into<String>, limiter: Limiter) -> Self {
        self.limiters.push((name.into(), limiter));
        self
    }

    /// Applies a deserialized [`Config`]; its settings replace those set before.
    pub fn config(mut self, config: Config) -> Self {
        if let Some(enabled) = config.enabled {
            self.enabled = enabled;
        }
        if let Some(prefix) = config.prefix {
            self.prefix = prefix;
        }
        if let Some(ms) = config.timeout_ms {
            self.timeout = Duration::from_millis(ms);
        }
        if let Some(level) = config.log_level {
            self.log_level = level;
        }
        if let Some(policy) = config.on_failure {
            self.on_failure = policy;
        }
        if let Some(on) = config.deny_cache {
            self.deny_cache = on;
        }
        if let Some(policy) = config.on_key_failure {
            self.on_key_failure = policy;
        }
        if let Some(breaker) = config.circuit_breaker {
            self.breaker = breaker;
        }
        if let Some(max_keys) = config.memory_capacity {
            self.memory_capacity = max_keys;
        }
        for (name, limiter) in config.limiters {
            let field = format!("limiters.{name}");
            let mut built = match (limiter.script, limiter.script_file) {
                (Some(lua), None) => Limiter::script(lua),
                (None, Some(path)) => Limiter::script_file(path),
                _ => {
                    self.errors.push(BuildError::invalid(
                        field,
                        "exactly one of `script` and `script_file` is required",
                    ));
                    continue;
                }
            }
            .headers(limiter.headers);
            if let Some(url) = limiter.redis_url {
                match deadpool_redis::Config::from_url(url).create_pool(Some(Runtime::Tokio1)) {
                    Ok(pool) => built = built.pool(pool),
                    Err(source) => {
                        self.errors.push(BuildError::Pool {
                            field: format!("{field}.redis_url"),
                            source,
                        });
                        continue;
                    }
                }
            }
            if let Some(level) = limiter.log_level {
                built = built.log_level(level);
            }
            if let Some(policy) = limiter.on_failure {
                built = built.on_failure(policy);
            }
            if let Some(on) = limiter.deny_cache {
                built = built.deny_cache(on);
            }
            if let Some(policy) = limiter.on_key_failure {
                built = built.on_key_failure(policy);
            }
            self.limiters.push((name, built));
        }
        self
    }

    /// Validates the configuration and builds the [`PlugLimit`].
    ///
    /// # Errors
    ///
    /// A [`BuildError`] naming the first invalid field and the rule it breaks: an empty or
    /// spaced `prefix`, a zero `timeout` or `memory_capacity`, an empty `enabled` variable
    /// name, a limiter name that is empty, taken twice or a built-in's, an empty or unreadable
    /// script, an invalid header name, a config limiter without exactly one script, or a
    /// limiter that a `#[rate_limit]` handler of this program uses but that is not registered.
    pub fn build(mut self) -> Result<PlugLimit, BuildError> {
        if let Some(error) = self.errors.drain(..).next() {
            return Err(error);
        }
        // Braces would put a Redis Cluster hash tag before the one the library chooses.
        if self.prefix.is_empty()
            || self
                .prefix
                .contains(|c: char| c.is_whitespace() || c == '{' || c == '}')
        {
            return Err(BuildError::invalid(
                "prefix",
                "must be non-empty and contain no whitespace, `{` or `}`",
            ));
        }
        if self.timeout.is_zero() {
            return Err(BuildError::invalid("timeout", "must be greater than zero"));
        }
        if self.breaker.failures() == 0 {
            return Err(BuildError::invalid(
                "circuit_breaker.failures",
                "must be at least 1",
            ));
        }
        if self.breaker.open_for().is_zero() {
            return Err(BuildError::invalid(
                "circuit_breaker.open_for",
                "must be greater than zero",
            ));
        }
        if self.memory_capacity == 0 {
            return Err(BuildError::invalid("memory_capacity", "must be at least 1"));
        }
        if let Enabled::Env { env, .. } = &self.enabled
            && (env.is_empty() || env.contains(['=', '\0']))
        {
            return Err(BuildError::invalid(
                "enabled.env",
                "must be a non-empty variable name without `=`",
            ));
        }
        let mut registry = self.builtins();
        for (name, limiter) in std::mem::take(&mut self.limiters) {
            let entry = self.custom_entry(&name, limiter)?;
            if !registry.insert(entry) {
                let rule = if Algorithm::from_name(&name).is_some() {
                    "is a built-in limiter; register the script under another name"
                } else {
                    "is registered more than once"
                };
                return Err(BuildError::invalid(format!("limiters.{name}"), rule));
            }
        }
        check_limiters(|name| registry.contains(name))?;
        Ok(self.finish(registry))
    }

    /// Builds with the built-in limiters only; the defaults need no validation.
    pub(crate) fn build_default(self) -> PlugLimit {
        let registry = self.builtins();
        self.finish(registry)
    }

    /// Every built-in under its own name, with this builder's settings.
    fn builtins(&self) -> Registry {
        let mut registry = Registry::default();
        for algorithm in Algorithm::all() {
            let defaults = Limiter::from_source(Source::BuiltIn(algorithm));
            registry.insert(self.entry(Program::builtin(algorithm), None, defaults));
        }
        registry
    }

    /// A limiter's entry: its program and backend, and its settings or else this builder's.
    fn entry(&self, program: Program, backend: Option<Backend>, limiter: Limiter) -> Entry {
        Entry {
            program,
            backend,
            key: limiter.key.unwrap_or_else(|| Arc::clone(&self.key)),
            responder: limiter
                .responder
                .unwrap_or_else(|| Arc::clone(&self.responder)),
            on_failure: limiter.on_failure.unwrap_or(self.on_failure),
            on_key_failure: limiter.on_key_failure.unwrap_or(self.on_key_failure),
            deny_cache: limiter.deny_cache.unwrap_or(self.deny_cache),
            log_level: limiter.log_level.unwrap_or(self.log_level),
            failures: FailureLog::new(),
        }
    }

    /// How a Redis backend of this builder calls Redis.
    fn redis_settings(&self) -> RedisSettings {
        RedisSettings {
            timeout: self.timeout,
            clock: self.clock.clone(),
            breaker: self.breaker,
            log_level: self.log_level,
        }
    }

    fn custom_entry(&self, name: &str, limiter: Limiter) -> Result<Entry, BuildError> {
        let field = format!("limiters.{name}");
        if name.is_empty() || name.contains(|c: char| c.is_whitespace() || c == ':') {
            return Err(BuildError::invalid(
                field,
                "a limiter name must be non-empty, without whitespace or `:`",
            ));
        }
        let memory = matches!(self.store, Store::Memory);
        let custom_rule = match (&limiter.source, memory) {
            (Source::BuiltIn(_), _) => None,
            (_, true) => {
                Some("custom Lua scripts need Redis: the memory backend runs built-in limiters")
            }
            (_, false) if limiter.on_failure == Some(FailurePolicy::Memory) => Some(
                "`on_failure: memory` needs a built-in limiter: memory cannot run custom Lua scripts",
            ),
            (_, false) => None,
        };
        if let Some(rule) = custom_rule {
            return Err(BuildError::invalid(field, rule));
        }
        if memory && limiter.pool.is_some() {
            return Err(BuildError::invalid(
                format!("{field}.pool"),
                "a limiter's own Redis pool needs the Redis backend",
            ));
        }
        let (algorithm, script) = match &limiter.source {
            Source::BuiltIn(algorithm) => (Some(*algorithm), Arc::clone(algorithm.script())),
            Source::Lua(lua) => (None, Arc::new(script(&field, "script", lua.clone())?)),
            Source::File(path) => {
                let lua =
                    std::fs::read_to_string(path).map_err(|source| BuildError::ScriptFile {
                        field: format!("{field}.script_file"),
                        path: path.clone(),
                        source,
                    })?;
                (None, Arc::new(script(&field, "script_file", lua)?))
            }
        };
        let headers = match &limiter.headers {
            Some(names) => names
                .iter()
                .enumerate()
                .map(|(i, name)| {
                    let field = || format!("{field}.headers[{i}]");
                    let header = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                        BuildError::invalid(field(), format!("`{name}` is not a valid header name"))
                    })?;
                    if is_framing(&header) {
                        return Err(BuildError::invalid(
                            field(),
                            format!("`{header}` frames the response or belongs to the connection; a limiter may not set it"),
                        ));
                    }
                    Ok(header)
                })
                .collect::<Result<_, _>>()?,
            None => algorithm.map_or(&[][..], Algorithm::headers).into(),
        };
        let program = Program {
            name: name.into(),
            algorithm,
            script,
            headers,
        };
        let backend = limiter
            .pool
            .clone()
            .map(|pool| Backend::Redis(Arc::new(RedisBackend::new(pool, self.redis_settings()))));
        Ok(self.entry(program, backend, limiter))
    }

    fn finish(self, registry: Registry) -> PlugLimit {
        let settings = self.redis_settings();
        // `build` refuses 0 and `build_default` keeps the default: the fallback is never taken.
        let memory_capacity = NonZeroUsize::new(self.memory_capacity).unwrap_or(NonZeroUsize::MIN);
        let backend = match self.store {
            Store::Redis(pool) => Backend::Redis(Arc::new(RedisBackend::new(pool, settings))),
            #[cfg(feature = "cluster")]
            Store::RedisCluster(pool) => {
                Backend::Redis(Arc::new(RedisBackend::cluster(pool, settings)))
            }
            Store::Memory => {
                let clock = self.clock.clone().unwrap_or_else(|| Arc::new(SystemClock));
                Backend::Memory(Arc::new(MemoryBackend::new(clock, memory_capacity)))
            }
        };
        PlugLimit::from_decider(Decider {
            enabled: self.enabled,
            prefix: self.prefix.into(),
            log_level: self.log_level,
            on_failure: self.on_failure,
            failures: FailureLog::new(),
            denials: DenyCache::new(memory_capacity),
            backend,
            clock: self.clock,
            memory_capacity,
            fallback: OnceLock::new(),
            registry,
        })
    }
}

fn script(field: &str, which: &str, lua: String) -> Result<Lua, BuildError> {
    if lua.trim().is_empty() {
        return Err(BuildError::invalid(
            format!("{field}.{which}"),
            "the Lua script is empty",
        ));
    }
    Ok(Lua::new(lua))
}

impl fmt::Debug for Builder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("enabled", &self.enabled)
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .field("log_level", &self.log_level)
            .field("on_failure", &self.on_failure)
            .field("deny_cache", &self.deny_cache)
            .field("limiters", &self.limiters)
            .finish_non_exhaustive()
    }
}
