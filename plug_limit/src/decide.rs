//! Deciding one request: key, scope, evaluation, and the failure policy.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::MatchedPath;
use http::request::Parts;

use crate::key::Key;
use crate::plug_limit::LimitRef;
use crate::rejection::RateLimitRejection;
use crate::{Error, FailurePolicy, LogLevel, Outcome, PlugLimit};

impl PlugLimit {
    /// Decides one request: `Ok(Some(outcome))` to allow it with headers, `Ok(None)` to let it
    /// through without (disabled, or failed open), `Err` to refuse it.
    pub(crate) async fn decide(
        &self,
        limit: LimitRef,
        parts: &Parts,
    ) -> Result<Option<Outcome>, RateLimitRejection> {
        if !self.is_enabled() {
            return Ok(None);
        }
        let Ok(entry) = self.entry(limit.limiter) else {
            let inner = self.inner();
            let error = Error::UnknownLimiter(limit.limiter.to_owned());
            return fail(limit.limiter, inner.log_level, inner.on_failure, error);
        };
        let fail = |error| fail(&entry.name, entry.log_level, entry.on_failure, error);
        let extractor = limit.key.unwrap_or(&*entry.key);
        let key = match extractor.extract(parts) {
            Ok(key) => key,
            Err(error) => return fail(error.into()),
        };
        // Scoped to the matched route by default, so two routes never share a budget by
        // accident; `*` only when the router matched nothing (a fallback).
        let scope = limit
            .scope
            .or_else(|| {
                parts
                    .extensions
                    .get::<MatchedPath>()
                    .map(MatchedPath::as_str)
            })
            .unwrap_or("*");
        let namespaced = Keys::namespaced(&key, &self.inner().prefix, &entry.name, scope);
        let keys = namespaced.as_slice();
        let denials = &self.inner().denials;
        // `keys[0]` names the client for every built-in; a custom script's other keys only
        // refine it.
        let cached = entry.deny_cache.then(|| (keys[0].as_str(), Instant::now()));
        if let Some((key, now)) = cached
            && let Some(outcome) = denials.get(key, limit.cost, now)
        {
            tracing::trace!(target: "plug_limit", limiter = %entry.name, key, "request denied from the local deny cache");
            return Err(RateLimitRejection::denied(
                outcome,
                Arc::clone(&entry.responder),
            ));
        }
        match self.eval(entry, keys, limit.opts, limit.cost).await {
            Ok(outcome) if outcome.is_allowed() => Ok(Some(outcome)),
            Ok(outcome) => {
                tracing::debug!(target: "plug_limit", limiter = %entry.name, key = %keys.join(" "), "request denied");
                if let Some((key, now)) = cached {
                    denials.insert(key, limit.cost, &outcome, now);
                }
                Err(RateLimitRejection::denied(
                    outcome,
                    Arc::clone(&entry.responder),
                ))
            }
            Err(error) => fail(error),
        }
    }
}

/// A request's namespaced keys: built-in limiters and most custom ones take one, kept without a
/// `Vec` around it.
enum Keys {
    One(String),
    Many(Vec<String>),
}

impl Keys {
    /// `{prefix}:{limiter}:{scope}:{part}` for every part of `key`.
    fn namespaced(key: &Key, prefix: &str, limiter: &str, scope: &str) -> Self {
        let namespace = |part: &str| {
            let mut full =
                String::with_capacity(prefix.len() + limiter.len() + scope.len() + part.len() + 3);
            for piece in [prefix, ":", limiter, ":", scope, ":", part] {
                full.push_str(piece);
            }
            full
        };
        let mut parts = key.iter();
        let first = namespace(parts.next().unwrap_or_default());
        match parts.next() {
            None => Self::One(first),
            Some(second) => {
                let mut all = vec![first, namespace(second)];
                all.extend(parts.map(namespace));
                Self::Many(all)
            }
        }
    }

    fn as_slice(&self) -> &[String] {
        match self {
            Self::One(key) => std::slice::from_ref(key),
            Self::Many(keys) => keys,
        }
    }
}

/// Logs a check that could not decide and applies the failure policy. A failure the memory
/// backend cannot stand in for (no key, unknown limiter) passes the request, as `Open` does.
fn fail(
    limiter: &str,
    level: LogLevel,
    policy: FailurePolicy,
    error: Error,
) -> Result<Option<Outcome>, RateLimitRejection> {
    level.log(limiter, &error);
    match policy {
        FailurePolicy::Open | FailurePolicy::Memory => Ok(None),
        FailurePolicy::Closed => Err(RateLimitRejection::Unavailable(error)),
    }
}
