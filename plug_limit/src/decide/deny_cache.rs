//! The local deny cache: once a key is denied until T, deny it here until T without asking the
//! backend again.

use std::time::{Duration, Instant};

use http::{HeaderName, HeaderValue, header::RETRY_AFTER};

use crate::backend::sharded::Sharded;
use crate::outcome::Outcome;

const SHARDS: usize = 16;

/// Remembers the keys a limiter denied, and until when, in this process.
///
/// A flood from one client then costs no backend call at all: after the first denial every
/// request of the flood is answered from here until the limiter's own `retry-after` (or, without
/// one, `x-ratelimit-reset`) has passed. Expired entries are dropped on lookup and swept as new
/// ones arrive, so the cache holds about the keys denied within their waits.
#[derive(Debug)]
pub(crate) struct DenyCache {
    denials: Sharded<Denial>,
}

#[derive(Debug)]
struct Denial {
    at: Instant,
    until: Instant,
    cost: u32,
    outcome: Outcome,
}

impl DenyCache {
    pub(crate) fn new() -> Self {
        Self {
            denials: Sharded::new(SHARDS),
        }
    }

    /// The cached denial of `key` for a request of `cost`, with its `retry-after` and
    /// `x-ratelimit-reset` counted down by the time since the denial. A denial of a costlier
    /// request says nothing about a cheaper one.
    pub(crate) fn get(&self, key: &str, cost: u32, now: Instant) -> Option<Outcome> {
        let mut shard = self.denials.lock(key);
        let denial = shard.get_mut(key)?;
        if now >= denial.until {
            shard.remove(key);
            return None;
        }
        if cost < denial.cost {
            return None;
        }
        Some(count_down(&denial.outcome, now - denial.at))
    }

    /// Remembers a denial of `key`, until its `retry-after` (else `x-ratelimit-reset`) seconds
    /// have passed. An outcome with neither is not cached: nothing says when it ends.
    pub(crate) fn insert(&self, key: &str, cost: u32, outcome: &Outcome, now: Instant) {
        let Some(wait) = seconds(outcome, &RETRY_AFTER).or_else(|| seconds(outcome, &RESET)) else {
            return;
        };
        if wait == 0 {
            return;
        }
        let denial = Denial {
            at: now,
            until: now + Duration::from_secs(wait),
            cost,
            outcome: outcome.clone(),
        };
        let mut shard = self.denials.lock(key);
        shard.sweep_if_due(|denial| denial.until > now);
        shard.insert(key, denial);
    }

    /// Forgets `key`'s denial, as [`PlugLimit::reset`](crate::PlugLimit::reset) must.
    pub(crate) fn remove(&self, key: &str) {
        self.denials.lock(key).remove(key);
    }
}

const RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");

fn seconds(outcome: &Outcome, name: &HeaderName) -> Option<u64> {
    outcome
        .headers()
        .iter()
        .find(|(header, _)| header == name)
        .and_then(|(_, value)| value.to_str().ok()?.parse().ok())
}

/// The outcome as it reads `elapsed` later: its waits shortened by the whole seconds passed.
fn count_down(outcome: &Outcome, elapsed: Duration) -> Outcome {
    let passed = elapsed.as_secs();
    if passed == 0 {
        return outcome.clone();
    }
    let headers = outcome
        .headers()
        .iter()
        .map(|(name, value)| {
            let counted = (name == RETRY_AFTER || name == RESET)
                .then(|| value.to_str().ok()?.parse::<u64>().ok())
                .flatten()
                .map(|secs| HeaderValue::from(secs.saturating_sub(passed)));
            (name.clone(), counted.unwrap_or_else(|| value.clone()))
        })
        .collect();
    Outcome::new(outcome.decision(), headers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::Decision;

    fn denied(retry_after: Option<&'static str>, reset: &'static str) -> Outcome {
        let mut headers = vec![
            (RESET, HeaderValue::from_static(reset)),
            (
                HeaderName::from_static("x-ratelimit-remaining"),
                HeaderValue::from_static("0"),
            ),
        ];
        if let Some(retry) = retry_after {
            headers.push((RETRY_AFTER, HeaderValue::from_static(retry)));
        }
        Outcome::new(Decision::Deny, headers)
    }

    fn header<'a>(outcome: &'a Outcome, name: &str) -> &'a str {
        outcome.header(name).unwrap().to_str().unwrap()
    }

    #[test]
    fn a_denial_lasts_until_retry_after_and_counts_down() {
        let cache = DenyCache::new();
        let t0 = Instant::now();
        cache.insert("k", 1, &denied(Some("3"), "50"), t0);
        let later = cache.get("k", 1, t0 + Duration::from_millis(1500)).unwrap();
        assert_eq!(header(&later, "retry-after"), "2");
        assert_eq!(header(&later, "x-ratelimit-reset"), "49");
        assert_eq!(header(&later, "x-ratelimit-remaining"), "0");
        assert!(cache.get("k", 1, t0 + Duration::from_secs(3)).is_none());
        assert!(cache.get("other", 1, t0).is_none());
    }

    #[test]
    fn without_retry_after_the_reset_bounds_it() {
        let cache = DenyCache::new();
        let t0 = Instant::now();
        cache.insert("k", 1, &denied(None, "2"), t0);
        assert!(
            cache
                .get("k", 1, t0 + Duration::from_millis(1999))
                .is_some()
        );
        assert!(cache.get("k", 1, t0 + Duration::from_secs(2)).is_none());
    }

    #[test]
    fn a_costlier_denial_does_not_deny_a_cheaper_request() {
        let cache = DenyCache::new();
        let t0 = Instant::now();
        cache.insert("k", 5, &denied(Some("10"), "10"), t0);
        assert!(cache.get("k", 1, t0).is_none());
        assert!(cache.get("k", 5, t0).is_some());
        cache.remove("k");
        assert!(cache.get("k", 5, t0).is_none());
    }

    #[test]
    fn no_wait_no_cache() {
        let cache = DenyCache::new();
        let t0 = Instant::now();
        cache.insert("k", 1, &denied(Some("0"), "0"), t0);
        cache.insert("j", 1, &Outcome::new(Decision::Deny, Vec::new()), t0);
        assert!(cache.get("k", 1, t0).is_none());
        assert!(cache.get("j", 1, t0).is_none());
    }
}
