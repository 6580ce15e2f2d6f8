//! [`RateLimit`], the service a [`RateLimitLayer`](crate::RateLimitLayer) wraps around
//! another: each request checked by its typed limit, then answered by the inner service, or
//! refused.

use std::fmt;
use std::marker::PhantomData;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::BoxError;
use axum::body::{Body, Bytes, HttpBody};
use axum::response::{IntoResponse, Response};
use futures_util::future::BoxFuture;
use http::Request;
use tower_service::Service;

use super::grpc;
use super::resolver::Resolver;
use crate::engine::settle;
use crate::handle::PlugLimit;
use crate::limit::{LimitRef, Limits};
use crate::outcome::Outcome;

/// The middleware built by [`RateLimitLayer`](crate::RateLimitLayer).
pub struct RateLimit<S, L> {
    inner: S,
    pub(super) limits: PlugLimit,
    pub(super) resolver: Option<Resolver>,
    pub(super) wait: Option<Duration>,
    _limit: PhantomData<fn() -> L>,
}

impl<S, L> RateLimit<S, L> {
    /// `inner` under the layer's limits (`L`, or `resolver`'s choice), waiting up to `wait`.
    pub(super) fn new(
        inner: S,
        limits: PlugLimit,
        resolver: Option<Resolver>,
        wait: Option<Duration>,
    ) -> Self {
        Self {
            inner,
            limits,
            resolver,
            wait,
            _limit: PhantomData,
        }
    }

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

    /// The inner service that was polled ready, for the request being called, a fresh clone
    /// left in its place: the check is awaited before the inner service runs.
    pub(super) fn take_ready(&mut self) -> S
    where
        S: Clone,
    {
        let clone = self.inner.clone();
        std::mem::replace(&mut self.inner, clone)
    }
}

impl<S: Clone, L> Clone for RateLimit<S, L> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            limits: self.limits.clone(),
            resolver: self.resolver.clone(),
            wait: self.wait,
            _limit: PhantomData,
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
        let inner = self.take_ready();
        let limits = self.limits.clone();
        let wait = self.wait;
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
    let verdict = match wait {
        None => decider.check_request(limits_of, &parts).await,
        Some(bound) => {
            decider
                .check_request_waiting(limits_of, &parts, bound)
                .await
        }
    };
    let mut outcome = match verdict {
        Ok(outcome) => outcome,
        Err(rejection) => return Ok(grpc::refuse(&parts.headers, rejection)),
    };
    let debt = outcome.as_mut().and_then(Outcome::take_debt);
    let mut request = Request::from_parts(parts, body);
    let settles = limits_of.iter().any(|limit| limit.settle);
    settle::leave_usage(
        request.extensions_mut(),
        debt.as_deref().map(Box::as_ref),
        settles,
    );
    // An axum body is taken as it is; another (tonic's) is wrapped once.
    let response = inner.call(request).await?.map(Body::new);
    let response = match outcome {
        Some(outcome) => (outcome, response).into_response(),
        None => response,
    };
    Ok(settle::hold(response, debt))
}
