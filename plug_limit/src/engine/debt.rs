//! What an admitted request owes its limits after its response: the lease its call took,
//! what its terms say (`count_if`, `settle`), and the deny cache a refund lifts.

use std::time::Duration;

use super::Decider;
use super::prepare::Evaluation;
use super::settle::{Deadline, RequestDebt, Terms};
use crate::algorithm::Report;
use crate::backend::{Backend, Call};
use crate::error::Error;
use crate::outcome::Outcome;

impl Decider {
    /// `result` of `evaluation`'s call on `backend`, holding what it owes after its response.
    #[inline]
    pub(super) fn admit(
        &self,
        evaluation: &Evaluation<'_>,
        backend: &Backend,
        result: Result<Outcome, Error>,
    ) -> Result<Outcome, Error> {
        let caches_denials = evaluation.cached().is_some();
        self.admitted(
            backend,
            evaluation.call(),
            evaluation.terms(),
            caches_denials,
            result,
        )
    }

    /// `result` of `call` on `backend`, holding what an admitted request owes after its response:
    /// the lease `call` took, what `terms` say, and (`caches_denials`) the deny cache its refund
    /// must lift. A call that failed may still have taken its lease (a reply lost on the way
    /// back): it is given back at once.
    #[inline]
    pub(super) fn admitted(
        &self,
        backend: &Backend,
        call: Call<'_>,
        terms: Terms,
        caches_denials: bool,
        result: Result<Outcome, Error>,
    ) -> Result<Outcome, Error> {
        // Inline, so that a call that owes nothing after its response (most of them) does not
        // move its result in and out of a call.
        if call.lease.is_none() && !terms.owes() {
            return result;
        }
        self.indebted(backend, call, terms, caches_denials, result)
    }

    /// [`admitted`](Self::admitted) of a call that owes something after its response.
    fn indebted(
        &self,
        backend: &Backend,
        call: Call<'_>,
        terms: Terms,
        caches_denials: bool,
        result: Result<Outcome, Error>,
    ) -> Result<Outcome, Error> {
        match result {
            Ok(outcome) if outcome.is_allowed() => {
                let debt = self.debt_of(backend, call, terms, caches_denials, outcome.report());
                // A set clock, not real time, ends leases: renewals would keep them forever.
                let debt = if self.clock.is_none() {
                    debt.renewing()
                } else {
                    debt
                };
                Ok(outcome.with_debt(debt))
            }
            Ok(outcome) => Ok(outcome),
            Err(error) => {
                if call.lease.is_some() {
                    drop(RequestDebt::new(
                        backend,
                        call,
                        Terms::default(),
                        Deadline::after(None, Duration::ZERO),
                        None,
                    ));
                }
                Err(error)
            }
        }
    }

    /// What a request admitted with `outcome` by `call` on `backend` owes after its response:
    /// the lease `call` took and what `terms` say, refunds lifting the deny cache's denials
    /// (`caches_denials`) and going back only until the outcome's reset.
    pub(super) fn debt_of(
        &self,
        backend: &Backend,
        call: Call<'_>,
        terms: Terms,
        caches_denials: bool,
        report: Option<&Report>,
    ) -> RequestDebt {
        let reset_s = report
            .and_then(|report| u64::try_from(report.reset()).ok())
            .unwrap_or(0);
        // Less a second, as the reset is rounded, and twice the timeout: the refund is sent
        // after the deadline is read, and may take that long to land.
        let refund_within = Duration::from_secs(reset_s)
            .saturating_sub(Duration::from_secs(1))
            .saturating_sub(self.timeout.saturating_mul(2));
        let refund_until = Deadline::after(self.clock.as_ref(), refund_within);
        let denials = caches_denials.then_some(&self.denials);
        RequestDebt::new(backend, call, terms, refund_until, denials)
    }
}
