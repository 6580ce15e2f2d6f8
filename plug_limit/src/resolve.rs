//! Limits resolved per request by the application's own lookup: [`ResolveLimit`] for the
//! extractor ([`RateLimited<Resolved<R>>`](Resolved)) and the bound every asynchronous
//! resolver runs under.

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;

use axum::extract::{FromRef, FromRequestParts};
use http::request::Parts;

use crate::config::FailurePolicy;
use crate::decide::Decider;
use crate::error::Error;
use crate::extract::RateLimited;
use crate::handle::PlugLimit;
use crate::limit::RuntimeLimit;
use crate::rejection::RateLimitRejection;

/// Chooses a request's limit from its parts and the router state `S`: a plan looked up by
/// API key in a cache the state holds, a user's tier, the client's IP budget otherwise.
/// `None` lets the request through unlimited, without rate-limit headers.
///
/// Checked by the extractor [`RateLimited<Resolved<R>>`](Resolved) and by
/// `#[rate_limit(resolver = R)]`. The resolver runs on every request before the check: make
/// it a lookup in memory or in a cache, not a database query per request. It is bounded by
/// the [`PlugLimit`]'s [timeout](crate::Builder::timeout): one slower than that fails the check
/// by the handle's [`FailurePolicy`] (`Open`: the request passes without headers; `Closed`:
/// `503`), as [`Error::Timeout`]. Key a limit by a client's claim (an API key) only once the
/// claim is checked, or each new claim is a fresh budget.
///
/// # Example
///
/// ```
/// use std::collections::HashMap;
/// use std::sync::Arc;
/// use axum::{extract::FromRef, http::request::Parts, routing::get, Router};
/// use plug_limit::{key, PlugLimit, RateLimited, ResolveLimit, Resolved, RuntimeLimit};
///
/// #[derive(Clone, FromRef)]
/// struct AppState {
///     limits: PlugLimit,
///     plans: Arc<HashMap<String, RuntimeLimit>>, // API key -> plan, e.g. a cache
///     anonymous: RuntimeLimit,
/// }
///
/// struct PlanLimits;
///
/// impl ResolveLimit<AppState> for PlanLimits {
///     async fn resolve(parts: &mut Parts, state: &AppState) -> Option<RuntimeLimit> {
///         let api_key = parts.headers.get("x-api-key").and_then(|v| v.to_str().ok());
///         let plan = api_key.and_then(|k| state.plans.get(k));
///         Some(plan.unwrap_or(&state.anonymous).clone())
///     }
/// }
///
/// async fn search(limited: RateLimited<Resolved<PlanLimits>>) -> (RateLimited<Resolved<PlanLimits>>, &'static str) {
///     (limited, "results")
/// }
///
/// # fn main() -> Result<(), plug_limit::BuildError> {
/// let pro = RuntimeLimit::new("token_bucket", [1000, 60, 100])?.key(key::header("x-api-key"));
/// let state = AppState {
///     limits: PlugLimit::memory(),
///     plans: Arc::new(HashMap::from([("key-1".to_owned(), pro)])),
///     anonymous: RuntimeLimit::new("fixed_window", [10, 60])?,
/// };
/// let app: Router = Router::new().route("/search", get(search)).with_state(state);
/// # let _ = app;
/// # Ok(())
/// # }
/// ```
pub trait ResolveLimit<S>: Send + Sync + 'static {
    /// The limit of the request of `parts`; `None` for none. `parts` is mutable so that the
    /// resolver can run other extractors (a session, a user) on it.
    fn resolve(parts: &mut Parts, state: &S) -> impl Future<Output = Option<RuntimeLimit>> + Send;
}

/// The limit a [`ResolveLimit`] `R` chooses per request, for [`RateLimited`]:
/// `RateLimited<Resolved<R>>` checks it before the handler runs, with the same headers,
/// rejections and [`outcome`](RateLimited::outcome) as a limit type's.
pub struct Resolved<R> {
    _resolver: PhantomData<fn() -> R>,
}

impl<R> fmt::Debug for Resolved<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Resolved")
            .field("resolver", &std::any::type_name::<R>())
            .finish()
    }
}

impl<S, R> FromRequestParts<S> for RateLimited<Resolved<R>>
where
    PlugLimit: FromRef<S>,
    S: Send + Sync,
    R: ResolveLimit<S>,
{
    type Rejection = RateLimitRejection;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let limits = PlugLimit::from_ref(state);
        let decider = limits.decider();
        // Without a limit, a handler reporting `Usage` still finds one (that goes nowhere).
        if !decider.enabled.is_enabled() {
            return Ok(Self::from_outcome(None, parts, true));
        }
        let limit = match bounded(decider, R::resolve(parts, state)).await {
            Ok(Some(limit)) => limit,
            Ok(None) => return Ok(Self::from_outcome(None, parts, true)),
            Err(decided) => {
                return decided.map(|outcome| Self::from_outcome(outcome, parts, true));
            }
        };
        let limit = limit.as_ref();
        let outcome = decider
            .decide_all(std::slice::from_ref(&limit), parts, None)
            .await?;
        Ok(Self::from_outcome(outcome, parts, limit.settle))
    }
}

/// What a resolver that could not answer in time comes to: pass without headers, or refuse.
pub(crate) type Unresolved = Result<Option<crate::outcome::Outcome>, RateLimitRejection>;

/// Runs a resolver within the check's timeout. One that overruns it fails like a check that
/// could not decide, by the handle's failure policy (no limiter is known yet to have one of
/// its own): a resolver waiting on a slow database must not hold every request with it.
pub(crate) async fn bounded<F>(
    decider: &Decider,
    resolver: F,
) -> Result<Option<RuntimeLimit>, Unresolved>
where
    F: Future<Output = Option<RuntimeLimit>>,
{
    let Ok(limit) = tokio::time::timeout(decider.timeout, resolver).await else {
        let error = Error::Timeout(decider.timeout);
        decider.failures.log(decider.log_level, "resolver", &error);
        return Err(match decider.on_failure {
            FailurePolicy::Open | FailurePolicy::Memory => Ok(None),
            FailurePolicy::Closed => Err(RateLimitRejection::Unavailable(error)),
        });
    };
    Ok(limit)
}
