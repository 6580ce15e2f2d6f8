//! How a layer of limits made at run time chooses a request's limit.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use http::request::Parts;

use crate::limit::RuntimeLimit;

/// Chooses a request's limit: `None` lets it through unlimited, without rate-limit headers.
#[derive(Clone)]
pub(crate) enum Resolver {
    Sync(Arc<dyn Fn(&Parts) -> Option<RuntimeLimit> + Send + Sync>),
    /// Awaited within the check's timeout (`Decider::resolve`).
    Async(Arc<dyn Fn(&Parts) -> BoxFuture<'static, Option<RuntimeLimit>> + Send + Sync>),
}
