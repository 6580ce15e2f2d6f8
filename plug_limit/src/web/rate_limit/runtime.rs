//! [`RateLimitLayer<RuntimeLimit>`](RateLimitLayer): limits made at run time, fixed for a
//! route group or chosen per request, as tower middleware.

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::BoxError;
use axum::body::{Body, Bytes, HttpBody};
use axum::response::Response;
use futures_util::future::BoxFuture;
use http::Request;
use http::request::Parts;
use tower_service::Service;

use super::grpc;
use super::layer::RateLimitLayer;
use super::resolver::Resolver;
use super::service::{RateLimit, limited};
use crate::error::BuildError;
use crate::handle::PlugLimit;
use crate::limit::RuntimeLimit;

/// The layer of limits made at run time: one from configuration ([`runtime`](Self::runtime)),
/// or one chosen per request from its parts ([`resolve`](Self::resolve),
/// [`resolve_async`](Self::resolve_async)), e.g. by the plan of the API key it carries.
/// Without its own [scope](RuntimeLimit::scope), a limit counts per matched route.
///
/// # Example
///
/// Per-plan limits keyed by API key, anonymous clients by IP. Only a key the accounts know
/// gets a plan keyed by it: keyed as sent, any new `x-api-key` would be a fresh budget.
///
/// ```
/// use std::collections::HashMap;
/// use axum::{routing::get, Router};
/// use plug_limit::{key, PlugLimit, RateLimitLayer, RuntimeLimit};
///
/// # fn main() -> Result<(), plug_limit::BuildError> {
/// let by_key = key::header("x-api-key");
/// let pro = RuntimeLimit::new("token_bucket", [1000, 60, 100])?.key(by_key);
/// let free = RuntimeLimit::new("token_bucket", [60, 60, 10])?.key(by_key);
/// // In an app, a cache of the accounts table.
/// let accounts = HashMap::from([("key-1", pro), ("key-2", free)]);
/// let anonymous = RuntimeLimit::new("fixed_window", [10, 60])?; // per client IP
/// let layer = RateLimitLayer::resolve(PlugLimit::memory(), move |parts| {
///     let api_key = parts.headers.get("x-api-key").and_then(|v| v.to_str().ok());
///     let known = api_key.and_then(|k| accounts.get(k));
///     Some(known.unwrap_or(&anonymous).clone())
/// });
/// let app: Router = Router::new().route("/api", get(|| async { "ok" })).route_layer(layer);
/// # let _ = app;
/// # Ok(())
/// # }
/// ```
impl RateLimitLayer<RuntimeLimit> {
    /// A layer checking `limit` with `limits` on every request: a limit read from a
    /// configuration file, say.
    ///
    /// # Errors
    ///
    /// A limiter `limits` does not know (field `limiter`, with the nearest registered name);
    /// a cost, a `count_if` or a `settle` for a custom script, which takes none (fields
    /// `cost`, `count_if`, `settle`); options a built-in registered under a name of its own
    /// would refuse (field `opts`, in its script's words). A bad file fails at start-up, not
    /// on every request.
    ///
    /// # Example
    ///
    /// ```
    /// use axum::{routing::get, Router};
    /// use plug_limit::{PlugLimit, RateLimitLayer, RuntimeLimit};
    ///
    /// # fn main() -> Result<(), plug_limit::BuildError> {
    /// let limits = PlugLimit::memory();
    /// let search: RuntimeLimit = serde_json::from_str(
    ///     r#"{ "limiter": "token_bucket", "opts": [20, 600, 5] }"#,
    /// ).expect("a limit");
    /// let layer = RateLimitLayer::runtime(limits.clone(), search)?;
    /// let app: Router = Router::new().route("/search", get(|| async { "ok" })).route_layer(layer);
    ///
    /// let unknown = RuntimeLimit::new("tokn_bucket", [20, 600, 5])?;
    /// let refused = RateLimitLayer::runtime(limits, unknown).unwrap_err();
    /// assert_eq!(
    ///     refused.to_string(),
    ///     "invalid `limiter`: `tokn_bucket` is not registered with this PlugLimit; did you mean `token_bucket`?"
    /// );
    /// # let _ = app;
    /// # Ok(())
    /// # }
    /// ```
    pub fn runtime(limits: PlugLimit, limit: RuntimeLimit) -> Result<Self, BuildError> {
        limits.decider().admits(limit.as_ref())?;
        Ok(Self::resolve(limits, move |_| Some(limit.clone())))
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
        Self::with(limits, Some(Resolver::Sync(Arc::new(resolver))))
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
    /// [`FailurePolicy`](crate::FailurePolicy) (`Open` and `Memory` pass it without headers:
    /// with no limit chosen there is nothing for memory to decide; `Closed` and `LocalShare`
    /// answer `503`), logged as [`Error::Timeout`](crate::Error::Timeout).
    ///
    /// # Example
    ///
    /// ```
    /// use std::collections::HashMap;
    /// use std::sync::Arc;
    /// use axum::{routing::get, Router};
    /// use plug_limit::{key, PlugLimit, RateLimitLayer, RuntimeLimit};
    /// use tokio::sync::RwLock;
    ///
    /// # fn main() -> Result<(), plug_limit::BuildError> {
    /// // In an app, a cache the accounts service refreshes.
    /// let plans: Arc<RwLock<HashMap<String, RuntimeLimit>>> = Arc::default();
    /// let anonymous = RuntimeLimit::new("fixed_window", [10, 60])?;
    /// let layer = RateLimitLayer::resolve_async(PlugLimit::memory(), move |parts| {
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
        Self::with(limits, Some(Resolver::Async(Arc::new(boxed))))
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for RateLimit<S, RuntimeLimit>
where
    S: Service<Request<ReqBody>, Response = http::Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    ReqBody: Send + 'static,
    ResBody: HttpBody<Data = Bytes> + Send + 'static,
    ResBody::Error: Into<BoxError>,
{
    type Response = Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.get_mut().poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let mut inner = self.take_ready();
        let (parts, body) = request.into_parts();
        let limits = self.limits.clone();
        let wait = self.wait;
        let limit = match &self.resolver {
            Some(Resolver::Sync(resolver)) => {
                let limit = resolver(&parts);
                let request = Request::from_parts(parts, body);
                return Box::pin(async move {
                    match limit {
                        Some(limit) => {
                            limited(&limits, wait, &[limit.as_ref()], request, inner).await
                        }
                        None => unlimited(inner.call(request).await),
                    }
                });
            }
            Some(Resolver::Async(resolver)) => resolver(&parts),
            // Every constructor of a layer of run-time limits sets its resolver.
            None => {
                let response = inner.call(Request::from_parts(parts, body));
                return Box::pin(async move { unlimited(response.await) });
            }
        };
        let request = Request::from_parts(parts, body);
        Box::pin(async move {
            let decider = limits.decider();
            if !decider.is_enabled() {
                return unlimited(inner.call(request).await);
            }
            match decider.within_timeout(limit).await {
                Ok(Some(limit)) => limited(&limits, wait, &[limit.as_ref()], request, inner).await,
                Ok(None) | Err(Ok(_)) => unlimited(inner.call(request).await),
                Err(Err(rejection)) => Ok(grpc::refuse(request.headers(), rejection)),
            }
        })
    }
}

/// The inner service's answer to a request no limit checked, its body as axum's.
fn unlimited<B, E>(response: Result<http::Response<B>, E>) -> Result<Response, E>
where
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    response.map(|response| response.map(Body::new))
}
