//! Configuration that can be deserialized, e.g. from a TOML or JSON file.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

use crate::config::{CircuitBreaker, Enabled, FailurePolicy, KeyFailure, LogLevel};
use crate::outcome::HeaderStyle;

/// The serializable part of a [`PlugLimit`](crate::PlugLimit)'s configuration: everything but
/// code (key extractors and hooks are set on the [`Builder`](crate::Builder)).
///
/// Apply it with [`Builder::config`](crate::Builder::config); the builder validates it.
///
/// # Example
///
/// ```
/// use plug_limit::Config;
///
/// let config: Config = serde_json::from_str(r#"{
///     "enabled": { "env": "PLUG_LIMIT_ENABLED", "default": true },
///     "prefix": "myapp",
///     "timeout_ms": 250,
///     "log_level": "warn",
///     "on_failure": "open",
///     "limiters": {
///         "quota": {
///             "script_file": "lua/quota.lua",
///             "headers": ["x-quota-limit", "x-quota-remaining"],
///             "redis_url": "redis://127.0.0.1:6380/",
///             "on_failure": "closed"
///         }
///     }
/// }"#).unwrap();
/// assert_eq!(config.timeout_ms, Some(250));
/// ```
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct Config {
    /// Whether limits apply: a boolean, or `{ "env": "VAR", "default": true }`.
    pub enabled: Option<Enabled>,
    /// The prefix of every Redis key (default `plug_limit`).
    pub prefix: Option<String>,
    /// The time a check may take, in milliseconds (default 500).
    pub timeout_ms: Option<u64>,
    /// The level errors are logged at: `off`, `error` (default), `warn`, `info`, `debug`, `trace`.
    pub log_level: Option<LogLevel>,
    /// What a request gets when its limiter cannot decide: `open` (default), `closed` or `memory`.
    pub on_failure: Option<FailurePolicy>,
    /// Whether limiters keep a local deny cache (default `false`).
    pub deny_cache: Option<bool>,
    /// Shadow (dry-run) mode for every limiter (default `false`).
    pub shadow: Option<bool>,
    /// What a request without a usable key gets: `peer_ip` (default), `reject` or `pass`.
    pub on_key_failure: Option<KeyFailure>,
    /// The Redis backend's circuit breaker: `{ "failures": 5, "open_for_ms": 1000 }`.
    pub circuit_breaker: Option<CircuitBreaker>,
    /// The most keys the memory backend holds state for (default 1,000,000; at least 1): see
    /// [`Builder::memory_capacity`](crate::Builder::memory_capacity).
    pub memory_capacity: Option<usize>,
    /// Limiters by name: custom scripts, and built-ins under names of their own.
    pub limiters: BTreeMap<String, LimiterConfig>,
    /// The rate-limit header fields of every limiter: `legacy` (default) or `draft10` (see
    /// [`HeaderStyle`]).
    pub header_style: Option<HeaderStyle>,
    /// Clients let through uncounted: CIDR blocks or addresses (see
    /// [`Rules::allow_cidrs`](crate::Rules::allow_cidrs)).
    pub allow_cidrs: Option<Vec<String>>,
    /// Clients refused with `403 Forbidden`: CIDR blocks or addresses (see
    /// [`Rules::deny_cidrs`](crate::Rules::deny_cidrs)).
    pub deny_cidrs: Option<Vec<String>>,
    /// Lua scripts by name, for limiters to share with `script_name` (see
    /// [`Script`](crate::Script)).
    pub scripts: BTreeMap<String, ScriptConfig>,
}

/// A shared script in a [`Config`]: exactly one of `script` and `script_file`, and the
/// default header names of the limiters that run it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct ScriptConfig {
    /// The Lua source.
    pub script: Option<String>,
    /// A file holding the Lua source.
    pub script_file: Option<PathBuf>,
    /// The header names of the script's header values, in order.
    pub headers: Option<Vec<String>>,
}

/// A limiter in a [`Config`]: a custom script, or a built-in under a name of its own with
/// settings of its own.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct LimiterConfig {
    /// The Lua source. Exactly one of `script`, `script_file`, `script_name` and `builtin` is
    /// required.
    pub script: Option<String>,
    /// A file holding the Lua source.
    pub script_file: Option<PathBuf>,
    /// The header names of the script's header values, in order.
    pub headers: Vec<String>,
    /// A Redis URL for this limiter's own pool.
    pub redis_url: Option<String>,
    /// This limiter's log level.
    pub log_level: Option<LogLevel>,
    /// This limiter's failure policy.
    pub on_failure: Option<FailurePolicy>,
    /// This limiter's key failure policy.
    pub on_key_failure: Option<KeyFailure>,
    /// Shadow (dry-run) mode for this limiter.
    pub shadow: Option<bool>,
    /// Whether this limiter keeps a local deny cache.
    pub deny_cache: Option<bool>,
    /// This limiter's header style: `legacy` or `draft10`.
    pub header_style: Option<HeaderStyle>,
    /// This limiter's allow-list, replacing the global one.
    pub allow_cidrs: Option<Vec<String>>,
    /// This limiter's deny-list, replacing the global one.
    pub deny_cidrs: Option<Vec<String>>,
    /// The name of a script of [`Config::scripts`] (or registered with
    /// [`Builder::script`](crate::Builder::script)) to run; its header names are the default
    /// of `headers`.
    pub script_name: Option<String>,
    /// A built-in limiter to run, `fixed_window` or `token_bucket`, as
    /// [`Limiter::fixed_window`](crate::Limiter::fixed_window) and
    /// [`Limiter::token_bucket`](crate::Limiter::token_bucket) do in code: under this
    /// limiter's name, with this table's settings. Its header names stand unless `headers`
    /// names others.
    pub builtin: Option<String>,
    /// Local batches for this limiter's hot keys (a `fixed_window` or `token_bucket`
    /// `builtin`, on Redis), as [`Limiter::local_batches`](crate::Limiter::local_batches).
    pub local_batches: Option<LocalBatchesConfig>,
}

/// The local batches of a [`LimiterConfig`]: [`LocalBatches`](crate::LocalBatches) in a file.
///
/// # Example
///
/// ```
/// use plug_limit::Config;
///
/// let config: Config = serde_json::from_str(r#"{
///     "limiters": {
///         "hot": {
///             "builtin": "fixed_window",
///             "local_batches": { "max": 200, "every_ms": 25 }
///         }
///     }
/// }"#).unwrap();
/// let batches = config.limiters["hot"].local_batches.as_ref().unwrap();
/// assert_eq!((batches.max, batches.every_ms), (200, Some(25)));
/// ```
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct LocalBatchesConfig {
    /// The most units one batch holds (1..=2147483647), required: [`LocalBatches::new`]'s
    /// `max`.
    ///
    /// [`LocalBatches::new`]: crate::LocalBatches::new
    pub max: u32,
    /// The time to aim for between two reservations of one key, in milliseconds (1 to 1000;
    /// 25 when unset): [`LocalBatches::every`](crate::LocalBatches::every).
    pub every_ms: Option<u64>,
}
