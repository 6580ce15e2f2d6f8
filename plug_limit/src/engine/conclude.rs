//! What an evaluation comes to once its backend answered: allowed, let through by shadow mode,
//! denied (and remembered by the deny cache), or failed by the limiter's hook and failure
//! policy; the one place each happens.

use super::Decider;
use super::prepare::Evaluation;
use super::verdict::{Verdict, refuse_or_pass};
use crate::backend::Started;
use crate::config::FailurePolicy;
use crate::error::Error;
use crate::outcome::Outcome;
use crate::rejection::RateLimitRejection;
use crate::telemetry::{self, DecisionLabel};

impl Decider {
    /// Turns an evaluation into the request's fate: allowed, denied (and remembered by the
    /// deny cache), or failed by the limiter's policy.
    #[inline(always)]
    pub(super) fn conclude(
        &self,
        evaluation: &Evaluation<'_>,
        result: Result<Outcome, Error>,
    ) -> Verdict {
        match result {
            Ok(outcome) => self.verdict(evaluation, outcome),
            Err(error) => self.fail(evaluation, error),
        }
    }

    /// What an outcome, from the backend or from the memory fallback, means for the request:
    /// allowed, let through by shadow mode, or denied (and remembered by the deny cache).
    /// Inline to its callers: most outcomes are allowed, and are not moved into a call and out.
    #[inline(always)]
    pub(super) fn verdict(&self, evaluation: &Evaluation<'_>, outcome: Outcome) -> Verdict {
        let entry = evaluation.entry();
        // Styled before the deny cache keeps a denial, so its answers read as this one does.
        let outcome = entry
            .style
            .finish(|| evaluation.keys().first(), evaluation.opts(), outcome);
        // Most checks: allowed, and no hook to hear of it. Returned at once, the outcome is
        // moved once rather than through every arm below.
        if entry.hook.is_none() && outcome.is_allowed() {
            evaluation.watch().decided(DecisionLabel::Allowed);
            return Ok(Some(outcome));
        }
        self.verdict_heard(evaluation, outcome)
    }

    /// [`verdict`](Self::verdict) of a denial, or of an outcome a hook hears of.
    pub(super) fn verdict_heard(&self, evaluation: &Evaluation<'_>, outcome: Outcome) -> Verdict {
        let entry = evaluation.entry();
        // The hook speaks first; the default path still counts, caches and logs the decision.
        let hooked = entry
            .hooked(&outcome)
            // Shadow mode never refuses, whatever a hook answers to a would-be denial.
            .filter(|verdict| !(entry.shadow && verdict.is_err()));
        let verdict = match outcome {
            outcome if outcome.is_allowed() => {
                evaluation.watch().decided(DecisionLabel::Allowed);
                Ok(Some(outcome))
            }
            outcome if entry.shadow => {
                if let Some(suppressed) = entry.shadow_denials.due() {
                    tracing::info!(target: "plug_limit", limiter = %entry.name(), suppressed, "request would be denied (shadow mode)");
                }
                evaluation.watch().decided(DecisionLabel::ShadowDenied);
                Ok(Some(outcome))
            }
            outcome => {
                tracing::debug!(target: "plug_limit", limiter = %entry.name(), "request denied");
                evaluation.watch().decided(DecisionLabel::Denied);
                evaluation.remember_denial(&self.denials, &outcome);
                Err(RateLimitRejection::denied(outcome))
            }
        };
        hooked.unwrap_or(verdict)
    }

    /// Logs a check that could not decide and applies the limiter's failure policy: the one
    /// place both happen.
    pub(super) fn fail(&self, evaluation: &Evaluation<'_>, error: Error) -> Verdict {
        let entry = evaluation.entry();
        entry.failures.log(entry.log_level, entry.name(), &error);
        evaluation.watch().failed(telemetry::cause(&error));
        if let Some(verdict) = entry.hooked_failure(&error) {
            evaluation.watch().undecided();
            return verdict;
        }
        if entry.on_failure == FailurePolicy::Memory
            && let Started::Done(result) = self.fallback().start(evaluation.call())
        {
            return match self.admit(evaluation, self.fallback(), result) {
                Ok(outcome) => {
                    evaluation.watch().fell_back();
                    self.verdict(evaluation, outcome)
                }
                Err(error) => {
                    entry.failures.log(entry.log_level, entry.name(), &error);
                    evaluation.watch().undecided();
                    Ok(None)
                }
            };
        }
        evaluation.watch().undecided();
        refuse_or_pass(entry.on_failure, error)
    }
}
