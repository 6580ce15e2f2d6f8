//! The `metrics` half of the telemetry: what each event adds to which metric.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Instant;

use metrics::SharedString;

use super::Verdict;
use crate::metrics::{
    BREAKER_OPEN, BREAKER_TRANSITIONS, DECISION_SECONDS, DECISIONS, DENY_CACHE_HITS, FAILURES,
    FALLBACKS, SCRIPT_RELOADS,
};

/// The most label texts an [`Interner`] keeps; past them a label is allocated per use. Scopes
/// are route templates and limiter names are registered, so a program rarely has more.
const MAX_INTERNED: usize = 1024;

/// Label text shared once and cloned after: a clone of an `Arc`, never a `String` per check.
#[derive(Debug, Default)]
pub(super) struct Interner(RwLock<HashMap<Box<str>, SharedString>>);

impl Interner {
    pub(super) fn get(&self, text: &str) -> SharedString {
        if let Some(shared) = self
            .0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(text)
        {
            return shared.clone();
        }
        let shared = SharedString::from(Arc::<str>::from(text));
        let mut map = self.0.write().unwrap_or_else(PoisonError::into_inner);
        if map.len() >= MAX_INTERNED {
            return shared;
        }
        map.entry(text.into()).or_insert(shared).clone()
    }
}

/// The labels and start of one check.
pub(super) struct Check {
    limiter: SharedString,
    scope: SharedString,
    started: Instant,
}

impl Check {
    pub(super) fn new(limiter: SharedString, scope: SharedString) -> Self {
        Self {
            limiter,
            scope,
            started: Instant::now(),
        }
    }

    pub(super) fn deny_cache_hit(&self) {
        metrics::counter!(DENY_CACHE_HITS, "limiter" => self.limiter.clone(), "scope" => self.scope.clone())
            .increment(1);
    }

    pub(super) fn failed(&self, cause: &'static str) {
        metrics::counter!(FAILURES, "limiter" => self.limiter.clone(), "scope" => self.scope.clone(), "cause" => cause)
            .increment(1);
    }

    pub(super) fn fell_back(&self) {
        metrics::counter!(FALLBACKS, "limiter" => self.limiter.clone(), "scope" => self.scope.clone())
            .increment(1);
    }

    pub(super) fn decided(&self, verdict: Verdict) {
        metrics::counter!(DECISIONS, "limiter" => self.limiter.clone(), "scope" => self.scope.clone(), "decision" => verdict.as_str())
            .increment(1);
        self.ended();
    }

    /// One latency sample: the check is over.
    pub(super) fn ended(&self) {
        metrics::histogram!(DECISION_SECONDS, "limiter" => self.limiter.clone(), "scope" => self.scope.clone())
            .record(self.started.elapsed().as_secs_f64());
    }
}

/// A breaker of backend `pool` is `open` (or closed); `transition` when it just changed.
pub(super) fn breaker(pool: &SharedString, open: bool, transition: bool) {
    metrics::gauge!(BREAKER_OPEN, "pool" => pool.clone()).set(if open { 1.0 } else { 0.0 });
    if transition {
        let state = if open { "open" } else { "closed" };
        metrics::counter!(BREAKER_TRANSITIONS, "pool" => pool.clone(), "state" => state)
            .increment(1);
    }
}

pub(super) fn script_reloaded(limiter: &str) {
    metrics::counter!(SCRIPT_RELOADS, "limiter" => limiter.to_owned()).increment(1);
}
