//! The local deny cache: once a key is denied until T, deny it here until T without asking the
//! backend again.

use std::num::NonZeroUsize;

use http::{HeaderName, header::RETRY_AFTER};

use crate::backend::sharded::{Locked, Sharded};
use crate::backend::{KeyText, head_len};
use crate::outcome::{Outcome, ietf, number};

const SHARDS: usize = 16;

/// Remembers the keys a limiter denied, and until when, in this process.
///
/// A flood from one client then costs no backend call at all: after the first denial every
/// request of the flood is answered from here until the limiter's own `retry-after` (or, without
/// one, `x-ratelimit-reset`) has passed. A denial holds for the limit that was denied (its
/// options): another limit counting under the same key decides for itself. Time is the
/// limiter's clock. Expired entries are dropped on lookup and swept as new ones arrive, so the
/// cache holds about the keys denied within their waits.
#[derive(Debug)]
pub(crate) struct DenyCache {
    /// By key (the digest of its text past the `{prefix}:{TAG}:` head, as the memory backend
    /// keys it): the denials of each limit (options) counting under it.
    denials: Sharded<Vec<Denial>>,
    /// The length of its keys' head.
    head: usize,
}

#[derive(Debug)]
struct Denial {
    /// Which limit was denied: a hash of its options.
    opts: u64,
    /// When it was denied, in milliseconds of the limiter's clock.
    at_ms: i64,
    until_ms: i64,
    cost: u32,
    outcome: Outcome,
    /// The outcome as last answered, counted down by that many whole seconds, with its
    /// headers made: a flood's answers within one second read the same values, made once.
    answered: Option<(i64, Outcome)>,
}

impl DenyCache {
    /// A cache of denials for at most `capacity` keys. Past it, the denials ending soonest
    /// are dropped first; a dropped denial only costs its key one backend call.
    /// Its keys start with `prefix`.
    pub(crate) fn new(capacity: NonZeroUsize, prefix: &str) -> Self {
        Self {
            denials: Sharded::bounded(SHARDS, capacity),
            head: head_len(prefix),
        }
    }

    fn lock(&self, keys: &dyn KeyText) -> Locked<'_, Vec<Denial>> {
        self.denials.lock_first(keys, self.head)
    }

    /// The cached denial of `key` under the limit of `opts` for a request of `cost`, with its
    /// `retry-after`, `x-ratelimit-reset` and `RateLimit`'s `t` counted down by the time since
    /// the denial. A denial of a costlier request says nothing about a cheaper one.
    pub(crate) fn get(
        &self,
        keys: &dyn KeyText,
        opts: u64,
        cost: u32,
        now_ms: i64,
    ) -> Option<Outcome> {
        let mut shard = self.lock(keys);
        let denials = shard.get_mut()?;
        denials.retain(|denial| now_ms < denial.until_ms);
        let denial = denials.iter_mut().find(|denial| denial.opts == opts)?;
        if cost < denial.cost {
            return None;
        }
        let elapsed_ms = now_ms - denial.at_ms;
        let passed = elapsed_ms / 1000;
        match &denial.answered {
            Some((at, answered)) if *at == passed => Some(answered.clone()),
            _ => {
                let answered = count_down(&denial.outcome, elapsed_ms);
                // Made here, once: each answer clones them.
                let _ = answered.headers();
                denial.answered = Some((passed, answered.clone()));
                Some(answered)
            }
        }
    }

    /// Remembers a denial of `key` under the limit of `opts`, until its `retry-after` (else
    /// `x-ratelimit-reset`) seconds have passed. An outcome with neither is not cached:
    /// nothing says when it ends.
    pub(crate) fn insert(
        &self,
        keys: &dyn KeyText,
        opts: u64,
        cost: u32,
        outcome: &Outcome,
        now_ms: i64,
    ) {
        let Some(wait) = wait_s(outcome) else {
            return;
        };
        if wait == 0 {
            return;
        }
        // A custom script may report its reset as a timestamp: never hold a denial here for
        // longer than an hour (past it, one backend call asks again).
        let wait = wait.min(MAX_WAIT_S);
        let wait_ms = i64::try_from(wait.saturating_mul(1000)).unwrap_or(i64::MAX);
        let denial = Denial {
            opts,
            at_ms: now_ms,
            until_ms: now_ms.saturating_add(wait_ms),
            cost,
            outcome: outcome.clone(),
            answered: None,
        };
        let mut shard = self.lock(keys);
        shard.sweep_if_due(|denials| denials.iter().any(|denial| denial.until_ms > now_ms));
        if let Some(denials) = shard.get_mut() {
            denials.retain(|old| old.opts != opts && old.until_ms > now_ms);
            denials.push(denial);
            return;
        }
        let ends = |denials: &Vec<Denial>| denials.iter().map(|d| d.until_ms).max();
        shard.make_room(Some(now_ms), ends);
        shard.insert(vec![denial]);
    }

    /// Forgets every denial.
    pub(crate) fn clear(&self) {
        self.denials.clear();
    }

    /// Forgets every denial of `key`, as [`PlugLimit::reset`](crate::PlugLimit::reset) must.
    pub(crate) fn remove(&self, keys: &dyn KeyText) {
        self.lock(keys).remove();
    }

    /// Forgets every denial of `client` (its client part as a key holds it) under any options
    /// and scope of `limiter`, as [`PlugLimit::reset_key`](crate::PlugLimit::reset_key) must.
    pub(crate) fn remove_client(&self, limiter: &str, client: &str) {
        self.denials
            .remove_client(limiter, client.as_bytes(), |_| {});
    }
}

/// The longest a denial is answered from here, in seconds.
const MAX_WAIT_S: u64 = 3600;

const RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");

/// How long `outcome`'s denial lasts, in seconds: its `retry-after`, else its reset. A
/// built-in's are its report's; a custom script's, the values it sent under those names.
pub(super) fn wait_s(outcome: &Outcome) -> Option<u64> {
    if let Some(reported) = outcome.reported_as() {
        let wait = reported.retry_after().unwrap_or(reported.report.reset());
        return u64::try_from(wait).ok();
    }
    sent_seconds(outcome, &RETRY_AFTER).or_else(|| sent_seconds(outcome, &RESET))
}

/// A number a custom script sent under `name`.
fn sent_seconds(outcome: &Outcome, name: &HeaderName) -> Option<u64> {
    outcome
        .headers()
        .iter()
        .find(|(header, _)| header == name)
        .and_then(|(_, value)| value.to_str().ok()?.parse().ok())
}

/// The outcome as it reads `elapsed_ms` later: its waits shortened by the whole seconds passed.
pub(super) fn count_down(outcome: &Outcome, elapsed_ms: i64) -> Outcome {
    let passed = u64::try_from(elapsed_ms / 1000).unwrap_or(0);
    if passed == 0 {
        return outcome.clone();
    }
    let mut later = outcome.clone();
    if let Some(reported) = later.reported_mut() {
        reported.count_down(i64::try_from(passed).unwrap_or(i64::MAX));
        return later;
    }
    // A custom script's own values, as it sent them.
    let headers = outcome
        .headers()
        .iter()
        .map(|(name, value)| {
            let counted = if name == ietf::RATELIMIT {
                ietf::count_down(value, passed)
            } else {
                (name == RETRY_AFTER || name == RESET)
                    .then(|| value.to_str().ok()?.parse::<u64>().ok())
                    .flatten()
                    .map(|secs| number(secs.saturating_sub(passed)))
            };
            (name.clone(), counted.unwrap_or_else(|| value.clone()))
        })
        .collect();
    Outcome::with_extra(outcome.decision(), headers, outcome.extra().to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A composed key of one part, under prefix `p`.
    fn key(client: &str) -> [String; 1] {
        [format!("p:{{0000}}:fixed_window:10,60:1:/:{client}")]
    }
    use crate::algorithm::{Builtin, Field, Report, Runtime};
    use crate::outcome::{Decision, Names};
    use http::HeaderValue;

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
        let cache = DenyCache::new(NonZeroUsize::MAX, "p");
        let t0 = 1_700_000_000_000;
        cache.insert(&key("k"), 0, 1, &denied(Some("3"), "50"), t0);
        let later = cache.get(&key("k"), 0, 1, t0 + 1500).unwrap();
        assert_eq!(header(&later, "retry-after"), "2");
        assert_eq!(header(&later, "x-ratelimit-reset"), "49");
        assert_eq!(header(&later, "x-ratelimit-remaining"), "0");
        assert!(cache.get(&key("k"), 0, 1, t0 + 3000).is_none());
        assert!(cache.get(&key("other"), 0, 1, t0).is_none());
    }

    #[test]
    fn a_built_ins_denial_counts_its_report_down() {
        let cache = DenyCache::new(NonZeroUsize::MAX, "p");
        let t0 = 1_700_000_000_000;
        let values = [Field::Int(5), Field::Int(50), Field::Int(0), Field::Int(3)];
        let outcome = Outcome::reported(
            Decision::Deny,
            Names::Builtin(Builtin::SlidingWindow.headers()),
            Report::from_values(&values, 0).unwrap(),
            Vec::new(),
        );
        cache.insert(&key("k"), 0, 1, &outcome, t0);
        let later = cache.get(&key("k"), 0, 1, t0 + 1500).unwrap();
        assert_eq!(header(&later, "retry-after"), "2");
        assert_eq!(header(&later, "x-ratelimit-reset"), "49");
        assert_eq!(header(&later, "x-ratelimit-limit"), "5");
        assert_eq!(later.report().map(Report::reset), Some(49));
        assert!(cache.get(&key("k"), 0, 1, t0 + 3000).is_none());
    }

    #[test]
    fn without_retry_after_the_reset_bounds_it() {
        let cache = DenyCache::new(NonZeroUsize::MAX, "p");
        let t0 = 1_700_000_000_000;
        cache.insert(&key("k"), 0, 1, &denied(None, "2"), t0);
        assert!(cache.get(&key("k"), 0, 1, t0 + 1999).is_some());
        assert!(cache.get(&key("k"), 0, 1, t0 + 2000).is_none());
    }

    #[test]
    fn a_costlier_denial_does_not_deny_a_cheaper_request() {
        let cache = DenyCache::new(NonZeroUsize::MAX, "p");
        let t0 = 1_700_000_000_000;
        cache.insert(&key("k"), 0, 5, &denied(Some("10"), "10"), t0);
        assert!(cache.get(&key("k"), 0, 1, t0).is_none());
        assert!(cache.get(&key("k"), 0, 5, t0).is_some());
        cache.remove(&key("k"));
        assert!(cache.get(&key("k"), 0, 5, t0).is_none());
    }

    #[test]
    fn a_denial_holds_for_its_own_limit_only() {
        let cache = DenyCache::new(NonZeroUsize::MAX, "p");
        let t0 = 1_700_000_000_000;
        cache.insert(&key("k"), 1, 1, &denied(Some("60"), "60"), t0);
        assert!(cache.get(&key("k"), 1, 1, t0).is_some());
        assert!(cache.get(&key("k"), 5, 1, t0).is_none());
        cache.insert(&key("k"), 5, 1, &denied(Some("9"), "60"), t0);
        assert!(cache.get(&key("k"), 1, 1, t0).is_some());
        cache.remove(&key("k"));
        assert!(cache.get(&key("k"), 1, 1, t0).is_none());
        assert!(cache.get(&key("k"), 5, 1, t0).is_none());
    }

    #[test]
    fn a_wait_is_held_an_hour_at_most_and_extras_survive_the_count_down() {
        let cache = DenyCache::new(NonZeroUsize::MAX, "p");
        let t0 = 1_700_000_000_000;
        // A reset written as a timestamp, as some scripts do.
        let extra = vec![deadpool_redis::redis::Value::Int(7)];
        let outcome = Outcome::with_extra(
            Decision::Deny,
            denied(None, "1800000000").headers().to_vec(),
            extra.clone(),
        );
        cache.insert(&key("k"), 0, 1, &outcome, t0);
        let later = cache.get(&key("k"), 0, 1, t0 + 2_000).unwrap();
        assert_eq!(later.extra(), &extra[..]);
        assert!(cache.get(&key("k"), 0, 1, t0 + 3_599_999).is_some());
        assert!(cache.get(&key("k"), 0, 1, t0 + 3_600_000).is_none());
    }

    #[test]
    fn a_bounded_cache_keeps_its_bound() {
        let cache = DenyCache::new(NonZeroUsize::MIN, "p");
        let t0 = 1_700_000_000_000;
        cache.insert(&key("a"), 0, 1, &denied(Some("60"), "60"), t0);
        cache.insert(&key("b"), 0, 1, &denied(Some("60"), "60"), t0);
        // A dropped denial costs its key a backend call, nothing more.
        assert!(cache.get(&key("a"), 0, 1, t0).is_none());
        assert!(cache.get(&key("b"), 0, 1, t0).is_some());
        assert_eq!(cache.denials.len(), 1);
    }

    #[test]
    fn no_wait_no_cache() {
        let cache = DenyCache::new(NonZeroUsize::MAX, "p");
        let t0 = 1_700_000_000_000;
        cache.insert(&key("k"), 0, 1, &denied(Some("0"), "0"), t0);
        cache.insert(
            &key("j"),
            0,
            1,
            &Outcome::new(Decision::Deny, Vec::new()),
            t0,
        );
        assert!(cache.get(&key("k"), 0, 1, t0).is_none());
        assert!(cache.get(&key("j"), 0, 1, t0).is_none());
    }

    /// The deny cache under every interleaving of the threads that record and read denials
    /// (see the guide, "What is proved about threads").
    #[cfg(plug_limit_loom)]
    mod interleavings {
        use std::sync::Arc;

        use loom::thread;

        use super::*;

        const T0: i64 = 1_700_000_000_000;

        /// Runs `f` on `cache` in a thread of the model.
        fn on_thread<T: Send + 'static>(
            cache: &Arc<DenyCache>,
            f: impl FnOnce(&DenyCache) -> T + Send + 'static,
        ) -> thread::JoinHandle<T> {
            let cache = Arc::clone(cache);
            thread::spawn(move || f(&cache))
        }

        /// The `retry-after` a cached denial of `client` under `opts` answers at `now_ms`.
        fn retry_after(cache: &DenyCache, client: &str, opts: u64, now_ms: i64) -> Option<String> {
            let denial = cache.get(&key(client), opts, 1, now_ms)?;
            Some(header(&denial, "retry-after").to_owned())
        }

        #[test]
        fn a_denial_one_thread_records_is_never_served_past_its_end_nor_for_another_key() {
            loom::model(|| {
                let cache = Arc::new(DenyCache::new(NonZeroUsize::new(8).unwrap(), "p"));
                let recorder = on_thread(&cache, |cache| {
                    cache.insert(&key("k"), 1, 1, &denied(Some("3"), "50"), T0);
                });
                // Before the record, nothing; after it, its wait counted down, or nothing once
                // a reader whose clock is past its end has dropped it: it has ended.
                let within = on_thread(&cache, |cache| retry_after(cache, "k", 1, T0 + 1_500));
                let past_and_others = on_thread(&cache, |cache| {
                    [
                        retry_after(cache, "k", 1, T0 + 3_000),
                        retry_after(cache, "k", 2, T0 + 1_500),
                        retry_after(cache, "j", 1, T0 + 1_500),
                    ]
                });
                recorder.join().unwrap();
                let within = within.join().unwrap();
                assert!(matches!(within.as_deref(), None | Some("2")), "{within:?}");
                assert_eq!(past_and_others.join().unwrap(), [None, None, None]);
            });
        }

        #[test]
        fn readers_in_other_seconds_never_share_an_answer_made_for_another() {
            loom::model(|| {
                let cache = Arc::new(DenyCache::new(NonZeroUsize::new(8).unwrap(), "p"));
                cache.insert(&key("k"), 1, 1, &denied(Some("3"), "50"), T0);
                // Each reader's answer is made once a second and kept for the next reader in
                // that second: one in another second must make its own.
                let readers: Vec<_> = [1_500, 2_500, 1_700]
                    .into_iter()
                    .map(|elapsed| {
                        on_thread(&cache, move |cache| {
                            retry_after(cache, "k", 1, T0 + elapsed)
                        })
                    })
                    .collect();
                let read: Vec<_> = readers.into_iter().map(|t| t.join().unwrap()).collect();
                let expected = ["2", "1", "2"].map(|retry| Some(retry.to_owned()));
                assert_eq!(read, expected);
            });
        }

        #[test]
        fn denials_of_two_limits_recorded_at_once_under_one_key_are_both_kept() {
            loom::model(|| {
                let cache = Arc::new(DenyCache::new(NonZeroUsize::new(8).unwrap(), "p"));
                let recorders: Vec<_> = [(1, "3"), (2, "5")]
                    .into_iter()
                    .map(|(opts, retry)| {
                        on_thread(&cache, move |cache| {
                            cache.insert(&key("k"), opts, 1, &denied(Some(retry), "50"), T0);
                        })
                    })
                    .collect();
                recorders.into_iter().for_each(|t| t.join().unwrap());
                assert_eq!(retry_after(&cache, "k", 1, T0).as_deref(), Some("3"));
                assert_eq!(retry_after(&cache, "k", 2, T0).as_deref(), Some("5"));
            });
        }

        #[test]
        fn a_reset_leaves_no_denial_recorded_before_it() {
            loom::model(|| {
                let cache = Arc::new(DenyCache::new(NonZeroUsize::new(8).unwrap(), "p"));
                cache.insert(&key("k"), 1, 1, &denied(Some("3"), "50"), T0);
                let recorder = on_thread(&cache, |cache| {
                    cache.insert(&key("k"), 2, 1, &denied(Some("5"), "50"), T0);
                });
                let reset = on_thread(&cache, |cache| cache.remove(&key("k")));
                recorder.join().unwrap();
                reset.join().unwrap();
                // The reset came after the first denial: it is gone, whichever way the second
                // one's record and the reset met. The second holds only if recorded after.
                assert_eq!(retry_after(&cache, "k", 1, T0), None);
                let second = retry_after(&cache, "k", 2, T0);
                assert!(matches!(second.as_deref(), None | Some("5")), "{second:?}");
            });
        }
    }
}
