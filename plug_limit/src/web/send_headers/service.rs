//! [`SendHeaders`], the service a [`SendHeadersLayer`](crate::SendHeadersLayer) wraps around
//! another, and the slot an extractor leaves its outcome in for it.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use axum::body::Body;
use axum::response::Response;
use futures_util::future::BoxFuture;
use http::Request;
use tower_service::Service;

use crate::engine::settle;
use crate::outcome::Outcome;

/// The middleware built by [`SendHeadersLayer`](crate::SendHeadersLayer).
#[derive(Clone)]
pub struct SendHeaders<S> {
    inner: S,
}

impl<S> SendHeaders<S> {
    pub(super) fn new(inner: S) -> Self {
        Self { inner }
    }
}

impl<S: fmt::Debug> fmt::Debug for SendHeaders<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SendHeaders")
            .field("inner", &self.inner)
            .finish()
    }
}

/// Where an extractor leaves its outcome for the layer: a request extension.
#[derive(Clone, Default)]
pub(crate) struct HeaderSlot(Arc<Mutex<Option<Outcome>>>);

/// Whether any request has passed a [`SendHeadersLayer`](crate::SendHeadersLayer): until one has, no request holds a
/// slot, and an extractor does not search its extensions for one. Set before the first slot
/// is left in a request, which reaches its extractor after it.
static SLOTS_LEFT: AtomicBool = AtomicBool::new(false);

impl HeaderSlot {
    /// The slot `extensions` hold, if any.
    #[inline]
    pub(crate) fn of(extensions: &http::Extensions) -> Option<&Self> {
        if !SLOTS_LEFT.load(Ordering::Relaxed) {
            return None;
        }
        extensions.get::<Self>()
    }

    /// Leaves `outcome` for the layer.
    pub(crate) fn put(&self, outcome: &Outcome) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(outcome.clone());
    }

    fn take(&self) -> Option<Outcome> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}

impl<S> Service<Request<Body>> for SendHeaders<S>
where
    S: Service<Request<Body>, Response = Response> + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<Body>) -> Self::Future {
        let slot = HeaderSlot::default();
        SLOTS_LEFT.store(true, Ordering::Relaxed);
        request.extensions_mut().insert(slot.clone());
        let response = self.inner.call(request);
        Box::pin(async move {
            let mut response = response.await?;
            let Some(mut outcome) = slot.take() else {
                return Ok(response);
            };
            let headers = response.headers_mut();
            for (name, value) in outcome.headers() {
                if !headers.contains_key(name) {
                    headers.insert(name.clone(), value.clone());
                }
            }
            Ok(settle::hold(response, outcome.take_debt()))
        })
    }
}
