//! One limit's evaluation of one request, as prepared: its limiter, keys and limit, what it
//! owes after its response, and its watch. Its parts are its own: the stages that run it ask
//! it for what they need.

use super::deny_cache::DenyCache;
use super::keys::Keys;
use super::registry::Entry;
use super::settle::{self, Terms};
use crate::algorithm::Builtin;
use crate::backend::{Answer, Call, StackPart};
use crate::limit::{Charge, LimitRef, Opt, ReadAhead};
use crate::outcome::Outcome;
use crate::telemetry::Watch;

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
    /// `limit`, run by `entry`, counted under `keys`; `cached` when its limiter keeps a deny
    /// cache (see the field). Inline always, so that it is made where it lands.
    #[inline(always)]
    pub(super) fn new(
        entry: &'a Entry,
        limit: &LimitRef<'a>,
        keys: Keys<'a>,
        cached: Option<(u64, i64)>,
        watch: Watch<'a>,
    ) -> Self {
        Self {
            entry,
            keys,
            opts: limit.opts,
            read_ahead: limit.read_ahead,
            cost: limit.cost,
            cached,
            lease: lease_for(entry, Charge::Take(limit.cost)),
            terms: Terms {
                count_if: limit.count_if,
                settle: limit.settle,
            },
            watch,
        }
    }

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
