//! Concurrency leases: the units an admitted request holds until its response ends.
//!
//! A limiter that leases (`concurrency`) takes its units with a lease id made here, and the
//! [`Lease`] that comes with the allowed outcome gives them back when it drops: when the
//! response body ends, under [`RateLimitLayer`](crate::RateLimitLayer),
//! [`SendHeadersLayer`](crate::SendHeadersLayer), `#[rate_limit]` and
//! [`RateLimited::respond`](crate::RateLimited::respond); when the extractor drops otherwise.
//! A release that cannot run (no runtime, Redis gone) leaves the lease to expire by itself.

use std::fmt;
use std::hash::{BuildHasher, RandomState};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::response::Response;
use http_body::{Frame, SizeHint};

use crate::backend::{Backend, Call, Charge, LeaseArg, Program, Started};
use crate::limit::Opt;

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
    let sequence = SEQUENCE.fetch_add(1, Ordering::Relaxed);
    format!("{:016x}{sequence:016x}", *NONCE)
}

/// Units a request holds from a leasing limiter; given back when dropped.
pub(crate) struct Lease(Option<Release>);

/// What giving a lease back takes: the call that took it, with its cost negated.
struct Release {
    backend: Backend,
    program: Program,
    keys: [String; 1],
    opts: Box<[Opt]>,
    cost: Charge,
    id: String,
}

impl Lease {
    /// The lease `id` of `call`, taken on `backend`.
    pub(crate) fn new(backend: &Backend, call: Call<'_>, id: &str) -> Self {
        Self(Some(Release {
            backend: backend.clone(),
            program: call.program.clone(),
            keys: [call.keys.first().cloned().unwrap_or_default()],
            opts: call.opts.into(),
            cost: call.cost,
            id: id.to_owned(),
        }))
    }
}

impl Release {
    fn call(&self) -> Call<'_> {
        Call {
            program: &self.program,
            keys: &self.keys,
            opts: &self.opts,
            cost: self.cost,
            lease: Some(LeaseArg {
                id: &self.id,
                release: true,
            }),
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let Some(release) = self.0.take() else {
            return;
        };
        // In memory: given back on the spot.
        if let Started::Done(_) = release.backend.start(release.call()) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::debug!(target: "plug_limit", limiter = %release.program.name, "no runtime to release a lease: it expires by itself");
            return;
        };
        // Off the response's path: the client has its answer, and a slow Redis delays
        // nobody. The backend's timeout bounds the task.
        runtime.spawn(async move {
            let Backend::Redis(redis) = &release.backend else {
                return;
            };
            if let Err(error) = redis.eval(release.call()).await {
                tracing::debug!(target: "plug_limit", limiter = %release.program.name, %error, "lease not released: it expires by itself");
            }
        });
    }
}

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut debug = f.debug_struct("Lease");
        if let Some(release) = &self.0 {
            debug
                .field("limiter", &release.program.name)
                .field("cost", &release.cost);
        }
        debug.finish_non_exhaustive()
    }
}

/// `response`, holding `lease` until its body ends (or is dropped unfinished).
pub(crate) fn hold(response: Response, lease: Option<Arc<Lease>>) -> Response {
    match lease {
        Some(lease) => response.map(|body| {
            Body::new(Held {
                body,
                lease: Some(lease),
            })
        }),
        None => response,
    }
}

/// A response body that holds a lease while it streams.
struct Held {
    body: Body,
    lease: Option<Arc<Lease>>,
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
            // The body ended: its request is no longer in flight.
            self.lease = None;
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
