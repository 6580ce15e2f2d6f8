//! Stacked limits: several limits on one request (per client, per tenant, global; or 10 a
//! second and 1,000 a day), decided in one backend call that consumes from all only if all
//! allow.
//!
//! Each limit goes through the same steps as alone (its limiter, rules and key, its deny
//! cache), then all of them through one dispatch. A limit whose rules skip the request, or
//! whose key fails with [`KeyFailure::Pass`](crate::KeyFailure::Pass), leaves the stack; a
//! refusal by any ends the request.

use http::request::Parts;
use smallvec::SmallVec;
use tracing::Instrument;

use super::prepare::{Evaluation, styled};
use super::prepare::{Prepared, Reading};
use super::verdict::refuse_or_pass;
use super::verdict::{StartedCheck, Verdict, waiting};
use super::{Decider, Entry};
use crate::backend::Started;
use crate::backend::sharded::few;
use crate::backend::{Answer, Backend, Outcomes, StackPart};
use crate::config::FailurePolicy;
use crate::engine::settle::RequestDebt;
use crate::error::Error;
use crate::limit::Charge;
use crate::limit::LimitRef;
use crate::outcome::Outcome;
use crate::outcome::tightest::{Tightest, Tightness, for_the_stack, merge};
use crate::rejection::RateLimitRejection;
use crate::telemetry::{self, DecisionLabel, Watch};

impl Decider {
    /// Decides one request under every limit of `limits` at once.
    pub(crate) async fn check_request(&self, limits: &[LimitRef<'_>], parts: &Parts) -> Verdict {
        let started = match limits {
            [limit] => self.start(limit, parts),
            limits => self.start_stack(limits, parts),
        };
        match started {
            Started::Done(verdict) => verdict,
            Started::Waiting(call) => call.await,
        }
    }

    /// Runs a stack's check as far as it goes without waiting.
    fn start_stack<'a>(&'a self, limits: &[LimitRef<'a>], parts: &'a Parts) -> StartedCheck<'a> {
        if !self.enabled.is_enabled() {
            return Started::Done(Ok(None));
        }
        let mut stack = Stack {
            evaluations: Few::new(),
        };
        // A limit keyed by the header the limit before it read does not read it again, nor
        // looks the matched route up again.
        let mut reading = Reading::default();
        for limit in limits {
            // Pushed where it is made: an evaluation is some three hundred bytes. A limit whose
            // rules skip the request, or without a key it may pass without, leaves the stack.
            if let Prepared::Answered(Err(rejection)) =
                self.prepare(limit, parts, Some(&mut reading), |evaluation| {
                    stack.evaluations.push(evaluation)
                })
            {
                stack.undecided();
                return Started::Done(Err(rejection));
            }
        }
        if stack.evaluations.len() < 2 {
            return stack
                .evaluations
                .pop()
                .map_or(Started::Done(Ok(None)), |evaluation| {
                    let _entered = evaluation.watch().entered();
                    self.run(evaluation)
                });
        }
        // What is decided without waiting logs within the first limit's span, as a stack that
        // waits on Redis does.
        let _entered = stack.evaluations[0].watch().entered();
        if let Some(verdict) = stack.cached_denial(self) {
            return Started::Done(verdict);
        }
        let entries = stack.evaluations.iter().map(Evaluation::entry);
        let backend = match self.stack_backend(entries) {
            Ok(backend) => backend,
            Err(error) => return Started::Done(stack.fail(self, error)),
        };
        for evaluation in &stack.evaluations {
            evaluation.watch().dispatched(backend.name());
        }
        let mut answers = Outcomes::new();
        match backend.start_stack(stack.parts(), &mut answers) {
            Err(error) | Ok(Started::Done(Err(error))) => Started::Done(stack.fail(self, error)),
            Ok(Started::Done(Ok(()))) => Started::Done(stack.verdict(self, backend, &mut answers)),
            Ok(Started::Waiting(redis)) => {
                let span = stack.evaluations[0].watch().span().cloned();
                waiting(span, async move {
                    match redis.eval_stack(&few(stack.parts())).await {
                        Ok(mut answers) => stack.verdict(self, backend, &mut answers),
                        Err(error) => stack.fail(self, error),
                    }
                })
            }
        }
    }

    /// Evaluates stacked limits, each for its programmatic client key: the same dispatch as a request's
    /// stack, with every error returned to the caller. Each limit is watched as a
    /// programmatic check of its own: the stack's decision is the one that denied it, or every
    /// limit's allow; the limits that decided nothing (before a denial, or not run after it)
    /// end undecided, as in a request's stack.
    pub(crate) async fn check_all(
        &self,
        limits: &[(LimitRef<'_>, &str)],
    ) -> Result<Outcome, Error> {
        let watches: Vec<Watch<'_>> = limits
            .iter()
            .map(|(limit, _)| {
                let scope = limit.scope.unwrap_or_default();
                Watch::call(
                    &self.telemetry,
                    limit.limiter,
                    scope,
                    Charge::Take(limit.cost),
                )
            })
            .collect();
        // Within the first limit's span when something would record it (see `waiting`).
        let work = self.check_stack(limits, &watches);
        let result = match watches.first().and_then(Watch::span) {
            None => work.await,
            Some(span) => work.instrument(span.clone()).await,
        };
        if let Err(error) = &result {
            for watch in &watches {
                watch.failed(telemetry::cause(error));
                watch.undecided();
            }
        }
        result
    }

    /// [`check_all`](Self::check_all) but for its errors' telemetry.
    async fn check_stack(
        &self,
        limits: &[(LimitRef<'_>, &str)],
        watches: &[Watch<'_>],
    ) -> Result<Outcome, Error> {
        let mut checks = Vec::with_capacity(limits.len());
        for &(limit, client) in limits {
            let entry = self.registry.of(&limit)?;
            let keys = self.client_keys(entry, limit, client);
            checks.push((entry, keys, limit));
        }
        let backend = self.stack_backend(checks.iter().map(|(entry, ..)| *entry))?;
        for watch in watches {
            watch.dispatched(backend.name());
        }
        let parts: Vec<StackPart<'_>> = checks
            .iter()
            .map(|(entry, keys, limit)| StackPart {
                program: &entry.program,
                keys,
                opts: limit.opts,
                read_ahead: limit.read_ahead,
                cost: limit.cost,
                soft: false,
            })
            .collect();
        let mut outcomes = Outcomes::new();
        match backend.start_stack(parts.iter().copied(), &mut outcomes)? {
            Started::Done(result) => result?,
            Started::Waiting(redis) => outcomes = redis.eval_stack(&parts).await?,
        }
        let denier = outcomes
            .iter()
            .position(|outcome| outcome.as_ref().is_some_and(|o| !o.is_allowed()));
        for (at, watch) in watches.iter().enumerate() {
            match denier {
                Some(denier) if at == denier => watch.decided(DecisionLabel::Denied),
                Some(_) => watch.undecided(),
                None => watch.decided(DecisionLabel::Allowed),
            }
        }
        let mut allowed = Vec::with_capacity(outcomes.len());
        for ((entry, keys, limit), outcome) in checks.iter().zip(outcomes) {
            let Some(answer) = outcome else { continue };
            let tightness = Tightness::of(answer.report());
            let outcome = styled(entry, keys, limit.opts, answer);
            if !outcome.is_allowed() {
                return Ok(outcome);
            }
            allowed.push((tightness, outcome));
        }
        Ok(merge(allowed))
    }

    /// The one backend every limit of a stack runs on, or the error naming a limit that runs
    /// on another (its own Redis pool).
    fn stack_backend<'e>(
        &'e self,
        mut entries: impl Iterator<Item = &'e Entry>,
    ) -> Result<&'e Backend, Error> {
        let first = entries
            .next()
            .ok_or_else(|| Error::Input("a stack needs at least one limit".to_owned()))?;
        let backend = self.backend(first);
        match entries.find(|entry| !self.backend(entry).is(backend)) {
            None => Ok(backend),
            Some(apart) => Err(Error::Input(format!(
                "stacked limits run on one backend: `{}` runs on its own Redis pool",
                plug_limit_options::excerpt(apart.name())
            ))),
        }
    }
}

/// A stack's few limits, or what each one comes to, held inline: a request through three
/// stacked limits made about twenty allocations.
type Few<T> = SmallVec<[T; 4]>;

/// A request's limits, each prepared, decided in one backend call.
struct Stack<'a> {
    evaluations: Few<Evaluation<'a>>,
}

impl Stack<'_> {
    /// The stack's parts, as the backend takes them, made as they are read.
    fn parts(&self) -> impl Iterator<Item = StackPart<'_>> + Clone {
        self.evaluations.iter().map(Evaluation::stack_part)
    }

    /// Ends the watch of every limit without a decision.
    fn undecided(&self) {
        for evaluation in &self.evaluations {
            evaluation.watch().undecided();
        }
    }

    /// The verdict of the first denial a limit of the stack has cached, if any: the stack
    /// settled without a call.
    fn cached_denial(&self, decider: &Decider) -> Option<Verdict> {
        let evaluations = &self.evaluations;
        let at = evaluations
            .iter()
            .position(|evaluation| evaluation.cached().is_some())?;
        let (at, verdict) = evaluations[at..]
            .iter()
            .enumerate()
            .find_map(|(i, evaluation)| Some((at + i, decider.cached_denial(evaluation)?)))?;
        for (i, evaluation) in evaluations.iter().enumerate() {
            if i != at {
                evaluation.watch().undecided();
            }
        }
        Some(verdict)
    }

    /// What the answers of a stack, decided on `backend`, mean for the request: denied by the
    /// first limit that denied (not in shadow mode), else allowed with the headers of every
    /// limit, holding what each limit that settles after the response is owed.
    fn verdict(&self, decider: &Decider, backend: &Backend, answers: &mut Outcomes) -> Verdict {
        // One pass learns what the verdict turns on: the first limit that denied (not in
        // shadow mode), whether any allowed, whether any has a hook, and whether any lists
        // every limit's policy.
        let (mut denier, mut any_allowed, mut hooks, mut lists) = (None, false, false, false);
        for (at, (evaluation, answer)) in self.evaluations.iter().zip(answers.iter()).enumerate() {
            let entry = evaluation.entry();
            hooks |= entry.hook.is_some();
            lists |= entry.style.lists_policies();
            match answer {
                Some(answer) if answer.is_allowed() => any_allowed = true,
                Some(_) if !entry.shadow && denier.is_none() => denier = Some(at),
                _ => {}
            }
        }
        if let Some(denier) = denier {
            return self.denied(decider, answers, denier);
        }
        // A shadow limit's would-be denial speaks for nothing: the headers are those of the
        // limits that allowed (of every limit, when each one is a shadow denial), and the
        // request is allowed.
        let speaks = |answer: &Answer| !any_allowed || answer.is_allowed();
        // The limits whose hooks hear the merged outcome, gathered only when one has a hook.
        let mut heard: Few<&Entry> = Few::new();
        // Made only when a limit is owed something: most stacks owe nothing.
        let mut debts: Option<Vec<RequestDebt>> = None;
        // Read in place: only the answer that speaks is moved out, and made an outcome.
        let mut tightest = Tightest::default();
        for (at, (evaluation, answer)) in self.evaluations.iter().zip(answers.iter()).enumerate() {
            let Some(answer) = answer else {
                // Not run: an earlier limit denied.
                evaluation.watch().undecided();
                continue;
            };
            let entry = evaluation.entry();
            if answer.is_allowed() {
                evaluation.watch().decided(DecisionLabel::Allowed);
                // What an admitted stack owes each limit that settles after the response.
                if evaluation.terms().owes() {
                    let caches_denials = evaluation.cached().is_some();
                    debts.get_or_insert_with(Vec::new).push(decider.debt_of(
                        backend,
                        evaluation.call(),
                        evaluation.terms(),
                        caches_denials,
                        answer.report(),
                    ));
                }
            } else {
                if let Some(suppressed) = entry.shadow_denials.due() {
                    tracing::info!(target: "plug_limit", limiter = %entry.name(), suppressed, "request would be denied (shadow mode)");
                }
                evaluation.watch().decided(DecisionLabel::ShadowDenied);
            }
            if speaks(answer) {
                if hooks {
                    heard.push(entry);
                }
                tightest.offer(Tightness::of(answer.report()), at);
            }
        }
        // In the legacy style the tightest limit speaks for all, and only its outcome is made;
        // a limit in the draft-10 style lists every limit's policy.
        let merged = if lists {
            merge(self.evaluations.iter().zip(answers.iter_mut()).filter_map(
                |(evaluation, answer)| {
                    let answer = answer.take().filter(|answer| speaks(answer))?;
                    Some((Tightness::of(answer.report()), evaluation.styled(answer)))
                },
            ))
        } else {
            let speaking = tightest.take().and_then(|at| {
                let answer = answers.get_mut(at)?.take()?;
                Some(self.evaluations.get(at)?.styled(answer))
            });
            for_the_stack(speaking)
        };
        let merged = match debts.and_then(RequestDebt::stacked) {
            Some(debt) => merged.with_debt(debt),
            None => merged,
        };
        // The first hook with an answer speaks; a shadow limiter's cannot refuse.
        let hooked = heard.iter().find_map(|entry| {
            entry
                .hooked(&merged)
                .filter(|verdict| !(entry.shadow && verdict.is_err()))
        });
        hooked.unwrap_or(Ok(Some(merged)))
    }

    /// A stack denied by the limit at `denier` (a position in the stack): its outcome and
    /// default answer (or its hook's), its deny cache remembers; the limits before it got back
    /// what they took, and decided nothing, as did those after it, which did not run.
    fn denied(&self, decider: &Decider, answers: &mut Outcomes, denier: usize) -> Verdict {
        for (at, evaluation) in self.evaluations.iter().enumerate() {
            if at != denier {
                evaluation.watch().undecided();
            }
        }
        let answer = answers.get_mut(denier).and_then(Option::take);
        let Some((evaluation, answer)) = self.evaluations.get(denier).zip(answer) else {
            return Ok(None);
        };
        let entry = evaluation.entry();
        let outcome = evaluation.styled(answer);
        tracing::debug!(target: "plug_limit", limiter = %entry.name(), "request denied");
        evaluation.watch().decided(DecisionLabel::Denied);
        evaluation.remember_denial(&decider.denials, &outcome);
        entry
            .hooked(&outcome)
            .unwrap_or_else(|| Err(RateLimitRejection::denied(outcome)))
    }

    /// Logs a stack that could not decide and applies the strictest failure policy of its
    /// limits (`Closed`, then `Memory`, then `Open`), after their hooks.
    fn fail(&self, decider: &Decider, error: Error) -> Verdict {
        let lead = self.evaluations[0].entry();
        lead.failures.log(lead.log_level, lead.name(), &error);
        for evaluation in &self.evaluations {
            evaluation.watch().failed(telemetry::cause(&error));
        }
        if let Some(verdict) = self
            .evaluations
            .iter()
            .find_map(|evaluation| evaluation.entry().hooked_failure(&error))
        {
            self.undecided();
            return verdict;
        }
        let policy = self
            .evaluations
            .iter()
            .map(|evaluation| evaluation.entry().on_failure)
            .max_by_key(|policy| match policy {
                FailurePolicy::Open => 0,
                FailurePolicy::Memory => 1,
                FailurePolicy::Closed | FailurePolicy::LocalShare => 2,
            })
            .unwrap_or(FailurePolicy::Open);
        if policy == FailurePolicy::Memory {
            let mut answers = Outcomes::new();
            match decider.fallback().start_stack(self.parts(), &mut answers) {
                Ok(Started::Done(Ok(()))) => {
                    for evaluation in &self.evaluations {
                        evaluation.watch().fell_back();
                    }
                    return self.verdict(decider, decider.fallback(), &mut answers);
                }
                Ok(Started::Done(Err(error))) | Err(error) => {
                    lead.failures.log(lead.log_level, lead.name(), &error);
                }
                // The fallback is a memory backend: it never waits.
                Ok(Started::Waiting(_)) => {}
            }
        }
        self.undecided();
        refuse_or_pass(policy, error)
    }
}
