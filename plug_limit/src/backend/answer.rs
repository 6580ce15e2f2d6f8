//! What a backend answers a stack: each part's [`Answer`], Redis's reply read to an outcome
//! or a twin's reply checked as a reply is (a [`Twin`]), made an outcome only when the stack
//! keeps it.

use deadpool_redis::redis::Value;
use smallvec::SmallVec;

use crate::algorithm::{Field, Reply, Report};
use crate::error::{Error, ReplyError};
use crate::outcome::{Decision, Names, Outcome, declared_name};

/// What stacked limits answered: each part's answer, in order, `None` for those not run
/// (after a denial).
pub(crate) type Stacked = Result<Outcomes, Error>;

/// Each stacked part's answer, a stack's few held inline.
pub(crate) type Outcomes = SmallVec<[Option<Answer>; 4]>;

/// What one part of a stack answered: Redis's reply, read to an outcome, or a twin's reply,
/// checked as a reply is and made an outcome only when the stack keeps it. Of a stack that
/// allows, one limit speaks for all (in the legacy style): the others' outcomes, each an
/// allocation, would be made only to be dropped.
#[derive(Debug)]
pub(crate) enum Answer {
    Outcome(Outcome),
    Twin(Twin),
}

impl Answer {
    pub(crate) fn is_allowed(&self) -> bool {
        match self {
            Self::Outcome(outcome) => outcome.is_allowed(),
            Self::Twin(twin) => twin.is_allowed(),
        }
    }

    /// The numbers a built-in reported of the limit.
    pub(crate) fn report(&self) -> Option<&Report> {
        match self {
            Self::Outcome(outcome) => outcome.report(),
            Self::Twin(twin) => Some(twin.report()),
        }
    }

    /// The outcome, its values under `names` (its limiter's header names) for a twin's.
    pub(crate) fn into_outcome(self, names: &Names) -> Outcome {
        match self {
            Self::Outcome(outcome) => outcome,
            Self::Twin(twin) => twin.into_outcome(names),
        }
    }
}

/// A twin's reply, checked as its script's reply would be: an outcome but for its names
/// (see [`Answer`](super::Answer)).
#[derive(Debug)]
pub(crate) struct Twin {
    allow: bool,
    report: Report,
    /// The units a batch's `~n` granted and the milliseconds left of their window, which its
    /// script replies after the headers.
    granted: Option<(u32, i64)>,
}

impl Twin {
    /// `reply`, its values checked as a reply's are against `declared`, its limiter's
    /// header names: a name for each, then each a number after the first, which is a valid
    /// header value. A twin makes every value after the first a number by construction (its
    /// scenarios and the differential tests hold it to its script), so those are checked in
    /// debug builds only, where a script's reply, which a server may answer with anything, is
    /// checked always ([`Report::from_fields`]).
    #[inline(always)]
    pub(super) fn checked(reply: Reply, declared: &Names) -> Result<Self, Error> {
        let fields = reply.headers;
        if fields.len() > declared.len() {
            // The first value without a name, as a reply's check names it.
            declared_name(declared, declared.len())?;
        }
        let out_of_contract = |position, found| ReplyError::InvalidHeaderValue { position, found };
        if !fields.first().is_none_or(Field::is_valid) {
            return Err(out_of_contract(0, "bytes not allowed in a header").into());
        }
        let report = Report::unchecked(fields, reply.window);
        debug_assert_eq!(report.check(), Ok(()), "a twin's values out of contract");
        Ok(Self {
            allow: reply.allow,
            report,
            granted: reply.granted,
        })
    }

    pub(crate) fn is_allowed(&self) -> bool {
        self.allow
    }

    pub(crate) fn report(&self) -> &Report {
        &self.report
    }

    /// The outcome, its values under `names`: those it was checked against.
    #[inline(always)]
    pub(crate) fn into_outcome(self, names: &Names) -> Outcome {
        let decision = if self.allow {
            Decision::Allow
        } else {
            Decision::Deny
        };
        let extra: Box<[Value]> = match self.granted {
            Some((units, window_ms)) => Box::new([Value::Int(units.into()), Value::Int(window_ms)]),
            None => Box::default(),
        };
        Outcome::reported(decision, names.clone(), self.report, extra)
    }
}
