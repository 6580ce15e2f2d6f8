//! Whether the Redis behind a backend may evict the limiters' counters: its
//! `maxmemory-policy`, read once, in the background, when the backend first connects.
//!
//! A Redis short of memory under an `allkeys-*` or `volatile-*` policy deletes keys to make
//! room, and a counter deleted is a limit forgotten: measured with `allkeys-lru` and 2 MB,
//! 1,574 requests were admitted against a limit of 200. Every key the library writes has a TTL,
//! so the `volatile-*` policies may evict them too. Only `noeviction` keeps them: Redis then
//! refuses a write instead, the check fails, and its failure policy decides.
//!
//! The read costs a check nothing: it is sent once, after a connection is made (never per
//! request), in a task of its own, within the backend's timeout, and its answer is only logged
//! and kept for [`PlugLimit::redis_eviction`](crate::PlugLimit::redis_eviction).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use deadpool_redis::redis::{self, RedisError, Value};

use super::multiplexed::{Multiplexed, query};
use crate::telemetry::{self, BreakerLabel};

/// What a Redis backend knows of its server's `maxmemory-policy`, which decides whether Redis
/// may delete counters under memory pressure: see
/// [`PlugLimit::redis_eviction`](crate::PlugLimit::redis_eviction).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum EvictionPolicy {
    /// Not read yet: the backend has not connected, or the read is under way.
    Unknown,
    /// `noeviction`: Redis refuses a write rather than evict a key, so no counter is lost.
    NoEviction,
    /// A policy that may evict counters under memory pressure, as Redis names it
    /// (`allkeys-lru`, `volatile-ttl`, ...): an evicted counter admits requests past its limit.
    Evicts(String),
    /// The server refused `CONFIG GET maxmemory-policy` (an ACL user without `+config`, a
    /// managed Redis that renames or disables `CONFIG`), or named no policy.
    Unreadable,
}

/// The policy of one backend's Redis, read once.
pub(crate) struct Eviction {
    /// Set by the connection that sends the read; cleared when the read heard nothing, so a
    /// later connection tries again.
    started: AtomicBool,
    policy: OnceLock<EvictionPolicy>,
    /// The backend's `pool` label, for the log and the gauge.
    pool: BreakerLabel,
    /// The backend's timeout, which bounds the read.
    timeout: Duration,
}

impl Eviction {
    pub(crate) fn new(pool: BreakerLabel, timeout: Duration) -> Arc<Self> {
        Arc::new(Self {
            started: AtomicBool::new(false),
            policy: OnceLock::new(),
            pool,
            timeout,
        })
    }

    /// The policy as far as it is known.
    pub(crate) fn policy(&self) -> EvictionPolicy {
        self.policy
            .get()
            .cloned()
            .unwrap_or(EvictionPolicy::Unknown)
    }

    /// A connection was just made: unless the policy is known or being read, it is read on
    /// `conn` in a task of its own, so no check waits for it. Outside a Tokio runtime nothing
    /// is read.
    pub(crate) fn connected(self: &Arc<Self>, conn: &Multiplexed) {
        if self.policy.get().is_some() || self.started.swap(true, Ordering::AcqRel) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.started.store(false, Ordering::Release);
            return;
        };
        let eviction = Arc::clone(self);
        let mut conn = conn.clone();
        runtime.spawn(async move { eviction.read(&mut conn).await });
    }

    /// Sends `CONFIG GET maxmemory-policy` on `conn`, then keeps, logs and records the answer.
    async fn read(&self, conn: &mut Multiplexed) {
        let (policy, why) = match tokio::time::timeout(self.timeout, ask(conn)).await {
            Ok(Ok(policy)) => (policy, "Redis named no policy".to_owned()),
            Ok(Err(error)) if answered(&error) => (EvictionPolicy::Unreadable, error.to_string()),
            // Nothing heard (a connection lost, a timeout): the next connection asks again.
            Ok(Err(_)) | Err(_) => {
                self.started.store(false, Ordering::Release);
                return;
            }
        };
        let pool = self.pool.pool_name();
        match &policy {
            EvictionPolicy::Evicts(name) => {
                tracing::warn!(
                    target: "plug_limit",
                    pool,
                    policy = %name,
                    "Redis's maxmemory-policy is `{name}`: under memory pressure Redis may evict \
                     rate-limit counters, and an evicted counter admits requests past its limit; \
                     set `maxmemory-policy noeviction`, or give the limits a Redis of their own \
                     with enough memory"
                );
                telemetry::redis_evicts(&self.pool, true);
            }
            EvictionPolicy::NoEviction => telemetry::redis_evicts(&self.pool, false),
            EvictionPolicy::Unreadable | EvictionPolicy::Unknown => {
                // `INFO`, not a warning: the policy may well be `noeviction`, and an ACL that
                // keeps `CONFIG` from the application's user is good practice.
                tracing::info!(
                    target: "plug_limit",
                    pool,
                    why = %why,
                    "could not read Redis's maxmemory-policy: if it is not `noeviction`, Redis \
                     may evict rate-limit counters under memory pressure, and an evicted counter \
                     admits requests past its limit"
                );
            }
        }
        // Only this task sets it: `started` keeps any other read from being sent.
        let _ = self.policy.set(policy);
    }
}

/// Asks the server on `conn` for its policy; on Redis Cluster, every master, since each keeps
/// its own counters: the policy of a master that evicts is the answer, for any one evicting
/// master loses limits (one node picked at random would hide it two times in three on a
/// cluster of three).
async fn ask(conn: &mut Multiplexed) -> Result<EvictionPolicy, RedisError> {
    let mut config = redis::cmd("CONFIG");
    config.arg("GET").arg("maxmemory-policy");
    #[cfg(feature = "cluster")]
    if let Multiplexed::Cluster(cluster) = conn {
        use deadpool_redis::redis::cluster_routing::{MultipleNodeRoutingInfo, RoutingInfo};

        let all = RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllMasters, None));
        // One reply per master, under its address.
        let replies: Vec<(String, Value)> =
            redis::from_redis_value(cluster.route_command(config, all).await?)?;
        return Ok(worst(
            replies.into_iter().map(|(_, reply)| policy_of(reply)),
        ));
    }
    Ok(policy_of(query(&config, conn).await?))
}

/// The policy of several servers that says the most of the risk: one that evicts, else one
/// that could not be read, else `noeviction` (and unreadable when there are none).
#[cfg(feature = "cluster")]
fn worst(policies: impl IntoIterator<Item = EvictionPolicy>) -> EvictionPolicy {
    let rank = |policy: &EvictionPolicy| match policy {
        EvictionPolicy::NoEviction => 0,
        EvictionPolicy::Unknown | EvictionPolicy::Unreadable => 1,
        EvictionPolicy::Evicts(_) => 2,
    };
    policies
        .into_iter()
        .max_by_key(rank)
        .unwrap_or(EvictionPolicy::Unreadable)
}

/// Whether the server answered `error` (a refusal: `NOPERM`, an unknown command), as opposed to
/// a connection that carried no answer.
fn answered(error: &RedisError) -> bool {
    !(error.is_io_error()
        || error.is_connection_dropped()
        || error.is_connection_refusal()
        || error.is_timeout())
}

/// The policy `CONFIG GET maxmemory-policy` replied: a `[name, value]` array (RESP2) or map
/// (RESP3).
fn policy_of(reply: Value) -> EvictionPolicy {
    let mut pairs: HashMap<String, String> = redis::from_redis_value(reply).unwrap_or_default();
    match pairs.remove("maxmemory-policy") {
        Some(name) if name == "noeviction" => EvictionPolicy::NoEviction,
        Some(name) if !name.is_empty() => EvictionPolicy::Evicts(name),
        _ => EvictionPolicy::Unreadable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(text: &str) -> Value {
        Value::BulkString(text.as_bytes().to_vec())
    }

    #[test]
    fn every_policy_but_noeviction_evicts() {
        let reply = |name: &str| Value::Array(vec![bulk("maxmemory-policy"), bulk(name)]);
        assert_eq!(policy_of(reply("noeviction")), EvictionPolicy::NoEviction);
        for name in [
            "allkeys-lru",
            "volatile-ttl",
            "allkeys-random",
            "volatile-lfu",
        ] {
            assert_eq!(
                policy_of(reply(name)),
                EvictionPolicy::Evicts(name.to_owned())
            );
        }
        let map = Value::Map(vec![(bulk("maxmemory-policy"), bulk("volatile-lru"))]);
        assert_eq!(
            policy_of(map),
            EvictionPolicy::Evicts("volatile-lru".to_owned())
        );
        // A server that hides the setting answers an empty list.
        assert_eq!(policy_of(Value::Array(vec![])), EvictionPolicy::Unreadable);
        assert_eq!(policy_of(Value::Nil), EvictionPolicy::Unreadable);
    }

    #[test]
    #[cfg(feature = "cluster")]
    fn of_several_masters_the_one_that_evicts_answers() {
        let evicts = || EvictionPolicy::Evicts("allkeys-lru".to_owned());
        let none = EvictionPolicy::NoEviction;
        assert_eq!(worst([none.clone(), evicts(), none.clone()]), evicts());
        assert_eq!(
            worst([EvictionPolicy::Unreadable, evicts(), none.clone()]),
            evicts()
        );
        assert_eq!(
            worst([none.clone(), EvictionPolicy::Unreadable]),
            EvictionPolicy::Unreadable
        );
        assert_eq!(worst([none.clone(), none.clone()]), none);
        assert_eq!(worst([]), EvictionPolicy::Unreadable);
    }
}
