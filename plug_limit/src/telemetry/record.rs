//! The `metrics` half of the telemetry: what each event adds to which metric.

use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Instant;

use hashbrown::HashTable;
use metrics::{Key, Label, Level, Metadata, SharedString};

use super::Verdict;
use crate::metrics::{
    BREAKER_OPEN, BREAKER_TRANSITIONS, DECISION_SECONDS, DECISIONS, DENY_CACHE_HITS, FAILURES,
    FALLBACKS, SCRIPT_RELOADS,
};

/// What the `metrics` macros would give a recorder for these metrics.
static METADATA: Metadata<'static> =
    Metadata::new(module_path!(), Level::INFO, Some(module_path!()));

/// The most (limiter, scope) pairs a [`SeriesCache`] keeps; past them a check builds its keys
/// afresh. Scopes are route templates and limiters are registered, so a program rarely has
/// more.
const MAX_CACHED: usize = 1024;

/// The metric keys of one (limiter, scope): built once, so a check neither allocates its
/// labels nor has the recorder hash them again (a [`Key`] keeps its hash).
#[derive(Debug)]
pub(super) struct Series {
    limiter: SharedString,
    scope: SharedString,
    allowed: Key,
    denied: Key,
    shadow_denied: Key,
    skipped: Key,
    forbidden: Key,
    deny_cache_hits: Key,
    fallbacks: Key,
    seconds: Key,
}

impl Series {
    fn new(limiter: &str, scope: &str) -> Self {
        let limiter = SharedString::from(limiter.to_owned());
        let scope = SharedString::from(scope.to_owned());
        let key = |name: &'static str, decision: Option<Verdict>| {
            let mut labels = vec![
                Label::new("limiter", limiter.clone()),
                Label::new("scope", scope.clone()),
            ];
            labels.extend(decision.map(|verdict| Label::new("decision", verdict.as_str())));
            Key::from_parts(name, labels)
        };
        Self {
            allowed: key(DECISIONS, Some(Verdict::Allowed)),
            denied: key(DECISIONS, Some(Verdict::Denied)),
            shadow_denied: key(DECISIONS, Some(Verdict::ShadowDenied)),
            skipped: key(DECISIONS, Some(Verdict::Skipped)),
            forbidden: key(DECISIONS, Some(Verdict::Forbidden)),
            deny_cache_hits: key(DENY_CACHE_HITS, None),
            fallbacks: key(FALLBACKS, None),
            seconds: key(DECISION_SECONDS, None),
            limiter,
            scope,
        }
    }
}

/// The [`Series`] of every (limiter, scope) checked so far.
#[derive(Debug, Default)]
pub(super) struct SeriesCache {
    table: RwLock<HashTable<(Box<str>, Box<str>, Arc<Series>)>>,
    hasher: RandomState,
}

impl SeriesCache {
    pub(super) fn get(&self, limiter: &str, scope: &str) -> Arc<Series> {
        let hash = self.hasher.hash_one((limiter, scope));
        let is = |(l, s, _): &(Box<str>, Box<str>, Arc<Series>)| **l == *limiter && **s == *scope;
        if let Some((_, _, series)) = self
            .table
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .find(hash, is)
        {
            return Arc::clone(series);
        }
        let mut table = self.table.write().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, _, series)) = table.find(hash, is) {
            return Arc::clone(series);
        }
        let series = Arc::new(Series::new(limiter, scope));
        if table.len() < MAX_CACHED {
            table.insert_unique(
                hash,
                (limiter.into(), scope.into(), Arc::clone(&series)),
                |(l, s, _)| self.hasher.hash_one((&**l, &**s)),
            );
        }
        series
    }
}

/// The series and start of one check.
pub(super) struct Check {
    series: Arc<Series>,
    started: Instant,
}

impl Check {
    pub(super) fn new(series: Arc<Series>) -> Self {
        Self {
            series,
            started: Instant::now(),
        }
    }

    pub(super) fn deny_cache_hit(&self) {
        count(&self.series.deny_cache_hits);
    }

    pub(super) fn failed(&self, cause: &'static str) {
        // Built per failure: failures are few, and their causes many.
        let series = &self.series;
        metrics::counter!(FAILURES, "limiter" => series.limiter.clone(), "scope" => series.scope.clone(), "cause" => cause)
            .increment(1);
    }

    pub(super) fn fell_back(&self) {
        count(&self.series.fallbacks);
    }

    pub(super) fn decided(&self, verdict: Verdict) {
        count(match verdict {
            Verdict::Allowed => &self.series.allowed,
            Verdict::Denied => &self.series.denied,
            Verdict::ShadowDenied => &self.series.shadow_denied,
            Verdict::Skipped => &self.series.skipped,
            Verdict::Forbidden => &self.series.forbidden,
        });
        self.ended();
    }

    /// One latency sample: the check is over.
    pub(super) fn ended(&self) {
        let seconds = self.started.elapsed().as_secs_f64();
        metrics::with_recorder(|recorder| {
            recorder
                .register_histogram(&self.series.seconds, &METADATA)
                .record(seconds);
        });
    }
}

fn count(key: &Key) {
    metrics::with_recorder(|recorder| recorder.register_counter(key, &METADATA).increment(1));
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
