//! What happens to a request when its limiter cannot decide.

use serde::Deserialize;

/// What a request gets when its limit cannot be checked: Redis is down or slow, the circuit
/// breaker is open, the script failed or answered out of contract. (A key that cannot be
/// extracted is the client's doing and has its own policy, [`KeyFailure`](crate::KeyFailure).)
///
/// The error is logged first, at the configured [`LogLevel`](crate::LogLevel): at most one
/// line a second per limiter, which counts the failures it stood for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FailurePolicy {
    /// Let the request through with no rate-limit headers (the default): an outage of the
    /// limiter never becomes an outage of the application.
    #[default]
    Open,
    /// Refuse the request with `503 Service Unavailable`: for routes where an unchecked request
    /// costs more than a refused one (logins, expensive exports).
    Closed,
    /// Decide in this process's memory instead, by the same rules as the built-in script: the
    /// limit then holds per instance rather than across instances, until Redis answers again.
    /// Built-in limiters only.
    Memory,
    /// Decide in this process by its recent share of the limit, for a limiter with
    /// [local batches](crate::LocalBatches): while Redis cannot be reached, an instance
    /// admits a key's requests at the rate its batches spent units over the last seconds
    /// (decayed over 10 s, frozen as the cut begins, never above the limit's own rate, at most
    /// a timeout and `every` of it saved up) and denies the rest with 429. Instances still
    /// reaching Redis share the whole limit as before, so while some are cut off the limit is
    /// passed by at most the cut instances' shares, and while all are it holds at about the
    /// limit. A key this instance spent nothing of recently is denied. Requests a batch does not take (other costs, `settle`,
    /// `count_if`) are refused with 503, as under `Closed`. Set on a limiter
    /// ([`Limiter::on_failure`](crate::Limiter::on_failure)) with local batches: `build`
    /// refuses it elsewhere.
    LocalShare,
}
