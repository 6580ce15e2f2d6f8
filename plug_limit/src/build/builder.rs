//! The [`Builder`] of a [`PlugLimit`](crate::PlugLimit): its settings, set one by one.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::Config;
use super::{Limiter, Script, Store};
use crate::clock::{Clock, ManualClock};
use crate::config::{CircuitBreaker, Enabled, FailurePolicy, KeyFailure, LogLevel, Rules};
use crate::error::BuildError;
use crate::hook::Hook;
use crate::key::{self, KeyExtractor};
use crate::outcome::HeaderStyle;
use crate::outcome::ietf::PartitionKeys;

const DEFAULT_PREFIX: &str = "plug_limit";
const DEFAULT_TIMEOUT: Duration = Duration::from_millis(500);
const DEFAULT_MEMORY_CAPACITY: usize = 1_000_000;

/// The default bound on the requests of one key waiting at an instance.
const DEFAULT_WAIT_QUEUE: usize = 1_024;

/// Builds a [`PlugLimit`](crate::PlugLimit) with every option of the configuration. Made by
/// [`PlugLimit::builder`](crate::PlugLimit::builder).
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
///     // IPv6 clients by their /56: a home's every address is one client.
///     .key(key::peer_ip().ipv6_prefix(56))
///     .log_level(LogLevel::Warn)
///     .on_failure(FailurePolicy::Open)
///     .limiter("login", Limiter::token_bucket().on_failure(FailurePolicy::Closed))
///     .build()?;
/// # Ok(limits)
/// # }
/// ```
#[must_use]
pub struct Builder {
    pub(super) store: Store,
    pub(super) clock: Option<Arc<dyn Clock>>,
    pub(super) enabled: Enabled,
    pub(super) prefix: String,
    pub(super) timeout: Duration,
    /// How whoever set the timeout and the breaker spelled them, for their refusals:
    /// `timeout` in code, `timeout_ms` in a configuration file.
    pub(super) spelled: Spelled,
    pub(super) log_level: LogLevel,
    pub(super) on_failure: FailurePolicy,
    pub(super) on_key_failure: KeyFailure,
    pub(super) deny_cache: bool,
    pub(super) shadow: bool,
    pub(super) breaker: CircuitBreaker,
    pub(super) memory_capacity: usize,
    pub(super) wait_queue: usize,
    pub(super) key: Arc<dyn KeyExtractor>,
    pub(super) limiters: Vec<(String, Limiter)>,
    pub(super) errors: Vec<BuildError>,
    pub(super) header_style: HeaderStyle,
    /// The `pk` secret; `None`: the process's own.
    pub(super) partition_keys: Option<PartitionKeys>,
    pub(super) rules: Rules,
    pub(super) scripts: Vec<(String, Script)>,
    pub(super) hook: Option<Arc<dyn Hook>>,
    pub(super) check_handlers: bool,
}

/// The names of the settings whose spelling in a [`Config`] carries their unit.
#[derive(Debug, Clone, Copy)]
pub(super) struct Spelled {
    pub(super) timeout: &'static str,
    pub(super) open_for: &'static str,
}

impl Spelled {
    const CODE: Self = Self {
        timeout: "timeout",
        open_for: "circuit_breaker.open_for",
    };
    const FILE: Self = Self {
        timeout: "timeout_ms",
        open_for: "circuit_breaker.open_for_ms",
    };
}

impl Builder {
    pub(crate) fn new(store: Store) -> Self {
        Self {
            store,
            clock: None,
            enabled: Enabled::default(),
            prefix: DEFAULT_PREFIX.to_owned(),
            timeout: DEFAULT_TIMEOUT,
            spelled: Spelled::CODE,
            log_level: LogLevel::default(),
            on_failure: FailurePolicy::default(),
            on_key_failure: KeyFailure::default(),
            deny_cache: false,
            shadow: false,
            breaker: CircuitBreaker::default(),
            memory_capacity: DEFAULT_MEMORY_CAPACITY,
            wait_queue: DEFAULT_WAIT_QUEUE,
            key: Arc::new(key::peer_ip()),
            limiters: Vec::new(),
            errors: Vec::new(),
            header_style: HeaderStyle::default(),
            partition_keys: None,
            rules: Rules::new(),
            scripts: Vec::new(),
            hook: None,
            check_handlers: true,
        }
    }

    /// Whether limits apply (default: always), read on every request.
    pub fn enabled(mut self, enabled: impl Into<Enabled>) -> Self {
        self.enabled = enabled.into();
        self
    }

    /// The prefix of every Redis key (default `plug_limit`): 1 to 64 bytes, without whitespace,
    /// `{` or `}` ([`build`](Self::build) refuses another).
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// The most a check may take, connection included (default 500 ms). A slower check
    /// follows the failure policy.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self.spelled.timeout = Spelled::CODE.timeout;
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
    /// counted down. It is opt-in because a [`PlugLimit::reset`](crate::PlugLimit::reset) on *another* instance cannot
    /// clear this one's cache: the key stays denied here until T.
    pub fn deny_cache(mut self, on: bool) -> Self {
        self.deny_cache = on;
        self
    }

    /// Whether [`build`](Self::build) checks the `#[rate_limit]` handlers of this program
    /// (default `true`): every one must name a limiter this builder knows (built in or
    /// registered), and every limiter stacked on one must be able to stack, or `build` returns a
    /// [`BuildError`](crate::BuildError) naming the handler and the limiter. A missing limiter
    /// then stops the application at start-up, not at the handler's first request.
    ///
    /// The check sees every handler linked into the program, whichever `PlugLimit` serves it:
    /// turn it off for one that serves only some of them (a second `PlugLimit` with other
    /// limiters, a test that builds its own).
    pub fn check_handlers(mut self, on: bool) -> Self {
        self.check_handlers = on;
        self
    }

    /// Shadow (dry-run) mode for every limiter (default `false`; a limiter may say otherwise
    /// with [`Limiter::shadow`]): requests are decided and counted as usual and get their
    /// rate-limit headers, but a request the limit would refuse passes, and is logged instead
    /// (`INFO`, target `plug_limit`, at most one line a second per limiter with the count of
    /// the others). For rolling out a limit: see whom it would refuse before it refuses anyone.
    ///
    /// # Example
    ///
    /// ```
    /// use plug_limit::{Opt, PlugLimit, Store};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let limits = PlugLimit::builder(Store::memory()).shadow(true).build()?;
    /// # let _ = limits;
    /// # Ok(())
    /// # }
    /// ```
    pub fn shadow(mut self, on: bool) -> Self {
        self.shadow = on;
        self
    }

    /// The circuit breaker of the Redis backend (default: open for 1 s after 5 consecutive
    /// failures; see [`CircuitBreaker`]). A limiter's own pool gets its own breaker with the
    /// same settings, and on Redis Cluster each master gets its own.
    pub fn circuit_breaker(mut self, breaker: CircuitBreaker) -> Self {
        self.breaker = breaker;
        self.spelled.open_for = Spelled::CODE.open_for;
        self
    }

    /// The most keys the memory backend holds state for (default 1,000,000), so that a
    /// client sending a new key with every request cannot grow memory without bound.
    ///
    /// It bounds the backend of [`Store::memory`](crate::Store::memory) and the one
    /// [`FailurePolicy::Memory`] falls back on while Redis fails. The default is far above the
    /// distinct clients one instance sees within their windows (more is a case for Redis), and
    /// holds a spray to 0.2 to 0.3 GB rather than to the process's memory: a full backend
    /// takes about 220 to 300 bytes per key, by limiter (`cargo bench -p plug_limit_bench --bench memory_keys`).
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
    /// A stack of limits never evicts one of its own keys to store another: the states it
    /// has just counted stay, unless they alone fill the shard.
    ///
    /// The local [deny cache](Self::deny_cache) holds at most as many keys, by the same rule
    /// (the denials ending soonest go first): a dropped denial only costs its key one backend
    /// call.
    ///
    /// # Example
    ///
    /// ```
    /// use plug_limit::{PlugLimit, Store};
    ///
    /// # fn main() -> Result<(), plug_limit::BuildError> {
    /// let limits = PlugLimit::builder(Store::memory()).memory_capacity(100_000).build()?;
    /// # let _ = limits;
    /// let refused = PlugLimit::builder(Store::memory()).memory_capacity(0).build().unwrap_err();
    /// assert_eq!(refused.to_string(), "invalid `memory_capacity`: must be at least 1");
    /// # Ok(())
    /// # }
    /// ```
    pub fn memory_capacity(mut self, max_keys: usize) -> Self {
        self.memory_capacity = max_keys;
        self
    }

    /// The most requests of one key that wait at this instance to be admitted
    /// ([`PlugLimit::acquire`](crate::PlugLimit::acquire),
    /// [`RateLimitLayer::wait_up_to`](crate::RateLimitLayer::wait_up_to)): 1 to 1,000,000,
    /// 1,024 by default. The waiters of one key wait in one line, first come first served,
    /// and only the one at its head checks the store; past the bound a request is answered at
    /// once with the denial the line last met.
    ///
    /// # Example
    ///
    /// ```
    /// use plug_limit::{PlugLimit, Store};
    ///
    /// # fn main() -> Result<(), plug_limit::BuildError> {
    /// let limits = PlugLimit::builder(Store::memory()).wait_queue(100).build()?;
    /// # let _ = limits;
    /// let refused = PlugLimit::builder(Store::memory()).wait_queue(0).build().unwrap_err();
    /// assert_eq!(refused.to_string(), "invalid `wait_queue`: must be 1..=1000000");
    /// # Ok(())
    /// # }
    /// ```
    pub fn wait_queue(mut self, max_waiting: usize) -> Self {
        self.wait_queue = max_waiting;
        self
    }

    /// The default key extractor (default [`key::peer_ip`]).
    pub fn key(mut self, key: impl KeyExtractor) -> Self {
        self.key = crate::key::shared(key);
        self
    }

    /// The clock limiters decide by. The memory backend uses the system clock by default; on
    /// Redis, built-in limiters use the server's `TIME` unless a clock is set, which one
    /// clock for every instance keeps exact. Set one to control time in tests and simulations
    /// ([`ManualClock`](crate::ManualClock)); custom scripts always keep their own time.
    ///
    /// On Redis, keys expire by the server's own clock: a set clock must not run behind it, or
    /// a window's key expires as soon as it is written and nothing is counted. Local batches
    /// ([`Limiter::local_batches`](crate::Limiter::local_batches)) refuse a set clock.
    pub fn clock(mut self, clock: ManualClock) -> Self {
        self.clock = Some(Arc::new(clock));
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
            self.spelled.timeout = Spelled::FILE.timeout;
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
        if let Some(on) = config.shadow {
            self.shadow = on;
        }
        if let Some(breaker) = config.circuit_breaker {
            self.breaker = breaker;
            self.spelled.open_for = Spelled::FILE.open_for;
        }
        if let Some(max_keys) = config.memory_capacity {
            self.memory_capacity = max_keys;
        }
        if let Some(style) = config.header_style {
            self.header_style = style;
        }
        let mut rules = std::mem::take(&mut self.rules);
        if let Some(client) = config.client_ip {
            self.key = Arc::new(client);
            rules = rules.ip_from(client);
        }
        self.rules = rules.with_lists(config.allow_cidrs, config.deny_cidrs);
        self.scripts.extend(config.scripts);
        self.limiters.extend(config.limiters);
        self
    }

    /// A [`Hook`] that sees every result of every limiter's checks (allowed, denied, failed)
    /// and shapes the request's response (the seed's `:response`); a limiter's own
    /// [`Limiter::hook`] replaces it. Without one, allowed requests get their headers, denied
    /// ones `429 Too Many Requests` with the headers, failed ones their [`FailurePolicy`].
    pub fn hook(mut self, hook: impl Hook) -> Self {
        self.hook = Some(Arc::new(hook));
        self
    }

    /// Registers a Lua script under `name`, for the limiters made with
    /// [`Limiter::script_named`] to share (see [`Script`]).
    pub fn script(mut self, name: impl Into<String>, script: Script) -> Self {
        self.scripts.push((name.into(), script));
        self
    }

    /// Registers a custom limiter under `name`, for [`Limit::LIMITER`](crate::Limit::LIMITER)
    /// and `#[rate_limit(limiter = "name")]`. A name is non-empty, at most 64 bytes (every key
    /// of the limiter carries it, as it carries the prefix), without whitespace, `:`, control or invisible characters;
    /// [`build`](Self::build) refuses another, by its excerpt.
    pub fn limiter(mut self, name: impl Into<String>, limiter: Limiter) -> Self {
        self.limiters.push((name.into(), limiter));
        self
    }

    /// The rate-limit header fields every limiter sends (default [`HeaderStyle::Legacy`]; a
    /// limiter may say otherwise with [`Limiter::header_style`]). See [`HeaderStyle`] for the
    /// wire format of each.
    ///
    /// # Example
    ///
    /// ```
    /// use plug_limit::{HeaderStyle, PlugLimit, Store};
    ///
    /// # fn main() -> Result<(), plug_limit::BuildError> {
    /// let limits = PlugLimit::builder(Store::memory())
    ///     .header_style(HeaderStyle::Draft10)
    ///     .partition_key_secret(b"the same 32 bytes on every instance")
    ///     .build()?;
    /// # let _ = limits;
    /// # Ok(())
    /// # }
    /// ```
    pub fn header_style(mut self, style: HeaderStyle) -> Self {
        self.header_style = style;
        self
    }

    /// The secret of the `pk` (partition key) parameter of [`HeaderStyle::Draft10`], at least
    /// 16 bytes (32 random bytes are a good choice). Without it, each process draws its own at
    /// random: one client then sees a different `pk` from each instance. Keep it as secret as
    /// any key: with it, anyone could test guesses of a client's key (an API key, an IP
    /// address) against the `pk` a response shows.
    ///
    /// A shorter secret is refused by [`build`](Self::build).
    pub fn partition_key_secret(mut self, secret: impl AsRef<[u8]>) -> Self {
        match PartitionKeys::new(secret.as_ref()) {
            Ok(keys) => self.partition_keys = Some(keys),
            Err(rule) => self
                .errors
                .push(BuildError::invalid("partition_key_secret", rule)),
        }
        self
    }

    /// The requests every limiter lets through uncounted or refuses outright (default: none):
    /// an allow-list, a skip predicate and a deny-list, matched against the client's address as
    /// [`Rules::ip_from`] resolves it. A limiter's own [`Limiter::rules`] override them part
    /// by part. See [`Rules`].
    ///
    /// The parts `rules` sets replace those set before (by an earlier call or a
    /// [`Config`](crate::Config)'s lists); the parts it leaves unset stay, so a config file's
    /// lists and an address source set in code combine in either order.
    pub fn rules(mut self, rules: Rules) -> Self {
        self.rules = rules.replacing(std::mem::take(&mut self.rules));
        self
    }
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
