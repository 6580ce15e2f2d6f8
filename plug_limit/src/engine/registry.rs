//! The registered limiters, each with every setting resolved, so the hot path never falls
//! back on a default; and what a limiter's hook makes of a result.

use std::collections::HashMap;
use std::collections::hash_map::Entry::Vacant;
use std::sync::Arc;

use plug_limit_options::Builtin;

use super::Verdict;
use super::log_throttle::LogThrottle;
use super::ruling::RuleSet;
use crate::backend::{Backend, Program};
use crate::config::{FailurePolicy, KeyFailure, LogLevel};
use crate::engine::batch::Batches;
use crate::error::{BuildError, Error};
use crate::hook::{Action, Check, Hook};
use crate::key::KeyExtractor;
use crate::limit::LimitRef;
use crate::outcome::{Decision, Outcome, Styler};
use crate::rejection::RateLimitRejection;

/// A registered limiter.
pub(crate) struct Entry {
    pub(crate) program: Program,
    /// Its own backend (a limiter's own pool), if any.
    pub(crate) backend: Option<Backend>,
    pub(crate) key: Arc<dyn KeyExtractor>,
    pub(crate) on_failure: FailurePolicy,
    pub(crate) on_key_failure: KeyFailure,
    /// Denials are cached locally until their wait ends.
    pub(crate) deny_cache: bool,
    pub(crate) log_level: LogLevel,
    pub(crate) failures: LogThrottle,
    /// Shadow mode: decide and count, but never refuse.
    pub(crate) shadow: bool,
    /// The would-be denials of shadow mode, logged at most once a second.
    pub(crate) shadow_denials: LogThrottle,
    /// Gives its outcomes their final headers, in its header style.
    pub(crate) style: Styler,
    /// The allow- and deny-lists and the skip predicate; `None` when there are none.
    pub(crate) rules: Option<Arc<RuleSet>>,
    /// Sees every result and shapes the response; `None`: the default 429 and the policies.
    pub(crate) hook: Option<Arc<dyn Hook>>,
    /// Its local batches, if it takes them (see `engine/batch/`).
    pub(crate) batches: Option<Batches>,
}

impl Entry {
    /// The limiter's registered name.
    pub(crate) fn name(&self) -> &str {
        &self.program.name
    }

    /// What its hook makes of `outcome`; `None` without a hook, or to keep the default path.
    pub(crate) fn hooked(&self, outcome: &Outcome) -> Option<Verdict> {
        consult(self.hook.as_deref()?, self.name(), outcome)
    }

    /// What its hook makes of `error`; `None` without a hook, or to keep the failure policy.
    pub(crate) fn hooked_failure(&self, error: &Error) -> Option<Verdict> {
        failed(self.hook.as_deref()?, self.name(), error)
    }
}

/// What `hook` makes of `limiter`'s outcome: `None` keeps the default path.
fn consult(hook: &dyn Hook, limiter: &str, outcome: &Outcome) -> Option<Verdict> {
    let check = if outcome.is_allowed() {
        Check::Allowed(outcome)
    } else {
        Check::Denied(outcome)
    };
    overrides(hook.on_check(limiter, check), Some(outcome))
}

/// What `hook` makes of `limiter`'s failure: `None` keeps the failure policy.
fn failed(hook: &dyn Hook, limiter: &str, error: &Error) -> Option<Verdict> {
    overrides(hook.on_check(limiter, Check::Failed(error)), None)
}

fn overrides(action: Action, outcome: Option<&Outcome>) -> Option<Verdict> {
    match action {
        Action::Default => None,
        Action::Proceed(headers) => {
            let headers = headers
                .iter()
                .map(|(name, value)| (name.clone(), value.clone()))
                .collect();
            let extra = outcome
                .map(|outcome| outcome.extra().to_vec())
                .unwrap_or_default();
            let proceed = Outcome::with_extra(Decision::Allow, headers, extra);
            // The request proceeds on what its check took: a lease, a reservation to settle.
            Some(Ok(Some(match outcome {
                Some(outcome) => proceed.with_debt_of(outcome),
                None => proceed,
            })))
        }
        Action::Respond(response) => Some(Err(RateLimitRejection::answered(response))),
    }
}

/// Limiters by name: the built-ins and the custom ones.
///
/// Hashed with foldhash, not std's SipHash: only registration fills the table, so a name from
/// a request (a run-time limit's) cannot crowd it; an unknown name costs one probe like any
/// other. A limit naming a built-in ([`LimitRef::builtin`], found when the limit was made)
/// finds its limiter by the built-in's place instead, without hashing its name: every
/// request's check looks its limiter up.
#[derive(Default)]
pub(crate) struct Registry {
    entries: Vec<Entry>,
    by_name: HashMap<Box<str>, usize, foldhash::fast::RandomState>,
    /// The place in `entries` of the limiter registered under each built-in's name, by the
    /// built-in's place in [`Builtin::ALL`] (its discriminant: checked below). A built-in
    /// without a place here would be found by its name.
    builtins: [Option<usize>; Builtin::ALL.len()],
}

// A built-in's discriminant is its place in `Builtin::ALL`, which sizes `builtins`.
const _: () = {
    let mut place = 0;
    while place < Builtin::ALL.len() {
        assert!(Builtin::ALL[place] as usize == place);
        place += 1;
    }
};

impl Registry {
    /// Registers `entry` under its name; `false` when the name was taken.
    pub(crate) fn insert(&mut self, entry: Entry) -> bool {
        let place = self.entries.len();
        let Vacant(name) = self.by_name.entry(entry.name().into()) else {
            return false;
        };
        name.insert(place);
        if let Some(builtin) = Builtin::from_name(entry.name())
            && let Some(slot) = self.builtins.get_mut(builtin as usize)
        {
            *slot = Some(place);
        }
        self.entries.push(entry);
        true
    }

    pub(crate) fn contains(&self, name: &str) -> bool {
        self.by_name.contains_key(name)
    }

    /// Refuses a limit this handle cannot check, before any request: a limiter not
    /// registered (with the registered name nearest to it, when one is near enough to be a
    /// typo of it), and what only the registry knows of the limit: a custom script takes no
    /// cost and no refund, a built-in under a name of its own refuses options as its script
    /// would ([`check_against`](crate::limit::check_against)).
    pub(crate) fn admits(&self, limit: LimitRef<'_>) -> Result<(), BuildError> {
        let name = limit.limiter;
        let Some(entry) = self
            .by_name
            .get(name)
            .and_then(|&place| self.entries.get(place))
        else {
            let quoted = plug_limit_options::excerpt(name);
            let rule = match nearest(name, self.by_name.keys().map(|known| &**known)) {
                Some(known) => format!(
                    "`{quoted}` is not registered with this PlugLimit; did you mean `{}`?",
                    plug_limit_options::excerpt(known)
                ),
                None => format!("`{quoted}` is not registered with this PlugLimit"),
            };
            return Err(BuildError::invalid("limiter", rule));
        };
        crate::limit::check_against(limit, entry.program.algorithm)
    }

    /// The limiter registered as `name`.
    pub(crate) fn get(&self, name: &str) -> Result<&Entry, Error> {
        self.by_name
            .get(name)
            .and_then(|&place| self.entries.get(place))
            .ok_or_else(|| Error::UnknownLimiter(plug_limit_options::excerpt(name).into_owned()))
    }

    /// The limiter `limit` names: [`get`](Self::get) of its name, found by its built-in's
    /// place when it names one.
    pub(crate) fn of(&self, limit: &LimitRef<'_>) -> Result<&Entry, Error> {
        let registered = limit
            .builtin
            .and_then(|builtin| *self.builtins.get(builtin as usize)?)
            .and_then(|place| self.entries.get(place));
        match registered {
            Some(entry) => Ok(entry),
            None => self.get(limit.limiter),
        }
    }

    /// Every registered limiter.
    pub(crate) fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter()
    }

    /// The registered names, sorted.
    pub(crate) fn names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.entries.iter().map(Entry::name).collect();
        names.sort_unstable();
        names
    }
}

/// The name of `known` nearest to `name` by edits (a letter added, dropped, changed or two
/// swapped), when it is a few edits away: one for every three letters of the name, at least
/// one. A name longer than any limiter's (64 bytes, and a few edits) is near none.
fn nearest<'a>(name: &str, known: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    if name.len() > 72 {
        return None;
    }
    known
        .map(|candidate| (strsim::damerau_levenshtein(name, candidate), candidate))
        .filter(|&(edits, candidate)| edits <= (candidate.chars().count() / 3).max(1))
        .min()
        .map(|(_, candidate)| candidate)
}
