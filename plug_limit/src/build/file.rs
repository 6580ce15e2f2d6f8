//! Configuration that can be deserialized, e.g. from a TOML or JSON file.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::{Limiter, Script};
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
    /// The prefix of every Redis key (default `plug_limit`; 1 to 64 bytes).
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
    /// Limiters by name: custom scripts, and built-ins under names of their own, each a table
    /// of these keys (all optional but the source, of which exactly one is required):
    ///
    /// | key | what it sets, as in code |
    /// |---|---|
    /// | `script`, `script_file`, `script_name`, `builtin` | the source: [`Limiter::script`], [`script_file`](Limiter::script_file), [`script_named`](Limiter::script_named), or `"fixed_window"` / `"token_bucket"` ([`Limiter::fixed_window`], [`Limiter::token_bucket`]) under this name |
    /// | `headers` | [`Limiter::headers`]: the names of the script's header values (a shared script's or a built-in's stand unless given) |
    /// | `redis_url` | [`Limiter::pool`]: a pool of its own on that Redis |
    /// | `log_level`, `on_failure`, `on_key_failure`, `shadow`, `deny_cache`, `header_style` | the same [`Limiter`] settings |
    /// | `allow_cidrs`, `deny_cidrs` | [`Limiter::rules`]: lists replacing the global ones |
    /// | `local_batches` | [`Limiter::local_batches`]: `{ "max": 200, "every_ms": 25, "queue": 1024 }` (`every_ms` 1 to 1000, 25 when unset; `queue` 1 to 1000000, 1024 when unset) |
    ///
    /// A table that breaks a rule is refused by [`Builder::build`](crate::Builder::build),
    /// naming the limiter, the key and the rule (`limiters.hot.local_batches.every_ms`).
    pub limiters: BTreeMap<String, Limiter>,
    /// The rate-limit header fields of every limiter: `legacy` (default) or `draft10` (see
    /// [`HeaderStyle`]).
    pub header_style: Option<HeaderStyle>,
    /// The client's address behind your proxies, believed only from them:
    /// `{ "source": "rightmost_x_forwarded_for", "trusted_proxies": ["10.0.0.0/8"] }` (see
    /// [`key::ClientIp`](crate::key::ClientIp)). It becomes the default key and the address
    /// the lists below match ([`Rules::ip_from`](crate::Rules::ip_from)).
    pub client_ip: Option<crate::key::ClientIp>,
    /// Clients let through uncounted: CIDR blocks or addresses (see
    /// [`Rules::allow_cidrs`](crate::Rules::allow_cidrs)).
    pub allow_cidrs: Option<Vec<String>>,
    /// Clients refused with `403 Forbidden`: CIDR blocks or addresses (see
    /// [`Rules::deny_cidrs`](crate::Rules::deny_cidrs)).
    pub deny_cidrs: Option<Vec<String>>,
    /// Lua scripts by name, for limiters to share with `script_name` (see [`Script`]): each a
    /// table of exactly one of `script` and `script_file`, and optional `headers`, the default
    /// header names of the limiters that run it.
    pub scripts: BTreeMap<String, Script>,
}
