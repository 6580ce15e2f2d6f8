//! The metrics a [`PlugLimit`](crate::PlugLimit) records through the `metrics`
//! crate (feature `metrics`): their names and labels are a stable contract.
//!
//! Install any `metrics` recorder (a Prometheus exporter, for instance) and every check is
//! counted. Nothing is recorded before a recorder is installed, and the library installs none.
//! [`describe`] gives the recorder each metric's help text and unit.
//!
//! | metric | kind | labels | what it counts |
//! |---|---|---|---|
//! | `plug_limit_decisions_total` | counter | `limiter`, `scope`, `decision` | decided checks: `decision` is `allowed`, `denied` or `shadow_denied` (denied by the limit, let through by shadow mode); a denial answered by the deny cache counts as `denied`; requests the `Rules` settle are `skipped` (a skip, the allow-list) or `forbidden` (the deny-list) |
//! | `plug_limit_deny_cache_hits_total` | counter | `limiter`, `scope` | the denials of the line above that the local deny cache answered, without the backend |
//! | `plug_limit_failures_total` | counter | `limiter`, `scope`, `cause` | checks that could not decide: `cause` is `timeout`, `pool`, `redis`, `circuit_open`, `reply`, `input`, `not_built_in`, `unknown_limiter` (one per [`Error`](crate::Error) variant) or `key` (no key could be extracted, and [`KeyFailure`](crate::KeyFailure) passed or refused the request) |
//! | `plug_limit_fallback_total` | counter | `limiter`, `scope` | failed checks that the memory fallback of [`FailurePolicy::Memory`](crate::FailurePolicy::Memory), or a local batch's recent share under [`FailurePolicy::LocalShare`](crate::FailurePolicy::LocalShare), decided (each is also in the two counters above) |
//! | `plug_limit_decision_seconds` | histogram | `limiter`, `scope` | how long each check took, decided or failed: one sample per check |
//! | `plug_limit_breaker_open` | gauge | `pool`, `node` | 1 while a circuit breaker of a Redis backend is open, 0 while closed |
//! | `plug_limit_breaker_transitions_total` | counter | `pool`, `node`, `state` | the breaker's changes: `state` is `open` or `closed` |
//! | `plug_limit_script_reloads_total` | counter | `limiter` | scripts sent again with their body (`EVAL`) after Redis answered `NOSCRIPT` |
//! | `plug_limit_redis_evicts` | gauge | `pool` | 1 when the `maxmemory-policy` of a Redis backend's server may evict keys (anything but `noeviction`: an evicted counter admits requests past its limit), 0 for `noeviction`; read once, after the backend first connects (see [`PlugLimit::redis_eviction`](crate::PlugLimit::redis_eviction)), absent until then and when the server refuses to say |
//!
//! The labels:
//! - `limiter`: the limiter's registered name (`fixed_window`, or a custom limiter's).
//! - `scope`: the route's matched path (`/users/{id}`), the limit's own scope
//!   ([`Limit::SCOPE`](crate::Limit::SCOPE), `#[rate_limit(scope = ..)]`), `*` for a request no
//!   route matched, or for [`PlugLimit::check`](crate::PlugLimit::check) and
//!   [`PlugLimit::check_all`](crate::PlugLimit::check_all) the scope of the limit (empty when it
//!   has none). Never the client's key: a key may be a
//!   credential, and one series per client would swamp any metrics store.
//! - `pool`: `default` for the backend of the [`PlugLimit`](crate::PlugLimit), a limiter's
//!   name for its own pool ([`Limiter::pool`](crate::Limiter::pool)).
//! - `node`: on Redis Cluster, the address of the master whose breaker it is (`10.0.0.7:6379`),
//!   as the cluster announces it: each master has a breaker of its own. Empty for a single
//!   Redis, and for a cluster's breaker of the commands no one master serves (a script without
//!   keys, `reset_all`).
//!
//! Requests and [`PlugLimit::check`](crate::PlugLimit::check) are counted alike, and each limit
//! of a stack as a check of its own: on a denial, the limit that denied counts `denied` and
//! the others, which gave back what they took or never ran, decided nothing (a latency sample
//! without a decision). [`PlugLimit::peek`](crate::PlugLimit::peek) and checks while the
//! limits are disabled are not counted.
//!
//! Every check also opens a `tracing` span (with or without this feature), named
//! `plug_limit.decide`, target `plug_limit::decide`, at `DEBUG`, with the fields `limiter`,
//! `scope`, `decision` (as above, or `failed`), `backend` (`redis`, `memory`, `fallback` or
//! `deny_cache`) and `cause` (as above, on failure).

/// Decided checks, by `limiter`, `scope` and `decision`.
pub(crate) const DECISIONS: &str = "plug_limit_decisions_total";
/// Denials answered by the local deny cache, by `limiter` and `scope`.
pub(crate) const DENY_CACHE_HITS: &str = "plug_limit_deny_cache_hits_total";
/// Checks that could not decide, by `limiter`, `scope` and `cause`.
pub(crate) const FAILURES: &str = "plug_limit_failures_total";
/// Failed checks decided by the memory fallback, by `limiter` and `scope`.
pub(crate) const FALLBACKS: &str = "plug_limit_fallback_total";
/// The duration of each check in seconds, by `limiter` and `scope`.
pub(crate) const DECISION_SECONDS: &str = "plug_limit_decision_seconds";
/// Whether a Redis backend's circuit breaker is open (1) or closed (0), by `pool`.
pub(crate) const BREAKER_OPEN: &str = "plug_limit_breaker_open";
/// The circuit breakers' transitions, by `pool` and `state`.
pub(crate) const BREAKER_TRANSITIONS: &str = "plug_limit_breaker_transitions_total";
/// Scripts reloaded after `NOSCRIPT`, by `limiter`.
pub(crate) const SCRIPT_RELOADS: &str = "plug_limit_script_reloads_total";
/// Whether a Redis backend's server may evict keys (1) or not (0), by `pool`.
pub(crate) const REDIS_EVICTS: &str = "plug_limit_redis_evicts";

/// Gives the installed recorder the help text and unit of every metric of the table above.
/// Call it once, after installing the recorder; the metrics are recorded whether it is called
/// or not.
pub fn describe() {
    use ::metrics::{Unit, describe_counter, describe_gauge, describe_histogram};

    describe_counter!(DECISIONS, Unit::Count, "Rate limit checks decided");
    describe_counter!(
        DENY_CACHE_HITS,
        Unit::Count,
        "Rate limit denials answered by the local deny cache"
    );
    describe_counter!(
        FAILURES,
        Unit::Count,
        "Rate limit checks that could not decide"
    );
    describe_counter!(
        FALLBACKS,
        Unit::Count,
        "Failed rate limit checks decided by the memory fallback"
    );
    describe_histogram!(
        DECISION_SECONDS,
        Unit::Seconds,
        "Duration of rate limit checks"
    );
    describe_gauge!(
        BREAKER_OPEN,
        "Whether the circuit breaker of a Redis backend is open (1) or closed (0)"
    );
    describe_counter!(
        BREAKER_TRANSITIONS,
        Unit::Count,
        "Circuit breaker transitions to open or closed"
    );
    describe_counter!(
        SCRIPT_RELOADS,
        Unit::Count,
        "Limiter scripts reloaded after Redis answered NOSCRIPT"
    );
    describe_gauge!(
        REDIS_EVICTS,
        "Whether the maxmemory-policy of a Redis backend may evict rate-limit counters (1) or not (0)"
    );
}
