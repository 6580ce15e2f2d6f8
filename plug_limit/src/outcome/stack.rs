//! The headers of stacked limits: what one response says of several limits.
//!
//! In the legacy style the tightest limit speaks for all (the least remaining after the
//! request; ties: the longest reset, then the first given), as `multi_window` does for its
//! windows. In the draft-10 style every limit's policy is listed: `RateLimit-Policy` and
//! `RateLimit` carry one item per limit, the draft's way of reporting several quotas.

use http::{HeaderName, HeaderValue};

use super::ietf::{POLICY, RATELIMIT};
use super::{Decision, Outcome};

/// How tight a limit is after a request, by its legacy header values: what remains, and how
/// long until it resets. Read before a header style replaces them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tightness {
    remaining: i64,
    reset: i64,
}

impl Tightness {
    /// The tightness `outcome` reports (a value it lacks counts as the loosest).
    pub(crate) fn of(outcome: &Outcome) -> Self {
        let number = |name: &str, missing: i64| {
            outcome
                .header(name)
                .and_then(|value| value.to_str().ok()?.parse().ok())
                .unwrap_or(missing)
        };
        Self {
            remaining: number("x-ratelimit-remaining", i64::MAX),
            reset: number("x-ratelimit-reset", 0),
        }
    }
}

/// The position of the tightest of `limits`: the least remaining, then the longest reset,
/// then the first.
fn tightest(limits: &[Tightness]) -> usize {
    let mut best = 0;
    for (i, limit) in limits.iter().enumerate().skip(1) {
        let current = limits[best];
        if limit.remaining < current.remaining
            || (limit.remaining == current.remaining && limit.reset > current.reset)
        {
            best = i;
        }
    }
    best
}

/// The outcome of an allowed stack, from each limit's tightness and outcome: the tightest
/// outcome's headers, with the draft-10 lists made of every outcome's items, in order.
/// Allowed, whatever the tightest said (a shadow limit's would-be denial).
pub(crate) fn merge(limits: Vec<(Tightness, Outcome)>) -> Outcome {
    let tightest = tightest(
        &limits
            .iter()
            .map(|(tightness, _)| *tightness)
            .collect::<Vec<_>>(),
    );
    let mut outcomes: Vec<Outcome> = limits.into_iter().map(|(_, outcome)| outcome).collect();
    let lists: Vec<(HeaderName, HeaderValue)> = [POLICY, RATELIMIT]
        .into_iter()
        .filter_map(|name| {
            let items: Vec<&[u8]> = outcomes
                .iter()
                .filter_map(|outcome| outcome.header(name.as_str()))
                .map(HeaderValue::as_bytes)
                .collect();
            // Items of Structured Field lists join with ", " (RFC 9651, section 3.1).
            let joined = items.join(&b", "[..]);
            let value = HeaderValue::from_bytes(&joined).ok()?;
            (!items.is_empty()).then_some((name, value))
        })
        .collect();
    let mut outcome = outcomes.swap_remove(tightest);
    outcome.decision = Decision::Allow;
    if !lists.is_empty() {
        outcome.edit_headers(|headers| {
            headers.retain(|(name, _)| *name != POLICY && *name != RATELIMIT);
            headers.splice(0..0, lists);
        });
    }
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    fn legacy(remaining: &str, reset: &str) -> Outcome {
        Outcome::new(
            Decision::Allow,
            vec![
                (
                    HeaderName::from_static("x-ratelimit-limit"),
                    HeaderValue::from_static("9"),
                ),
                (
                    HeaderName::from_static("x-ratelimit-reset"),
                    HeaderValue::from_str(reset).unwrap(),
                ),
                (
                    HeaderName::from_static("x-ratelimit-remaining"),
                    HeaderValue::from_str(remaining).unwrap(),
                ),
            ],
        )
    }

    #[test]
    fn the_tightest_is_the_least_remaining_then_the_longest_reset_then_the_first() {
        let of = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(remaining, reset)| Tightness::of(&legacy(remaining, reset)))
                .collect::<Vec<_>>()
        };
        assert_eq!(tightest(&of(&[("5", "10"), ("2", "1"), ("7", "99")])), 1);
        assert_eq!(tightest(&of(&[("2", "10"), ("2", "60"), ("2", "60")])), 1);
        assert_eq!(tightest(&of(&[("3", "10"), ("3", "10")])), 0);
    }

    #[test]
    fn legacy_outcomes_merge_to_the_tightest() {
        let limits = [legacy("5", "1"), legacy("2", "60")];
        let merged = merge(
            limits
                .map(|outcome| (Tightness::of(&outcome), outcome))
                .into(),
        );
        assert_eq!(merged.header("x-ratelimit-remaining").unwrap(), "2");
        assert_eq!(merged.header("x-ratelimit-reset").unwrap(), "60");
        assert_eq!(merged.headers().len(), 3);
    }

    #[test]
    fn draft10_outcomes_list_every_policy() {
        let draft = |name: &str, r: u32| {
            Outcome::new(
                Decision::Allow,
                vec![
                    (
                        POLICY,
                        HeaderValue::from_str(&format!("\"{name}\";q=10;w=1")).unwrap(),
                    ),
                    (
                        RATELIMIT,
                        HeaderValue::from_str(&format!("\"{name}\";r={r};t=1")).unwrap(),
                    ),
                ],
            )
        };
        let limits = [draft("a", 4), draft("b", 1)];
        let merged = merge(
            limits
                .map(|outcome| (Tightness::of(&outcome), outcome))
                .into(),
        );
        assert_eq!(
            merged.header("ratelimit-policy").unwrap(),
            r#""a";q=10;w=1, "b";q=10;w=1"#
        );
        assert_eq!(
            merged.header("ratelimit").unwrap(),
            r#""a";r=4;t=1, "b";r=1;t=1"#
        );
        assert_eq!(merged.headers().len(), 2);
    }
}
