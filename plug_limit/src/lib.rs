//! Rate limiting for [Axum](axum), decided atomically in Redis by Lua scripts, so every
//! instance of an application shares one limit.
//!
//! Each decision is one `EVALSHA` round trip on a shared multiplexed connection: the script
//! counts the request, decides `allow` or `deny`, and computes the rate-limit header values in
//! one atomic step. Scripts are loaded by SHA1 and reloaded when Redis forgets them
//! (`NOSCRIPT`), so they survive `SCRIPT FLUSH` and restarts. For one instance, tests and local
//! development, [`PlugLimit::memory`] runs the same built-in limiters in process, with the same
//! decisions and headers.
//!
//! # Quick start
//!
//! ```no_run
//! use axum::{extract::FromRef, routing::get, Router};
//! use plug_limit::{PlugLimit, RateLimited, TokenBucket};
//!
//! #[derive(Clone, FromRef)]
//! struct AppState {
//!     limits: PlugLimit,
//! }
//!
//! // Bursts of 5, at most 20 requests per 10 minutes, per client IP.
//! type Expensive = RateLimited<TokenBucket<20, 600, 5>>;
//!
//! async fn expensive(limited: Expensive) -> (Expensive, &'static str) {
//!     (limited, "done") // returning `limited` sends the x-ratelimit-* headers
//! }
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let pool = deadpool_redis::Config::from_url("redis://127.0.0.1:6379/")
//!         .create_pool(Some(deadpool_redis::Runtime::Tokio1))?;
//!     let app = Router::new()
//!         .route("/expensive", get(expensive))
//!         .with_state(AppState { limits: PlugLimit::redis(pool) });
//!     let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//!     let service = app.into_make_service_with_connect_info::<std::net::SocketAddr>();
//!     axum::serve(listener, service).await?;
//!     Ok(())
//! }
//! ```
//!
//! # Ways to limit
//!
//! - **`#[rate_limit(limiter = "token_bucket", opts = [20, 600, 5])]`** on a handler (feature
//!   `macros`): options checked at compile time, headers added to whatever the handler returns.
//! - **[`RateLimited<L>`]** as a handler argument: an extractor that checks the limit `L`
//!   before the handler runs. Limits are types: [`FixedWindow<LIMIT, WINDOW>`](FixedWindow),
//!   [`TokenBucket<LIMIT, WINDOW, BURST>`](TokenBucket), [`Gcra`], ..., or any [`Limit`]
//!   implementation, for example one naming a custom limiter.
//! - **[`RateLimitLayer<L>`]** on a router or route group: the same check as tower middleware.
//!   The same layer takes limits made at run time: one [`RuntimeLimit`] read from
//!   configuration ([`runtime`](RateLimitLayer::runtime)), or one chosen per request (per-plan
//!   tiers by API key), by a closure ([`resolve`](RateLimitLayer::resolve)) or, awaiting a
//!   cache, by [`resolve_async`](RateLimitLayer::resolve_async).
//! - **[`SendHeadersLayer`]** around a router: the headers of every allowed request reach its
//!   response, even from a handler that does not return its [`RateLimited`].
//! - **[`PlugLimit::check`]**, [`peek`](PlugLimit::peek) and [`reset`](PlugLimit::reset)
//!   outside requests, of a typed limit (`FixedWindow::<3, 3600>`) or a [`RuntimeLimit`]: for
//!   jobs, websockets, quotas and custom middleware; [`reset_key`](PlugLimit::reset_key)
//!   forgives a client a limiter's every options and scope at once.
//!
//! A denied request gets `429 Too Many Requests` (`text/plain`) with the rate-limit headers. A
//! [`Hook`] sees every result, allowed, denied or failed, and may answer each with a response
//! of its own.
//!
//! [`Rules`] let some requests through uncounted (an allow-list of CIDR blocks, a skip
//! predicate for health checks) and refuse others outright (a deny-list, `403 Forbidden`),
//! before any backend call.
//!
//! # Configuration
//!
//! [`PlugLimit::builder`] sets everything: the enabled flag (fixed, or an environment variable
//! read per request), the key prefix, the timeout of a check, the default
//! [`KeyExtractor`](key::KeyExtractor) (see [`key`]), the [`Hook`], the [`FailurePolicy`] and [`LogLevel`], and custom
//! [`Limiter`]s with their own Lua script, header names, pool, key and hook, and the
//! [`HeaderStyle`] of the rate-limit headers (the `x-ratelimit-*` ones, or the IETF draft's
//! `RateLimit-Policy` and `RateLimit`). Scripts can be registered once and shared by limiters
//! ([`Script`]); the [`Store`] can be a deadpool pool, a Redis Cluster pool, a connection the
//! application holds, or memory. The serializable part is a [`Config`]. Invalid settings are
//! refused by [`Builder::build`], with the field and the rule.
//!
//! # Failures
//!
//! A check that cannot decide (Redis down or slower than the timeout, a script error, a reply
//! out of contract, a key that cannot be extracted) is logged and then follows the limiter's
//! [`FailurePolicy`]: by default the request passes without headers ([`FailurePolicy::Open`]);
//! [`FailurePolicy::Closed`] answers `503`. Nothing on these paths panics, and no check lasts
//! longer than the timeout.
//!
//! # Redis scripts
//!
//! The built-in scripts live in `lua/` (one file per limiter). A script gets the request's
//! namespaced keys as `KEYS` and the limit's options as `ARGV`, and answers
//! `{"allow"|"deny", {header values...}, extra...}`. Header values are sent under the names the
//! limiter declares, in order; a `{name, value}` pair sets its own name; extra values reach a
//! [`Hook`] through [`Outcome::extra`]. `"block"` is accepted as the older spelling
//! of `"deny"`; any other reply is an error, never a silent decision. Every key a built-in
//! writes has a TTL, and each touches only `KEYS[1]`, so they run on Redis Cluster.
//!
//! | limiter | limit type | opts (`ARGV`) |
//! |---|---|---|
//! | `fixed_window` | [`FixedWindow<LIMIT, WINDOW>`](FixedWindow) | `[limit, window]` |
//! | `token_bucket` | [`TokenBucket<LIMIT, WINDOW, BURST>`](TokenBucket) | `[limit, window, burst]` |
//! | `sliding_window` | [`SlidingWindow<LIMIT, WINDOW>`](SlidingWindow) | `[limit, window]` |
//! | `sliding_log` | [`SlidingLog<LIMIT, WINDOW>`](SlidingLog) | `[limit, window]` |
//! | `leaky_bucket` | [`LeakyBucket<LIMIT, WINDOW>`](LeakyBucket) | `[limit, window]` |
//! | `gcra` | [`Gcra<LIMIT, WINDOW, BURST>`](Gcra) | `[limit, window, burst]` |
//! | `multi_window` | an `impl Limit` | `["<limit>/<window>", ...]` |
//! | `calendar_quota` | [`DailyQuota<LIMIT, UTC_OFFSET_MINUTES>`](DailyQuota), [`WeeklyQuota`], [`MonthlyQuota`] | `[limit, period, utc_offset_minutes]` |
//! | `concurrency` | [`Concurrency<LIMIT, LEASE>`](Concurrency) | `[limit, lease]` |
//!
//! `window` and `lease` are in seconds; `period` is `"day"`, `"week"` or `"month"`. The
//! built-ins also take an optional `cost` and `now_ms` after their options (see
//! [`algorithms`], which compares them and shows what each admits of the same traffic).
//!
//! # Feature flags
//!
//! | name | description | default? |
//! |---|---|---|
//! | `macros` | the `#[rate_limit]` handler attribute | yes |
//! | `cluster` | Redis Cluster: a cluster pool as the [`Store`] of [`PlugLimit::builder`] | no |
//! | `sentinel` | Redis Sentinel: a Sentinel pool as the [`Store`] of [`PlugLimit::builder`], its primary found again after a failover | no |
//! | `metrics` | decisions, failures, fallbacks, breaker state, script reloads and latency through the `metrics` crate (module `metrics`) | no |
//! | `tonic` | the default key (and every key or rule that reads the TCP peer) finds the peer address tonic's server gives a call, for a [`RateLimitLayer`] around a tonic service (see the [guide](guide::limiting#grpc-one-budget-with-tonic)) | no |
#![cfg_attr(docsrs, feature(doc_cfg))]

// The public face: the handle (its constructors first), the ways to limit, and what a denied
// request gets.
mod build;
mod handle;
mod hook;
mod rejection;
mod web;

// What users configure and name.
mod clock;
mod config;
mod error;
pub mod key;
mod limit;
mod lua;
mod outcome;
pub mod test;
mod zone;

// The pipeline below the handle: one decision module, the backends, the algorithms.
mod algorithm;
mod backend;
mod engine;
mod sync;
mod telemetry;
#[cfg(feature = "metrics")]
mod text;

#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub mod metrics;

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;

/// The guide: one way per job, and a chapter per subject.
#[doc = include_str!("../docs/guide.md")]
pub mod guide {
    #[doc = include_str!("../docs/guide/limiting.md")]
    pub mod limiting {}
    #[doc = include_str!("../docs/guide/limiters.md")]
    pub mod limiters {}
    #[doc = include_str!("../docs/guide/configuration.md")]
    pub mod configuration {}
    #[doc = include_str!("../docs/guide/keys.md")]
    pub mod keys {}
    #[doc = include_str!("../docs/guide/responses.md")]
    pub mod responses {}
    #[doc = include_str!("../docs/guide/rules.md")]
    pub mod rules {}
    #[doc = include_str!("../docs/guide/failures.md")]
    pub mod failures {}
    #[doc = include_str!("../docs/guide/regions.md")]
    #[doc = include_str!("../docs/regions.svg")]
    pub mod regions {}
    #[doc = include_str!("../docs/guide/custom_limiters.md")]
    pub mod custom_limiters {}
    #[doc = include_str!("../docs/guide/operations.md")]
    pub mod operations {}
    #[doc = include_str!("../docs/guide/migrating.md")]
    pub mod migrating {}
}

/// The algorithm catalogue: what each built-in limiter does, what it costs, and how to choose.
#[doc = include_str!("../docs/algorithms.md")]
#[doc = include_str!("../docs/algorithms.svg")]
pub mod algorithms {}

pub use self::backend::EvictionPolicy;
pub use self::build::{Builder, Config, Limiter, Script, Store};
pub use self::clock::ManualClock;
pub use self::config::{
    CircuitBreaker, Enabled, FailurePolicy, KeyFailure, LocalBatches, LogLevel, Rules,
};
pub use self::error::{BuildError, Error, ReplyError};
pub use self::handle::PlugLimit;
pub use self::hook::{Action, Check, Hook};
pub use self::limit::{
    Concurrency, DailyQuota, FixedWindow, Gcra, LeakyBucket, Limit, Limits, MonthlyQuota, Opt,
    RuntimeLimit, SlidingLog, SlidingWindow, TokenBucket, WeeklyQuota,
};
pub use self::outcome::{HeaderStyle, Outcome, Usage};
pub use self::rejection::RateLimitRejection;
pub use self::web::RateLimited;
pub use self::web::{RateLimit, RateLimitLayer};
pub use self::web::{SendHeaders, SendHeadersLayer};

#[cfg(feature = "macros")]
pub use plug_limit_macros::rate_limit;

/// The Redis client library, as used by the pool: build `redis::Value`s for
/// [`Outcome::extra`] and errors without a version mismatch.
pub use deadpool_redis::redis;
