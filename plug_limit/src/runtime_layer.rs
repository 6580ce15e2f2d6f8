//! [`RuntimeLimitLayer`]: limits made at run time, fixed for a route group or chosen per
//! request, as tower middleware.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use futures_util::future::BoxFuture;
use http::Request;
use http::request::Parts;
use tower_layer::Layer;
use tower_service::Service;

use crate::handle::PlugLimit;
use crate::layer::limited;
use crate::limit::RuntimeLimit;
use crate::resolve::bounded;

/// Chooses a request's limit: `None` lets it through unlimited, without rate-limit headers.
#[derive(Clone)]
enum Resolver {
    Sync(Arc<dyn Fn(&Parts) -> Option<RuntimeLimit> + Send + Sync>),
    /// Awaited within the check's timeout (see `resolve::bounded`).
    Async(Arc<dyn Fn(&Parts) -> BoxFuture<'static, Option<RuntimeLimit>> + Send + Sync>),
}

/// Applies a [`RuntimeLimit`] to every request of the services it wraps: one limit from
/// configuration ([`new`](Self::new)), or one chosen per request from its parts
/// ([`resolve`](Self::resolve)), e.g. by the plan of the API key it carries.
///
/// The check is [`RateLimitLayer`](crate::RateLimitLayer)'s: a denied request gets the
/// responder's response and never reaches the inner service; an allowed one gets the
/// rate-limit headers on its response. Add it with `Router::route_layer` so the matched route
/// scopes the budget, unless the limit names its own [scope](RuntimeLimit::scope).
///
/// # Example
///
/// Per-plan limits keyed by API key, anonymous clients by IP. Only a key the accounts know
/// gets a plan keyed by it: keyed as sent, any new `x-api-key` would be a fresh budget.
///
/// ```
/// use std::collections::HashMap;
/// use axum::{routing::get, Router};
/// use plug_limit::{key, PlugLimit, RuntimeLimit, RuntimeLimitLayer};
///
/// # fn main() -> Result<(), plug_limit::BuildError> {
/// let by_key = key::header("x-api-key");
/// let pro = RuntimeLimit::new("token_bucket", [1000, 60, 100])?.key(by_key);
/// let free = RuntimeLimit::new("token_bucket", [60, 60, 10])?.key(by_key);
/// // In an app, a cache of the accounts table.
/// let accounts = HashMap::from([("key-1", pro), ("key-2", free)]);
/// let anonymous = RuntimeLimit::new("fixed_window", [10, 60])?; // per client IP
/// let layer = RuntimeLimitLayer::resolve(PlugLimit::memory(), move |parts| {
///     let api_key = parts.headers.get("x-api-key").and_then(|v| v.to_str().ok());
///     let known = api_key.and_then(|k| accounts.get(k));
///     Some(known.unwrap_or(&anonymous).clone())
/// });
/// let app: Router = Router::new().route("/api", get(|| async { "ok" })).route_layer(layer);
/// # let _ = app;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct RuntimeLimitLayer {
    limits: PlugLimit,
    resolver: Resolver,
}

impl RuntimeLimitLayer {
    /// A layer checking `limit` with `limits` on every request.
    #[must_use]
    pub fn new(limits: PlugLimit, limit: RuntimeLimit) -> Self {
        Self::resolve(limits, move |_| Some(limit.clone()))
    }

    /// A layer checking, on every request, the limit `resolver` chooses from the request's
    /// parts; `None` lets the request through unlimited, and untouched by any limiter's
    /// [`Rules`](crate::Rules) (no limiter runs). The resolver runs before the check, on every
    /// request: keep it to lookups in memory. Key a limit by a client's claim (an API key)
    /// only once the claim is checked, or each new claim is a fresh budget.
    #[must_use]
    pub fn resolve<F>(limits: PlugLimit, resolver: F) -> Self
    where
        F: Fn(&Parts) -> Option<RuntimeLimit> + Send + Sync + 'static,
    {
        Self {
            limits,
            resolver: Resolver::Sync(Arc::new(resolver)),
        }
    }

    /// A layer checking, on every request, the limit an asynchronous `resolver` chooses: a
    /// lookup in a cache or a database. `resolver` gets the request's parts and returns a
    /// future that owns what it needs of them (copy the API key out before the `async move`
    /// block); `None` lets the request through unlimited, as in [`resolve`](Self::resolve).
    ///
    /// The request waits for the future, on every request: make it a cache lookup, not a
    /// query per request. It is bounded by the [`PlugLimit`]'s
    /// [timeout](crate::Builder::timeout), apart from the check's own: a resolver slower than
    /// that is dropped and the request follows the handle's
    /// [`FailurePolicy`](crate::FailurePolicy) (`Open` passes it without headers, `Closed`
    /// answers `503`), logged as [`Error::Timeout`](crate::Error::Timeout).
    ///
    /// # Example
    ///
    /// ```
    /// use std::collections::HashMap;
    /// use std::sync::Arc;
    /// use axum::{routing::get, Router};
    /// use plug_limit::{key, PlugLimit, RuntimeLimit, RuntimeLimitLayer};
    /// use tokio::sync::RwLock;
    ///
    /// # fn main() -> Result<(), plug_limit::BuildError> {
    /// // In an app, a cache the accounts service refreshes.
    /// let plans: Arc<RwLock<HashMap<String, RuntimeLimit>>> = Arc::default();
    /// let anonymous = RuntimeLimit::new("fixed_window", [10, 60])?;
    /// let layer = RuntimeLimitLayer::resolve_async(PlugLimit::memory(), move |parts| {
    ///     let api_key = parts.headers.get("x-api-key").and_then(|v| v.to_str().ok());
    ///     let api_key = api_key.map(str::to_owned);
    ///     let (plans, anonymous) = (Arc::clone(&plans), anonymous.clone());
    ///     async move {
    ///         let plans = plans.read().await;
    ///         let known = api_key.and_then(|k| plans.get(&k).cloned());
    ///         Some(known.unwrap_or(anonymous))
    ///     }
    /// });
    /// let app: Router = Router::new().route("/api", get(|| async { "ok" })).route_layer(layer);
    /// # let _ = (app, key::header("x-api-key"));
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn resolve_async<F, Fut>(limits: PlugLimit, resolver: F) -> Self
    where
        F: Fn(&Parts) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Option<RuntimeLimit>> + Send + 'static,
    {
        let boxed = move |parts: &Parts| -> BoxFuture<'static, Option<RuntimeLimit>> {
            Box::pin(resolver(parts))
        };
        Self {
            limits,
            resolver: Resolver::Async(Arc::new(boxed)),
        }
    }
}

impl fmt::Debug for RuntimeLimitLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RuntimeLimitLayer")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl<S> Layer<S> for RuntimeLimitLayer {
    type Service = RuntimeRateLimit<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RuntimeRateLimit {
            inner,
            layer: self.clone(),
        }
    }
}

/// The middleware built by [`RuntimeLimitLayer`].
#[derive(Clone)]
pub struct RuntimeRateLimit<S> {
    inner: S,
    layer: RuntimeLimitLayer,
}

impl<S> RuntimeRateLimit<S> {
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

impl<S: fmt::Debug> fmt::Debug for RuntimeRateLimit<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RuntimeRateLimit")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<S> Service<Request<Body>> for RuntimeRateLimit<S>
where
    S: Service<Request<Body>, Response = Response> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        // As in `RateLimit`: the service polled ready serves this request.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let (parts, body) = request.into_parts();
        let limits = self.layer.limits.clone();
        let limit = match &self.layer.resolver {
            Resolver::Sync(resolver) => {
                let limit = resolver(&parts);
                let request = Request::from_parts(parts, body);
                return Box::pin(async move {
                    match limit {
                        Some(limit) => {
                            limited(&limits, &[limit.as_ref()], None, request, inner).await
                        }
                        None => inner.call(request).await,
                    }
                });
            }
            Resolver::Async(resolver) => resolver(&parts),
        };
        let request = Request::from_parts(parts, body);
        Box::pin(async move {
            let decider = limits.decider();
            if !decider.enabled.is_enabled() {
                return inner.call(request).await;
            }
            match bounded(decider, limit).await {
                Ok(Some(limit)) => limited(&limits, &[limit.as_ref()], None, request, inner).await,
                Ok(None) | Err(Ok(_)) => inner.call(request).await,
                Err(Err(rejection)) => Ok(rejection.into_response()),
            }
        })
    }
}
