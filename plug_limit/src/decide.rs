//! Deciding one request: key, scope, evaluation, and the failure policy.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::MatchedPath;
use http::request::Parts;

use crate::key::Key;
use crate::plug_limit::{Backend, Entry, LimitRef, eval_memory};
use crate::rejection::RateLimitRejection;
use crate::{Error, FailurePolicy, LogLevel, Outcome, PlugLimit};

/// What a check of one request comes to: `Ok(Some(outcome))` to allow it with headers,
/// `Ok(None)` to let it through without (disabled, or failed open), `Err` to refuse it.
pub(crate) type Decided = Result<Option<Outcome>, RateLimitRejection>;

/// A check as far as it gets without waiting: decided, or waiting on Redis.
enum Step<'a> {
    Done(Decided),
    Redis(Pin<Box<dyn Future<Output = Decided> + Send + 'a>>),
}

impl PlugLimit {
    /// Decides one request (see [`Decided`]).
    pub(crate) async fn decide(&self, limit: LimitRef, parts: &Parts) -> Decided {
        // Only a Redis call waits, and its state lives in its own box: the future of every
        // extractor and layer stays small, and memory checks and deny-cache answers (decided
        // in `start`) never build one.
        match self.start(limit, parts) {
            Step::Done(decided) => decided,
            Step::Redis(call) => call.await,
        }
    }

    /// Runs the check as far as it goes without waiting.
    fn start(&self, limit: LimitRef, parts: &Parts) -> Step<'_> {
        if !self.is_enabled() {
            return Step::Done(Ok(None));
        }
        let Ok(entry) = self.entry(limit.limiter) else {
            let inner = self.inner();
            let error = Error::UnknownLimiter(limit.limiter.to_owned());
            return Step::Done(fail(
                limit.limiter,
                inner.log_level,
                inner.on_failure,
                error,
            ));
        };
        let extractor = limit.key.unwrap_or(&*entry.key);
        let key = match extractor.extract(parts) {
            Ok(key) => key,
            Err(error) => return Step::Done(entry.fail(error.into())),
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
        let keys = Keys::namespaced(&key, &self.inner().prefix, &entry.name, scope);
        // `keys[0]` names the client for every built-in; a custom script's other keys only
        // refine it.
        let cached = entry.deny_cache.then(Instant::now);
        if let Some(now) = cached
            && let Some(outcome) = self.inner().denials.get(keys.first(), limit.cost, now)
        {
            tracing::trace!(target: "plug_limit", limiter = %entry.name, key = keys.first(), "request denied from the local deny cache");
            return Step::Done(Err(RateLimitRejection::denied(
                outcome,
                Arc::clone(&entry.responder),
            )));
        }
        match self.backend(entry) {
            Backend::Memory(memory) => {
                let result = eval_memory(memory, entry, keys.as_slice(), limit.opts, limit.cost);
                Step::Done(self.settle(entry, &keys, cached, limit.cost, result))
            }
            Backend::Redis(redis) => Step::Redis(Box::pin(async move {
                let result = self
                    .eval_on_redis(redis, entry, keys.as_slice(), limit.opts, limit.cost)
                    .await;
                self.settle(entry, &keys, cached, limit.cost, result)
            })),
        }
    }

    /// Turns an evaluation into the request's fate: allowed, denied (and remembered by the
    /// deny cache), or failed by the limiter's policy.
    fn settle(
        &self,
        entry: &Entry,
        keys: &Keys,
        cached: Option<Instant>,
        cost: u32,
        result: Result<Outcome, Error>,
    ) -> Decided {
        match result {
            Ok(outcome) if outcome.is_allowed() => Ok(Some(outcome)),
            Ok(outcome) => {
                tracing::debug!(target: "plug_limit", limiter = %entry.name, key = %keys.as_slice().join(" "), "request denied");
                if let Some(now) = cached {
                    self.inner()
                        .denials
                        .insert(keys.first(), cost, &outcome, now);
                }
                Err(RateLimitRejection::denied(
                    outcome,
                    Arc::clone(&entry.responder),
                ))
            }
            Err(error) => entry.fail(error),
        }
    }
}

impl Entry {
    /// Logs a check of this limiter that could not decide and applies its failure policy.
    fn fail(&self, error: Error) -> Decided {
        fail(&self.name, self.log_level, self.on_failure, error)
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

    /// The first key: the client's, for every built-in.
    fn first(&self) -> &str {
        match self {
            Self::One(key) => key,
            Self::Many(keys) => keys.first().map_or("", String::as_str),
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
fn fail(limiter: &str, level: LogLevel, policy: FailurePolicy, error: Error) -> Decided {
    level.log(limiter, &error);
    match policy {
        FailurePolicy::Open | FailurePolicy::Memory => Ok(None),
        FailurePolicy::Closed => Err(RateLimitRejection::Unavailable(error)),
    }
}
