//! The headers of stacked limits: what one response says of several limits.
//!
//! In the legacy style the tightest limit speaks for all (the least remaining after the
//! request; ties: the longest reset, then the first given), as `multi_window` does for its
//! windows. In the draft-10 style every limit's policy is listed: `RateLimit-Policy` and
//! `RateLimit` carry one item per limit, the draft's way of reporting several quotas.

use super::headers::Headers;
use super::{Decision, Outcome};
use crate::algorithm::Report;

/// How tight a limit is after a request, by its report: what remains, and how long until it
/// resets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tightness {
    remaining: i64,
    reset: i64,
}

impl Tightness {
    /// The tightness `report` tells (a limit without a report counts as the loosest).
    pub(crate) fn of(report: Option<&Report>) -> Self {
        report.map_or(
            Self {
                remaining: i64::MAX,
                reset: 0,
            },
            |report| Self {
                remaining: report.remaining(),
                reset: report.reset(),
            },
        )
    }

    /// Whether `self` is tighter than `other`: less remains, or as much and its reset is
    /// further away. Of two as tight, the first given speaks.
    fn is_tighter_than(self, other: Self) -> bool {
        self.remaining < other.remaining
            || (self.remaining == other.remaining && self.reset > other.reset)
    }
}

/// The tightest of the limits offered, in one pass, each told by its tightness: less remains,
/// or as much and its reset is further away; of two as tight, the first offered.
pub(crate) struct Tightest<T> {
    best: Option<(Tightness, T)>,
}

impl<T> Default for Tightest<T> {
    fn default() -> Self {
        Self { best: None }
    }
}

impl<T> Tightest<T> {
    pub(crate) fn offer(&mut self, tightness: Tightness, limit: T) {
        if self
            .best
            .as_ref()
            .is_none_or(|(best, _)| tightness.is_tighter_than(*best))
        {
            self.best = Some((tightness, limit));
        }
    }

    /// The tightest limit offered; `None` when none was.
    pub(crate) fn take(self) -> Option<T> {
        self.best.map(|(_, limit)| limit)
    }
}

/// The outcome of an allowed stack, from the outcome of its tightest limit: allowed, whatever
/// that said (a shadow limit's would-be denial).
pub(crate) fn for_the_stack(tightest: Option<Outcome>) -> Outcome {
    // A stack has at least one limit (its callers hold to it); without any, an allow without
    // headers rather than a panic.
    debug_assert!(tightest.is_some(), "a stack without a limit");
    let Some(mut outcome) = tightest else {
        return Outcome::new(Decision::Allow, Vec::new());
    };
    outcome.decision = Decision::Allow;
    outcome
}

/// The outcome of an allowed stack, from each limit's tightness and outcome: the tightest
/// outcome's report, with the draft-10 items of every outcome, in order.
/// Allowed, whatever the tightest said (a shadow limit's would-be denial).
pub(crate) fn merge(limits: impl IntoIterator<Item = (Tightness, Outcome)>) -> Outcome {
    // In one pass, keeping only the tightest so far: a stack's outcomes are not collected.
    let mut tightest = Tightest::default();
    let mut items = None;
    for (tightness, outcome) in limits {
        if let Some(theirs) = outcome
            .reported_as()
            .and_then(|reported| reported.draft10.as_ref())
        {
            match &mut items {
                None => items = Some(theirs.clone()),
                Some(items) => items.append(theirs),
            }
        }
        tightest.offer(tightness, outcome);
    }
    let mut outcome = for_the_stack(tightest.take());
    let Some(items) = items else {
        return outcome;
    };
    match outcome.reported_mut() {
        Some(reported) if reported.draft10.is_some() => reported.draft10 = Some(items),
        // A tightest limit of the legacy style among draft-10 ones keeps its own headers,
        // after the others' lists: a client pacing by either reads the binding limit.
        _ => {
            if let Some(lists) = items.render() {
                let mut headers = lists.to_vec();
                headers.extend(outcome.headers().iter().cloned());
                outcome.headers = Headers::made(headers);
            }
        }
    }
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::{Builtin, Field, Report, Runtime};
    use crate::limit::Opt;
    use crate::outcome::ietf::{PartitionKeys, parse};
    use crate::outcome::{HeaderStyle, Names, Styler};

    fn reported(remaining: i64, reset: i64) -> Outcome {
        with_limit(9, remaining, reset)
    }

    fn with_limit(limit: i64, remaining: i64, reset: i64) -> Outcome {
        let values = [Field::Int(limit), Field::Int(reset), Field::Int(remaining)];
        Outcome::reported(
            Decision::Allow,
            Names::Builtin(Builtin::FixedWindow.headers()),
            Report::from_values(&values, 0).unwrap(),
            Vec::new(),
        )
    }

    fn merged(limits: Vec<Outcome>) -> Outcome {
        merge(
            limits
                .into_iter()
                .map(|outcome| (Tightness::of(outcome.report()), outcome)),
        )
    }

    #[test]
    fn the_tightest_is_the_least_remaining_then_the_longest_reset_then_the_first() {
        // The position of the outcome `merge` keeps: each is told apart by its limit.
        let speaks = |pairs: &[(i64, i64)]| {
            let limits = pairs
                .iter()
                .zip(1..)
                .map(|(&(remaining, reset), limit)| with_limit(limit, remaining, reset))
                .collect();
            let kept = merged(limits);
            let limit = kept.header("x-ratelimit-limit").unwrap().to_str().unwrap();
            limit.parse::<usize>().unwrap() - 1
        };
        assert_eq!(speaks(&[(5, 10), (2, 1), (7, 99)]), 1);
        assert_eq!(speaks(&[(2, 10), (2, 60), (2, 60)]), 1);
        assert_eq!(speaks(&[(3, 10), (3, 10)]), 0);
    }

    #[test]
    fn legacy_outcomes_merge_to_the_tightest() {
        let merged = merged(vec![reported(5, 1), reported(2, 60)]);
        assert_eq!(merged.header("x-ratelimit-remaining").unwrap(), "2");
        assert_eq!(merged.header("x-ratelimit-reset").unwrap(), "60");
        assert_eq!(merged.headers().len(), 3);
    }

    #[test]
    fn draft10_outcomes_list_every_policy() {
        let keys = || PartitionKeys::new(b"0123456789abcdef").unwrap();
        let draft = |name: &str, remaining: i64| {
            Styler::new(name, Some(Builtin::FixedWindow), HeaderStyle::Draft10, keys).finish(
                || "k",
                &[Opt::Int(10), Opt::Int(1)],
                reported(remaining, 1),
            )
        };
        let merged = merged(vec![draft("a", 4), draft("b", 1)]);
        let members = |name: &str| parse(merged.header(name).unwrap()).unwrap();
        let policies: Vec<_> = members("ratelimit-policy")
            .iter()
            .map(|policy| (policy.name.clone(), policy.int("q"), policy.int("w")))
            .collect();
        assert_eq!(
            policies,
            [
                ("a".to_owned(), Some(10), Some(1)),
                ("b".to_owned(), Some(10), Some(1))
            ]
        );
        let current: Vec<_> = members("ratelimit")
            .iter()
            .map(|item| (item.name.clone(), item.int("r"), item.int("t")))
            .collect();
        assert_eq!(
            current,
            [
                ("a".to_owned(), Some(4), Some(1)),
                ("b".to_owned(), Some(1), Some(1))
            ]
        );
        assert_eq!(merged.headers().len(), 2);
    }

    #[test]
    fn a_legacy_tightest_among_draft10_limits_keeps_its_own_headers() {
        let keys = || PartitionKeys::new(b"0123456789abcdef").unwrap();
        let draft = Styler::new("b", Some(Builtin::FixedWindow), HeaderStyle::Draft10, keys)
            .finish(|| "k", &[Opt::Int(10), Opt::Int(1)], reported(5, 1));
        let merged = merged(vec![reported(1, 60), draft]);
        let names: Vec<_> = merged
            .headers()
            .iter()
            .map(|(name, _)| name.as_str())
            .collect();
        assert_eq!(
            names,
            [
                "ratelimit-policy",
                "ratelimit",
                "x-ratelimit-limit",
                "x-ratelimit-reset",
                "x-ratelimit-remaining"
            ]
        );
        assert_eq!(merged.header("x-ratelimit-remaining").unwrap(), "1");
        assert_eq!(
            parse(merged.header("ratelimit").unwrap()).unwrap()[0].int("r"),
            Some(5)
        );
    }
}
