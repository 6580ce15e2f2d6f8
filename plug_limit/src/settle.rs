//! What an admitted request still owes its limit once its response ends: a concurrency lease
//! to give back, a reservation to settle to the units its handler reported ([`Usage`]), or a
//! cost to give back when its response does not count ([`Limit::COUNT_IF`]).
//!
//! The [`Pending`] that comes with the allowed outcome settles when it drops: when the
//! response body ends, under [`RateLimitLayer`](crate::RateLimitLayer),
//! [`SendHeadersLayer`](crate::SendHeadersLayer), `#[rate_limit]` and
//! [`RateLimited::respond`](crate::RateLimited::respond); when the extractor drops otherwise.
//! Settling is one call of the limit's own script (a refund `-n`, a forced charge `+n`), sent
//! after the response on the runtime, within the backend's timeout. A settlement that cannot
//! run (no runtime, Redis gone) leaves the reservation as it was charged, and a lease to
//! expire by itself: an over-count, never a free pass.
//!
//! [`Limit::COUNT_IF`]: crate::Limit::COUNT_IF

use std::cmp::Ordering;
use std::fmt;
use std::hash::{BuildHasher, RandomState};
use std::pin::Pin;
use std::sync::atomic::{self, AtomicU64};
use std::sync::{Arc, LazyLock, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::response::Response;
use http::StatusCode;
use http_body::{Frame, SizeHint};

use crate::backend::{Backend, Call, Charge, Program, Started};
use crate::clock::Clock;
use crate::decide::DenyCache;
use crate::limit::Opt;

pub use self::usage::Usage;

mod usage;

/// This process's part of every lease id: random, so two instances' ids never meet.
static NONCE: LazyLock<u64> = LazyLock::new(|| {
    let time = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos());
    RandomState::new().hash_one((std::process::id(), time))
});

/// The part of a lease id that tells this process's leases apart.
static SEQUENCE: AtomicU64 = AtomicU64::new(0);

/// A fresh lease id: unique across instances and within this one, 32 hex digits.
pub(crate) fn new_id() -> String {
    let sequence = SEQUENCE.fetch_add(1, atomic::Ordering::Relaxed);
    format!("{:016x}{sequence:016x}", *NONCE)
}

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

/// What an admitted request owes its limit; settled when dropped.
pub(crate) struct Pending(Option<Owed>);

struct Owed {
    backend: Backend,
    program: Program,
    keys: [String; 1],
    opts: Box<[Opt]>,
    /// What the admission charged.
    reserved: u32,
    /// The deny cache of the limiter, if it keeps one: a refund lifts its cached denials.
    denials: Option<Arc<DenyCache>>,
    /// The lease the admission took, given back whole.
    lease: Option<String>,
    /// What the handler reported it used, when the cost is an estimate.
    usage: Option<Usage>,
    count_if: Option<fn(StatusCode) -> bool>,
    status: OnceLock<StatusCode>,
    /// Until when a refund goes back to the state the admission charged: before its reset,
    /// less a second for the reset's rounding. Past it, the units charged have left by
    /// themselves (a window ended, a bucket refilled), and a refund would be a gift.
    refund_until: Deadline,
}

/// A time by the limits' clock: the configured one, else this process's monotonic one.
pub(crate) enum Deadline {
    Monotonic(Instant),
    Clock(Arc<dyn Clock>, i64),
}

impl Deadline {
    /// `seconds` from now by `clock`, or by the monotonic clock without one.
    pub(crate) fn after(clock: Option<&Arc<dyn Clock>>, seconds: u64) -> Self {
        match clock {
            Some(clock) => {
                let ms = i64::try_from(seconds.saturating_mul(1000)).unwrap_or(i64::MAX);
                Self::Clock(Arc::clone(clock), clock.now_ms().saturating_add(ms))
            }
            None => Self::Monotonic(Instant::now() + Duration::from_secs(seconds)),
        }
    }

    fn passed(&self) -> bool {
        match self {
            Self::Monotonic(at) => Instant::now() >= *at,
            Self::Clock(clock, at_ms) => clock.now_ms() >= *at_ms,
        }
    }
}

impl Pending {
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
        Self(Some(Owed {
            backend: backend.clone(),
            program: call.program.clone(),
            keys: [call.keys.first().cloned().unwrap_or_default()],
            opts: call.opts.into(),
            reserved,
            denials: denials.cloned(),
            lease: call.lease.map(str::to_owned),
            usage: terms.settle.then(Usage::default),
            count_if: terms.count_if,
            status: OnceLock::new(),
            refund_until,
        }))
    }

    /// Where the handler reports what the request used, for a cost that is an estimate.
    pub(crate) fn usage(&self) -> Option<&Usage> {
        self.0.as_ref()?.usage.as_ref()
    }

    /// The response's status, for [`Terms::count_if`]; the first one given stands.
    pub(crate) fn responded(&self, status: StatusCode) {
        if let Some(owed) = &self.0 {
            let _ = owed.status.set(status);
        }
    }
}

impl Owed {
    /// The one call that settles the request; `None` when it owes nothing more.
    fn charge(&self) -> Option<Charge> {
        if self.lease.is_some() {
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

    fn call(&self, charge: Charge) -> Call<'_> {
        Call {
            program: &self.program,
            keys: &self.keys,
            opts: &self.opts,
            cost: charge,
            lease: self.lease.as_deref(),
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        let Some(owed) = self.0.take() else {
            return;
        };
        let Some(charge) = owed.charge() else {
            return;
        };
        if let (Charge::Refund(_), Some(denials)) = (charge, &owed.denials) {
            // Units come back: a denial cached meanwhile may no longer hold.
            denials.remove(&owed.keys[0]);
        }
        // In memory: settled on the spot.
        if let Started::Done(_) = owed.backend.start(owed.call(charge)) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::debug!(target: "plug_limit", limiter = %owed.program.name, "no runtime to settle a request: its admission's charge stands");
            return;
        };
        // Off the response's path: the client has its answer, and a slow Redis delays
        // nobody. The backend's timeout bounds the task.
        runtime.spawn(async move {
            let Backend::Redis(redis) = &owed.backend else {
                return;
            };
            if let Err(error) = redis.eval(owed.call(charge)).await {
                tracing::debug!(target: "plug_limit", limiter = %owed.program.name, %error, "request not settled: its admission's charge stands");
            }
        });
    }
}

impl fmt::Debug for Pending {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut debug = f.debug_struct("Pending");
        if let Some(owed) = &self.0 {
            debug
                .field("limiter", &owed.program.name)
                .field("reserved", &owed.reserved)
                .field("lease", &owed.lease.is_some())
                .field("usage", &owed.usage);
        }
        debug.finish_non_exhaustive()
    }
}

/// `response`, holding what its request owes until its body ends (or is dropped unfinished),
/// and telling it the response's status.
pub(crate) fn hold(response: Response, pending: Option<Arc<Pending>>) -> Response {
    match pending {
        Some(pending) => {
            pending.responded(response.status());
            response.map(|body| {
                Body::new(Held {
                    body,
                    pending: Some(pending),
                })
            })
        }
        None => response,
    }
}

/// A response body that holds what its request owes while it streams.
struct Held {
    body: Body,
    pending: Option<Arc<Pending>>,
}

impl http_body::Body for Held {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        if matches!(polled, Poll::Ready(None | Some(Err(_)))) {
            // The body ended: its request is no longer in flight, and what it used is known.
            self.pending = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
