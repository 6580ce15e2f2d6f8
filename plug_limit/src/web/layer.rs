//! [`RateLimitLayer`]: limits as tower middleware, for a whole router or route group; the
//! typed limit `L` here, limits made or chosen at run time in `runtime_layer.rs`.

use std::fmt;
use std::marker::PhantomData;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::BoxError;
use axum::body::{Body, Bytes, HttpBody};
use axum::response::{IntoResponse, Response};
use futures_util::future::BoxFuture;
use http::Request;
use tower_layer::Layer;
use tower_service::Service;

use crate::engine::settle;
use crate::handle::PlugLimit;
use crate::limit::{LimitRef, Limits};
use crate::outcome::Outcome;
use crate::web::grpc;
use crate::web::resolver::Resolver;

/// Applies a limit to every request of the services it wraps: the typed limit `L`
/// ([`new`](Self::new): one [`Limit`](crate::Limit), or a tuple of them checked at once,
/// [stacked](crate::Limits)), a [`RuntimeLimit`](crate::RuntimeLimit) from configuration
/// ([`runtime`](RateLimitLayer::runtime)), or one chosen per request
/// ([`resolve`](RateLimitLayer::resolve), [`resolve_async`](RateLimitLayer::resolve_async)).
///
/// The same check as [`RateLimited`](crate::RateLimited), as middleware: a denied request gets
/// the hook's (by default the 429) response and never reaches the inner service; an allowed
/// one gets the rate-limit headers on its response. Add it with `Router::route_layer` so the
/// matched route scopes the budget.
///
/// It wraps any service of HTTP requests and responses, whatever their bodies: a tonic server
/// too (`tonic::transport::Server::builder().layer(..)`), where a route and a gRPC method that
/// name one scope share one budget, and a gRPC call it refuses gets a gRPC status
/// (`RESOURCE_EXHAUSTED` for a denial) with the rate-limit headers as metadata; the `tonic`
/// feature lets the default key find the peer address of such a call. See the
/// [guide](crate::guide::limiting#grpc-one-budget-with-tonic).
///
/// # Example
///
/// ```no_run
/// use axum::{routing::get, Router};
/// use plug_limit::{FixedWindow, PlugLimit, RateLimitLayer};
///
/// # fn app(limits: PlugLimit) -> Router {
/// Router::new()
///     .route("/a", get(|| async { "a" }))
///     .route("/b", get(|| async { "b" }))
///     .route_layer(RateLimitLayer::<FixedWindow<100, 60>>::new(limits))
/// # }
/// ```
pub struct RateLimitLayer<L> {
    pub(crate) limits: PlugLimit,
    /// What chooses a request's limit, for a layer of [`RuntimeLimit`]s.
    pub(crate) resolver: Option<Resolver>,
    /// How long a denied request may wait for admission before its 429; `None`: not at all.
    pub(crate) wait: Option<Duration>,
    _limit: PhantomData<fn() -> L>,
}

impl<L: Limits> RateLimitLayer<L> {
    /// A layer checking `L` with `limits`.
    ///
    /// A limiter `L` names that `limits` does not know (a custom one not registered) is logged
    /// as an error here, at start-up; each request it meets fails by the failure policy.
    #[must_use]
    pub fn new(limits: PlugLimit) -> Self {
        for limit in L::STACK {
            if let Err(error) = limits.decider().registry().get(limit.limiter) {
                tracing::error!(target: "plug_limit", "RateLimitLayer: {error}");
            }
        }
        Self::with(limits, None)
    }
}

impl<L> RateLimitLayer<L> {
    pub(crate) fn with(limits: PlugLimit, resolver: Option<Resolver>) -> Self {
        Self {
            limits,
            resolver,
            wait: None,
            _limit: PhantomData,
        }
    }

    /// Lets a denied request wait up to `bound` for admission before it gets its 429: a
    /// burst is queued rather than refused (upstash's `blockUntilReady`, Kong's throttling).
    /// The denial is retried as [`PlugLimit::acquire`] retries it, counting nothing while it
    /// waits; an admitted request reaches the service with its admission's headers, and one
    /// its limit cannot admit within `bound` gets the 429 as soon as that is known, and
    /// never later than `bound` but for the time of its last check. A hook's own answer to a
    /// denial ([`Action::Respond`](crate::Action::Respond)) is sent at once.
    ///
    /// The request holds its connection and task while it waits: keep `bound` short (a few
    /// hundred milliseconds). Each retry is a check as the metrics and the decision span see
    /// it (a waiting request's denied retries count as denials there). With a
    /// [deny cache](crate::Builder::deny_cache), retries are answered from the cache until the
    /// cached denial ends, in whole seconds. A layer without it pays nothing for the option.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use axum::{routing::post, Router};
    /// use plug_limit::{Gcra, PlugLimit, RateLimitLayer};
    ///
    /// let layer = RateLimitLayer::<Gcra<10, 1, 2>>::new(PlugLimit::memory())
    ///     .wait_up_to(Duration::from_millis(300));
    /// let app: Router = Router::new().route("/orders", post(|| async { "ok" })).route_layer(layer);
    /// # let _ = app;
    /// ```
    #[must_use]
    pub fn wait_up_to(mut self, bound: Duration) -> Self {
        self.wait = Some(bound);
        self
    }
}

impl<L> Clone for RateLimitLayer<L> {
    fn clone(&self) -> Self {
        Self {
            limits: self.limits.clone(),
            resolver: self.resolver.clone(),
            wait: self.wait,
            _limit: PhantomData,
        }
    }
}

impl<L> fmt::Debug for RateLimitLayer<L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitLayer")
            .field("limit", &std::any::type_name::<L>())
            .field("limits", &self.limits)
            .field("wait", &self.wait)
            .finish()
    }
}

impl<S, L> Layer<S> for RateLimitLayer<L> {
    type Service = RateLimit<S, L>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimit {
            inner,
            layer: self.clone(),
        }
    }
}

/// The middleware built by [`RateLimitLayer`].
pub struct RateLimit<S, L> {
    pub(crate) inner: S,
    pub(crate) layer: RateLimitLayer<L>,
}

impl<S, L> RateLimit<S, L> {
    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Consumes the middleware, returning the inner service.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S: Clone, L> Clone for RateLimit<S, L> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            layer: self.layer.clone(),
        }
    }
}

impl<S: fmt::Debug, L> fmt::Debug for RateLimit<S, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimit")
            .field("inner", &self.inner)
            .field("limit", &std::any::type_name::<L>())
            .finish_non_exhaustive()
    }
}

impl<S, L, ReqBody, ResBody> Service<Request<ReqBody>> for RateLimit<S, L>
where
    S: Service<Request<ReqBody>, Response = http::Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    L: Limits,
    ReqBody: Send + 'static,
    ResBody: HttpBody<Data = Bytes> + Send + 'static,
    ResBody::Error: Into<BoxError>,
{
    type Response = Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        // The check is awaited before the inner service runs: take the service that was
        // polled ready and leave a fresh clone in its place.
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let limits = self.layer.limits.clone();
        let wait = self.layer.wait;
        Box::pin(async move { limited(&limits, wait, L::STACK, request, inner).await })
    }
}

/// The middleware's work once it knows the limit: check, then call `inner` with the request
/// or answer the rejection (a gRPC status to a gRPC call), and add the allowed request's
/// headers to the response. A denial waits up to `wait` for admission first.
pub(crate) async fn limited<S, ReqBody, ResBody>(
    limits: &PlugLimit,
    wait: Option<Duration>,
    limits_of: &[LimitRef<'_>],
    request: Request<ReqBody>,
    mut inner: S,
) -> Result<Response, S::Error>
where
    S: Service<Request<ReqBody>, Response = http::Response<ResBody>>,
    ResBody: HttpBody<Data = Bytes> + Send + 'static,
    ResBody::Error: Into<BoxError>,
{
    let (parts, body) = request.into_parts();
    let decider = limits.decider();
    let decided = match wait {
        None => decider.decide_all(limits_of, &parts).await,
        Some(bound) => decider.decide_waiting(limits_of, &parts, bound).await,
    };
    let mut outcome = match decided {
        Ok(outcome) => outcome,
        Err(rejection) => return Ok(grpc::refuse(&parts.headers, rejection)),
    };
    let pending = outcome.as_mut().and_then(Outcome::take_pending);
    let mut request = Request::from_parts(parts, body);
    let settles = limits_of.iter().any(|limit| limit.settle);
    settle::leave_usage(
        request.extensions_mut(),
        pending.as_deref().map(Box::as_ref),
        settles,
    );
    // An axum body is taken as it is; another (tonic's) is wrapped once.
    let response = inner.call(request).await?.map(Body::new);
    let response = match outcome {
        Some(outcome) => (outcome, response).into_response(),
        None => response,
    };
    Ok(settle::hold(response, pending))
}
