//! A concurrency lease kept alive while its request runs: renewed every third of the lease, so
//! a response that streams longer than its lease keeps its unit, while the lease of an
//! instance that died still ends at most `lease_s` after its last renewal.
//!
//! A renewal is the admission's own call again, with the same lease id: the script renews a
//! lease it holds whatever the limit (its units are counted already). No renewal may land after
//! the release, or the unit would stay taken until the lease ran out:
//! - in memory, a renewal and the release each run under one lock, and the release marks the
//!   lease released before it gives it back;
//! - on Redis, the renewing task sends the release itself, after any renewal it has in flight,
//!   so the two never race on two connections of the pool.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::future::{self, Either};
use tokio::sync::oneshot;
use tokio::task::AbortHandle;

use super::Admission;
use crate::backend::{Backend, Call, Charge, Program, Started};
use crate::error::Error;
use crate::limit::Opt;
use crate::outcome::Outcome;

/// The shortest time between two renewals: a lease lives at least a second.
const MIN_EVERY: Duration = Duration::from_millis(100);

/// One lease's admission, and the units each renewal takes again.
struct Lease {
    admission: Arc<Admission>,
    units: u32,
}

impl Lease {
    fn call(&self, charge: Charge) -> Call<'_> {
        self.admission.call(charge)
    }

    /// How long the lease lives: its limit's second option, in seconds (`[limit, lease_s]`).
    fn lifetime(&self) -> Option<Duration> {
        let seconds = match self.admission.opts.get(1)? {
            Opt::Int(seconds) => u64::try_from(*seconds).ok()?,
            text => text.as_str()?.parse().ok()?,
        };
        (seconds > 0).then(|| Duration::from_secs(seconds))
    }

    /// One renewal, on a backend that answers at once (memory); `false` when the renewals
    /// stop: the lease is gone for good (denied: it ran out and its unit was taken).
    fn renew_here(&self) -> bool {
        match self
            .admission
            .backend
            .start(self.call(Charge::Take(self.units)))
        {
            Started::Done(result) => judge(&self.admission.program, result),
            // Memory answers at once; nothing else reaches here.
            Started::Redis(_) => false,
        }
    }
}

/// Whether a renewal's answer keeps the renewals going; logs what stops them or failed.
fn judge(program: &Program, result: Result<Outcome, Error>) -> bool {
    match result {
        Ok(outcome) if outcome.is_allowed() => true,
        Ok(_) => {
            tracing::debug!(target: "plug_limit", limiter = %program.name, "lease not renewed: it ran out and its unit was taken");
            false
        }
        Err(error) => {
            // Tried again at the next renewal: the lease has two thirds of its life left.
            tracing::debug!(target: "plug_limit", limiter = %program.name, %error, "lease not renewed this time");
            true
        }
    }
}

/// The renewals of one lease, running until its release.
pub(super) enum Renewal {
    /// In memory: renewals and the release share `released`'s lock.
    Memory {
        released: Arc<Mutex<bool>>,
        task: AbortHandle,
    },
    /// On Redis: the task takes the release and sends it after any renewal in flight.
    Redis(oneshot::Sender<Charge>),
}

impl Renewal {
    /// Starts renewing the lease `admission` took, of `units`, every third of its life;
    /// `None` without a Tokio runtime (the lease then lives `lease_s`, as without renewals) or
    /// a lease length to read.
    pub(super) fn start(admission: Arc<Admission>, units: u32) -> Option<Self> {
        let lease = Lease { admission, units };
        let every = (lease.lifetime()? / 3).max(MIN_EVERY);
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        match lease.admission.backend.clone() {
            Backend::Memory(_) => {
                let released = Arc::new(Mutex::new(false));
                let shared = Arc::clone(&released);
                let task = runtime.spawn(async move {
                    loop {
                        tokio::time::sleep(every).await;
                        let released = shared.lock().unwrap_or_else(PoisonError::into_inner);
                        if *released || !lease.renew_here() {
                            return;
                        }
                    }
                });
                Some(Self::Memory {
                    released,
                    task: task.abort_handle(),
                })
            }
            Backend::Redis(redis) => {
                let (handoff, mut release) = oneshot::channel();
                runtime.spawn(async move {
                    loop {
                        let tick = std::pin::pin!(tokio::time::sleep(every));
                        // The release first: once it is handed over, no renewal starts.
                        match future::select(&mut release, tick).await {
                            Either::Left((Ok(charge), _)) => {
                                if let Err(error) = redis.eval(lease.call(charge)).await {
                                    tracing::debug!(target: "plug_limit", limiter = %lease.admission.program.name, %error, "lease not given back: it ends by itself");
                                }
                                return;
                            }
                            // The request's debt dropped without a release to send.
                            Either::Left((Err(_), _)) => return,
                            Either::Right(((), _)) => {
                                let charge = Charge::Take(lease.units);
                                if !judge(&lease.admission.program, redis.eval(lease.call(charge)).await) {
                                    return;
                                }
                            }
                        }
                    }
                });
                Some(Self::Redis(handoff))
            }
        }
    }

    /// Ends the renewals and gives the lease back with `charge` by `release_here` (memory) or
    /// by the renewing task (Redis). Returns `charge` when it is still to be sent: the task
    /// ended without taking it.
    pub(super) fn release(
        self,
        charge: Charge,
        release_here: impl FnOnce(Charge),
    ) -> Option<Charge> {
        match self {
            Self::Memory { released, task } => {
                task.abort();
                let mut released = released.lock().unwrap_or_else(PoisonError::into_inner);
                *released = true;
                // Under the lock: a renewal waiting on it finds the lease released.
                release_here(charge);
                None
            }
            Self::Redis(handoff) => handoff.send(charge).err(),
        }
    }
}
