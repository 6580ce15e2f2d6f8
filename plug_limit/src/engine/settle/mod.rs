//! What an admitted request still owes its limit once its response ends: a concurrency lease
//! to give back, a reservation to settle to the units its handler reported ([`Usage`]), or a
//! cost to give back when its response does not count ([`Limit::COUNT_IF`]).
//!
//! The [`RequestDebt`] that comes with the allowed outcome settles when it drops: when the
//! response body ends, under [`RateLimitLayer`](crate::RateLimitLayer),
//! [`SendHeadersLayer`](crate::SendHeadersLayer), `#[rate_limit]` and
//! [`RateLimited::respond`](crate::RateLimited::respond); when the extractor drops otherwise.
//! Settling is one call of the limit's own script (a refund `-n`, a forced charge `+n`), sent
//! after the response on the runtime, within the backend's timeout. A settlement that cannot
//! run (no runtime, Redis gone) leaves the reservation as it was charged, and a lease to
//! expire by itself: an over-count, never a free pass. Until then, a lease is renewed every
//! third of its life (`renewal.rs`), so a long response keeps its slot.
//!
//! [`Limit::COUNT_IF`]: crate::Limit::COUNT_IF

use std::cmp::Ordering;
use std::fmt;
use std::sync::{Arc, OnceLock};

use http::StatusCode;

use crate::backend::{Backend, Call, Started};
use crate::engine::DenyCache;
use crate::limit::Charge;
use crate::outcome::{Debt, Usage};

pub(crate) use self::body::hold;
pub(crate) use self::deadline::Deadline;
pub(crate) use self::lease_id::new_id;

use self::admission::Admission;
use self::renewal::Renewal;

mod admission;
mod body;
mod deadline;
mod lease_id;
mod renewal;

/// What a request owes its limit beyond the cost charged when it was admitted.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Terms {
    /// Its responses count only where this is `true`.
    pub(crate) count_if: Option<fn(StatusCode) -> bool>,
    /// Its cost is an estimate, settled to the [`Usage`] its handler reports.
    pub(crate) settle: bool,
}

impl Terms {
    /// Whether a request on these terms owes anything after its response.
    pub(crate) fn owes(self) -> bool {
        self.count_if.is_some() || self.settle
    }
}

/// What an admitted request owes its limits (one, or each limit of a stack that settles);
/// settled when dropped.
pub(crate) struct RequestDebt(Vec<Claim>);

/// What one limit is owed: its admission, kept, and how it settles.
struct Claim {
    /// Shared with the renewals of its lease.
    admission: Arc<Admission>,
    /// What the admission charged.
    reserved: u32,
    /// The deny cache of the limiter, if it keeps one: a refund lifts its cached denials.
    denials: Option<Arc<DenyCache>>,
    /// What the handler reported it used, when the cost is an estimate.
    usage: Option<Usage>,
    count_if: Option<fn(StatusCode) -> bool>,
    status: OnceLock<StatusCode>,
    /// Until when a refund goes back to the state the admission charged: before its reset,
    /// less a second for the reset's rounding and twice the timeout the refund may take to
    /// land. Past it, the units charged have left by themselves (a window ended, a bucket
    /// refilled), and a refund would be a gift.
    refund_until: Deadline,
    /// The renewals that keep the lease alive while the request runs.
    renewal: Option<Renewal>,
}

impl RequestDebt {
    /// What a request admitted by `call` on `backend` owes: its lease, if `call` took one, and
    /// what `terms` say; past `refund_until`, it owes no refund (the state the admission
    /// charged is gone).
    pub(crate) fn new(
        backend: &Backend,
        call: Call<'_>,
        terms: Terms,
        refund_until: Deadline,
        denials: Option<&Arc<DenyCache>>,
    ) -> Self {
        let reserved = match call.cost {
            Charge::Take(units) => units,
            Charge::Refund(_) | Charge::Force(_) | Charge::UpTo(_) => 0,
        };
        Self(vec![Claim {
            admission: Arc::new(Admission {
                backend: backend.clone(),
                program: call.program.clone(),
                keys: [call.keys.all().first().cloned().unwrap_or_default()],
                opts: call.opts.into(),
                read_ahead: call.read_ahead.copied(),
                lease: call.lease.map(str::to_owned),
            }),
            reserved,
            denials: denials.cloned(),
            usage: terms.settle.then(Usage::default),
            count_if: terms.count_if,
            status: OnceLock::new(),
            refund_until,
            renewal: None,
        }])
    }

    /// What a request admitted by a stack owes: every limit's debt (`parts`), settled each by
    /// its own limit's script once the response ends. The limits that settle to what the
    /// handler used share one [`Usage`]: one report settles each of them. `None` when no
    /// limit owes anything.
    pub(crate) fn stacked(parts: Vec<Self>) -> Option<Self> {
        // Most stacks owe nothing: no iterator built and dropped for them.
        if parts.is_empty() {
            return None;
        }
        let mut claims: Vec<Claim> = parts
            .into_iter()
            .flat_map(|mut part| std::mem::take(&mut part.0))
            .collect();
        let shared = claims.iter().find_map(|claim| claim.usage.clone());
        for claim in &mut claims {
            if claim.usage.is_some() {
                claim.usage.clone_from(&shared);
            }
        }
        (!claims.is_empty()).then_some(Self(claims))
    }

    /// The same debt, its lease (if it holds one) renewed every third of its life until it is
    /// given back: a request in flight longer than its lease keeps its units.
    pub(crate) fn renewing(mut self) -> Self {
        for claim in &mut self.0 {
            if claim.admission.lease.is_some() {
                claim.renewal = Renewal::start(Arc::clone(&claim.admission), claim.reserved);
            }
        }
        self
    }
}

impl Debt for RequestDebt {
    /// The response's status, for [`Terms::count_if`]; the first one given stands.
    fn responded(&self, status: StatusCode) {
        for claim in &self.0 {
            let _ = claim.status.set(status);
        }
    }

    /// Where the handler reports what the request used, for a cost that is an estimate.
    fn usage(&self) -> Option<&Usage> {
        self.0.iter().find_map(|claim| claim.usage.as_ref())
    }
}

/// Leaves in `extensions` the [`Usage`] a handler reports to: `debt`'s, or, for a limit
/// that `settles` but counted nothing (limits disabled, failed open, a shadow denial), one whose
/// reports go nowhere. Returns it.
#[inline]
pub(crate) fn leave_usage(
    extensions: &mut http::Extensions,
    debt: Option<&dyn Debt>,
    settles: bool,
) -> Option<Usage> {
    // Inline to here: most requests owe nothing and take no usage.
    if debt.is_none() && !settles {
        return None;
    }
    usage_left(extensions, debt, settles)
}

/// [`leave_usage`] of a request that owes something or takes a usage.
fn usage_left(
    extensions: &mut http::Extensions,
    debt: Option<&dyn Debt>,
    settles: bool,
) -> Option<Usage> {
    let usage = debt
        .and_then(Debt::usage)
        .cloned()
        .or_else(|| settles.then(Usage::default))?;
    extensions.insert(usage.clone());
    Some(usage)
}

impl Claim {
    /// The one call that settles the request; `None` when it owes nothing more.
    fn charge(&self) -> Option<Charge> {
        if self.admission.lease.is_some() {
            return Some(Charge::Refund(self.reserved));
        }
        // A status never seen (the response never reached the limit) counts.
        let counted = match (self.count_if, self.status.get()) {
            (Some(count_if), Some(&status)) => count_if(status),
            _ => true,
        };
        let used = if counted {
            self.usage
                .as_ref()
                .and_then(Usage::get)
                .unwrap_or(self.reserved)
        } else {
            0
        };
        match used.cmp(&self.reserved) {
            Ordering::Less if self.refund_until.passed() => None,
            Ordering::Less => Some(Charge::Refund(self.reserved - used)),
            Ordering::Greater => Some(Charge::Force(used - self.reserved)),
            Ordering::Equal => None,
        }
    }

    /// Sends what this debt comes to: on the spot in memory, else on the runtime.
    fn settle(mut self) {
        let renewal = self.renewal.take();
        let Some(charge) = self.charge() else {
            return;
        };
        if let (Charge::Refund(_), Some(denials)) = (charge, &self.denials) {
            // Units come back: a denial cached meanwhile may no longer hold.
            denials.remove(&self.admission.keys);
        }
        // Renewals end first, and none lands after the release.
        let charge = match renewal {
            Some(renewal) => {
                let here = |charge| {
                    let _ = self.admission.backend.start(self.admission.call(charge));
                };
                match renewal.release(charge, here) {
                    Some(charge) => charge,
                    None => return,
                }
            }
            None => charge,
        };
        // In memory: settled on the spot.
        if let Started::Done(_) = self.admission.backend.start(self.admission.call(charge)) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::debug!(target: "plug_limit", limiter = %self.admission.program.name, "no runtime to settle a request: its admission's charge stands");
            return;
        };
        // Off the response's path: the client has its answer, and a slow Redis delays
        // nobody. The backend's timeout bounds the task.
        let admission = Arc::clone(&self.admission);
        runtime.spawn(async move {
            let Backend::Redis(redis) = &admission.backend else {
                return;
            };
            if let Err(error) = redis.eval(admission.call(charge)).await {
                tracing::debug!(target: "plug_limit", limiter = %admission.program.name, %error, "request not settled: its admission's charge stands");
            }
        });
    }
}

impl Drop for RequestDebt {
    fn drop(&mut self) {
        for owed in self.0.drain(..) {
            owed.settle();
        }
    }
}

impl fmt::Debug for RequestDebt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut list = f.debug_list();
        for owed in &self.0 {
            list.entry(&format_args!(
                "{} (reserved {}, lease {}, usage {:?})",
                owed.admission.program.name,
                owed.reserved,
                owed.admission.lease.is_some(),
                owed.usage,
            ));
        }
        list.finish()
    }
}
