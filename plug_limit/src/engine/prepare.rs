//! Preparing a check: the limiter, the rules, the key, then the evaluation it dispatches
//! ([`Evaluation`]: its parts are its own, the stages that run it ask it for what they need),
//! each before any backend call. What the preparation alone settles (a request the rules pass
//! or forbid, a key that cannot be read, an unknown limiter) is said in [`Prepared`].

use std::borrow::Cow;
use std::cell::OnceCell;
use std::future::Future;
use std::hash::BuildHasher;
use std::sync::LazyLock;
use std::sync::atomic::Ordering;

use axum::extract::MatchedPath;
use http::request::Parts;

use super::deny_cache::DenyCache;
use super::keys::{Keys, Named};
use super::registry::Entry;
use super::ruling;
use super::settle::{self, Terms};
use super::verdict::refuse_or_pass;
use super::{Decider, Verdict};
use crate::algorithm::Builtin;
use crate::backend::{Answer, Call, StackPart};
use crate::config::KeyFailure;
use crate::error::Error;
use crate::key::{self, Extracted, KeyExtractor, Reads};
use crate::limit::{Charge, LimitRef, Opt, ReadAhead};
use crate::outcome::Outcome;
use crate::rejection::RateLimitRejection;
use crate::telemetry::{self, DecisionLabel, Watch};

/// What preparing a check comes to, before any backend call.
pub(super) enum Prepared<T> {
    /// The request goes to its limiter: what the preparation's `then` made of it.
    Check(T),
    /// Let through uncounted and without headers: the rules skip it, or its key could not be
    /// read and its limiter's `KeyFailure` is `Pass`.
    Pass,
    /// Answered without its limiter: refused (a deny-list, a key that could not be read), or
    /// its limiter unknown, by the failure policy.
    Answered(Verdict),
}

/// What a stack's limits share of reading their one request: each would read it alike.
#[derive(Default)]
pub(super) struct Reading<'p> {
    /// The route the request matched (`None`: none did), once looked up.
    matched: OnceCell<Option<&'p str>>,
    reads: Reads<'p>,
}

impl Decider {
    /// A request's check up to its dispatch: the limiter, the rules, the key (with `reading`,
    /// what a stack's limits share of reading the request: the route it matched, looked up
    /// once, and the header the limit before read, not read again);
    /// then `then` of the evaluation, handed over where it is made rather than moved out and in
    /// again (an evaluation is some three hundred bytes). [`Prepared::Pass`] or
    /// [`Prepared::Answered`] when the preparation settles the check.
    #[inline]
    pub(super) fn prepare<'a, T>(
        &'a self,
        limit: &LimitRef<'a>,
        parts: &'a Parts,
        reading: Option<&mut Reading<'a>>,
        then: impl FnOnce(Evaluation<'a>) -> T,
    ) -> Prepared<T> {
        let (matched, reads) = reading
            .map(|reading| (&reading.matched, &mut reading.reads))
            .unzip();
        // Scoped to the matched route by default, so two routes never share a budget by
        // accident; `*` only when the router matched nothing (a fallback).
        let route_scope = limit
            .scope
            .or_else(|| {
                let lookup = || {
                    parts
                        .extensions
                        .get::<MatchedPath>()
                        .map(MatchedPath::as_str)
                };
                match matched {
                    Some(matched) => *matched.get_or_init(lookup),
                    None => lookup(),
                }
            })
            .unwrap_or("*");
        let entry = match self.registry.of(limit) {
            Ok(entry) => entry,
            Err(error) => {
                // Labelled by a fixed word: the name may come from a request (a run-time
                // limit), and each distinct one would be a metric series of its own.
                let watch =
                    Watch::request(&self.telemetry, telemetry::UNKNOWN_LIMITER, route_scope);
                let _entered = watch.entered();
                self.failures.log(self.log_level, limit.limiter, &error);
                watch.failed(telemetry::cause(&error));
                watch.undecided();
                return Prepared::Answered(refuse_or_pass(self.on_failure, error));
            }
        };
        let watch = Watch::request(&self.telemetry, entry.name(), route_scope);
        // Until `then` returns: a check decided without waiting logs within its span, as one
        // that waits on Redis does.
        let _entered = watch.entered();
        // Before the key and any backend call: what the rules settle costs nothing else.
        if let Some(rules) = entry.rules.as_deref() {
            match rules.judge(parts) {
                ruling::Ruling::Check => {}
                ruling::Ruling::Pass => {
                    watch.decided(DecisionLabel::Skipped);
                    return Prepared::Pass;
                }
                ruling::Ruling::Forbid => {
                    watch.decided(DecisionLabel::Forbidden);
                    return Prepared::Answered(Err(RateLimitRejection::Forbidden));
                }
            }
        }
        let extractor = limit.key.unwrap_or(&*entry.key);
        let (key, scope) = match key::extract(extractor, parts, reads) {
            Ok(key) => (key, Cow::Borrowed(route_scope)),
            Err(error) => match self.key_failed(entry, parts, route_scope, error, &watch) {
                Ok(by_peer) => by_peer,
                Err(prepared) => return prepared,
            },
        };
        // Made where `then` takes it, not moved out and in again: it is some three hundred bytes.
        Prepared::Check(then(Evaluation {
            entry,
            keys: Keys::namespaced(key, &self.prefix, named(entry, limit), scope),
            opts: limit.opts,
            read_ahead: limit.read_ahead,
            cost: limit.cost,
            // A shadow limiter never refuses, so it has no denials to answer from a cache.
            cached: (entry.deny_cache && !entry.shadow)
                .then(|| (opts_id(limit.opts), self.now_ms(watch.started()))),
            lease: lease_for(entry, Charge::Take(limit.cost)),
            terms: Terms {
                count_if: limit.count_if,
                settle: limit.settle,
            },
            watch,
        }))
    }

    /// What a check whose key could not be read comes to: keyed by the peer's address in a
    /// budget of its own, let through, or refused, as the limiter's `KeyFailure` says.
    #[cold]
    fn key_failed<'a, T>(
        &self,
        entry: &Entry,
        parts: &'a Parts,
        route_scope: &str,
        error: key::KeyError,
        watch: &Watch<'_>,
    ) -> Result<(Extracted<'a>, Cow<'a, str>), Prepared<T>> {
        tracing::debug!(target: "plug_limit", limiter = %entry.name(), %error, "no rate limit key");
        if matches!(error, key::KeyError::NoPeerAddress) {
            self.warn_no_peer();
        }
        let by_peer = match entry.on_key_failure {
            KeyFailure::PeerIp => key::peer_ip().extract(parts).ok().map(Extracted::Owned),
            KeyFailure::Reject | KeyFailure::Pass => None,
        };
        let Some(peer) = by_peer else {
            watch.failed(telemetry::KEY_CAUSE);
            watch.undecided();
            if entry.on_key_failure == KeyFailure::Pass {
                return Err(Prepared::Pass);
            }
            return Err(Prepared::Answered(Err(RateLimitRejection::KeyRejected(
                error,
            ))));
        };
        // A budget of its own: the extractor's keys and the peer's never meet.
        Ok((peer, Cow::Owned(format!("{route_scope}\0peer"))))
    }

    /// Says once, at `WARN`, that requests come without a peer address: a server made without
    /// `into_make_service_with_connect_info` turns every request keyed by it into a `400`,
    /// which the `DEBUG` line alone would leave unexplained.
    #[cold]
    pub(super) fn warn_no_peer(&self) {
        if !self.warned_no_peer.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                target: "plug_limit",
                "requests come without a peer address, so a key read from it refuses them with 400: serve with `into_make_service_with_connect_info::<SocketAddr>()` (in tests, add axum's `MockConnectInfo` layer), or key by something else"
            );
        }
    }
}

/// What the keys of `limit`, run by `entry`, name of it.
pub(super) fn named<'a>(entry: &'a Entry, limit: &LimitRef<'a>) -> Named<'a> {
    Named {
        limiter: entry.name(),
        opts: limit.opts,
        opts_key: limit.opts_key,
    }
}

/// A limit's options as the deny cache and local batches tell limits apart (two limits of
/// different options may count under one key and decide differently): their hash, within this
/// process.
///
/// foldhash's quality hasher under a seed drawn once per process: a few words hash in a few
/// nanoseconds, where std's SipHash took about 35 on every cached or batched check (a profile
/// of `http_load`'s `global_batched`). The seed is secret, where `DefaultHasher::new()`'s key
/// is public; and a collision, which a run-time resolver building options from request text
/// could at most stumble on, only mixes two limits that count under the same client key.
pub(super) fn opts_id(opts: &[Opt]) -> u64 {
    static HASHER: LazyLock<foldhash::quality::RandomState> = LazyLock::new(Default::default);
    HASHER.hash_one(opts)
}

impl Decider {
    /// Runs a limit's resolver within the check's timeout. One that overruns it fails like a
    /// check that could not decide, by the handle's failure policy (no limiter is known yet to
    /// have one of its own): a resolver waiting on a slow database must not hold every request
    /// with it. `Err` holds the decision of a request no limit could be chosen for.
    pub(crate) async fn within_timeout<L>(
        &self,
        resolver: impl Future<Output = Option<L>>,
    ) -> Result<Option<L>, Verdict> {
        let Ok(limit) = tokio::time::timeout(self.timeout, resolver).await else {
            let error = Error::Timeout(self.timeout);
            self.failures.log(self.log_level, "resolver", &error);
            return Err(refuse_or_pass(self.on_failure, error));
        };
        Ok(limit)
    }
}

/// One request's evaluation of one limit: its limiter, keys and limit, and when it consulted
/// the deny cache.
pub(super) struct Evaluation<'a> {
    entry: &'a Entry,
    keys: Keys<'a>,
    opts: &'a [Opt],
    read_ahead: Option<&'a ReadAhead>,
    cost: u32,
    /// Set when the limiter keeps a deny cache: the limit's options as the cache tells limits
    /// apart, and the time (by the limiter's clock) it was consulted.
    cached: Option<(u64, i64)>,
    /// The id of the lease it takes, for a limiter that leases its units.
    lease: Option<String>,
    /// What it owes its limit after its response, beyond its cost.
    terms: Terms,
    /// Its span and metrics.
    watch: Watch<'a>,
}

impl<'a> Evaluation<'a> {
    /// Its limiter.
    #[inline]
    pub(super) fn entry(&self) -> &'a Entry {
        self.entry
    }

    /// Its span and metrics.
    #[inline]
    pub(super) fn watch(&self) -> &Watch<'a> {
        &self.watch
    }

    /// The keys it counts under.
    #[inline]
    pub(super) fn keys(&self) -> &Keys<'a> {
        &self.keys
    }

    /// Its limit's options.
    #[inline]
    pub(super) fn opts(&self) -> &'a [Opt] {
        self.opts
    }

    /// What it owes after its response, beyond its cost.
    #[inline]
    pub(super) fn terms(&self) -> Terms {
        self.terms
    }

    /// The limit's options as the deny cache tells them apart, and the time it was consulted,
    /// when its limiter keeps one.
    #[inline]
    pub(super) fn cached(&self) -> Option<(u64, i64)> {
        self.cached
    }

    /// Its call, as a backend takes it.
    #[inline]
    pub(super) fn call(&self) -> Call<'_> {
        Call {
            program: &self.entry.program,
            keys: &self.keys,
            opts: self.opts,
            read_ahead: self.read_ahead,
            cost: Charge::Take(self.cost),
            lease: self.lease.as_deref(),
        }
    }

    /// Its part of a stack, as a backend takes it: a shadow limit's denial binds nothing.
    #[inline]
    pub(super) fn stack_part(&self) -> StackPart<'_> {
        StackPart {
            program: &self.entry.program,
            keys: &self.keys,
            opts: self.opts,
            read_ahead: self.read_ahead,
            cost: self.cost,
            soft: self.entry.shadow,
        }
    }

    /// Whether a batch may admit it: a unit's cost, nothing leased or owed after its
    /// response (those are counted call by call, exactly).
    #[inline]
    pub(super) fn batchable(&self) -> bool {
        self.cost == 1 && self.lease.is_none() && !self.terms.owes()
    }

    /// Its outcome of `answer`, in its limiter's style.
    pub(super) fn styled(&self, answer: Answer) -> Outcome {
        styled(self.entry, &self.keys, self.opts, answer)
    }

    /// The denial `denials` holds for it, consulted at `now_ms`, the limit's options as
    /// `opts`.
    #[inline]
    pub(super) fn cached_denial(
        &self,
        denials: &DenyCache,
        opts: u64,
        now_ms: i64,
    ) -> Option<Outcome> {
        denials.get(&self.keys, opts, self.cost, now_ms)
    }

    /// Has `denials` remember its denial `outcome`, when its limiter keeps a deny cache.
    pub(super) fn remember_denial(&self, denials: &DenyCache, outcome: &Outcome) {
        if let Some((opts, now_ms)) = self.cached {
            denials.insert(&self.keys, opts, self.cost, outcome, now_ms);
        }
    }
}

/// The outcome of `answer`, a limit's of `entry` counted under `keys` with `opts`, in the
/// limiter's style.
pub(super) fn styled(entry: &Entry, keys: &Keys<'_>, opts: &[Opt], answer: Answer) -> Outcome {
    let outcome = answer.into_outcome(&entry.program.headers);
    entry.style.finish(|| keys.first(), opts, outcome)
}

/// The id of the lease a call of `cost` takes on `entry`'s limiter: a fresh one when the
/// limiter leases its units (a request holds them until its response ends) and the call takes
/// some; a peek takes nothing, so it has nothing to give back.
pub(super) fn lease_for(entry: &Entry, cost: Charge) -> Option<String> {
    let leases = entry.program.algorithm.is_some_and(Builtin::leases);
    (leases && matches!(cost, Charge::Take(1..))).then(settle::new_id)
}
