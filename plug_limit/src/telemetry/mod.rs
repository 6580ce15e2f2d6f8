//! What decisions tell the outside: a `tracing` span per decision, always, and with the
//! `metrics` feature the counters, gauges and histogram of [`crate::metrics`].
//!
//! The deciding code calls one small function per event (a decision, a failure, a fallback, a
//! breaker's transition, a script reload); without the feature the metric half of each is
//! compiled out and only the span's fields are recorded.

#[cfg(feature = "metrics")]
mod record;

use std::time::Instant;

use tracing::Span;
use tracing::field::Empty;
use tracing::level_filters::LevelFilter;
use tracing::span::EnteredSpan;

use crate::error::Error;
use crate::limit::Charge;
use crate::outcome::Outcome;

/// How a decided check came out, as the `decision` label and span field spell it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DecisionLabel {
    Allowed,
    Denied,
    /// Denied by the limit, let through by shadow mode.
    ShadowDenied,
    /// Let through uncounted by the rules (a skip, the allow-list).
    Skipped,
    /// Refused by the rules' deny-list.
    Forbidden,
}

impl DecisionLabel {
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            Self::Allowed => "allowed",
            Self::Denied => "denied",
            Self::ShadowDenied => "shadow_denied",
            Self::Skipped => "skipped",
            Self::Forbidden => "forbidden",
        }
    }
}

/// The `cause` of a failed check: one word per [`Error`] variant.
pub(crate) const fn cause(error: &Error) -> &'static str {
    match error {
        Error::Pool(_) => "pool",
        Error::Redis(_) => "redis",
        Error::CircuitOpen(_) => "circuit_open",
        Error::Timeout(_) => "timeout",
        Error::Reply(_) => "reply",
        Error::Input(_) => "input",
        Error::NotBuiltIn(_) => "not_built_in",
        Error::UnknownLimiter(_) => "unknown_limiter",
    }
}

/// The `limiter` label of a check naming no registered limiter.
pub(crate) const UNKNOWN_LIMITER: &str = "unknown";

/// The `cause` of a request whose key could not be extracted.
pub(crate) const KEY_CAUSE: &str = "key";

/// What a [`crate::PlugLimit`] keeps for its metrics: the metric keys of each (limiter, scope)
/// it has checked, so a decision clones them instead of building its labels.
#[derive(Debug, Default)]
pub(crate) struct Telemetry {
    #[cfg(feature = "metrics")]
    series: record::SeriesCache,
}

/// A Redis backend's labels: the `pool` of the backend (its breakers' and its eviction
/// gauge's), and the `node` a breaker covers.
#[derive(Debug, Clone)]
pub(crate) struct BreakerLabel {
    #[cfg(feature = "metrics")]
    pool: metrics::SharedString,
    /// Kept without the feature too: the logs name the pool.
    #[cfg(not(feature = "metrics"))]
    pool: Box<str>,
    /// A cluster master's address; empty for a single Redis, and for a cluster's commands that
    /// no one master serves.
    node: Box<str>,
}

impl BreakerLabel {
    /// The breaker of the `PlugLimit`'s own backend.
    pub(crate) fn shared() -> Self {
        Self::pool("default")
    }

    /// The breaker of a backend named `name` (a limiter's own pool).
    pub(crate) fn pool(name: &str) -> Self {
        Self {
            pool: name.to_owned().into(),
            node: Box::default(),
        }
    }

    /// The `pool` label: `default`, or the name of the limiter whose own pool it is.
    pub(crate) fn pool_name(&self) -> &str {
        &self.pool
    }

    /// The breaker of the cluster master at `address`, in the same pool.
    #[cfg(feature = "cluster")]
    #[must_use]
    pub(crate) fn node(&self, address: &str) -> Self {
        Self {
            pool: self.pool.clone(),
            node: address.into(),
        }
    }

    /// The node's address; empty when the breaker covers no one node.
    pub(crate) fn address(&self) -> &str {
        &self.node
    }

    /// The breaker starts closed.
    #[cfg_attr(not(feature = "metrics"), allow(clippy::unused_self))]
    pub(crate) fn created(&self) {
        #[cfg(feature = "metrics")]
        record::breaker(&self.pool, &self.node, false, false);
    }

    /// The breaker opened (tripped, or a probe failed).
    #[cfg_attr(not(feature = "metrics"), allow(clippy::unused_self))]
    pub(crate) fn opened(&self) {
        #[cfg(feature = "metrics")]
        record::breaker(&self.pool, &self.node, true, true);
    }

    /// The breaker is gone while open: its gauge reads 0, with no transition counted.
    #[cfg(feature = "cluster")]
    #[cfg_attr(not(feature = "metrics"), allow(clippy::unused_self))]
    pub(crate) fn retired(&self) {
        #[cfg(feature = "metrics")]
        record::breaker(&self.pool, &self.node, false, false);
    }

    /// The breaker closed: Redis answers again.
    #[cfg_attr(not(feature = "metrics"), allow(clippy::unused_self))]
    pub(crate) fn closed(&self) {
        #[cfg(feature = "metrics")]
        record::breaker(&self.pool, &self.node, false, true);
    }
}

/// The backend's Redis may evict keys (`evicts`), or keeps them (`maxmemory-policy
/// noeviction`): the pool's gauge.
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub(crate) fn redis_evicts(pool: &BreakerLabel, evicts: bool) {
    #[cfg(feature = "metrics")]
    record::redis_evicts(&pool.pool, evicts);
}

/// Redis had forgotten `limiter`'s script (`NOSCRIPT`): it is sent again with its body.
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub(crate) fn script_reloaded(limiter: &str) {
    #[cfg(feature = "metrics")]
    record::script_reloaded(limiter);
}

/// One check being decided: its span, and with the `metrics` feature its labels and start.
///
/// Every check that reaches a limiter ends in exactly one [`decided`](Self::decided) or
/// [`undecided`](Self::undecided): each records one latency sample.
pub(crate) struct Watch<'a> {
    /// `None` when nothing would record it (see [`span`]): a check then makes, enters, records
    /// into and drops no span at all.
    span: Option<Span>,
    #[cfg(feature = "metrics")]
    metrics: Option<record::Check<'a>>,
    #[cfg(not(feature = "metrics"))]
    telemetry: std::marker::PhantomData<&'a Telemetry>,
}

impl<'a> Watch<'a> {
    /// A request's check of `limiter` within `scope`.
    #[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
    #[inline]
    pub(crate) fn request(telemetry: &'a Telemetry, limiter: &str, scope: &str) -> Self {
        Self {
            span: span(limiter, scope),
            #[cfg(feature = "metrics")]
            metrics: Some(record::Check::new(telemetry.series.get(limiter, scope))),
            #[cfg(not(feature = "metrics"))]
            telemetry: std::marker::PhantomData,
        }
    }

    /// A programmatic check ([`crate::PlugLimit::check`]); a peek (`cost` 0) decides nothing,
    /// nor does a settlement (a refund or forced charge of a request already decided), so
    /// neither is watched.
    #[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
    pub(crate) fn call(telemetry: &'a Telemetry, limiter: &str, scope: &str, cost: Charge) -> Self {
        if !matches!(cost, Charge::Take(1..)) {
            return Self {
                span: None,
                #[cfg(feature = "metrics")]
                metrics: None,
                #[cfg(not(feature = "metrics"))]
                telemetry: std::marker::PhantomData,
            };
        }
        Self::request(telemetry, limiter, scope)
    }

    /// When the check began, if its metrics read the clock for it (the `metrics` feature): a
    /// later use of the same instant needs no second read.
    #[cfg_attr(not(feature = "metrics"), allow(clippy::unused_self))]
    pub(crate) fn started(&self) -> Option<Instant> {
        #[cfg(feature = "metrics")]
        return self.metrics.as_ref().map(record::Check::started);
        #[cfg(not(feature = "metrics"))]
        None
    }

    /// The check's span, to instrument its wait on Redis with; `None` when nothing would
    /// record it.
    pub(crate) fn span(&self) -> Option<&Span> {
        self.span.as_ref()
    }

    /// Records `value` as the span's `field`, when there is a span.
    #[inline]
    fn record(&self, field: &'static str, value: &'static str) {
        if let Some(span) = &self.span {
            span.record(field, value);
        }
    }

    /// The check's span entered, until the guard drops; `None` when nothing would record it,
    /// which spares a disabled span's clone, enter, exit and drop on every check.
    #[inline(always)]
    pub(crate) fn entered(&self) -> Option<EnteredSpan> {
        self.span.as_ref().map(|span| span.clone().entered())
    }

    /// The check goes to the backend named `backend` (`redis` or `memory`).
    pub(crate) fn dispatched(&self, backend: &'static str) {
        self.record("backend", backend);
    }

    /// The local deny cache answered: a denial that cost the backend nothing.
    pub(crate) fn deny_cache_hit(&self) {
        self.record("backend", "deny_cache");
        #[cfg(feature = "metrics")]
        if let Some(check) = &self.metrics {
            check.deny_cache_hit();
        }
    }

    /// The backend, or the key extraction (`cause` [`KEY_CAUSE`]), failed with `cause`.
    pub(crate) fn failed(&self, cause: &'static str) {
        self.record("cause", cause);
        #[cfg(feature = "metrics")]
        if let Some(check) = &self.metrics {
            check.failed(cause);
        }
    }

    /// The memory fallback of [`crate::FailurePolicy::Memory`], or a batch's recent share
    /// ([`crate::FailurePolicy::LocalShare`]), decides in the backend's stead.
    pub(crate) fn fell_back(&self) {
        self.record("backend", "fallback");
        #[cfg(feature = "metrics")]
        if let Some(check) = &self.metrics {
            check.fell_back();
        }
    }

    /// The check ended with `label`.
    pub(crate) fn decided(&self, label: DecisionLabel) {
        self.record("decision", label.as_str());
        #[cfg(feature = "metrics")]
        if let Some(check) = &self.metrics {
            check.decided(label);
        }
    }

    /// The check ended without a decision (its failure policy passed or refused it).
    pub(crate) fn undecided(&self) {
        self.record("decision", "failed");
        #[cfg(feature = "metrics")]
        if let Some(check) = &self.metrics {
            check.ended();
        }
    }

    /// A programmatic check's result: decided by its outcome, or failed.
    pub(crate) fn checked(&self, result: &Result<Outcome, Error>) {
        match result {
            Ok(outcome) if outcome.is_allowed() => self.decided(DecisionLabel::Allowed),
            Ok(_) => self.decided(DecisionLabel::Denied),
            Err(error) => {
                self.failed(cause(error));
                self.undecided();
            }
        }
    }
}

/// The span of one decision. At `DEBUG`, so that a subscriber at the usual `INFO` leaves it
/// disabled: then it costs a level check and allocates nothing.
///
/// A disabled span still records its fields for `log`, looks up each field it is given by
/// name, and checks the `log` level each time it is entered (`tracing`'s `log` feature, which
/// axum's default features turn on, prints spans that no subscriber takes). When no subscriber
/// takes it and no `log` logger would print it either, there is none (`None`), which does none
/// of that; when nothing anywhere is enabled at `DEBUG`, it is not even made. The `log` level
/// is read once, as the check starts: a level raised while a check runs shows from the next
/// check on.
#[inline(always)]
fn span(limiter: &str, scope: &str) -> Option<Span> {
    // Inline to here: with nothing enabled at `DEBUG` (most of the time), no call is made.
    let log_quiet = log::max_level() < log::LevelFilter::Debug;
    if log_quiet && LevelFilter::current() < LevelFilter::DEBUG {
        return None;
    }
    made_span(limiter, scope, log_quiet)
}

/// [`span`] once something may take it.
fn made_span(limiter: &str, scope: &str, log_quiet: bool) -> Option<Span> {
    let span = tracing::debug_span!(
        target: "plug_limit::decide",
        "plug_limit.decide",
        limiter,
        scope,
        decision = Empty,
        backend = Empty,
        cause = Empty,
    );
    if log_quiet && span.is_disabled() {
        return None;
    }
    Some(span)
}
