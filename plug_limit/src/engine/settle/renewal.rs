//! A concurrency lease kept alive while its request runs: renewed every third of the lease, on
//! a schedule set at its admission, so a response that streams longer than its lease keeps its
//! unit, while the lease of an instance that died still ends at most `lease_s` after its last
//! renewal. A renewal is given a third of the lease at most (less when the backend's timeout is
//! shorter): after one abandoned, the next still comes, on the schedule, before the lease ends.
//!
//! A renewal is the admission's own call again, with the same lease id: the script renews a
//! lease it holds whatever the limit (its units are counted already). A renewal landing after
//! the release would hold the unit until the lease ran out:
//! - in memory, a renewal and the release each run under one lock, and the release marks the
//!   lease released before it gives it back: none can;
//! - on Redis, the renewing task sends the release itself, after any renewal it has in flight.
//!   A renewal that failed or was abandoned may still be buffered on its way and run later;
//!   after one, the release is sent again once that renewal has almost surely run or been
//!   lost. Past that, the lease still ends by itself, `lease_s` after the late renewal.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::future::{self, Either};
use tokio::sync::oneshot;
use tokio::task::AbortHandle;
use tokio::time::{Instant, MissedTickBehavior};

use super::admission::Admission;
use crate::backend::{Backend, Call, Program, Started};
use crate::error::Error;
use crate::limit::Charge;
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

    /// When renewals come: the first a third of the lease after now (the admission), then
    /// every third of the lease.
    fn schedule(&self) -> Option<(Instant, Duration)> {
        let every = (self.lifetime()? / 3).max(MIN_EVERY);
        Some((Instant::now() + every, every))
    }

    /// One renewal, on a backend that answers at once (memory).
    fn renew_here(&self) -> Renewed {
        match self
            .admission
            .backend
            .start(self.call(Charge::Take(self.units)))
        {
            Started::Done(result) => judge(&self.admission.program, result),
            // Memory answers at once; nothing else reaches here.
            Started::Waiting(_) => Renewed::Lost,
        }
    }
}

/// What a renewal came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Renewed {
    Yes,
    /// Denied: the lease ran out and its unit was taken. The renewals stop.
    Lost,
    /// Failed: it may or may not have reached Redis. The next renewal tries again.
    Unknown,
}

/// What a renewal's answer means; logs what stops the renewals or failed.
fn judge(program: &Program, result: Result<Outcome, Error>) -> Renewed {
    match result {
        Ok(outcome) if outcome.is_allowed() => Renewed::Yes,
        Ok(_) => {
            tracing::debug!(target: "plug_limit", limiter = %program.name, "lease not renewed: it ran out and its unit was taken");
            Renewed::Lost
        }
        Err(error) => {
            tracing::debug!(target: "plug_limit", limiter = %program.name, %error, "lease not renewed this time");
            Renewed::Unknown
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
    /// Starts renewing the lease `admission` took, of `units` (see [`Lease::schedule`]);
    /// `None` without a Tokio runtime (the lease then lives `lease_s`, as without renewals) or
    /// a lease length to read.
    pub(super) fn start(admission: Arc<Admission>, units: u32) -> Option<Self> {
        let lease = Lease { admission, units };
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        let (first, every) = lease.schedule()?;
        // Made in the task: a runtime without its timer fails the renewals, not the request.
        let ticks = move || {
            let mut ticks = tokio::time::interval_at(first, every);
            ticks.set_missed_tick_behavior(MissedTickBehavior::Skip);
            ticks
        };
        match lease.admission.backend.clone() {
            Backend::Memory(_) => {
                let released = Arc::new(Mutex::new(false));
                let shared = Arc::clone(&released);
                let task = runtime.spawn(async move {
                    let mut ticks = ticks();
                    loop {
                        ticks.tick().await;
                        let released = shared.lock().unwrap_or_else(PoisonError::into_inner);
                        if *released || lease.renew_here() == Renewed::Lost {
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
                // A renewal abandoned at its deadline may still run in Redis within the
                // backend's timeout.
                let deadline = every.min(redis.timeout());
                let settled_by = every.max(redis.timeout());
                let (handoff, mut release) = oneshot::channel();
                runtime.spawn(async move {
                    let mut ticks = ticks();
                    // Set once a renewal failed: it may still run in Redis after the release.
                    let mut uncertain = false;
                    loop {
                        let tick = std::pin::pin!(ticks.tick());
                        // The release first: once it is handed over, no renewal starts.
                        match future::select(&mut release, tick).await {
                            Either::Left((Ok(charge), _)) => {
                                let program = &lease.admission.program;
                                if let Err(error) = redis.eval(lease.call(charge)).await {
                                    tracing::debug!(target: "plug_limit", limiter = %program.name, %error, "lease not given back: it ends by itself");
                                }
                                if uncertain {
                                    tokio::time::sleep(settled_by).await;
                                    let _ = redis.eval(lease.call(charge)).await;
                                }
                                return;
                            }
                            // The request's debt dropped without a release to send.
                            Either::Left((Err(_), _)) => return,
                            Either::Right((_, _)) => {
                                let charge = Charge::Take(lease.units);
                                let renewal = redis.eval(lease.call(charge));
                                // Cut short only when a third of the lease is shorter than the
                                // timeout: at the timeout, the call's own ending also drops a
                                // connection that stayed silent, which a cut would skip (and
                                // counts the failure, as the breaker counts a check's).
                                let result = if deadline < redis.timeout() {
                                    tokio::time::timeout(deadline, renewal)
                                        .await
                                        .unwrap_or(Err(Error::Timeout(deadline)))
                                } else {
                                    renewal.await
                                };
                                match judge(&lease.admission.program, result) {
                                    Renewed::Yes => {}
                                    Renewed::Unknown => uncertain = true,
                                    Renewed::Lost => return,
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
