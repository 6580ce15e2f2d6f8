//! [`SendHeadersLayer`]: the rate-limit headers of every allowed request, added to its response
//! even when the handler does not return its [`RateLimited`](crate::RateLimited) value.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use axum::body::Body;
use axum::response::Response;
use futures_util::future::BoxFuture;
use http::Request;
use tower_layer::Layer;
use tower_service::Service;

use crate::engine::settle;
use crate::outcome::Outcome;

/// Adds the rate-limit headers of the requests it wraps to their responses.
///
/// A [`RateLimited`](crate::RateLimited) extractor sends its headers only if the handler
/// returns it (`(limited, body)`); a handler that forgets it sends none. Under this layer the
/// extractor hands its outcome to the layer as well, and the layer adds its headers to the
/// response, leaving any header the response already has as it is. `#[rate_limit]` handlers and
/// [`RateLimitLayer`](crate::RateLimitLayer) add theirs by themselves and need no help.
///
/// Add it once, around the whole router. When several limits check one request, the headers
/// are the last one's. A [`Concurrency`](crate::Concurrency) limit's lease is held until the
/// response body ends.
///
/// # Example
///
/// ```
/// use std::net::SocketAddr;
///
/// use axum::{body::Body, extract::ConnectInfo, http::Request, routing::get, Router};
/// use plug_limit::{FixedWindow, PlugLimit, RateLimited, SendHeadersLayer};
/// use tower::ServiceExt;
///
/// // Checks the limit, and returns only the body: the layer sends the headers.
/// async fn hello(_limited: RateLimited<FixedWindow<10, 60>>) -> &'static str {
///     "hello"
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let app = Router::new()
///     .route("/", get(hello))
///     .with_state(PlugLimit::memory())
///     .layer(SendHeadersLayer::new());
/// let peer = ConnectInfo(SocketAddr::from(([192, 0, 2, 1], 4000)));
/// let request = Request::get("/").extension(peer).body(Body::empty())?;
/// let response = app.oneshot(request).await?;
/// assert_eq!(response.headers()["x-ratelimit-remaining"], "9");
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct SendHeadersLayer;

impl SendHeadersLayer {
    /// The layer.
    #[must_use]
    pub fn new() -> Self {
        Self
    }
}

impl<S> Layer<S> for SendHeadersLayer {
    type Service = SendHeaders<S>;

    fn layer(&self, inner: S) -> Self::Service {
        SendHeaders { inner }
    }
}

/// The middleware built by [`SendHeadersLayer`].
#[derive(Clone)]
pub struct SendHeaders<S> {
    inner: S,
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

/// Whether any request has passed a [`SendHeadersLayer`]: until one has, no request holds a
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
            Ok(settle::hold(response, outcome.take_pending()))
        })
    }
}
