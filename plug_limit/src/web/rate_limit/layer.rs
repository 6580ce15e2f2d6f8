//! [`RateLimitLayer`]: limits as tower middleware, for a whole router or route group; the
//! typed limit `L` here, limits made or chosen at run time in `runtime.rs`.

use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

use tower_layer::Layer;

use super::resolver::Resolver;
use super::service::RateLimit;
use crate::handle::PlugLimit;
use crate::limit::Limits;

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
    /// What chooses a request's limit, for a layer of [`RuntimeLimit`](crate::RuntimeLimit)s.
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
            if let Err(error) = limits.decider().knows(limit.limiter) {
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
        RateLimit::new(inner, self.limits.clone(), self.resolver.clone(), self.wait)
    }
}
