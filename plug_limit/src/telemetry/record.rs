//! The `metrics` half of the telemetry: what each event adds to which metric.

use std::hash::BuildHasher;
use std::ops::Deref;
use std::sync::OnceLock;
use std::time::Instant;

use metrics::{Key, Label, Level, Metadata, SharedString};

use super::DecisionLabel;
use crate::metrics::{
    BREAKER_OPEN, BREAKER_TRANSITIONS, DECISION_SECONDS, DECISIONS, DENY_CACHE_HITS, FAILURES,
    FALLBACKS, REDIS_EVICTS, SCRIPT_RELOADS,
};
use crate::text::same;

/// What the `metrics` macros would give a recorder for these metrics.
static METADATA: Metadata<'static> =
    Metadata::new(module_path!(), Level::INFO, Some(module_path!()));

/// The (limiter, scope) pairs a [`SeriesCache`] has room for; past them, or past
/// [`MAX_PROBES`] taken slots from a pair's own, a check builds its keys afresh. Scopes are
/// route templates and limiters are registered, so a program rarely has more. A power of two.
const SLOTS: usize = 1024;

/// The slots a lookup reads before it gives up: a bound on its work however the pairs collide.
const MAX_PROBES: usize = 16;

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
        let key = |name: &'static str, decision: Option<DecisionLabel>| {
            let mut labels = vec![
                Label::new("limiter", limiter.clone()),
                Label::new("scope", scope.clone()),
            ];
            labels.extend(decision.map(|label| Label::new("decision", label.as_str())));
            Key::from_parts(name, labels)
        };
        Self {
            allowed: key(DECISIONS, Some(DecisionLabel::Allowed)),
            denied: key(DECISIONS, Some(DecisionLabel::Denied)),
            shadow_denied: key(DECISIONS, Some(DecisionLabel::ShadowDenied)),
            skipped: key(DECISIONS, Some(DecisionLabel::Skipped)),
            forbidden: key(DECISIONS, Some(DecisionLabel::Forbidden)),
            deny_cache_hits: key(DENY_CACHE_HITS, None),
            fallbacks: key(FALLBACKS, None),
            seconds: key(DECISION_SECONDS, None),
            limiter,
            scope,
        }
    }
}

/// The [`Series`] of every (limiter, scope) checked so far, in an open-addressed table of
/// slots each written once and never emptied: a lookup takes no lock and counts no reference
/// (it reads one atomic per slot), and the series it finds live as long as the cache.
#[derive(Debug)]
pub(super) struct SeriesCache {
    slots: Box<[OnceLock<Box<Cached>>]>,
    /// foldhash, not std's SipHash: limiters are registered and scopes are route templates,
    /// so no client chooses what fills the slots, and the probes are bounded anyway.
    hasher: foldhash::fast::RandomState,
}

/// One taken slot.
#[derive(Debug)]
struct Cached {
    limiter: Box<str>,
    scope: Box<str>,
    series: Series,
}

impl Default for SeriesCache {
    fn default() -> Self {
        Self {
            slots: (0..SLOTS).map(|_| OnceLock::new()).collect(),
            hasher: foldhash::fast::RandomState::default(),
        }
    }
}

impl SeriesCache {
    pub(super) fn get(&self, limiter: &str, scope: &str) -> SeriesRef<'_> {
        // Only the low bits pick a slot: the truncation is the point.
        #[allow(clippy::cast_possible_truncation)]
        let start = self.hasher.hash_one((limiter, scope)) as usize;
        for probe in 0..MAX_PROBES {
            let slot = &self.slots[start.wrapping_add(probe) % SLOTS];
            // Two checks filling one slot at once: one writes it, the other reads what it
            // wrote, and either goes on probing if that is another pair.
            let cached = slot.get_or_init(|| {
                Box::new(Cached {
                    limiter: limiter.into(),
                    scope: scope.into(),
                    series: Series::new(limiter, scope),
                })
            });
            if same(&cached.limiter, limiter) && same(&cached.scope, scope) {
                return SeriesRef::Cached(&cached.series);
            }
        }
        SeriesRef::Own(Box::new(Series::new(limiter, scope)))
    }
}

/// A check's [`Series`]: the cache's, or its own when the cache had no room for it.
#[derive(Debug)]
pub(super) enum SeriesRef<'a> {
    Cached(&'a Series),
    Own(Box<Series>),
}

impl Deref for SeriesRef<'_> {
    type Target = Series;

    fn deref(&self) -> &Series {
        match self {
            Self::Cached(series) => series,
            Self::Own(series) => series,
        }
    }
}

/// The series and start of one check.
pub(super) struct Check<'a> {
    series: SeriesRef<'a>,
    started: Instant,
}

impl<'a> Check<'a> {
    pub(super) fn new(series: SeriesRef<'a>) -> Self {
        Self {
            series,
            started: Instant::now(),
        }
    }

    pub(super) fn started(&self) -> Instant {
        self.started
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

    pub(super) fn decided(&self, label: DecisionLabel) {
        count(match label {
            DecisionLabel::Allowed => &self.series.allowed,
            DecisionLabel::Denied => &self.series.denied,
            DecisionLabel::ShadowDenied => &self.series.shadow_denied,
            DecisionLabel::Skipped => &self.series.skipped,
            DecisionLabel::Forbidden => &self.series.forbidden,
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

/// A breaker of backend `pool` over `node` is `open` (or closed); `transition` when it just
/// changed.
pub(super) fn breaker(pool: &SharedString, node: &str, open: bool, transition: bool) {
    let node = node.to_owned();
    if transition {
        let state = if open { "open" } else { "closed" };
        metrics::counter!(BREAKER_TRANSITIONS, "pool" => pool.clone(), "node" => node.clone(), "state" => state)
            .increment(1);
    }
    metrics::gauge!(BREAKER_OPEN, "pool" => pool.clone(), "node" => node).set(if open {
        1.0
    } else {
        0.0
    });
}

pub(super) fn redis_evicts(pool: &SharedString, evicts: bool) {
    metrics::gauge!(REDIS_EVICTS, "pool" => pool.clone()).set(if evicts { 1.0 } else { 0.0 });
}

pub(super) fn script_reloaded(limiter: &str) {
    metrics::counter!(SCRIPT_RELOADS, "limiter" => limiter.to_owned()).increment(1);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pair_is_cached_once_and_a_full_cache_still_answers() {
        let cache = SeriesCache::default();
        let first = cache.get("fixed_window", "/a");
        assert!(matches!(first, SeriesRef::Cached(_)));
        assert!(std::ptr::eq(&*first, &*cache.get("fixed_window", "/a")));
        // "fixed_window" with "/a" is not "fixed_window/" with "a".
        assert!(!std::ptr::eq(&*first, &*cache.get("fixed_window/", "a")));
        let cached = (0..4 * SLOTS)
            .filter(|i| matches!(cache.get("l", &i.to_string()), SeriesRef::Cached(_)))
            .count();
        assert_eq!(cached, SLOTS - 2);
        let own = cache.get("l", "new");
        assert!(matches!(own, SeriesRef::Own(_)));
        assert_eq!((&*own.limiter, &*own.scope), ("l", "new"));
    }
}
